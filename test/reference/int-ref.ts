// Plain-TypeScript reference of the integer family (assembly/int/*.ts): the same math written
// directly from the documented rules, with Math.fround wherever the kernels use f32. The kernels
// of both wasm builds must reproduce these bytes exactly.
import { f16ToF32, f32ToF16 } from '../../src/util/half.js';

const fr = Math.fround;

export type Granularity = 'tensor' | 'channel' | 'group';
export type SymCalib =
  | { method: 'absmax' }
  | { method: 'clip'; ratio: number }
  | { method: 'fixed'; scale: number; max: number }
  | { method: 'percentile'; percentile: number }
  | { method: 'mse'; iterations: number };
export type AffineCalib = { method: 'minmax' } | { method: 'hqq'; iterations: number };

export interface SymOpts {
  bits: number;
  granularity: Granularity;
  groupSize: number;
  calibration: SymCalib;
  importance?: Float32Array;
}
export interface AffineOpts {
  bits: number;
  groupSize: number;
  calibration: AffineCalib;
  importance?: Float32Array;
}

/** Round half to even of a float (f32 or f64 value). */
export function roundEven(v: number): number {
  const r = Math.round(v);
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Packs integer codes as one LSB-first bit stream of b-bit fields (two's complement for negatives). */
export function packBits(codes: ArrayLike<number>, bits: number): Uint8Array {
  const out = new Uint8Array((codes.length * bits) / 8);
  for (let i = 0; i < codes.length; i++) {
    for (let t = 0; t < bits; t++) {
      if ((codes[i] >> t) & 1) out[(i * bits + t) >> 3] |= 1 << ((i * bits + t) & 7);
    }
  }
  return out;
}

export function unpackBits(bytes: Uint8Array, n: number, bits: number, signed: boolean, bitOffset = 0): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    let u = 0;
    for (let t = 0; t < bits; t++) {
      const k = bitOffset + i * bits + t;
      u |= ((bytes[k >> 3] >> (k & 7)) & 1) << t;
    }
    out.push(signed && u >= 1 << (bits - 1) ? u - (1 << bits) : u);
  }
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function f32Bytes(v: number[]): Uint8Array {
  return new Uint8Array(new Float32Array(v).buffer);
}
function u16Bytes(v: number[]): Uint8Array {
  return new Uint8Array(new Uint16Array(v).buffer);
}

// ---- symmetric ---------------------------------------------------------------------------

export function symCode(x: number, s: number, qmax: number): number {
  if (s === 0) return 0;
  return Math.min(Math.max(roundEven(fr(x / s)), -qmax), qmax);
}

/** Weighted squared error of scale s over xs (weights w or 1), summed left to right in f64. */
export function symSqErr(xs: ArrayLike<number>, s: number, qmax: number, w?: ArrayLike<number>): number {
  let e = 0;
  for (let i = 0; i < xs.length; i++) {
    const y = fr(symCode(xs[i], s, qmax) * s);
    const t = xs[i] - y;
    e = w ? e + t * t * w[i] : e + t * t;
  }
  return e;
}

export function gridRatio(j: number, steps: number): number {
  return fr(1 - (0.8 * j) / steps);
}

export function percentileRank(p: number, n: number): number {
  const k = Math.ceil((fr(p) * n) / 100);
  return k < 1 ? 1 : k > n ? n : k;
}

/** The bound rules of assembly/int/sym.ts for one set of values; `rows` splits it for per-tensor MSE sums. */
function symScale(xs: Float32Array, qmax: number, c: SymCalib, w: Float32Array | undefined, rowLen: number): number {
  if (c.method === 'fixed') return fr(fr(fr(c.scale) * fr(c.max)) / qmax);
  if (c.method === 'percentile') {
    const a = Array.from(xs, Math.abs).sort((p, q) => p - q);
    return fr(a[percentileRank(c.percentile, xs.length) - 1] / qmax);
  }
  let amax = 0;
  for (const v of xs) amax = Math.max(amax, Math.abs(v));
  if (c.method === 'clip') return fr(fr(fr(c.ratio) * amax) / qmax);
  if (c.method === 'absmax' || amax === 0) return fr(amax / qmax);
  let best = Infinity;
  let bestS = fr(amax / qmax);
  for (let j = 0; j < c.iterations; j++) {
    const s = fr(fr(gridRatio(j, c.iterations) * amax) / qmax);
    let e = 0;
    for (let r0 = 0; r0 < xs.length; r0 += rowLen) {
      e += symSqErr(xs.subarray(r0, r0 + rowLen), s, qmax, w?.subarray(0, Math.min(rowLen, xs.length - r0)));
    }
    if (e < best) {
      best = e;
      bestS = s;
    }
  }
  return bestS;
}

/** Bytes of the intsym/int8/int4 layout: codes rows, then scales rows (or the tensor scale). */
export function symQuantizeRef(x: Float32Array, rowLen: number, o: SymOpts): Uint8Array {
  const nrows = x.length / rowLen;
  const qmax = 2 ** (o.bits - 1) - 1;
  const codes = new Int32Array(x.length);
  const scales: number[] = [];
  const quant = (start: number, len: number, s: number) => {
    for (let i = start; i < start + len; i++) codes[i] = symCode(x[i], s, qmax);
  };
  if (o.granularity === 'tensor') {
    const s = symScale(x, qmax, o.calibration, o.importance, rowLen);
    quant(0, x.length, s);
    return concat([packBits(codes, o.bits), f32Bytes([s])]);
  }
  const run = o.granularity === 'channel' ? rowLen : o.groupSize;
  for (let r = 0; r < nrows; r++) {
    for (let j = 0; j < rowLen / run; j++) {
      const start = r * rowLen + j * run;
      const s = symScale(x.subarray(start, start + run), qmax, o.calibration, o.importance?.subarray(j * run, j * run + run), run);
      scales.push(s);
      quant(start, run, s);
    }
  }
  return concat([packBits(codes, o.bits), f32Bytes(scales)]);
}

export function symDequantizeRef(data: Uint8Array, nrows: number, rowLen: number, o: Omit<SymOpts, 'calibration'>): Float32Array {
  const n = nrows * rowLen;
  const codes = unpackBits(data, n, o.bits, true);
  const sv = new DataView(data.buffer, data.byteOffset + (n * o.bits) / 8);
  const run = o.granularity === 'group' ? o.groupSize : rowLen;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const s = o.granularity === 'tensor' ? sv.getFloat32(0, true) : sv.getFloat32(4 * Math.floor(i / run), true);
    out[i] = fr(codes[i] * s);
  }
  return out;
}

// ---- affine ------------------------------------------------------------------------------

export function f16Down(v: number): number {
  let h = f32ToF16(v);
  if (f16ToF32(h) > v) h = (h & 0x7fff) === 0 ? 0x8001 : h & 0x8000 ? h + 1 : h - 1;
  return h === 0xfc00 ? 0xfbff : h;
}

export function f16Up(v: number): number {
  let h = f32ToF16(v);
  if (f16ToF32(h) < v) h = (h & 0x7fff) === 0 ? 0x0001 : h & 0x8000 ? h - 1 : h + 1;
  return h === 0x7c00 ? 0x7bff : h;
}

export function affineCode(x: number, s: number, b: number, qmax: number): number {
  if (s === 0) return 0;
  return Math.min(Math.max(roundEven(fr(fr(x - b) / s)), 0), qmax);
}

export function affineValue(q: number, s: number, b: number): number {
  return fr(fr(s * q) + b);
}

// HQQ's pow, as assembly/int/hqq.ts computes it (log2 by atanh series, exp2 by Taylor series).
const f64v = new Float64Array(1);
const u32v = new Uint32Array(f64v.buffer);
const LOG2E = 1.4426950408889634;
const LN2 = 0.6931471805599453;
const SQRT2 = 1.4142135623730951;

export function log2P(x: number): number {
  f64v[0] = x;
  let e = (u32v[1] >>> 20) - 1023;
  u32v[1] = (u32v[1] & 0xfffff) | 0x3ff00000;
  let m = f64v[0];
  if (m > SQRT2) {
    m = m * 0.5;
    e = e + 1;
  }
  const u = (m - 1) / (m + 1);
  const u2 = u * u;
  let p = 1 / 11;
  for (const d of [9, 7, 5, 3]) p = p * u2 + 1 / d;
  p = p * u2 + 1;
  return e + 2 * u * p * LOG2E;
}

export function exp2P(t: number): number {
  const k = Math.floor(t + 0.5);
  const z = (t - k) * LN2;
  let p = 1 + z * (1 / 9);
  for (let d = 8; d >= 2; d--) p = 1 + z * p * (1 / d);
  p = 1 + z * p;
  u32v[0] = 0;
  u32v[1] = (k + 1023) << 20;
  return p * f64v[0];
}

export function powP(x: number, y: number): number {
  return x > 0 ? exp2P(y * log2P(x)) : 0;
}

export const HQQ_P = 0.7;

/** sum w_i |x_i - x'_i|^p of the stored (scale, bias) over xs. */
export function hqqObjective(xs: ArrayLike<number>, s: number, b: number, qmax: number, w?: ArrayLike<number>): number {
  let o = 0;
  for (let i = 0; i < xs.length; i++) {
    const t = powP(Math.abs(xs[i] - affineValue(affineCode(xs[i], s, b, qmax), s, b)), HQQ_P);
    o = w ? o + t * w[i] : o + t;
  }
  return o;
}

function hqqRef(xs: Float32Array, w: Float32Array | undefined, qmax: number, iters: number, lo: number, hi: number, sb: [number, number]): [number, number] {
  if (!(hi > lo)) return sb;
  let best = hqqObjective(xs, f16ToF32(sb[0]), f16ToF32(sb[1]), qmax, w);
  const scale = qmax / (hi - lo);
  let zero = -lo * scale;
  let beta = 10;
  for (let it = 0; it < iters; it++) {
    let num = 0;
    let den = 0;
    for (let i = 0; i < xs.length; i++) {
      const xi = xs[i];
      const wq = Math.min(Math.max(roundEven(xi * scale + zero), 0), qmax);
      const e = xi - (wq - zero) / scale;
      const ae = Math.abs(e);
      let we = ae - powP(ae + 1e-8, HQQ_P - 1) / beta;
      we = we > 0 ? (e < 0 ? -we : we) : 0;
      const t = wq - (xi - we) * scale;
      const wi = w ? w[i] : 1;
      num = num + wi * t;
      den = den + wi;
    }
    if (!(den > 0)) return sb;
    zero = num / den;
    beta = beta * 1.01;
    const sd = 1 / scale;
    const cand: [number, number] = [f32ToF16(sd), f32ToF16(-zero * sd)];
    const o = hqqObjective(xs, f16ToF32(cand[0]), f16ToF32(cand[1]), qmax, w);
    if (!(o < best)) return sb;
    best = o;
    sb = cand;
  }
  return sb;
}

/** Bytes of the affine layout: codes rows, scales rows (f16), biases rows (f16). */
export function affineQuantizeRef(x: Float32Array, rowLen: number, o: AffineOpts): Uint8Array {
  const qmax = 2 ** o.bits - 1;
  const g = o.groupSize;
  const codes = new Int32Array(x.length);
  const scales: number[] = [];
  const biases: number[] = [];
  for (let start = 0; start < x.length; start += g) {
    const xs = x.subarray(start, start + g);
    let lo = xs[0];
    let hi = xs[0];
    for (const v of xs) {
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
    }
    lo += 0; // a zero minimum / maximum is +0
    hi += 0;
    const bh = f16Down(lo);
    let sb: [number, number] = [f16Up(fr(fr(hi - f16ToF32(bh)) / qmax)), bh];
    if (o.calibration.method === 'hqq') {
      const c0 = start % rowLen;
      sb = hqqRef(xs, o.importance?.subarray(c0, c0 + g), qmax, o.calibration.iterations, lo, hi, sb);
    }
    scales.push(sb[0]);
    biases.push(sb[1]);
    const s = f16ToF32(sb[0]);
    const b = f16ToF32(sb[1]);
    for (let i = 0; i < g; i++) codes[start + i] = affineCode(xs[i], s, b, qmax);
  }
  return concat([packBits(codes, o.bits), u16Bytes(scales), u16Bytes(biases)]);
}

export function affineDequantizeRef(data: Uint8Array, n: number, o: Pick<AffineOpts, 'bits' | 'groupSize'>): Float32Array {
  const codes = unpackBits(data, n, o.bits, false);
  const ng = n / o.groupSize;
  const v = new DataView(data.buffer, data.byteOffset + (n * o.bits) / 8);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const k = Math.floor(i / o.groupSize);
    out[i] = affineValue(codes[i], f16ToF32(v.getUint16(2 * k, true)), f16ToF32(v.getUint16(2 * ng + 2 * k, true)));
  }
  return out;
}
