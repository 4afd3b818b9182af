// IQ3_S (ggml type 21): super-blocks of 256 values in 110 bytes (3.4375 bpw).
// Layout: d: fp16 at 0; qs: u8[64] at 2, the low 8 bits of one grid index (IQ3S_GRID, 9 bits) per
// 4 values; qh: u8[8] at 66, the 9th bits (bit k of byte ib for the k-th 4 values of 32); signs:
// u8[32] at 74, one full sign byte per 8 values; scales: u8[4] at 106, per 64 values two 4-bit s
// (low nibble for the first 32) giving d * (1 + 2s).
// Quantizer (llama.cpp's quantize_row_iq3_s_impl, block size 32): weights x^2 (or
// qw * sqrt(sigma2 + x^2), sigma2 = 2 sum(x^2) / 256 over the super-block), every sign stored, a
// sub-block of zeros (maximum magnitude 0) skipped, else iq3_search.ts finds its scale and levels.
// d = max scale / 31, stored times 1.033; s = nearest_int(0.5 (scale / d - 1)) clamped to 0..15.
// As in llama.cpp, a skipped sub-block does not advance the qs and signs positions: the next
// sub-block's bytes move into its place (qh and scales stay indexed by sub-block), and the last
// places stay zero. Decoders then read those sub-blocks shifted; that is llama.cpp's output.
import { f16ToF32, f32ToF16, nearestInt } from '../common';
import { IQ3S_GRID } from './iq_grids';
import { IQ3S_LEVELS, iq3Quad, wideGrid } from './iq_lowbit';
import { sumSquares } from './iq4_common';
import { quantizeBlockRows } from './pack';
import { IQ3_LEVELS, IQ3_SIGNS, IQ3_WAUX, IQ3_WEIGHT, IQ3_XVAL, iq3GridIndex, iq3Map, iq3Prepare32, iq3Search32 } from './iq3_search';
import { cmax } from './iq2_search';

export const IQ3_S_BLOCK: i32 = 256;
export const IQ3_S_BYTES: i32 = 110;

export function iq3_s_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  const wide = wideGrid(IQ3S_GRID);
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 110;
    const d = f16ToF32(<u32>load<u16>(blk));
    for (let ib: usize = 0; ib < 8; ib++) {
      const sc = <u32>load<u8>(blk + 106 + (ib >> 1));
      const s: u32 = 1 + 2 * ((sc >> (<u32>(ib & 1) << 2)) & 15);
      const db = d * <f32>s;
      const qh = <u32>load<u8>(blk + 66 + ib);
      const y = dst + (b << 10) + (ib << 7);
      // Entry e of the 8 per 32 values takes bit e of qh as its ninth index bit.
      const q = blk + 2 + (ib << 3);
      const sg = blk + 74 + (ib << 2);
      iq3Quad(
        IQ3S_GRID, IQ3S_LEVELS, wide,
        <u32>load<u8>(q) | ((qh << 8) & 256), <u32>load<u8>(q, 1) | ((qh << 7) & 256),
        <u32>load<u8>(q, 2) | ((qh << 6) & 256), <u32>load<u8>(q, 3) | ((qh << 5) & 256),
        <u32>load<u16>(sg), db, y,
      );
      iq3Quad(
        IQ3S_GRID, IQ3S_LEVELS, wide,
        <u32>load<u8>(q, 4) | ((qh << 4) & 256), <u32>load<u8>(q, 5) | ((qh << 3) & 256),
        <u32>load<u8>(q, 6) | ((qh << 2) & 256), <u32>load<u8>(q, 7) | ((qh << 1) & 256),
        <u32>load<u16>(sg, 2), db, y + 64,
      );
    }
  }
}

const scales = memory.data(32, 16);

function quantizeSuperBlock(x: usize, qw: usize, y: usize): void {
  memory.fill(y, 0, 110);
  const map = iq3Map(true);
  const sigma2: f32 = (<f32>2 * sumSquares(x, 256)) / <f32>256;
  let maxScale: f32 = 0;
  let qs = y + 2;
  let sg = y + 74;
  for (let ib: usize = 0; ib < 8; ib++) {
    const xb = x + (ib << 7);
    // One sign bit per value (32 bits, value order).
    const amax = iq3Prepare32(xb, qw != 0 ? qw + (ib << 7) : 0, sigma2, false);
    let signs = load<u32>(IQ3_SIGNS);
    if (amax == 0) {
      store<f32>(scales + (ib << 2), 0);
      continue;
    }
    let scale = iq3Search32(true, IQ3_XVAL, IQ3_WEIGHT, IQ3_WAUX, amax, IQ3_LEVELS);
    if (scale < 0) {
      scale = -scale;
      signs = ~signs;
    }
    let qh: u32 = 0;
    for (let k: usize = 0; k < 8; k++) {
      const gi = iq3GridIndex(map, IQ3_LEVELS + (k << 2));
      store<u8>(qs + k, <u8>gi);
      qh |= (gi >> 8) << <u32>k;
    }
    store<u8>(y + 66 + ib, <u8>qh);
    qs += 8;
    store<u32>(sg, signs);
    sg += 4;
    store<f32>(scales + (ib << 2), scale);
    maxScale = cmax(maxScale, scale);
  }
  if (maxScale == 0) return;
  const d: f32 = maxScale / <f32>31;
  store<u16>(y, f32ToF16(d * <f32>1.033));
  const id: f32 = <f32>1 / d;
  for (let ib: usize = 0; ib < 8; ib += 2) {
    const l1 = min(15, max(0, nearestInt(<f32>0.5 * (id * load<f32>(scales + (ib << 2)) - <f32>1))));
    const l2 = min(15, max(0, nearestInt(<f32>0.5 * (id * load<f32>(scales + (ib << 2) + 4) - <f32>1))));
    store<u8>(y + 106 + (ib >> 1), <u8>(l1 | (l2 << 4)));
  }
}

export function iq3_s_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 110, quantizeSuperBlock);
}
