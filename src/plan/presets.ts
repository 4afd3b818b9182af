// Named plans. GGUF presets follow llama-quantize's per-ftype policy (shared/spec §17); the others
// follow what bitsandbytes / MaxText / HQQ users run. Users add their own with registerPreset.
import { ErrorCodes, fail } from '../errors.js';
import { normalizePlan } from './json.js';
import type { Plan, PlanRule, ProtectClass } from './types.js';

export interface Preset {
  name: string;
  description: string;
  plan: Plan;
  /** Container the preset is meant for. */
  container: 'gguf' | 'safetensors';
  /** GGUF general.file_type (llama_ftype), GGUF presets only. */
  fileType?: number;
  /**
   * Rough ranks used by recommend(): higher is better. quality ~ fidelity to the original weights;
   * speed ~ how cheap the weights are to dequantize / multiply on the targets webquant serves.
   */
  quality: number;
  speed: number;
  /**
   * Meant for checkpoints trained at that precision (ternary or binary weights: TQ1_0, TQ2_0,
   * Q1_0, Q2_0), which ruin other models: recommend() considers it only when named in `presets`.
   */
  trainedOnly?: boolean;
}

/** llama_ftype ids (shared/spec §17). */
export const LLAMA_FTYPE = Object.freeze({
  ALL_F32: 0, MOSTLY_F16: 1, MOSTLY_Q4_0: 2, MOSTLY_Q4_1: 3, MOSTLY_Q8_0: 7, MOSTLY_Q5_0: 8, MOSTLY_Q5_1: 9,
  MOSTLY_Q2_K: 10, MOSTLY_Q3_K_S: 11, MOSTLY_Q3_K_M: 12, MOSTLY_Q3_K_L: 13, MOSTLY_Q4_K_S: 14, MOSTLY_Q4_K_M: 15,
  MOSTLY_Q5_K_S: 16, MOSTLY_Q5_K_M: 17, MOSTLY_Q6_K: 18, MOSTLY_IQ2_XXS: 19, MOSTLY_IQ2_XS: 20, MOSTLY_Q2_K_S: 21, MOSTLY_IQ3_XS: 22, MOSTLY_IQ3_XXS: 23,
  MOSTLY_IQ1_S: 24, MOSTLY_IQ4_NL: 25, MOSTLY_IQ3_S: 26, MOSTLY_IQ3_M: 27, MOSTLY_IQ2_S: 28, MOSTLY_IQ2_M: 29, MOSTLY_IQ4_XS: 30,
  MOSTLY_IQ1_M: 31, MOSTLY_BF16: 32,
  MOSTLY_TQ1_0: 36, MOSTLY_TQ2_0: 37, MOSTLY_MXFP4_MOE: 38, MOSTLY_NVFP4: 39, MOSTLY_Q1_0: 40, MOSTLY_Q2_0: 41,
});

// llama-quantize quantizes token_embd with the file's type, never position embeddings.
const GGUF_PROTECT: ProtectClass[] = ['norm', 'router', 'bias', '1d', 'position', 'non_weight'];

/** output.weight (or the tied token_embd) -> Q6_K for every quantized ftype but Q8_0 (§17). */
const OUTPUT_Q6K: PlanRule = { role: 'output', scheme: { format: 'q6_k' }, note: 'llama.cpp: output.weight / tied token_embd -> Q6_K' };

/**
 * What llama.cpp's rules for attn_v cover (category_is_attn_v): attn_v, the fused attn_qkv
 * (Phi-3, GPT-2, ...) and DeepSeek's attn_kv_b, counted together.
 */
const V = ['v', 'qkv', 'kv_b'];
/** For every quantized ftype llama.cpp puts attn_v and attn_k of 8-expert models (Mixtral) in Q8_0. */
const MOE8_KV: PlanRule = { role: 'attention', kind: [...V, 'k'], nExperts: 8, scheme: { format: 'q8_0' }, optional: true, note: 'llama.cpp: 8-expert attn_v / attn_k -> Q8_0' };
/** ...and, for Q2_K, Q3_K_S, Q3_K_M, Q4_K_S, Q4_K_M, IQ4_NL and IQ4_XS, attn_output in Q5_K. */
const MOE8_O: PlanRule = { role: 'attention', kind: 'o', nExperts: 8, scheme: { format: 'q5_k' }, optional: true, note: 'llama.cpp: 8-expert attn_output -> Q5_K' };
const FFN_DOWN = ['ffn', 'expert', 'shared_expert'] as PlanRule['role'];
/**
 * A rule of llama_tensor_get_type: `kind` of `role` -> `format` (optionally on some layers, which
 * count as llama.cpp counts them). Attention kind 'v' stands for every attn_v-like tensor (V).
 */
function bump(role: 'attention' | 'ffn', kind: string | string[], format: string, note: string, extra: Partial<PlanRule> = {}): PlanRule {
  const kinds = role === 'attention' && kind === 'v' ? V : kind;
  return { role: role === 'ffn' ? FFN_DOWN : 'attention', kind: kinds, scheme: { format }, optional: true, note: `llama.cpp ${note}`, ...(extra.layers ? { layerCount: 'llama' } : {}), ...extra };
}

/** output.weight (or the tied token_embd) of the IQ1 / IQ2 / IQ3_XXS ftypes: Q5_K, Q8_0 when its rows do not fit 256. */
function outputQ5K(ftype: string): PlanRule {
  return { role: 'output', scheme: { format: 'q5_k' }, fallback: 'q8_0', note: `llama.cpp ${ftype}: output.weight / tied token_embd -> Q5_K (Q8_0 when rows do not fit 256)` };
}

/**
 * The IQ1 / IQ2 ftypes' branch of llama_tensor_get_type: output Q5_K; token_embd, attn_v, the
 * first eighth of ffn_down (llama.cpp counts ffn_down tensors, which is the layer for one per
 * layer) and attn_output as below; attn_k of 8-expert models Q4_K; no 8-expert Q8_0 bumps.
 * `iq2sLike`: IQ2_S / IQ2_M, whose smaller bumps are IQ3_S where the others' are Q2_K.
 */
function iqLowRules(ftype: string, iq2sLike: boolean, attnOutput?: string): PlanRule[] {
  const small = iq2sLike ? 'iq3_s' : 'q2_k';
  return [
    outputQ5K(ftype),
    { role: 'embedding', kind: 'token', scheme: { format: small }, optional: true, note: `llama.cpp ${ftype}: token_embd -> ${small.toUpperCase()}` },
    bump('attention', 'v', 'q4_k', `${ftype} attn_v, n_gqa >= 4`, { minGqa: 4 }),
    bump('attention', 'v', 'q4_k', `${ftype} attn_v, >= 4 experts`, { minExperts: 4 }),
    bump('attention', 'v', small, `${ftype} attn_v`),
    bump('attention', 'k', 'q4_k', `${ftype} attn_k, 8 experts`, { nExperts: 8 }),
    // This branch tests llama.cpp's ffn_down counter itself, with experts too.
    bump('ffn', 'down', small, `${ftype} ffn_down`, { layers: 'first_eighth', layerCount: 'llama-raw' }),
    bump('attention', 'o', 'q5_k', `${ftype} attn_output, 8 experts`, { nExperts: 8 }),
    ...(attnOutput ? [bump('attention', 'o', attnOutput, `${ftype} attn_output`)] : []),
  ];
}

/** 70B models: an attn_v the IQ3 ftypes put in Q4_K goes to Q5_K (before the 8-expert Q8_0, which MOE8_KV applies first). */
const V70B_IQ3: PlanRule = { role: 'attention', kind: V, modelType: '70B', scheme: { format: 'q5_k' }, optional: true, note: 'llama.cpp: attn_v of 70B models Q4_K -> Q5_K' };

/** TQ1_0 / TQ2_0 / Q2_0 files keep an untied token_embd in Q4_K (a tied one is the output: Q6_K). */
const TQ_EMBD: PlanRule = { role: 'embedding', kind: 'token', scheme: { format: 'q4_k' }, optional: true, note: 'llama.cpp TQ1_0 / TQ2_0 / Q2_0: token_embd -> Q4_K' };

/** llama.cpp gives 70B models' attn_v Q5_K where the ftype would give Q3_K or Q4_K. */
const V70B: PlanRule = { role: 'attention', kind: V, modelType: '70B', scheme: { format: 'q5_k' }, optional: true, note: 'llama.cpp: attn_v of 70B models Q3_K/Q4_K -> Q5_K' };

/**
 * Tensors llama-quantize never quantizes (tensor_allows_quantization), by the same substrings:
 * Mamba and LFM2 convolutions, Gemma 3n's AltUp / Laurel and per-layer projection, indexer
 * projections, RWKV mixing, T5 relative bias, multimodal position / patch tensors and audio code
 * books. Norms, routers, position embeddings, vectors and names not ending in "weight" are the
 * protected classes (GGUF_PROTECT).
 */
const GGUF_SKIP = [
  '/ssm_conv1d|shortconv\\.conv\\.weight|altup|laurel|per_layer_model_proj|indexer\\.[kq]_proj\\.weight|attn_rel_b\\.weight|' +
    'time_mix_(?:first|w0|w1|w2|v0|v1|v2|a0|a1|a2|g1|g2|decay_w1|decay_w2|lerp_fused)\\.weight|' +
    '\\.position_embd|sam\\.pos_embd|sam\\.neck\\.|sam\\.net_|\\.rel_pos|\\.patch_embd|\\.patch_merger|a\\.rvq\\.codebook|mm\\.a\\.code_embd/',
];

/**
 * `own`: the preset's rules replace the generic output / 8-expert ones (llama.cpp's IQ1 / IQ2 /
 * IQ3_XXS ftypes, whose branches of llama_tensor_get_type differ there).
 */
function gguf(name: string, fileType: number, format: string, description: string, quality: number, speed: number, extra: PlanRule[] = [], quantized = true, own = false, requireImportance?: string[]): Preset {
  return {
    name,
    description,
    container: 'gguf',
    fileType,
    quality,
    speed,
    plan: {
      name, description, default: { format }, skip: GGUF_SKIP, protect: GGUF_PROTECT, fileType,
      // F16/BF16 files skip llama_tensor_get_type altogether; Q8_0 keeps output.weight in Q8_0.
      rules: !quantized ? [] : own ? extra : [...(format === 'q8_0' ? [] : [OUTPUT_Q6K]), MOE8_KV, ...extra],
      ...(requireImportance ? { requireImportance } : {}),
    },
  };
}

function st(name: string, description: string, scheme: Plan['default'], quality: number, speed: number, rules: PlanRule[] = []): Preset {
  return {
    name,
    description,
    container: 'safetensors',
    quality,
    speed,
    // The output head stays in the source precision, as bitsandbytes / GPTQ / AWQ exports do.
    plan: { name, description, default: scheme, rules: [{ role: 'output', scheme: 'keep', optional: true, note: 'output head kept' }, ...rules], skip: [] },
  };
}

/**
 * What mlx_lm's `convert -q --q-bits <bits>` writes: every weight matrix (token embedding and
 * output head included, as mlx_lm quantizes every Linear and Embedding) in MLX's affine format,
 * groups of 64; norms, routers and biases stay as stored.
 */
function mlx(name: string, bits: number): Preset {
  const description = `MLX ${bits}-bit (mlx_lm convert -q): affine, bf16 scale and bias per group of 64, embedding and head included`;
  return {
    name, description, container: 'safetensors', quality: bits === 8 ? 9 : 6, speed: bits === 8 ? 8 : 7,
    plan: { name, description, default: { format: 'mlx', bits, groupSize: 64 }, rules: [], skip: [], protect: ['norm', 'router', 'bias', '1d', 'position'] },
  };
}

const trained = (p: Preset): Preset => ({ ...p, trainedOnly: true });

const builtins: Preset[] = [
  gguf('f16', LLAMA_FTYPE.MOSTLY_F16, 'f16', 'GGUF F16: every >=2-D weight in IEEE half; norms and other vectors stay F32', 10, 4, [], false),
  gguf('bf16', LLAMA_FTYPE.MOSTLY_BF16, 'bf16', 'GGUF BF16: every >=2-D weight in bfloat16; norms and other vectors stay F32', 10, 4, [], false),
  gguf('q8_0', LLAMA_FTYPE.MOSTLY_Q8_0, 'q8_0', 'GGUF Q8_0 (8.5 bpw), output included (llama.cpp keeps Q8_0 for output.weight in this ftype)', 9, 9),
  gguf('q6_k', LLAMA_FTYPE.MOSTLY_Q6_K, 'q6_k', 'GGUF Q6_K (6.56 bpw) everywhere; rows not a multiple of 256 fall back to Q8_0', 8, 6),
  gguf('q4_0', LLAMA_FTYPE.MOSTLY_Q4_0, 'q4_0', 'GGUF Q4_0 (4.5 bpw); output.weight / tied embedding Q6_K; with an imatrix, ffn_down of the first eighth of layers Q4_1', 5, 8,
    [bump('ffn', 'down', 'q4_1', 'Q4_0 ffn_down with imatrix', { layers: 'first_eighth', importance: true })]),
  gguf('q4_1', LLAMA_FTYPE.MOSTLY_Q4_1, 'q4_1', 'GGUF Q4_1 (5.0 bpw); output.weight / tied embedding Q6_K', 5.5, 8),
  gguf('q5_0', LLAMA_FTYPE.MOSTLY_Q5_0, 'q5_0', 'GGUF Q5_0 (5.5 bpw); output.weight / tied embedding Q6_K; with an imatrix, ffn_down of the first eighth of layers Q5_1', 7, 8,
    [bump('ffn', 'down', 'q5_1', 'Q5_0 ffn_down with imatrix', { layers: 'first_eighth', importance: true })]),
  gguf('q5_1', LLAMA_FTYPE.MOSTLY_Q5_1, 'q5_1', 'GGUF Q5_1 (6.0 bpw); output.weight / tied embedding Q6_K', 7.2, 8),
  gguf('q2_k', LLAMA_FTYPE.MOSTLY_Q2_K, 'q2_k',
    "llama.cpp's Q2_K mixture: Q2_K by default; attn_v Q4_K when n_gqa >= 4, else Q3_K; ffn_down and attn_output Q3_K; output Q6_K",
    2, 5,
    [MOE8_O, V70B, bump('attention', 'v', 'q4_k', 'Q2_K attn_v, n_gqa >= 4', { minGqa: 4 }), bump('attention', 'v', 'q3_k', 'Q2_K attn_v'),
     bump('ffn', 'down', 'q3_k', 'Q2_K ffn_down'), bump('attention', 'o', 'q3_k', 'Q2_K attn_output')]),
  gguf('q2_k_s', LLAMA_FTYPE.MOSTLY_Q2_K_S, 'q2_k',
    "llama.cpp's Q2_K_S (needs an importance matrix for its Q2_K tensors): Q2_K by default, attn_output included; attn_v Q4_K when n_gqa >= 4; ffn_down of the first eighth of layers Q4_K; output Q6_K",
    1.8, 5,
    [{ ...V70B, minGqa: 4 }, bump('attention', 'v', 'q4_k', 'Q2_K_S attn_v, n_gqa >= 4', { minGqa: 4 }), bump('ffn', 'down', 'q4_k', 'Q2_K_S ffn_down', { layers: 'first_eighth' })],
    true, false, ['q2_k']),
  gguf('q3_k_s', LLAMA_FTYPE.MOSTLY_Q3_K_S, 'q3_k', "llama.cpp's Q3_K_S: Q3_K everywhere but output (Q6_K)", 3, 5, [MOE8_O, V70B]),
  gguf('q3_k_m', LLAMA_FTYPE.MOSTLY_Q3_K_M, 'q3_k',
    "llama.cpp's Q3_K_M mixture: Q3_K by default; attn_v Q5_K on the first two layers, Q4_K after; ffn_down Q5_K on the first sixteenth of layers, Q4_K after; attn_output Q4_K; output Q6_K",
    3.5, 5,
    [MOE8_O, V70B, bump('attention', 'v', 'q5_k', 'Q3_K_M attn_v', { layers: [0, 1] }), bump('attention', 'v', 'q4_k', 'Q3_K_M attn_v'),
     bump('ffn', 'down', 'q5_k', 'Q3_K_M ffn_down', { layers: 'first_sixteenth' }), bump('ffn', 'down', 'q4_k', 'Q3_K_M ffn_down'),
     bump('attention', 'o', 'q4_k', 'Q3_K_M attn_output')]),
  gguf('q3_k_l', LLAMA_FTYPE.MOSTLY_Q3_K_L, 'q3_k',
    "llama.cpp's Q3_K_L mixture: Q3_K by default; attn_v, ffn_down and attn_output Q5_K (attn_output stays Q3_K with 8 experts); output Q6_K",
    4, 5,
    [bump('attention', 'o', 'q3_k', 'Q3_K_L attn_output, 8 experts', { nExperts: 8 }), bump('attention', 'v', 'q5_k', 'Q3_K_L attn_v'),
     bump('ffn', 'down', 'q5_k', 'Q3_K_L ffn_down'), bump('attention', 'o', 'q5_k', 'Q3_K_L attn_output')]),
  gguf('q4_k_s', LLAMA_FTYPE.MOSTLY_Q4_K_S, 'q4_k',
    "llama.cpp's Q4_K_S mixture: Q4_K by default; attn_v of the first four layers and ffn_down of the first eighth Q5_K; output Q6_K",
    6.5, 6,
    [MOE8_O, V70B, bump('attention', 'v', 'q5_k', 'Q4_K_S attn_v', { layers: [0, 1, 2, 3] }), bump('ffn', 'down', 'q5_k', 'Q4_K_S ffn_down', { layers: 'first_eighth' })]),
  gguf('q4_k_m', LLAMA_FTYPE.MOSTLY_Q4_K_M, 'q4_k',
    "llama.cpp's Q4_K_M mixture: Q4_K by default; Q6_K for attn_v and ffn_down (dense, expert and shared-expert) on " +
    'the layers use_more_bits picks (first 1/8, last 1/8, every third in between); ' +
    'Q6_K for output.weight / tied token_embd. Rows not a multiple of 256 fall back Q4_K->Q5_0, Q6_K->Q8_0, Q5_K->Q5_1, then F16.',
    7, 6,
    [MOE8_O, bump('attention', 'v', 'q6_k', 'Q4_K_M attn_v', { layers: 'use_more_bits' }), V70B,
     bump('ffn', 'down', 'q6_k', 'Q4_K_M ffn_down', { layers: 'use_more_bits' })]),
  gguf('q5_k_s', LLAMA_FTYPE.MOSTLY_Q5_K_S, 'q5_k', "llama.cpp's Q5_K_S: Q5_K everywhere but output (Q6_K)", 7.5, 6),
  gguf('q5_k_m', LLAMA_FTYPE.MOSTLY_Q5_K_M, 'q5_k',
    "llama.cpp's Q5_K_M mixture: Q5_K by default; Q6_K for attn_v and ffn_down on the layers use_more_bits picks; output Q6_K",
    7.8, 6,
    [bump('attention', 'v', 'q6_k', 'Q5_K_M attn_v', { layers: 'use_more_bits' }),
     bump('ffn', 'down', 'q6_k', 'Q5_K_M ffn_down', { layers: 'use_more_bits' })]),
  gguf('iq4_xs', LLAMA_FTYPE.MOSTLY_IQ4_XS, 'iq4_xs',
    'GGUF IQ4_XS (4.25 bpw, non-linear grid, 6-bit sub-block scales); output Q6_K; attn_v Q5_K when n_gqa >= 4; ffn_down of the first 1/8 of layers Q5_K without an imatrix',
    5.8, 5,
    [MOE8_O, bump('attention', 'v', 'q5_k', 'IQ4_XS attn_v, n_gqa >= 4', { minGqa: 4 }),
     bump('ffn', 'down', 'q5_k', 'IQ4_XS ffn_down, no imatrix', { layers: 'first_eighth', importance: false })]),
  gguf('iq4_nl', LLAMA_FTYPE.MOSTLY_IQ4_NL, 'iq4_nl',
    'GGUF IQ4_NL (4.5 bpw, non-linear grid); output Q6_K; attn_v Q5_K when n_gqa >= 4; ffn_down of the first 1/8 of layers Q5_K (llama.cpp without imatrix)',
    6, 5,
    [MOE8_O, bump('attention', 'v', 'q5_k', 'IQ4_NL attn_v, n_gqa >= 4', { minGqa: 4 }),
     bump('ffn', 'down', 'q5_k', 'IQ4_NL ffn_down, no imatrix', { layers: 'first_eighth', importance: false })]),
  gguf('iq3_m', LLAMA_FTYPE.MOSTLY_IQ3_M, 'iq3_s',
    "llama.cpp's IQ3_M mixture: IQ3_S by default (3.44 bpw); attn_v Q4_K; ffn_down of the first eighth of layers (with 8 experts also of the use_more_bits layers) Q4_K; attn_output Q4_K; output Q6_K",
    3.8, 4,
    [MOE8_O, V70B_IQ3, bump('attention', 'v', 'q4_k', 'IQ3_M attn_v'), bump('ffn', 'down', 'q4_k', 'IQ3_M ffn_down', { layers: 'first_eighth' }),
     bump('ffn', 'down', 'q4_k', 'IQ3_M ffn_down, 8 experts', { layers: 'use_more_bits', nExperts: 8 }),
     bump('attention', 'o', 'q4_k', 'IQ3_M attn_output')]),
  gguf('iq3_s', LLAMA_FTYPE.MOSTLY_IQ3_S, 'iq3_s',
    "llama.cpp's IQ3_S: IQ3_S by default (3.44 bpw); attn_v Q4_K when n_gqa >= 4; output Q6_K",
    3.5, 4, [MOE8_O, { ...V70B_IQ3, minGqa: 4 }, bump('attention', 'v', 'q4_k', 'IQ3_S attn_v, n_gqa >= 4', { minGqa: 4 })]),
  gguf('iq3_xs', LLAMA_FTYPE.MOSTLY_IQ3_XS, 'iq3_s',
    "llama.cpp's IQ3_XS mixture (needs an importance matrix for its IQ3_XXS tensors): IQ3_S by default (3.44 bpw); attn_q, attn_k and the FFN gate / up of the middle three quarters of layers IQ3_XXS; attn_v Q4_K when n_gqa >= 4; output Q6_K",
    3.2, 4,
    [MOE8_O, { ...V70B_IQ3, minGqa: 4 }, bump('attention', 'v', 'q4_k', 'IQ3_XS attn_v, n_gqa >= 4', { minGqa: 4 }),
     bump('attention', ['k', 'q'], 'iq3_xxs', 'IQ3_XS attn_q / attn_k'),
     bump('ffn', ['gate', 'up', 'gate_up'], 'iq3_xxs', 'IQ3_XS ffn_gate / ffn_up', { layers: 'middle_three_quarters' })]),
  gguf('iq3_xxs', LLAMA_FTYPE.MOSTLY_IQ3_XXS, 'iq3_xxs',
    "llama.cpp's IQ3_XXS mixture: IQ3_XXS by default (3.06 bpw); attn_q / attn_k IQ2_S; attn_v Q4_K when n_gqa >= 4, else IQ3_S without an imatrix; attn_output and token_embd IQ3_S; without an imatrix ffn_down Q4_K on the first eighth of layers, Q3_K after; output Q5_K",
    3, 4,
    [outputQ5K('IQ3_XXS'), MOE8_KV, { role: 'embedding', kind: 'token', scheme: { format: 'iq3_s' }, optional: true, note: 'llama.cpp IQ3_XXS: token_embd -> IQ3_S' },
     MOE8_O, { ...V70B_IQ3, minGqa: 4 }, bump('attention', 'v', 'q4_k', 'IQ3_XXS attn_v, n_gqa >= 4', { minGqa: 4 }),
     bump('attention', 'v', 'iq3_s', 'IQ3_XXS attn_v, no imatrix', { importance: false }),
     bump('attention', ['k', 'q'], 'iq2_s', 'IQ3_XXS attn_q / attn_k'),
     bump('ffn', 'down', 'q4_k', 'IQ3_XXS ffn_down, no imatrix', { layers: 'first_eighth', importance: false }),
     bump('ffn', 'down', 'q3_k', 'IQ3_XXS ffn_down, no imatrix', { importance: false }),
     bump('attention', 'o', 'iq3_s', 'IQ3_XXS attn_output')], true, true),
  gguf('iq2_m', LLAMA_FTYPE.MOSTLY_IQ2_M, 'iq2_s',
    "llama.cpp's IQ2_M mixture (meant for an importance matrix): IQ2_S by default (2.56 bpw); token_embd, attn_v, attn_output and the first eighth of ffn_down IQ3_S (attn_v Q4_K when n_gqa >= 4 or >= 4 experts); output Q5_K",
    2.5, 3, iqLowRules('IQ2_M', true, 'iq3_s'), true, true),
  gguf('iq2_s', LLAMA_FTYPE.MOSTLY_IQ2_S, 'iq2_xs',
    "llama.cpp's IQ2_S mixture (needs an importance matrix): IQ2_XS by default (2.31 bpw); token_embd, attn_v, attn_output and the first eighth of ffn_down IQ3_S (attn_v Q4_K when n_gqa >= 4 or >= 4 experts); output Q5_K",
    2.2, 3, iqLowRules('IQ2_S', true, 'iq3_s'), true, true),
  gguf('iq2_xs', LLAMA_FTYPE.MOSTLY_IQ2_XS, 'iq2_xs',
    "llama.cpp's IQ2_XS mixture (needs an importance matrix): IQ2_XS by default (2.31 bpw); token_embd, attn_v and the first eighth of ffn_down Q2_K (attn_v Q4_K when n_gqa >= 4 or >= 4 experts); output Q5_K",
    2, 3, iqLowRules('IQ2_XS', false), true, true),
  gguf('iq2_xxs', LLAMA_FTYPE.MOSTLY_IQ2_XXS, 'iq2_xxs',
    "llama.cpp's IQ2_XXS mixture (needs an importance matrix): IQ2_XXS by default (2.06 bpw); token_embd, attn_v and the first eighth of ffn_down Q2_K (attn_v Q4_K when n_gqa >= 4 or >= 4 experts); output Q5_K",
    1.8, 3, iqLowRules('IQ2_XXS', false), true, true),
  gguf('iq1_m', LLAMA_FTYPE.MOSTLY_IQ1_M, 'iq1_m',
    "llama.cpp's IQ1_M mixture (meant for an importance matrix): IQ1_M by default (1.75 bpw); attn_output IQ2_XXS; token_embd, attn_v and the first eighth of ffn_down Q2_K (attn_v Q4_K when n_gqa >= 4 or >= 4 experts); output Q5_K",
    1.2, 3, iqLowRules('IQ1_M', false, 'iq2_xxs'), true, true),
  gguf('iq1_s', LLAMA_FTYPE.MOSTLY_IQ1_S, 'iq1_s',
    "llama.cpp's IQ1_S mixture (needs an importance matrix): IQ1_S by default (1.56 bpw); attn_output IQ2_XXS; token_embd, attn_v and the first eighth of ffn_down Q2_K (attn_v Q4_K when n_gqa >= 4 or >= 4 experts); output Q5_K",
    1, 3, iqLowRules('IQ1_S', false, 'iq2_xxs'), true, true),
  trained(gguf('tq1_0', LLAMA_FTYPE.MOSTLY_TQ1_0, 'tq1_0',
    'GGUF TQ1_0 (1.69 bpw, ternary: for BitNet b1.58 / TriLM checkpoints trained ternary); token_embd Q4_K; output Q6_K; rows not a multiple of 256 fall back to Q4_0',
    0.5, 5, [TQ_EMBD])),
  trained(gguf('tq2_0', LLAMA_FTYPE.MOSTLY_TQ2_0, 'tq2_0',
    'GGUF TQ2_0 (2.06 bpw, ternary, faster to unpack than TQ1_0: for BitNet b1.58 / TriLM checkpoints); token_embd Q4_K; output Q6_K; rows not a multiple of 256 fall back to Q4_0',
    0.5, 6, [TQ_EMBD])),
  trained(gguf('q2_0', LLAMA_FTYPE.MOSTLY_Q2_0, 'q2_0',
    'GGUF Q2_0 (2.25 bpw: codes -1, 0, 1, 2 times the absmax of 64 values, for checkpoints trained at about two bits); token_embd Q4_K; output Q6_K; rows not a multiple of 64 fall back to Q4_0',
    0.6, 7, [TQ_EMBD])),
  trained(gguf('q1_0', LLAMA_FTYPE.MOSTLY_Q1_0, 'q1_0',
    'GGUF Q1_0 (1.125 bpw: signs times the mean |x| of 128 values, for checkpoints trained with binary weights); output Q6_K; token_embd Q1_0 too, as llama-quantize writes it; rows not a multiple of 128 go to F16',
    0.3, 7)),
  gguf('mxfp4_moe', LLAMA_FTYPE.MOSTLY_MXFP4_MOE, 'q8_0',
    "llama.cpp's MXFP4_MOE: MoE expert tensors in MXFP4 (gpt-oss's own experts keep their values), every other weight Q8_0",
    6, 7, [{ role: 'expert', scheme: { format: 'mxfp4_gguf' }, optional: true, note: 'llama.cpp MXFP4_MOE: experts -> MXFP4' }]),
  st('int8', 'int8 symmetric, one absmax scale per output channel (MaxText int8w)', { format: 'int8', granularity: 'channel' }, 9, 9),
  st('fp8', 'FP8 E4M3 with one scale per output channel', { format: 'fp8_e4m3', granularity: 'channel' }, 8, 9),
  st('int4w', 'int4 weights, one scale per group of 128', { format: 'int4', groupSize: 128 }, 5, 8),
  st('hqq4', 'affine 4-bit, group 64, scale and zero optimised by HQQ', { format: 'affine', bits: 4, groupSize: 64, calibration: 'hqq' }, 6, 7),
  st('nf4', 'bitsandbytes NF4 (normal-float 4-bit, absmax per block of 64)', { format: 'nf4' }, 5, 6),
  st('fp4', 'bitsandbytes FP4 (E2M1, absmax per block of 64)', { format: 'fp4' }, 4, 6),
  st('bnb-nf4', "NF4 as transformers saves bitsandbytes 4-bit (load_in_4bit, no double quantization): from_pretrained loads the folder", { format: 'bnb_nf4' }, 5, 6),
  st('bnb-nf4-dq', "NF4 with bitsandbytes' double quantization (bnb_4bit_use_double_quant, as QLoRA and the Unsloth -bnb-4bit releases): absmax as 8-bit codes, about 0.37 bits per weight less", { format: 'bnb_nf4', doubleQuant: true }, 5, 6),
  st('bnb-fp4', 'FP4 as transformers saves bitsandbytes 4-bit', { format: 'bnb_fp4' }, 4, 6),
  st('bnb-int8', 'LLM.int8 as transformers saves bitsandbytes 8-bit (load_in_8bit): int8 per row with its absmax (SCB)', { format: 'bnb_int8' }, 9, 7),
  st('mxfp4', 'OCP MXFP4: E2M1 values with a shared E8M0 scale per 32', { format: 'mxfp4' }, 4, 7),
  st('nvfp4', "NVFP4 as NVIDIA ModelOpt exports it: E2M1 values, an E4M3 scale per 16 and an f32 scale per tensor, under ModelOpt's tensor names", { format: 'nvfp4' }, 5, 7),
  mlx('mlx4', 4),
  mlx('mlx8', 8),
  st('adaptive', 'adaptive precision: attention (and everything else) int8 per channel, FFN / expert weights int4 group 128',
    { format: 'int8', granularity: 'channel' }, 7, 8,
    [{ role: ['ffn', 'expert', 'shared_expert'], scheme: { format: 'int4', groupSize: 128 }, note: 'FFN 4-bit' },
     { role: 'attention', scheme: { format: 'int8', granularity: 'channel' }, optional: true, note: 'attention 8-bit' }]),
];

const presets = new Map<string, Preset>();
for (const p of builtins) presets.set(p.name, freeze(p));

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

/** Registered presets are immutable: getPreset(...).plan can be shared and passed around freely. */
function freeze(p: Preset): Preset {
  return deepFreeze({ ...p, plan: normalizePlan(p.plan) });
}

/** Adds (or with replace, overrides) a preset. The plan is checked like any other plan. */
export function registerPreset(p: Preset, opts: { replace?: boolean } = {}): void {
  if (typeof p?.name !== 'string' || !/^[a-z0-9_.-]+$/i.test(p.name)) {
    fail(ErrorCodes.PLAN, `[preset] a preset needs a name of letters, digits, "_", "." or "-"`, { option: 'name', value: p?.name });
  }
  const key = p.name.toLowerCase();
  if (presets.has(key) && !opts.replace) {
    fail(ErrorCodes.PLAN, `[preset] preset "${p.name}" exists; pass {replace: true} to override it`, { option: 'name', value: p.name });
  }
  presets.set(key, freeze({ ...p, name: key, plan: { ...p.plan, name: p.plan.name ?? key } }));
}

export function listPresets(): Preset[] {
  return [...presets.values()];
}

/** llama-quantize's alias names for its K-quant mixtures. */
export const PRESET_ALIASES: Readonly<Record<string, string>> = Object.freeze({ q3_k: 'q3_k_m', q4_k: 'q4_k_m', q5_k: 'q5_k_m' });

export function getPreset(name: string): Preset {
  const key = typeof name === 'string' ? name.toLowerCase() : name;
  // A preset registered under an alias's name wins over the alias.
  const p = presets.get(key) ?? (typeof key === 'string' && Object.hasOwn(PRESET_ALIASES, key) ? presets.get(PRESET_ALIASES[key]) : undefined);
  if (!p) {
    fail(ErrorCodes.UNKNOWN_PRESET, `[preset] unknown preset "${String(name)}"; valid presets: ${[...presets.keys()].join(', ')}`, {
      option: 'preset', value: name, expected: [...presets.keys()],
    });
  }
  return p;
}
