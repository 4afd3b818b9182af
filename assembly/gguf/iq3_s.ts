// IQ3_S (ggml type 21), read only: super-blocks of 256 values in 110 bytes (3.4375 bpw).
// Layout: d: fp16 at 0; qs: u8[64] at 2, the low 8 bits of one grid index (IQ3S_GRID, 9 bits) per
// 4 values; qh: u8[8] at 66, the 9th bits (bit k of byte ib for the k-th 4 values of 32); signs:
// u8[32] at 74, one full sign byte per 8 values; scales: u8[4] at 106, per 64 values two 4-bit s
// (low nibble for the first 32) giving d * (1 + 2s).
import { f16ToF32 } from '../common';
import { IQ3S_GRID } from './iq_grids';
import { IQ3S_LEVELS, iq3Four } from './iq_lowbit';

export const IQ3_S_BLOCK: i32 = 256;
export const IQ3_S_BYTES: i32 = 110;

export function iq3_s_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 110;
    const d = f16ToF32(<u32>load<u16>(blk));
    for (let ib: usize = 0; ib < 8; ib++) {
      const sc = <u32>load<u8>(blk + 106 + (ib >> 1));
      const s: u32 = 1 + 2 * ((sc >> (<u32>(ib & 1) << 2)) & 15);
      const db = d * <f32>s;
      const qh = <u32>load<u8>(blk + 66 + ib);
      const y = dst + (b << 10) + (ib << 7);
      for (let l: usize = 0; l < 4; l++) {
        const signs = <u32>load<u8>(blk + 74 + (ib << 2) + l);
        const k = (ib << 3) + (l << 1);
        iq3Four(IQ3S_GRID, IQ3S_LEVELS, <u32>load<u8>(blk + 2 + k) | ((qh << (8 - 2 * <u32>l)) & 256), db, signs, y + (l << 5));
        iq3Four(IQ3S_GRID, IQ3S_LEVELS, <u32>load<u8>(blk + 3 + k) | ((qh << (7 - 2 * <u32>l)) & 256), db, signs >> 4, y + (l << 5) + 16);
      }
    }
  }
}
