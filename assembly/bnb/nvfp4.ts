// NVFP4 as NVIDIA's ModelOpt exports it (and vLLM / TensorRT-LLM load it): E2M1 codes in blocks of
// 16 along a row, one FP8 E4M3 scale per block, one f32 scale per tensor.
// Storage: row section `codes` (rowLen/2 bytes: element 2k in the low nibble of byte k, 2k+1 in
// the high one), row section `scales` (rowLen/16 E4M3 bytes), tensor section `scale_2` (f32, in aux).
// Quantizer (ModelOpt's reference rounding, every step an f32 operation):
//   scale_2 = amax(tensor) / 2688 (6 * 448), chosen by the host (A_TSCALE);
//   block scale s = amax(block) / (6 * scale_2), 1 where that is 0, rounded to E4M3 (nearest even,
//   subnormals included, at most 448: s cannot exceed it by more than rounding);
//   y = x / (e4m3(s) * scale_2); code = E2M1 of |y| rounded to nearest even, saturating at 6, with
//   bit 3 set for y < 0 (-0 gives code 0).
// A block whose E4M3 scale rounds to 0 (amax below 2^-10 of 6 * scale_2) divides by 0 there: its
// codes are 7 (+6), 15 for x < 0; it dequantizes to zeros. An all-zero tensor (scale_2 = 0) gets
// scale 1.0 (0x38) and codes 0 everywhere.
// Dequantized value = E2M1[code] * (e4m3(scale) * scale_2), in f32.
import { A_AUX, A_SCALES, A_SCRATCH, A_TSCALE, argF32, argU32, rowF32 } from '../common';
import { absmax, planesStore16 } from './lut';
import { E2M1, e2m1Mag, e2m1Planes } from './mxfp4';
import { encodeMag } from './fp8';
import { hiNibbles, NIB } from '../gguf/pack';

export const NVFP4_BLOCK: i32 = 16;

// E4M3 -> f32 for codes 0..0x7e (the scales are never negative or NaN).
@inline function e4m3(code: u32): f32 {
  return reinterpret<f32>(code << 20) * reinterpret<f32>(0x7b800000); // * 2^120
}

@inline function scaleCode(s: f32): u32 {
  return encodeMag(Mathf.min(s, 448), 20, 960, 16384, 0.015625);
}

// Codes of 4 lanes (i32) of y.
@inline function codes4(y: v128): v128 {
  const a = f32x4.pmin(v128.and(y, i32x4.splat(0x7fffffff)), f32x4.splat(6)); // y is never NaN here
  const sub = i32x4.sub(f32x4.add(a, f32x4.splat(4194304)), i32x4.splat(reinterpret<i32>(<f32>4194304)));
  const odd = v128.and(i32x4.shr_u(a, 22), i32x4.splat(1));
  const nrm = i32x4.sub(i32x4.shr_u(i32x4.add(i32x4.add(a, i32x4.splat(0x1fffff)), odd), 22), i32x4.splat(252));
  const mag = v128.bitselect(sub, nrm, f32x4.lt(a, f32x4.splat(1)));
  return v128.or(mag, v128.and(f32x4.lt(y, f32x4.splat(0)), i32x4.splat(8)));
}

// Codes of one block of 16 given its divisor (nonzero).
@inline function codesBlock(x: usize, q: usize, denom: f32): void {
  if (ASC_FEATURE_SIMD) {
    const vd = f32x4.splat(denom);
    const c = i8x16.narrow_i16x8_u(
      i16x8.narrow_i32x4_u(codes4(f32x4.div(v128.load(x), vd)), codes4(f32x4.div(v128.load(x, 16), vd))),
      i16x8.narrow_i32x4_u(codes4(f32x4.div(v128.load(x, 32), vd)), codes4(f32x4.div(v128.load(x, 48), vd))));
    // As 16-bit lanes, c[2k] | c[2k+1] << 8: the byte (c[2k] | c[2k+1] << 4) is the low byte of v | v >> 4.
    const p = v128.and(v128.or(c, i16x8.shr_u(c, 4)), i16x8.splat(0xff));
    v128.store64_lane(q, i8x16.narrow_i16x8_u(p, p), 0);
  } else {
    for (let j = 0; j < 8; j++) {
      let b: u32 = 0;
      for (let k = 0; k < 2; k++) {
        const y = load<f32>(x + (<usize>(2 * j + k) << 2)) / denom;
        b |= (e2m1Mag(Mathf.min(Mathf.abs(y), 6)) | (y < 0 ? 8 : 0)) << (4 * k);
      }
      store<u8>(q + <usize>j, <u8>b);
    }
  }
}

function quantizeBlock(x: usize, q: usize, sc: usize, gs: f32, d6: f32): void {
  let code: u32 = 0x38; // 1.0
  let denom: f32 = gs;
  if (gs != 0) {
    let s = absmax(x, 16) / d6;
    if (s == 0) s = 1;
    code = scaleCode(s);
    denom = e4m3(code) * gs;
  }
  store<u8>(sc, <u8>code);
  if (denom != 0) {
    codesBlock(x, q, denom);
    return;
  }
  // gs == 0: every x is 0 (code 0); a scale rounded to 0: x / 0 is +-inf or NaN.
  for (let j = 0; j < 8; j++) {
    let b: u32 = 0;
    for (let k = 0; k < 2; k++) {
      const v = load<f32>(x + (<usize>(2 * j + k) << 2));
      b |= (gs == 0 ? 0 : v < 0 ? 15 : 7) << (4 * k);
    }
    store<u8>(q + <usize>j, <u8>b);
  }
}

// Max |x| of the 16 values at p, as four lane maxima.
@inline function max4(p: usize): v128 {
  const m = f32x4.pmax(f32x4.pmax(f32x4.abs(v128.load(p)), f32x4.abs(v128.load(p, 16))),
    f32x4.pmax(f32x4.abs(v128.load(p, 32)), f32x4.abs(v128.load(p, 48))));
  return m;
}

// SIMD: four blocks' scales at once (the same f32 operations per lane as quantizeBlock), then
// each block's codes; a block whose divisor is 0 goes through quantizeBlock.
function quantizeFour(x: usize, q: usize, sc: usize, gs: f32, d6: f32): void {
  const m0 = max4(x), m1 = max4(x + 64), m2 = max4(x + 128), m3 = max4(x + 192);
  const t0 = f32x4.pmax(i32x4.shuffle(m0, m1, 0, 1, 4, 5), i32x4.shuffle(m0, m1, 2, 3, 6, 7));
  const t1 = f32x4.pmax(i32x4.shuffle(m2, m3, 0, 1, 4, 5), i32x4.shuffle(m2, m3, 2, 3, 6, 7));
  const amax = f32x4.pmax(i32x4.shuffle(t0, t1, 0, 2, 4, 6), i32x4.shuffle(t0, t1, 1, 3, 5, 7));
  let s = f32x4.div(amax, f32x4.splat(d6));
  s = v128.bitselect(f32x4.splat(1), s, f32x4.eq(s, f32x4.splat(0)));
  // E4M3 of s <= 448 (fp8.ts's encodeMag per lane).
  const a = f32x4.pmin(s, f32x4.splat(448));
  const sub = i32x4.sub(f32x4.add(a, f32x4.splat(16384)), i32x4.splat(reinterpret<i32>(<f32>16384)));
  const odd = v128.and(i32x4.shr_u(a, 20), i32x4.splat(1));
  const nrm = i32x4.sub(i32x4.shr_u(i32x4.add(i32x4.add(a, i32x4.splat(0x7ffff)), odd), 20), i32x4.splat(960));
  const code = v128.bitselect(sub, nrm, f32x4.lt(a, f32x4.splat(0.015625)));
  const denom = f32x4.mul(f32x4.mul(i32x4.shl(code, 20), f32x4.splat(reinterpret<f32>(0x7b800000))), f32x4.splat(gs));
  if (v128.any_true(f32x4.eq(denom, f32x4.splat(0)))) {
    for (let b = 0; b < 4; b++) quantizeBlock(x + (<usize>b << 6), q + (<usize>b << 3), sc + <usize>b, gs, d6);
    return;
  }
  const c16 = i16x8.narrow_i32x4_u(code, code);
  v128.store32_lane(sc, i8x16.narrow_i16x8_u(c16, c16), 0);
  codesBlock(x, q, f32x4.extract_lane(denom, 0));
  codesBlock(x + 64, q + 8, f32x4.extract_lane(denom, 1));
  codesBlock(x + 128, q + 16, f32x4.extract_lane(denom, 2));
  codesBlock(x + 192, q + 24, f32x4.extract_lane(denom, 3));
}

export function nvfp4_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const gs = argF32(args, A_TSCALE);
  const d6: f32 = 6 * gs;
  store<f32>(argU32(args, A_AUX), gs);
  const scales = argU32(args, A_SCALES);
  const nb = rowLen >> 4;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const q = dst + ((<usize>r * <usize>rowLen) >> 1);
    const sc = scales + <usize>r * <usize>nb;
    let b = 0;
    if (ASC_FEATURE_SIMD && gs != 0) {
      for (; b + 4 <= nb; b += 4) quantizeFour(x + (<usize>b << 6), q + (<usize>b << 3), sc + <usize>b, gs, d6);
    }
    for (; b < nb; b++) quantizeBlock(x + (<usize>b << 6), q + (<usize>b << 3), sc + <usize>b, gs, d6);
  }
}

// SIMD decode: E2M1 values are exact in 16 bits, so their planes (lut.ts; MXFP4's at scale 1)
// give each value with two swizzles; the block's scale e4m3(code) * scale_2 comes from a table of
// the 256 bytes computed per call with the scalar build's expression.
const SCALE_TABLE = memory.data(256 * 4, 16);

export function nvfp4_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const gs = load<f32>(argU32(args, A_AUX));
  const scales = argU32(args, A_SCALES);
  const nblocks = (<usize>nrows * <usize>rowLen) >> 4;
  if (ASC_FEATURE_SIMD) {
    const planes = e2m1Planes();
    for (let c: u32 = 0; c < 256; c++) store<f32>(SCALE_TABLE + (<usize>c << 2), e4m3(c & 0x7f) * gs);
    const lo = v128.load(planes);
    const hi = v128.load(planes + 16);
    const m = v128.load(NIB);
    let b: usize = 0;
    // Two blocks a step: their 16 code bytes split into nibbles once.
    for (; b + 2 <= nblocks; b += 2) {
      const v = v128.load(src + (b << 3));
      const l = v128.and(v, m);
      const h = hiNibbles(v, m);
      const s0 = v128.load32_splat(SCALE_TABLE + (<usize>load<u8>(scales + b) << 2));
      const s1 = v128.load32_splat(SCALE_TABLE + (<usize>load<u8>(scales + b, 1) << 2));
      planesStore16(i8x16.shuffle(l, h, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), lo, hi, dst + (b << 6), true, s0);
      planesStore16(i8x16.shuffle(l, h, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), lo, hi, dst + (b << 6) + 64, true, s1);
    }
    if (b < nblocks) {
      const v = v128.load64_zero(src + (b << 3));
      const c = i8x16.shuffle(v128.and(v, m), hiNibbles(v, m), 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
      planesStore16(c, lo, hi, dst + (b << 6), true, v128.load32_splat(SCALE_TABLE + (<usize>load<u8>(scales + b) << 2)));
    }
    return;
  }
  for (let b: usize = 0; b < nblocks; b++) {
    const s = e4m3(<u32>load<u8>(scales + b) & 0x7f) * gs;
    const q = src + (b << 3);
    const y = dst + (b << 6);
    for (let j: usize = 0; j < 8; j++) {
      const c = <u32>load<u8>(q + j);
      store<f32>(y + (j << 3), load<f32>(E2M1 + (<usize>(c & 15) << 2)) * s);
      store<f32>(y + (j << 3) + 4, load<f32>(E2M1 + (<usize>(c >> 4) << 2)) * s);
    }
  }
}
