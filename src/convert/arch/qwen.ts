// Qwen 2 / 2.5 / 3 and the architectures whose converter writes Qwen's keys (convert_hf_to_gguf's
// Qwen2Model and its kin): the Qwen MoE models, OLMo 2, OLMoE and gpt-oss. llama.cpp runs them with
// NeoX rope on the Hugging Face q/k layout (no permutation). Qwen3 is Qwen2 without the q/k/v
// biases and with an RMSNorm over each head of q and of k (self_attn.q_norm / k_norm, [head_dim])
// before the rotation; its head_dim is set in config.json and often differs from hidden_size /
// num_attention_heads.
import { ErrorCodes, fail } from '../../errors.js';
import { LAYER_NAMES, llamaMetadata, moeCounts, refuseKey, statedHeadDim, yarnKeys, type GgufValue, type LlamaConfig } from './llama.js';

/**
 * The `general.*` and `<arch>.*` keys llama.cpp reads for a Qwen2 or Qwen3 model (convert_hf_to_gguf's
 * Qwen2Model; its Qwen3Model writes the same keys under `qwen3.`).
 */
export function qwenMetadata(arch: 'qwen2' | 'qwen2moe' | 'qwen3' | 'qwen3moe' | 'olmo2' | 'olmoe' | 'gpt-oss', cfg: LlamaConfig, name: string): Record<string, GgufValue> {
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
/** The keys of a Qwen2 model (Qwen2, Qwen2.5). */
export function qwen2Metadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  return qwenMetadata('qwen2', cfg, name);
}

/** The keys of a Qwen3 (dense) model. */
export function qwen3Metadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  return qwenMetadata('qwen3', cfg, name);
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
export const QWEN2MOE_LAYER_NAMES: Record<string, string> = {
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
export const GPT_OSS_LAYER_NAMES: Record<string, string> = {
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
