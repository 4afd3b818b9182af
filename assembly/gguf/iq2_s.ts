// IQ2_S (ggml type 22), read only: super-blocks of 256 values in 82 bytes (2.5625 bpw).
// Layout: d: fp16 at 0; qs: u8[32] at 2, the low 8 bits of one grid index (IQ2S_GRID, 10 bits) per
// 8 values; signs: u8[32] at 34, one full sign byte per 8 values; qh: u8[8] at 66, per 32 values
// the indices' top 2 bits (bits 2l, 2l+1 for the l-th 8 values); scales: u8[8] at 74, as IQ2_XS.
// Quantizer (llama.cpp quantize_row_iq2_s_impl): weights qw*sqrt(sigma2 + x^2), or without
// importance sigma2/4 + x^2, sigma2 = 2*sum(x^2)/256; per 16 values the magnitudes, every sign
// stored, and iq2Search16 over the 1024-entry grid; the 4-bit scales are relative to
// max scale / 31, and d is stored as that times 0.9875.
import { f16ToF32, f32ToF16 } from '../common';
import { IQ2S_GRID } from './iq_grids';
import { iq2Pair, wideGrid } from './iq_lowbit';
import { cmax, foldMax, iq2IndexOf, iq2Search16, iq2Signs, iq2Tables, iqWeights, packScales16, sqrtWeights } from './iq2_search';
import { sumSquares } from './iq4_common';
import { quantizeBlockRows } from './pack';

export const IQ2_S_BLOCK: i32 = 256;
export const IQ2_S_BYTES: i32 = 82;

// llama.cpp's GROUP_MAX_EPS_IQ2_S: sub-blocks whose largest magnitude is below it are left zero.
const GROUP_MAX_EPS_IQ2_S: f32 = 1e-8;

const weight = memory.data(64, 16);
const waux = memory.data(64, 16);
const xval = memory.data(64, 16);
const scales = memory.data(64, 16);
const codes = memory.data(16, 16);
const trial = memory.data(16, 16);
const signs = memory.data(2, 16);

function quantizeSuperBlock(x: usize, qw: usize, y: usize): void {
  const t = iq2Tables(1024);
  memory.fill(y, 0, 82);
  const sigma2: f32 = (2 * sumSquares(x, 256)) / 256;
  let maxScale: f32 = 0;
  for (let ib: usize = 0; ib < 16; ib++) {
    const xb = x + (ib << 6);
    if (qw != 0) {
      iqWeights(xb, qw + (ib << 6), sigma2, 16, weight, 0);
    } else {
      const base: f32 = <f32>0.25 * sigma2;
      for (let i: usize = 0; i < 16; i++) {
        const v = load<f32>(xb + (i << 2));
        store<f32>(weight + (i << 2), base + v * v);
      }
    }
    sqrtWeights(weight, 16, waux);
    iq2Signs(xb, weight, xval, signs, 2, false);
    const vmax = foldMax(xval, 16);
    memory.fill(codes, 0, 16);
    store<f32>(scales + (ib << 2), 0);
    if (vmax < GROUP_MAX_EPS_IQ2_S) continue;
    let scale = iq2Search16(t, xval, weight, waux, vmax, codes, trial);
    let flip: u32 = 0;
    if (scale < 0) {
      scale = -scale;
      flip = 255;
    }
    for (let k: usize = 0; k < 2; k++) {
      const i8 = (ib << 1) + k;
      const index = <u32>iq2IndexOf(t, codes + (k << 3));
      store<u8>(y + 2 + i8, <u8>index);
      const h = y + 66 + (i8 >> 2);
      store<u8>(h, <u8>(<u32>load<u8>(h) | ((index >> 8) << (<u32>(i8 & 3) << 1))));
      store<u8>(y + 34 + i8, <u8>(<u32>load<u8>(signs + k) ^ flip));
    }
    store<f32>(scales + (ib << 2), scale);
    maxScale = cmax(maxScale, scale);
  }
  // No scale: d stays 0 (codes already written are kept, as llama.cpp leaves them).
  if (maxScale == 0) return;
  const d: f32 = maxScale / 31;
  store<u16>(y, f32ToF16(d * <f32>0.9875));
  const id: f32 = 1 / d;
  packScales16(id, scales, y + 74);
}

/** Importance is optional: without it the weights are sigma2/4 + x^2, as llama.cpp's. */
export function iq2_s_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 82, quantizeSuperBlock);
}

export function iq2_s_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  const wide = wideGrid(IQ2S_GRID);
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 82;
    const d = f16ToF32(<u32>load<u16>(blk));
    for (let ib: usize = 0; ib < 8; ib++) {
      const sc = <u32>load<u8>(blk + 74 + ib);
      const qh = <u32>load<u8>(blk + 66 + ib);
      const db0 = d * (<f32>0.5 + <f32>(sc & 15)) * <f32>0.25;
      const db1 = d * (<f32>0.5 + <f32>(sc >> 4)) * <f32>0.25;
      const y = dst + (b << 10) + (ib << 7);
      // Entry l of the four per 32 values takes bits 2l, 2l + 1 of qh as its top index bits.
      const q = blk + 2 + (ib << 2);
      const sg = blk + 34 + (ib << 2);
      const i0 = <u32>load<u8>(q) | ((qh << 8) & 0x300);
      const i1 = <u32>load<u8>(q, 1) | ((qh << 6) & 0x300);
      const i2 = <u32>load<u8>(q, 2) | ((qh << 4) & 0x300);
      const i3 = <u32>load<u8>(q, 3) | ((qh << 2) & 0x300);
      iq2Pair(IQ2S_GRID, wide, i0, i1, <u32>load<u16>(sg), db0, y);
      iq2Pair(IQ2S_GRID, wide, i2, i3, <u32>load<u16>(sg, 2), db1, y + 64);
    }
  }
}
