// IQ2_XXS (ggml type 16), read only: super-blocks of 256 values in 66 bytes (2.0625 bpw).
// Layout: d: fp16 at 0, then per 32 values 8 bytes: four grid indices (8 values each, IQ2XXS_GRID)
// and a u32 whose bits 7l..7l+6 are the sign bits of the l-th 8 values (evenSigns) and whose top
// 4 bits s give the scale d * (0.5 + s) * 0.25.
import { f16ToF32 } from '../common';
import { IQ2XXS_GRID } from './iq_grids';
import { evenSigns, iq2Eight } from './iq_lowbit';

export const IQ2_XXS_BLOCK: i32 = 256;
export const IQ2_XXS_BYTES: i32 = 66;

export function iq2_xxs_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 66;
    const d = f16ToF32(<u32>load<u16>(blk));
    for (let ib: usize = 0; ib < 8; ib++) {
      const q = blk + 2 + (ib << 3);
      const aux = load<u32>(q, 4);
      const db = d * (<f32>0.5 + <f32>(aux >> 28)) * <f32>0.25;
      const y = dst + (b << 10) + (ib << 7);
      for (let l: u32 = 0; l < 4; l++) {
        iq2Eight(IQ2XXS_GRID, <u32>load<u8>(q + <usize>l), db, evenSigns((aux >> (7 * l)) & 127), y + (<usize>l << 5));
      }
    }
  }
}
