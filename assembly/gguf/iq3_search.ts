// The grid search shared by the IQ3_XXS and IQ3_S quantizers (llama.cpp's quantize_row_iq3_xxs_impl
// and quantize_row_iq3_s_impl), with the same float operations in the same order.
//
// Both quantize 32 magnitudes (signs are stored apart) as scale * (2l + 1), l in 0..7, where each
// 4 consecutive levels must form an entry of the type's grid (256 entries for IQ3_XXS, 512 for
// IQ3_S; a grid entry packs its 4 levels 3 bits each, value 0 lowest, so it doubles as the key).
// A trial scale rounds every value to its nearest level; a 4-tuple that is no grid entry is
// replaced by the neighbour (from a precomputed list) closest in weighted squared error. Of the
// trial scales the one with the best weighted least-squares fit wins; tuples that were off the
// grid are then chosen again at that fit's scale, and the scale is refitted.
//
// Tables, built once on first use into static memory (llama.cpp's iq3xs_init_impl):
// - map: i16[4096], per 12-bit key the grid index, or -(o + 1) where o is the offset in the
//   neighbour table of that key's list;
// - neighbours: u16 lists, a count n then n grid indices: every grid entry whose squared distance
//   to the key's point is among the 2 (IQ3_XXS) or 3 (IQ3_S) smallest distinct distances, in
//   order of distance, then index (the order of llama.cpp's qsort of (distance, index) pairs).
//   All lists together hold exactly IQ3XXS_NEIGHBOURS / IQ3S_NEIGHBOURS u16 (3840 + 18985 and
//   3584 + 24733); the builder stops at that capacity, which it never reaches early.
import { nearestInt } from '../common';
import { foldMax, iq2Signs, laneBest, laneIndex, listWords, replayLanes, sqrtWeights } from './iq2_search';
import { imatrixWeights32, squareWeights32 } from './iq4_common';
import { IQ3S_GRID, IQ3XXS_GRID } from './iq_grids';

export const IQ3XXS_NEIGHBOURS: i32 = 22825;
export const IQ3S_NEIGHBOURS: i32 = 28317;

const XXS_MAP = memory.data(4096 * 2, 16);
const XXS_NB = memory.data(IQ3XXS_NEIGHBOURS * 2, 16);
const S_MAP = memory.data(4096 * 2, 16);
const S_NB = memory.data(IQ3S_NEIGHBOURS * 2, 16);
const DIST = memory.data(512 * 4, 16); // squared level distances of one key to every grid entry
let xxsBuilt = false;
let sBuilt = false;

// Per 32 values: the trial's levels, and per 4-tuple whether it was on the grid (best, trial).
const LAUX = memory.data(32, 16);
const ON_GRID = memory.data(8, 16);
const ON_GRID_AUX = memory.data(8, 16);

// Distances are compared in level units: (2a+1 - (2b+1))^2 = 4 (a-b)^2 keeps llama.cpp's order.
function buildTables(grid: usize, size: i32, nwant: i32, map: usize, nb: usize, cap: i32): void {
  for (let i = 0; i < 4096; i++) store<i16>(map + (<usize>i << 1), -1);
  for (let j = 0; j < size; j++) store<i16>(map + (<usize>load<u16>(grid + (<usize>j << 1)) << 1), <i16>j);
  let at = 0;
  for (let key = 0; key < 4096; key++) {
    if (load<i16>(map + (<usize>key << 1)) >= 0) continue;
    for (let j = 0; j < size; j++) {
      const g = <i32>load<u16>(grid + (<usize>j << 1));
      let d2 = 0;
      for (let k = 0; k < 12; k += 3) {
        const diff = ((g >> k) & 7) - ((key >> k) & 7);
        d2 += diff * diff;
      }
      store<i32>(DIST + (<usize>j << 2), d2);
    }
    // The nwant smallest distinct distances (all distances are < 1000).
    let limit = -1;
    for (let h = 0; h < nwant; h++) {
      let next = 1 << 30;
      for (let j = 0; j < size; j++) {
        const d = load<i32>(DIST + (<usize>j << 2));
        if (d > limit && d < next) next = d;
      }
      if (next == 1 << 30) break;
      limit = next;
    }
    let n = 0;
    for (let j = 0; j < size; j++) if (load<i32>(DIST + (<usize>j << 2)) <= limit) n++;
    if (at + 1 + n > cap) return;
    store<i16>(map + (<usize>key << 1), <i16>(-(at + 1)));
    store<u16>(nb + (<usize>at << 1), <u16>n);
    let o = at + 1;
    // Emitted by distance, then index.
    let level = -1;
    while (o < at + 1 + n) {
      let next = 1 << 30;
      for (let j = 0; j < size; j++) {
        const d = load<i32>(DIST + (<usize>j << 2));
        if (d > level && d < next) next = d;
      }
      level = next;
      for (let j = 0; j < size; j++) {
        if (load<i32>(DIST + (<usize>j << 2)) == level) {
          store<u16>(nb + (<usize>o << 1), <u16>j);
          o++;
        }
      }
    }
    at = o;
  }
}

// The tables of IQ3_XXS (grid512 false) or IQ3_S: builds them on first use; returns the map
// (the neighbour table is iq3Neighbours(grid512)).
export function iq3Map(grid512: bool): usize {
  if (grid512) {
    if (!sBuilt) {
      buildTables(IQ3S_GRID, 512, 3, S_MAP, S_NB, IQ3S_NEIGHBOURS);
      sBuilt = true;
    }
    return S_MAP;
  }
  if (!xxsBuilt) {
    buildTables(IQ3XXS_GRID, 256, 2, XXS_MAP, XXS_NB, IQ3XXS_NEIGHBOURS);
    xxsBuilt = true;
  }
  return XXS_MAP;
}

@inline export function iq3Neighbours(grid512: bool): usize {
  return grid512 ? S_NB : XXS_NB;
}

// The 12-bit key of the 4 levels (bytes) at L.
@inline export function iq3Key(L: usize): u32 {
  return <u32>load<u8>(L) | (<u32>load<u8>(L + 1) << 3) | (<u32>load<u8>(L + 2) << 6) | (<u32>load<u8>(L + 3) << 9);
}

// Levels of 4 values at id * x: nearest_int(0.5 (id x - 1)) clamped to 0..7, stored at L; the key.
@inline function roundFour(x: usize, id: f32, L: usize): u32 {
  let u: u32 = 0;
  for (let i: usize = 0; i < 4; i++) {
    const l = min(7, max(0, nearestInt(<f32>0.5 * (id * load<f32>(x + (i << 2)) - <f32>1))));
    store<u8>(L + i, <u8>l);
    u |= <u32>l << (3 * <u32>i);
  }
  return u;
}

// iq3_find_best_neighbour: of the neighbours listed at `list`, the grid entry with the smallest
// sum of w * (scale q - x)^2 (first of equals); its levels go to L. llama.cpp aborts when none is
// below FLT_MAX (infinite or NaN weights); the first neighbour stands in for that here.
function bestNeighbour(grid: usize, list: usize, x: usize, w: usize, scale: f32, L: usize): u32 {
  const n = <usize>load<u16>(list);
  let best: f32 = f32.MAX_VALUE;
  let found = <u32>load<u16>(list + 2);
  let j: usize = 1;
  if (ASC_FEATURE_SIMD) {
    // Four list entries a step, one per lane, as iq2_search.ts' iq2BestNeighbour.
    const vs = f32x4.splat(scale);
    for (; j <= n; j += 4) {
      const e = list + (j << 1);
      const g = listWords(grid, e, <i32>(n - j));
      // q = 2l + 1 of field i: ((g >> (3i - 1)) & 14) | 1 (field 0: (g << 1) & 14).
      const mask = i32x4.splat(14);
      const one = i32x4.splat(1);
      let d2 = f32x4.splat(0);
      d2 = term(d2, v128.or(v128.and(i32x4.shl(g, 1), mask), one), vs, x, w, 0);
      d2 = term(d2, v128.or(v128.and(i32x4.shr_u(g, 2), mask), one), vs, x, w, 4);
      d2 = term(d2, v128.or(v128.and(i32x4.shr_u(g, 5), mask), one), vs, x, w, 8);
      d2 = term(d2, v128.or(v128.and(i32x4.shr_u(g, 8), mask), one), vs, x, w, 12);
      if (!v128.any_true(f32x4.lt(d2, f32x4.splat(best)))) continue;
      replayLanes(d2, e, best, <i32>found);
      best = laneBest;
      found = <u32>laneIndex;
    }
  }
  for (; j <= n; j++) {
    const idx = <u32>load<u16>(list + (j << 1));
    const g = <u32>load<u16>(grid + (<usize>idx << 1));
    let d2: f32 = 0;
    for (let i: usize = 0; i < 4; i++) {
      const q = <f32>(<i32>(((g >> (3 * <u32>i)) & 7) << 1) + 1);
      const diff = scale * q - load<f32>(x + (i << 2));
      d2 += load<f32>(w + (i << 2)) * diff * diff;
    }
    if (d2 < best) {
      best = d2;
      found = idx;
    }
  }
  const g = <u32>load<u16>(grid + (<usize>found << 1));
  for (let i: usize = 0; i < 4; i++) store<u8>(L + i, <u8>((g >> (3 * <u32>i)) & 7));
  return found;
}

// d2 + w_i * diff * diff per lane, diff = scale * q - x_i (q: integer levels 2l + 1 of field i, i = at / 4).
@inline function term(d2: v128, q: v128, vs: v128, x: usize, w: usize, at: usize): v128 {
  const diff = f32x4.sub(f32x4.mul(vs, f32x4.convert_i32x4_s(q)), v128.load32_splat(x + at));
  return f32x4.add(d2, f32x4.mul(f32x4.mul(v128.load32_splat(w + at), diff), diff));
}

// Weighted fit of the 32 levels at L: sumqx = sum w x q, sumq2 = sum w q q, q = 2l + 1, left to
// right; returned through FIT.
const FIT = memory.data(8, 8);
function fit32(x: usize, w: usize, L: usize): void {
  let sumqx: f32 = 0;
  let sumq2: f32 = 0;
  for (let i: usize = 0; i < 32; i++) {
    const wi = load<f32>(w + (i << 2));
    const q = <f32>((<i32>load<u8>(L + i) << 1) + 1);
    sumqx += wi * load<f32>(x + (i << 2)) * q;
    sumq2 += wi * q * q;
  }
  store<f32>(FIT, sumqx);
  store<f32>(FIT, sumq2, 4);
}

// The 32 values of the sub-block being quantized: weights, their square roots, magnitudes, levels
// (L of iq3Search32) and sign bytes (iq2Signs: four groups of 8).
export const IQ3_WEIGHT = memory.data(128, 16);
export const IQ3_WAUX = memory.data(128, 16);
export const IQ3_XVAL = memory.data(128, 16);
export const IQ3_LEVELS = memory.data(32, 16);
export const IQ3_SIGNS = memory.data(4, 16);

/**
 * Both quantizers' first steps on the 32 values at xb (importances at qb, or 0 for x^2 weights):
 * IQ3_WEIGHT, IQ3_WAUX, the magnitudes IQ3_XVAL and the sign bytes IQ3_SIGNS (7 bits per 8
 * values made even for IQ3_XXS, 8 for IQ3_S), IQ3_LEVELS zeroed; returns the largest magnitude
 * (C's MAX fold).
 */
export function iq3Prepare32(xb: usize, qb: usize, sigma2: f32, even: bool): f32 {
  if (qb != 0) imatrixWeights32(xb, qb, sigma2, IQ3_WEIGHT);
  else squareWeights32(xb, IQ3_WEIGHT);
  sqrtWeights(IQ3_WEIGHT, 32, IQ3_WAUX);
  iq2Signs(xb, IQ3_WEIGHT, IQ3_XVAL, IQ3_SIGNS, 4, even);
  memory.fill(IQ3_LEVELS, 0, 32);
  return foldMax(IQ3_XVAL, 32);
}

/**
 * The scale and levels (bytes at L) of 32 magnitudes x (max: their maximum, > 0) with weights w
 * and neighbour weights waux = sqrt(w). IQ3_XXS (grid512 false): trial ids (15 + 0.2 is) / max for
 * is in -15..15, only the tuples that were off the grid are chosen again; IQ3_S: is in -9..9, all
 * tuples chosen again. L keeps its contents (the caller zeroes it, as llama.cpp does) where no
 * trial fits (all weights zero) and IQ3_XXS has no tuple to choose again.
 */
export function iq3Search32(grid512: bool, x: usize, w: usize, waux: usize, max: f32, L: usize): f32 {
  const grid = grid512 ? IQ3S_GRID : IQ3XXS_GRID;
  const map = iq3Map(grid512);
  const nb = iq3Neighbours(grid512);
  const steps = grid512 ? 9 : 15;
  let best: f32 = 0;
  let scale: f32 = max / <f32>15;
  memory.fill(ON_GRID, grid512 ? 0 : 1, 8);
  for (let is = -steps; is <= steps; is++) {
    const id: f32 = (<f32>15 + <f32>is * <f32>0.2) / max;
    const thisScale: f32 = <f32>1 / id;
    for (let k: usize = 0; k < 8; k++) {
      const u = roundFour(x + (k << 4), id, LAUX + (k << 2));
      const gi = <i32>load<i16>(map + (<usize>u << 1));
      store<u8>(ON_GRID_AUX + k, gi >= 0 ? 1 : 0);
      if (gi < 0) bestNeighbour(grid, nb + (<usize>(-gi - 1) << 1), x + (k << 4), waux + (k << 4), thisScale, LAUX + (k << 2));
    }
    fit32(x, w, LAUX);
    const sumqx = load<f32>(FIT);
    const sumq2 = load<f32>(FIT, 4);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      memory.copy(L, LAUX, 32);
      memory.copy(ON_GRID, ON_GRID_AUX, 8);
    }
  }
  let offGrid = 0;
  for (let k: usize = 0; k < 8; k++) if (load<u8>(ON_GRID + k) == 0) offGrid++;
  if (offGrid > 0 && scale > 0) {
    const id: f32 = <f32>1 / scale;
    for (let k: usize = 0; k < 8; k++) {
      if (!grid512 && load<u8>(ON_GRID + k) != 0) continue;
      const Lk = L + (k << 2);
      const u = roundFour(x + (k << 4), id, Lk);
      const gi = <i32>load<i16>(map + (<usize>u << 1));
      // On the grid the rounded levels are the entry's levels already.
      if (gi < 0) bestNeighbour(grid, nb + (<usize>(-gi - 1) << 1), x + (k << 4), waux + (k << 4), scale, Lk);
    }
    fit32(x, w, L);
    const sumqx = load<f32>(FIT);
    const sumq2 = load<f32>(FIT, 4);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  return scale;
}

// Grid index of the 4 levels at L (always on the grid after iq3Search32; 0 otherwise, where
// llama.cpp aborts).
@inline export function iq3GridIndex(map: usize, L: usize): u32 {
  const gi = <i32>load<i16>(map + (<usize>iq3Key(L) << 1));
  return gi >= 0 ? <u32>gi : 0;
}
