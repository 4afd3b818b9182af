// FP8 E4M3 (OCP E4M3FN: bias 7, finite only, max 448, NaN = 0x7F/0xFF) and E5M2 (bias 15, IEEE-like,
// max 57344, 0x7C = inf, 0x7D..0x7F = NaN), one byte per element, with an f32 scale per row
// (granularity 'channel', row section `scales`) or per tensor ('tensor', tensor section `scale`
// in aux, chosen by the prepare hook through fp8_absmax).
// Scale s by calibration: absmax: s = amax / FMAX; clip (ratio r): s = (amax * r) / FMAX, so values
// beyond r * amax saturate; fixed (scale, max): s = scale as given, and inputs are first clamped to
// [-max, max]. Code of x: y = x * (1/s) in f32 (x / s when 1/s overflows; y = 0 when s = 0), then
// round to nearest even on the format's grid, subnormals included, saturating at +-FMAX (never
// NaN or inf); the sign bit of y is kept, so -0.0 and tiny negatives give 0x80.
// Dequantized value = fp8(code) * s.
import { A_AUX, A_CALIB, A_FLAGS, A_P0, A_P1, A_SCALES, A_SCRATCH, A_TSCALE, CALIB_CLIP, CALIB_FIXED, FLAG_PER_TENSOR, argF32, argI32, argU32, rowF32 } from '../common';
import { absmax } from './lut';

// E4M3: 3 mantissa bits (drop 20), bias 7 (rebias 120 << 3 = 960), subnormal step 2^-9 (magic 2^14),
// min normal 2^-6; decoding multiplies the code shifted into an f32 by 2^(127-7).
const E4M3_FMAX: f32 = 448;
// E5M2: 2 mantissa bits (drop 21), bias 15 (rebias 112 << 2 = 448), step 2^-16 (magic 2^7), min normal 2^-14.
const E5M2_FMAX: f32 = 57344;

// Rounds |y| <= FMAX (already clamped) to the code's 7 magnitude bits.
// Subnormals by adding `magic` (a float whose ulp is the fp8 subnormal step, so the f32 add rounds
// half to even onto the grid); normals by rounding the f32 mantissa half to even and rebiasing.
@inline export function encodeMag(a: f32, drop: i32, rebias: i32, magic: f32, minNorm: f32): u32 {
  const bits = reinterpret<u32>(a);
  const nrm = ((bits + ((<u32>1 << (drop - 1)) - 1) + ((bits >> drop) & 1)) >> drop) - <u32>rebias;
  return select<u32>(reinterpret<u32>(a + magic) - reinterpret<u32>(magic), nrm, a < minNorm);
}

// Codes of 4 lanes (i32): clamp (fixed calibration), scale, saturate, round, sign.
@inline function encode4(x: v128, clamp: bool, div: bool, vinv: v128, vs: v128, vcl: v128, vmax: v128, drop: i32, rebias: i32, magic: f32, minNorm: f32): v128 {
  const absMask = i32x4.splat(0x7fffffff);
  // pmin/pmax (one instruction each) equal min/max here: no NaN, and the bounds are never zero.
  let y = clamp ? f32x4.pmax(f32x4.pmin(x, vcl), f32x4.neg(vcl)) : x;
  y = div ? f32x4.div(y, vs) : f32x4.mul(y, vinv);
  const a = f32x4.pmin(v128.and(y, absMask), vmax);
  const sub = i32x4.sub(f32x4.add(a, f32x4.splat(magic)), i32x4.splat(reinterpret<i32>(magic)));
  const odd = v128.and(i32x4.shr_u(a, drop), i32x4.splat(1));
  const nrm = i32x4.sub(i32x4.shr_u(i32x4.add(i32x4.add(a, i32x4.splat((1 << (drop - 1)) - 1)), odd), drop), i32x4.splat(rebias));
  const mag = v128.bitselect(sub, nrm, f32x4.lt(a, f32x4.splat(minNorm)));
  return v128.or(mag, i32x4.shr_u(v128.andnot(y, absMask), 24));
}

// Inlined into each format's kernel, so the format parameters are constants there.
@inline function quantizeRow(x: usize, n: i32, s: f32, clampMax: f32, q: usize,
  fmax: f32, drop: i32, rebias: i32, magic: f32, minNorm: f32): void {
  const inv: f32 = s != 0 ? 1 / s : 0;
  const div = inv == Infinity;
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    const vinv = f32x4.splat(inv);
    const vs = f32x4.splat(s);
    const vmax = f32x4.splat(fmax);
    const vcl = f32x4.splat(clampMax);
    // The clamp only matters for the fixed calibration; +inf bounds leave x unchanged.
    const clamp = clampMax != Infinity;
    for (; i + 16 <= n; i += 16) {
      const p = x + (<usize>i << 2);
      const c0 = encode4(v128.load(p), clamp, div, vinv, vs, vcl, vmax, drop, rebias, magic, minNorm);
      const c1 = encode4(v128.load(p + 16), clamp, div, vinv, vs, vcl, vmax, drop, rebias, magic, minNorm);
      const c2 = encode4(v128.load(p + 32), clamp, div, vinv, vs, vcl, vmax, drop, rebias, magic, minNorm);
      const c3 = encode4(v128.load(p + 48), clamp, div, vinv, vs, vcl, vmax, drop, rebias, magic, minNorm);
      v128.store(q + <usize>i, i8x16.narrow_i16x8_u(i16x8.narrow_i32x4_u(c0, c1), i16x8.narrow_i32x4_u(c2, c3)));
    }
  }
  for (; i < n; i++) {
    let y = Mathf.max(Mathf.min(load<f32>(x + (<usize>i << 2)), clampMax), -clampMax);
    y = div ? y / s : y * inv;
    const a = Mathf.min(Mathf.abs(y), fmax);
    const sign = (reinterpret<u32>(y) >> 24) & 0x80;
    store<u8>(q + <usize>i, <u8>(encodeMag(a, drop, rebias, magic, minNorm) | sign));
  }
}

@inline function quantize8(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize,
  fmax: f32, drop: i32, rebias: i32, magic: f32, minNorm: f32): void {
  const scratch = argU32(args, A_SCRATCH);
  const calib = argI32(args, A_CALIB);
  const perTensor = (argI32(args, A_FLAGS) & FLAG_PER_TENSOR) != 0;
  const clampMax: f32 = calib == CALIB_FIXED ? argF32(args, A_P1) : Infinity;
  if (perTensor) store<f32>(argU32(args, A_AUX), argF32(args, A_TSCALE));
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    let s: f32;
    if (perTensor) s = argF32(args, A_TSCALE);
    else if (calib == CALIB_FIXED) s = argF32(args, A_P0);
    else {
      const amax = absmax(x, rowLen);
      s = calib == CALIB_CLIP ? (amax * argF32(args, A_P0)) / fmax : amax / fmax;
    }
    if (!perTensor) store<f32>(argU32(args, A_SCALES) + (<usize>r << 2), s);
    quantizeRow(x, rowLen, s, clampMax, dst + <usize>r * <usize>rowLen, fmax, drop, rebias, magic, minNorm);
  }
}

// code -> f32: the 7 magnitude bits shifted under the f32 exponent field make an f32 whose value is
// 2^(bias-127) times the fp8 value, subnormals included; one exact multiply rescales it.
@inline function fp8ToF32(c: u32, mshift: i32, scaleUp: f32, special: u32, isE4M3: bool): f32 {
  const m = c & 0x7f;
  let v = reinterpret<f32>(m << mshift) * scaleUp;
  if (m >= special) v = isE4M3 || m > special ? NaN : Infinity;
  return reinterpret<f32>(reinterpret<u32>(v) | ((c & 0x80) << 24));
}

// Per format (E4M3 at 0, E5M2 at 64): bytes of the NaN / inf-NaN pattern, the bits kept of a
// sign-extended code after its shift (sign and magnitude), 2^(127-bias). Loaded, not splat: a
// constant in a loop is rebuilt at each use.
const FP8K = memory.data<u32>([
  0x7f7f7f7f, 0x7f7f7f7f, 0x7f7f7f7f, 0x7f7f7f7f, 0x87ffffff, 0x87ffffff, 0x87ffffff, 0x87ffffff,
  0x7b800000, 0x7b800000, 0x7b800000, 0x7b800000, 0, 0, 0, 0,
  0x7c7c7c7c, 0x7c7c7c7c, 0x7c7c7c7c, 0x7c7c7c7c, 0x8fffffff, 0x8fffffff, 0x8fffffff, 0x8fffffff,
  0x77800000, 0x77800000, 0x77800000, 0x77800000, 0, 0, 0, 0,
]);

// Four sign-extended codes as f32 times the scale: shifted, the sign lands on bit 31 (its copies
// above the magnitude are masked off), so the multiply by 2^(127-bias) gives the signed value.
@inline function fp8x4(c: v128, mshift: i32, k: usize, vs: v128): v128 {
  return f32x4.mul(f32x4.mul(v128.and(i32x4.shl(c, mshift), v128.load(k, 16)), v128.load(k, 32)), vs);
}

@inline function dequantize8(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize, mshift: i32, scaleUp: f32, isE4M3: bool): void {
  const perTensor = (argI32(args, A_FLAGS) & FLAG_PER_TENSOR) != 0;
  const special: u32 = isE4M3 ? 0x7f : 0x7c; // first code of the NaN (E4M3) / inf-NaN (E5M2) range
  const k = FP8K + (isE4M3 ? 0 : 64);
  for (let r = 0; r < nrows; r++) {
    const s = perTensor ? load<f32>(argU32(args, A_AUX)) : load<f32>(argU32(args, A_SCALES) + (<usize>r << 2));
    const q = src + <usize>r * <usize>rowLen;
    const y = dst + (<usize>r * <usize>rowLen << 2);
    let i = 0;
    if (ASC_FEATURE_SIMD) {
      const vs = f32x4.splat(s);
      for (; i + 16 <= rowLen; i += 16) {
        const b = v128.load(q + <usize>i);
        const sp = v128.load(k);
        const o = y + (<usize>i << 2);
        // NaN / inf codes are rare: such 16 take the scalar conversion.
        if (v128.any_true(i8x16.eq(v128.and(b, sp), sp))) {
          for (let j = 0; j < 16; j++) store<f32>(o + (<usize>j << 2), fp8ToF32(<u32>load<u8>(q + <usize>(i + j)), mshift, scaleUp, special, isE4M3) * s);
          continue;
        }
        const lo = i16x8.extend_low_i8x16_s(b), hi = i16x8.extend_high_i8x16_s(b);
        v128.store(o, fp8x4(i32x4.extend_low_i16x8_s(lo), mshift, k, vs));
        v128.store(o, fp8x4(i32x4.extend_high_i16x8_s(lo), mshift, k, vs), 16);
        v128.store(o, fp8x4(i32x4.extend_low_i16x8_s(hi), mshift, k, vs), 32);
        v128.store(o, fp8x4(i32x4.extend_high_i16x8_s(hi), mshift, k, vs), 48);
      }
    }
    for (; i < rowLen; i++) store<f32>(y + (<usize>i << 2), fp8ToF32(<u32>load<u8>(q + <usize>i), mshift, scaleUp, special, isE4M3) * s);
  }
}

export function fp8_e4m3_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantize8(src, srcType, nrows, rowLen, dst, args, E4M3_FMAX, 20, 960, 16384, 0.015625);
}
export function fp8_e4m3_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  dequantize8(src, nrows, rowLen, dst, args, 20, reinterpret<f32>(0x7b800000), true); // 2^120
}
export function fp8_e5m2_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantize8(src, srcType, nrows, rowLen, dst, args, E5M2_FMAX, 21, 448, 128, 0.00006103515625);
}
export function fp8_e5m2_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  dequantize8(src, nrows, rowLen, dst, args, 21, reinterpret<f32>(0x77800000), false); // 2^112
}

// Reduction for the 'tensor' granularity prepare hook: out[0] (f32) = max(out[0], max |x|).
export function fp8_absmax(src: usize, srcType: i32, nrows: i32, rowLen: i32, out: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  let m = load<f32>(out);
  for (let r = 0; r < nrows; r++) m = Mathf.max(m, absmax(rowF32(src, srcType, r, rowLen, scratch), rowLen));
  store<f32>(out, m);
}
