// TQ1_0 (ggml type 34, ternary), read only: super-blocks of 256 values in 54 bytes (1.6875 bpw).
// Layout: qs: u8[48] at 0, qh: u8[4] at 48, d: fp16 at 52. Each byte holds five (qh: four) base-3
// digits as the fixed-point fraction q / 256 ~ sum of t_n / 3^(n+1); digit n is the integer part
// of 3 * (q * 3^n mod 256) / 256, and the value (digit - 1) * d. Order: digit n of qs[0..32) fills
// values 32n.., digit n of qs[32..48) values 160 + 16n.., digit n of qh[0..4) values 240 + 4n...
import { f16ToF32 } from '../common';

export const TQ1_0_BLOCK: i32 = 256;
export const TQ1_0_BYTES: i32 = 54;

const POW3 = memory.data<u8>([1, 3, 9, 27, 81]);

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
      for (let n: u32 = 0; n < 5; n++) {
        const p = i16x8.splat(<i16>load<u8>(POW3 + n));
        ternary16(digits16(a, p), vd, y + (<usize>(32 * n) << 2));
        ternary16(digits16(c, p), vd, y + ((<usize>(32 * n) + 16) << 2));
        ternary16(digits16(e, p), vd, y + ((160 + <usize>(16 * n)) << 2));
      }
      for (let n: u32 = 0; n < 4; n++) {
        for (let m: usize = 0; m < 4; m++) store<f32>(y + ((240 + <usize>(4 * n) + m) << 2), trit(<u32>load<u8>(blk + 48 + m), n, d));
      }
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

// Digit n of 16 bytes (p = 3^n), as bytes: (((q * p) mod 256) * 3) >> 8, in 16-bit lanes.
@inline function digits16(b: v128, p: v128): v128 {
  const m = i16x8.splat(255);
  const three = i16x8.splat(3);
  const lo = i16x8.shr_u(i16x8.mul(v128.and(i16x8.mul(i16x8.extend_low_i8x16_u(b), p), m), three), 8);
  const hi = i16x8.shr_u(i16x8.mul(v128.and(i16x8.mul(i16x8.extend_high_i8x16_u(b), p), m), three), 8);
  return i8x16.narrow_i16x8_u(lo, hi);
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
