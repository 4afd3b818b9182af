// Hugging Face Llama-family checkpoints -> GGUF naming and metadata, as llama.cpp expects them.
// Facts from llama.cpp's converter: tensor names (blk.N.attn_q ...), the `llama.*` / `qwen2.*` /
// `qwen3.*` hyperparameter keys, and the q/k row permutation from the HF rotate-half layout back to
// interleaved pairs (LLaMA only: llama.cpp runs Qwen2 and Qwen3 with NeoX rope, on the HF layout).
// Qwen3 is Qwen2 without the q/k/v biases and with an RMSNorm over each head of q and of k
// (self_attn.q_norm / k_norm, [head_dim]) before the rotation; its head_dim is set in config.json
// and often differs from hidden_size / num_attention_heads.
import { ErrorCodes, fail } from '../errors.js';
import { DEEPSEEK_LAYER_NAMES, deepseek2Metadata, deepseekKvB, type DeepseekConfig, type DerivedTensor } from './deepseek-gguf.js';
import { gptOssView, isGptOssCheckpoint } from './gpt-oss.js';
import { isMlxSwitchCheckpoint, mlxSwitchView } from './mlx-switch.js';
import { gpt2View, isGpt2Checkpoint } from './gpt2.js';
import { gptNeoxView, isGptNeoxCheckpoint } from './gpt-neox.js';
import { isPhi2Checkpoint, phi2View } from './phi2.js';
import type { Checkpoint } from '../io/checkpoint.js';
import type { AddTokenType, SpecialTokenType } from './gguf-vocab.js';

export interface LlamaConfig extends DeepseekConfig {
  architectures?: string[];
  model_type?: string;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads?: number;
  vocab_size: number;
  max_position_embeddings?: number;
  rms_norm_eps?: number;
  rope_theta?: number;
  tie_word_embeddings?: boolean;
  head_dim?: number;
  /** config.json gives head_dim itself (Qwen2 then writes key/value lengths, as the converter does). */
  head_dim_in_config?: boolean;
  /** config.json rope_scaling (Qwen2 writes YaRN scaling, Gemma 3 linear). */
  rope_scaling?: Record<string, unknown>;
  /** Gemma 3: the window of its local (sliding-window) attention layers. */
  sliding_window?: number;
  /** Gemma 3: every this-many-th layer attends globally (1: all of them; default 6). */
  sliding_window_pattern?: number;
  /** Gemma 2 and 3: logits = cap * tanh(logits / cap), when set. */
  final_logit_softcapping?: number;
  /** Gemma 2: attention scores capped the same way. */
  attn_logit_softcapping?: number;
  /** Phi-3: the share of each head's dimensions that is rotated (default 1). */
  partial_rotary_factor?: number;
  /** Phi-3: the context the model was trained with before LongRoPE. */
  original_max_position_embeddings?: number;
  /** Gemma 3: the rope base of its local (sliding-window) layers. */
  rope_local_base_freq?: number;
  /** MoE (Mixtral: num_local_experts, Qwen-MoE: num_experts): experts per layer, used per token, their FFN width. */
  num_local_experts?: number;
  num_experts?: number;
  num_experts_per_tok?: number;
  moe_intermediate_size?: number;
  /** Qwen2-MoE: the width of its one shared expert (gated by shared_expert_gate); MoE every this-many layers; dense layers. */
  shared_expert_intermediate_size?: number;
  decoder_sparse_step?: number;
  mlp_only_layers?: number[];
  /** Granite: embeddings, residual branches and attention scores are scaled, logits divided. */
  embedding_multiplier?: number;
  residual_multiplier?: number;
  attention_multiplier?: number;
  logits_scaling?: number;
  /** GPT-2: its LayerNorms' epsilon. */
  layer_norm_epsilon?: number;
  /** GPT-NeoX: LayerNorm epsilon, rotated share of each head, rope base, parallel residuals. */
  layer_norm_eps?: number;
  rotary_pct?: number;
  rotary_emb_base?: number;
  use_parallel_residual?: boolean;
  /** StarCoder2: its LayerNorms' epsilon. */
  norm_epsilon?: number;
  /** Phi-2: LayerNorms on q and k (llama.cpp's phi2 has none). */
  qk_layernorm?: boolean;
  /** gpt-oss: per layer "sliding_attention" or "full_attention"; its SwiGLU's clamp. */
  layer_types?: string[];
  swiglu_limit?: number;
}

/** model.layers.N.<rest>: the layer index and the layer-relative name. */
export const LAYER = /^model\.layers\.(\d+)\.(.+)$/;
const LAYER_NAMES: Record<string, string> = {
  'input_layernorm.weight': 'attn_norm.weight',
  'self_attn.q_proj.weight': 'attn_q.weight',
  'self_attn.k_proj.weight': 'attn_k.weight',
  'self_attn.v_proj.weight': 'attn_v.weight',
  'self_attn.o_proj.weight': 'attn_output.weight',
  'self_attn.q_proj.bias': 'attn_q.bias',
  'self_attn.k_proj.bias': 'attn_k.bias',
  'self_attn.v_proj.bias': 'attn_v.bias',
  'self_attn.q_norm.weight': 'attn_q_norm.weight',
  // MoE routers (Mixtral, Qwen-MoE); their experts are merged (ggufExpertSlot).
  'block_sparse_moe.gate.weight': 'ffn_gate_inp.weight',
  'mlp.gate.weight': 'ffn_gate_inp.weight',
  // Phi-3's fused projections stay fused in llama.cpp.
  'self_attn.qkv_proj.weight': 'attn_qkv.weight',
  'mlp.gate_up_proj.weight': 'ffn_up.weight',
  'self_attn.k_norm.weight': 'attn_k_norm.weight',
  'post_attention_layernorm.weight': 'ffn_norm.weight',
  'mlp.gate_proj.weight': 'ffn_gate.weight',
  'mlp.up_proj.weight': 'ffn_up.weight',
  'mlp.down_proj.weight': 'ffn_down.weight',
};
// Gemma 2 and 3 (and OLMo 2) norms around each block: their post_attention_layernorm normalizes
// the attention output (llama.cpp's post_attention_norm), the FFN input norm (Gemma) is
// pre_feedforward_layernorm.
const GEMMA_LAYER_NAMES: Record<string, string> = {
  ...LAYER_NAMES,
  'post_attention_layernorm.weight': 'post_attention_norm.weight',
  'pre_feedforward_layernorm.weight': 'ffn_norm.weight',
  'post_feedforward_layernorm.weight': 'post_ffw_norm.weight',
};
const GLOBAL_NAMES: Record<string, string> = {
  'model.embed_tokens.weight': 'token_embd.weight',
  'model.norm.weight': 'output_norm.weight',
  'lm_head.weight': 'output.weight',
  // GPT-2 (through gpt2.ts): learned positions, the final LayerNorm's bias.
  'model.embed_positions.weight': 'position_embd.weight',
  'model.norm.bias': 'output_norm.bias',
  // Phi-2's head has a bias.
  'lm_head.bias': 'output.bias',
};

// A per-expert MoE matrix: Mixtral's block_sparse_moe.experts.E.w1/w2/w3, Qwen-MoE's
// mlp.experts.E.gate_proj/up_proj/down_proj.
// gpt-oss's expert biases (mlp.experts.E.*_proj.bias, through gpt-oss.ts) are stacked the same way.
const EXPERT = /^model\.layers\.(\d+)\.(?:block_sparse_moe\.experts\.(\d+)\.(w1|w2|w3)\.weight|mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.(weight|bias))$/;
const EXPERT_NAMES: Record<string, string> = { w1: 'ffn_gate_exps', w3: 'ffn_up_exps', w2: 'ffn_down_exps', gate_proj: 'ffn_gate_exps', up_proj: 'ffn_up_exps', down_proj: 'ffn_down_exps' };

/**
 * The merged GGUF tensor a per-expert MoE matrix goes to, and its place in it: llama.cpp stores a
 * layer's experts as one [experts, rows, cols] tensor (blk.N.ffn_gate_exps, ...), as its converter
 * stacks them. undefined for other tensors.
 */
export function ggufExpertSlot(hf: string): { name: string; expert: number } | undefined {
  const m = EXPERT.exec(hf);
  if (!m) return undefined;
  return { name: `blk.${m[1]}.${EXPERT_NAMES[m[3] ?? m[5]]}.${m[6] ?? 'weight'}`, expert: Number(m[2] ?? m[4]) };
}

/** Experts per MoE layer and experts used per token, from config.json (undefined: dense). */
export function moeCounts(cfg: LlamaConfig): { experts: number; used: number } | undefined {
  const experts = cfg.num_local_experts ?? cfg.num_experts ?? cfg.n_routed_experts;
  if (!experts) return undefined;
  if (!cfg.num_experts_per_tok || cfg.num_experts_per_tok > experts) {
    fail(ErrorCodes.CONFIG, `[gguf] config.json: a MoE model of ${experts} experts needs "num_experts_per_tok" between 1 and ${experts}`, { option: 'num_experts_per_tok', value: cfg.num_experts_per_tok });
  }
  return { experts, used: cfg.num_experts_per_tok! };
}

/**
 * A multimodal checkpoint's language-model tensor under the name a text-only checkpoint gives it:
 * transformers saves it as language_model.model.* (4.50) or model.language_model.* (later), as in
 * Gemma 3 4B and up. Other names are returned as they are.
 */
export function languageModelName(hf: string): string {
  if (hf.startsWith('language_model.')) return hf.slice('language_model.'.length);
  if (hf.startsWith('model.language_model.')) return `model.${hf.slice('model.language_model.'.length)}`;
  return hf;
}

/** The config.json fields checkConfigTensors compares with the tensors. */
export type ShapeConfig = Pick<LlamaConfig, 'model_type' | 'hidden_size' | 'intermediate_size' | 'num_hidden_layers' | 'num_attention_heads' | 'num_key_value_heads'
  | 'vocab_size' | 'head_dim' | 'head_dim_in_config' | 'moe_intermediate_size' | 'kv_lora_rank'>;

/** A tensor under its Llama-style name; `stored`: the name it has in the file, when another (a GGUF's). */
export interface ConfigTensor { name: string; shape: readonly number[]; stored?: string }

/** A dimension a config implies: its size and how config.json gives it (for the error). */
type ConfigDim = { size: number; keys: string[]; how: string };

/**
 * Refuses a config.json that contradicts the checkpoint's tensors (Llama-style names, as
 * familyView presents every family): the layer count (the last configured layer must be stored,
 * and no layer beyond it unless the architecture drops those, as DeepSeek-V3's multi-token
 * prediction), the embedding and head [vocab_size, hidden_size], and the attention and FFN
 * matrices' shapes from the head counts, head_dim and intermediate_size (the experts':
 * moe_intermediate_size when set). llama.cpp refuses such a GGUF or computes garbage with it,
 * and the forward reads the config's sizes. Only the tensors' list is read, never their data, and
 * nothing is enumerated from the config's counts, so a huge count costs nothing. DeepSeek's MLA
 * projections are shaped by its ranks and left to its own checks. E_TENSOR_NOT_FOUND for a missing
 * last layer, E_MODEL for a shape, naming the config key, the tensor and both values.
 */
export function checkConfigTensors(cfg: ShapeConfig, tensors: readonly ConfigTensor[], source: string, scope = 'convert'): void {
  const n = cfg.num_hidden_layers;
  let stored = 0, last: string | undefined;
  for (const t of tensors) {
    const m = LAYER.exec(languageModelName(t.name));
    if (m && Number(m[1]) + 1 > stored) [stored, last] = [Number(m[1]) + 1, m[2]];
  }
  if (n > stored) {
    const tensor = `model.layers.${n - 1}.${last ?? 'input_layernorm.weight'}`;
    fail(ErrorCodes.TENSOR_NOT_FOUND, `[${scope}] ${source}: config.json num_hidden_layers = ${n}, but there is no tensor "${tensor}": the checkpoint stores ${stored} layers`, {
      file: source, tensor, option: 'num_hidden_layers', value: n, expected: stored,
    });
  }
  if (n < stored && ggufArchitecture(cfg)?.extraLayers !== 'drop') {
    const tensor = `model.layers.${stored - 1}.${last}`;
    fail(ErrorCodes.MODEL, `[${scope}] ${source}: config.json num_hidden_layers = ${n}, but the checkpoint stores ${stored} layers ("${tensor}")`, {
      file: source, tensor, option: 'num_hidden_layers', value: n, expected: stored,
    });
  }
  const heads = cfg.num_attention_heads, kvHeads = cfg.num_key_value_heads ?? heads;
  const headDim = cfg.head_dim ?? cfg.hidden_size / heads;
  const hdKey = (cfg.head_dim_in_config ?? cfg.head_dim !== undefined) ? 'head_dim' : 'hidden_size / num_attention_heads';
  const hidden: ConfigDim = { size: cfg.hidden_size, keys: ['hidden_size'], how: `hidden_size ${cfg.hidden_size}` };
  const vocab: ConfigDim = { size: cfg.vocab_size, keys: ['vocab_size'], how: `vocab_size ${cfg.vocab_size}` };
  const q: ConfigDim = { size: heads * headDim, keys: ['num_attention_heads', 'head_dim'], how: `num_attention_heads ${heads} x head dim ${headDim} (${hdKey})` };
  const kv: ConfigDim = { size: kvHeads * headDim, keys: ['num_key_value_heads', 'head_dim'], how: `num_key_value_heads ${kvHeads} x head dim ${headDim} (${hdKey})` };
  const qkv: ConfigDim = { size: (heads + 2 * kvHeads) * headDim, keys: ['num_attention_heads', 'num_key_value_heads', 'head_dim'], how: `(num_attention_heads ${heads} + 2 x num_key_value_heads ${kvHeads}) x head dim ${headDim} (${hdKey})` };
  const ffn: ConfigDim = { size: cfg.intermediate_size, keys: ['intermediate_size'], how: `intermediate_size ${cfg.intermediate_size}` };
  const ffn2: ConfigDim = { size: 2 * cfg.intermediate_size, keys: ['intermediate_size'], how: `2 x intermediate_size ${cfg.intermediate_size}` };
  const expertKey = cfg.moe_intermediate_size !== undefined ? 'moe_intermediate_size' : 'intermediate_size';
  const eff = cfg.moe_intermediate_size ?? cfg.intermediate_size;
  const expert: ConfigDim = { size: eff, keys: [expertKey], how: `${expertKey} ${eff}` };
  const mla = cfg.kv_lora_rank !== undefined || ggufArchitecture(cfg)?.name === 'deepseek2';
  const layerShapes: Record<string, ConfigDim[]> = {
    ...(mla ? {} : {
      'self_attn.q_proj.weight': [q, hidden], 'self_attn.o_proj.weight': [hidden, q],
      'self_attn.k_proj.weight': [kv, hidden], 'self_attn.v_proj.weight': [kv, hidden],
    }),
    'self_attn.qkv_proj.weight': [qkv, hidden],
    'mlp.gate_proj.weight': [ffn, hidden], 'mlp.up_proj.weight': [ffn, hidden], 'mlp.down_proj.weight': [hidden, ffn],
    'mlp.gate_up_proj.weight': [ffn2, hidden],
  };
  const expertShapes: Record<string, ConfigDim[]> = { w1: [expert, hidden], w3: [expert, hidden], gate_proj: [expert, hidden], up_proj: [expert, hidden], w2: [hidden, expert], down_proj: [hidden, expert] };
  for (const t of tensors) {
    const name = languageModelName(t.name);
    const m = LAYER.exec(name);
    const x = m ? EXPERT.exec(name) : undefined;
    const want = name === 'model.embed_tokens.weight' || name === 'lm_head.weight' ? [vocab, hidden]
      : x ? (x[6] ?? 'weight') === 'weight' ? expertShapes[x[3] ?? x[5]] : undefined
      : m && Number(m[1]) < n ? layerShapes[m[2]] : undefined;
    if (!want) continue;
    const expected = `[${want.map((d) => d.size).join(', ')}]`;
    if (t.shape.length !== want.length) {
      fail(ErrorCodes.MODEL, `[${scope}] ${source}: "${t.stored ?? t.name}" is [${t.shape.join(', ')}], but config.json needs a matrix ${expected} (${want.map((d) => d.how).join(', ')})`, {
        file: source, tensor: t.stored ?? t.name, value: t.shape, expected,
      });
    }
    const i = want.findIndex((d, k) => t.shape[k] !== d.size);
    if (i < 0) continue;
    const bad = want[i];
    fail(ErrorCodes.MODEL, `[${scope}] ${source}: "${t.stored ?? t.name}" is [${t.shape.join(', ')}], but config.json's ${bad.how} needs ${expected}: dimension ${i} is ${t.shape[i]}, not ${bad.size}`, {
      file: source, tensor: t.stored ?? t.name, option: bad.keys.join(', '), value: bad.size, expected: t.shape[i],
    });
  }
}

/**
 * GGUF name of an HF tensor of architecture `arch` (default llama), or undefined for tensors GGUF
 * does not store (rotary caches).
 */
export function ggufTensorName(hf: string, arch = 'llama'): string | undefined {
  const a = GGUF_ARCHITECTURES.find((x) => x.name === arch);
  if (a?.dropsLmHead && hf === 'lm_head.weight') return undefined;
  if (a?.multimodal) {
    // The vision tower and the projector of a multimodal checkpoint are not part of the text GGUF
    // (llama.cpp's converter writes them to a separate mmproj file).
    if (/^(?:model\.)?(?:vision_tower|multi_modal_projector)\./.test(hf)) return undefined;
    hf = languageModelName(hf);
  }
  if (hf in GLOBAL_NAMES) return GLOBAL_NAMES[hf];
  const m = LAYER.exec(hf);
  if (m) {
    if (m[2].endsWith('rotary_emb.inv_freq')) return undefined;
    const t = (a?.layerNames ?? LAYER_NAMES)[m[2]];
    if (t) return `blk.${m[1]}.${t}`;
  }
  if (hf.endsWith('rotary_emb.inv_freq')) return undefined;
  return fail(ErrorCodes.MODEL, `[gguf] no GGUF name for tensor "${hf}" of a Llama-family checkpoint`, { tensor: hf, expected: 'model.embed_tokens / model.layers.N.* / model.norm / lm_head' });
}

/** Rows of q_proj / k_proj that llama.cpp stores permuted (rotate-half -> interleaved), with their head count. */
export function permuteHeads(hf: string, cfg: LlamaConfig): number | undefined {
  if (/\.self_attn\.q_proj\.(weight|bias)$/.test(hf)) return cfg.num_attention_heads;
  if (/\.self_attn\.k_proj\.(weight|bias)$/.test(hf)) return cfg.num_key_value_heads ?? cfg.num_attention_heads;
  return undefined;
}

/**
 * Reorders the rows of a [rows, cols] matrix: within each head, row s*half + i (s = 0, 1) moves to
 * 2i + s. Works on any element size (bytes per row), so it runs on raw F32/F16/BF16 storage.
 */
export function permuteRows(src: Uint8Array, rows: number, rowBytes: number, heads: number): Uint8Array {
  if (rows % (2 * heads) !== 0) {
    fail(ErrorCodes.MODEL, `[gguf] cannot permute ${rows} rows into ${heads} heads of pairs`, { value: rows, expected: `a multiple of ${2 * heads}` });
  }
  const out = new Uint8Array(src.length);
  const perHead = rows / heads, half = perHead / 2;
  for (let h = 0; h < heads; h++) {
    for (let s = 0; s < 2; s++) {
      for (let i = 0; i < half; i++) {
        const from = h * perHead + s * half + i;
        const to = h * perHead + 2 * i + s;
        out.set(src.subarray(from * rowBytes, (from + 1) * rowBytes), to * rowBytes);
      }
    }
  }
  return out;
}

export type GgufValue =
  | { type: 'u32'; value: number }
  | { type: 'f32'; value: number }
  | { type: 'string'; value: string }
  | { type: 'bool'; value: boolean };

/**
 * Llama 3.1+ rope scaling (rope_scaling.rope_type "llama3"): the number each of the head_dim/2
 * rotary frequencies theta^(-2i/head_dim) is divided by. Low frequencies (wavelength above
 * original_max_position_embeddings / low_freq_factor) by `factor`, high ones (below .../
 * high_freq_factor) not at all, a smooth blend between: what transformers applies to inv_freq and
 * what llama.cpp's converter stores as `rope_freqs.weight` (computed here in float32 steps, as it
 * computes them with torch). undefined unless rope_scaling asks for llama3 scaling.
 */
/**
 * rope_scaling's factor when it asks for linear scaling (undefined otherwise), finite and > 0:
 * llama.cpp reads a factor of 0 as no scaling, transformers divides positions by it.
 */
export function linearRopeFactor(rs: Record<string, unknown> | null | undefined): number | undefined {
  if (!rs || (rs.rope_type ?? rs.type) !== 'linear' || typeof rs.factor !== 'number') return undefined;
  if (!Number.isFinite(rs.factor) || rs.factor <= 0) {
    fail(ErrorCodes.CONFIG, `[rope] config.json: rope_scaling.factor must be a finite number > 0 for linear rope scaling but is ${rs.factor}`, { option: 'rope_scaling.factor', value: rs.factor, expected: 'a finite number > 0' });
  }
  return rs.factor;
}

export function llama3RopeFactors(rs: Record<string, unknown> | null | undefined, theta: number, headDim: number): Float32Array | undefined {
  if (!rs || (rs.rope_type ?? rs.type) !== 'llama3') return undefined;
  const f = Math.fround;
  // Each is a divisor below: 0, a negative or a non-finite value gives NaN or infinite frequencies.
  const num = (key: string, dflt: number) => {
    const v = rs[key] ?? dflt;
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) {
      fail(ErrorCodes.CONFIG, `[rope] config.json: rope_scaling.${key} must be a finite number > 0 for llama3 rope scaling but is ${JSON.stringify(v)}`, { option: `rope_scaling.${key}`, value: v, expected: 'a finite number > 0' });
    }
    return v;
  };
  const factor = num('factor', 8), low = num('low_freq_factor', 1), high = num('high_freq_factor', 4);
  const oldContext = num('original_max_position_embeddings', 8192);
  if (high === low) {
    fail(ErrorCodes.CONFIG, `[rope] config.json: rope_scaling.high_freq_factor and low_freq_factor are both ${high}; llama3 rope scaling divides by their difference`, { option: 'rope_scaling.high_freq_factor', value: high, expected: `!= low_freq_factor ${low}` });
  }
  const lowWavelen = oldContext / low, highWavelen = oldContext / high;
  const out = new Float32Array(headDim / 2);
  for (let i = 0; i < out.length; i++) {
    const freq = f(1 / f(Math.pow(theta, f(f(2 * i) / headDim))));
    const wavelen = f(f(2 * Math.PI) / freq);
    if (wavelen < highWavelen) out[i] = 1;
    else if (wavelen > lowWavelen) out[i] = factor;
    else {
      const smooth = f(f(f(oldContext / wavelen) - low) / (high - low));
      out[i] = f(1 / f(f(f(1 - smooth) / factor) + smooth));
    }
  }
  return out;
}

/**
 * The `general.*` and `llama.*` keys llama.cpp reads for a Llama-architecture model; SmolLM3 (the
 * converter's LlamaModel subclass) writes the same keys under `smollm3.`.
 */
/** A config.json value llama.cpp's `arch` would not run as the checkpoint means: E_CONFIG naming the key. */
function refuseKey(arch: string, key: string, value: unknown, expected: unknown): never {
  return fail(ErrorCodes.CONFIG, `[gguf] config.json: ${key} = ${JSON.stringify(value)} cannot be written for llama.cpp's ${arch} (it needs ${JSON.stringify(expected)})`, { option: key, value, expected });
}

export function llamaMetadata(cfg: LlamaConfig, name = 'webquant', arch: 'llama' | 'smollm3' | 'granite' = 'llama'): Record<string, GgufValue> {
  for (const k of ['hidden_size', 'intermediate_size', 'num_hidden_layers', 'num_attention_heads', 'vocab_size'] as const) {
    if (!Number.isInteger(cfg[k]) || cfg[k] <= 0) {
      fail(ErrorCodes.CONFIG, `[gguf] config.json: ${k} must be a positive integer but is ${String(cfg[k])}`, { option: k, value: cfg[k] });
    }
  }
  const heads = cfg.num_attention_heads;
  const headDim = cfg.head_dim ?? cfg.hidden_size / heads;
  const md: Record<string, GgufValue> = {
    'general.architecture': { type: 'string', value: arch },
    'general.name': { type: 'string', value: name },
    [`${arch}.context_length`]: { type: 'u32', value: cfg.max_position_embeddings ?? 2048 },
    [`${arch}.embedding_length`]: { type: 'u32', value: cfg.hidden_size },
    [`${arch}.block_count`]: { type: 'u32', value: cfg.num_hidden_layers },
    [`${arch}.feed_forward_length`]: { type: 'u32', value: cfg.intermediate_size },
    [`${arch}.rope.dimension_count`]: { type: 'u32', value: headDim },
    [`${arch}.attention.head_count`]: { type: 'u32', value: heads },
    [`${arch}.attention.head_count_kv`]: { type: 'u32', value: cfg.num_key_value_heads ?? heads },
    [`${arch}.attention.layer_norm_rms_epsilon`]: { type: 'f32', value: cfg.rms_norm_eps ?? 1e-5 },
    [`${arch}.rope.freq_base`]: { type: 'f32', value: cfg.rope_theta ?? 10000 },
    [`${arch}.vocab_size`]: { type: 'u32', value: cfg.vocab_size },
  };
  const moe = moeCounts(cfg);
  if (moe) {
    md[`${arch}.expert_count`] = { type: 'u32', value: moe.experts };
    md[`${arch}.expert_used_count`] = { type: 'u32', value: moe.used };
  }
  // Granite's converter drops head_dim before writing them.
  if (arch !== 'granite') Object.assign(md, statedHeadDim(arch, cfg));
  // Linear scaling is two keys; llama3 scaling is the rope_freqs tensor (see llama3RopeFactors).
  const rs = cfg.rope_scaling;
  const linear = linearRopeFactor(rs);
  if (linear !== undefined) {
    md[`${arch}.rope.scaling.type`] = { type: 'string', value: 'linear' };
    md[`${arch}.rope.scaling.factor`] = { type: 'f32', value: linear };
  }
  // YaRN (Yarn-Mistral-7b-128k and the like), as the converter's TextModel writes it for every architecture.
  Object.assign(md, yarnKeys(arch, rs));
  return md;
}

/**
 * The `general.*` and `<arch>.*` keys llama.cpp reads for a Qwen2 or Qwen3 model (convert_hf_to_gguf's
 * Qwen2Model; its Qwen3Model writes the same keys under `qwen3.`).
 */
function qwenMetadata(arch: 'qwen2' | 'qwen2moe' | 'qwen3' | 'qwen3moe' | 'olmo2' | 'olmoe' | 'gpt-oss', cfg: LlamaConfig, name: string): Record<string, GgufValue> {
  const llama = llamaMetadata(cfg, name);
  const heads = cfg.num_attention_heads;
  const k = (key: string) => `${arch}.${key}`;
  const md: Record<string, GgufValue> = {
    'general.architecture': { type: 'string', value: arch },
    'general.name': llama['general.name'],
    [k('block_count')]: { type: 'u32', value: cfg.num_hidden_layers },
    // Defaults are Qwen2Config's, for config.json files that leave them out.
    [k('context_length')]: { type: 'u32', value: cfg.max_position_embeddings ?? 32768 },
    [k('embedding_length')]: { type: 'u32', value: cfg.hidden_size },
    [k('feed_forward_length')]: { type: 'u32', value: cfg.intermediate_size },
    [k('attention.head_count')]: { type: 'u32', value: heads },
    [k('attention.head_count_kv')]: { type: 'u32', value: cfg.num_key_value_heads ?? heads },
    [k('rope.freq_base')]: { type: 'f32', value: cfg.rope_theta ?? 10000 },
    [k('attention.layer_norm_rms_epsilon')]: { type: 'f32', value: cfg.rms_norm_eps ?? 1e-6 },
  };
  Object.assign(md, statedHeadDim(arch, cfg), yarnKeys(arch, cfg.rope_scaling));
  return md;
}

/** Key and value lengths, which the converter's TextModel writes whenever config.json states head_dim. */
function statedHeadDim(arch: string, cfg: LlamaConfig): Record<string, GgufValue> {
  if (!cfg.head_dim_in_config || cfg.head_dim === undefined) return {};
  return { [`${arch}.attention.key_length`]: { type: 'u32', value: cfg.head_dim }, [`${arch}.attention.value_length`]: { type: 'u32', value: cfg.head_dim } };
}

/**
 * `<arch>.rope.scaling.*` for YaRN rope scaling (rope_scaling type "yarn"), as the converter's
 * TextModel writes them: the factor, the original context, and the ramp's betas and the
 * extrapolation and attention factors where config.json gives them (llama.cpp's defaults, 32 / 1
 * and none, otherwise). Empty for other scaling types.
 */
export function yarnKeys(arch: string, rs: Record<string, unknown> | null | undefined): Record<string, GgufValue> {
  if (!rs || (rs.rope_type ?? rs.type) !== 'yarn' || typeof rs.factor !== 'number') return {};
  const k = (key: string) => `${arch}.rope.scaling.${key}`;
  const md: Record<string, GgufValue> = {
    [k('type')]: { type: 'string', value: 'yarn' },
    [k('factor')]: { type: 'f32', value: rs.factor },
  };
  if (typeof rs.original_max_position_embeddings === 'number') md[k('original_context_length')] = { type: 'u32', value: rs.original_max_position_embeddings };
  const f32 = (key: string, v: unknown) => { if (typeof v === 'number') md[k(key)] = { type: 'f32', value: v }; };
  f32('yarn_ext_factor', rs.extrapolation_factor);
  f32('yarn_attn_factor', rs.attention_factor ?? rs.attn_factor);
  f32('yarn_beta_fast', rs.beta_fast);
  f32('yarn_beta_slow', rs.beta_slow);
  return md;
}

/** The keys of a Qwen2 model (Qwen2, Qwen2.5). */
export function qwen2Metadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  return qwenMetadata('qwen2', cfg, name);
}

/**
 * Qwen's keys under `<arch>.` and the experts' count, use and width (the keys Qwen2-MoE and
 * Qwen3-MoE share); `model` and `needs` name the family and its required config keys in the error.
 */
function qwenMoeMetadata(arch: 'qwen2moe' | 'qwen3moe', cfg: LlamaConfig, name: string, model: string, needs: string[]): Record<string, GgufValue> {
  const md = qwenMetadata(arch, cfg, name);
  const moe = moeCounts(cfg);
  if (!moe || needs.some((key) => !cfg[key as keyof LlamaConfig])) {
    const keys = ['num_experts', 'num_experts_per_tok', ...needs].map((k) => `"${k}"`);
    fail(ErrorCodes.CONFIG, `[gguf] config.json: a ${model} model needs ${keys.slice(0, -1).join(', ')} and ${keys[keys.length - 1]}`, { option: 'num_experts', value: cfg.num_experts });
  }
  md[`${arch}.expert_count`] = { type: 'u32', value: moe!.experts };
  md[`${arch}.expert_used_count`] = { type: 'u32', value: moe!.used };
  md[`${arch}.expert_feed_forward_length`] = { type: 'u32', value: cfg.moe_intermediate_size! };
  return md;
}

/** The keys of a Qwen3-MoE model: Qwen3's under `qwen3moe.`, and the experts' count, use and width. */
export function qwen3MoeMetadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  return qwenMoeMetadata('qwen3moe', cfg, name, 'Qwen3-MoE', ['moe_intermediate_size']);
}

// Qwen2-MoE's shared expert and the sigmoid gate of its output (llama.cpp's *_shexp).
const QWEN2MOE_LAYER_NAMES: Record<string, string> = {
  ...LAYER_NAMES,
  'mlp.shared_expert.gate_proj.weight': 'ffn_gate_shexp.weight',
  'mlp.shared_expert.up_proj.weight': 'ffn_up_shexp.weight',
  'mlp.shared_expert.down_proj.weight': 'ffn_down_shexp.weight',
  'mlp.shared_expert_gate.weight': 'ffn_gate_inp_shexp.weight',
};

/**
 * The keys of a Qwen2-MoE model (Qwen1.5-MoE, Qwen2-57B-A14B): Qwen2's under `qwen2moe.`, the
 * experts' count, use and width and the shared expert's. What llama.cpp's qwen2moe graph cannot
 * run is refused: renormalised expert weights (it never renormalises), dense layers among the
 * MoE ones (it makes every layer MoE).
 */
export function qwen2MoeMetadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  const md = qwenMoeMetadata('qwen2moe', cfg, name, 'Qwen2-MoE', ['moe_intermediate_size', 'shared_expert_intermediate_size']);
  if (cfg.norm_topk_prob === true) refuseKey('qwen2moe', 'norm_topk_prob', true, false);
  if ((cfg.decoder_sparse_step ?? 1) !== 1) refuseKey('qwen2moe', 'decoder_sparse_step', cfg.decoder_sparse_step, 1);
  if ((cfg.mlp_only_layers ?? []).length) refuseKey('qwen2moe', 'mlp_only_layers', cfg.mlp_only_layers, []);
  md['qwen2moe.expert_shared_feed_forward_length'] = { type: 'u32', value: cfg.shared_expert_intermediate_size! };
  return md;
}

// gpt-oss: biases on every attention projection, a sink logit per head, the router's bias, and
// post_attention_layernorm before the MoE (llama.cpp's post_attention_norm).
const GPT_OSS_LAYER_NAMES: Record<string, string> = {
  ...LAYER_NAMES,
  'self_attn.o_proj.bias': 'attn_output.bias',
  'self_attn.sinks': 'attn_sinks.weight',
  'mlp.gate.bias': 'ffn_gate_inp.bias',
  'post_attention_layernorm.weight': 'post_attention_norm.weight',
};

/**
 * The keys of a gpt-oss model (convert_hf_to_gguf's GptOssModel): the TextModel keys under
 * `gpt-oss.`, the experts' count, use and width (intermediate_size), the sliding window and YaRN.
 * llama.cpp fixes what the file does not say: even layers slide, the SwiGLU is clamped at 7 with
 * alpha 1.702, the router's softmax runs over the chosen experts. A config that says otherwise
 * (other layer_types, swiglu_limit) is refused.
 */
export function gptOssMetadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  const moe = moeCounts(cfg);
  if (!moe) refuseKey('gpt-oss', 'num_local_experts', cfg.num_local_experts, 'a positive integer');
  if (!Number.isInteger(cfg.sliding_window) || cfg.sliding_window! <= 0) refuseKey('gpt-oss', 'sliding_window', cfg.sliding_window, 'a positive integer');
  const alternating = Array.from({ length: cfg.num_hidden_layers }, (_, l) => (l % 2 === 0 ? 'sliding_attention' : 'full_attention'));
  if (cfg.layer_types !== undefined && JSON.stringify(cfg.layer_types) !== JSON.stringify(alternating)) refuseKey('gpt-oss', 'layer_types', cfg.layer_types, alternating);
  if (cfg.swiglu_limit !== undefined && cfg.swiglu_limit !== 7) refuseKey('gpt-oss', 'swiglu_limit', cfg.swiglu_limit, 7);
  const md = qwenMetadata('gpt-oss', { ...cfg, head_dim_in_config: cfg.head_dim !== undefined }, name);
  md['gpt-oss.expert_count'] = { type: 'u32', value: moe!.experts };
  md['gpt-oss.expert_used_count'] = { type: 'u32', value: moe!.used };
  md['gpt-oss.expert_feed_forward_length'] = { type: 'u32', value: cfg.intermediate_size };
  md['gpt-oss.attention.sliding_window'] = { type: 'u32', value: cfg.sliding_window! };
  return md;
}

// GPT-2 (through gpt2.ts): every projection and norm has a bias; q, k and v in one projection.
const GPT2_LAYER_NAMES: Record<string, string> = {
  'input_layernorm.weight': 'attn_norm.weight',
  'input_layernorm.bias': 'attn_norm.bias',
  'self_attn.qkv_proj.weight': 'attn_qkv.weight',
  'self_attn.qkv_proj.bias': 'attn_qkv.bias',
  'self_attn.o_proj.weight': 'attn_output.weight',
  'self_attn.o_proj.bias': 'attn_output.bias',
  'post_attention_layernorm.weight': 'ffn_norm.weight',
  'post_attention_layernorm.bias': 'ffn_norm.bias',
  'mlp.up_proj.weight': 'ffn_up.weight',
  'mlp.up_proj.bias': 'ffn_up.bias',
  'mlp.down_proj.weight': 'ffn_down.weight',
  'mlp.down_proj.bias': 'ffn_down.bias',
};

/**
 * The keys of a GPT-2 model (convert_hf_to_gguf's GPT2Model): sizes under `gpt2.` and the
 * LayerNorm epsilon (config.json's layer_norm_epsilon, GPT2Config's 1e-5 when absent).
 */
export function gpt2Metadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  return layerNormKeys('gpt2', cfg, name, 1024, cfg.layer_norm_epsilon);
}

/** The keys the LayerNorm families (GPT-2, GPT-NeoX, Phi-2) share, under `<arch>.`. */
function layerNormKeys(arch: 'gpt2' | 'gptneox' | 'phi2' | 'stablelm' | 'starcoder2', cfg: LlamaConfig, name: string, context: number, eps: number | undefined): Record<string, GgufValue> {
  const llama = llamaMetadata(cfg, name);
  const k = (key: string) => `${arch}.${key}`;
  return {
    'general.architecture': { type: 'string', value: arch },
    'general.name': llama['general.name'],
    [k('block_count')]: { type: 'u32', value: cfg.num_hidden_layers },
    [k('context_length')]: { type: 'u32', value: cfg.max_position_embeddings ?? context },
    [k('embedding_length')]: { type: 'u32', value: cfg.hidden_size },
    [k('feed_forward_length')]: { type: 'u32', value: cfg.intermediate_size },
    [k('attention.head_count')]: { type: 'u32', value: cfg.num_attention_heads },
    [k('attention.layer_norm_epsilon')]: { type: 'f32', value: eps ?? 1e-5 },
  };
}

/**
 * The keys of a GPT-NeoX model (convert_hf_to_gguf's GPTNeoXModel): sizes under `gptneox.`, the
 * rotated dimensions (rotary_pct of head_dim), parallel residuals and the LayerNorm epsilon.
 * llama.cpp takes the rope base as 10000 (the converter writes none): another rotary_emb_base is
 * refused.
 */
export function gptNeoxMetadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  const base = cfg.rotary_emb_base ?? cfg.rope_theta ?? 10000;
  if (base !== 10000) refuseKey('gptneox', 'rotary_emb_base', base, 10000);
  return {
    ...layerNormKeys('gptneox', cfg, name, 2048, cfg.layer_norm_eps),
    'gptneox.rope.dimension_count': { type: 'u32', value: Math.trunc((cfg.rotary_pct ?? 0.25) * (cfg.hidden_size / cfg.num_attention_heads)) },
    'gptneox.use_parallel_residual': { type: 'bool', value: cfg.use_parallel_residual ?? true },
  };
}

// Phi-2 (through phi2.ts): biased q, k, v, o, up and down projections, one LayerNorm with bias.
const PHI2_LAYER_NAMES: Record<string, string> = {
  ...GPT2_LAYER_NAMES,
  'self_attn.q_proj.weight': 'attn_q.weight',
  'self_attn.q_proj.bias': 'attn_q.bias',
  'self_attn.k_proj.weight': 'attn_k.weight',
  'self_attn.k_proj.bias': 'attn_k.bias',
  'self_attn.v_proj.weight': 'attn_v.weight',
  'self_attn.v_proj.bias': 'attn_v.bias',
};

/**
 * The keys of a Phi-2 model (convert_hf_to_gguf's Phi2Model): sizes under `phi2.`, the rotated
 * dimensions (partial_rotary_factor of head_dim) and the LayerNorm epsilon. llama.cpp takes the
 * rope base as 10000 and has no q/k LayerNorms: others are refused.
 */
export function phi2Metadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  if ((cfg.rope_theta ?? 10000) !== 10000) refuseKey('phi2', 'rope_theta', cfg.rope_theta, 10000);
  if (cfg.qk_layernorm === true) refuseKey('phi2', 'qk_layernorm', true, false);
  const heads = cfg.num_attention_heads;
  return {
    ...layerNormKeys('phi2', cfg, name, 2048, cfg.layer_norm_eps),
    // PhiConfig's default share is 0.5.
    'phi2.rope.dimension_count': { type: 'u32', value: Math.trunc((cfg.partial_rotary_factor ?? 0.5) * (cfg.hidden_size / heads)) },
    'phi2.attention.head_count_kv': { type: 'u32', value: cfg.num_key_value_heads ?? heads },
  };
}

const STABLELM_LAYER_NAMES: Record<string, string> = {
  ...LAYER_NAMES,
  'input_layernorm.bias': 'attn_norm.bias',
  'post_attention_layernorm.bias': 'ffn_norm.bias',
};

/**
 * The keys of a StableLM model (convert_hf_to_gguf's StableLMModel): sizes under `stablelm.`, the
 * rotated dimensions (partial_rotary_factor of head_dim, StableLmConfig's 0.25 by default), the
 * LayerNorm epsilon, sequential residuals. What webquant's forward does not run (per-head q/k
 * LayerNorms, parallel residuals) and another rope base than llama.cpp's default are refused.
 */
export function stablelmMetadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  if (cfg.qk_layernorm === true) refuseKey('stablelm', 'qk_layernorm', true, false);
  if (cfg.use_parallel_residual === true) refuseKey('stablelm', 'use_parallel_residual', true, false);
  const heads = cfg.num_attention_heads;
  return {
    ...layerNormKeys('stablelm', cfg, name, 4096, cfg.layer_norm_eps),
    'stablelm.rope.dimension_count': { type: 'u32', value: Math.trunc((cfg.partial_rotary_factor ?? 0.25) * (cfg.head_dim ?? cfg.hidden_size / heads)) },
    'stablelm.rope.freq_base': { type: 'f32', value: cfg.rope_theta ?? 10000 },
    'stablelm.attention.head_count_kv': { type: 'u32', value: cfg.num_key_value_heads ?? heads },
    'stablelm.use_parallel_residual': { type: 'bool', value: false },
  };
}

/**
 * The keys of a StarCoder2 model (convert_hf_to_gguf's StarCoder2Model: TextModel's keys under
 * `starcoder2.`, its norm_epsilon as the LayerNorm epsilon).
 */
export function starcoder2Metadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  const heads = cfg.num_attention_heads;
  return {
    ...layerNormKeys('starcoder2', cfg, name, 16384, cfg.norm_epsilon),
    'starcoder2.attention.head_count_kv': { type: 'u32', value: cfg.num_key_value_heads ?? heads },
    'starcoder2.rope.freq_base': { type: 'f32', value: cfg.rope_theta ?? 10000 },
  };
}

/**
 * The keys of an OLMoE model (convert_hf_to_gguf's OlmoeModel: TextModel's keys under `olmoe.`,
 * the experts' count and use). llama.cpp's olmoe never renormalises the picked experts' weights:
 * norm_topk_prob true is refused.
 */
export function olmoeMetadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  const moe = moeCounts(cfg);
  if (!moe) fail(ErrorCodes.CONFIG, `[gguf] config.json: an OLMoE model needs "num_experts" and "num_experts_per_tok"`, { option: 'num_experts', value: cfg.num_experts });
  if (cfg.norm_topk_prob === true) refuseKey('olmoe', 'norm_topk_prob', true, false);
  // OLMoE ships with every head its own keys; a grouped one did not run in llama.cpp b6327 as the
  // checkpoint means (its k norm spans the grouped projection).
  if ((cfg.num_key_value_heads ?? cfg.num_attention_heads) !== cfg.num_attention_heads) {
    refuseKey('olmoe', 'num_key_value_heads', cfg.num_key_value_heads, cfg.num_attention_heads);
  }
  return {
    ...qwenMetadata('olmoe', cfg, name),
    // The converter writes 1e-5, OLMoE's own, whatever config.json says; llama.cpp runs that.
    'olmoe.attention.layer_norm_rms_epsilon': { type: 'f32', value: 1e-5 },
    'olmoe.expert_count': { type: 'u32', value: moe!.experts },
    'olmoe.expert_used_count': { type: 'u32', value: moe!.used },
  };
}

/** The keys of a Qwen3 (dense) model. */
export function qwen3Metadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  return qwenMetadata('qwen3', cfg, name);
}

/** The keys every Gemma shares, with their converters' defaults for what config.json leaves out. */
function gemmaKeys(arch: 'gemma' | 'gemma2' | 'gemma3', cfg: LlamaConfig, name: string, context: number, headDim: number): Record<string, GgufValue> {
  const llama = llamaMetadata(cfg, name);
  const heads = cfg.num_attention_heads;
  const k = (key: string) => `${arch}.${key}`;
  return {
    'general.architecture': { type: 'string', value: arch },
    'general.name': llama['general.name'],
    [k('context_length')]: { type: 'u32', value: cfg.max_position_embeddings ?? context },
    [k('embedding_length')]: { type: 'u32', value: cfg.hidden_size },
    [k('block_count')]: { type: 'u32', value: cfg.num_hidden_layers },
    [k('feed_forward_length')]: { type: 'u32', value: cfg.intermediate_size },
    [k('attention.head_count')]: { type: 'u32', value: heads },
    [k('attention.head_count_kv')]: { type: 'u32', value: cfg.num_key_value_heads ?? heads },
    [k('attention.layer_norm_rms_epsilon')]: { type: 'f32', value: cfg.rms_norm_eps ?? 1e-6 },
    [k('attention.key_length')]: { type: 'u32', value: headDim },
    [k('attention.value_length')]: { type: 'u32', value: headDim },
  };
}

/**
 * The `general.*` and `gemma3.*` keys llama.cpp reads for a Gemma 3 text model (convert_hf_to_gguf's
 * Gemma3Model, with its defaults for keys config.json leaves out). llama.cpp itself fixes what the
 * file does not say: local layers use rope base 10000, every 6th layer is global, queries are
 * scaled by 1/sqrt(head_dim), embeddings by sqrt(hidden_size).
 */
export function gemma3Metadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  const headDim = cfg.head_dim_in_config && cfg.head_dim !== undefined ? cfg.head_dim : 256;
  const md = gemmaKeys('gemma3', cfg, name, 131072, headDim);
  const k = (key: string) => `gemma3.${key}`;
  md[k('rope.freq_base')] = { type: 'f32', value: cfg.rope_theta ?? 1000000 };
  // The local layers' base (llama.cpp assumes 10000 where the file has none).
  if (cfg.rope_local_base_freq !== undefined) md[k('rope.freq_base_swa')] = { type: 'f32', value: cfg.rope_local_base_freq };
  if (cfg.final_logit_softcapping) md[k('final_logit_softcapping')] = { type: 'f32', value: cfg.final_logit_softcapping };
  if ((cfg.sliding_window_pattern ?? 6) !== 1) {
    if (!Number.isInteger(cfg.sliding_window) || cfg.sliding_window! <= 0) {
      fail(ErrorCodes.CONFIG, `[gguf] config.json: a Gemma 3 model needs "sliding_window" (a positive integer) but has ${String(cfg.sliding_window)}`, { option: 'sliding_window', value: cfg.sliding_window });
    }
    md[k('attention.sliding_window')] = { type: 'u32', value: cfg.sliding_window! };
  }
  const rs = cfg.rope_scaling;
  const linear = linearRopeFactor(rs);
  if (linear !== undefined) {
    md[k('rope.scaling.type')] = { type: 'string', value: 'linear' };
    md[k('rope.scaling.factor')] = { type: 'f32', value: linear };
  }
  return md;
}

/**
 * The `general.*` and `gemma.*` keys llama.cpp reads for a Gemma (1) model (convert_hf_to_gguf's
 * GemmaModel). That converter writes no rope base: llama.cpp's default, 10000, is every Gemma 1's.
 * A config with another one gets it written, so that llama.cpp runs what the checkpoint means.
 */
export function gemmaMetadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  const md = gemmaKeys('gemma', cfg, name, 8192, cfg.head_dim ?? cfg.hidden_size / cfg.num_attention_heads);
  const theta = cfg.rope_theta ?? 10000;
  if (theta !== 10000) md['gemma.rope.freq_base'] = { type: 'f32', value: theta };
  if (cfg.rope_scaling) refuseKey('gemma', 'rope_scaling', cfg.rope_scaling, null);
  return md;
}

/**
 * The `general.*` and `gemma2.*` keys llama.cpp reads for a Gemma 2 model (convert_hf_to_gguf's
 * Gemma2Model). llama.cpp itself alternates local and global layers and scales embeddings by
 * sqrt(hidden_size).
 */
export function gemma2Metadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  for (const key of ['sliding_window', 'attn_logit_softcapping', 'final_logit_softcapping'] as const) {
    if (typeof cfg[key] !== 'number' || !(cfg[key]! > 0)) {
      fail(ErrorCodes.CONFIG, `[gguf] config.json: a Gemma 2 model needs "${key}" (a positive number) but has ${String(cfg[key])}`, { option: key, value: cfg[key] });
    }
  }
  const md = gemmaKeys('gemma2', cfg, name, 8192, cfg.head_dim ?? cfg.hidden_size / cfg.num_attention_heads);
  md['gemma2.attn_logit_softcapping'] = { type: 'f32', value: cfg.attn_logit_softcapping! };
  md['gemma2.final_logit_softcapping'] = { type: 'f32', value: cfg.final_logit_softcapping! };
  md['gemma2.attention.sliding_window'] = { type: 'u32', value: cfg.sliding_window! };
  return md;
}

/** Phi-3's rotated dimensions per head: int(partial_rotary_factor * hidden_size) // heads, as the converter. */
export function phi3RopeDims(cfg: Pick<LlamaConfig, 'partial_rotary_factor' | 'hidden_size' | 'num_attention_heads'>): number {
  return Math.floor(Math.trunc((cfg.partial_rotary_factor ?? 1) * cfg.hidden_size) / cfg.num_attention_heads);
}

/**
 * Phi-3's LongRoPE (rope_scaling type "longrope" or "su"): the long and short per-frequency factors
 * (rope_dims/2 each) and the factor cos and sin are scaled by, sqrt(1 + ln(s)/ln(original)) with
 * s = max_position_embeddings / original_max_position_embeddings (1 when s <= 1). undefined without.
 */
export function phi3LongRope(cfg: LlamaConfig): { long: Float32Array; short: Float32Array; attnFactor: number } | undefined {
  const rs = cfg.rope_scaling;
  if (!rs) return undefined;
  const type = String(rs.rope_type ?? rs.type ?? '').toLowerCase();
  if (type !== 'longrope' && type !== 'su') {
    return fail(ErrorCodes.CONFIG, `[gguf] config.json: Phi-3 rope_scaling type "${type}" is not supported; expected "longrope" or "su"`, { option: 'rope_scaling', value: rs, expected: ['longrope', 'su'] });
  }
  const dims = phi3RopeDims(cfg);
  const factors = (key: string) => {
    const v = rs[key];
    if (!Array.isArray(v) || v.length !== dims / 2 || !v.every((x) => typeof x === 'number' && Number.isFinite(x))) {
      fail(ErrorCodes.CONFIG, `[gguf] config.json: rope_scaling.${key} must be ${dims / 2} numbers (rope dimensions / 2)`, { option: `rope_scaling.${key}`, value: Array.isArray(v) ? v.length : v, expected: dims / 2 });
    }
    return Float32Array.from(v as number[]);
  };
  const orig = cfg.original_max_position_embeddings;
  if (!orig || !cfg.max_position_embeddings) {
    fail(ErrorCodes.CONFIG, '[gguf] config.json: LongRoPE needs "max_position_embeddings" and "original_max_position_embeddings"', { option: 'original_max_position_embeddings', value: orig });
  }
  const scale = cfg.max_position_embeddings! / orig!;
  return { long: factors('long_factor'), short: factors('short_factor'), attnFactor: scale > 1 ? Math.sqrt(1 + Math.log(scale) / Math.log(orig!)) : 1 };
}

/**
 * The `general.*` and `phi3.*` keys llama.cpp reads for a Phi-3 model (convert_hf_to_gguf's
 * Phi3MiniModel): Phi-3 mini/medium, Phi-3.5-mini, Phi-4-mini.
 */
export function phi3Metadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  const llama = llamaMetadata(cfg, name);
  const k = (key: string) => `phi3.${key}`;
  if (!cfg.max_position_embeddings || !cfg.original_max_position_embeddings) {
    fail(ErrorCodes.CONFIG, '[gguf] config.json: a Phi-3 model needs "max_position_embeddings" and "original_max_position_embeddings"', { option: 'original_max_position_embeddings', value: cfg.original_max_position_embeddings });
  }
  const dims = phi3RopeDims(cfg), headDim = cfg.hidden_size / cfg.num_attention_heads;
  if (dims < 2 || dims % 2 !== 0 || dims > headDim) {
    fail(ErrorCodes.CONFIG, `[gguf] config.json: partial_rotary_factor ${cfg.partial_rotary_factor ?? 1} rotates ${dims} of ${headDim} dimensions per head; expected an even number from 2 to ${headDim}`, { option: 'partial_rotary_factor', value: cfg.partial_rotary_factor });
  }
  const md: Record<string, GgufValue> = {
    'general.architecture': { type: 'string', value: 'phi3' },
    'general.name': llama['general.name'],
    [k('context_length')]: { type: 'u32', value: cfg.max_position_embeddings! },
    [k('rope.scaling.original_context_length')]: { type: 'u32', value: cfg.original_max_position_embeddings! },
    [k('embedding_length')]: { type: 'u32', value: cfg.hidden_size },
    [k('feed_forward_length')]: { type: 'u32', value: cfg.intermediate_size },
    [k('block_count')]: { type: 'u32', value: cfg.num_hidden_layers },
    [k('attention.head_count')]: { type: 'u32', value: cfg.num_attention_heads },
    [k('attention.head_count_kv')]: { type: 'u32', value: cfg.num_key_value_heads ?? cfg.num_attention_heads },
    [k('attention.layer_norm_rms_epsilon')]: { type: 'f32', value: cfg.rms_norm_eps ?? 1e-5 },
    [k('rope.dimension_count')]: { type: 'u32', value: phi3RopeDims(cfg) },
    [k('rope.freq_base')]: { type: 'f32', value: cfg.rope_theta ?? 10000 },
    // 0 tells Phi-4 (no window) from the other Phi-3 models, as the converter writes it.
    [k('attention.sliding_window')]: { type: 'u32', value: cfg.sliding_window ?? 0 },
  };
  const lr = phi3LongRope(cfg);
  if (lr) md[k('rope.scaling.attn_factor')] = { type: 'f32', value: lr.attnFactor };
  return md;
}

/**
 * The keys of a Granite (3.x dense) model: Llama's under `granite.`, and its four scales
 * (convert_hf_to_gguf's GraniteModel): attention.scale, embedding_scale, residual_scale, logit_scale.
 */
export function graniteMetadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  const md = llamaMetadata(cfg, name, 'granite');
  for (const [key, gguf] of [['attention_multiplier', 'attention.scale'], ['embedding_multiplier', 'embedding_scale'], ['residual_multiplier', 'residual_scale'], ['logits_scaling', 'logit_scale']] as const) {
    const v = cfg[key];
    if (v !== undefined) md[`granite.${gguf}`] = { type: 'f32', value: v };
  }
  return md;
}

/** A GGUF architecture webquant writes from Hugging Face checkpoints. */
export interface GgufArchitecture {
  /** general.architecture, and the prefix of its keys. */
  name: 'llama' | 'smollm3' | 'granite' | 'qwen2' | 'qwen2moe' | 'qwen3' | 'qwen3moe' | 'olmo2' | 'olmoe' | 'gemma' | 'gemma2' | 'gemma3' | 'phi3' | 'deepseek2' | 'gpt-oss' | 'gpt2' | 'gptneox' | 'phi2' | 'stablelm' | 'starcoder2';
  /** config.json model_type values written as this architecture. */
  modelTypes: readonly string[];
  /** q_proj/k_proj rows are permuted to llama.cpp's interleaved rope layout. */
  permuteQK: boolean;
  /**
   * Added to every `*norm.weight` tensor (in its stored dtype, then widened to F32, as the
   * converter does): Gemma's RMSNorm multiplies by 1 + w, llama.cpp's by w.
   */
  normShift?: number;
  metadata(cfg: LlamaConfig, name?: string): Record<string, GgufValue>;
  /** Tensors the converter adds that the checkpoint does not hold (rope factors), F32. */
  extraTensors?(cfg: LlamaConfig): { name: string; values: Float32Array }[];
  /** Layer tensor names, when not Llama's (LAYER_NAMES). */
  layerNames?: Readonly<Record<string, string>>;
  /** lm_head is dropped: llama.cpp runs the tied embedding (Gemma 2's converter). */
  dropsLmHead?: true;
  /** May be a multimodal checkpoint: the language model's tensors are prefixed, the vision ones left out. */
  multimodal?: true;
  /** A SentencePiece vocabulary gets add_space_prefix = false (Gemma's). */
  noSpacePrefix?: true;
  /**
   * Special tokens the converter sets by id when the tokenizer files name none of that type (Gemma
   * 1's end of turn, 107); written only where the vocabulary has that id.
   */
  specialTokens?: Readonly<Partial<Record<SpecialTokenType, number>>>;
  /** add_bos / add_eos the converter writes before the tokenizer files' own (Phi-2: no BOS). */
  addTokens?: Readonly<Partial<Record<AddTokenType, boolean>>>;
  /**
   * The tensors a layer tensor (its name after `model.layers.N.`) becomes instead of itself, when
   * the converter reshapes it (DeepSeek's kv_b_proj split into attn_k_b and attn_v_b).
   */
  derived?(layerTensor: string, shape: readonly number[], cfg: LlamaConfig): DerivedTensor[] | undefined;
  /** Layers numbered num_hidden_layers and up are not part of the model (DeepSeek-V3's multi-token prediction). */
  extraLayers?: 'drop';
}

/**
 * A checkpoint of a family that stores its tensors otherwise (gpt-oss's packed experts, GPT-2's
 * Conv1D layers, GPT-NeoX's q/k/v by head, Phi-2's and StarCoder2's names, mlx_lm's stacked
 * experts) under the Llama-style
 * names the converter and the forward read; any other checkpoint as it is. Each family is known by
 * tensor names only it has. GPT-NeoX's needs the head count (its q, k and v rows are grouped by head).
 */
export function familyView(input: Checkpoint, cfg?: Pick<LlamaConfig, 'num_attention_heads'>): Checkpoint {
  if (isGptOssCheckpoint(input)) return gptOssView(input);
  if (isGpt2Checkpoint(input)) return gpt2View(input);
  if (cfg && isGptNeoxCheckpoint(input)) return gptNeoxView(input, cfg.num_attention_heads);
  if (isPhi2Checkpoint(input)) return phi2View(input);
  if (isMlxSwitchCheckpoint(input)) return mlxSwitchView(input);
  return input;
}

/** One entry per architecture: model types, q/k layout and metadata keys. */
export const GGUF_ARCHITECTURES: readonly GgufArchitecture[] = [
  {
    // Mixtral is Llama with MoE layers (expert_count, expert_used_count; experts merged).
    name: 'llama', modelTypes: ['llama', 'mistral', 'mixtral'], permuteQK: true, metadata: llamaMetadata,
    extraTensors: (cfg) => {
      const f = llama3RopeFactors(cfg.rope_scaling, cfg.rope_theta ?? 10000, cfg.head_dim ?? cfg.hidden_size / cfg.num_attention_heads);
      return f ? [{ name: 'rope_freqs.weight', values: f }] : [];
    },
  },
  { name: 'granite', modelTypes: ['granite'], permuteQK: true, metadata: graniteMetadata },
  // SmolLM3: Llama with every 4th layer without rope (llama.cpp fixes the step at 4).
  { name: 'smollm3', modelTypes: ['smollm3'], permuteQK: true, metadata: (cfg, name) => llamaMetadata(cfg, name, 'smollm3') },
  { name: 'qwen2', modelTypes: ['qwen2'], permuteQK: false, metadata: qwen2Metadata },
  { name: 'qwen2moe', modelTypes: ['qwen2_moe'], permuteQK: false, layerNames: QWEN2MOE_LAYER_NAMES, metadata: qwen2MoeMetadata },
  { name: 'qwen3', modelTypes: ['qwen3'], permuteQK: false, metadata: qwen3Metadata },
  { name: 'qwen3moe', modelTypes: ['qwen3_moe'], permuteQK: false, metadata: qwen3MoeMetadata },
  // OLMo 2: norms after attention and after the FFN only, q/k norms over the whole projection;
  // the converter's TextModel keys, as Qwen's, under olmo2.
  { name: 'olmo2', modelTypes: ['olmo2'], permuteQK: false, layerNames: GEMMA_LAYER_NAMES, metadata: (cfg, name = 'webquant') => qwenMetadata('olmo2', cfg, name) },
  // OLMoE: Llama's names, q/k norms over the whole projections, Qwen-MoE's experts.
  { name: 'olmoe', modelTypes: ['olmoe'], permuteQK: false, metadata: olmoeMetadata },
  // Gemma (1): Llama's layer and norm names, norms + 1, the tied head only.
  { name: 'gemma', modelTypes: ['gemma'], permuteQK: false, normShift: 1, dropsLmHead: true, noSpacePrefix: true, specialTokens: { eot: 107 }, metadata: gemmaMetadata },
  { name: 'gemma2', modelTypes: ['gemma2'], permuteQK: false, normShift: 1, layerNames: GEMMA_LAYER_NAMES, dropsLmHead: true, noSpacePrefix: true, metadata: gemma2Metadata },
  {
    name: 'phi3', modelTypes: ['phi3'], permuteQK: false, metadata: phi3Metadata,
    extraTensors: (cfg) => {
      const lr = phi3LongRope(cfg);
      return lr ? [{ name: 'rope_factors_long.weight', values: lr.long }, { name: 'rope_factors_short.weight', values: lr.short }] : [];
    },
  },
  {
    name: 'deepseek2', modelTypes: ['deepseek_v2', 'deepseek_v3'], permuteQK: false, layerNames: { ...LAYER_NAMES, ...DEEPSEEK_LAYER_NAMES }, extraLayers: 'drop', metadata: deepseek2Metadata,
    derived: (t, shape, cfg) => (t === 'self_attn.kv_b_proj.weight' ? deepseekKvB(cfg, shape) : undefined),
  },
  // gpt-oss: read through gpt-oss.ts (experts unpacked, router renamed); no q/k permutation (NeoX rope).
  { name: 'gpt-oss', modelTypes: ['gpt_oss'], permuteQK: false, layerNames: GPT_OSS_LAYER_NAMES, metadata: gptOssMetadata },
  // GPT-2: read through gpt2.ts (Conv1D weights transposed); LayerNorms with biases, learned positions.
  { name: 'gpt2', modelTypes: ['gpt2'], permuteQK: false, layerNames: GPT2_LAYER_NAMES, metadata: gpt2Metadata },
  // StableLM: Llama's names and layout, LayerNorms with biases, partial NeoX rotary.
  { name: 'stablelm', modelTypes: ['stablelm'], permuteQK: false, layerNames: STABLELM_LAYER_NAMES, metadata: stablelmMetadata },
  // StarCoder2: read through phi2.ts (c_fc, c_proj renamed); LayerNorms and every projection biased.
  { name: 'starcoder2', modelTypes: ['starcoder2'], permuteQK: false, layerNames: PHI2_LAYER_NAMES, metadata: starcoder2Metadata },
  // Phi-1/1.5/2: read through phi2.ts (renamed); one LayerNorm feeds attention and the FFN.
  { name: 'phi2', modelTypes: ['phi'], permuteQK: false, layerNames: PHI2_LAYER_NAMES, addTokens: { bos: false }, metadata: phi2Metadata },
  // GPT-NeoX (Pythia): read through gpt-neox.ts (q, k and v regrouped); GPT-2's layer names then apply.
  {
    name: 'gptneox', modelTypes: ['gpt_neox'], permuteQK: false, layerNames: GPT2_LAYER_NAMES, metadata: gptNeoxMetadata,
  },
  // Gemma3ForCausalLM (the text-only 270M and 1B); the multimodal checkpoints' text_config says
  // gemma3_text too (readConfig merges it over the top level).
  {
    name: 'gemma3', modelTypes: ['gemma3_text'], permuteQK: false, normShift: 1, layerNames: GEMMA_LAYER_NAMES, multimodal: true, noSpacePrefix: true,
    metadata: gemma3Metadata,
  },
];

/** The architecture of a config's model_type (undefined: not one webquant writes as GGUF). */
export function ggufArchitecture(cfg: Pick<LlamaConfig, 'model_type'>): GgufArchitecture | undefined {
  return GGUF_ARCHITECTURES.find((a) => a.modelTypes.includes(cfg.model_type ?? 'llama'));
}
