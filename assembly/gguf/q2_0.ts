// Q2_0 (ggml type 42): blocks of 64 values in 18 bytes (2.25 bpw).
// Layout: d: fp16 at 0, qs: u8[16] at 2. Bits 2l..2l+1 of qs[k] are code q of value 4k + l, and
// the value (q - 1) * d (q = 3 gives 2d, which the quantizer never writes).
// Quantizer (llama.cpp's quantize_row_q2_0_ref): d = the block's absmax, code = roundf(x * (1/d)) + 1
// clamped to 0..3: TQ2_0's ternary codes over 64 values instead of 256.
import { f16ToF32, f32ToF16 } from '../common';
import { quantizeBlockRows, storeAQ } from './pack';
import { ternaryCodes, TQ_CODES } from './tq1_0';

export const Q2_0_BLOCK: i32 = 64;
export const Q2_0_BYTES: i32 = 18;

function quantizeBlock(x: usize, qw: usize, y: usize): void {
  const d = ternaryCodes(x, 64, 0);
  store<u16>(y, f32ToF16(d));
  if (ASC_FEATURE_SIMD) {
    // 16 codes a vector: pairs joined in 16-bit lanes (c | c' << 2), then pairs of those in
    // 32-bit lanes (p | p' << 4): one byte per 32-bit lane, narrowed to 16 bytes.
    const m4 = i16x8.splat(0x0f);
    const m8 = i32x4.splat(0xff);
    const b0 = pack4(v128.load(TQ_CODES), m4, m8);
    const b1 = pack4(v128.load(TQ_CODES + 16), m4, m8);
    const b2 = pack4(v128.load(TQ_CODES + 32), m4, m8);
    const b3 = pack4(v128.load(TQ_CODES + 48), m4, m8);
    v128.store(y + 2, i8x16.narrow_i16x8_u(i16x8.narrow_i32x4_s(b0, b1), i16x8.narrow_i32x4_s(b2, b3)));
    return;
  }
  for (let k: usize = 0; k < 16; k++) {
    const c = TQ_CODES + (k << 2);
    const q = <u32>load<u8>(c) | (<u32>load<u8>(c, 1) << 2) | (<u32>load<u8>(c, 2) << 4) | (<u32>load<u8>(c, 3) << 6);
    store<u8>(y + 2 + k, <u8>q);
  }
}

@inline function pack4(c: v128, m4: v128, m8: v128): v128 {
  const p = v128.and(v128.or(c, i16x8.shr_u(c, 6)), m4);
  return v128.and(v128.or(p, i32x4.shr_u(p, 12)), m8);
}

export function q2_0_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 64, 18, quantizeBlock);
}

/**
 * The values q - 1 of bytes k and k + 1 of q (codes 4k .. 4k + 7) as i16 lanes: each byte four
 * times in 16-bit lanes (swizzle index 0x80 + k selects 0), times 64, 16, 4, 1, so that code l
 * lands in bits 6..7. Also the serving matvec's decoder (assembly/serve/lowbit.ts).
 */
@inline export function q2Values8(q: v128, k: usize): v128 {
  const pick = v128(0, -128, 0, -128, 0, -128, 0, -128, 1, -128, 1, -128, 1, -128, 1, -128);
  const mul = v128(64, 0, 16, 0, 4, 0, 1, 0, 64, 0, 16, 0, 4, 0, 1, 0);
  const r = i8x16.swizzle(q, i8x16.add(pick, i8x16.splat(<i8>k)));
  return i16x8.sub(v128.and(i16x8.shr_u(i16x8.mul(r, mul), 6), i16x8.splat(3)), i16x8.splat(1));
}

export function q2_0_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 6;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 18;
    const d = f16ToF32(<u32>load<u16>(blk));
    const y = dst + (b << 8);
    if (ASC_FEATURE_SIMD) {
      // Code 4k + l is field l of byte k: the four fields' vectors, transposed by byte then word
      // interleaves, give the 64 codes in value order, 16 to a vector.
      const q = v128.load(blk + 2);
      const m3 = i8x16.splat(3);
      const c0 = v128.and(q, m3);
      const c1 = v128.and(i16x8.shr_u(q, 2), m3);
      const c2 = v128.and(i16x8.shr_u(q, 4), m3);
      const c3 = v128.and(i16x8.shr_u(q, 6), m3);
      const a0 = i8x16.shuffle(c0, c1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
      const a1 = i8x16.shuffle(c0, c1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
      const b0 = i8x16.shuffle(c2, c3, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
      const b1 = i8x16.shuffle(c2, c3, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
      const one = i8x16.splat(1);
      const vd = f32x4.splat(d);
      storeAQ(y, i8x16.sub(i16x8.shuffle(a0, b0, 0, 8, 1, 9, 2, 10, 3, 11), one), vd);
      storeAQ(y + 64, i8x16.sub(i16x8.shuffle(a0, b0, 4, 12, 5, 13, 6, 14, 7, 15), one), vd);
      storeAQ(y + 128, i8x16.sub(i16x8.shuffle(a1, b1, 0, 8, 1, 9, 2, 10, 3, 11), one), vd);
      storeAQ(y + 192, i8x16.sub(i16x8.shuffle(a1, b1, 4, 12, 5, 13, 6, 14, 7, 15), one), vd);
      continue;
    }
    for (let j: usize = 0; j < 64; j++) {
      const q = (<u32>load<u8>(blk + 2 + (j >> 2)) >> (<u32>(j & 3) << 1)) & 3;
      store<f32>(y + (j << 2), <f32>(<i32>q - 1) * d);
    }
  }
}
