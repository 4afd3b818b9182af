// Layer roles from tensor names. Plans match on roles so that one rule ("FFN down projections
// in 4 bits") covers Llama, GPT-2, DeepSeek and GGUF checkpoints alike.
//
// Covered naming schemes: Hugging Face Llama / Mistral / Mixtral / Qwen2(-MoE) / Gemma(2,3) / Phi-2 /
// Phi-3 / DeepSeek V2-V3 (dense, MoE, MLA attention) / GPT-2 / GPT-NeoX / Falcon, Meta's original
// Llama names (attention.wq, feed_forward.w1), and GGUF names (blk.N.attn_q, ffn_gate_exps, ...).

export type Role =
  | 'attention'
  | 'ffn'
  | 'expert'
  | 'shared_expert'
  | 'router'
  | 'embedding'
  | 'output'
  | 'norm'
  | 'bias'
  | 'other';

export const ROLES: readonly Role[] = ['attention', 'ffn', 'expert', 'shared_expert', 'router', 'embedding', 'output', 'norm', 'bias', 'other'];

/**
 * Sub-kinds:
 * - attention: 'q' | 'k' | 'v' | 'o' | 'qkv' (fused: Phi-3 qkv_proj, GPT-2 c_attn, GGUF attn_qkv) |
 *   MLA 'q_a' | 'q_b' | 'kv_a' (kv_a_proj_with_mqa) | 'kv_b' | 'k_b' | 'v_b' (GGUF split of kv_b)
 * - ffn / expert / shared_expert: 'gate' | 'up' | 'down' | 'gate_up' (fused)
 * - embedding: 'token' | 'position' | 'token_type'
 * - router: 'gate' (expert router) | 'shared_gate' (Qwen2-MoE shared-expert gate) | 'bias' (DeepSeek-V3 e_score_correction_bias)
 * - bias: the kind of the weight it belongs to (e.g. 'q' for q_proj.bias); `parent` holds that weight's role
 * - norm: the norm's module name ('input_layernorm', 'attn_norm', 'ln_f', ...)
 * - other: 'quant_aux' for quantization side tensors of an already quantized checkpoint
 *   (weight_scale_inv, absmax, qzeros, ...), which are never quantized again
 */
export type RoleKind = string;

export interface TensorRole {
  role: Role;
  kind?: RoleKind;
  /** Transformer block index, when the name has one. */
  layer?: number;
  /** Expert index for per-expert tensors (experts.E.*); fused 3-D expert tensors have none. */
  expert?: number;
  /** For role 'bias': the role of the weight this bias belongs to. */
  parent?: Role;
}

const LAYER_RE = /(?:^|[./])(?:layers|layer|h|blk|blocks|block)[./](\d+)(?=[./])/;
const EXPERT_RE = /(?:^|[./])experts[./](\d+)(?=[./])/;

// Side tensors of already quantized checkpoints (FP8 block scales, GPTQ, bitsandbytes, compressed-tensors),
// matched on the last name segment.
const QUANT_AUX_LEAF = /^(?:\w*_scale_inv|scales|biases|qzeros|qweight_scale|g_idx|absmax|quant_map|nested_absmax|nested_quant_map|SCB|weight_format|input_scale|weight_scale|weight_scale_2|weight_global_scale|input_global_scale)$/;

function isQuantAux(name: string): boolean {
  if (name.includes('quant_state')) return true;
  const leaf = name.slice(Math.max(name.lastIndexOf('.'), name.lastIndexOf('/')) + 1);
  return QUANT_AUX_LEAF.test(leaf);
}

const ATTN_CONTAINERS = new Set(['self_attn', 'attn', 'attention', 'self_attention', 'mixer']);
const FFN_CONTAINERS = new Set(['mlp', 'feed_forward', 'ffn', 'block_sparse_moe', 'moe']);

const ATTN_KIND: Record<string, string> = {
  q_proj: 'q', wq: 'q', query: 'q', q: 'q',
  k_proj: 'k', wk: 'k', key: 'k', k: 'k',
  v_proj: 'v', wv: 'v', value: 'v', v: 'v',
  o_proj: 'o', wo: 'o', out_proj: 'o', dense: 'o', c_proj: 'o', o: 'o',
  qkv_proj: 'qkv', c_attn: 'qkv', query_key_value: 'qkv', wqkv: 'qkv', qkv: 'qkv',
  q_a_proj: 'q_a', q_b_proj: 'q_b', kv_a_proj_with_mqa: 'kv_a', kv_b_proj: 'kv_b',
};

const FFN_KIND: Record<string, string> = {
  gate_proj: 'gate', w1: 'gate',
  up_proj: 'up', w3: 'up', fc1: 'up', c_fc: 'up', dense_h_to_4h: 'up',
  down_proj: 'down', w2: 'down', fc2: 'down', c_proj: 'down', dense_4h_to_h: 'down',
  gate_up_proj: 'gate_up',
};

// GGUF tensor names (llama.cpp's LLM_TENSOR_* spellings).
const GGUF_ATTN: Record<string, string> = {
  attn_q: 'q', attn_k: 'k', attn_v: 'v', attn_output: 'o', attn_qkv: 'qkv',
  attn_q_a: 'q_a', attn_q_b: 'q_b', attn_kv_a_mqa: 'kv_a', attn_kv_b: 'kv_b', attn_k_b: 'k_b', attn_v_b: 'v_b',
};
const GGUF_FFN = /^ffn_(gate_up|gate|up|down)(?:_(exps|shexp))?$/;

function splitName(name: string): { segs: string[]; param: string | undefined } {
  const segs = name.split(/[./]/);
  const last = segs[segs.length - 1];
  // The parameter leaf of a module ('weight', 'bias'); fused expert tensors have none (experts.gate_up_proj).
  if (segs.length > 1 && (last === 'weight' || last === 'bias')) return { segs: segs.slice(0, -1), param: last };
  return { segs, param: undefined };
}

function isNormModule(m: string): boolean {
  return /(?:^|_)norm(?:$|_|\d)|layernorm|layer_norm|rmsnorm|^ln(?:_|\d|$)|^ln_f$|^norm_f$/i.test(m);
}

/** Role of a weight (never 'bias'); `param` is the stripped leaf. */
function weightRole(segs: string[]): TensorRole {
  const n = segs.length;
  const m = segs[n - 1] ?? '';
  const parent = segs[n - 2] ?? '';
  const full = segs.join('.');

  if (isNormModule(m)) return { role: 'norm', kind: m };

  // Routers: DeepSeek / Qwen-MoE mlp.gate, Mixtral block_sparse_moe.gate, *.router, GGUF ffn_gate_inp.
  if (m === 'e_score_correction_bias' || m === 'exp_probs_b') return { role: 'router', kind: 'bias' };
  if (m === 'ffn_gate_inp') return { role: 'router', kind: 'gate' };
  if (m === 'ffn_gate_inp_shexp' || m === 'shared_expert_gate') return { role: 'router', kind: 'shared_gate' };
  if ((m === 'gate' && FFN_CONTAINERS.has(parent)) || m === 'router') return { role: 'router', kind: 'gate' };

  // Embeddings and the output head.
  // per_layer_token_embd: Gemma 3n's second table, which llama-quantize treats as token_embd.
  if (/^(?:embed_tokens|wte|tok_embeddings|word_embeddings|embed_in|token_embd|per_layer_token_embd|embeddings|tok_embd)$/.test(m) && !/experts/.test(full)) {
    return { role: 'embedding', kind: 'token' };
  }
  if (/^(?:wpe|position_embeddings|embed_positions|position_embd|pos_embed)$/.test(m)) return { role: 'embedding', kind: 'position' };
  if (/^(?:token_type_embeddings|token_types)$/.test(m)) return { role: 'embedding', kind: 'token_type' };
  if ((m === 'lm_head' || m === 'embed_out') || (m === 'output' && n === 1)) return { role: 'output' };

  // GGUF block tensors.
  if (m in GGUF_ATTN) return { role: 'attention', kind: GGUF_ATTN[m] };
  const g = GGUF_FFN.exec(m);
  if (g) return { role: g[2] === 'exps' ? 'expert' : g[2] === 'shexp' ? 'shared_expert' : 'ffn', kind: g[1] };

  // Hugging Face / Meta names: the container decides between attention and FFN (c_proj is both).
  const inShared = segs.some((s) => s === 'shared_experts' || s === 'shared_expert' || s === 'shared_mlp');
  const inExperts = !inShared && segs.includes('experts');
  if (inShared && m in FFN_KIND) return { role: 'shared_expert', kind: FFN_KIND[m] };
  if (inExperts && m in FFN_KIND) return { role: 'expert', kind: FFN_KIND[m] };
  if (ATTN_CONTAINERS.has(parent) && m in ATTN_KIND) return { role: 'attention', kind: ATTN_KIND[m] };
  if (FFN_CONTAINERS.has(parent) && m in FFN_KIND) return { role: 'ffn', kind: FFN_KIND[m] };
  // Meta's original Llama names without container match (layers.N.attention.wq handled above);
  // Phi-2's self_attn.dense and Falcon's query_key_value are covered by the tables.
  return { role: 'other' };
}

/** Detects the role of one tensor from its name. */
export function detectRole(name: string): TensorRole {
  const layerM = LAYER_RE.exec(name);
  const expertM = EXPERT_RE.exec(name);
  const where: Pick<TensorRole, 'layer' | 'expert'> = {};
  if (layerM) where.layer = Number(layerM[1]);
  if (expertM) where.expert = Number(expertM[1]);

  if (isQuantAux(name)) return { role: 'other', kind: 'quant_aux', ...where };
  const { segs, param } = splitName(name);
  const m = segs[segs.length - 1] ?? '';

  const isBias =
    param === 'bias' ||
    (/_bias$/.test(m) && m !== 'e_score_correction_bias' && m !== 'attn_rel_b') ||
    // GPT-2's causal-mask buffers (h.N.attn.bias / masked_bias).
    m === 'masked_bias';
  if (isBias) {
    const stripped = m.endsWith('_bias') ? [...segs.slice(0, -1), m.slice(0, -5)] : segs;
    const w = weightRole(stripped);
    // A norm's bias and the router's correction bias stay in their own roles (both always kept).
    if (w.role === 'norm' || w.role === 'router') return { ...w, ...where };
    return { role: 'bias', kind: w.kind, parent: w.role, ...where };
  }
  if (m === 'exp_probs_b') return { role: 'router', kind: 'bias', ...where };
  return { ...weightRole(segs), ...where };
}

/**
 * llama.cpp's `use_more_bits(i_layer, n_layers)`: the first eighth, the last eighth and every third
 * layer in between (integer division as in C).
 */
export function useMoreBits(layer: number, nLayers: number): boolean {
  const e = Math.floor(nLayers / 8);
  return layer < e || layer >= Math.floor((7 * nLayers) / 8) || (layer - e) % 3 === 2;
}
