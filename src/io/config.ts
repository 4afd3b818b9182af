// config.json beside a Hugging Face checkpoint: the architecture and the hyper-parameters a
// quantization plan or a forward pass needs, validated and named in camelCase. Everything else
// stays available in `raw`.
import { ErrorCodes, fail } from '../errors.js';
import { isJsonObject, parseJson } from './json.js';
import type { ByteSource } from './source.js';
import type { SafetensorsOptions } from './safetensors.js';
import { mlxQuantizationOf } from './mlx.js';

export interface ModelConfig {
  /** architectures[0], e.g. 'LlamaForCausalLM'. */
  architecture: string;
  modelType: string;
  hiddenSize: number;
  intermediateSize?: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  vocabSize: number;
  maxPositions?: number;
  rmsNormEps?: number;
  ropeTheta?: number;
  tieWordEmbeddings: boolean;
  hiddenAct?: string;
  bosTokenId?: number | number[];
  eosTokenId?: number | number[];
  torchDtype?: string;
  /** quantization_config as found (e.g. DeepSeek-V3's {quant_method: 'fp8', weight_block_size: [128, 128]}). */
  quantization?: Record<string, unknown>;
  /** quantization_config.weight_block_size: the block of FP8 weights' `_scale_inv` scales, [rows, cols]. */
  fp8Block?: [number, number];
  /** The parsed file (for a multimodal config: its text_config merged over the top level). */
  raw: Record<string, unknown>;
}

const MAX_CONFIG = 16 << 20;

/**
 * Defaults of a model type's transformers config class, for the keys its config.json leaves out:
 * the multimodal Gemma 3 checkpoints (4B and up) give their text_config only what differs from
 * Gemma3TextConfig. Gemma 2's soft-caps are not defaulted: a GGUF needs them stated.
 */
const CONFIG_DEFAULTS: Record<string, Record<string, unknown>> = {
  gemma3_text: {
    vocab_size: 262208, num_attention_heads: 8, num_key_value_heads: 4, head_dim: 256, rms_norm_eps: 1e-6, rope_theta: 1000000,
    rope_local_base_freq: 10000, max_position_embeddings: 131072, query_pre_attn_scalar: 256, sliding_window: 4096,
    hidden_activation: 'gelu_pytorch_tanh', tie_word_embeddings: true, attention_bias: false,
  },
  gemma2: { head_dim: 256, sliding_window: 4096, tie_word_embeddings: true },
  // GemmaConfig: head_dim is not hidden_size / heads (7B: 3072 / 16 heads of 256).
  gemma: { head_dim: 256, tie_word_embeddings: true, max_position_embeddings: 8192 },
};

/**
 * GPT-2's config names its sizes its own way (GPT2Config: n_embd, n_layer, n_head, n_positions,
 * n_inner = null for 4 * n_embd) and ties its head by PretrainedConfig's default: the common names.
 */
function gpt2Names(c: Record<string, unknown>): Record<string, unknown> {
  const n = (k: string) => (typeof c[k] === 'number' ? c[k] : undefined);
  const embd = n('n_embd');
  return {
    hidden_size: embd, num_hidden_layers: n('n_layer'), num_attention_heads: n('n_head'), max_position_embeddings: n('n_positions'),
    intermediate_size: n('n_inner') ?? (embd === undefined ? undefined : 4 * (embd as number)), tie_word_embeddings: true,
  };
}

/**
 * transformers 5 saves the rotary settings in one `rope_parameters` object: rope_theta, rope_type
 * with its scaling parameters, partial_rotary_factor, and for Gemma 3 one such object per layer
 * type (full_attention, sliding_attention). Configs written by earlier versions spell them as
 * top-level keys and `rope_scaling`: both readers (the converter and the forward) read those, so
 * the new spelling is put back into them here. Like llama.cpp's converter, rope_parameters wins
 * over top-level keys when a file has both.
 */
function legacyRopeKeys(c: Record<string, unknown>): Record<string, unknown> {
  const rp = c.rope_parameters;
  if (!isJsonObject(rp)) return c;
  const perType = isJsonObject(rp.full_attention) || isJsonObject(rp.sliding_attention);
  const global = perType ? (isJsonObject(rp.full_attention) ? rp.full_attention : {}) : rp;
  const out: Record<string, unknown> = { ...c };
  const { rope_theta: theta, partial_rotary_factor: partial, ...scaling } = global;
  if (theta !== undefined) out.rope_theta = theta;
  if (partial !== undefined) out.partial_rotary_factor = partial;
  if (scaling.original_max_position_embeddings !== undefined && out.original_max_position_embeddings === undefined) {
    out.original_max_position_embeddings = scaling.original_max_position_embeddings;
  }
  const type = scaling.rope_type ?? scaling.type;
  // "default" is no scaling (transformers writes it for every plain model).
  out.rope_scaling = type === undefined || type === 'default' ? null : scaling;
  if (perType && isJsonObject(rp.sliding_attention) && rp.sliding_attention.rope_theta !== undefined) out.rope_local_base_freq = rp.sliding_attention.rope_theta;
  return out;
}

/** A parsed config.json (or its merged text_config) with its model type's defaults under it. */
export function withConfigDefaults(config: Record<string, unknown>): Record<string, unknown> {
  const c = legacyRopeKeys(config);
  const defaults = typeof c.model_type === 'string' ? CONFIG_DEFAULTS[c.model_type] : undefined;
  if (c.model_type === 'gpt2') return { ...gpt2Names(c), ...c };
  return defaults ? { ...defaults, ...c } : c;
}

export async function readConfig(src: ByteSource): Promise<ModelConfig> {
  const file = src.name;
  const bad = (msg: string, d: { option?: string; value?: unknown; expected?: unknown } = {}): never =>
    fail(ErrorCodes.CONFIG, `[config] ${file}: ${msg}`, { file, ...d });
  const size = await src.size();
  if (size > MAX_CONFIG) bad(`${size} bytes is too large for a config.json`, { value: size, expected: `<= ${MAX_CONFIG}` });
  const bytes = await src.read(0, size);
  let json: unknown;
  try {
    json = parseJson(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (e) {
    return bad(`not a UTF-8 JSON file (${(e as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return bad('not a JSON object', { expected: 'object' });
  const top = json as Record<string, unknown>;
  const tc = top.text_config;
  const merged: Record<string, unknown> = typeof tc === 'object' && tc !== null && !Array.isArray(tc) && top.hidden_size === undefined
    ? Object.fromEntries([...Object.entries(top), ...Object.entries(tc)])
    : top;
  const c = withConfigDefaults(merged);

  const int = (key: string, required: boolean, min = 1): number | undefined => {
    const v = c[key];
    if (v === undefined || v === null) {
      if (required) bad(`missing "${key}"`, { option: key, expected: 'a positive integer' });
      return undefined;
    }
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) bad(`"${key}" must be an integer >= ${min} but is ${JSON.stringify(v)}`, { option: key, value: v, expected: `integer >= ${min}` });
    return v as number;
  };
  const num = (key: string): number | undefined => {
    const v = c[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) bad(`"${key}" must be a positive number but is ${JSON.stringify(v)}`, { option: key, value: v, expected: 'a positive number' });
    return v as number;
  };
  const str = (key: string): string | undefined => {
    const v = c[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string') bad(`"${key}" must be a string but is ${JSON.stringify(v)}`, { option: key, value: v, expected: 'string' });
    return v as string;
  };
  const ids = (key: string): number | number[] | undefined => {
    const v = c[key];
    if (v === undefined || v === null) return undefined;
    const ok = (x: unknown) => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
    if (!(ok(v) || (Array.isArray(v) && v.every(ok)))) bad(`"${key}" must be a token id or a list of them`, { option: key, value: v });
    return v as number | number[];
  };

  const archs = c.architectures;
  if (archs !== undefined && !(Array.isArray(archs) && archs.every((a) => typeof a === 'string'))) bad('"architectures" must be a list of strings', { option: 'architectures', value: archs });
  const modelType = str('model_type');
  const architecture = (archs as string[] | undefined)?.[0] ?? modelType;
  if (!architecture) bad('neither "architectures" nor "model_type" is given', { option: 'architectures' });
  const hiddenSize = int('hidden_size', true)!;
  const numHeads = int('num_attention_heads', true)!;
  const numKvHeads = int('num_key_value_heads', false) ?? numHeads;
  if (numHeads % numKvHeads !== 0) bad(`num_attention_heads ${numHeads} is not a multiple of num_key_value_heads ${numKvHeads}`, { option: 'num_key_value_heads', value: numKvHeads, expected: `a divisor of ${numHeads}` });
  const headDim = int('head_dim', false) ?? hiddenSize / numHeads;
  if (!Number.isInteger(headDim)) bad(`hidden_size ${hiddenSize} is not a multiple of num_attention_heads ${numHeads} and head_dim is not given`, { option: 'head_dim', value: headDim });
  const tie = c.tie_word_embeddings;
  if (tie !== undefined && typeof tie !== 'boolean') bad('"tie_word_embeddings" must be a boolean', { option: 'tie_word_embeddings', value: tie });
  const q = c.quantization_config;
  if (q !== undefined && (typeof q !== 'object' || q === null || Array.isArray(q))) bad('"quantization_config" must be an object', { option: 'quantization_config', value: q });
  const block = (q as Record<string, unknown> | undefined)?.weight_block_size;
  if (block !== undefined && !(Array.isArray(block) && block.length === 2 && block.every((b) => Number.isInteger(b) && b > 0))) {
    bad('"quantization_config.weight_block_size" must be two positive integers', { option: 'quantization_config.weight_block_size', value: block, expected: '[rows, cols], e.g. [128, 128]' });
  }

  return {
    architecture: architecture as string,
    modelType: modelType ?? (architecture as string),
    hiddenSize,
    intermediateSize: int('intermediate_size', false),
    numLayers: int('num_hidden_layers', true)!,
    numHeads,
    numKvHeads,
    headDim,
    vocabSize: int('vocab_size', true)!,
    maxPositions: int('max_position_embeddings', false),
    rmsNormEps: num('rms_norm_eps'),
    ropeTheta: num('rope_theta'),
    tieWordEmbeddings: (tie as boolean | undefined) ?? false,
    hiddenAct: str('hidden_act') ?? str('hidden_activation'),
    bosTokenId: ids('bos_token_id'),
    eosTokenId: ids('eos_token_id'),
    torchDtype: str('torch_dtype') ?? str('dtype'),
    quantization: q as Record<string, unknown> | undefined,
    ...(block ? { fp8Block: block as [number, number] } : {}),
    raw: c,
  };
}

/** The safetensors reader's options a config.json implies: the tile of its FP8 weights' scales. */
export function safetensorsOptions(c: ModelConfig | undefined): SafetensorsOptions {
  const o: SafetensorsOptions = c?.fp8Block ? { fp8BlockSize: c.fp8Block } : {};
  const mlx = c && mlxQuantizationOf(c.raw);
  if (mlx) o.mlx = mlx;
  return o;
}
