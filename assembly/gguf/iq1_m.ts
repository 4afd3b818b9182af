// IQ1_M (ggml type 29), read only: super-blocks of 256 values in 56 bytes (1.75 bpw).
// Layout: qs: u8[32] at 0, the low 8 bits of one grid index (IQ1S_GRID) per 8 values; qh: u8[16]
// at 32, per 16 values one byte: bits 0-2 / 4-6 the top bits of the two indices, bits 3 / 7 the
// signs of their offsets delta = +-1/8; scales: u16[4] at 48: the fp16 super-scale d in their top
// nibbles (word k holds bits 4k..4k+3), and per 16 values a 3-bit s (word ib/2, bits 6*(ib%2) +
// 0..2 and + 3..5 for the two halves of 32 values ib) giving d * (2s + 1).
import { f16ToF32 } from '../common';
import { IQ1S_GRID } from './iq_grids';
import { iq1Eight } from './iq_lowbit';

export const IQ1_M_BLOCK: i32 = 256;
export const IQ1_M_BYTES: i32 = 56;

export function iq1_m_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 56;
    const s0 = <u32>load<u16>(blk, 48);
    const s1 = <u32>load<u16>(blk, 50);
    const s2 = <u32>load<u16>(blk, 52);
    const s3 = <u32>load<u16>(blk, 54);
    const d = f16ToF32((s0 >> 12) | ((s1 >> 8) & 0xf0) | ((s2 >> 4) & 0xf00) | (s3 & 0xf000));
    for (let ib: usize = 0; ib < 8; ib++) {
      const sc = <u32>load<u16>(blk + 48 + ((ib >> 1) << 1));
      const sh = <u32>(ib & 1) * 6;
      const s1: u32 = 2 * ((sc >> sh) & 7) + 1;
      const s2: u32 = 2 * ((sc >> (sh + 3)) & 7) + 1;
      const dl1 = d * <f32>s1;
      const dl2 = d * <f32>s2;
      const y = dst + (b << 10) + (ib << 7);
      for (let l: usize = 0; l < 4; l++) {
        const h = <u32>load<u8>(blk + 32 + (ib << 1) + (l >> 1)) >> (<u32>(l & 1) << 2);
        const idx = <u32>load<u8>(blk + (ib << 2) + l) | ((h & 7) << 8);
        const delta: f32 = h & 8 ? -0.125 : 0.125;
        iq1Eight(IQ1S_GRID, idx, l < 2 ? dl1 : dl2, delta, y + (l << 5));
      }
    }
  }
}
