// IQ2_XXS (ggml type 16): super-blocks of 256 values in 66 bytes (2.0625 bpw).
// Layout: d: fp16 at 0, then per 32 values 8 bytes: four grid indices (8 values each, IQ2XXS_GRID)
// and a u32 whose bits 7l..7l+6 are the sign bits of the l-th 8 values (evenSigns) and whose top
// 4 bits s give the scale d * (0.5 + s) * 0.25.
// Quantizer (llama.cpp quantize_row_iq2_xxs_impl; it requires importance, so qw != 0): weights
// qw*sqrt(sum(x^2)/256 + x^2); per 32 values the magnitudes with an even count of signs per 8 (the
// least weighted value keeps its sign otherwise), a first scale from make_qp_quants (the guarded one), 13
// trial scales whose codes are snapped to the grid (map, else the best neighbour), the best by
// sum(w*x*q)^2/sum(w*q*q), then one pass of codes at that scale and its refit. The 4-bit scales
// are relative to d = max scale / 31.
import { GROUP_MAX_EPS, f16ToF32, f32ToF16 } from '../common';
import { IQ2XXS_GRID } from './iq_grids';
import { evenSigns, iq2Pair, wideGrid } from './iq_lowbit';
import {
  cmax, foldMax, iqWeights, iq2IndexOf, iq2ScaleIndex, iq2Signs, iq2Snap, iq2Sums, iq2Tables, sumQ2, sumQX,
} from './iq2_search';
import { sumSquares } from './iq4_common';
import { quantizeBlockRows } from './pack';
import { makeQpQuants } from './searches';

export const IQ2_XXS_BLOCK: i32 = 256;
export const IQ2_XXS_BYTES: i32 = 66;

const weight = memory.data(128, 16);
const waux = memory.data(128, 16);
const xval = memory.data(128, 16);
const scales = memory.data(32, 16);
const codes = memory.data(32, 16); // llama.cpp's L: the chosen codes
const trial = memory.data(32, 16); //  Laux: a trial's codes
const signs = memory.data(4, 16);
const words = memory.data(64, 16); //  q2: the 8 x (indices, signs | scale) words

// Codes of the four 8-value groups at inverse scale id, each snapped to the grid (at `scale`).
function gridCodes(t: usize, id: f32, scale: f32, L: usize): void {
  for (let k: usize = 0; k < 4; k++) iq2Snap(t, xval + (k << 5), waux + (k << 5), id, scale, L + (k << 3));
}

function quantizeSuperBlock(x: usize, qw: usize, y: usize): void {
  const t = iq2Tables(256);
  memory.fill(words, 0, 64);
  const sigma2: f32 = sumSquares(x, 256) / 256;
  let maxScale: f32 = 0;
  for (let ib: usize = 0; ib < 8; ib++) {
    const xb = x + (ib << 7);
    const qb = qw + (ib << 7);
    iqWeights(xb, qb, sigma2, 32, weight, waux);
    iq2Signs(xb, weight, xval, signs, 4, true);
    store<f32>(scales + (ib << 2), 0);
    if (foldMax(xval, 32) < GROUP_MAX_EPS) continue;
    let scale = makeQpQuants(32, 4, xval, codes, weight, true);
    const effMax: f32 = scale * 3;
    if (effMax <= 0) continue;
    let best: f32 = 0;
    for (let is = -6; is <= 6; is++) {
      const id: f32 = (<f32>5 + <f32>is * <f32>0.1) / effMax;
      gridCodes(t, id, 1 / id, trial);
      iq2Sums(weight, xval, trial, 32);
      if (sumQ2 > 0 && sumQX * sumQX > best * sumQ2) {
        scale = sumQX / sumQ2;
        best = scale * sumQX;
        memory.copy(codes, trial, 32);
      }
    }
    if (scale > 0) {
      gridCodes(t, 1 / scale, scale, codes);
      iq2Sums(weight, xval, codes, 32);
      if (sumQ2 > 0) scale = sumQX / sumQ2;
    }
    let flip: u32 = 0;
    if (scale < 0) {
      scale = -scale;
      flip = 127;
    }
    let indices: u32 = 0;
    let bits: u32 = 0;
    for (let k: usize = 0; k < 4; k++) {
      indices |= <u32>iq2IndexOf(t, codes + (k << 3)) << (<u32>k << 3);
      bits |= (<u32>load<u8>(signs + k) ^ flip) << (<u32>k * 7);
    }
    store<u32>(words + (ib << 3), indices);
    store<u32>(words + (ib << 3), bits, 4);
    store<f32>(scales + (ib << 2), scale);
    maxScale = cmax(maxScale, scale);
  }
  if (maxScale == 0) {
    store<u16>(y, 0);
    memory.fill(y + 2, 0, 64);
    return;
  }
  const d: f32 = maxScale / 31;
  store<u16>(y, f32ToF16(d));
  const id: f32 = 1 / d;
  for (let ib: usize = 0; ib < 8; ib++) {
    const p = words + (ib << 3) + 4;
    store<u32>(p, load<u32>(p) | (iq2ScaleIndex(id, load<f32>(scales + (ib << 2))) << 28));
  }
  memory.copy(y + 2, words, 64);
}

/** Importance is required (as in llama.cpp): the host refuses calls without it. */
export function iq2_xxs_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 66, quantizeSuperBlock);
}

export function iq2_xxs_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  const wide = wideGrid(IQ2XXS_GRID);
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 66;
    const d = f16ToF32(<u32>load<u16>(blk));
    for (let ib: usize = 0; ib < 8; ib++) {
      const q = blk + 2 + (ib << 3);
      const aux = load<u32>(q, 4);
      const db = d * (<f32>0.5 + <f32>(aux >> 28)) * <f32>0.25;
      const y = dst + (b << 10) + (ib << 7);
      const s01 = evenSigns(aux & 127) | (evenSigns((aux >> 7) & 127) << 8);
      const s23 = evenSigns((aux >> 14) & 127) | (evenSigns((aux >> 21) & 127) << 8);
      iq2Pair(IQ2XXS_GRID, wide, <u32>load<u8>(q), <u32>load<u8>(q, 1), s01, db, y);
      iq2Pair(IQ2XXS_GRID, wide, <u32>load<u8>(q, 2), <u32>load<u8>(q, 3), s23, db, y + 64);
    }
  }
}
