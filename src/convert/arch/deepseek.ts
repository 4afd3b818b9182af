// DeepSeek-V2/V3 (config model_type "deepseek_v2", "deepseek_v3"; DeepSeek-R1, Kimi-K2 and the
// V2-Lite/V2.5 checkpoints share them) as llama.cpp's "deepseek2" architecture. Facts from
// llama.cpp's converter and loader:
// - Multi-head latent attention (MLA): q from a low-rank pair q_a_proj -> q_a_layernorm ->
//   q_b_proj (or one q_proj: llama.cpp expects that only of a 27-layer model, V2-Lite), keys and
//   values from kv_a_proj_with_mqa (a latent of kv_lora_rank plus one shared rope key) and
//   kv_b_proj, which the converter splits per head into attn_k_b (transposed) and attn_v_b, so
//   that llama.cpp can multiply queries into the latent space instead of expanding every key.
// - The cache then holds one "head" of kv_lora_rank + rope dims (key_length) and kv_lora_rank
//   (value_length); the per-head sizes are key_length_mla / value_length_mla.
// - Rope rotates adjacent pairs of the last qk_rope_head_dim dims (llama.cpp's normal rope, which
//   is what the Hugging Face code computes after its de-interleave): no rows are permuted.
// - MoE: the first first_k_dense_replace layers are dense; the others route to n_routed_experts
//   (softmax for V2, sigmoid for V3, whose e_score_correction_bias is exp_probs_b.bias) and add
//   n_shared_experts' shared FFN (ffn_*_shexp). Layers past num_hidden_layers (V3's multi-token
//   prediction module) are not part of the model and are left out.
import { ErrorCodes, fail } from '../../errors.js';
import type { TensorValues } from '../../io/checkpoint.js';
import { yarnKeys, type GgufValue, type LlamaConfig } from './llama.js';

/** The config.json fields of a DeepSeek-V2/V3 model (snake_case, as written). */
export interface DeepseekConfig {
  q_lora_rank?: number | null;
  kv_lora_rank?: number;
  qk_nope_head_dim?: number;
  qk_rope_head_dim?: number;
  v_head_dim?: number;
  n_routed_experts?: number;
  n_shared_experts?: number;
  first_k_dense_replace?: number;
  routed_scaling_factor?: number;
  norm_topk_prob?: boolean;
  /** "greedy", "group_limited_greedy" (V2) or "noaux_tc" (V3). */
  topk_method?: string;
  scoring_func?: string;
  n_group?: number;
  topk_group?: number;
}

/**
 * The layer tensors a DeepSeek-V2/V3 checkpoint has beyond Llama's (which it shares: norms,
 * q_proj, o_proj, the router and dense MLP) and their llama.cpp names; kv_b_proj: see deepseekKvB.
 */
export const DEEPSEEK_LAYER_NAMES: Readonly<Record<string, string>> = {
  'self_attn.q_a_proj.weight': 'attn_q_a.weight',
  'self_attn.q_a_layernorm.weight': 'attn_q_a_norm.weight',
  'self_attn.q_b_proj.weight': 'attn_q_b.weight',
  'self_attn.kv_a_proj_with_mqa.weight': 'attn_kv_a_mqa.weight',
  'self_attn.kv_a_layernorm.weight': 'attn_kv_a_norm.weight',
  'mlp.gate.e_score_correction_bias': 'exp_probs_b.bias',
  'mlp.shared_experts.gate_proj.weight': 'ffn_gate_shexp.weight',
  'mlp.shared_experts.up_proj.weight': 'ffn_up_shexp.weight',
  'mlp.shared_experts.down_proj.weight': 'ffn_down_shexp.weight',
};

/** `v` when it is a positive integer; E_CONFIG naming the key otherwise. */
function positiveInt(key: string, v: unknown): number {
  if (!Number.isInteger(v) || (v as number) <= 0) fail(ErrorCodes.CONFIG, `[deepseek] config.json: a DeepSeek model needs "${key}" (a positive integer) but has ${String(v)}`, { option: key, value: v });
  return v as number;
}

/** The MLA sizes of a config, validated (E_CONFIG naming the key otherwise). */
export function mlaDims(cfg: DeepseekConfig): { qLora?: number; kvLora: number; nope: number; rope: number; v: number } {
  const need = (key: 'kv_lora_rank' | 'qk_nope_head_dim' | 'qk_rope_head_dim' | 'v_head_dim') => positiveInt(key, cfg[key]);
  const q = cfg.q_lora_rank;
  if (q !== undefined && q !== null && (!Number.isInteger(q) || q <= 0)) {
    fail(ErrorCodes.CONFIG, `[deepseek] config.json: "q_lora_rank" must be a positive integer or null but is ${String(q)}`, { option: 'q_lora_rank', value: q });
  }
  const rope = need('qk_rope_head_dim');
  if (rope % 2 !== 0) fail(ErrorCodes.CONFIG, `[deepseek] config.json: "qk_rope_head_dim" ${rope} must be even`, { option: 'qk_rope_head_dim', value: rope });
  return { qLora: q ?? undefined, kvLora: need('kv_lora_rank'), nope: need('qk_nope_head_dim'), rope, v: need('v_head_dim') };
}

/** The routing of a DeepSeek MoE layer with the config class's defaults (V2: softmax, V3: sigmoid, normalised). */
export function deepseekRouting(cfg: DeepseekConfig & { model_type?: string }): { gating: 'softmax' | 'sigmoid'; norm: boolean; scale: number } {
  const v3 = cfg.model_type === 'deepseek_v3';
  const gating = cfg.scoring_func ?? (v3 ? 'sigmoid' : 'softmax');
  if (gating !== 'softmax' && gating !== 'sigmoid') {
    fail(ErrorCodes.CONFIG, `[deepseek] config.json: scoring_func "${gating}" is not one llama.cpp implements; expected "softmax" or "sigmoid"`, { option: 'scoring_func', value: gating, expected: ['softmax', 'sigmoid'] });
  }
  return { gating, norm: cfg.norm_topk_prob ?? v3, scale: cfg.routed_scaling_factor ?? 1 };
}

/**
 * The `general.*` and `deepseek2.*` keys llama.cpp reads (convert_hf_to_gguf's DeepseekV2Model).
 * llama.cpp decides between one q_proj and the q_a/q_b pair by the layer count (27: V2-Lite),
 * and has no tied output head for this architecture: both are refused here rather than written
 * into a file it cannot load.
 */
export function deepseek2Metadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  const m = mlaDims(cfg);
  const layers = cfg.num_hidden_layers;
  if ((m.qLora === undefined) !== (layers === 27)) {
    fail(ErrorCodes.CONFIG, `[gguf] config.json: llama.cpp reads a DeepSeek model of ${layers} layers ${layers === 27 ? 'without' : 'with'} q_lora_rank (one q_proj only for 27 layers, V2-Lite), but q_lora_rank is ${String(cfg.q_lora_rank)}`, {
      option: 'q_lora_rank', value: cfg.q_lora_rank, expected: layers === 27 ? null : 'a positive integer',
    });
  }
  if (cfg.tie_word_embeddings) {
    fail(ErrorCodes.CONFIG, '[gguf] config.json: tie_word_embeddings is true, but llama.cpp needs a separate output head for a DeepSeek model', { option: 'tie_word_embeddings', value: true, expected: false });
  }
  const experts = positiveInt('n_routed_experts', cfg.n_routed_experts);
  positiveInt('num_experts_per_tok', cfg.num_experts_per_tok);
  positiveInt('moe_intermediate_size', cfg.moe_intermediate_size);
  if (cfg.num_experts_per_tok! > experts) {
    fail(ErrorCodes.CONFIG, `[gguf] config.json: num_experts_per_tok ${cfg.num_experts_per_tok} is more than the ${experts} experts`, { option: 'num_experts_per_tok', value: cfg.num_experts_per_tok, expected: `<= ${experts}` });
  }
  const r = deepseekRouting(cfg);
  const k = (key: string) => `deepseek2.${key}`;
  const u32 = (value: number): GgufValue => ({ type: 'u32', value });
  const md: Record<string, GgufValue> = {
    'general.architecture': { type: 'string', value: 'deepseek2' },
    'general.name': { type: 'string', value: name },
    [k('block_count')]: u32(layers),
    [k('context_length')]: u32(cfg.max_position_embeddings ?? 4096),
    [k('embedding_length')]: u32(cfg.hidden_size),
    [k('feed_forward_length')]: u32(cfg.intermediate_size),
    [k('attention.head_count')]: u32(cfg.num_attention_heads),
    // MLA caches one latent "head" for all heads.
    [k('attention.head_count_kv')]: u32(1),
    [k('rope.freq_base')]: { type: 'f32', value: cfg.rope_theta ?? 10000 },
    [k('attention.layer_norm_rms_epsilon')]: { type: 'f32', value: cfg.rms_norm_eps ?? 1e-6 },
    [k('vocab_size')]: u32(cfg.vocab_size),
    [k('leading_dense_block_count')]: u32(cfg.first_k_dense_replace ?? 0),
    ...(m.qLora !== undefined ? { [k('attention.q_lora_rank')]: u32(m.qLora) } : {}),
    [k('attention.kv_lora_rank')]: u32(m.kvLora),
    [k('attention.key_length')]: u32(m.kvLora + m.rope),
    [k('attention.value_length')]: u32(m.kvLora),
    [k('attention.key_length_mla')]: u32(m.nope + m.rope),
    [k('attention.value_length_mla')]: u32(m.v),
    [k('rope.dimension_count')]: u32(m.rope),
    [k('expert_count')]: u32(experts),
    [k('expert_used_count')]: u32(cfg.num_experts_per_tok!),
    [k('expert_feed_forward_length')]: u32(cfg.moe_intermediate_size!),
    [k('expert_shared_count')]: u32(cfg.n_shared_experts ?? 0),
    [k('expert_weights_scale')]: { type: 'f32', value: r.scale },
    // Written only when true, as the converter does (llama.cpp's default is false).
    ...(r.norm ? { [k('expert_weights_norm')]: { type: 'bool', value: true } } : {}),
    // llama_expert_gating_func_type: 1 softmax, 2 sigmoid.
    [k('expert_gating_func')]: u32(r.gating === 'softmax' ? 1 : 2),
  };
  // Group-limited routing (V3: 8 groups, the best 4 kept): llama.cpp picks the groups by their two
  // best scores summed when the count is above 1. Written as config.json states them, as the converter.
  if (cfg.n_group !== undefined) md[k('expert_group_count')] = u32(cfg.n_group);
  if (cfg.topk_group !== undefined) md[k('expert_group_used_count')] = u32(cfg.topk_group);
  const rs = cfg.rope_scaling;
  if (rs && (rs.rope_type ?? rs.type) === 'yarn' && typeof rs.factor === 'number') {
    Object.assign(md, yarnKeys('deepseek2', rs));
    // llama.cpp's attention scale grows by (1 + this * ln factor)^2, as the checkpoint's mscale_all_dim says.
    if (typeof rs.mscale_all_dim === 'number') md[k('rope.scaling.yarn_log_multiplier')] = { type: 'f32', value: 0.1 * rs.mscale_all_dim };
  } else if (rs && (rs.rope_type ?? rs.type) !== undefined && (rs.rope_type ?? rs.type) !== 'default') {
    fail(ErrorCodes.CONFIG, `[gguf] config.json: rope_scaling type "${String(rs.rope_type ?? rs.type)}" is not supported for a DeepSeek model; expected "yarn"`, { option: 'rope_scaling', value: rs, expected: 'yarn' });
  }
  return md;
}

/** One tensor a converter makes out of a checkpoint tensor: its layer-relative GGUF name, shape and values. */
export interface DerivedTensor {
  name: string;
  shape: number[];
  make(v: TensorValues): TensorValues;
}

/**
 * kv_b_proj [heads * (nope + v), kv_lora] split per head, as llama.cpp's converter does:
 * attn_k_b [heads, kv_lora, nope] (each head's key rows, transposed) and attn_v_b [heads, v,
 * kv_lora] (its value rows). Element moves only, so any element type (F32, F16, BF16) passes.
 */
export function deepseekKvB(cfg: LlamaConfig, shape: readonly number[]): DerivedTensor[] {
  const m = mlaDims(cfg);
  const heads = cfg.num_attention_heads, per = m.nope + m.v, R = m.kvLora;
  if (shape.length !== 2 || shape[0] !== heads * per || shape[1] !== R) {
    fail(ErrorCodes.MODEL, `[gguf] kv_b_proj has shape [${shape}], but the config says [${heads * per}, ${R}] (num_attention_heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank)`, {
      value: shape, expected: [heads * per, R],
    });
  }
  const like = (v: TensorValues, n: number) => (v.dtype === 'f32' ? new Float32Array(n) : new Uint16Array(n));
  return [
    {
      name: 'attn_k_b.weight', shape: [heads, R, m.nope],
      make(v) {
        const out = like(v, heads * R * m.nope), src = v.values;
        for (let h = 0; h < heads; h++) {
          for (let i = 0; i < m.nope; i++) {
            const row = (h * per + i) * R;
            for (let r = 0; r < R; r++) out[(h * R + r) * m.nope + i] = src[row + r];
          }
        }
        return { values: out, dtype: v.dtype } as TensorValues;
      },
    },
    {
      name: 'attn_v_b.weight', shape: [heads, m.v, R],
      make(v) {
        const out = like(v, heads * m.v * R), src = v.values;
        for (let h = 0; h < heads; h++) out.set(src.subarray((h * per + m.nope) * R, (h + 1) * per * R) as never, h * m.v * R);
        return { values: out, dtype: v.dtype } as TensorValues;
      },
    },
  ];
}

/**
 * kv_b_proj [heads * (nope + v), kv_lora] back from attn_k_b [heads, kv_lora, nope] and attn_v_b
 * [heads, v, kv_lora] (deepseekKvB's inverse): what the reference forward multiplies by.
 */
export function deepseekKvBJoin(heads: number, nope: number, v: number, kvLora: number, kb: Float32Array, vb: Float32Array): Float32Array {
  const per = nope + v, R = kvLora;
  const out = new Float32Array(heads * per * R);
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < nope; i++) {
      const row = (h * per + i) * R;
      for (let r = 0; r < R; r++) out[row + r] = kb[(h * R + r) * nope + i];
    }
    out.set(vb.subarray(h * v * R, (h + 1) * v * R), (h * per + nope) * R);
  }
  return out;
}
