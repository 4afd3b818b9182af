// Generated Hugging Face checkpoints of every family webquant converts, shared by the llama.cpp
// comparisons (test/convert/llamacpp.test.ts runs them in llama.cpp; bench/convert-reference.ts
// records what llama.cpp's own converter writes for them).
import { fp8Weights, type GenTensor } from './data.js';
import { DEEPSEEK_LLM_PRE_TOKENIZER, DEEPSEEK_V3_PRE_TOKENIZER } from '../convert/tokenizer-fixtures.js';

/** Shape and value scales of a generated decoder (uniform values: scale * [-0.5, 0.5) + offset). */
export interface Decoder {
  H: number; HEADS: number; KV: number; HD: number; FF: number; V: number; LAYERS: number;
  embed: number; head: number; qk: number; v?: number; o?: number; mlp?: number;
  /** Scale and offset of the norm weights. */
  norm: [number, number];
  /** Per-head q/k norms (Qwen3, Gemma 3), scale and offset. */
  qkNorm?: [number, number];
  /** Gemma 3's pre-/post-feedforward norms. */
  gemma?: boolean;
  /** Scale of q/k/v biases (Qwen2). */
  bias?: number;
  /** No lm_head: the embedding is the output head too (Gemma 2, whose converter drops lm_head). */
  tied?: boolean;
  /** Scale and offset of the final norm, when not `norm`'s. */
  finalNorm?: [number, number];
  /** Phi-3's fused self_attn.qkv_proj and mlp.gate_up_proj. */
  fused?: boolean;
  /** OLMo 2's layers: no norm before attention or the FFN, one after each; q/k norms over the whole projection. */
  olmo2?: boolean;
  /** MoE layers: a router and this many experts, named as Mixtral or Qwen-MoE name them. */
  moe?: { experts: number; names: 'mixtral' | 'qwen'; router?: number; /** Qwen2-MoE: a shared expert of this width and its gate. */ shared?: number };
}

/** The tensors of a generated Hugging Face decoder, with a separate output head (lm_head) unless tied. */
export function decoder(seed: number, d: Decoder): { name: string; dtype: string; shape: number[]; data: Float32Array }[] {
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const t = (name: string, shape: number[], scale = 0.2, offset = 0) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1), scale).map((x) => x + offset) });
  const { H, HEADS, KV, HD, FF, V } = d;
  const tensors = [t('model.embed_tokens.weight', [V, H], d.embed), t('model.norm.weight', [H], ...(d.finalNorm ?? d.norm))];
  if (!d.tied) tensors.push(t('lm_head.weight', [V, H], d.head));
  for (let l = 0; l < d.LAYERS; l++) {
    const p = `model.layers.${l}.`;
    if (!d.olmo2) tensors.push(t(`${p}input_layernorm.weight`, [H], ...d.norm), t(`${p}post_attention_layernorm.weight`, [H], ...d.norm));
    if (d.gemma) tensors.push(t(`${p}pre_feedforward_layernorm.weight`, [H], ...d.norm), t(`${p}post_feedforward_layernorm.weight`, [H], ...d.norm));
    if (d.olmo2) {
      tensors.push(t(`${p}self_attn.q_proj.weight`, [HEADS * HD, H], d.qk), t(`${p}self_attn.k_proj.weight`, [KV * HD, H], d.qk), t(`${p}self_attn.v_proj.weight`, [KV * HD, H], d.v),
        t(`${p}self_attn.q_norm.weight`, [HEADS * HD], ...d.qkNorm!), t(`${p}self_attn.k_norm.weight`, [KV * HD], ...d.qkNorm!), t(`${p}self_attn.o_proj.weight`, [H, HEADS * HD], d.o),
        t(`${p}post_attention_layernorm.weight`, [H], ...d.norm), t(`${p}mlp.gate_proj.weight`, [FF, H], d.mlp), t(`${p}mlp.up_proj.weight`, [FF, H], d.mlp),
        t(`${p}mlp.down_proj.weight`, [H, FF], d.mlp), t(`${p}post_feedforward_layernorm.weight`, [H], ...d.norm));
      continue;
    }
    if (d.fused) {
      const q = t(`${p}q`, [HEADS * HD, H], d.qk), k = t(`${p}k`, [KV * HD, H], d.qk), v = t(`${p}v`, [KV * HD, H], d.v);
      const qkv = new Float32Array(q.data.length + k.data.length + v.data.length);
      qkv.set(q.data); qkv.set(k.data, q.data.length); qkv.set(v.data, q.data.length + k.data.length);
      const gate = t(`${p}g`, [FF, H], d.mlp), up = t(`${p}u`, [FF, H], d.mlp);
      const gu = new Float32Array(2 * FF * H);
      gu.set(gate.data); gu.set(up.data, FF * H);
      tensors.push({ name: `${p}self_attn.qkv_proj.weight`, dtype: 'F32', shape: [(HEADS + 2 * KV) * HD, H], data: qkv },
        t(`${p}self_attn.o_proj.weight`, [H, HEADS * HD], d.o), { name: `${p}mlp.gate_up_proj.weight`, dtype: 'F32', shape: [2 * FF, H], data: gu },
        t(`${p}mlp.down_proj.weight`, [H, FF], d.mlp));
      continue;
    }
    tensors.push(t(`${p}self_attn.q_proj.weight`, [HEADS * HD, H], d.qk), t(`${p}self_attn.k_proj.weight`, [KV * HD, H], d.qk), t(`${p}self_attn.v_proj.weight`, [KV * HD, H], d.v));
    if (d.bias) tensors.push(t(`${p}self_attn.q_proj.bias`, [HEADS * HD], d.bias), t(`${p}self_attn.k_proj.bias`, [KV * HD], d.bias), t(`${p}self_attn.v_proj.bias`, [KV * HD], d.bias));
    if (d.qkNorm) tensors.push(t(`${p}self_attn.q_norm.weight`, [HD], ...d.qkNorm), t(`${p}self_attn.k_norm.weight`, [HD], ...d.qkNorm));
    tensors.push(t(`${p}self_attn.o_proj.weight`, [H, HEADS * HD], d.o));
    if (d.moe) {
      const mix = d.moe.names === 'mixtral';
      tensors.push(t(mix ? `${p}block_sparse_moe.gate.weight` : `${p}mlp.gate.weight`, [d.moe.experts, H], d.moe.router ?? 2));
      for (let e = 0; e < d.moe.experts; e++) {
        const x = mix ? `${p}block_sparse_moe.experts.${e}.` : `${p}mlp.experts.${e}.`;
        const [g, u, dn] = mix ? ['w1', 'w3', 'w2'] : ['gate_proj', 'up_proj', 'down_proj'];
        tensors.push(t(`${x}${g}.weight`, [FF, H], d.mlp), t(`${x}${u}.weight`, [FF, H], d.mlp), t(`${x}${dn}.weight`, [H, FF], d.mlp));
      }
      const S = d.moe.shared;
      if (S) {
        tensors.push(t(`${p}mlp.shared_expert.gate_proj.weight`, [S, H], d.mlp), t(`${p}mlp.shared_expert.up_proj.weight`, [S, H], d.mlp),
          t(`${p}mlp.shared_expert.down_proj.weight`, [H, S], d.mlp), t(`${p}mlp.shared_expert_gate.weight`, [1, H], 1));
      }
      continue;
    }
    tensors.push(t(`${p}mlp.gate_proj.weight`, [FF, H], d.mlp), t(`${p}mlp.up_proj.weight`, [FF, H], d.mlp), t(`${p}mlp.down_proj.weight`, [H, FF], d.mlp));
  }
  return tensors;
}

/**
 * A generated DeepSeek-shaped checkpoint: MLA (q through a rank-32 pair, or one q_proj for the
 * V2-Lite shape, a 32-value latent, 8 rope dims shared by the 4 heads, 16 nope and 16 value dims
 * per head), layer 0 dense, the others MoE (4 experts of width 32, 2 per token, `shared` shared
 * experts, V3's router correction bias), and one layer past the model (V3's multi-token prediction).
 */
export function deepseekDecoder(seed: number, o: { layers: number; qLora: boolean; bias: boolean; shared: number }): { name: string; dtype: string; shape: number[]; data: Float32Array }[] {
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const t = (name: string, shape: number[], scale = 0.2, offset = 0) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1), scale).map((x) => x + offset) });
  const { H, FF, V } = D, HEADS = 4, QL = 32, KVL = 32, NOPE = 16, ROPE = 8, VD = 16, E = 4, EFF = 32;
  const tensors = [t('model.embed_tokens.weight', [V, H], 1), t('model.norm.weight', [H], 0.5, 1), t('lm_head.weight', [V, H], 0.8)];
  for (let l = 0; l < o.layers; l++) {
    const p = `model.layers.${l}.`;
    tensors.push(t(`${p}input_layernorm.weight`, [H], 0.5, 1), t(`${p}post_attention_layernorm.weight`, [H], 0.5, 1));
    if (o.qLora) tensors.push(t(`${p}self_attn.q_a_proj.weight`, [QL, H], 0.6), t(`${p}self_attn.q_a_layernorm.weight`, [QL], 0.5, 1), t(`${p}self_attn.q_b_proj.weight`, [HEADS * (NOPE + ROPE), QL], 0.6));
    else tensors.push(t(`${p}self_attn.q_proj.weight`, [HEADS * (NOPE + ROPE), H], 0.6));
    tensors.push(t(`${p}self_attn.kv_a_proj_with_mqa.weight`, [KVL + ROPE, H], 0.6), t(`${p}self_attn.kv_a_layernorm.weight`, [KVL], 0.5, 1),
      t(`${p}self_attn.kv_b_proj.weight`, [HEADS * (NOPE + VD), KVL], 0.6), t(`${p}self_attn.o_proj.weight`, [H, HEADS * VD], 0.4));
    if (l === 0) {
      tensors.push(t(`${p}mlp.gate_proj.weight`, [FF, H]), t(`${p}mlp.up_proj.weight`, [FF, H]), t(`${p}mlp.down_proj.weight`, [H, FF]));
      continue;
    }
    tensors.push(t(`${p}mlp.gate.weight`, [E, H], 2));
    if (o.bias) tensors.push(t(`${p}mlp.gate.e_score_correction_bias`, [E], 0.5));
    for (let e = 0; e < E; e++) {
      tensors.push(t(`${p}mlp.experts.${e}.gate_proj.weight`, [EFF, H]), t(`${p}mlp.experts.${e}.up_proj.weight`, [EFF, H]), t(`${p}mlp.experts.${e}.down_proj.weight`, [H, EFF]));
    }
    const S = EFF * o.shared;
    tensors.push(t(`${p}mlp.shared_experts.gate_proj.weight`, [S, H]), t(`${p}mlp.shared_experts.up_proj.weight`, [S, H]), t(`${p}mlp.shared_experts.down_proj.weight`, [H, S]));
  }
  // The multi-token prediction layer V3 checkpoints carry past num_hidden_layers: not converted.
  tensors.push(t(`model.layers.${o.layers}.input_layernorm.weight`, [H], 0.5, 1));
  return tensors;
}

/** The config.json keys both DeepSeek cases share (the deepseekDecoder shapes). */
export const deepseekConfig = (model: string, type: string, layers: number) => ({
  architectures: [model], model_type: type, hidden_size: D.H, intermediate_size: D.FF, num_hidden_layers: layers, num_attention_heads: 4, num_key_value_heads: 4,
  vocab_size: D.V, max_position_embeddings: 512, rms_norm_eps: 1e-6, rope_theta: 10000, tie_word_embeddings: false, hidden_act: 'silu', attention_bias: false,
  kv_lora_rank: 32, qk_nope_head_dim: 16, qk_rope_head_dim: 8, v_head_dim: 16, n_routed_experts: 4, num_experts_per_tok: 2, moe_intermediate_size: 32,
  first_k_dense_replace: 1, n_group: 1, topk_group: 1, moe_layer_freq: 1,
});


/**
 * A gpt-oss checkpoint as released: attention with biases and a sink per head, a router with a
 * bias, and experts packed as transformers saves them: gate and up rows interleaved in
 * gate_up_proj, matrices in MXFP4 (`_blocks`: byte i holds elements 2i and 2i + 1 of a 32-value
 * block, low nibble first; `_scales`: E8M0), biases beside them.
 */
export function gptOssDecoder(seed: number): GenTensor[] {
  const d: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1], bias: 0.5, moe: { experts: 4, names: 'qwen', router: 0.5 } };
  const base = decoder(seed, d);
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6];
  // Rows of 32-value blocks -> MXFP4 blocks and scales (nearest E2M1 value, scale 2^(floor(log2 amax) - 2)).
  const mxfp4 = (x: Float32Array, rows: number, cols: number) => {
    const nb = cols / 32, blocks = new Uint8Array(rows * nb * 16), scales = new Uint8Array(rows * nb);
    for (let b = 0; b < rows * nb; b++) {
      let amax = 0;
      for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[b * 32 + j]));
      const s = amax > 0 ? Math.floor(Math.log2(amax)) - 2 + 127 : 0;
      scales[b] = s;
      const code = (v: number) => {
        const a = Math.abs(v) / 2 ** (s - 127);
        const m = E2M1.reduce((best, e, i) => (Math.abs(e - a) < Math.abs(E2M1[best] - a) ? i : best), 0);
        return m | (v < 0 && m ? 8 : 0);
      };
      for (let i = 0; i < 16; i++) blocks[b * 16 + i] = code(x[b * 32 + 2 * i]) | (code(x[b * 32 + 2 * i + 1]) << 4);
    }
    return { blocks, scales };
  };
  const { H, HEADS, FF } = D, E = 4;
  const get = (name: string) => base.find((t) => t.name === name)!.data;
  const out: GenTensor[] = base.filter((t) => !/\.mlp\.(?:gate|experts)\./.test(t.name));
  for (let l = 0; l < d.LAYERS; l++) {
    const p = `model.layers.${l}.`;
    out.push({ name: `${p}self_attn.o_proj.bias`, dtype: 'F32', shape: [H], data: rnd(H, 0.5) },
      { name: `${p}self_attn.sinks`, dtype: 'F32', shape: [HEADS], data: rnd(HEADS, 4) },
      { name: `${p}mlp.router.weight`, dtype: 'F32', shape: [E, H], data: get(`${p}mlp.gate.weight`) as Float32Array },
      { name: `${p}mlp.router.bias`, dtype: 'F32', shape: [E], data: rnd(E, 1) });
    const gateUp = new Float32Array(E * 2 * FF * H), down = new Float32Array(E * H * FF);
    for (let e = 0; e < E; e++) {
      const g = get(`${p}mlp.experts.${e}.gate_proj.weight`) as Float32Array, u = get(`${p}mlp.experts.${e}.up_proj.weight`) as Float32Array;
      for (let f = 0; f < FF; f++) {
        gateUp.set(g.subarray(f * H, (f + 1) * H), (e * 2 * FF + 2 * f) * H);
        gateUp.set(u.subarray(f * H, (f + 1) * H), (e * 2 * FF + 2 * f + 1) * H);
      }
      down.set(get(`${p}mlp.experts.${e}.down_proj.weight`) as Float32Array, e * H * FF);
    }
    const gu = mxfp4(gateUp, E * 2 * FF, H), dn = mxfp4(down, E * H, FF);
    out.push({ name: `${p}mlp.experts.gate_up_proj_blocks`, dtype: 'U8', shape: [E, 2 * FF, H / 32, 16], data: gu.blocks },
      { name: `${p}mlp.experts.gate_up_proj_scales`, dtype: 'U8', shape: [E, 2 * FF, H / 32], data: gu.scales },
      { name: `${p}mlp.experts.gate_up_proj_bias`, dtype: 'F32', shape: [E, 2 * FF], data: rnd(E * 2 * FF, 0.5) },
      { name: `${p}mlp.experts.down_proj_blocks`, dtype: 'U8', shape: [E, H, FF / 32, 16], data: dn.blocks },
      { name: `${p}mlp.experts.down_proj_scales`, dtype: 'U8', shape: [E, H, FF / 32], data: dn.scales },
      { name: `${p}mlp.experts.down_proj_bias`, dtype: 'F32', shape: [E, H], data: rnd(E * H, 0.5) });
  }
  return out;
}

/**
 * A GPT-2 checkpoint as transformers saves it: Conv1D projections stored [in, out], q, k and v in
 * one c_attn, LayerNorms with biases, learned positions, the head tied to wte.
 */
export function gpt2Decoder(seed: number): GenTensor[] {
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const t = (name: string, shape: number[], scale = 0.2, offset = 0) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1), scale).map((x) => x + offset) });
  const { H, V } = D, FF = 4 * H;
  // wte's rows and ln_f's bias share a positive offset: the tied head then scores the tokens that
  // keep their rows above the zeroed ones (see againstLlamaCpp).
  const tensors: GenTensor[] = [t('wte.weight', [V, H], 1, 0.3), t('wpe.weight', [64, H], 0.5), t('ln_f.weight', [H], 0.5, 1), t('ln_f.bias', [H], 0.2, 1)];
  for (let l = 0; l < 2; l++) {
    const p = `h.${l}.`;
    tensors.push(t(`${p}ln_1.weight`, [H], 0.5, 1), t(`${p}ln_1.bias`, [H], 0.2), t(`${p}attn.c_attn.weight`, [H, 3 * H], 0.5), t(`${p}attn.c_attn.bias`, [3 * H], 0.5),
      t(`${p}attn.c_proj.weight`, [H, H], 0.4), t(`${p}attn.c_proj.bias`, [H], 0.2), t(`${p}ln_2.weight`, [H], 0.5, 1), t(`${p}ln_2.bias`, [H], 0.2),
      t(`${p}mlp.c_fc.weight`, [H, FF], 0.4), t(`${p}mlp.c_fc.bias`, [FF], 0.4), t(`${p}mlp.c_proj.weight`, [FF, H], 0.3), t(`${p}mlp.c_proj.bias`, [H], 0.2),
      // The causal-mask buffer old checkpoints carry, which GGUF does not store.
      { name: `${p}attn.bias`, dtype: 'F32', shape: [1, 1, 4, 4], data: new Float32Array(16).fill(1) });
  }
  return tensors;
}

/**
 * A GPT-NeoX (Pythia) checkpoint as transformers saves it: each head's q, k and v rows together in
 * query_key_value, LayerNorms with biases, an untied embed_out.
 */
export function neoxDecoder(seed: number): GenTensor[] {
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const t = (name: string, shape: number[], scale = 0.2, offset = 0) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1), scale).map((x) => x + offset) });
  const { H, V } = D, FF = 4 * H;
  const tensors: GenTensor[] = [t('gpt_neox.embed_in.weight', [V, H], 1), t('gpt_neox.final_layer_norm.weight', [H], 0.5, 1), t('gpt_neox.final_layer_norm.bias', [H], 0.2), t('embed_out.weight', [V, H], 0.8)];
  for (let l = 0; l < 2; l++) {
    const p = `gpt_neox.layers.${l}.`;
    tensors.push(t(`${p}input_layernorm.weight`, [H], 0.5, 1), t(`${p}input_layernorm.bias`, [H], 0.2), t(`${p}post_attention_layernorm.weight`, [H], 0.5, 1), t(`${p}post_attention_layernorm.bias`, [H], 0.2),
      t(`${p}attention.query_key_value.weight`, [3 * H, H], 0.6), t(`${p}attention.query_key_value.bias`, [3 * H], 0.5), t(`${p}attention.dense.weight`, [H, H], 0.4), t(`${p}attention.dense.bias`, [H], 0.2),
      t(`${p}mlp.dense_h_to_4h.weight`, [FF, H], 0.4), t(`${p}mlp.dense_h_to_4h.bias`, [FF], 0.4), t(`${p}mlp.dense_4h_to_h.weight`, [H, FF], 0.3), t(`${p}mlp.dense_4h_to_h.bias`, [H], 0.2),
      { name: `${p}attention.rotary_emb.inv_freq`, dtype: 'F32', shape: [2], data: new Float32Array([1, 0.01]) });
  }
  return tensors;
}

/** A Phi-2 checkpoint (PhiForCausalLM): q/k/v with biases, dense, fc1 / fc2, one LayerNorm per block, a biased head. */
export function phi2Decoder(seed: number): GenTensor[] {
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const t = (name: string, shape: number[], scale = 0.2, offset = 0) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1), scale).map((x) => x + offset) });
  const { H, V } = D, FF = 4 * H;
  const tensors: GenTensor[] = [t('model.embed_tokens.weight', [V, H], 1), t('model.final_layernorm.weight', [H], 0.5, 1), t('model.final_layernorm.bias', [H], 0.2),
    t('lm_head.weight', [V, H], 0.8), t('lm_head.bias', [V], 0.5)];
  for (let l = 0; l < 2; l++) {
    const p = `model.layers.${l}.`;
    tensors.push(t(`${p}input_layernorm.weight`, [H], 0.5, 1), t(`${p}input_layernorm.bias`, [H], 0.2));
    for (const x of ['q', 'k', 'v']) tensors.push(t(`${p}self_attn.${x}_proj.weight`, [H, H], 0.6), t(`${p}self_attn.${x}_proj.bias`, [H], 0.5));
    tensors.push(t(`${p}self_attn.dense.weight`, [H, H], 0.4), t(`${p}self_attn.dense.bias`, [H], 0.2),
      t(`${p}mlp.fc1.weight`, [FF, H], 0.4), t(`${p}mlp.fc1.bias`, [FF], 0.4), t(`${p}mlp.fc2.weight`, [H, FF], 0.3), t(`${p}mlp.fc2.bias`, [H], 0.2));
  }
  return tensors;
}

/** A StableLM-2 checkpoint: Llama's tensors, q/k/v biases, and a bias beside every LayerNorm weight. */
export function stablelmDecoder(seed: number): GenTensor[] {
  const base = decoder(seed, { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1], bias: 0.5 });
  let s = seed;
  const rnd = (n: number) => Float32Array.from({ length: n }, () => { s = (s * 1103515245 + 12345) >>> 0; return (s / 2 ** 32 - 0.5) * 0.4; });
  return base.flatMap((t) => (/(?:layernorm|model\.norm)\.weight$/.test(t.name) ? [t, { name: t.name.replace(/weight$/, 'bias'), dtype: 'F32', shape: t.shape, data: rnd(t.shape[0]) }] : [t]));
}

/** A StarCoder2 checkpoint: Llama's names with every projection and LayerNorm biased, and mlp.c_fc / c_proj. */
export function starcoder2Decoder(seed: number): GenTensor[] {
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const t = (name: string, shape: number[], scale = 0.2, offset = 0) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1), scale).map((x) => x + offset) });
  const { H, V, HEADS, KV } = D, HD = 16, FF = 4 * H;
  const tensors: GenTensor[] = [t('model.embed_tokens.weight', [V, H], 1), t('model.norm.weight', [H], 0.5, 1), t('model.norm.bias', [H], 0.2), t('lm_head.weight', [V, H], 0.8)];
  for (let l = 0; l < 2; l++) {
    const p = `model.layers.${l}.`;
    tensors.push(t(`${p}input_layernorm.weight`, [H], 0.5, 1), t(`${p}input_layernorm.bias`, [H], 0.2), t(`${p}post_attention_layernorm.weight`, [H], 0.5, 1), t(`${p}post_attention_layernorm.bias`, [H], 0.2),
      t(`${p}self_attn.q_proj.weight`, [HEADS * HD, H], 0.8), t(`${p}self_attn.q_proj.bias`, [HEADS * HD], 0.5), t(`${p}self_attn.k_proj.weight`, [KV * HD, H], 0.8), t(`${p}self_attn.k_proj.bias`, [KV * HD], 0.5),
      t(`${p}self_attn.v_proj.weight`, [KV * HD, H], 0.6), t(`${p}self_attn.v_proj.bias`, [KV * HD], 0.5), t(`${p}self_attn.o_proj.weight`, [H, HEADS * HD], 0.4), t(`${p}self_attn.o_proj.bias`, [H], 0.2),
      t(`${p}mlp.c_fc.weight`, [FF, H], 0.4), t(`${p}mlp.c_fc.bias`, [FF], 0.4), t(`${p}mlp.c_proj.weight`, [H, FF], 0.3), t(`${p}mlp.c_proj.bias`, [H], 0.2));
  }
  return tensors;
}

/** An OLMoE checkpoint: Qwen-MoE's layers with q/k RMSNorms over the whole projections. */
export function olmoeDecoder(seed: number): GenTensor[] {
  // Every head its own keys, as OLMoE-1B-7B has them.
  const base = decoder(seed, { ...D, KV: D.HEADS, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.6, norm: [0.5, 1], moe: { experts: 4, names: 'qwen', router: 0.5 } });
  let s = seed;
  const rnd = (n: number) => Float32Array.from({ length: n }, () => { s = (s * 1103515245 + 12345) >>> 0; return 1 + (s / 2 ** 32 - 0.5) * 1.5; });
  return base.flatMap((t) => {
    const m = /^(model\.layers\.\d+\.)self_attn\.(q|k)_proj\.weight$/.exec(t.name);
    return m ? [t, { name: `${m[1]}self_attn.${m[2]}_norm.weight`, dtype: 'F32', shape: [t.shape[0]], data: rnd(t.shape[0]) }] : [t];
  });
}


export const D = { H: 64, HEADS: 4, KV: 2, FF: 128, V: 300 };
export const hfConfig = (d: Decoder, model: string, type: string) => ({
  architectures: [model], model_type: type, hidden_size: d.H, intermediate_size: d.FF, num_hidden_layers: d.LAYERS, num_attention_heads: d.HEADS,
  num_key_value_heads: d.KV, head_dim: d.HD, vocab_size: d.V, max_position_embeddings: 512, rms_norm_eps: 1e-6, tie_word_embeddings: false,
});

// Norm weights around 1 but uneven (Gemma's w of 1 + w: around 0), so that a norm applied to the
// wrong values shows; heads scaled for next-token distributions neither flat nor certain (a tied
// head would mostly predict the input token back; Gemma's embedding scale and norms prevent that).
export const qwen3: Decoder = { ...D, HD: 32, LAYERS: 2, embed: 1, head: 0.8, qk: 0.6, norm: [0.5, 1], qkNorm: [1.5, 1] };
// Six layers: five local (window 4, shorter than the 13 positions run) and one global.
export const gemma3: Decoder = { ...D, HD: 32, LAYERS: 6, embed: 0.5, head: 0.3, qk: 0.6, v: 0.4, o: 0.4, mlp: 0.4, norm: [0.5, 0], qkNorm: [1, 0], gemma: true };
export const llama3: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1] };
export const qwen2: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.6, norm: [0.5, 1], bias: 1.5 };
export const mixtral: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1], moe: { experts: 4, names: 'mixtral' } };
export const qwen2moe: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1], bias: 0.5, moe: { experts: 4, names: 'qwen', router: 0.5, shared: 96 } };
export const qwen3moe: Decoder = { ...D, HD: 32, LAYERS: 2, embed: 1, head: 0.8, qk: 0.6, norm: [0.5, 1], qkNorm: [1.5, 1], moe: { experts: 4, names: 'qwen', router: 0.5 } };
export const granite: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1] };
export const olmo2: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1], qkNorm: [1.5, 1], olmo2: true };
export const smollm3: Decoder = { ...D, HD: 16, LAYERS: 4, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1] };
export const phi3: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1], fused: true };
// Four layers, local and global in turn (window 4). Its head is the embedding: a final norm of
// about -1 (1 + w, w near -2) keeps it from predicting the input token back every time.
export const gemma2: Decoder = { ...D, HD: 32, LAYERS: 4, embed: 0.5, head: 0, qk: 2, v: 0.4, o: 0.4, mlp: 0.4, norm: [0.5, 0], finalNorm: [0.5, -2], gemma: true, tied: true };
// Gemma 1 (2B's shape: one key/value head): Llama's two norms per layer, as 1 + w; the head is the
// embedding, kept from predicting the input token back by a final norm of about -1 (see Gemma 2).
export const gemma1: Decoder = { ...D, KV: 1, HD: 32, LAYERS: 3, embed: 0.5, head: 0, qk: 0.6, v: 0.4, o: 0.4, mlp: 0.4, norm: [0.5, 0], finalNorm: [0.5, -2], tied: true };

/** One generated checkpoint: its tensors (`decoder`) and config.json. */
export interface Family {
  title: string;
  /** A SentencePiece tokenizer.model instead of a byte-level tokenizer.json. */
  spm?: boolean;
  /** tokenizer.json's pre_tokenizer, when not Qwen2's (llama.cpp must know the name webquant writes for it). */
  preTokenizer?: Record<string, unknown>;
  seed: number;
  decoder: Decoder | ((seed: number) => GenTensor[]);
  config: Record<string, unknown>;
}

export const familyTensors = (f: Family): GenTensor[] => (typeof f.decoder === 'function' ? f.decoder(f.seed) : decoder(f.seed, f.decoder));

export const FAMILIES = {
  qwen3: {
    title: 'Qwen3: per-head q/k norms, head_dim 32 of a 64-wide model', seed: 5, decoder: qwen3,
    config: { ...hfConfig(qwen3, 'Qwen3ForCausalLM', 'qwen3'), rope_theta: 1000000, attention_bias: false, hidden_act: 'silu', rope_scaling: null },
  },
  gemma3: {
    title: 'Gemma 3: norms + 1 around attention and FFN, local layers with a sliding window', seed: 9, decoder: gemma3,
    config: {
      ...hfConfig(gemma3, 'Gemma3ForCausalLM', 'gemma3_text'), rope_theta: 1000000, rope_local_base_freq: 10000, sliding_window: 4, sliding_window_pattern: 6,
      query_pre_attn_scalar: 32, attention_bias: false, hidden_activation: 'gelu_pytorch_tanh', rope_scaling: null, attn_logit_softcapping: null, final_logit_softcapping: null,
    },
  },
  gemma2: {
    // Attention scores capped at 0.2 (large q/k weights) so that the cap matters here.
    title: 'Gemma 2: norms + 1, alternating local layers, capped attention scores and logits, tied head', seed: 29, decoder: gemma2,
    config: {
      ...hfConfig(gemma2, 'Gemma2ForCausalLM', 'gemma2'), rope_theta: 10000, sliding_window: 4, query_pre_attn_scalar: 32, attn_logit_softcapping: 0.2,
      final_logit_softcapping: 30, tie_word_embeddings: true, attention_bias: false, hidden_activation: 'gelu_pytorch_tanh', hidden_act: 'gelu_pytorch_tanh',
    },
  },
  gemma1: {
    // config.json as google/gemma-2b first shipped it: hidden_act "gelu", no hidden_activation.
    title: 'Gemma 1: Llama\'s norms as 1 + w, embeddings times sqrt(hidden), a tanh-GELU gate, tied head, a SentencePiece vocabulary', seed: 107, decoder: gemma1, spm: true,
    config: { ...hfConfig(gemma1, 'GemmaForCausalLM', 'gemma'), rope_theta: 10000, tie_word_embeddings: true, attention_bias: false, hidden_act: 'gelu', rope_scaling: null },
  },
  llama3: {
    // Llama 3.2's scaling with a short original context, so that it moves most frequencies here.
    title: 'Llama 3 rope scaling as rope_freqs.weight', seed: 17, decoder: llama3,
    config: {
      ...hfConfig(llama3, 'LlamaForCausalLM', 'llama'), rms_norm_eps: 1e-5, rope_theta: 500000, hidden_act: 'silu',
      rope_scaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 },
    },
  },
  phi3: {
    // Phi-4-mini's shape: 3/4 of each head rotated (12 of 16 dims), LongRoPE. An original context
    // of 512, as large as llama.cpp's here, so that both use the short factors and the attention
    // factor sqrt(1 + ln(4096/512)/ln(512)).
    title: 'Phi-3: fused qkv and gate_up, partial rotary, LongRoPE', seed: 31, decoder: phi3, spm: true,
    config: {
      ...hfConfig(phi3, 'Phi3ForCausalLM', 'phi3'), max_position_embeddings: 4096, original_max_position_embeddings: 512, rope_theta: 10000, rms_norm_eps: 1e-5,
      partial_rotary_factor: 0.75, hidden_act: 'silu', sliding_window: null,
      rope_scaling: { type: 'longrope', short_factor: [1, 1.5, 2, 4, 8, 16], long_factor: [1, 2, 4, 8, 16, 32] },
    },
  },
  mixtral: {
    // 4 experts, 2 per token; the forward runs on the original (the GGUF stacks the experts).
    title: 'Mixtral: MoE layers, experts stacked into ffn_*_exps', seed: 53, decoder: mixtral,
    config: { ...hfConfig(mixtral, 'MixtralForCausalLM', 'mixtral'), rope_theta: 1000000, hidden_act: 'silu', num_local_experts: 4, num_experts_per_tok: 2, rope_scaling: null },
  },
  qwen2moe: {
    title: 'Qwen2-MoE: a shared expert behind a sigmoid gate, q/k/v biases, unnormalised expert weights', seed: 71, decoder: qwen2moe,
    config: {
      ...hfConfig(qwen2moe, 'Qwen2MoeForCausalLM', 'qwen2_moe'), rope_theta: 1000000, hidden_act: 'silu', num_experts: 4, num_experts_per_tok: 2,
      moe_intermediate_size: D.FF, shared_expert_intermediate_size: 96, norm_topk_prob: false, decoder_sparse_step: 1, mlp_only_layers: [], rope_scaling: null,
    },
  },
  qwen3moe: {
    title: 'Qwen3-MoE: MoE layers with their own width, per-head q/k norms', seed: 59, decoder: qwen3moe,
    config: {
      ...hfConfig(qwen3moe, 'Qwen3MoeForCausalLM', 'qwen3_moe'), rope_theta: 1000000, hidden_act: 'silu', num_experts: 4, num_experts_per_tok: 2,
      moe_intermediate_size: D.FF, norm_topk_prob: true, decoder_sparse_step: 1, mlp_only_layers: [], attention_bias: false, rope_scaling: null,
    },
  },
  granite: {
    title: 'Granite: scaled embeddings, residual branches, attention scores and logits', seed: 47, decoder: granite,
    config: {
      ...hfConfig(granite, 'GraniteForCausalLM', 'granite'), rope_theta: 10000, hidden_act: 'silu', attention_bias: false, mlp_bias: false, rope_scaling: null,
      embedding_multiplier: 2, residual_multiplier: 0.5, attention_multiplier: 0.1, logits_scaling: 2,
    },
  },
  olmo2: {
    title: 'OLMo 2: norms after attention and FFN only, q/k norms over the whole projection', seed: 43, decoder: olmo2,
    config: { ...hfConfig(olmo2, 'Olmo2ForCausalLM', 'olmo2'), rope_theta: 500000, hidden_act: 'silu', attention_bias: false, rope_scaling: null },
  },
  smollm3: {
    // Layer 3 of 4 without rope, as SmolLM3's no_rope_layers say and llama.cpp assumes.
    title: 'SmolLM3: every 4th layer without rope', seed: 41, decoder: smollm3,
    config: { ...hfConfig(smollm3, 'SmolLM3ForCausalLM', 'smollm3'), rope_theta: 5000000, hidden_act: 'silu', no_rope_layers: [1, 1, 1, 0], rope_scaling: null },
  },
  deepseekV3: {
    // YaRN with a short original context (factor 4): frequencies and attention scale both move.
    // The projections in FP8 with 16 x 16 scale blocks, as V3 ships them (128 x 128 there): the
    // GGUF gets their scaled values, on every read path (plain, kv_b split, stacked experts).
    title: 'DeepSeek-V3 in FP8: latent attention (kv_b split into attn_k_b/attn_v_b), sigmoid routing with bias, shared expert, dense first layer, YaRN', seed: 61,
    decoder: (seed) => fp8Weights(deepseekDecoder(seed, { layers: 2, qLora: true, bias: true, shared: 1 }), 16), preTokenizer: DEEPSEEK_V3_PRE_TOKENIZER,
    config: {
      ...deepseekConfig('DeepseekV3ForCausalLM', 'deepseek_v3', 2), q_lora_rank: 32, n_shared_experts: 1, routed_scaling_factor: 2.5, norm_topk_prob: true, scoring_func: 'sigmoid',
      topk_method: 'noaux_tc', rope_scaling: { type: 'yarn', factor: 4, original_max_position_embeddings: 64, beta_fast: 32, beta_slow: 1, mscale: 1, mscale_all_dim: 1 },
      quantization_config: { quant_method: 'fp8', fmt: 'e4m3', activation_scheme: 'dynamic', weight_block_size: [16, 16] },
    },
  },
  deepseekV2: {
    // llama.cpp reads one q_proj only in a 27-layer model (V2-Lite's depth); YaRN with V2's mscales.
    title: 'DeepSeek-V2-Lite: one q_proj, softmax routing, two shared experts, YaRN', seed: 67,
    decoder: (seed) => deepseekDecoder(seed, { layers: 27, qLora: false, bias: false, shared: 2 }), preTokenizer: DEEPSEEK_LLM_PRE_TOKENIZER,
    config: {
      ...deepseekConfig('DeepseekV2ForCausalLM', 'deepseek_v2', 27), q_lora_rank: null, n_shared_experts: 2, routed_scaling_factor: 1, norm_topk_prob: false, scoring_func: 'softmax',
      topk_method: 'greedy', rope_scaling: { type: 'yarn', factor: 16, original_max_position_embeddings: 64, beta_fast: 32, beta_slow: 1, mscale: 0.707, mscale_all_dim: 0.707 },
    },
  },
  gptOss: {
    // As released: MXFP4 experts (gate and up interleaved), sinks, biases everywhere, even layers
    // sliding (window 4 of the 13 positions run), YaRN over a short original context.
    title: 'gpt-oss: MXFP4 experts with biases, attention sinks, sliding layers, clamped SwiGLU, YaRN', seed: 73, decoder: gptOssDecoder,
    config: {
      ...hfConfig({ ...D, HD: 16, LAYERS: 2 } as Decoder, 'GptOssForCausalLM', 'gpt_oss'), rms_norm_eps: 1e-5, rope_theta: 150000, hidden_act: 'silu', attention_bias: true,
      num_local_experts: 4, num_experts_per_tok: 2, sliding_window: 4, layer_types: ['sliding_attention', 'full_attention'], swiglu_limit: 7,
      rope_scaling: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 16, beta_fast: 32, beta_slow: 1 },
      quantization_config: { quant_method: 'mxfp4', modules_to_not_convert: ['model.layers.*.self_attn', 'model.layers.*.mlp.router', 'model.embed_tokens', 'lm_head'] },
    },
  },
  gpt2: {
    title: 'GPT-2: Conv1D projections transposed, LayerNorms with biases, learned positions, tied head', seed: 79, decoder: gpt2Decoder,
    config: {
      architectures: ['GPT2LMHeadModel'], model_type: 'gpt2', n_embd: D.H, n_layer: 2, n_head: D.HEADS, n_positions: 64, n_ctx: 64, n_inner: null,
      vocab_size: D.V, layer_norm_epsilon: 1e-5, activation_function: 'gelu_new',
    },
  },
  gptNeox: {
    // Pythia's shape: a quarter of each head rotated, parallel residuals, exact GELU.
    title: 'GPT-NeoX (Pythia): q/k/v grouped by head, partial NeoX rotary, parallel residuals, LayerNorms with biases', seed: 83, decoder: neoxDecoder,
    config: {
      architectures: ['GPTNeoXForCausalLM'], model_type: 'gpt_neox', hidden_size: D.H, intermediate_size: 4 * D.H, num_hidden_layers: 2, num_attention_heads: D.HEADS,
      vocab_size: D.V, max_position_embeddings: 128, rotary_pct: 0.25, rotary_emb_base: 10000, layer_norm_eps: 1e-5, use_parallel_residual: true, hidden_act: 'gelu',
      tie_word_embeddings: false,
    },
  },
  phi2: {
    title: 'Phi-2: one LayerNorm feeding attention and FFN in parallel, partial rotary, biased projections and head', seed: 89, decoder: phi2Decoder,
    config: {
      architectures: ['PhiForCausalLM'], model_type: 'phi', hidden_size: D.H, intermediate_size: 4 * D.H, num_hidden_layers: 2, num_attention_heads: D.HEADS, num_key_value_heads: D.HEADS,
      vocab_size: D.V, max_position_embeddings: 128, partial_rotary_factor: 0.5, rope_theta: 10000, layer_norm_eps: 1e-5, hidden_act: 'gelu_new', qk_layernorm: false, tie_word_embeddings: false,
    },
  },
  stablelm: {
    title: 'StableLM-2: LayerNorms with biases, a quarter of each head rotated, q/k/v biases', seed: 97, decoder: stablelmDecoder,
    config: {
      ...hfConfig({ ...D, HD: 16, LAYERS: 2 } as Decoder, 'StableLmForCausalLM', 'stablelm'), rope_theta: 10000, partial_rotary_factor: 0.25, layer_norm_eps: 1e-5,
      use_qkv_bias: true, qk_layernorm: false, use_parallel_residual: false, hidden_act: 'silu',
    },
  },
  starcoder2: {
    // sliding_window is longer than the positions run (llama.cpp b6327 has no window for starcoder2).
    title: 'StarCoder2: LayerNorms and every projection with biases, GQA, a GELU FFN', seed: 101, decoder: starcoder2Decoder,
    config: {
      architectures: ['Starcoder2ForCausalLM'], model_type: 'starcoder2', hidden_size: D.H, intermediate_size: 4 * D.H, num_hidden_layers: 2, num_attention_heads: D.HEADS,
      num_key_value_heads: D.KV, vocab_size: D.V, max_position_embeddings: 256, rope_theta: 100000, norm_epsilon: 1e-5, use_bias: true, hidden_act: 'gelu_pytorch_tanh',
      sliding_window: 64, tie_word_embeddings: false,
    },
  },
  olmoe: {
    title: 'OLMoE: q/k norms over the whole projections, experts kept at their softmax weights', seed: 103, decoder: olmoeDecoder,
    config: {
      ...hfConfig({ ...D, KV: D.HEADS, HD: 16, LAYERS: 2 } as Decoder, 'OlmoeForCausalLM', 'olmoe'), rope_theta: 10000, hidden_act: 'silu', num_experts: 4, num_experts_per_tok: 2,
      norm_topk_prob: false, clip_qkv: null, rope_scaling: null,
    },
  },
  qwen2: {
    title: 'Qwen2: q/k/v biases in the Hugging Face row order', seed: 23, decoder: qwen2,
    config: { ...hfConfig(qwen2, 'Qwen2ForCausalLM', 'qwen2'), rope_theta: 1000000, hidden_act: 'silu' },
  },
  qwen2Yarn: {
    // transformers' default YaRN (Qwen2.5 / Qwen3 long-context configs): blended frequencies and
    // cos, sin times 0.1 ln(factor) + 1; a short original context so that the blend moves.
    title: 'Qwen2 with YaRN rope scaling', seed: 29, decoder: qwen2,
    config: {
      ...hfConfig(qwen2, 'Qwen2ForCausalLM', 'qwen2'), rope_theta: 10000, hidden_act: 'silu',
      rope_scaling: { type: 'yarn', factor: 4, original_max_position_embeddings: 16 },
    },
  },
} satisfies Record<string, Family>;

export type FamilyId = keyof typeof FAMILIES;
