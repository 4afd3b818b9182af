// Gemma 1, 2 and 3 (CodeGemma too) as llama.cpp's gemma, gemma2 and gemma3. Their RMSNorms
// multiply by 1 + w (the registry's normShift), embeddings are tied, and llama.cpp fixes much of
// what the files do not say (embedding scale, local/global layer pattern).
import { ErrorCodes, fail } from '../../errors.js';
import { LAYER_NAMES, linearRopeFactor, llamaMetadata, refuseKey, type GgufValue, type LlamaConfig } from './llama.js';

// Gemma 2 and 3 (and OLMo 2) norms around each block: their post_attention_layernorm normalizes
// the attention output (llama.cpp's post_attention_norm), the FFN input norm (Gemma) is
// pre_feedforward_layernorm.
export const GEMMA_LAYER_NAMES: Record<string, string> = {
  ...LAYER_NAMES,
  'post_attention_layernorm.weight': 'post_attention_norm.weight',
  'pre_feedforward_layernorm.weight': 'ffn_norm.weight',
  'post_feedforward_layernorm.weight': 'post_ffw_norm.weight',
};

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
