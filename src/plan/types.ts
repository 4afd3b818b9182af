// Plan data types: what a plan says (rules over names and roles, a default, skip and protect
// lists) and what resolving it against a tensor list returns.
import type { ErrorCode } from '../errors.js';
import type { FormatSpec, ResolvedOptions } from '../formats/types.js';
import type { FormatOptions } from '../options.js';
import type { Role, TensorRole } from './roles.js';

/** How one tensor is stored: a registry format and its options (the same fields quantize() takes). */
export type Scheme = FormatOptions;
export type SchemeOrKeep = Scheme | 'keep';

/**
 * Tensor classes a plan never quantizes, whatever its rules say (llama-quantize and MaxText
 * behave the same way). Remove a class from `protect` to let the rules decide.
 * - 'norm': norm weights and biases; 'router': MoE routers and their correction biases;
 *   'bias': biases of linear layers; '1d': every tensor with fewer than two dimensions;
 *   'embedding': token embeddings (tied ones included); 'position': position and token-type embeddings;
 *   'non_weight': names not ending in "weight" (llama-quantize's rule: Mamba-1's 2-D ssm_a), which
 *   only the GGUF presets protect (Hugging Face's fused experts, `experts.gate_up_proj`, are weights).
 */
export type ProtectClass = 'norm' | 'router' | 'bias' | '1d' | 'embedding' | 'position' | 'non_weight';
export const PROTECT_CLASSES: readonly ProtectClass[] = ['norm', 'router', 'bias', '1d', 'embedding', 'position', 'non_weight'];
export const DEFAULT_PROTECT: readonly ProtectClass[] = ['norm', 'router', 'bias', '1d', 'embedding', 'position'];

/**
 * Which layers a rule applies to: explicit indices, llama.cpp's `use_more_bits` selection (first
 * eighth, last eighth, every third in between), `first_eighth` (layer < floor(n/8)),
 * `first_sixteenth` (layer < floor(n/16)) or `middle_three_quarters` (floor(n/8) <= layer <
 * floor(7n/8), IQ3_XS's FFN gate / up), with n the number of layers (largest layer index + 1, or
 * ResolveOptions.nLayers).
 */
export const LAYER_SELECTORS = ['use_more_bits', 'first_eighth', 'first_sixteenth', 'middle_three_quarters'] as const;
export type LayerSelector = number[] | (typeof LAYER_SELECTORS)[number];

export interface PlanRule {
  /**
   * Regular expression searched in the tensor name (unanchored, like String.search). A string of the
   * form "/source/flags" carries flags. All given conditions must hold.
   */
  match?: string;
  /**
   * With `fullmatch`, `match` must match a whole name instead (MaxText semantics): the tensor name,
   * or its module path (the name without a final ".weight"), with "/" accepted for "." as separator.
   */
  fullmatch?: boolean;
  role?: Role | Role[];
  /** Sub-kind(s) from detectRole: 'q', 'v', 'down', 'token', ... */
  kind?: string | string[];
  layers?: LayerSelector;
  /**
   * `layers` counts as llama-quantize does instead of naming blocks (src/plan/llama-counters.ts):
   * 'llama' its layer_info (attn_v-like tensors by their running count over their number, FFN
   * tensors by block with experts, else by running count, over the block count); 'llama-raw' the
   * running count always (ffn_down in the IQ1 / IQ2 ftypes). The GGUF presets' layer rules use it.
   */
  layerCount?: 'llama' | 'llama-raw';
  /**
   * Decided before llama-quantize's per-ftype policy, as its --tensor-type patterns are: a tensor
   * this rule matches does not advance the counters `layerCount` rules read.
   */
  override?: boolean;
  /** Only for models with exactly this many routed experts per layer (llama.cpp's n_expert == 8 tweaks). */
  nExperts?: number;
  /** Only for models whose query heads per KV head (n_gqa) is at least this. */
  minGqa?: number;
  /** Only for models with at least this many routed experts per layer (llama.cpp's n_expert >= 4 tweaks). */
  minExperts?: number;
  /**
   * Only when an importance matrix is given (true) or only when none is (false): llama-quantize
   * decides some tensors' types by whether it has one (ResolveOptions.importance).
   */
  importance?: boolean;
  /** Only for models of this llama.cpp size class ('70B': see ResolveOptions.modelType). */
  modelType?: string;
  scheme: SchemeOrKeep;
  /**
   * GGUF format to write when the scheme's block does not divide the rows, in place of llama.cpp's
   * usual fallback chain (output.weight of the IQ1 / IQ2 / IQ3_XXS ftypes: Q5_K, else Q8_0).
   */
  fallback?: string;
  /** No "rule matches nothing" warning (architecture-specific rules of presets). */
  optional?: boolean;
  /** Shown in `reason`. */
  note?: string;
}

export interface Plan {
  name?: string;
  description?: string;
  /** Scheme for every tensor no rule claims. */
  default: SchemeOrKeep;
  /** First matching rule wins. */
  rules: PlanRule[];
  /** Never quantized: exact tensor names, or "/regex/flags". */
  skip: string[];
  /** Defaults to every class (DEFAULT_PROTECT). */
  protect?: ProtectClass[];
  /** GGUF `general.file_type` (llama_ftype) for plans that write GGUF. */
  fileType?: number;
  /**
   * Formats that need an importance matrix in this plan though their quantizer works without one,
   * on every tensor but token_embd / output (llama-quantize's Q2_K in a Q2_K_S file).
   */
  requireImportance?: string[];
}

export interface TensorDesc {
  name: string;
  /** Row-major; the last dimension is the row length (GGUF ne[] reversed). */
  shape: readonly number[];
  /** safetensors ('F32', 'BF16', 'I64', ...), GGUF type names ('Q8_0') or 'f32' | 'f16' | 'bf16'. */
  dtype: string;
}

export interface PlannedTensor extends TensorRole {
  name: string;
  shape: number[];
  dtype: string;
  /** Tied token embedding of a model without an output tensor: rules for role 'output' apply to it. */
  tied?: boolean;
  rows: number;
  rowLength: number;
  params: number;
  /** Final decision (after any fallback). */
  scheme: SchemeOrKeep;
  /** Validated options of `scheme` (absent for 'keep' and for entries with an error). */
  options?: ResolvedOptions;
  /** Which part of the plan decided: 'skip ...', 'protected: norm', 'rule 2 (...)', 'default', ... */
  reason: string;
  /** Index of the deciding rule; -1 for the default; absent for skip/protect/dtype decisions. */
  rule?: number;
  fallback?: { from: Scheme; chain: string[]; why: string };
  /** Set when this tensor has an error problem; `scheme` is then what the plan asked for. */
  error?: string;
}

export type Severity = 'error' | 'warning' | 'info';

export interface PlanProblem {
  severity: Severity;
  code: ErrorCode;
  message: string;
  tensor?: string;
  rule?: number;
}

export interface ResolvedPlan {
  plan: Plan;
  tensors: PlannedTensor[];
  problems: PlanProblem[];
  /** No error problems. */
  ok: boolean;
  nLayers: number;
  /** Routed experts per layer (0 for dense models). */
  nExperts: number;
  /** Query heads per KV head, from the q / k projection row counts (undefined when not found). */
  gqa?: number;
  /** The llama.cpp size class rules with `modelType` saw ('70B' or undefined). */
  modelType?: string;
  fileType?: number;
}

export interface ResolveOptions {
  /** Errors instead of fallbacks when a format's block does not divide a row. */
  strict?: boolean;
  /** Number of transformer blocks (default: largest layer index + 1). */
  nLayers?: number;
  /**
   * The block count that layer selectors divide for FFN tensors (ffn, expert, shared_expert roles),
   * when it differs from nLayers: llama-quantize takes the model's block count before
   * --prune-layers for those (hparams.n_layer), the attn_v count after it for attn_v.
   */
  ffnLayers?: number;
  /** Routed experts per layer (default: inferred from expert indices or fused 3-D expert tensors). */
  nExperts?: number;
  /** Query heads per KV head (default: q_proj rows / k_proj rows of the first layer having both). */
  gqa?: number;
  /** An importance matrix will be given (rules with `importance` depend on it; default false). */
  importance?: boolean;
  /**
   * llama.cpp's size class of the model, for rules with `modelType` (llama-quantize gives the
   * attn_v of 70B models more bits); null: none. Default: '70B' for 80 layers with grouped-query
   * attention (Llama 2/3 70B, Qwen2 72B), else none. llamaHparams reads it from GGUF keys, as
   * each of llama.cpp's loaders decides it.
   */
  modelType?: string | null;
  /** Format lookup (default: the registry's getFormat). */
  getFormat?: (name: string) => FormatSpec;
}
