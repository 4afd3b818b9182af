// IQ1_M (ggml type 29): super-blocks of 256 values in 56 bytes (1.75 bpw).
// Layout: qs: u8[32] at 0, the low 8 bits of one grid index (IQ1S_GRID) per 8 values; qh: u8[16]
// at 32, per 16 values one byte: bits 0-2 / 4-6 the top bits of the two indices, bits 3 / 7 the
// signs of their offsets delta = +-1/8; scales: u16[4] at 48: the fp16 super-scale d in their top
// nibbles (word k holds bits 4k..4k+3), and per 16 values a 3-bit s (word ib/2, bits 6*(ib%2) +
// 0..2 and + 3..5 for the two halves of 32 values ib) giving d * (2s + 1).
import { f16ToF32, f32ToF16, nearestInt } from '../common';
import { IQ1S_GRID } from './iq_grids';
import { iq1Pair, wideGrid } from './iq_lowbit';
import { quantizeBlockRows } from './pack';
import { IQ1_XM, IQ1_XP, iq1GridIndex, iq1OnGrid, iq1SortOrder, iq1Tables, lanesUpTo, splitBeats } from './iq1_search';
import { codesKey, iqWeights } from './iq2_search';
import { sumSquares } from './iq4_common';

export const IQ1_M_BLOCK: i32 = 256;
export const IQ1_M_BYTES: i32 = 56;

export function iq1_m_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  const wide = wideGrid(IQ1S_GRID);
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 56;
    const s0 = <u32>load<u16>(blk, 48);
    const s1 = <u32>load<u16>(blk, 50);
    const s2 = <u32>load<u16>(blk, 52);
    const s3 = <u32>load<u16>(blk, 54);
    const d = f16ToF32((s0 >> 12) | ((s1 >> 8) & 0xf0) | ((s2 >> 4) & 0xf00) | (s3 & 0xf000));
    // Per 64 values one scale word: four 3-bit s, one per 16 values.
    for (let k: usize = 0; k < 4; k++) {
      const sc = <u32>load<u16>(blk + 48 + (k << 1));
      const q = blk + (k << 3);
      const h = blk + 32 + (k << 2);
      const y = dst + (b << 10) + (k << 8);
      sixteen(wide, q, <u32>load<u8>(h), scale(d, sc), y);
      sixteen(wide, q + 2, <u32>load<u8>(h, 1), scale(d, sc >> 3), y + 64);
      sixteen(wide, q + 4, <u32>load<u8>(h, 2), scale(d, sc >> 6), y + 128);
      sixteen(wide, q + 6, <u32>load<u8>(h, 3), scale(d, sc >> 9), y + 192);
    }
  }
}

// d * (2s + 1) of the 3-bit s in the low bits of sc.
@inline function scale(d: f32, sc: u32): f32 {
  const s: u32 = 2 * (sc & 7) + 1;
  return d * <f32>s;
}

// 16 values: the two entries whose index bytes are at q, with their qh byte h (top index bits and
// delta sign of the first entry in its low nibble, of the second in its high nibble).
@inline function sixteen(wide: usize, q: usize, h: u32, dl: f32, y: usize): void {
  const i0 = <u32>load<u8>(q) | ((h & 7) << 8);
  const i1 = <u32>load<u8>(q, 1) | ((h & 0x70) << 4);
  iq1Pair(IQ1S_GRID, wide, i0, i1, dl, h & 8 ? -0.125 : 0.125, h & 0x80 ? -0.125 : 0.125, y);
}

// ---- quantizer (llama.cpp quantize_row_iq1_m_impl) -----------------------------------------
// Per 16 values: weights w = qw*sqrt(sigma2 + x^2) (x^2 without importance), sigma2 =
// 2*sum(x^2)/256. As in IQ1_S the sorted values are split into three runs at i1 <= i2, but each
// half of 8 values takes its own offset: 4 sign pairs k (bit 1: first half -1/8, bit 0: second
// half -1/8). llama.cpp scores every split from prefix sums kept per half: with levels
// v0 = v2 - 2, v1 = v2 - 1 the half's sum of w*x*v is T*v2 - P(i1) - P(i2) (T its total, P the
// prefix sums of w*x), and its sum of w*v^2 is W*v2^2 + Q(i1)*(v0^2 - v1^2) + Q(i2)*(v1^2 - v2^2).
// (That is recent llama.cpp's form, the one bench/llamacpp.ts loads: older releases summed each
// split's terms directly, which rounds differently.)
// Groups go to the grid as in IQ1_S; the super-scale is then refitted over all 256 values with
// the 3-bit sub-scales (2l + 1) applied, and stored as fp16(d*1.1125) in the scales' top nibbles.
const weights = memory.data(1024, 16);
const keys = memory.data(64, 16);
const order = memory.data(64, 16);
// Prefix sums per half: [P0, P1, Q0, Q1], 17 floats each (and 3 that splitScores reads past Q1).
const prefix = memory.data(4 * 68 + 12, 16);
const codes = memory.data(16, 16);
const index = memory.data(4, 16);
const scales = memory.data(64, 16);
const shifts = memory.data(16, 16);
const MASKS = memory.data<u8>([0x00, 0x80, 0x08, 0x88]);

const IQ1M_EPS: f32 = 1e-7; // GROUP_MAX_EPS_IQ1_M

@inline function levelsOf(k: i32, half: i32): usize {
  return (half == 0 ? k < 2 : (k & 1) == 0) ? IQ1_XP : IQ1_XM;
}

// SIMD: the scores of the splits (i1, i2 .. i2 + 3) for every sign pair k, each lane computed
// with the scalar loop's operations (a1 = 4 * i1), stored as SCORES[k] (sqx) and SCORES[4 + k]
// (sq2); returns whether a lane up to split 16 passes the scalar test against `best`.
const SCORES = memory.data(128, 16);
@inline function splitScores(
  a1: usize, i2: i32, tx0: f32, tx1: f32, tw0: f32, tw1: f32, best: f32,
  p2: f32, m2: f32, cp1: f32, cm1: f32, cp2s: f32, cm2s: f32,
): bool {
  const P0 = prefix, P1 = prefix + 68, Q0 = prefix + 136, Q1 = prefix + 204;
  const a2 = <usize>i2 << 2;
  const cp2 = f32x4.splat(cp2s), cm2 = f32x4.splat(cm2s);
  const sx0 = f32x4.add(f32x4.splat(load<f32>(P0 + a1)), v128.load(P0 + a2));
  const sx1 = f32x4.add(f32x4.splat(load<f32>(P1 + a1)), v128.load(P1 + a2));
  const qxp0 = f32x4.sub(f32x4.splat(tx0 * p2), sx0), qxm0 = f32x4.sub(f32x4.splat(tx0 * m2), sx0);
  const qxp1 = f32x4.sub(f32x4.splat(tx1 * p2), sx1), qxm1 = f32x4.sub(f32x4.splat(tx1 * m2), sx1);
  const q0 = v128.load(Q0 + a2), q1 = v128.load(Q1 + a2);
  const q2p0 = f32x4.add(f32x4.splat(tw0 * p2 * p2 + load<f32>(Q0 + a1) * cp1), f32x4.mul(q0, cp2));
  const q2m0 = f32x4.add(f32x4.splat(tw0 * m2 * m2 + load<f32>(Q0 + a1) * cm1), f32x4.mul(q0, cm2));
  const q2p1 = f32x4.add(f32x4.splat(tw1 * p2 * p2 + load<f32>(Q1 + a1) * cp1), f32x4.mul(q1, cp2));
  const q2m1 = f32x4.add(f32x4.splat(tw1 * m2 * m2 + load<f32>(Q1 + a1) * cm1), f32x4.mul(q1, cm2));
  const vbest = f32x4.splat(best);
  const x0 = f32x4.add(qxp0, qxp1), x1 = f32x4.add(qxp0, qxm1), x2 = f32x4.add(qxm0, qxp1), x3 = f32x4.add(qxm0, qxm1);
  const s0 = f32x4.add(q2p0, q2p1), s1 = f32x4.add(q2p0, q2m1), s2 = f32x4.add(q2m0, q2p1), s3 = f32x4.add(q2m0, q2m1);
  let any = v128.or(splitBeats(x0, s0, vbest), splitBeats(x1, s1, vbest));
  any = v128.or(any, v128.or(splitBeats(x2, s2, vbest), splitBeats(x3, s3, vbest)));
  if (!v128.any_true(lanesUpTo(any, i2, 16))) return false;
  v128.store(SCORES, x0);
  v128.store(SCORES, x1, 16);
  v128.store(SCORES, x2, 32);
  v128.store(SCORES, x3, 48);
  v128.store(SCORES, s0, 64);
  v128.store(SCORES, s1, 80);
  v128.store(SCORES, s2, 96);
  v128.store(SCORES, s3, 112);
  return true;
}

// The search of one 16-value sub-block: writes its qs bytes and qh low bits; returns its scale
// (0: nothing written) and leaves the sign pair in `shifts`.
function subBlock(xb: usize, w: usize, ib: usize, y: usize): f32 {
  let max = Mathf.abs(load<f32>(xb));
  for (let i = 1; i < 16; i++) {
    const a = Mathf.abs(load<f32>(xb + (<usize>i << 2)));
    max = max > a ? max : a;
  }
  store<i8>(shifts + ib, 0);
  if (max < IQ1M_EPS) return 0;
  iq1SortOrder(xb, 16, keys, order);
  const P0 = prefix, P1 = prefix + 68, Q0 = prefix + 136, Q1 = prefix + 204;
  store<f32>(P0, 0);
  store<f32>(P1, 0);
  store<f32>(Q0, 0);
  store<f32>(Q1, 0);
  for (let j: usize = 0; j < 16; j++) {
    const i = <usize>load<i32>(order + (j << 2));
    const wi = load<f32>(w + (i << 2));
    const wx = wi * load<f32>(xb + (i << 2));
    const a = j << 2;
    const px = i < 8 ? P0 : P1, ox = i < 8 ? P1 : P0;
    const pw = i < 8 ? Q0 : Q1, ow = i < 8 ? Q1 : Q0;
    store<f32>(px + a + 4, load<f32>(px + a) + wx);
    store<f32>(ox + a + 4, load<f32>(ox + a));
    store<f32>(pw + a + 4, load<f32>(pw + a) + wi);
    store<f32>(ow + a + 4, load<f32>(ow + a));
  }
  const p0 = load<f32>(IQ1_XP), p1 = load<f32>(IQ1_XP, 4), p2 = load<f32>(IQ1_XP, 8);
  const m0 = load<f32>(IQ1_XM), m1 = load<f32>(IQ1_XM, 4), m2 = load<f32>(IQ1_XM, 8);
  const cp1 = p0 * p0 - p1 * p1, cp2 = p1 * p1 - p2 * p2;
  const cm1 = m0 * m0 - m1 * m1, cm2 = m1 * m1 - m2 * m2;
  const tx0 = load<f32>(P0, 64), tx1 = load<f32>(P1, 64);
  const tw0 = load<f32>(Q0, 64), tw1 = load<f32>(Q1, 64);
  let best: f32 = -F32.MAX_VALUE;
  let scale = max;
  let b1 = -1;
  let b2 = -1;
  let bestK = -1;
  if (ASC_FEATURE_SIMD) {
    // Four splits a step; a step with a passing lane is replayed from its stored scores, split by
    // split and k by k, against the best as the scalar loop has it then.
    for (let i1 = 0; i1 <= 16; i1++) {
      const a1 = <usize>i1 << 2;
      for (let i2 = i1; i2 <= 16; i2 += 4) {
        if (!splitScores(a1, i2, tx0, tx1, tw0, tw1, best, p2, m2, cp1, cm1, cp2, cm2)) continue;
        const last = i2 + 3 < 16 ? i2 + 3 : 16;
        for (let l = i2; l <= last; l++) {
          const at = SCORES + (<usize>(l - i2) << 2);
          for (let k = 0; k < 4; k++) {
            const sqx = load<f32>(at + (<usize>k << 4));
            const sq2 = load<f32>(at + (<usize>k << 4), 64);
            if (sq2 > 0 && sqx * sqx > best * sq2) {
              scale = sqx / sq2;
              best = scale * sqx;
              b1 = i1;
              b2 = l;
              bestK = k;
            }
          }
        }
      }
    }
  } else {
    for (let i1 = 0; i1 <= 16; i1++) {
      const a1 = <usize>i1 << 2;
      for (let i2 = i1; i2 <= 16; i2++) {
        const a2 = <usize>i2 << 2;
        const sx0 = load<f32>(P0 + a1) + load<f32>(P0 + a2);
        const sx1 = load<f32>(P1 + a1) + load<f32>(P1 + a2);
        const qxp0 = tx0 * p2 - sx0, qxm0 = tx0 * m2 - sx0;
        const qxp1 = tx1 * p2 - sx1, qxm1 = tx1 * m2 - sx1;
        const q2p0 = tw0 * p2 * p2 + load<f32>(Q0 + a1) * cp1 + load<f32>(Q0 + a2) * cp2;
        const q2m0 = tw0 * m2 * m2 + load<f32>(Q0 + a1) * cm1 + load<f32>(Q0 + a2) * cm2;
        const q2p1 = tw1 * p2 * p2 + load<f32>(Q1 + a1) * cp1 + load<f32>(Q1 + a2) * cp2;
        const q2m1 = tw1 * m2 * m2 + load<f32>(Q1 + a1) * cm1 + load<f32>(Q1 + a2) * cm2;
        for (let k = 0; k < 4; k++) {
          const sqx = ((k & 2) == 0 ? qxp0 : qxm0) + ((k & 1) == 0 ? qxp1 : qxm1);
          const sq2 = ((k & 2) == 0 ? q2p0 : q2m0) + ((k & 1) == 0 ? q2p1 : q2m1);
          if (sq2 > 0 && sqx * sqx > best * sq2) {
            scale = sqx / sq2;
            best = scale * sqx;
            b1 = i1;
            b2 = i2;
            bestK = k;
          }
        }
      }
    }
  }
  if (b1 < 0) return 0;
  for (let j = 0; j < 16; j++) {
    const l: u8 = j < b1 ? 0 : j < b2 ? 1 : 2;
    store<u8>(codes + <usize>load<i32>(order + (<usize>j << 2)), l);
  }
  if (scale < 0) {
    for (let j: usize = 0; j < 16; j++) store<u8>(codes + j, 2 - load<u8>(codes + j));
    scale = -scale;
    bestK = 3 - bestK;
  }
  let allOnGrid = true;
  for (let k: usize = 0; k < 2; k++) {
    const t = <u32>codesKey(codes + (k << 3));
    if (!iq1OnGrid(t)) allOnGrid = false;
    const gi = iq1GridIndex(t, xb + (k << 5), w + (k << 5), scale, levelsOf(bestK, <i32>k));
    store<u16>(index + (k << 1), <u16>gi);
  }
  if (!allOnGrid) {
    let sqx: f32 = 0;
    let sq2: f32 = 0;
    for (let k: usize = 0; k < 2; k++) {
      const xg = levelsOf(bestK, <i32>k);
      const g = <u32>load<u16>(IQ1S_GRID + (<usize>load<u16>(index + (k << 1)) << 1));
      for (let j: usize = 0; j < 8; j++) {
        const wj = load<f32>(w + (((k << 3) + j) << 2));
        const q = load<f32>(xg + (<usize>((g >> (<u32>j << 1)) & 3) << 2));
        sqx += wj * q * load<f32>(xb + (((k << 3) + j) << 2));
        sq2 += wj * q * q;
      }
    }
    if (sqx > 0 && sq2 > 0) scale = sqx / sq2;
  }
  const g0 = <u32>load<u16>(index);
  const g1 = <u32>load<u16>(index, 2);
  store<u8>(y + (ib << 1), <u8>g0);
  store<u8>(y + (ib << 1) + 1, <u8>g1);
  store<u8>(y + 32 + ib, <u8>((g0 >> 8) | ((g1 >> 8) << 4)));
  store<i8>(shifts + ib, <i8>bestK);
  return scale;
}

function quantizeSuperBlock(x: usize, qw: usize, y: usize): void {
  memory.fill(y, 0, 56);
  const sigma2: f32 = (2 * sumSquares(x, 256)) / 256;
  if (qw != 0) iqWeights(x, qw, sigma2, 256, weights, 0);
  else for (let i: usize = 0; i < 256; i++) store<f32>(weights + (i << 2), load<f32>(x + (i << 2)) * load<f32>(x + (i << 2)));
  let maxScale: f32 = 0;
  for (let ib: usize = 0; ib < 16; ib++) {
    const s = subBlock(x + (ib << 6), weights + (ib << 6), ib, y);
    store<f32>(scales + (ib << 2), s);
    maxScale = maxScale > s ? maxScale : s;
  }
  if (maxScale == 0) return;
  let d: f32 = maxScale / 15;
  const id: f32 = 1 / d;
  let sqx: f32 = 0;
  let sq2: f32 = 0;
  for (let ib: usize = 0; ib < 16; ib++) {
    let l = nearestInt(<f32>0.5 * (id * load<f32>(scales + (ib << 2)) - 1));
    l = max(0, min(7, l));
    const sc = y + 48 + ((ib >> 2) << 1);
    store<u16>(sc, load<u16>(sc) | <u16>(l << (3 * <i32>(ib & 3))));
    const k = <i32>load<i8>(shifts + ib);
    const h = <u32>load<u8>(y + 32 + ib) | <u32>load<u8>(MASKS + <usize>k);
    store<u8>(y + 32 + ib, <u8>h);
    const odd = 2 * l + 1;
    const ls = <f32>odd;
    for (let half: usize = 0; half < 2; half++) {
      const xg = levelsOf(k, <i32>half);
      const gi = <u32>load<u8>(y + (ib << 1) + half) | ((h << (8 - 4 * <u32>half)) & 0x700);
      const g = <u32>load<u16>(IQ1S_GRID + (<usize>gi << 1));
      const base = ((ib << 4) + (half << 3)) << 2;
      for (let j: usize = 0; j < 8; j++) {
        const wj = load<f32>(weights + base + (j << 2));
        const q = load<f32>(xg + (<usize>((g >> (<u32>j << 1)) & 3) << 2)) * ls;
        sqx += wj * q * load<f32>(x + base + (j << 2));
        sq2 += wj * q * q;
      }
    }
  }
  if (sq2 > 0) d = sqx / sq2;
  const s = <u32>f32ToF16(d * <f32>1.1125);
  for (let k: usize = 0; k < 4; k++) {
    const sc = y + 48 + (k << 1);
    store<u16>(sc, load<u16>(sc) | <u16>((s >> (4 * <u32>k) & 0xf) << 12));
  }
}

export function iq1_m_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  iq1Tables();
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 56, quantizeSuperBlock);
}
