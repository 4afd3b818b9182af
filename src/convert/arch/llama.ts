// The Llama architecture, which every other one builds on: config.json's fields, llama.cpp's tensor
// names (blk.N.attn_q ...), the merged MoE experts, the q/k row permutation from Hugging Face's
// rotate-half layout back to interleaved pairs, rope scaling, and the `llama.*` keys (with
// SmolLM3's and Granite's, the converter's LlamaModel subclasses). Facts from llama.cpp's converter.
import { ErrorCodes, fail } from '../../errors.js';
import type { DeepseekConfig } from './deepseek.js';

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
export const LAYER_NAMES: Record<string, string> = {
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
export const GLOBAL_NAMES: Record<string, string> = {
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
export const EXPERT = /^model\.layers\.(\d+)\.(?:block_sparse_moe\.experts\.(\d+)\.(w1|w2|w3)\.weight|mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.(weight|bias))$/;
export const EXPERT_NAMES: Record<string, string> = { w1: 'ffn_gate_exps', w3: 'ffn_up_exps', w2: 'ffn_down_exps', gate_proj: 'ffn_gate_exps', up_proj: 'ffn_up_exps', down_proj: 'ffn_down_exps' };

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

/**
 * Llama 3.1+ rope scaling (rope_scaling.rope_type "llama3"): the number each of the head_dim/2
 * rotary frequencies theta^(-2i/head_dim) is divided by. Low frequencies (wavelength above
 * original_max_position_embeddings / low_freq_factor) by `factor`, high ones (below .../
 * high_freq_factor) not at all, a smooth blend between: what transformers applies to inv_freq and
 * what llama.cpp's converter stores as `rope_freqs.weight` (computed here in float32 steps, as it
 * computes them with torch). undefined unless rope_scaling asks for llama3 scaling.
 */
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

/** A config.json value llama.cpp's `arch` would not run as the checkpoint means: E_CONFIG naming the key. */
export function refuseKey(arch: string, key: string, value: unknown, expected: unknown): never {
  return fail(ErrorCodes.CONFIG, `[gguf] config.json: ${key} = ${JSON.stringify(value)} cannot be written for llama.cpp's ${arch} (it needs ${JSON.stringify(expected)})`, { option: key, value, expected });
}

/**
 * The `general.*` and `llama.*` keys llama.cpp reads for a Llama-architecture model; SmolLM3 (the
 * converter's LlamaModel subclass) writes the same keys under `smollm3.`.
 */
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
/** Key and value lengths, which the converter's TextModel writes whenever config.json states head_dim. */
export function statedHeadDim(arch: string, cfg: LlamaConfig): Record<string, GgufValue> {
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
