// TQ2_0 (ggml type 35, ternary): super-blocks of 256 values in 66 bytes (2.0625 bpw).
// Layout: qs: u8[64] at 0, d: fp16 at 64. Per 128 values, bits 2l..2l+1 of qs[32h + m] are
// code q of value 128h + 32l + m, and the value (q - 1) * d (q = 3 gives 2d, as llama.cpp reads it).
// Quantizer: TQ1_0's codes (llama.cpp's quantize_row_tq2_0_ref), never 3.
import { f16ToF32, f32ToF16 } from '../common';
import { quantizeBlockRows } from './pack';
import { ternary16, ternaryCodes, TQ_CODES } from './tq1_0';

export const TQ2_0_BLOCK: i32 = 256;
export const TQ2_0_BYTES: i32 = 66;

function quantizeBlock(x: usize, qw: usize, y: usize): void {
  const d = ternaryCodes(x);
  for (let h: usize = 0; h < 2; h++) {
    const c = TQ_CODES + (h << 7);
    if (ASC_FEATURE_SIMD) {
      for (let m: usize = 0; m < 32; m += 16) {
        const q = v128.or(
          v128.or(v128.load(c + m), i16x8.shl(v128.load(c + 32 + m), 2)),
          v128.or(i16x8.shl(v128.load(c + 64 + m), 4), i16x8.shl(v128.load(c + 96 + m), 6)),
        );
        v128.store(y + (h << 5) + m, q);
      }
      continue;
    }
    for (let m: usize = 0; m < 32; m++) {
      const q = <u32>load<u8>(c + m) | (<u32>load<u8>(c + 32 + m) << 2) | (<u32>load<u8>(c + 64 + m) << 4) | (<u32>load<u8>(c + 96 + m) << 6);
      store<u8>(y + (h << 5) + m, <u8>q);
    }
  }
  store<u16>(y + 64, f32ToF16(d));
}

export function tq2_0_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 66, quantizeBlock);
}

export function tq2_0_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 66;
    const d = f16ToF32(<u32>load<u16>(blk, 64));
    const y = dst + (b << 10);
    if (ASC_FEATURE_SIMD) {
      const vd = f32x4.splat(d);
      const three = i16x8.splat(3);
      for (let h: usize = 0; h < 2; h++) {
        const a = v128.load(blk + (h << 5));
        const c = v128.load(blk + (h << 5) + 16);
        for (let l: u32 = 0; l < 4; l++) {
          const o = y + (((h << 7) + (<usize>l << 5)) << 2);
          ternary16(codes2(a, l, three), vd, o);
          ternary16(codes2(c, l, three), vd, o + 64);
        }
      }
      continue;
    }
    for (let h: usize = 0; h < 2; h++) {
      for (let l: u32 = 0; l < 4; l++) {
        for (let m: usize = 0; m < 32; m++) {
          const q = (<u32>load<u8>(blk + (h << 5) + m) >> (l << 1)) & 3;
          store<f32>(y + (((h << 7) + (<usize>l << 5) + m) << 2), <f32>(<i32>q - 1) * d);
        }
      }
    }
  }
}

// Bits 2l..2l+1 of each of 16 bytes, as 16-bit lanes of two vectors packed back to bytes.
@inline function codes2(b: v128, l: u32, three: v128): v128 {
  const lo = v128.and(i16x8.shr_u(i16x8.extend_low_i8x16_u(b), l << 1), three);
  const hi = v128.and(i16x8.shr_u(i16x8.extend_high_i8x16_u(b), l << 1), three);
  return i8x16.narrow_i16x8_u(lo, hi);
}
