// Search steps shared by the IQ1_S and IQ1_M quantizers (llama.cpp's iq1_find_best_neighbour2 and
// the sort of their split search). Not re-exported by gguf/index.ts.
//
// Their grid tables (the 2048-entry grid, llama.cpp's iq2xs_init_impl with 3 distances kept) are
// iq2_search.ts' iq2Tables(2048): keyed by the ternary index t = sum f_i * 3^i of a code's 8
// fields (each 0..2, as IQ1's levels clamp them).
import { IQ1S_GRID } from './iq_grids';
import { iq2Tables, laneBest, laneIndex, listWords, replayLanes, tabMap, tabNeighbours } from './iq2_search';

let iq1Map: usize = 0;
let iq1Nb: usize = 0;

/** Builds the 2048-grid tables on first use (iq2_search.ts). */
export function iq1Tables(): void {
  if (iq1Map != 0) return;
  const t = iq2Tables(2048);
  iq1Nb = tabNeighbours(t);
  iq1Map = tabMap(t);
}

/** Whether the code with ternary index t is a grid entry. */
@inline export function iq1OnGrid(t: u32): bool {
  return load<i32>(iq1Map + (<usize>t << 2)) >= 0;
}

// ---- IQ1 search steps ---------------------------------------------------------------------

const LANE = memory.data<i32>([0, 1, 2, 3]);

/** SIMD: the lanes where a split's scores pass the searches' test sq2 > 0 && sqx * sqx > best * sq2. */
@inline export function splitBeats(sqx: v128, sq2: v128, vbest: v128): v128 {
  return v128.and(f32x4.gt(sq2, f32x4.splat(0)), f32x4.gt(f32x4.mul(sqx, sqx), f32x4.mul(vbest, sq2)));
}

/** SIMD: lane k of `test` kept where i + k <= last (the split searches' steps past their end). */
@inline export function lanesUpTo(test: v128, i: i32, last: i32): v128 {
  return v128.and(test, i32x4.le_s(i32x4.add(i32x4.splat(i), v128.load(LANE)), i32x4.splat(last)));
}

// The two level sets of IQ1 (levels -1, 0, 1 plus the offset +1/8 or -1/8), by field value.
export const IQ1_XP = memory.data<f32>([-0.875, 0.125, 1.125, 0]);
export const IQ1_XM = memory.data<f32>([-1.125, -0.125, 0.875, 0]);

/**
 * Grid index of 8 values whose code has ternary index t that llama.cpp would pick: the code
 * itself when on the grid, else the neighbour minimising sum w*(scale*xg[field] - x)^2 (first of
 * equals), as its iq1_find_best_neighbour2.
 */
export function iq1GridIndex(t: u32, x: usize, w: usize, scale: f32, xg: usize): i32 {
  const m = load<i32>(iq1Map + (<usize>t << 2));
  if (m >= 0) return m;
  const list = iq1Nb + (<usize>(-m - 1) << 1);
  const n = <i32>load<u16>(list);
  let best = F32.MAX_VALUE;
  let found = -1;
  let j = 1;
  if (ASC_FEATURE_SIMD) {
    // Four list entries a step, one per lane, as iq2_search.ts' iq2BestNeighbour. The level of
    // field value l is l - 0.875 (xg = IQ1_XP) or l - 1.125 (IQ1_XM), exactly as the table holds.
    const vs = f32x4.splat(scale);
    const off = f32x4.splat(-load<f32>(xg));
    const three = i32x4.splat(3);
    for (; j <= n; j += 4) {
      const e = list + (<usize>j << 1);
      const g = listWords(IQ1S_GRID, e, n - j);
      let d2 = f32x4.splat(0);
      d2 = iq1Term(d2, v128.and(g, three), off, vs, x, w, 0);
      d2 = iq1Term(d2, v128.and(i32x4.shr_u(g, 2), three), off, vs, x, w, 4);
      d2 = iq1Term(d2, v128.and(i32x4.shr_u(g, 4), three), off, vs, x, w, 8);
      d2 = iq1Term(d2, v128.and(i32x4.shr_u(g, 6), three), off, vs, x, w, 12);
      d2 = iq1Term(d2, v128.and(i32x4.shr_u(g, 8), three), off, vs, x, w, 16);
      d2 = iq1Term(d2, v128.and(i32x4.shr_u(g, 10), three), off, vs, x, w, 20);
      d2 = iq1Term(d2, v128.and(i32x4.shr_u(g, 12), three), off, vs, x, w, 24);
      d2 = iq1Term(d2, i32x4.shr_u(g, 14), off, vs, x, w, 28);
      if (!v128.any_true(f32x4.lt(d2, f32x4.splat(best)))) continue;
      replayLanes(d2, e, best, found);
      best = laneBest;
      found = laneIndex;
    }
  }
  for (; j <= n; j++) {
    const gi = <i32>load<u16>(list + (<usize>j << 1));
    const d2 = gridDistance(<u32>load<u16>(IQ1S_GRID + (<usize>gi << 1)), x, w, scale, xg);
    if (d2 < best) {
      best = d2;
      found = gi;
    }
  }
  if (found >= 0) return found;
  // llama.cpp's fallback over the whole grid subtracts x[i] with i the grid index, reading up to
  // 8 KB past the 8 values (the following input, here too, where it lies in memory; 0 past the
  // end of memory). It is reached only when every neighbour's distance is inf or NaN; where it
  // finds nothing either, llama.cpp aborts and entry 0 is taken here.
  const end = <usize>memory.size() << 16;
  for (let i = 0; i < 2048; i++) {
    const g = <u32>load<u16>(IQ1S_GRID + (<usize>i << 1));
    const p = x + (<usize>i << 2);
    const xi = p + 4 <= end ? load<f32>(p) : 0;
    let d2: f32 = 0;
    for (let j: u32 = 0; j < 8; j++) {
      const diff = scale * load<f32>(xg + (<usize>((g >> (j << 1)) & 3) << 2)) - xi;
      d2 += load<f32>(w + (<usize>j << 2)) * diff * diff;
    }
    if (d2 < best) {
      best = d2;
      found = i;
    }
  }
  return found >= 0 ? found : 0;
}

// d2 + w_i * diff * diff per lane, diff = scale * (l - off) - x_i (l: field values of field i, i = at / 4).
@inline function iq1Term(d2: v128, l: v128, off: v128, vs: v128, x: usize, w: usize, at: usize): v128 {
  const diff = f32x4.sub(f32x4.mul(vs, f32x4.sub(f32x4.convert_i32x4_s(l), off)), v128.load32_splat(x + at));
  return f32x4.add(d2, f32x4.mul(f32x4.mul(v128.load32_splat(w + at), diff), diff));
}

@inline function gridDistance(g: u32, x: usize, w: usize, scale: f32, xg: usize): f32 {
  let d2: f32 = 0;
  for (let i: u32 = 0; i < 8; i++) {
    const diff = scale * load<f32>(xg + (<usize>((g >> (i << 1)) & 3) << 2)) - load<f32>(x + (<usize>i << 2));
    d2 += load<f32>(w + (<usize>i << 2)) * diff * diff;
  }
  return d2;
}

// glibc's qsort (a top-down merge sort while a buffer fits, as for these 16 / 32 pairs) with
// llama.cpp's comparator on the value alone: stable, and the left element is taken unless it
// compares greater, which fixes the order for equal values and NaNs alike.
const sortTmpK = memory.data(128, 16);
const sortTmpI = memory.data(128, 16);

/** order[0..n) = 0..n-1 sorted by x[order[j]] as that qsort orders them; keys is n f32 scratch. */
export function iq1SortOrder(x: usize, n: i32, keys: usize, order: usize): void {
  if (ASC_FEATURE_SIMD && rankOrder(x, n, order)) return;
  for (let j = 0; j < n; j++) {
    store<f32>(keys + (<usize>j << 2), load<f32>(x + (<usize>j << 2)));
    store<i32>(order + (<usize>j << 2), j);
  }
  mergeSort(keys, order, n);
}

// SIMD (n a multiple of 4): a stable sort puts value i at #{j : x_j < x_i} + #{j < i : x_j == x_i},
// which is where the merge sort puts it whenever no value is NaN; counted four values at a time:
// x_j <= x_i before i's group of four, x_j < x_i after it, and within it x_j < x_i or (j < i and
// equal). A NaN (the counts no longer make a permutation) returns false for the merge sort.
function rankOrder(x: usize, n: i32, order: usize): bool {
  const lane = i32x4(0, 1, 2, 3);
  let nan = i32x4.splat(0);
  for (let g = 0; g < n; g += 4) {
    const v = v128.load(x + (<usize>g << 2));
    nan = v128.or(nan, f32x4.ne(v, v));
  }
  if (v128.any_true(nan)) return false;
  for (let i = 0; i < n; i++) {
    const xi = f32x4.splat(load<f32>(x + (<usize>i << 2)));
    const own = i & ~3;
    let c = i32x4.splat(0);
    for (let g = 0; g < own; g += 4) c = i32x4.sub(c, f32x4.le(v128.load(x + (<usize>g << 2)), xi));
    const v = v128.load(x + (<usize>own << 2));
    const before = i32x4.lt_s(lane, i32x4.splat(i & 3));
    c = i32x4.sub(c, v128.or(f32x4.lt(v, xi), v128.and(f32x4.eq(v, xi), before)));
    for (let g = own + 4; g < n; g += 4) c = i32x4.sub(c, f32x4.lt(v128.load(x + (<usize>g << 2)), xi));
    const s = i32x4.add(c, i32x4.shuffle(c, c, 2, 3, 0, 1));
    const r = i32x4.extract_lane(s, 0) + i32x4.extract_lane(s, 1);
    store<i32>(order + (<usize>r << 2), i);
  }
  return true;
}

function mergeSort(k: usize, ix: usize, n: i32): void {
  if (n <= 1) return;
  const n1 = n >> 1;
  mergeSort(k, ix, n1);
  mergeSort(k + (<usize>n1 << 2), ix + (<usize>n1 << 2), n - n1);
  let a = 0;
  let b = n1;
  let t = 0;
  while (a < n1 && b < n) {
    const ka = load<f32>(k + (<usize>a << 2));
    const kb = load<f32>(k + (<usize>b << 2));
    if (!(ka > kb)) {
      store<f32>(sortTmpK + (<usize>t << 2), ka);
      store<i32>(sortTmpI + (<usize>t << 2), load<i32>(ix + (<usize>a << 2)));
      a++;
    } else {
      store<f32>(sortTmpK + (<usize>t << 2), kb);
      store<i32>(sortTmpI + (<usize>t << 2), load<i32>(ix + (<usize>b << 2)));
      b++;
    }
    t++;
  }
  while (a < n1) {
    store<f32>(sortTmpK + (<usize>t << 2), load<f32>(k + (<usize>a << 2)));
    store<i32>(sortTmpI + (<usize>t << 2), load<i32>(ix + (<usize>a << 2)));
    a++;
    t++;
  }
  // What is left of the right half is already in place.
  memory.copy(k, sortTmpK, <usize>t << 2);
  memory.copy(ix, sortTmpI, <usize>t << 2);
}
