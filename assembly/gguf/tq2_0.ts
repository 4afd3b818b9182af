// TQ2_0 (ggml type 35, ternary), read only: super-blocks of 256 values in 66 bytes (2.0625 bpw).
// Layout: qs: u8[64] at 0, d: fp16 at 64. Per 128 values, bits 2l..2l+1 of qs[32h + m] are
// code q of value 128h + 32l + m, and the value (q - 1) * d (q = 3 gives 2d, as llama.cpp reads it).
import { f16ToF32 } from '../common';

export const TQ2_0_BLOCK: i32 = 256;
export const TQ2_0_BYTES: i32 = 66;

export function tq2_0_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 66;
    const d = f16ToF32(<u32>load<u16>(blk, 64));
    const y = dst + (b << 10);
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
