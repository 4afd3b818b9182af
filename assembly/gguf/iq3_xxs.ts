// IQ3_XXS (ggml type 18): super-blocks of 256 values in 98 bytes (3.0625 bpw).
// Layout: d: fp16 at 0; qs: u8[64] at 2, one grid index (IQ3XXS_GRID) per 4 values; then per 32
// values a u32 at 66 + 4*ib: bits 7l..7l+6 the sign bits of its l-th 8 values (evenSigns), top 4
// bits s giving the scale d * (0.5 + s) * 0.5.
// Quantizer (llama.cpp's quantize_row_iq3_xxs_impl, grid of 256): per 32 values weights x^2 (or
// qw * sqrt(sigma2 + x^2), sigma2 = 2 sum(x^2) / 256 over the super-block); per 8 values the signs
// are taken off, and where their count is odd the value with the smallest w x^2 keeps its sign
// flipped (it becomes a negative magnitude), so that 7 stored bits imply the 8th. Below a maximum
// magnitude of 1e-8 the sub-block is zero; otherwise iq3_search.ts finds its scale and levels.
// d = max scale / 31, stored times 1.0125; s = nearest_int(0.5 (scale / d - 1)) clamped to 0..15.
import { f16ToF32, f32ToF16, nearestInt } from '../common';
import { IQ3XXS_GRID } from './iq_grids';
import { evenSigns, IQ3XXS_LEVELS, iq3Quad, wideGrid } from './iq_lowbit';
import { sumSquares } from './iq4_common';
import { quantizeBlockRows } from './pack';
import { IQ3_LEVELS, IQ3_SIGNS, IQ3_WAUX, IQ3_WEIGHT, IQ3_XVAL, iq3GridIndex, iq3Map, iq3Prepare32, iq3Search32 } from './iq3_search';
import { cmax } from './iq2_search';

export const IQ3_XXS_BLOCK: i32 = 256;
export const IQ3_XXS_BYTES: i32 = 98;

export function iq3_xxs_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  const wide = wideGrid(IQ3XXS_GRID);
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 98;
    const d = f16ToF32(<u32>load<u16>(blk));
    for (let ib: usize = 0; ib < 8; ib++) {
      const aux = load<u32>(blk + 66 + (ib << 2));
      const db = d * (<f32>0.5 + <f32>(aux >> 28)) * <f32>0.5;
      const q = blk + 2 + (ib << 3);
      const y = dst + (b << 10) + (ib << 7);
      const s01 = evenSigns(aux & 127) | (evenSigns((aux >> 7) & 127) << 8);
      const s23 = evenSigns((aux >> 14) & 127) | (evenSigns((aux >> 21) & 127) << 8);
      iq3Quad(
        IQ3XXS_GRID, IQ3XXS_LEVELS, wide, <u32>load<u8>(q), <u32>load<u8>(q, 1), <u32>load<u8>(q, 2), <u32>load<u8>(q, 3),
        s01, db, y,
      );
      iq3Quad(
        IQ3XXS_GRID, IQ3XXS_LEVELS, wide, <u32>load<u8>(q, 4), <u32>load<u8>(q, 5), <u32>load<u8>(q, 6), <u32>load<u8>(q, 7),
        s23, db, y + 64,
      );
    }
  }
}

const GROUP_MAX_EPS_IQ3_XXS: f32 = 1e-8;

const scales = memory.data(32, 16);

function quantizeSuperBlock(x: usize, qw: usize, y: usize): void {
  memory.fill(y, 0, 98);
  const map = iq3Map(false);
  const sigma2: f32 = (<f32>2 * sumSquares(x, 256)) / <f32>256;
  let maxScale: f32 = 0;
  for (let ib: usize = 0; ib < 8; ib++) {
    const xb = x + (ib << 7);
    // 7 sign bits per 8 values, made even (see the header); the levels are zeroed: where no trial
    // scale fits (all weights zero) they stay.
    const amax = iq3Prepare32(xb, qw != 0 ? qw + (ib << 7) : 0, sigma2, true);
    let signs: u32 = 0;
    for (let k: usize = 0; k < 4; k++) signs |= <u32>load<u8>(IQ3_SIGNS + k) << (7 * <u32>k);
    if (amax < GROUP_MAX_EPS_IQ3_XXS) {
      store<f32>(scales + (ib << 2), 0);
      continue;
    }
    let scale = iq3Search32(false, IQ3_XVAL, IQ3_WEIGHT, IQ3_WAUX, amax, IQ3_LEVELS);
    if (scale < 0) {
      // Not expected (llama.cpp guards it too): a positive scale with every sign flipped.
      scale = -scale;
      signs = ~signs & 0x0fffffff;
    }
    for (let k: usize = 0; k < 8; k++) store<u8>(y + 2 + (ib << 3) + k, <u8>iq3GridIndex(map, IQ3_LEVELS + (k << 2)));
    store<u32>(y + 66 + (ib << 2), signs);
    store<f32>(scales + (ib << 2), scale);
    maxScale = cmax(maxScale, scale);
  }
  if (maxScale == 0) {
    memory.fill(y, 0, 98);
    return;
  }
  const d: f32 = maxScale / <f32>31;
  store<u16>(y, f32ToF16(d * <f32>1.0125));
  const id: f32 = <f32>1 / d;
  for (let ib: usize = 0; ib < 8; ib++) {
    const l = min(15, max(0, nearestInt(<f32>0.5 * (id * load<f32>(scales + (ib << 2)) - <f32>1))));
    const p = y + 66 + (ib << 2);
    store<u32>(p, load<u32>(p) | (<u32>l << 28));
  }
}

export function iq3_xxs_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 98, quantizeSuperBlock);
}
