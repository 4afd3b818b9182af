// The model configuration the reference forward (llama.ts) runs: config.json validated, Hugging
// Face's defaults filled in, and what each supported family adds (Qwen2 biases, Qwen3 q/k norms,
// Gemma 3, Llama 3 rope scaling) made explicit; and the tensor names the forward reads.
import { ErrorCodes, fail } from '../errors.js';
import { withConfigDefaults } from '../io/config.js';
import { checkConfigTensors, linearRopeFactor, llama3RopeFactors, type ConfigTensor, phi3LongRope, phi3RopeDims } from '../convert/arch/index.js';
import { deepseekRouting, mlaDims } from '../convert/arch/deepseek.js';

/** Hugging Face LlamaConfig fields the forward uses (snake_case, as in config.json). */
export interface LlamaConfig {
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  vocab_size: number;
  rms_norm_eps: number;
  rope_theta: number;
  tie_word_embeddings: boolean;
  /** Defaults to hidden_size / num_attention_heads. */
  head_dim?: number;
  max_position_embeddings?: number;
  /** config.json's model_type ('llama' when absent): decides the GGUF q/k layout (see quantized.ts). */
  model_type?: string;
  /**
   * An RMSNorm over each head of q and of k before the rotation (self_attn.q_norm / k_norm, one
   * weight per head dimension): Qwen3. Set for model_type "qwen3".
   */
  qk_norm?: boolean;
  /** The q/k norms span the whole projection (OLMo 2, OLMoE) instead of one head. */
  qk_norm_whole?: boolean;
  /** Gemma 1, 2 or 3 (model_type "gemma", "gemma2", "gemma3_text"): see GemmaOptions. */
  gemma?: GemmaOptions;
  /** Biases on the q, k and v projections (self_attn.{q,k,v}_proj.bias): Qwen2, or attention_bias. */
  qkv_bias?: boolean;
  /**
   * What each rotary frequency is divided by (head_dim/2 values), from config.json's rope_scaling:
   * "llama3" (Llama 3.1+, see llama3RopeFactors) or "linear" (one factor). Absent: none.
   */
  rope_factors?: Float32Array;
  /**
   * Phi-3 (model_type "phi3"): q/k/v in one self_attn.qkv_proj, gate and up in one mlp.gate_up_proj
   * (gate first), only the first `rotary_dims` of each head rotated, and LongRoPE when
   * rope_scaling says so: the short factors up to `original` positions, the long ones beyond, cos
   * and sin scaled by `attnFactor`.
   */
  phi3?: { rotaryDims: number; longrope?: { short: Float32Array; long: Float32Array; original: number; attnFactor: number } };
  /** Per layer: true where q and k are not rotated (SmolLM3: no_rope_layers 0, every 4th layer). */
  no_rope?: boolean[];
  /**
   * OLMo 2: no norm before attention or the FFN, one after each (post_attention_layernorm,
   * post_feedforward_layernorm), and q_norm / k_norm over the whole q and k projections.
   */
  olmo2?: boolean;
  /**
   * Granite: embeddings times `embedding`, each residual branch times `residual` before it is
   * added, attention scores times `attention` (instead of 1/sqrt(head_dim)), logits divided by `logits`.
   */
  granite?: { embedding: number; residual: number; attention: number; logits: number };
  /**
   * MoE FFN (Mixtral: block_sparse_moe, Qwen3-MoE: mlp.experts): a router picks `used` of
   * `experts` per token (softmax over all, the top `used`, renormalised unless `unnormalized`), each a SwiGLU of width
   * `ffn`; the output is their weighted sum.
   */
  moe?: {
    experts: number; used: number; ffn: number; names: 'mixtral' | 'qwen' | 'deepseek';
    /** Qwen3-MoE with norm_topk_prob false (its config class's default): the picked experts keep their softmax probabilities. */
    unnormalized?: true;
    /** DeepSeek: see DeepseekMoe. */
    deepseek?: DeepseekMoe;
    /**
     * Qwen2-MoE: one shared expert (mlp.shared_expert) of this width, added to the experts' sum
     * times sigmoid(shared_expert_gate . x).
     */
    gatedShared?: number;
  };
  /**
   * DeepSeek-V2/V3 multi-head latent attention: q from x (q_proj) or through a rank-qLora pair
   * (q_a_proj, q_a_layernorm, q_b_proj); a latent of kvLora values and one rope key of `rope`
   * dims shared by all heads from kv_a_proj_with_mqa; the latent, normalised (kv_a_layernorm),
   * gives every head's `nope` key dims and `v` value dims through kv_b_proj. A head's q and k are
   * its nope dims then its rope dims, whose adjacent pairs are rotated. head_dim is nope + rope.
   */
  mla?: { qLora?: number; kvLora: number; nope: number; rope: number; v: number };
  /**
   * YaRN as DeepSeek's rotary embedding computes it (rope_scaling type "yarn"; the Qwen families'
   * default YaRN is the case mscale 1, mscaleAllDim 0): frequencies blended
   * between theta^(-2i/d) and that over `factor` by a ramp over the wavelengths that fit
   * `original` positions (betaFast..betaSlow rotations), cos and sin times `attentionFactor`
   * (rope_scaling.attention_factor) when the config gives one, else, as transformers and
   * llama.cpp compute it, mscale(factor, mscale) / mscale(factor, mscaleAllDim) when both are
   * non-zero and mscale(factor, 1) otherwise; attention scores times
   * mscale(factor, mscaleAllDim)^2, where mscale(s, m) = 0.1 m ln s + 1.
   */
  yarn?: { factor: number; original: number; betaFast: number; betaSlow: number; mscale: number; mscaleAllDim: number; truncate?: false; attentionFactor?: number };
  /**
   * gpt-oss (model_type gpt_oss; its checkpoint read through convert/gpt-oss.ts): biases on q, k, v
   * and o (qkv_bias, and o_proj.bias), a learned sink logit per head that joins every softmax
   * (self_attn.sinks), `sliding` layers attending to the last `window` positions, and MoE experts
   * with biases whose SwiGLU is (min(g, limit) * sigmoid(alpha * min(g, limit))) * (clamp(u, -limit,
   * limit) + 1), chosen by the router's logits plus its bias (mlp.gate.bias), softmax over the chosen.
   */
  gptOss?: { sliding: boolean[]; window: number; alpha: number; limit: number };
  /**
   * GPT-2 (model_type gpt2; its checkpoint read through convert/gpt2.ts): learned positions added to
   * the embeddings (model.embed_positions), LayerNorms with biases (epsilon `eps`) in place of
   * RMSNorms, q, k and v from one biased projection, no rotation, a biased o_proj, and an FFN of
   * up_proj, GELU (tanh) and down_proj, both biased.
   */
  gpt2?: { eps: number; positions: number };
  /**
   * GPT-NeoX (model_type gpt_neox: Pythia; read through convert/gpt-neox.ts): GPT-2's LayerNorms and
   * biased projections, with rotary positions on the first `rotaryDims` of each head (NeoX's
   * rotate-half), attention and FFN fed the same input and both added (`parallel`), and GELU exact
   * (erf, hidden_act "gelu") or tanh.
   */
  neox?: { eps: number; rotaryDims: number; parallel: boolean; exactGelu: boolean };
  /**
   * Phi-1/1.5/2 (model_type phi; read through convert/phi2.ts): NeoX's LayerNorm family with q, k
   * and v apart (biased), one LayerNorm feeding both attention and the FFN (added in parallel),
   * rotary positions on the first `rotaryDims` of each head, GELU (tanh), a biased head.
   */
  phi2?: { eps: number; rotaryDims: number };
  /**
   * StableLM (model_type stablelm: StableLM-2, StableLM-3B-4E1T): Llama's blocks with LayerNorms
   * (weight and bias, epsilon `eps`) in place of RMSNorms, rotary positions on the first
   * `rotaryDims` of each head, q/k/v biases when use_qkv_bias.
   */
  stablelm?: { eps: number; rotaryDims: number };
  /**
   * StarCoder2 (model_type starcoder2; read through convert/phi2.ts): GPT-2's LayerNorm family with
   * q, k and v apart (biased), full rotary positions, and every layer attending to the last
   * `window` positions when config.json sets sliding_window.
   */
  starcoder2?: { eps: number; window?: number };
}

/**
 * DeepSeek's MoE layers (DeepseekV2MoE, DeepseekV3MoE): the first `denseLayers` layers are dense
 * SwiGLUs of intermediate_size; the others score experts by softmax (V2) or sigmoid (V3), choose
 * by the scores plus e_score_correction_bias (V3, `bias`) within the best `groups.used` of
 * `groups.count` groups (by each group's best score, V2, or its two best summed, V3), weight the
 * chosen by their scores (renormalised unless moe.unnormalized), times `scale`, and add a shared
 * SwiGLU of width `shared` (n_shared_experts * moe_intermediate_size; 0: none).
 */
export interface DeepseekMoe {
  gating: 'softmax' | 'sigmoid';
  bias: boolean;
  scale: number;
  shared: number;
  denseLayers: number;
  groups?: { count: number; used: number; by: 'max' | 'top2' };
}

/**
 * What Gemma does beyond Llama (Hugging Face GemmaForCausalLM, Gemma2ForCausalLM,
 * Gemma3ForCausalLM). Every version: RMSNorms multiply by 1 + w; embeddings are scaled by
 * sqrt(hidden_size); the FFN is GELU (tanh) gated; queries are scaled by query_pre_attn_scalar^-1/2
 * (Gemma 1: head_dim). Gemma 1 has Llama's two norms per block and nothing more. Gemma 2 and 3 add
 * norms after attention and after the FFN (post_attention_layernorm, pre_/post_feedforward_
 * layernorm); local layers (Gemma 2: every other one, Gemma 3: five of six) attend to the last
 * `slidingWindow` positions, with rope base `localRopeTheta` (Gemma 3: 10000; Gemma 2:
 * rope_theta); attention scores (Gemma 2) and logits may be soft-capped: cap * tanh(x / cap).
 * Gemma 3 adds q/k norms.
 */
export interface GemmaOptions {
  version: 1 | 2 | 3;
  slidingWindow: number;
  /** Per layer: true for local (sliding-window) attention. */
  sliding: boolean[];
  localRopeTheta: number;
  queryPreAttnScalar: number;
  attnLogitSoftcapping?: number;
  finalLogitSoftcapping?: number;
}

const num = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** llama.cpp's LLAMA_MAX_LAYERS: no model it runs has more. */
const MAX_LAYERS = 512;

/**
 * Validates a parsed config.json (or the ModelConfig of src/io's readConfig, through its `raw`)
 * and fills the defaults Hugging Face's LlamaConfig uses (num_key_value_heads =
 * num_attention_heads, rms_norm_eps 1e-6, rope_theta 10000, untied head).
 * Rejects what this forward does not implement (rope_scaling other than "llama3" and "linear",
 * attention_bias with model types other than llama, mlp_bias, activations other than silu). model_type
 * "qwen2" has q/k/v biases.
 * model_type "qwen3" adds the per-head q/k norms (Qwen3 is Qwen2 without biases, with those norms);
 * "gemma", "gemma2" and "gemma3_text" the Gemma 1, 2 and 3 text models (GemmaOptions, with their
 * transformers config classes' defaults).
 */
export function llamaConfig(json: unknown): LlamaConfig {
  if (typeof json !== 'object' || json === null) {
    fail(ErrorCodes.MODEL, '[llama] config must be an object (a parsed config.json)', { option: 'config', value: json });
  }
  // readConfig's ModelConfig keeps the file's own snake_case keys in `raw`.
  const o = json as Record<string, unknown>;
  // The model type's defaults, as readConfig gives them (a no-op on its result's raw).
  const j = withConfigDefaults((o.hidden_size === undefined && typeof o.raw === 'object' && o.raw !== null ? o.raw : o) as Record<string, unknown>);
  const int = (key: string, dflt?: number): number => {
    const v = j[key] ?? dflt;
    if (!num(v) || !Number.isInteger(v) || v <= 0) {
      fail(ErrorCodes.MODEL, `[llama] config.${key} must be a positive integer but got ${String(v)}`, { option: key, value: v, expected: 'a positive integer' });
    }
    return v;
  };
  const pos = (key: string, dflt: number): number => {
    const v = j[key] ?? dflt;
    if (!num(v) || v <= 0) fail(ErrorCodes.MODEL, `[llama] config.${key} must be a positive number but got ${String(v)}`, { option: key, value: v, expected: 'a positive number' });
    return v;
  };
  const unsupported = (key: string, ok: (v: unknown) => boolean, expected: string) => {
    if (j[key] !== undefined && !ok(j[key])) {
      fail(ErrorCodes.MODEL, `[llama] config.${key} = ${JSON.stringify(j[key])} is not supported; expected ${expected}`, { option: key, value: j[key], expected });
    }
  };
  const heads = int('num_attention_heads');
  const gemma = j.model_type === 'gemma3_text' ? 3 : j.model_type === 'gemma2' ? 2 : j.model_type === 'gemma' ? 1 : 0;
  const cfg: LlamaConfig = {
    hidden_size: int('hidden_size'),
    intermediate_size: int('intermediate_size'),
    num_hidden_layers: int('num_hidden_layers'),
    num_attention_heads: heads,
    num_key_value_heads: int('num_key_value_heads', heads),
    vocab_size: int('vocab_size'),
    rms_norm_eps: pos('rms_norm_eps', 1e-6),
    rope_theta: pos('rope_theta', 10000),
    tie_word_embeddings: j.tie_word_embeddings === true,
  };
  // Per-layer flags are built from the count below, before any tensor is seen (checkTensors
  // compares it with the checkpoint): bound it as llama.cpp does (LLAMA_MAX_LAYERS).
  if (cfg.num_hidden_layers > MAX_LAYERS) {
    fail(ErrorCodes.MODEL, `[llama] config.num_hidden_layers ${cfg.num_hidden_layers} is more than the ${MAX_LAYERS} layers llama.cpp supports`, { option: 'num_hidden_layers', value: cfg.num_hidden_layers, expected: `<= ${MAX_LAYERS}` });
  }
  if (j.tie_word_embeddings !== undefined && typeof j.tie_word_embeddings !== 'boolean') {
    fail(ErrorCodes.MODEL, `[llama] config.tie_word_embeddings must be a boolean but got ${JSON.stringify(j.tie_word_embeddings)}`, { option: 'tie_word_embeddings', value: j.tie_word_embeddings, expected: 'boolean' });
  }
  if (j.head_dim !== undefined && j.head_dim !== null) cfg.head_dim = int('head_dim');
  if (j.max_position_embeddings !== undefined) cfg.max_position_embeddings = int('max_position_embeddings');
  if (typeof j.model_type === 'string') cfg.model_type = j.model_type;
  if (j.model_type === 'qwen3') cfg.qk_norm = true;
  if (j.model_type === 'mixtral' || j.model_type === 'qwen3_moe' || j.model_type === 'qwen2_moe') {
    const qwen = j.model_type !== 'mixtral';
    const { experts, used } = expertCounts(qwen ? 'num_experts' : 'num_local_experts', int);
    unsupported('decoder_sparse_step', (v) => v === 1, '1');
    unsupported('mlp_only_layers', (v) => Array.isArray(v) && v.length === 0, '[]');
    cfg.moe = { experts, used, ffn: qwen ? int('moe_intermediate_size') : cfg.intermediate_size, names: qwen ? 'qwen' : 'mixtral', ...(qwen && j.norm_topk_prob !== true ? { unnormalized: true as const } : {}) };
    if (j.model_type === 'qwen3_moe') cfg.qk_norm = true;
    if (j.model_type === 'qwen2_moe') cfg.moe.gatedShared = int('shared_expert_intermediate_size');
  }
  if (j.model_type === 'deepseek_v2' || j.model_type === 'deepseek_v3') deepseek(j, cfg, int);
  // The GELU a family runs (config key, default, the accepted names, the first one expected).
  const activation = (key: string, dflt: string, accepted: string[]): string => {
    const act = j[key] ?? dflt;
    if (!accepted.includes(String(act))) {
      fail(ErrorCodes.MODEL, `[llama] config.${key} = ${JSON.stringify(act)} is not supported for ${String(j.model_type)}; expected "${accepted[0]}"`, { option: key, value: act, expected: accepted[0] });
    }
    return act as string;
  };
  if (j.model_type === 'gpt2') {
    activation('activation_function', 'gelu_new', ['gelu_new', 'gelu_pytorch_tanh']);
    cfg.gpt2 = { eps: pos('layer_norm_epsilon', 1e-5), positions: int('max_position_embeddings', 1024) };
  }
  if (j.model_type === 'starcoder2') {
    activation('hidden_act', 'gelu_pytorch_tanh', ['gelu_pytorch_tanh', 'gelu_new']);
    unsupported('use_bias', (v) => v === true, 'true');
    cfg.starcoder2 = { eps: pos('norm_epsilon', 1e-5), ...(j.sliding_window !== undefined && j.sliding_window !== null ? { window: int('sliding_window') } : {}) };
  }
  if (j.model_type === 'stablelm') {
    unsupported('qk_layernorm', (v) => v === false, 'false');
    unsupported('use_parallel_residual', (v) => v === false, 'false');
    const pct = j.partial_rotary_factor === undefined ? 0.25 : pos('partial_rotary_factor', 1);
    cfg.stablelm = { eps: pos('layer_norm_eps', 1e-5), rotaryDims: Math.trunc(pct * (cfg.head_dim ?? cfg.hidden_size / heads)) };
    if (j.use_qkv_bias === true) cfg.qkv_bias = true;
  }
  if (j.model_type === 'phi') {
    activation('hidden_act', 'gelu_new', ['gelu_new', 'gelu_pytorch_tanh']);
    unsupported('qk_layernorm', (v) => v === false, 'false');
    const pct = j.partial_rotary_factor === undefined ? 0.5 : pos('partial_rotary_factor', 1);
    cfg.phi2 = { eps: pos('layer_norm_eps', 1e-5), rotaryDims: Math.trunc(pct * (cfg.head_dim ?? cfg.hidden_size / heads)) };
  }
  if (j.model_type === 'gpt_neox') {
    const act = activation('hidden_act', 'gelu', ['gelu', 'gelu_new', 'gelu_fast', 'gelu_pytorch_tanh']);
    const headDim = cfg.hidden_size / heads;
    // GPTNeoXConfig's default share is 0.25.
    const pct = j.rotary_pct === undefined ? 0.25 : pos('rotary_pct', 1);
    cfg.rope_theta = pos('rotary_emb_base', cfg.rope_theta);
    cfg.neox = { eps: pos('layer_norm_eps', 1e-5), rotaryDims: Math.trunc(pct * headDim), parallel: j.use_parallel_residual !== false, exactGelu: act === 'gelu' };
  }
  if (j.model_type === 'gpt_oss') {
    const { experts, used } = expertCounts('num_local_experts', int);
    cfg.moe = { experts, used, ffn: cfg.intermediate_size, names: 'qwen' };
    cfg.qkv_bias = true;
    const types = Array.isArray(j.layer_types) && j.layer_types.length === cfg.num_hidden_layers ? j.layer_types : undefined;
    cfg.gptOss = {
      // layer_types when config.json has them; otherwise even layers slide (GptOssConfig's default).
      sliding: Array.from({ length: cfg.num_hidden_layers }, (_, l) => (types ? types[l] === 'sliding_attention' : l % 2 === 0)),
      window: int('sliding_window', 128), alpha: 1.702, limit: pos('swiglu_limit', 7),
    };
  }
  if (j.model_type === 'granite') {
    cfg.granite = { embedding: pos('embedding_multiplier', 1), residual: pos('residual_multiplier', 1), attention: pos('attention_multiplier', 1), logits: pos('logits_scaling', 1) };
  }
  if (j.model_type === 'olmo2') {
    cfg.olmo2 = true;
    cfg.qk_norm = true;
  }
  // OLMoE: Llama's pre-norm blocks with OLMo 2's q/k norms over the whole projections, and MoE
  // layers whose picked experts keep their softmax probabilities unless norm_topk_prob.
  if (j.model_type === 'olmoe') {
    const { experts, used } = expertCounts('num_experts', int);
    cfg.moe = { experts, used, ffn: cfg.intermediate_size, names: 'qwen', ...(j.norm_topk_prob !== true ? { unnormalized: true as const } : {}) };
    cfg.qk_norm = true;
    cfg.qk_norm_whole = true;
    unsupported('clip_qkv', (v) => v === null, 'null');
  }
  if (j.model_type === 'smollm3') {
    // no_rope_layers: 1 where a layer uses rope; without it every 4th layer has none (llama.cpp's step).
    const flags = Array.isArray(j.no_rope_layers) && j.no_rope_layers.length === cfg.num_hidden_layers ? j.no_rope_layers : undefined;
    cfg.no_rope = Array.from({ length: cfg.num_hidden_layers }, (_, l) => (flags ? flags[l] === 0 : (l + 1) % 4 === 0));
  }
  if (gemma === 1) {
    // Gemma 1: every layer global, queries scaled by 1/sqrt(head_dim), nothing capped.
    cfg.gemma = { version: 1, slidingWindow: 0, sliding: new Array<boolean>(cfg.num_hidden_layers).fill(false), localRopeTheta: cfg.rope_theta, queryPreAttnScalar: cfg.head_dim ?? cfg.hidden_size / heads };
  } else if (gemma) {
    if (gemma === 3) cfg.qk_norm = true;
    const window = int('sliding_window');
    // Gemma 2 alternates local and global layers; Gemma 3 has sliding_window_pattern (6).
    const pattern = gemma === 2 ? 2 : int('sliding_window_pattern', 6);
    const types = Array.isArray(j.layer_types) && j.layer_types.length === cfg.num_hidden_layers ? j.layer_types : undefined;
    const cap = (key: string) => (j[key] !== undefined && j[key] !== null ? pos(key, 0) : undefined);
    cfg.gemma = {
      version: gemma,
      slidingWindow: window,
      // layer_types when config.json has them; otherwise every pattern-th layer is global.
      sliding: Array.from({ length: cfg.num_hidden_layers }, (_, l) => (types ? types[l] === 'sliding_attention' : (l + 1) % pattern !== 0)),
      localRopeTheta: gemma === 3 ? pos('rope_local_base_freq', 10000) : cfg.rope_theta,
      queryPreAttnScalar: pos('query_pre_attn_scalar', cfg.head_dim ?? cfg.hidden_size / heads),
      attnLogitSoftcapping: cap('attn_logit_softcapping'),
      finalLogitSoftcapping: cap('final_logit_softcapping'),
    };
  }
  const rs = j.rope_scaling as Record<string, unknown> | null | undefined;
  const ropeType = rs && typeof rs === 'object' ? rs.rope_type ?? rs.type : undefined;
  if (j.model_type === 'phi3') {
    const partial = j.partial_rotary_factor === undefined ? 1 : pos('partial_rotary_factor', 1);
    const rotaryDims = phi3RopeDims({ partial_rotary_factor: partial, hidden_size: cfg.hidden_size, num_attention_heads: heads });
    if (rotaryDims % 2 !== 0 || rotaryDims > (cfg.head_dim ?? cfg.hidden_size / heads)) {
      fail(ErrorCodes.MODEL, `[llama] config.partial_rotary_factor ${partial} gives ${rotaryDims} rotated dimensions; expected an even number up to head_dim`, { option: 'partial_rotary_factor', value: partial });
    }
    const lr = rs ? phi3LongRope({ ...cfg, rope_scaling: rs, partial_rotary_factor: partial, original_max_position_embeddings: num(j.original_max_position_embeddings) ? j.original_max_position_embeddings : undefined }) : undefined;
    cfg.phi3 = { rotaryDims, ...(lr ? { longrope: { short: lr.short, long: lr.long, original: j.original_max_position_embeddings as number, attnFactor: lr.attnFactor } } : {}) };
  } else {
    // YaRN: DeepSeek's (with its mscales), or the Qwen families' (transformers' default YaRN, whose
    // attention factor 0.1 ln(factor) + 1 scales cos and sin: mscale 1, mscale_all_dim 0 below).
    const qwen = ['qwen2', 'qwen3', 'qwen2_moe', 'qwen3_moe', 'gpt_oss'].includes(String(j.model_type));
    const yarn = (cfg.mla !== undefined || qwen) && ropeType === 'yarn';
    unsupported('rope_scaling', (v) => v === null || ((((ropeType === 'llama3' || ropeType === 'linear') && !cfg.mla) || yarn) && num((v as Record<string, unknown>).factor)),
      cfg.mla ? 'null, or {"type": "yarn", "factor": ...}' : `null, or {"rope_type": "llama3" | "linear"${qwen ? ' | "yarn"' : ''}, "factor": ...}`);
    if (yarn) {
      const r = rs as Record<string, unknown>;
      const opt = (key: string, dflt: number) => {
        const v = r[key] ?? dflt;
        if (!num(v) || v < 0) fail(ErrorCodes.MODEL, `[llama] config.rope_scaling.${key} must be a number >= 0 but got ${String(v)}`, { option: `rope_scaling.${key}`, value: v });
        return v;
      };
      cfg.yarn = {
        factor: r.factor as number, original: opt('original_max_position_embeddings', qwen ? cfg.max_position_embeddings ?? 4096 : 4096), betaFast: opt('beta_fast', 32), betaSlow: opt('beta_slow', 1),
        mscale: opt('mscale', 1), mscaleAllDim: opt('mscale_all_dim', 0),
        // transformers' truncate (default true): the ramp's ends rounded to whole dimensions.
        ...(r.truncate === false ? { truncate: false as const } : {}),
        ...(r.attention_factor != null ? { attentionFactor: opt('attention_factor', 1) } : {}),
      };
    }
    const half = (cfg.head_dim ?? cfg.hidden_size / heads) / 2;
    if (ropeType === 'llama3') cfg.rope_factors = llama3RopeFactors(rs, cfg.rope_theta, half * 2);
    else if (ropeType === 'linear') cfg.rope_factors = new Float32Array(half).fill(linearRopeFactor(rs)!);
  }
  // Qwen2 (and Qwen2-MoE) has q/k/v biases without saying so; a Llama config says attention_bias
  // (which also biases o_proj, which this forward does not implement).
  if (j.model_type === 'qwen2' || j.model_type === 'qwen2_moe') cfg.qkv_bias = true;
  else if (!['gpt_oss', 'gpt_neox', 'phi', 'stablelm', 'starcoder2'].includes(String(j.model_type))) unsupported('attention_bias', (v) => v === false, 'false');
  unsupported('mlp_bias', (v) => v === false, 'false');
  if (gpt2Like(cfg)) {
    // activation_function / hidden_act were checked above.
  } else if (gemma) {
    unsupported('hidden_activation', (v) => v === 'gelu_pytorch_tanh' || v === null, '"gelu_pytorch_tanh"');
    // Gemma 1's first config.json files said hidden_act "gelu" for the tanh GELU the model was
    // trained with (GemmaMLP then read hidden_activation, defaulting to it; llama.cpp runs it too).
    if (gemma === 1) unsupported('hidden_act', (v) => v === 'gelu' || v === 'gelu_pytorch_tanh', '"gelu" or "gelu_pytorch_tanh" (both run as the tanh GELU)');
  } else {
    unsupported('hidden_act', (v) => v === 'silu', '"silu"');
  }
  checkShape(cfg);
  return cfg;
}

/** A MoE config's expert count (under `key`) and num_experts_per_tok, which must not exceed it. */
function expertCounts(key: string, int: (key: string) => number): { experts: number; used: number } {
  const experts = int(key), used = int('num_experts_per_tok');
  if (used > experts) fail(ErrorCodes.MODEL, `[llama] config.num_experts_per_tok ${used} is more than the ${experts} experts`, { option: 'num_experts_per_tok', value: used, expected: `<= ${experts}` });
  return { experts, used };
}

/**
 * DeepSeek-V2/V3 (model_type deepseek_v2, deepseek_v3): MLA, MoE with shared experts and dense
 * first layers, as DeepseekV2/V3ForCausalLM compute them (their config classes' defaults).
 */
function deepseek(j: Record<string, unknown>, cfg: LlamaConfig, int: (key: string, dflt?: number) => number): void {
  const d = j as Parameters<typeof mlaDims>[0] & { model_type?: string };
  const m = mlaDims(d);
  cfg.mla = m;
  // Every head has its own keys and values (num_key_value_heads is the head count).
  cfg.head_dim = m.nope + m.rope;
  cfg.num_key_value_heads = cfg.num_attention_heads;
  const { experts, used } = expertCounts('n_routed_experts', int), ffn = int('moe_intermediate_size');
  if ((j.moe_layer_freq ?? 1) !== 1) fail(ErrorCodes.MODEL, `[llama] config.moe_layer_freq ${String(j.moe_layer_freq)} is not supported; expected 1`, { option: 'moe_layer_freq', value: j.moe_layer_freq, expected: 1 });
  const r = deepseekRouting(d);
  const v3 = j.model_type === 'deepseek_v3';
  const method = typeof j.topk_method === 'string' ? j.topk_method : v3 ? 'noaux_tc' : 'greedy';
  if (!['greedy', 'group_limited_greedy', 'noaux_tc'].includes(method)) {
    fail(ErrorCodes.MODEL, `[llama] config.topk_method "${method}" is not supported; expected "greedy", "group_limited_greedy" or "noaux_tc"`, { option: 'topk_method', value: method });
  }
  const count = j.n_group === undefined || j.n_group === null ? 1 : int('n_group');
  const groupsUsed = j.topk_group === undefined || j.topk_group === null ? count : int('topk_group');
  if (experts % count !== 0 || groupsUsed > count) {
    fail(ErrorCodes.MODEL, `[llama] config.n_group ${count} / topk_group ${groupsUsed} do not fit ${experts} experts`, { option: 'n_group', value: count, expected: `a divisor of ${experts}, and topk_group <= n_group` });
  }
  const shared = j.n_shared_experts === undefined || j.n_shared_experts === null ? 0 : int('n_shared_experts');
  const dense = j.first_k_dense_replace === undefined || j.first_k_dense_replace === null ? 0 : (j.first_k_dense_replace as number);
  if (!Number.isInteger(dense) || dense < 0) fail(ErrorCodes.MODEL, `[llama] config.first_k_dense_replace must be an integer >= 0 but got ${String(dense)}`, { option: 'first_k_dense_replace', value: dense });
  cfg.moe = {
    experts, used, ffn, names: 'deepseek',
    ...(r.norm ? {} : { unnormalized: true as const }),
    deepseek: {
      gating: r.gating,
      bias: v3,
      // V2's code scales only weights it does not renormalise.
      scale: !v3 && r.norm ? 1 : r.scale,
      shared: shared * ffn,
      denseLayers: dense,
      ...(method !== 'greedy' && count > 1 && groupsUsed < count ? { groups: { count, used: groupsUsed, by: method === 'noaux_tc' ? 'top2' as const : 'max' as const } } : {}),
    },
  };
}

/** The LayerNorm families' epsilon (GPT-2, GPT-NeoX, Phi-2, StarCoder2, StableLM); undefined for RMSNorm models. */
export function layerNormEps(c: LlamaConfig): number | undefined {
  return (c.gpt2 ?? c.neox ?? c.phi2 ?? c.starcoder2 ?? c.stablelm)?.eps;
}

/** The LayerNorm families built like GPT-2 (biased projections, an ungated GELU FFN): all but StableLM. */
export function gpt2Like(c: LlamaConfig): boolean {
  return (c.gpt2 ?? c.neox ?? c.phi2 ?? c.starcoder2) !== undefined;
}

export interface Dims {
  dim: number; ffn: number; layers: number; heads: number; kvHeads: number; headDim: number;
  qDim: number; kvDim: number; vocab: number;
  /** Value dims per head (MLA: v_head_dim; otherwise headDim), and the attention output's width. */
  vHeadDim: number; attDim: number;
}

export function checkShape(c: LlamaConfig): Dims {
  const headDim = c.head_dim ?? c.hidden_size / c.num_attention_heads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) {
    fail(ErrorCodes.MODEL, `[llama] head dimension ${headDim} must be an even integer (hidden_size ${c.hidden_size} / num_attention_heads ${c.num_attention_heads}, or head_dim)`, {
      option: 'head_dim', value: headDim, expected: 'an even integer',
    });
  }
  if (c.num_attention_heads % c.num_key_value_heads !== 0) {
    fail(ErrorCodes.MODEL, `[llama] num_attention_heads ${c.num_attention_heads} must be a multiple of num_key_value_heads ${c.num_key_value_heads}`, {
      option: 'num_key_value_heads', value: c.num_key_value_heads, expected: `a divisor of ${c.num_attention_heads}`,
    });
  }
  return {
    dim: c.hidden_size, ffn: c.intermediate_size, layers: c.num_hidden_layers, heads: c.num_attention_heads,
    kvHeads: c.num_key_value_heads, headDim, qDim: c.num_attention_heads * headDim,
    kvDim: c.num_key_value_heads * headDim, vocab: c.vocab_size,
    vHeadDim: c.mla?.v ?? headDim, attDim: c.num_attention_heads * (c.mla?.v ?? headDim),
  };
}

/**
 * Refuses a config that contradicts the checkpoint's tensors (Llama-style names: through
 * familyView), as the GGUF converter does (checkConfigTensors): call it before llamaTensorNames
 * or LlamaModel.load enumerate the config's layers.
 */
export function checkTensors(c: LlamaConfig, tensors: readonly ConfigTensor[], source: string): void {
  // The experts' width under its own key only where it is not intermediate_size's (Qwen-MoE, DeepSeek).
  const moeFfn = c.moe && c.moe.ffn !== c.intermediate_size ? c.moe.ffn : undefined;
  checkConfigTensors({ ...c, moe_intermediate_size: moeFfn, kv_lora_rank: c.mla?.kvLora }, tensors, source, 'eval');
}

export const layerPrefix = (i: number) => `model.layers.${i}.`;

/** Every tensor name the forward reads, in load order. */
export function llamaTensorNames(config: LlamaConfig): string[] {
  const names = ['model.embed_tokens.weight'];
  if (gpt2Like(config)) {
    if (config.gpt2) names.push('model.embed_positions.weight');
    const attn = config.phi2 || config.starcoder2 ? ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj'] : ['self_attn.qkv_proj'];
    const parts = ['input_layernorm', ...attn, 'self_attn.o_proj', ...(config.phi2 ? [] : ['post_attention_layernorm']), 'mlp.up_proj', 'mlp.down_proj'];
    for (let i = 0; i < config.num_hidden_layers; i++) {
      const p = layerPrefix(i);
      for (const t of parts) names.push(`${p}${t}.weight`, `${p}${t}.bias`);
    }
    names.push('model.norm.weight', 'model.norm.bias');
    if (!config.tie_word_embeddings) names.push('lm_head.weight', ...(config.phi2 ? ['lm_head.bias'] : []));
    return names;
  }
  for (let i = 0; i < config.num_hidden_layers; i++) {
    const p = layerPrefix(i);
    if (config.phi3) {
      names.push(`${p}input_layernorm.weight`, `${p}self_attn.qkv_proj.weight`, `${p}self_attn.o_proj.weight`, `${p}post_attention_layernorm.weight`,
        `${p}mlp.gate_up_proj.weight`, `${p}mlp.down_proj.weight`);
      continue;
    }
    if (config.olmo2) {
      names.push(`${p}self_attn.q_proj.weight`, `${p}self_attn.k_proj.weight`, `${p}self_attn.v_proj.weight`, `${p}self_attn.q_norm.weight`, `${p}self_attn.k_norm.weight`,
        `${p}self_attn.o_proj.weight`, `${p}post_attention_layernorm.weight`, `${p}mlp.gate_proj.weight`, `${p}mlp.up_proj.weight`, `${p}mlp.down_proj.weight`,
        `${p}post_feedforward_layernorm.weight`);
      continue;
    }
    if (config.mla) {
      names.push(`${p}input_layernorm.weight`, ...mlaTensorNames(config.mla, p), `${p}self_attn.o_proj.weight`, `${p}post_attention_layernorm.weight`);
      const ds = config.moe?.deepseek;
      if (ds && i >= ds.denseLayers) names.push(...moeTensorNames(config.moe!, p));
      else names.push(`${p}mlp.gate_proj.weight`, `${p}mlp.up_proj.weight`, `${p}mlp.down_proj.weight`);
      continue;
    }
    names.push(`${p}input_layernorm.weight`, ...(config.stablelm ? [`${p}input_layernorm.bias`] : []), `${p}self_attn.q_proj.weight`, `${p}self_attn.k_proj.weight`, `${p}self_attn.v_proj.weight`);
    if (config.qkv_bias) names.push(`${p}self_attn.q_proj.bias`, `${p}self_attn.k_proj.bias`, `${p}self_attn.v_proj.bias`);
    if (config.qk_norm) names.push(`${p}self_attn.q_norm.weight`, `${p}self_attn.k_norm.weight`);
    names.push(`${p}self_attn.o_proj.weight`);
    if (config.gptOss) names.push(`${p}self_attn.o_proj.bias`, `${p}self_attn.sinks`);
    names.push(`${p}post_attention_layernorm.weight`, ...(config.stablelm ? [`${p}post_attention_layernorm.bias`] : []));
    if ((config.gemma?.version ?? 1) > 1) names.push(`${p}pre_feedforward_layernorm.weight`, `${p}post_feedforward_layernorm.weight`);
    if (config.moe) names.push(...moeTensorNames(config.moe, p, config.gptOss !== undefined));
    else names.push(`${p}mlp.gate_proj.weight`, `${p}mlp.up_proj.weight`, `${p}mlp.down_proj.weight`);
  }
  names.push('model.norm.weight', ...(config.stablelm ? ['model.norm.bias'] : []));
  if (!config.tie_word_embeddings) names.push('lm_head.weight');
  return names;
}

/**
 * A MoE layer's router (and DeepSeek-V3's correction bias), then each expert's gate, up and down
 * matrices, then DeepSeek's shared experts' (Hugging Face names).
 */
export function moeTensorNames(moe: NonNullable<LlamaConfig['moe']>, prefix: string, biased = false): string[] {
  const names = [moe.names === 'mixtral' ? `${prefix}block_sparse_moe.gate.weight` : `${prefix}mlp.gate.weight`];
  if (moe.deepseek?.bias) names.push(`${prefix}mlp.gate.e_score_correction_bias`);
  if (biased) names.push(`${prefix}mlp.gate.bias`);
  for (let e = 0; e < moe.experts; e++) {
    const x = moe.names === 'mixtral' ? `${prefix}block_sparse_moe.experts.${e}.` : `${prefix}mlp.experts.${e}.`;
    names.push(...(moe.names === 'mixtral' ? ['w1', 'w3', 'w2'] : ['gate_proj', 'up_proj', 'down_proj']).map((w) => `${x}${w}.weight`));
    if (biased) names.push(...['gate_proj', 'up_proj', 'down_proj'].map((w) => `${x}${w}.bias`));
  }
  if (moe.deepseek?.shared) names.push(...['gate_proj', 'up_proj', 'down_proj'].map((w) => `${prefix}mlp.shared_experts.${w}.weight`));
  if (moe.gatedShared) names.push(...['gate_proj', 'up_proj', 'down_proj'].map((w) => `${prefix}mlp.shared_expert.${w}.weight`), `${prefix}mlp.shared_expert_gate.weight`);
  return names;
}

/** The attention tensors of an MLA layer, in load order (o_proj aside). */
export function mlaTensorNames(mla: NonNullable<LlamaConfig['mla']>, p: string): string[] {
  const q = mla.qLora ? [`${p}self_attn.q_a_proj.weight`, `${p}self_attn.q_a_layernorm.weight`, `${p}self_attn.q_b_proj.weight`] : [`${p}self_attn.q_proj.weight`];
  return [...q, `${p}self_attn.kv_a_proj_with_mqa.weight`, `${p}self_attn.kv_a_layernorm.weight`, `${p}self_attn.kv_b_proj.weight`];
}
