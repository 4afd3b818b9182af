// IQ2_XS (ggml type 17), read only: super-blocks of 256 values in 74 bytes (2.3125 bpw).
// Layout: d: fp16 at 0; qs: u16[32] at 2, one per 8 values: grid index (9 bits, IQ2XS_GRID) and
// 7 sign bits (evenSigns) above it; scales: u8[8] at 66, per 32 values two 4-bit s (low nibble
// for its first 16 values) giving d * (0.5 + s) * 0.25.
// Quantizer (llama.cpp quantize_row_iq2_xs_impl; it requires importance, so qw != 0): weights
// qw*sqrt(sum(x^2)/256 + x^2); per 16 values the magnitudes with an even count of signs per 8 (the
// least weighted value keeps its sign otherwise) and iq2Search16 over the 512-entry grid; the
// 4-bit scales are relative to d = max scale / 31.
import { GROUP_MAX_EPS, f16ToF32, f32ToF16 } from '../common';
import { IQ2XS_GRID } from './iq_grids';
import { evenSigns, iq2Pair, wideGrid } from './iq_lowbit';
import { cmax, foldMax, iq2IndexOf, iq2Search16, iq2Signs, iq2Tables, iqWeights, packScales16 } from './iq2_search';
import { sumSquares } from './iq4_common';
import { quantizeBlockRows } from './pack';

export const IQ2_XS_BLOCK: i32 = 256;
export const IQ2_XS_BYTES: i32 = 74;

const weight = memory.data(64, 16);
const waux = memory.data(64, 16);
const xval = memory.data(64, 16);
const scales = memory.data(64, 16);
const codes = memory.data(16, 16);
const trial = memory.data(16, 16);
const signs = memory.data(2, 16);
const words = memory.data(64, 16); // q2: grid index | signs << 9 per 8 values

function quantizeSuperBlock(x: usize, qw: usize, y: usize): void {
  const t = iq2Tables(512);
  memory.fill(words, 0, 64);
  const sigma2: f32 = sumSquares(x, 256) / 256;
  let maxScale: f32 = 0;
  for (let ib: usize = 0; ib < 16; ib++) {
    const xb = x + (ib << 6);
    const qb = qw + (ib << 6);
    iqWeights(xb, qb, sigma2, 16, weight, waux);
    iq2Signs(xb, weight, xval, signs, 2, true);
    const vmax = foldMax(xval, 16);
    memory.fill(codes, 0, 16);
    store<f32>(scales + (ib << 2), 0);
    if (vmax < GROUP_MAX_EPS) continue;
    let scale = iq2Search16(t, xval, weight, waux, vmax, codes, trial);
    let flip: u32 = 0;
    if (scale < 0) {
      scale = -scale;
      flip = 127;
    }
    for (let k: usize = 0; k < 2; k++) {
      const v = <u32>iq2IndexOf(t, codes + (k << 3)) | ((<u32>load<u8>(signs + k) ^ flip) << 9);
      store<u16>(words + (ib << 2) + (k << 1), <u16>v);
    }
    store<f32>(scales + (ib << 2), scale);
    maxScale = cmax(maxScale, scale);
  }
  if (maxScale == 0) {
    memory.fill(y, 0, 74);
    return;
  }
  const d: f32 = maxScale / 31;
  store<u16>(y, f32ToF16(d));
  const id: f32 = 1 / d;
  packScales16(id, scales, y + 66);
  memory.copy(y + 2, words, 64);
}

/** Importance is required (as in llama.cpp): the host refuses calls without it. */
export function iq2_xs_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 74, quantizeSuperBlock);
}

export function iq2_xs_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  const wide = wideGrid(IQ2XS_GRID);
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 74;
    const d = f16ToF32(<u32>load<u16>(blk));
    for (let ib: usize = 0; ib < 8; ib++) {
      const sc = <u32>load<u8>(blk + 66 + ib);
      const db0 = d * (<f32>0.5 + <f32>(sc & 15)) * <f32>0.25;
      const db1 = d * (<f32>0.5 + <f32>(sc >> 4)) * <f32>0.25;
      const y = dst + (b << 10) + (ib << 7);
      const q01 = load<u32>(blk + 2 + (ib << 3)); // entries 0 and 1 of the four per 32 values
      const q23 = load<u32>(blk + 6 + (ib << 3));
      const s01 = evenSigns((q01 >> 9) & 127) | (evenSigns(q01 >> 25) << 8);
      const s23 = evenSigns((q23 >> 9) & 127) | (evenSigns(q23 >> 25) << 8);
      iq2Pair(IQ2XS_GRID, wide, q01 & 511, (q01 >> 16) & 511, s01, db0, y);
      iq2Pair(IQ2XS_GRID, wide, q23 & 511, (q23 >> 16) & 511, s23, db1, y + 64);
    }
  }
}
