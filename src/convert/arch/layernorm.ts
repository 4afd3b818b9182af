// The LayerNorm families: GPT-2, GPT-NeoX (Pythia), Phi-1/1.5/2, StableLM-2 and StarCoder2. Their
// checkpoints are read through views (gpt2.ts, gpt-neox.ts, phi2.ts) under Llama-style names; these
// are their GGUF tensor names and keys, as llama.cpp's converter writes them.
import { LAYER_NAMES, llamaMetadata, refuseKey, type GgufValue, type LlamaConfig } from './llama.js';

// GPT-2 (through gpt2.ts): every projection and norm has a bias; q, k and v in one projection.
export const GPT2_LAYER_NAMES: Record<string, string> = {
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
export const PHI2_LAYER_NAMES: Record<string, string> = {
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

export const STABLELM_LAYER_NAMES: Record<string, string> = {
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
