// IQ3_XXS (ggml type 18), read only: super-blocks of 256 values in 98 bytes (3.0625 bpw).
// Layout: d: fp16 at 0; qs: u8[64] at 2, one grid index (IQ3XXS_GRID) per 4 values; then per 32
// values a u32 at 66 + 4*ib: bits 7l..7l+6 the sign bits of its l-th 8 values (evenSigns), top 4
// bits s giving the scale d * (0.5 + s) * 0.5.
import { f16ToF32 } from '../common';
import { IQ3XXS_GRID } from './iq_grids';
import { evenSigns, IQ3XXS_LEVELS, iq3Four } from './iq_lowbit';

export const IQ3_XXS_BLOCK: i32 = 256;
export const IQ3_XXS_BYTES: i32 = 98;

export function iq3_xxs_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 98;
    const d = f16ToF32(<u32>load<u16>(blk));
    for (let ib: usize = 0; ib < 8; ib++) {
      const aux = load<u32>(blk + 66 + (ib << 2));
      const db = d * (<f32>0.5 + <f32>(aux >> 28)) * <f32>0.5;
      const q = blk + 2 + (ib << 3);
      const y = dst + (b << 10) + (ib << 7);
      for (let l: usize = 0; l < 4; l++) {
        const signs = evenSigns((aux >> (7 * <u32>l)) & 127);
        iq3Four(IQ3XXS_GRID, IQ3XXS_LEVELS, <u32>load<u8>(q + (l << 1)), db, signs, y + (l << 5));
        iq3Four(IQ3XXS_GRID, IQ3XXS_LEVELS, <u32>load<u8>(q + (l << 1) + 1), db, signs >> 4, y + (l << 5) + 16);
      }
    }
  }
}
