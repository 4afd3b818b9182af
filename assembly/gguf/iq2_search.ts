// Search tables and shared steps of llama.cpp's grid quantizers for 8-value vectors with levels
// 0..2 (IQ2_XXS / IQ2_XS / IQ2_S; IQ1_S / IQ1_M use the same tables for their 2048-entry grid).
//
// A block of 8 codes l_i in 0..2 is named here by its key sum(l_i * 3^i) (3^8 = 6561 keys); llama.cpp
// names it by the 16-bit word with l_i in bits 2i..2i+1 (kmap, 43692 entries), which holds the
// same information for every word its quantizers look up. For each grid (the packed u16 grids of
// iq_grids.ts), built once on first use into static memory:
// - map: i32 per key, the grid index when the codes are a grid entry, else -(offset + 1) of the
//   key's neighbour list;
// - neighbours: u16 lists [n, j_1 .. j_n]: the grid entries at the `nwant` smallest distinct squared
//   distances from the codes (nwant = 2 for the 256 / 512 grids, 1 for 1024, 3 for IQ1's 2048),
//   by distance then index: the order llama.cpp's qsort of (distance, index) pairs gives, and on
//   which the first-strict-minimum choice of iq2BestNeighbour depends.
// llama.cpp builds lists for all 43692 words, also those with a field of 3 that no quantizer looks
// up; only the 3^8 reachable keys are built here (the list contents do not depend on the others).
import { GROUP_MAX_EPS, nearestInt } from '../common';
import { IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID } from './iq_grids';

const KEYS: i32 = 6561;

// u16 words of the neighbour lists (a count and the entries, per key not on the grid), as the
// builder below produces them; it checks these sizes (unreachable otherwise).
const NB_WORDS_256: i32 = 119462; //  6305 keys off the grid
const NB_WORDS_512: i32 = 187770; //  6049
const NB_WORDS_1024: i32 = 50253; //  5537
const NB_WORDS_2048: i32 = 332234; // 4513

const MAP_256 = memory.data(KEYS * 4, 16);
const MAP_512 = memory.data(KEYS * 4, 16);
const MAP_1024 = memory.data(KEYS * 4, 16);
const MAP_2048 = memory.data(KEYS * 4, 16);
const NB_256 = memory.data(NB_WORDS_256 * 2, 16);
const NB_512 = memory.data(NB_WORDS_512 * 2, 16);
const NB_1024 = memory.data(NB_WORDS_1024 * 2, 16);
const NB_2048 = memory.data(NB_WORDS_2048 * 2, 16);

// Per grid (256, 512, 1024, 2048): grid, map, neighbours (u32 addresses), built flag.
const HEADERS = memory.data(64, 16);
// Builder scratch: squared distance per grid entry; per field pair, the distance of each of its 16
// values from the key's pair.
const DIST = memory.data(2048 * 2, 16);
const PAIR_COST = memory.data(4 * 16, 16);

// Grid levels 0..3 as llama.cpp's grid bytes 2l+1 (its neighbour distances use those).
const LEVEL_Q = memory.data<f32>([1, 3, 5, 7]);

function buildTables(grid: usize, n: i32, nwant: i32, map: usize, nb: usize, words: i32): void {
  memory.fill(map, 0xff, <usize>KEYS << 2);
  for (let j = 0; j < n; j++) {
    const w = <u32>load<u16>(grid + (<usize>j << 1));
    let key: u32 = 0;
    for (let i = 7; i >= 0; i--) key = key * 3 + ((w >> (<u32>i << 1)) & 3);
    store<i32>(map + (<usize>key << 2), j);
  }
  let counter = 0;
  for (let key = 0; key < KEYS; key++) {
    if (load<i32>(map + (<usize>key << 2)) >= 0) continue;
    // Costs of the 16 values of each field pair: (g - l)^2 summed over the pair, in level units
    // (llama.cpp's distances are 4x these: the same order).
    let rest = key;
    for (let p = 0; p < 4; p++) {
      const l0 = rest % 3;
      const l1 = (rest / 3) % 3;
      rest /= 9;
      for (let v = 0; v < 16; v++) {
        const a = (v & 3) - l0;
        const b = (v >> 2) - l1;
        store<u8>(PAIR_COST + <usize>(p * 16 + v), <u8>(a * a + b * b));
      }
    }
    // The nwant smallest distinct distances, ascending (at most 3).
    let m0: u32 = 0xffff, m1: u32 = 0xffff, m2: u32 = 0xffff;
    for (let j = 0; j < n; j++) {
      const w = <u32>load<u16>(grid + (<usize>j << 1));
      const d = <u32>load<u8>(PAIR_COST + (w & 15)) + <u32>load<u8>(PAIR_COST + 16 + ((w >> 4) & 15))
        + <u32>load<u8>(PAIR_COST + 32 + ((w >> 8) & 15)) + <u32>load<u8>(PAIR_COST + 48 + (w >> 12));
      store<u16>(DIST + (<usize>j << 1), <u16>d);
      if (d == m0 || d == m1 || d == m2) continue;
      if (d < m0) { m2 = m1; m1 = m0; m0 = d; } else if (d < m1) { m2 = m1; m1 = d; } else if (d < m2) m2 = d;
    }
    const start = counter++;
    for (let t = 0; t < nwant; t++) {
      const v = t == 0 ? m0 : t == 1 ? m1 : m2;
      if (v == 0xffff) break;
      for (let j = 0; j < n; j++) {
        if (<u32>load<u16>(DIST + (<usize>j << 1)) == v) {
          store<u16>(nb + (<usize>counter << 1), <u16>j);
          counter++;
        }
      }
    }
    store<u16>(nb + (<usize>start << 1), <u16>(counter - start - 1));
    store<i32>(map + (<usize>key << 2), -(start + 1));
  }
  if (counter != words) unreachable();
}

/**
 * The tables of the grid with `gridSize` entries (256: IQ2_XXS, 512: IQ2_XS, 1024: IQ2_S,
 * 2048: IQ1_S / IQ1_M), built on the first call: the address of a header holding the packed grid,
 * the map and the neighbour lists (read them with tabGrid / tabMap / tabNeighbours).
 */
export function iq2Tables(gridSize: i32): usize {
  const slot: usize = gridSize == 256 ? 0 : gridSize == 512 ? 1 : gridSize == 1024 ? 2 : 3;
  const h = HEADERS + (slot << 4);
  if (load<u32>(h, 12) != 0) return h;
  let grid: usize, map: usize, nb: usize, nwant: i32, words: i32;
  if (slot == 0) { grid = IQ2XXS_GRID; map = MAP_256; nb = NB_256; nwant = 2; words = NB_WORDS_256; }
  else if (slot == 1) { grid = IQ2XS_GRID; map = MAP_512; nb = NB_512; nwant = 2; words = NB_WORDS_512; }
  else if (slot == 2) { grid = IQ2S_GRID; map = MAP_1024; nb = NB_1024; nwant = 1; words = NB_WORDS_1024; }
  else { grid = IQ1S_GRID; map = MAP_2048; nb = NB_2048; nwant = 3; words = NB_WORDS_2048; }
  buildTables(grid, 256 << <i32>slot, nwant, map, nb, words);
  store<u32>(h, <u32>grid, 0);
  store<u32>(h, <u32>map, 4);
  store<u32>(h, <u32>nb, 8);
  store<u32>(h, 1, 12);
  return h;
}

@inline export function tabGrid(t: usize): usize { return <usize>load<u32>(t, 0); }
@inline export function tabMap(t: usize): usize { return <usize>load<u32>(t, 4); }
@inline export function tabNeighbours(t: usize): usize { return <usize>load<u32>(t, 8); }

/** Map entry of `key`: its grid index (>= 0) or -(offset + 1) of its neighbour list. */
@inline export function iq2MapEntry(t: usize, key: i32): i32 {
  return load<i32>(tabMap(t) + (<usize>key << 2));
}

/**
 * Trial codes of 8 magnitudes at inverse scale id: l = clamp(nearest_int(0.5*(id*x - 1)), 0, 2)
 * (the odd levels 2l+1 nearest to id*x), stored as bytes at L; returns their key.
 */
@inline export function iq2Round8(xval: usize, id: f32, L: usize): i32 {
  let key = 0;
  for (let i = 7; i >= 0; i--) {
    const l = min(2, max(0, nearestInt(<f32>0.5 * (id * load<f32>(xval + (<usize>i << 2)) - <f32>1))));
    store<u8>(L + <usize>i, <u8>l);
    key = key * 3 + l;
  }
  return key;
}

/**
 * iq2_find_best_neighbour: among the neighbour list of map entry m (< 0), the grid entry with the
 * least sum of w*(scale*q - x)^2 (q = 2l+1, first strict minimum in list order); writes its codes
 * to L and returns its index. llama.cpp asserts when no distance is below FLT_MAX (all inf or NaN:
 * inf weights); the first entry of the list is taken then.
 */
export function iq2BestNeighbour(t: usize, m: i32, xval: usize, w: usize, scale: f32, L: usize): i32 {
  const grid = tabGrid(t);
  const list = tabNeighbours(t) + (<usize>(-m - 1) << 1);
  const n = <i32>load<u16>(list);
  let best: f32 = f32.MAX_VALUE;
  let bestIndex = <i32>load<u16>(list, 2);
  let j = 1;
  if (ASC_FEATURE_SIMD) {
    // Four list entries a step, one per lane; each lane sums its 8 terms in the scalar order, and
    // a step whose lanes are all >= best (or NaN) changes nothing, so only the others are replayed
    // lane by lane in list order (first strict minimum). Lanes past the list's end repeat the
    // step's first entry: an equal sum never replaces it.
    const vs = f32x4.splat(scale);
    for (; j <= n; j += 4) {
      const e = list + (<usize>j << 1);
      const g = listWords(grid, e, n - j);
      // q = 2l + 1 of field i: ((g >> (2i - 1)) & 6) | 1 (field 0: (g << 1) & 6).
      const six = i32x4.splat(6);
      const one = i32x4.splat(1);
      let d2 = f32x4.splat(0);
      d2 = neighbourTerm(d2, v128.or(v128.and(i32x4.shl(g, 1), six), one), vs, xval, w, 0);
      d2 = neighbourTerm(d2, v128.or(v128.and(i32x4.shr_u(g, 1), six), one), vs, xval, w, 4);
      d2 = neighbourTerm(d2, v128.or(v128.and(i32x4.shr_u(g, 3), six), one), vs, xval, w, 8);
      d2 = neighbourTerm(d2, v128.or(v128.and(i32x4.shr_u(g, 5), six), one), vs, xval, w, 12);
      d2 = neighbourTerm(d2, v128.or(v128.and(i32x4.shr_u(g, 7), six), one), vs, xval, w, 16);
      d2 = neighbourTerm(d2, v128.or(v128.and(i32x4.shr_u(g, 9), six), one), vs, xval, w, 20);
      d2 = neighbourTerm(d2, v128.or(v128.and(i32x4.shr_u(g, 11), six), one), vs, xval, w, 24);
      d2 = neighbourTerm(d2, v128.or(v128.and(i32x4.shr_u(g, 13), six), one), vs, xval, w, 28);
      if (!v128.any_true(f32x4.lt(d2, f32x4.splat(best)))) continue;
      replayLanes(d2, e, best, bestIndex);
      best = laneBest;
      bestIndex = laneIndex;
    }
  }
  for (; j <= n; j++) {
    const index = <i32>load<u16>(list + (<usize>j << 1));
    const g = <u32>load<u16>(grid + (<usize>index << 1));
    let d2: f32 = 0;
    for (let i = 0; i < 8; i++) {
      const q = load<f32>(LEVEL_Q + (<usize>((g >> (<u32>i << 1)) & 3) << 2));
      const diff: f32 = scale * q - load<f32>(xval + (<usize>i << 2));
      d2 += load<f32>(w + (<usize>i << 2)) * diff * diff;
    }
    if (d2 < best) {
      best = d2;
      bestIndex = index;
    }
  }
  iq2Unpack(grid, bestIndex, L);
  return bestIndex;
}

/**
 * Grid words of the neighbour list entries at e, e + 2, e + 4, e + 6 as i32 lanes; lanes at or
 * after `left` + 1 entries (past the list's end) take the first entry's word.
 */
@inline export function listWords(grid: usize, e: usize, left: i32): v128 {
  const g0 = <i32>load<u16>(grid + (<usize>load<u16>(e) << 1));
  let g = i32x4.splat(g0);
  if (left >= 1) g = i32x4.replace_lane(g, 1, <i32>load<u16>(grid + (<usize>load<u16>(e, 2) << 1)));
  if (left >= 2) g = i32x4.replace_lane(g, 2, <i32>load<u16>(grid + (<usize>load<u16>(e, 4) << 1)));
  if (left >= 3) g = i32x4.replace_lane(g, 3, <i32>load<u16>(grid + (<usize>load<u16>(e, 6) << 1)));
  return g;
}

// The lane-by-lane replay of one step of a SIMD neighbour search: the first strict minimum of the
// four sums in d2 (list entries at e, e + 2, ...) below `best`, in list order; results in
// laneBest / laneIndex (unchanged best and index where no lane is below).
export let laneBest: f32 = 0;
export let laneIndex: i32 = 0;
export function replayLanes(d2: v128, e: usize, best: f32, index: i32): void {
  for (let k = 0; k < 4; k++) {
    const d = f32x4.extract_lane(d2, 0);
    if (d < best) {
      best = d;
      index = <i32>load<u16>(e + (<usize>k << 1));
    }
    d2 = i32x4.shuffle(d2, d2, 1, 2, 3, 0);
  }
  laneBest = best;
  laneIndex = index;
}

// d2 + w_i * diff * diff per lane, diff = scale * q - x_i (q: integer codes 2l + 1 of field i, i = at / 4).
@inline function neighbourTerm(d2: v128, q: v128, vs: v128, xval: usize, w: usize, at: usize): v128 {
  const diff = f32x4.sub(f32x4.mul(vs, f32x4.convert_i32x4_s(q)), v128.load32_splat(xval + at));
  return f32x4.add(d2, f32x4.mul(f32x4.mul(v128.load32_splat(w + at), diff), diff));
}

/**
 * The trial step of all three IQ2 searches for one group of 8: codes at inverse scale id, and where
 * they are not a grid entry, the best neighbour at `scale` instead. Returns true when the codes
 * were off the grid.
 */
export function iq2Snap(t: usize, xval: usize, w: usize, id: f32, scale: f32, L: usize): bool {
  const m = iq2MapEntry(t, iq2Round8(xval, id, L));
  if (m >= 0) return false;
  iq2BestNeighbour(t, m, xval, w, scale, L);
  return true;
}

/** The table key of 8 byte codes at L, each clamped to 0..2 (IQ1's are never above 2). */
@inline export function codesKey(L: usize): i32 {
  let key = 0;
  for (let i = 7; i >= 0; i--) key = key * 3 + <i32>min<u32>(2, <u32>load<u8>(L + <usize>i));
  return key;
}

/**
 * The 4-bit scale indices of 16 sub-block scales (IQ2_XS, IQ2_S), two per byte at y, low nibble
 * first: iq2ScaleIndex(id, scale).
 */
export function packScales16(id: f32, scales: usize, y: usize): void {
  for (let ib: usize = 0; ib < 16; ib += 2) {
    const lo = iq2ScaleIndex(id, load<f32>(scales + (ib << 2)));
    const hi = iq2ScaleIndex(id, load<f32>(scales + (ib << 2) + 4));
    store<u8>(y + (ib >> 1), <u8>(lo | (hi << 4)));
  }
}

/** Codes of grid entry `index` as 8 bytes at L. */
@inline export function iq2Unpack(grid: usize, index: i32, L: usize): void {
  const g = <u32>load<u16>(grid + (<usize>index << 1));
  for (let i = 0; i < 8; i++) store<u8>(L + <usize>i, <u8>((g >> (<u32>i << 1)) & 3));
}

/**
 * Grid index of the 8 codes at L (the final encoding step). Codes are on the grid there wherever
 * llama.cpp does not abort ("found point not on grid"); in those cases (codes clamped to 0..2)
 * the first neighbour is taken instead, so that the kernel always finishes.
 */
export function iq2IndexOf(t: usize, L: usize): i32 {
  const m = iq2MapEntry(t, codesKey(L));
  return m >= 0 ? m : <i32>load<u16>(tabNeighbours(t) + (<usize>(-m - 1) << 1), 2);
}

// The two sums of a trial: sum(w*x*q) and sum(w*q*q), q = 2l+1, left to right in fp32.
export let sumQX: f32 = 0;
export let sumQ2: f32 = 0;

export function iq2Sums(w: usize, xval: usize, L: usize, n: i32): void {
  let sqx: f32 = 0;
  let sq2: f32 = 0;
  for (let i = 0; i < n; i++) {
    const wi = load<f32>(w + (<usize>i << 2));
    const q = load<f32>(LEVEL_Q + (<usize>load<u8>(L + <usize>i) << 2));
    sqx += wi * load<f32>(xval + (<usize>i << 2)) * q;
    sq2 += wi * q * q;
  }
  sumQX = sqx;
  sumQ2 = sq2;
}

/**
 * Magnitudes and sign bits of `count` groups of 8 values (xb -> xval, one sign byte per group at
 * signs). With `even`, each group's count of negative values is made even as IQ2_XXS / IQ2_XS
 * store 7 bits: the value with the least w*x*x (first strict minimum) keeps its sign, i.e. its
 * magnitude becomes negative, and only the low 7 bits are kept.
 */
export function iq2Signs(xb: usize, w: usize, xval: usize, signs: usize, count: i32, even: bool): void {
  for (let k = 0; k < count; k++) {
    const o = <usize>k << 5;
    let s: u32 = 0;
    for (let i = 0; i < 8; i++) {
      const v = load<f32>(xb + o + (<usize>i << 2));
      if (v >= 0) {
        store<f32>(xval + o + (<usize>i << 2), v);
      } else {
        store<f32>(xval + o + (<usize>i << 2), -v);
        s |= 1 << i;
      }
    }
    if (even) {
      if (popcnt(s) & 1) {
        let imin = 0;
        const v0 = load<f32>(xb + o);
        let least: f32 = load<f32>(w + o) * v0 * v0;
        for (let i = 1; i < 8; i++) {
          const v = load<f32>(xb + o + (<usize>i << 2));
          const a: f32 = load<f32>(w + o + (<usize>i << 2)) * v * v;
          if (a < least) {
            least = a;
            imin = i;
          }
        }
        const p = xval + o + (<usize>imin << 2);
        store<f32>(p, -load<f32>(p));
        s ^= 1 << imin;
      }
      s &= 127;
    }
    store<u8>(signs + <usize>k, <u8>s);
  }
}

/** MAX(a, b) as the C macro: a > b ? a : b. */
@inline export function cmax(a: f32, b: f32): f32 {
  return a > b ? a : b;
}

/** Largest of n values (C's MAX fold from x[0]). */
export function foldMax(x: usize, n: i32): f32 {
  let m = load<f32>(x);
  for (let i = 1; i < n; i++) m = cmax(m, load<f32>(x + (<usize>i << 2)));
  return m;
}

/**
 * Scale index of sub-block scale s against the super-block's d (inverse id):
 * clamp(nearest_int(0.5*(id*s - 1)), 0, 15), i.e. s ~ d*(2l + 1).
 */
@inline export function iq2ScaleIndex(id: f32, s: f32): u32 {
  return <u32>min(15, max(0, nearestInt(<f32>0.5 * (id * s - <f32>1))));
}


/**
 * The search of IQ2_XS and IQ2_S over 16 magnitudes (two groups of 8; vmax their largest, weights
 * w and waux = sqrt(w)): 19 trial scales (5 + 0.1*is)/vmax, each trial's codes snapped to the grid,
 * the best by sum(w*x*q)^2 / sum(w*q*q); then the groups the best trial had to snap are coded once
 * more at its scale, and the scale refit. Codes at L (left as the caller set them when no trial
 * wins), Laux is the trial scratch; returns the scale (vmax/5 when no trial wins).
 */
export function iq2Search16(t: usize, xval: usize, w: usize, waux: usize, vmax: f32, L: usize, Laux: usize): f32 {
  let best: f32 = 0;
  let scale: f32 = vmax / 5;
  let off0 = false;
  let off1 = false;
  for (let is = -9; is <= 9; is++) {
    const id: f32 = (<f32>5 + <f32>is * <f32>0.1) / vmax;
    const trialScale: f32 = 1 / id;
    const a = iq2Snap(t, xval, waux, id, trialScale, Laux);
    const b = iq2Snap(t, xval + 32, waux + 32, id, trialScale, Laux + 8);
    iq2Sums(w, xval, Laux, 16);
    if (sumQ2 > 0 && sumQX * sumQX > best * sumQ2) {
      scale = sumQX / sumQ2;
      best = scale * sumQX;
      memory.copy(L, Laux, 16);
      off0 = a;
      off1 = b;
    }
  }
  if ((off0 || off1) && scale > 0) {
    const id: f32 = 1 / scale;
    if (off0) iq2Snap(t, xval, waux, id, scale, L);
    if (off1) iq2Snap(t, xval + 32, waux + 32, id, scale, L + 8);
    iq2Sums(w, xval, L, 16);
    if (sumQ2 > 0) scale = sumQX / sumQ2;
  }
  return scale;
}

/**
 * The importance weights of n values at xb: qw_i * sqrt(sigma2 + x_i^2) (IQ1 / IQ2; sigma2 from the
 * super-block's sum of squares), and at waux (when not 0) their square roots.
 */
export function iqWeights(xb: usize, qb: usize, sigma2: f32, n: i32, weight: usize, waux: usize): void {
  for (let i = 0; i < n; i++) {
    const v = load<f32>(xb + (<usize>i << 2));
    store<f32>(weight + (<usize>i << 2), load<f32>(qb + (<usize>i << 2)) * Mathf.sqrt(sigma2 + v * v));
  }
  if (waux != 0) sqrtWeights(weight, n, waux);
}

/** waux_i = sqrt(weight_i), n values. */
export function sqrtWeights(weight: usize, n: i32, waux: usize): void {
  for (let i = 0; i < n; i++) store<f32>(waux + (<usize>i << 2), Mathf.sqrt(load<f32>(weight + (<usize>i << 2))));
}
