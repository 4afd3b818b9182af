// Causal grouped-query attention of the reference forward: position t of head h attends to
// positions t-window+1..t of KV head h / (heads / kvHeads). Scores, softmax and the weighted sum
// of values are float64; values have vHeadDim dims per head (MLA's differ from the keys').
//
// Two paths with the same bits: `attentionReference` in plain loops, and `attention`, whose two
// products (scores, weighted values) run in wasm (assembly/serve/attention.ts) with each sum in
// the reference's order; the softmax (Math.exp, Math.tanh) stays here in both.
import type { Kernels } from '../kernels/loader.js';
import type { Dims } from './config.js';

export interface AttentionArgs {
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  n: number;
  d: Dims;
  scale: number;
  window: number;
  /** Soft cap of the scores (Gemma 2): cap * tanh(score / cap). */
  cap?: number;
  /** gpt-oss: a logit per head that joins the softmax and takes its share of the weight. */
  sinks?: Float32Array;
  /** n * attDim outputs. */
  att: Float32Array;
}

/** The softmax numerators of scores[s0..t] in place; returns their sum. */
function softmax(scores: Float64Array, s0: number, t: number, cap: number | undefined, sink: number | undefined): number {
  let max = -Infinity;
  for (let s = s0; s <= t; s++) {
    let sc = scores[s];
    if (cap) scores[s] = sc = cap * Math.tanh(sc / cap);
    if (sc > max) max = sc;
  }
  if (sink !== undefined && sink > max) max = sink;
  let sum = sink !== undefined ? Math.exp(sink - max) : 0;
  for (let s = s0; s <= t; s++) {
    const e = Math.exp(scores[s] - max);
    scores[s] = e;
    sum += e;
  }
  return sum;
}

export function attentionReference(a: AttentionArgs): void {
  const { q, k, v, n, d, scale, window, cap, sinks, att } = a;
  const hd = d.headDim, kvDim = d.kvDim, qDim = d.qDim, group = d.heads / d.kvHeads;
  const vd = d.vHeadDim, vDim = d.kvHeads * vd;
  const scores = new Float64Array(n);
  for (let t = 0; t < n; t++) {
    const s0 = Math.max(0, t - window + 1);
    for (let h = 0; h < d.heads; h++) {
      const qo = t * qDim + h * hd, ko = Math.floor(h / group) * hd;
      for (let s = s0, base = ko + s0 * kvDim; s <= t; s++, base += kvDim) {
        let sc = 0;
        for (let i = 0; i < hd; i++) sc += q[qo + i] * k[base + i];
        scores[s] = sc * scale;
      }
      const sum = softmax(scores, s0, t, cap, sinks?.[h]);
      const vo = Math.floor(h / group) * vd, ao = t * d.attDim + h * vd;
      for (let i = 0; i < vd; i++) {
        let acc = 0;
        for (let s = s0, base = vo + s0 * vDim + i; s <= t; s++, base += vDim) acc += scores[s] * v[base];
        att[ao + i] = acc / sum;
      }
    }
  }
}

const align16 = (x: number) => (x + 15) & ~15;

/** The same bits as attentionReference, its products in wasm (kernels: a named instance of its own). */
export function attention(kern: Kernels, a: AttentionArgs): void {
  const { q, k, v, n, d, scale, window, cap, sinks, att } = a;
  const hd = d.headDim, kvDim = d.kvDim, qDim = d.qDim, group = d.heads / d.kvHeads;
  const vd = d.vHeadDim, vDim = d.kvHeads * vd, attDim = d.attDim;
  // q (f32), keys transposed (f64), values (f64), scores (f64), outputs (f32).
  const qAt = 0, kAt = align16(qAt + 4 * n * qDim), vAt = align16(kAt + 8 * n * kvDim);
  const sAt = align16(vAt + 8 * n * vDim), oAt = align16(sAt + 8 * n), end = oAt + 4 * n * attDim;
  const base = kern.reserve(end);
  const buf = kern.buffer;
  new Float32Array(buf, base + qAt, n * qDim).set(q.subarray(0, n * qDim));
  const kT = new Float64Array(buf, base + kAt, n * kvDim);
  for (let s = 0; s < n; s++) for (let j = 0; j < kvDim; j++) kT[j * n + s] = k[s * kvDim + j];
  new Float64Array(buf, base + vAt, n * vDim).set(v.subarray(0, n * vDim));
  const scores = new Float64Array(buf, base + sAt, n);
  const scoresFn = kern.fn('attn_scores') as unknown as (q: number, kT: number, n: number, s0: number, t: number, hd: number, scale: number, out: number) => void;
  const valuesFn = kern.fn('attn_values') as unknown as (w: number, vf: number, s0: number, t: number, vd: number, vStride: number, sum: number, out: number) => void;
  for (let t = 0; t < n; t++) {
    const s0 = Math.max(0, t - window + 1);
    for (let h = 0; h < d.heads; h++) {
      const kvh = Math.floor(h / group);
      scoresFn(base + qAt + 4 * (t * qDim + h * hd), base + kAt + 8 * kvh * hd * n, n, s0, t, hd, scale, base + sAt);
      const sum = softmax(scores, s0, t, cap, sinks?.[h]);
      valuesFn(base + sAt, base + vAt + 8 * kvh * vd, s0, t, vd, vDim, sum, base + oAt + 4 * (t * attDim + h * vd));
    }
  }
  att.set(new Float32Array(buf, base + oAt, n * attDim));
}
