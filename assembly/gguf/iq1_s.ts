// IQ1_S (ggml type 19): super-blocks of 256 values in 50 bytes (1.5625 bpw).
// Layout: d: fp16 at 0; qs: u8[32] at 2, the low 8 bits of one grid index (IQ1S_GRID, 11 bits) per
// 8 values; qh: u16[8] at 34, per 32 values: bits 3l..3l+2 the top bits of its l-th index, bits
// 12-14 s giving the scale d * (2s + 1), bit 15 the sign of the offset delta = +-1/8.
// Value = scale * (grid value + delta).
import { A_IMATRIX, argU32, f16ToF32, f32ToF16, nearestInt } from '../common';
import { IQ1S_GRID } from './iq_grids';
import { iq1Pair, wideGrid } from './iq_lowbit';
import { quantizeBlockRows } from './pack';
import { IQ1_XM, IQ1_XP, iq1GridIndex, iq1OnGrid, iq1SortOrder, iq1Tables, lanesUpTo, splitBeats } from './iq1_search';
import { codesKey, iqWeights } from './iq2_search';
import { sumSquares } from './iq4_common';

export const IQ1_S_BLOCK: i32 = 256;
export const IQ1_S_BYTES: i32 = 50;

export function iq1_s_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  const wide = wideGrid(IQ1S_GRID);
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 50;
    const d = f16ToF32(<u32>load<u16>(blk));
    for (let ib: usize = 0; ib < 8; ib++) {
      const qh = <u32>load<u16>(blk + 34 + (ib << 1));
      const s: u32 = 2 * ((qh >> 12) & 7) + 1;
      const dl = d * <f32>s;
      const delta: f32 = qh & 0x8000 ? -0.125 : 0.125;
      const y = dst + (b << 10) + (ib << 7);
      // Entry l of the four per 32 values takes bits 3l..3l + 2 of qh as its top index bits.
      const q = blk + 2 + (ib << 2);
      const i0 = <u32>load<u8>(q) | ((qh & 7) << 8);
      const i1 = <u32>load<u8>(q, 1) | ((qh & 0x38) << 5);
      const i2 = <u32>load<u8>(q, 2) | ((qh & 0x1c0) << 2);
      const i3 = <u32>load<u8>(q, 3) | ((qh & 0xe00) >> 1);
      iq1Pair(IQ1S_GRID, wide, i0, i1, dl, delta, delta, y);
      iq1Pair(IQ1S_GRID, wide, i2, i3, dl, delta, delta, y + 64);
    }
  }
}

// ---- quantizer (llama.cpp quantize_row_iq1_s_impl; importance required, as there) ----------
// Per 32 values: weights w = qw*sqrt(sigma2 + x^2), sigma2 = 2*sum(x^2)/256 over the
// super-block. Sorting the 32 values splits them into three runs (levels -1, 0, 1 at the
// boundaries i1 <= i2); every split is scored with both offsets (+-1/8) from prefix sums of
// w*x and w, keeping the best scale sumqx/sumq2 by sumqx^2/sumq2. Each group of 8 codes then
// goes to the grid (kmap, else the closest of its neighbours by the weighted distance), the
// scale is refitted when a group moved, and the super-scale is d = max_scale/15 stored as
// d*1.125 with 3-bit sub-scales nearest_int((scale/d - 1)/2).
const weight = memory.data(128, 16);
const keys = memory.data(128, 16);
const order = memory.data(128, 16);
const sumx = memory.data(144, 16); // 33 prefix sums and 3 that anyBeats reads past them
const sumw = memory.data(144, 16);
const codes = memory.data(32, 16);
const index = memory.data(8, 16);
const scales = memory.data(32, 16);
const shifts = memory.data(8, 16);

const IQ1S_EPS: f32 = 1e-12; // GROUP_MAX_EPS_IQ1_S

// SIMD: whether any of the splits (i1, i2 .. min(i2 + 3, 32)) passes the scalar loop's test with
// either offset, each lane computing its scores with the scalar loop's operations.
@inline function anyBeats(
  i2: i32, sx0: f32, sx1: f32, sxn: f32, sw0: f32, sw1: f32, swn: f32, best: f32,
  p0: f32, p1: f32, p2: f32, m0: f32, m1: f32, m2: f32,
): bool {
  const sx2 = v128.load(sumx + (<usize>i2 << 2));
  const sw2 = v128.load(sumw + (<usize>i2 << 2));
  const xb2 = f32x4.sub(sx2, f32x4.splat(sx1)), xc = f32x4.sub(f32x4.splat(sxn), sx2);
  const wb = f32x4.sub(sw2, f32x4.splat(sw1)), wc = f32x4.sub(f32x4.splat(swn), sw2);
  const xa: f32 = sx1 - sx0, wa: f32 = sw1 - sw0;
  const vbest = f32x4.splat(best);
  const any = v128.or(beats(xa, xb2, xc, wa, wb, wc, p0, p1, p2, vbest), beats(xa, xb2, xc, wa, wb, wc, m0, m1, m2, vbest));
  return v128.any_true(lanesUpTo(any, i2, 32));
}

// Lanes where the split's scores at levels v0, v1, v2 pass the test (splitBeats).
@inline function beats(xa: f32, xb2: v128, xc: v128, wa: f32, wb: v128, wc: v128, v0: f32, v1: f32, v2: f32, vbest: v128): v128 {
  const sqx = f32x4.add(f32x4.add(f32x4.splat(xa * v0), f32x4.mul(xb2, f32x4.splat(v1))), f32x4.mul(xc, f32x4.splat(v2)));
  const sq2 = f32x4.add(
    f32x4.add(f32x4.splat(wa * v0 * v0), f32x4.mul(f32x4.mul(wb, f32x4.splat(v1)), f32x4.splat(v1))),
    f32x4.mul(f32x4.mul(wc, f32x4.splat(v2)), f32x4.splat(v2)),
  );
  return splitBeats(sqx, sq2, vbest);
}

// The search of one 32-value sub-block: writes its qs bytes and qh bits 0..11 at y and
// returns its scale (0: nothing written), the shift (+1 / -1) in `shifts`.
function subBlock(xb: usize, ib: usize, y: usize): f32 {
  let max = Mathf.abs(load<f32>(xb));
  for (let i = 1; i < 32; i++) {
    const a = Mathf.abs(load<f32>(xb + (<usize>i << 2)));
    max = max > a ? max : a;
  }
  store<i8>(shifts + ib, 1);
  if (max < IQ1S_EPS) return 0;
  iq1SortOrder(xb, 32, keys, order);
  store<f32>(sumx, 0);
  store<f32>(sumw, 0);
  for (let j = 0; j < 32; j++) {
    const i = <usize>load<i32>(order + (<usize>j << 2)) << 2;
    const wi = load<f32>(weight + i);
    store<f32>(sumx + (<usize>(j + 1) << 2), load<f32>(sumx + (<usize>j << 2)) + wi * load<f32>(xb + i));
    store<f32>(sumw + (<usize>(j + 1) << 2), load<f32>(sumw + (<usize>j << 2)) + wi);
  }
  const p0 = load<f32>(IQ1_XP), p1 = load<f32>(IQ1_XP, 4), p2 = load<f32>(IQ1_XP, 8);
  const m0 = load<f32>(IQ1_XM), m1 = load<f32>(IQ1_XM, 4), m2 = load<f32>(IQ1_XM, 8);
  const sx0 = load<f32>(sumx);
  const sw0 = load<f32>(sumw);
  const sxn = load<f32>(sumx, 128);
  const swn = load<f32>(sumw, 128);
  let best: f32 = -F32.MAX_VALUE;
  let scale = max;
  let b1 = -1;
  let b2 = -1;
  let shift = 0;
  for (let i1 = 0; i1 <= 32; i1++) {
    const sx1 = load<f32>(sumx + (<usize>i1 << 2));
    const sw1 = load<f32>(sumw + (<usize>i1 << 2));
    for (let i2 = i1; i2 <= 32; i2++) {
      if (ASC_FEATURE_SIMD) {
        // Skip steps of four splits none of which passes the test below against the current
        // best (then none would change anything); the others run the scalar code.
        if (((i2 - i1) & 3) == 0) {
          while (i2 <= 32 && !anyBeats(i2, sx0, sx1, sxn, sw0, sw1, swn, best, p0, p1, p2, m0, m1, m2)) i2 += 4;
          if (i2 > 32) break;
        }
      }
      const sx2 = load<f32>(sumx + (<usize>i2 << 2));
      const sw2 = load<f32>(sumw + (<usize>i2 << 2));
      const xa = sx1 - sx0, xb2 = sx2 - sx1, xc = sxn - sx2;
      const wa = sw1 - sw0, wb = sw2 - sw1, wc = swn - sw2;
      let sqx = xa * p0 + xb2 * p1 + xc * p2;
      let sq2 = wa * p0 * p0 + wb * p1 * p1 + wc * p2 * p2;
      if (sq2 > 0 && sqx * sqx > best * sq2) {
        scale = sqx / sq2;
        best = scale * sqx;
        b1 = i1;
        b2 = i2;
        shift = 1;
      }
      sqx = xa * m0 + xb2 * m1 + xc * m2;
      sq2 = wa * m0 * m0 + wb * m1 * m1 + wc * m2 * m2;
      if (sq2 > 0 && sqx * sqx > best * sq2) {
        scale = sqx / sq2;
        best = scale * sqx;
        b1 = i1;
        b2 = i2;
        shift = -1;
      }
    }
  }
  if (b1 < 0) return 0;
  for (let j = 0; j < 32; j++) {
    const l: u8 = j < b1 ? 0 : j < b2 ? 1 : 2;
    store<u8>(codes + <usize>load<i32>(order + (<usize>j << 2)), l);
  }
  if (scale < 0) {
    for (let j: usize = 0; j < 32; j++) store<u8>(codes + j, 2 - load<u8>(codes + j));
    scale = -scale;
    shift = -shift;
  }
  const xg = shift == 1 ? IQ1_XP : IQ1_XM;
  let allOnGrid = true;
  for (let k: usize = 0; k < 4; k++) {
    const t = <u32>codesKey(codes + (k << 3));
    if (!iq1OnGrid(t)) allOnGrid = false;
    const gi = iq1GridIndex(t, xb + (k << 5), weight + (k << 5), scale, xg);
    store<u16>(index + (k << 1), <u16>gi);
  }
  if (!allOnGrid) {
    let sqx: f32 = 0;
    let sq2: f32 = 0;
    for (let k: usize = 0; k < 4; k++) {
      const g = <u32>load<u16>(IQ1S_GRID + (<usize>load<u16>(index + (k << 1)) << 1));
      for (let j: usize = 0; j < 8; j++) {
        const w = load<f32>(weight + (((k << 3) + j) << 2));
        const q = load<f32>(xg + (<usize>((g >> (<u32>j << 1)) & 3) << 2));
        sqx += w * q * load<f32>(xb + (((k << 3) + j) << 2));
        sq2 += w * q * q;
      }
    }
    if (sqx > 0 && sq2 > 0) scale = sqx / sq2;
  }
  let h: u32 = 0;
  for (let k: usize = 0; k < 4; k++) {
    const gi = <u32>load<u16>(index + (k << 1));
    store<u8>(y + 2 + (ib << 2) + k, <u8>gi);
    h |= (gi >> 8) << (3 * <u32>k);
  }
  store<u16>(y + 34 + (ib << 1), <u16>h);
  store<i8>(shifts + ib, <i8>shift);
  return scale;
}

function quantizeSuperBlock(x: usize, qw: usize, y: usize): void {
  memory.fill(y, 0, 50);
  const sigma2: f32 = (2 * sumSquares(x, 256)) / 256;
  let maxScale: f32 = 0;
  for (let ib: usize = 0; ib < 8; ib++) {
    const xb = x + (ib << 7);
    const q = qw + (ib << 7);
    iqWeights(xb, q, sigma2, 32, weight, 0);
    const s = subBlock(xb, ib, y);
    store<f32>(scales + (ib << 2), s);
    maxScale = maxScale > s ? maxScale : s;
  }
  if (maxScale == 0) return;
  const d: f32 = maxScale / 15;
  store<u16>(y, f32ToF16(d * <f32>1.125));
  const id: f32 = 1 / d;
  for (let ib: usize = 0; ib < 8; ib++) {
    let l = nearestInt(<f32>0.5 * (id * load<f32>(scales + (ib << 2)) - 1));
    l = max(0, min(7, l));
    if (load<i8>(shifts + ib) == -1) l |= 8;
    const p = y + 34 + (ib << 1);
    store<u16>(p, load<u16>(p) | <u16>(l << 12));
  }
}

// llama.cpp asserts an importance vector for IQ1_S (the host refuses calls without one): trap.
export function iq1_s_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  if (argU32(args, A_IMATRIX) == 0) unreachable();
  iq1Tables();
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 50, quantizeSuperBlock);
}
