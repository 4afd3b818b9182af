// TQ1_0 (ggml type 34, ternary): super-blocks of 256 values in 54 bytes (1.6875 bpw).
// Layout: qs: u8[48] at 0, qh: u8[4] at 48, d: fp16 at 52. Each byte holds five (qh: four) base-3
// digits as the fixed-point fraction q / 256 ~ sum of t_n / 3^(n+1); digit n is the integer part
// of 3 * (q * 3^n mod 256) / 256, and the value (digit - 1) * d. Order: digit n of qs[0..32) fills
// values 32n.., digit n of qs[32..48) values 160 + 16n.., digit n of qh[0..4) values 240 + 4n...
// Quantizer (llama.cpp's quantize_row_tq1_0_ref; TQ2_0 shares its codes): d = the block's absmax,
// code = roundf(x / d) + 1 with x / d taken as x * (1 / d). A byte's digits are packed as the
// integer t = sum t_n 3^(4-n) (qh: four digits, then one zero digit), stored as ceil(256 t / 243).
import { f16ToF32, f32ToF16, roundAway } from '../common';
import { absmax } from '../bnb/lut';
import { quantizeBlockRows } from './pack';

export const TQ1_0_BLOCK: i32 = 256;
export const TQ1_0_BYTES: i32 = 54;

const POW3 = memory.data<u8>([1, 3, 9, 27, 81]);
/** The 256 codes (0, 1, 2) of the block being quantized. */
export const TQ_CODES = memory.data(256);

/**
 * Codes roundf(x / d) + 1 (0, 1, 2) of n values (a multiple of 16, at most 256) into TQ_CODES;
 * returns the block's scale d (its absmax). Q2_0 shares them. When 1/d overflows (an
 * fp32-denormal absmax) x * (1/d) is infinite or NaN and every code is `overflowCode`: the x86
 * references turn it into LONG_MIN (TQ's lroundf: LONG_MIN + 1 truncated to int is 1) or
 * INT_MIN (Q2_0's (int)roundf: INT_MIN + 1 clamps to 0).
 */
export function ternaryCodes(x: usize, n: i32 = 256, overflowCode: u8 = 1): f32 {
  const amax = absmax(x, n);
  const id: f32 = amax != 0 ? <f32>1 / amax : 0;
  if (id == Infinity) {
    memory.fill(TQ_CODES, overflowCode, <usize>n);
    return amax;
  }
  if (ASC_FEATURE_SIMD) {
    // |x * id| <= ~1: truncating x*id + copysign(0.5) is roundf there, except below 0.5 where the
    // sum may round up to 1 (x*id = 0.49999997), so those lanes are 0 (q8_0.ts' rounding).
    const vid = f32x4.splat(id);
    const half = f32x4.splat(0.5);
    const sign = i32x4.splat(0x80000000);
    const one = i32x4.splat(1);
    for (let i = 0; i < n; i += 16) {
      const c0 = ternary4(f32x4.mul(v128.load(x + (<usize>i << 2)), vid), half, sign, one);
      const c1 = ternary4(f32x4.mul(v128.load(x + (<usize>(i + 4) << 2)), vid), half, sign, one);
      const c2 = ternary4(f32x4.mul(v128.load(x + (<usize>(i + 8) << 2)), vid), half, sign, one);
      const c3 = ternary4(f32x4.mul(v128.load(x + (<usize>(i + 12) << 2)), vid), half, sign, one);
      v128.store(TQ_CODES + <usize>i, i8x16.narrow_i16x8_u(i16x8.narrow_i32x4_s(c0, c1), i16x8.narrow_i32x4_s(c2, c3)));
    }
  } else {
    for (let i = 0; i < n; i++) store<u8>(TQ_CODES + <usize>i, <u8>(<i32>roundAway(load<f32>(x + (<usize>i << 2)) * id) + 1));
  }
  return amax;
}

@inline function ternary4(v: v128, half: v128, sign: v128, one: v128): v128 {
  const q = i32x4.trunc_sat_f32x4_s(f32x4.add(v, v128.or(v128.and(v, sign), half)));
  return i32x4.add(v128.andnot(q, f32x4.lt(f32x4.abs(v), half)), one);
}

// ceil(256 t / 243) of a base-3 integer t < 243, as the reference stores it.
@inline function tritByte(t: u32): u8 {
  return <u8>((t * 256 + 242) / 243);
}

// SIMD: tritByte of 16 bytes at once, t = the digits at c, c + stride, ... c + 4 stride (16 codes
// each) as a base-3 integer. ceil(256 t / 243) is floor((256 t + 242) / 243), exact in f32: the
// dividend is an integer below 2^16 and a quotient's distance to the next integer (>= 1/243) is
// far above its rounding error.
@inline function tritBytes16(c: usize, stride: usize, y: usize): void {
  const v0 = v128.load(c), v1 = v128.load(c + stride), v2 = v128.load(c + 2 * stride);
  const v3 = v128.load(c + 3 * stride), v4 = v128.load(c + 4 * stride);
  const three = i16x8.splat(3);
  // Horner in 16-bit lanes (t <= 242), low and high halves of the 16 bytes.
  let lo = i16x8.extend_low_i8x16_u(v0), hi = i16x8.extend_high_i8x16_u(v0);
  lo = i16x8.add(i16x8.mul(lo, three), i16x8.extend_low_i8x16_u(v1));
  hi = i16x8.add(i16x8.mul(hi, three), i16x8.extend_high_i8x16_u(v1));
  lo = i16x8.add(i16x8.mul(lo, three), i16x8.extend_low_i8x16_u(v2));
  hi = i16x8.add(i16x8.mul(hi, three), i16x8.extend_high_i8x16_u(v2));
  lo = i16x8.add(i16x8.mul(lo, three), i16x8.extend_low_i8x16_u(v3));
  hi = i16x8.add(i16x8.mul(hi, three), i16x8.extend_high_i8x16_u(v3));
  lo = i16x8.add(i16x8.mul(lo, three), i16x8.extend_low_i8x16_u(v4));
  hi = i16x8.add(i16x8.mul(hi, three), i16x8.extend_high_i8x16_u(v4));
  const q0 = tritByte4(i32x4.extend_low_i16x8_u(lo)), q1 = tritByte4(i32x4.extend_high_i16x8_u(lo));
  const q2 = tritByte4(i32x4.extend_low_i16x8_u(hi)), q3 = tritByte4(i32x4.extend_high_i16x8_u(hi));
  v128.store(y, i8x16.narrow_i16x8_u(i16x8.narrow_i32x4_s(q0, q1), i16x8.narrow_i32x4_s(q2, q3)));
}

// tritByte of four base-3 integers t (i32 lanes).
@inline function tritByte4(t: v128): v128 {
  const dividend = i32x4.add(i32x4.mul(t, i32x4.splat(256)), i32x4.splat(242));
  return i32x4.trunc_sat_f32x4_s(f32x4.div(f32x4.convert_i32x4_s(dividend), f32x4.splat(243)));
}

function quantizeBlock(x: usize, qw: usize, y: usize): void {
  const d = ternaryCodes(x);
  if (ASC_FEATURE_SIMD) {
    tritBytes16(TQ_CODES, 32, y);
    tritBytes16(TQ_CODES + 16, 32, y + 16);
    tritBytes16(TQ_CODES + 160, 16, y + 32);
  } else {
    for (let m: usize = 0; m < 32; m++) {
      let t: u32 = 0;
      for (let n: usize = 0; n < 5; n++) t = t * 3 + <u32>load<u8>(TQ_CODES + m + (n << 5));
      store<u8>(y + m, tritByte(t));
    }
    for (let m: usize = 0; m < 16; m++) {
      let t: u32 = 0;
      for (let n: usize = 0; n < 5; n++) t = t * 3 + <u32>load<u8>(TQ_CODES + 160 + m + (n << 4));
      store<u8>(y + 32 + m, tritByte(t));
    }
  }
  for (let m: usize = 0; m < 4; m++) {
    let t: u32 = 0;
    for (let n: usize = 0; n < 4; n++) t = t * 3 + <u32>load<u8>(TQ_CODES + 240 + m + (n << 2));
    store<u8>(y + 48 + m, tritByte(t * 3));
  }
  store<u16>(y + 52, f32ToF16(d));
}

export function tq1_0_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 54, quantizeBlock);
}

// the value of digit n (n < 5) of byte q, times d
@inline function trit(q: u32, n: u32, d: f32): f32 {
  const r = (q * <u32>load<u8>(POW3 + n)) & 255;
  return <f32>(<i32>((r * 3) >> 8) - 1) * d;
}

export function tq1_0_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 54;
    const d = f16ToF32(<u32>load<u16>(blk, 52));
    const y = dst + (b << 10);
    if (ASC_FEATURE_SIMD) {
      const vd = f32x4.splat(d);
      const a = v128.load(blk);
      const c = v128.load(blk + 16);
      const e = v128.load(blk + 32);
      // Bytes widened once to 16-bit lanes; digit n of values 32n + m (bytes 0..31) and
      // 160 + 16n + m (bytes 32..47).
      const a0 = i16x8.extend_low_i8x16_u(a);
      const a1 = i16x8.extend_high_i8x16_u(a);
      const c0 = i16x8.extend_low_i8x16_u(c);
      const c1 = i16x8.extend_high_i8x16_u(c);
      const e0 = i16x8.extend_low_i8x16_u(e);
      const e1 = i16x8.extend_high_i8x16_u(e);
      for (let n: usize = 0; n < 5; n++) {
        const p = v128.load(TQ_K + (n << 4));
        const ya = y + ((32 * n) << 2);
        const ye = y + ((160 + 16 * n) << 2);
        ternary8(digit8(a0, p), vd, ya);
        ternary8(digit8(a1, p), vd, ya + 32);
        ternary8(digit8(c0, p), vd, ya + 64);
        ternary8(digit8(c1, p), vd, ya + 96);
        ternary8(digit8(e0, p), vd, ye);
        ternary8(digit8(e1, p), vd, ye + 32);
      }
      // Values 240 + 4n + m: bytes 48..51 four times over, 3^n per group of four lanes.
      const t = i32x4.splat(load<u32>(blk, 48));
      ternary8(digit8(i16x8.extend_low_i8x16_u(t), v128.load(TQ_K, 80)), vd, y + (240 << 2));
      ternary8(digit8(i16x8.extend_high_i8x16_u(t), v128.load(TQ_K, 96)), vd, y + (248 << 2));
      continue;
    }
    for (let n: u32 = 0; n < 5; n++) {
      for (let m: usize = 0; m < 32; m++) store<f32>(y + ((<usize>(32 * n) + m) << 2), trit(<u32>load<u8>(blk + m), n, d));
      for (let m: usize = 0; m < 16; m++) store<f32>(y + ((160 + <usize>(16 * n) + m) << 2), trit(<u32>load<u8>(blk + 32 + m), n, d));
    }
    for (let n: u32 = 0; n < 4; n++) {
      for (let m: usize = 0; m < 4; m++) store<f32>(y + ((240 + <usize>(4 * n) + m) << 2), trit(<u32>load<u8>(blk + 48 + m), n, d));
    }
  }
}

// SIMD decode constants: 3^n splatted (n = 0..4), then [1 x4, 3 x4] and [9 x4, 27 x4] for the
// last 16 values, then 255, 3 and 1 (16-bit lanes; loaded: a v128.const is rebuilt at every use).
const TQ_K = memory.data<u16>([
  1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 9, 9, 9, 9, 9, 9, 9, 9,
  27, 27, 27, 27, 27, 27, 27, 27, 81, 81, 81, 81, 81, 81, 81, 81,
  1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27,
  255, 255, 255, 255, 255, 255, 255, 255, 3, 3, 3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1,
], 16);

// Digit of 8 bytes in 16-bit lanes x (p = 3^n per lane), minus 1: (((x * p) mod 256) * 3 >> 8) - 1.
@inline function digit8(x: v128, p: v128): v128 {
  const r = v128.and(i16x8.mul(x, p), v128.load(TQ_K, 112));
  return i16x8.sub(i16x8.shr_u(i16x8.mul(r, v128.load(TQ_K, 128)), 8), v128.load(TQ_K, 144));
}

// 8 signed 16-bit values q - 1 to (q - 1) * d at y.
@inline function ternary8(t: v128, vd: v128, y: usize): void {
  v128.store(y, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(t)), vd));
  v128.store(y, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(t)), vd), 16);
}

// 16 codes q (bytes 0..3) to (q - 1) * d at y: the integer converted, then multiplied, as the scalar path.
@inline export function ternary16(q: v128, vd: v128, y: usize): void {
  const one = i32x4.splat(1);
  const lo = i16x8.extend_low_i8x16_u(q);
  const hi = i16x8.extend_high_i8x16_u(q);
  v128.store(y, f32x4.mul(f32x4.convert_i32x4_s(i32x4.sub(i32x4.extend_low_i16x8_u(lo), one)), vd));
  v128.store(y + 16, f32x4.mul(f32x4.convert_i32x4_s(i32x4.sub(i32x4.extend_high_i16x8_u(lo), one)), vd));
  v128.store(y + 32, f32x4.mul(f32x4.convert_i32x4_s(i32x4.sub(i32x4.extend_low_i16x8_u(hi), one)), vd));
  v128.store(y + 48, f32x4.mul(f32x4.convert_i32x4_s(i32x4.sub(i32x4.extend_high_i16x8_u(hi), one)), vd));
}
