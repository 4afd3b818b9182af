// IQ2_XS (ggml type 17), read only: super-blocks of 256 values in 74 bytes (2.3125 bpw).
// Layout: d: fp16 at 0; qs: u16[32] at 2, one per 8 values: grid index (9 bits, IQ2XS_GRID) and
// 7 sign bits (evenSigns) above it; scales: u8[8] at 66, per 32 values two 4-bit s (low nibble
// for its first 16 values) giving d * (0.5 + s) * 0.25.
import { f16ToF32 } from '../common';
import { IQ2XS_GRID } from './iq_grids';
import { evenSigns, iq2Eight } from './iq_lowbit';

export const IQ2_XS_BLOCK: i32 = 256;
export const IQ2_XS_BYTES: i32 = 74;

export function iq2_xs_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 74;
    const d = f16ToF32(<u32>load<u16>(blk));
    for (let ib: usize = 0; ib < 8; ib++) {
      const sc = <u32>load<u8>(blk + 66 + ib);
      const db0 = d * (<f32>0.5 + <f32>(sc & 15)) * <f32>0.25;
      const db1 = d * (<f32>0.5 + <f32>(sc >> 4)) * <f32>0.25;
      const y = dst + (b << 10) + (ib << 7);
      for (let l: usize = 0; l < 4; l++) {
        const q = <u32>load<u16>(blk + 2 + (((ib << 2) + l) << 1));
        iq2Eight(IQ2XS_GRID, q & 511, l < 2 ? db0 : db1, evenSigns(q >> 9), y + (l << 5));
      }
    }
  }
}
