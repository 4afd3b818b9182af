// Shared pieces of the serving matvec kernels (y = W x on quantized rows, no dequantized matrix).
//
//   <fmt>_matvec(w, nrows, rowLen, x, y, args): void
//
// `w` = the first row section (codes / blocks) of rows [0, nrows), `args` = the quantize/dequantize
// struct (scales/biases section pointers, aux, group, bits, flags), x = rowLen f32, y = nrows f32.
// Activations stay f32 (unless SERVE_Q8_ACT): the scalar build decodes each block's integer codes
// (or code-book values) into a small static buffer and dots them with x; the SIMD build turns codes
// into f32 lanes in registers (simd.ts, gguf-simd.ts); both apply the block scale once per 16 (or
// per group) values; minimum terms use per-16 sums of x computed once per call.
//
// Accuracy contract (checked by test/serve for every registry format on both builds): for every row,
//   |y - dot64(dequantized row, x)| <= MATVEC_REL_TOL * sum|w_i x_i|
// where dot64 is the f64 dot of the dequantize() output. Why not exact: the kernels sum in f32 and
// factor the block scale out of each 16 (d * sum(q x) instead of sum(f32(d q) x)). Worst case that is
// about (16 + rowLen/16 + 2) * 2^-24 relative (1.6e-5 at rowLen 4096: sums of 16, then one add per 16);
// rounding errors of random-signed data grow like a random walk, and the measured worst over every
// format at rowLen 4096 is 5e-9, so the tested bound 1e-6 holds with a 200x margin. The SIMD build
// sums in 4 lanes, the scalar build left to right: the builds differ in summation order only, hence
// SIMD_SCALAR_REL_TOL = twice the per-build bound (each is within MATVEC_REL_TOL of the same f64 value).
import { A_SCRATCH, argU32, bf16ToF32, f16ToF32 } from '../common';

export const MATVEC_REL_TOL: f64 = 1e-6;
export const SIMD_SCALAR_REL_TOL: f64 = 2e-6;

// Optional int8 activations (args flags bit, owned by the serving kernels; the GGUF integer-code
// formats honour it, others ignore it): x is quantized once per call per 32 values like llama.cpp's
// Q8_0 activations, dx = amax/127, xq = round-half-even(x * (1/dx)), and each 16 codes are dotted
// with xq exactly in i32 (i32x4.dot_i16x8_s), then scaled by sc * dx in f32. The result is then
// the f32-accumulated dot of the dequantized row with x^ = xq * dx (the same MATVEC_REL_TOL holds
// against an f64 dot with x^; the tests rebuild x^ on the host), and |x - x^| <= dx/2 per element.
export const SERVE_Q8_ACT: i32 = 0x100;

// Decoded block: up to 256 signed byte codes, and per 16 values a scale and a min (value = sc*q - mn).
export const CODES = memory.data(256, 16);
export const SC = memory.data(64, 16);
export const MN = memory.data(64, 16);
// 16 decoded floats (code-book formats) and a 256-entry f32 table (fp8).
export const F16BUF = memory.data(64, 16);
export const LUT = memory.data(1024, 16);

@inline export function sc16(k: i32): f32 {
  return load<f32>(SC + (<usize>k << 2));
}
@inline export function mn16(k: i32): f32 {
  return load<f32>(MN + (<usize>k << 2));
}
@inline export function setSc(k: i32, s: f32, m: f32): void {
  store<f32>(SC + (<usize>k << 2), s);
  store<f32>(MN + (<usize>k << 2), m);
}

// Sums of x over each 16 values, into the host scratch (rowLen/16 floats, left to right in both
// builds, so the min terms are identical across builds).
export function xSums16(x: usize, rowLen: i32, args: usize): usize {
  const xs = argU32(args, A_SCRATCH);
  sums16(x, rowLen, xs);
  return xs;
}
export function sums16(x: usize, rowLen: i32, dst: usize): void {
  const n = rowLen >> 4;
  for (let k = 0; k < n; k++) {
    const p = x + (<usize>k << 6);
    let s: f32 = 0;
    for (let i = 0; i < 16; i++) s += load<f32>(p + (<usize>i << 2));
    store<f32>(dst + (<usize>k << 2), s);
  }
}
// Sums per 32 from the sums per 16 (the K-quants' min terms): the two halves added.
export function sums32(xs: usize, rowLen: i32, dst: usize): void {
  for (let j = 0; j < rowLen >> 5; j++) store<f32>(dst + (<usize>j << 2), load<f32>(xs + (<usize>j << 3)) + load<f32>(xs + (<usize>j << 3), 4));
}

// Q8 activations in the host scratch: [x^ sums per 16: rowLen/16 f32][dx per 16: rowLen/16 f32][xq: rowLen i16].
// Scalar code in both builds, so both builds quantize x identically. Returns the x^ sums pointer.
export function quantizeX(x: usize, rowLen: i32, args: usize): usize {
  const xs = argU32(args, A_SCRATCH);
  const n16 = rowLen >> 4;
  const dx = xs + (<usize>n16 << 2);
  const xq = dx + (<usize>n16 << 2);
  for (let b = 0; b < rowLen; b += 32) {
    const m = min(32, rowLen - b);
    let amax: f32 = 0;
    for (let i = 0; i < m; i++) amax = Mathf.max(amax, Mathf.abs(load<f32>(x + (<usize>(b + i) << 2))));
    const d: f32 = amax / 127;
    const id: f32 = d != 0 ? 1 / d : 0;
    const fin = id != Infinity;
    for (let i = 0; i < m; i++) {
      const q = fin ? <i32>nearest<f32>(load<f32>(x + (<usize>(b + i) << 2)) * id) : 0;
      store<i16>(xq + (<usize>(b + i) << 1), <i16>q);
    }
    for (let k = b >> 4; k < (b + m) >> 4; k++) {
      store<f32>(dx + (<usize>k << 2), fin ? d : 0);
      let s: f32 = 0;
      for (let i = 0; i < 16; i++) s += <f32>load<i16>(xq + (<usize>(16 * k + i) << 1)) * (fin ? d : 0);
      store<f32>(xs + (<usize>k << 2), s);
    }
  }
  return xs;
}

// Adds the decoded block against the quantized activations; e = index of the block's first value.
@inline export function rowAddBlockQ8(codes: usize, n16: i32, e: i32, xs: usize, rowLen: i32, hasMin: bool): void {
  const dx = xs + (<usize>(rowLen >> 4) << 2);
  const xq = dx + (<usize>(rowLen >> 4) << 2);
  const k0 = e >> 4;
  if (ASC_FEATURE_SIMD) {
    let a = v128.load(ACC);
    for (let k = 0; k < n16; k++) {
      const c = v128.load(codes + (<usize>k << 4));
      const p = xq + (<usize>(e + 16 * k) << 1);
      const d = i32x4.add(i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(c), v128.load(p)), i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(c), v128.load(p, 16)));
      a = f32x4.add(a, f32x4.mul(f32x4.convert_i32x4_s(d), f32x4.splat(sc16(k) * load<f32>(dx + (<usize>(k0 + k) << 2)))));
    }
    v128.store(ACC, a);
  } else {
    for (let k = 0; k < n16; k++) {
      let t: i32 = 0;
      const c = codes + (<usize>k << 4);
      const p = xq + (<usize>(e + 16 * k) << 1);
      for (let i = 0; i < 16; i++) t += <i32>load<i8>(c + <usize>i) * <i32>load<i16>(p + (<usize>i << 1));
      accS += <f32>t * (sc16(k) * load<f32>(dx + (<usize>(k0 + k) << 2)));
    }
  }
  if (hasMin) {
    let m: f32 = 0;
    for (let k = 0; k < n16; k++) m += mn16(k) * load<f32>(xs + (<usize>(k0 + k) << 2));
    accMin += m;
  }
}

// SIMD: 16 signed byte codes times 16 floats of x, as 4 partial sums.
@inline export function mac16(c: v128, x: usize): v128 {
  const lo = i16x8.extend_low_i8x16_s(c);
  const hi = i16x8.extend_high_i8x16_s(c);
  const a = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(lo)), v128.load(x));
  const b = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(lo)), v128.load(x, 16));
  const c2 = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(hi)), v128.load(x, 32));
  const d = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(hi)), v128.load(x, 48));
  return f32x4.add(f32x4.add(a, b), f32x4.add(c2, d));
}

// SIMD: 16 floats at f times 16 floats of x, as 4 partial sums.
@inline export function macF16(f: usize, x: usize): v128 {
  const a = f32x4.mul(v128.load(f), v128.load(x));
  const b = f32x4.mul(v128.load(f, 16), v128.load(x, 16));
  const c = f32x4.mul(v128.load(f, 32), v128.load(x, 32));
  const d = f32x4.mul(v128.load(f, 48), v128.load(x, 48));
  return f32x4.add(f32x4.add(a, b), f32x4.add(c, d));
}

@inline export function hsum(v: v128): f32 {
  return (f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1)) + (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3));
}

// Scalar: sum of n codes (i8) times x, left to right.
@inline export function dotCodes(c: usize, x: usize, n: i32): f32 {
  let s: f32 = 0;
  for (let i = 0; i < n; i++) s += <f32>load<i8>(c + <usize>i) * load<f32>(x + (<usize>i << 2));
  return s;
}

// Row accumulator shared by the block formats. SIMD keeps 4 lanes in ACC (memory, so that the
// scalar build declares no v128 global), the scalar build one f32.
const ACC = memory.data(16, 16);
let accS: f32 = 0;
let accMin: f32 = 0;

@inline export function rowBegin(): void {
  if (ASC_FEATURE_SIMD) v128.store(ACC, f32x4.splat(0));
  accS = 0;
  accMin = 0;
}

// Adds the decoded block (n16 groups of 16 signed byte codes at `codes`, usually CODES, scales in SC, mins in MN) at x;
// `xs` points at the x sums of this block's first 16 (0 when the format has no mins).
@inline export function rowAddBlock(codes: usize, n16: i32, x: usize, xs: usize): void {
  if (ASC_FEATURE_SIMD) {
    let a = v128.load(ACC);
    for (let k = 0; k < n16; k++) {
      const g = mac16(v128.load(codes + (<usize>k << 4)), x + (<usize>k << 6));
      a = f32x4.add(a, f32x4.mul(g, f32x4.splat(sc16(k))));
    }
    v128.store(ACC, a);
  } else {
    for (let k = 0; k < n16; k++) accS += sc16(k) * dotCodes(codes + (<usize>k << 4), x + (<usize>k << 6), 16);
  }
  if (xs != 0) {
    let m: f32 = 0;
    for (let k = 0; k < n16; k++) m += mn16(k) * load<f32>(xs + (<usize>k << 2));
    accMin += m;
  }
}

// Adds s * (16 floats at f) . x (code-book formats).
@inline export function rowAddF16(f: usize, s: f32, x: usize): void {
  if (ASC_FEATURE_SIMD) {
    v128.store(ACC, f32x4.add(v128.load(ACC), f32x4.mul(macF16(f, x), f32x4.splat(s))));
  } else {
    let t: f32 = 0;
    for (let i = 0; i < 16; i++) t += load<f32>(f + (<usize>i << 2)) * load<f32>(x + (<usize>i << 2));
    accS += s * t;
  }
}

@inline export function rowAddScalar(v: f32): void {
  accS += v;
}

@inline export function rowEnd(): f32 {
  let s = accS;
  if (ASC_FEATURE_SIMD) s += hsum(v128.load(ACC));
  return s - accMin;
}

// ---- unquantized rows -------------------------------------------------------------------

// Dot of n f32 at w with x (n any length).
export function dotF32(w: usize, x: usize, n: i32): f32 {
  let i = 0;
  let s: f32 = 0;
  if (ASC_FEATURE_SIMD) {
    let a = f32x4.splat(0);
    let b = f32x4.splat(0);
    for (; i + 8 <= n; i += 8) {
      a = f32x4.add(a, f32x4.mul(v128.load(w + (<usize>i << 2)), v128.load(x + (<usize>i << 2))));
      b = f32x4.add(b, f32x4.mul(v128.load(w + (<usize>i << 2), 16), v128.load(x + (<usize>i << 2), 16)));
    }
    s = hsum(f32x4.add(a, b));
  }
  for (; i < n; i++) s += load<f32>(w + (<usize>i << 2)) * load<f32>(x + (<usize>i << 2));
  return s;
}

// y[r] = dot(row r of the f32 matrix at w, x): the generic path's second half (the host fills w by
// calling the format's own <fmt>_dequantize on a group of rows).
export function serve_dot_rows(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize): void {
  for (let r = 0; r < nrows; r++) {
    store<f32>(y + (<usize>r << 2), dotF32(w + ((<usize>r * <usize>rowLen) << 2), x, rowLen));
  }
}

export function f32_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  serve_dot_rows(w, nrows, rowLen, x, y);
}

// F16 / BF16 rows: widened 16 at a time into F16BUF, then dotted.
function half_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, bf: bool): void {
  for (let r = 0; r < nrows; r++) {
    const p = w + ((<usize>r * <usize>rowLen) << 1);
    rowBegin();
    let i = 0;
    for (; i + 16 <= rowLen; i += 16) {
      const q = p + (<usize>i << 1);
      if (ASC_FEATURE_SIMD && bf) {
        const h0 = v128.load(q);
        const h1 = v128.load(q, 16);
        v128.store(F16BUF, i32x4.shl(i32x4.extend_low_i16x8_u(h0), 16));
        v128.store(F16BUF, i32x4.shl(i32x4.extend_high_i16x8_u(h0), 16), 16);
        v128.store(F16BUF, i32x4.shl(i32x4.extend_low_i16x8_u(h1), 16), 32);
        v128.store(F16BUF, i32x4.shl(i32x4.extend_high_i16x8_u(h1), 16), 48);
      } else {
        for (let j = 0; j < 16; j++) {
          const h = <u32>load<u16>(q + (<usize>j << 1));
          store<f32>(F16BUF + (<usize>j << 2), bf ? bf16ToF32(h) : f16ToF32(h));
        }
      }
      rowAddF16(F16BUF, 1, x + (<usize>i << 2));
    }
    let t: f32 = 0;
    for (; i < rowLen; i++) {
      const h = <u32>load<u16>(p + (<usize>i << 1));
      t += (bf ? bf16ToF32(h) : f16ToF32(h)) * load<f32>(x + (<usize>i << 2));
    }
    rowAddScalar(t);
    store<f32>(y + (<usize>r << 2), rowEnd());
  }
}

// The widened row at f dotted with four positions (x, x + rowLen, ...), each in rowAddF16's
// groups and order (the scale-1 multiply included) and finished as rowEnd does, with the four
// accumulators in registers: every weight vector is loaded once for the four.
@inline function halfDot4(f: usize, rowLen: i32, x: usize, y: usize, yStride: i32): void {
  const xs = <usize>rowLen << 2;
  const one = f32x4.splat(1);
  let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
  let j = 0;
  for (; j + 16 <= rowLen; j += 16) {
    const o = <usize>j << 2;
    const w0 = v128.load(f + o), w1 = v128.load(f + o, 16), w2 = v128.load(f + o, 32), w3 = v128.load(f + o, 48);
    let p = x + o;
    a0 = f32x4.add(a0, f32x4.mul(f32x4.add(f32x4.add(f32x4.mul(w0, v128.load(p)), f32x4.mul(w1, v128.load(p, 16))), f32x4.add(f32x4.mul(w2, v128.load(p, 32)), f32x4.mul(w3, v128.load(p, 48)))), one));
    p += xs;
    a1 = f32x4.add(a1, f32x4.mul(f32x4.add(f32x4.add(f32x4.mul(w0, v128.load(p)), f32x4.mul(w1, v128.load(p, 16))), f32x4.add(f32x4.mul(w2, v128.load(p, 32)), f32x4.mul(w3, v128.load(p, 48)))), one));
    p += xs;
    a2 = f32x4.add(a2, f32x4.mul(f32x4.add(f32x4.add(f32x4.mul(w0, v128.load(p)), f32x4.mul(w1, v128.load(p, 16))), f32x4.add(f32x4.mul(w2, v128.load(p, 32)), f32x4.mul(w3, v128.load(p, 48)))), one));
    p += xs;
    a3 = f32x4.add(a3, f32x4.mul(f32x4.add(f32x4.add(f32x4.mul(w0, v128.load(p)), f32x4.mul(w1, v128.load(p, 16))), f32x4.add(f32x4.mul(w2, v128.load(p, 32)), f32x4.mul(w3, v128.load(p, 48)))), one));
  }
  const ys = <usize>yStride << 2;
  store<f32>(y, halfEnd(f, j, rowLen, x, a0));
  store<f32>(y + ys, halfEnd(f, j, rowLen, x + xs, a1));
  store<f32>(y + 2 * ys, halfEnd(f, j, rowLen, x + 2 * xs, a2));
  store<f32>(y + 3 * ys, halfEnd(f, j, rowLen, x + 3 * xs, a3));
}

// The scalar tail from j and rowEnd's sum, as rowAddScalar/rowEnd order them.
@inline function halfEnd(f: usize, j: i32, rowLen: i32, x: usize, acc: v128): f32 {
  let t: f32 = 0;
  for (; j < rowLen; j++) t += load<f32>(f + (<usize>j << 2)) * load<f32>(x + (<usize>j << 2));
  let s: f32 = 0;
  s += t;
  s += hsum(acc);
  return s - <f32>0;
}

// Several positions at once: each row widened once into the host's scratch (args), then dotted
// with every position in half_matvec's groups and order, so every result is its bits; the row
// stays in L1 across positions instead of being widened again from memory for each.
//   <f16|bf16>_matmul(w, nrows, rowLen, x, y, args, batch, yStride): y[b*yStride + r] = row r . x[b]
function half_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32, bf: bool): void {
  const buf = argU32(args, A_SCRATCH);
  for (let r = 0; r < nrows; r++) {
    const p = w + ((<usize>r * <usize>rowLen) << 1);
    let i = 0;
    if (ASC_FEATURE_SIMD && bf) {
      for (; i + 8 <= rowLen; i += 8) {
        const h = v128.load(p + (<usize>i << 1));
        v128.store(buf + (<usize>i << 2), i32x4.shl(i32x4.extend_low_i16x8_u(h), 16));
        v128.store(buf + (<usize>i << 2), i32x4.shl(i32x4.extend_high_i16x8_u(h), 16), 16);
      }
    }
    for (; i < rowLen; i++) {
      const h = <u32>load<u16>(p + (<usize>i << 1));
      store<f32>(buf + (<usize>i << 2), bf ? bf16ToF32(h) : f16ToF32(h));
    }
    let b = 0;
    if (ASC_FEATURE_SIMD) {
      for (; b + 4 <= batch; b += 4) halfDot4(buf, rowLen, x + ((<usize>b * <usize>rowLen) << 2), y + ((<usize>b * <usize>yStride + <usize>r) << 2), yStride);
    }
    for (; b < batch; b++) {
      const xb = x + ((<usize>b * <usize>rowLen) << 2);
      rowBegin();
      let j = 0;
      for (; j + 16 <= rowLen; j += 16) rowAddF16(buf + (<usize>j << 2), 1, xb + (<usize>j << 2));
      let t: f32 = 0;
      for (; j < rowLen; j++) t += load<f32>(buf + (<usize>j << 2)) * load<f32>(xb + (<usize>j << 2));
      rowAddScalar(t);
      store<f32>(y + ((<usize>b * <usize>yStride + <usize>r) << 2), rowEnd());
    }
  }
}

export function f16_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  half_matmul(w, nrows, rowLen, x, y, args, batch, yStride, false);
}
export function bf16_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  half_matmul(w, nrows, rowLen, x, y, args, batch, yStride, true);
}

export function f16_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  half_matvec(w, nrows, rowLen, x, y, false);
}
export function bf16_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  half_matvec(w, nrows, rowLen, x, y, true);
}
