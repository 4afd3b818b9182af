// IQ1_S (ggml type 19), read only: super-blocks of 256 values in 50 bytes (1.5625 bpw).
// Layout: d: fp16 at 0; qs: u8[32] at 2, the low 8 bits of one grid index (IQ1S_GRID, 11 bits) per
// 8 values; qh: u16[8] at 34, per 32 values: bits 3l..3l+2 the top bits of its l-th index, bits
// 12-14 s giving the scale d * (2s + 1), bit 15 the sign of the offset delta = +-1/8.
// Value = scale * (grid value + delta).
import { f16ToF32 } from '../common';
import { IQ1S_GRID } from './iq_grids';
import { iq1Eight } from './iq_lowbit';

export const IQ1_S_BLOCK: i32 = 256;
export const IQ1_S_BYTES: i32 = 50;

export function iq1_s_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 50;
    const d = f16ToF32(<u32>load<u16>(blk));
    for (let ib: usize = 0; ib < 8; ib++) {
      const qh = <u32>load<u16>(blk + 34 + (ib << 1));
      const s: u32 = 2 * ((qh >> 12) & 7) + 1;
      const dl = d * <f32>s;
      const delta: f32 = qh & 0x8000 ? -0.125 : 0.125;
      const y = dst + (b << 10) + (ib << 7);
      for (let l: usize = 0; l < 4; l++) {
        const idx = <u32>load<u8>(blk + 2 + (ib << 2) + l) | (((qh >> (3 * <u32>l)) & 7) << 8);
        iq1Eight(IQ1S_GRID, idx, dl, delta, y + (l << 5));
      }
    }
  }
}
