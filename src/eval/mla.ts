// DeepSeek-V2/V3 multi-head latent attention for the reference forward (see LlamaConfig.mla), and
// the YaRN frequencies of DeepSeek's rotary embedding (LlamaConfig.yarn). Computed as the
// Hugging Face modules do: the latent is expanded into every head's keys and values (llama.cpp
// instead multiplies the queries into the latent space; the scores are the same).
import type { Dims, LlamaConfig } from './config.js';
import { rmsNorm } from './ops.js';
import type { Linear } from './weights.js';

type Mla = NonNullable<LlamaConfig['mla']>;

export interface MlaWeights {
  /** q_proj, or the q_a_proj / q_a_layernorm / q_b_proj pair. */
  q?: Linear;
  qa?: Linear; qaNorm?: Float32Array; qb?: Linear;
  kva: Linear; kvaNorm: Float32Array; kvb: Linear;
}

/** Loads an MLA layer's weights through the forward's loaders (names as mlaTensorNames). */
export async function mlaWeights(
  mla: Mla, heads: number, dim: number, p: string,
  linear: (name: string, rows: number, cols: number) => Promise<Linear>,
  vector: (name: string, n: number) => Promise<Float32Array>,
): Promise<MlaWeights> {
  const qDim = heads * (mla.nope + mla.rope);
  const q: Partial<MlaWeights> = mla.qLora
    ? { qa: await linear(`${p}self_attn.q_a_proj.weight`, mla.qLora, dim), qaNorm: await vector(`${p}self_attn.q_a_layernorm.weight`, mla.qLora), qb: await linear(`${p}self_attn.q_b_proj.weight`, qDim, mla.qLora) }
    : { q: await linear(`${p}self_attn.q_proj.weight`, qDim, dim) };
  return {
    ...q,
    kva: await linear(`${p}self_attn.kv_a_proj_with_mqa.weight`, mla.kvLora + mla.rope, dim),
    kvaNorm: await vector(`${p}self_attn.kv_a_layernorm.weight`, mla.kvLora),
    kvb: await linear(`${p}self_attn.kv_b_proj.weight`, heads * (mla.nope + mla.v), mla.kvLora),
  };
}

// The Hugging Face modules' RMSNorm default: q_a_layernorm and kv_a_layernorm are built without
// the config's eps.
const LATENT_EPS = 1e-6;

/**
 * q [n, heads, nope + rope], k [n, heads, nope + rope] and v [n, heads, v] of n positions of x
 * [n, dim]: the rope dims of q and of the shared rope key rotated (adjacent pairs) by cos/sin
 * [position, rope/2].
 */
export function mlaProject(W: MlaWeights, mla: Mla, d: Dims, x: Float32Array, n: number, cos: Float64Array, sin: Float64Array, q: Float32Array, k: Float32Array, v: Float32Array): void {
  const H = d.heads, hd = mla.nope + mla.rope, R = mla.kvLora, per = mla.nope + mla.v, half = mla.rope / 2;
  if (W.q) W.q.apply(x, n, q);
  else {
    const qa = new Float32Array(n * mla.qLora!);
    W.qa!.apply(x, n, qa);
    rmsNorm(qa, n, mla.qLora!, W.qaNorm!, LATENT_EPS, qa);
    W.qb!.apply(qa, n, q);
  }
  const ckv = new Float32Array(n * (R + mla.rope));
  W.kva.apply(x, n, ckv);
  const c = new Float32Array(n * R);
  for (let t = 0; t < n; t++) c.set(ckv.subarray(t * (R + mla.rope), t * (R + mla.rope) + R), t * R);
  rmsNorm(c, n, R, W.kvaNorm, LATENT_EPS, c);
  const kv = new Float32Array(n * H * per);
  W.kvb.apply(c, n, kv);
  for (let t = 0; t < n; t++) {
    const kpe = ckv.subarray(t * (R + mla.rope) + R, (t + 1) * (R + mla.rope));
    rotatePairs(kpe, 0, half, cos, sin, t * half);
    for (let h = 0; h < H; h++) {
      const o = (t * H + h) * hd, src = (t * H + h) * per;
      k.set(kv.subarray(src, src + mla.nope), o);
      k.set(kpe, o + mla.nope);
      v.set(kv.subarray(src + mla.nope, src + per), (t * H + h) * mla.v);
      rotatePairs(q, o + mla.nope, half, cos, sin, t * half);
    }
  }
}

/** Rotates `half` adjacent pairs of x starting at `at` by the angles at cos/sin[c0 ..]. */
function rotatePairs(x: Float32Array, at: number, half: number, cos: Float64Array, sin: Float64Array, c0: number): void {
  for (let i = 0; i < half; i++) {
    const a = x[at + 2 * i], b = x[at + 2 * i + 1];
    const cs = cos[c0 + i], sn = sin[c0 + i];
    x[at + 2 * i] = a * cs - b * sn;
    x[at + 2 * i + 1] = b * cs + a * sn;
  }
}

/** DeepSeek's yarn_get_mscale: 0.1 * m * ln(s) + 1 (1 for s <= 1). */
export const yarnMscale = (s: number, m: number) => (s <= 1 ? 1 : 0.1 * m * Math.log(s) + 1);

/**
 * The factor YaRN puts on cos and sin: rope_scaling.attention_factor when given, else
 * mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are non-zero (DeepSeek's
 * configs), else mscale(factor, 1) (transformers' _compute_yarn_parameters; llama.cpp likewise
 * ignores mscale without mscale_all_dim).
 */
export function yarnAttentionFactor(y: NonNullable<LlamaConfig['yarn']>): number {
  if (y.attentionFactor !== undefined) return y.attentionFactor;
  return y.mscale && y.mscaleAllDim ? yarnMscale(y.factor, y.mscale) / yarnMscale(y.factor, y.mscaleAllDim) : yarnMscale(y.factor, 1);
}

/**
 * YaRN as the divisor of each of the rot/2 frequencies (the forward's rope factors): a frequency
 * theta^(-2i/rot) becomes theta^(-2i/rot) * (ramp_i / factor + 1 - ramp_i), where the ramp rises
 * from 0 to 1 between the dims that turn betaFast and betaSlow times within `original` positions.
 */
export function yarnFactors(y: NonNullable<LlamaConfig['yarn']>, theta: number, rot: number): Float32Array {
  const corr = (rotations: number) => (rot * Math.log(y.original / (rotations * 2 * Math.PI))) / (2 * Math.log(theta));
  const whole = y.truncate !== false;
  const low = Math.max(whole ? Math.floor(corr(y.betaFast)) : corr(y.betaFast), 0);
  let high = Math.min(whole ? Math.ceil(corr(y.betaSlow)) : corr(y.betaSlow), rot - 1);
  if (low === high) high += 0.001;
  const out = new Float32Array(rot / 2);
  for (let i = 0; i < out.length; i++) {
    const ramp = Math.min(1, Math.max(0, (i - low) / (high - low)));
    // The Hugging Face mask is 1 - ramp: the share of the original frequency kept.
    const keep = 1 - ramp;
    out[i] = 1 / ((1 - keep) / y.factor + keep);
  }
  return out;
}
