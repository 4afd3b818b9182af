// IQ2_S (ggml type 22), read only: super-blocks of 256 values in 82 bytes (2.5625 bpw).
// Layout: d: fp16 at 0; qs: u8[32] at 2, the low 8 bits of one grid index (IQ2S_GRID, 10 bits) per
// 8 values; signs: u8[32] at 34, one full sign byte per 8 values; qh: u8[8] at 66, per 32 values
// the indices' top 2 bits (bits 2l, 2l+1 for the l-th 8 values); scales: u8[8] at 74, as IQ2_XS.
import { f16ToF32 } from '../common';
import { IQ2S_GRID } from './iq_grids';
import { iq2Eight } from './iq_lowbit';

export const IQ2_S_BLOCK: i32 = 256;
export const IQ2_S_BYTES: i32 = 82;

export function iq2_s_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 82;
    const d = f16ToF32(<u32>load<u16>(blk));
    for (let ib: usize = 0; ib < 8; ib++) {
      const sc = <u32>load<u8>(blk + 74 + ib);
      const qh = <u32>load<u8>(blk + 66 + ib);
      const db0 = d * (<f32>0.5 + <f32>(sc & 15)) * <f32>0.25;
      const db1 = d * (<f32>0.5 + <f32>(sc >> 4)) * <f32>0.25;
      const y = dst + (b << 10) + (ib << 7);
      for (let l: usize = 0; l < 4; l++) {
        const k = (ib << 2) + l;
        const idx = <u32>load<u8>(blk + 2 + k) | ((qh << (8 - 2 * <u32>l)) & 0x300);
        iq2Eight(IQ2S_GRID, idx, l < 2 ? db0 : db1, <u32>load<u8>(blk + 34 + k), y + (l << 5));
      }
    }
  }
}
