// Search tables and shared search steps of the grid quantizers (llama.cpp's iq2xs_init_impl
// tables; the IQ1_S / IQ1_M neighbour search and sort). Not re-exported by gguf/index.ts.
//
// Grid tables. A grid entry is 8 values, each a 2-bit field (bits 2i..2i+1 of a u16, the
// encoding of iq_grids.ts); the fields of every IQ1 / IQ2 grid are 0..2, and so are the codes
// their quantizers look up (levels clamped to 0..2). llama.cpp keys its tables by the u16 code
// (43692 entries, lists for every code off the grid, fields of 3 included); here they are keyed
// by the ternary index t = sum f_i * 3^i of the 8 fields (6561 entries) and hold lists only for
// those codes, which keeps IQ1's tables at 690 KB instead of 2.9 MB (wasm's initial memory is
// 2 MB). Each list is llama.cpp's list for that code: `kmap[t]` is the grid index of the code
// when it is on the grid, otherwise -(o + 1), where neighbours[o] = n and neighbours[o+1..o+n]
// are the grid entries whose squared distance to the code (sum over the 8 fields of the squared
// difference; llama.cpp's distance of the 2f+1 values is 4 times it) is among the `nwant`
// smallest distinct distances, by distance, then index. That is the order of llama.cpp's qsort
// on (distance, index) pairs, a total order, so its sort algorithm does not matter; here each
// distance gets a bucket instead of a sort.
import { IQ1S_GRID } from './iq_grids';

export const IQ2_KMAP_SIZE: i32 = 6561;

/** Ternary index of a code u whose 8 fields are 0..2. */
@inline export function ternaryIndex(u: u32): u32 {
  let t: u32 = 0;
  for (let i: i32 = 14; i >= 0; i -= 2) t = t * 3 + ((u >> <u32>i) & 3);
  return t;
}

// Squared distances of one code to every grid entry (<= 8 * 4 = 32 for fields 0..2), the count
// per distance and the write position of the kept distances (-1: not kept); the two 256-entry
// tables give the distance of a code's low / high byte (4 fields) to any byte.
const MAX_D2: i32 = 32;
const dist = memory.data(2048);
const counts = memory.data(4 * (MAX_D2 + 1), 16);
const slots = memory.data(4 * (MAX_D2 + 1), 16);
const byteLo = memory.data(256);
const byteHi = memory.data(256);

// Distance of each byte's 4 fields to the 4 fields of q (a byte of a code).
function byteDistances(q: u32, out: usize): void {
  for (let b: u32 = 0; b < 256; b++) {
    let s: u32 = 0;
    for (let f: u32 = 0; f < 8; f += 2) {
      const d = <i32>((b >> f) & 3) - <i32>((q >> f) & 3);
      s += <u32>(d * d);
    }
    store<u8>(out + b, <u8>s);
  }
}

/**
 * Builds kmap (IQ2_KMAP_SIZE i32) and the neighbour lists (u16) of `grid` (gridSize u16
 * entries with fields 0..2, gridSize <= 2048) as llama.cpp's iq2xs_init_impl does for that grid
 * and `nwant`. Traps if the lists would pass `capacity` u16s; returns the u16s written.
 */
export function buildIq2Tables(grid: usize, gridSize: i32, nwant: i32, kmap: usize, neighbours: usize, capacity: i32): i32 {
  for (let t = 0; t < IQ2_KMAP_SIZE; t++) store<i32>(kmap + (<usize>t << 2), -1);
  for (let j = 0; j < gridSize; j++) {
    store<i32>(kmap + (<usize>ternaryIndex(<u32>load<u16>(grid + (<usize>j << 1))) << 2), j);
  }
  let at = 0;
  for (let t = 0; t < IQ2_KMAP_SIZE; t++) {
    if (load<i32>(kmap + (<usize>t << 2)) >= 0) continue;
    let u: u32 = 0;
    let r = <u32>t;
    for (let i: u32 = 0; i < 16; i += 2) {
      u |= (r % 3) << i;
      r /= 3;
    }
    byteDistances(u & 0xff, byteLo);
    byteDistances(u >> 8, byteHi);
    memory.fill(counts, 0, 4 * (MAX_D2 + 1));
    for (let j = 0; j < gridSize; j++) {
      const g = <u32>load<u16>(grid + (<usize>j << 1));
      const d = <u32>load<u8>(byteLo + (g & 0xff)) + <u32>load<u8>(byteHi + (g >> 8));
      store<u8>(dist + j, <u8>d);
      const c = counts + (<usize>d << 2);
      store<i32>(c, load<i32>(c) + 1);
    }
    // The nwant smallest distances present, in order, each bucket after the previous one.
    let n = 0;
    let kept = 0;
    for (let d = 0; d <= MAX_D2; d++) {
      const c = load<i32>(counts + (<usize>d << 2));
      if (c > 0 && kept < nwant) {
        store<i32>(slots + (<usize>d << 2), at + 1 + n);
        n += c;
        kept++;
      } else {
        store<i32>(slots + (<usize>d << 2), -1);
      }
    }
    if (at + 1 + n > capacity) unreachable();
    store<i32>(kmap + (<usize>t << 2), -(at + 1));
    store<u16>(neighbours + (<usize>at << 1), <u16>n);
    for (let j = 0; j < gridSize; j++) {
      const s = slots + (<usize>load<u8>(dist + j) << 2);
      const p = load<i32>(s);
      if (p < 0) continue;
      store<u16>(neighbours + (<usize>p << 1), <u16>j);
      store<i32>(s, p + 1);
    }
    at += 1 + n;
  }
  return at;
}

// IQ1_S / IQ1_M share one table set (2048 entries, nwant = 3), built on first use: 4513 ternary
// codes off the grid with 327721 neighbours in all, so 332234 u16s (worked out by running the
// builder; it traps should that ever not suffice).
const IQ1_NEIGHBOUR_COUNT: i32 = 332234;
export const IQ1_KMAP = memory.data(IQ2_KMAP_SIZE << 2, 16);
export const IQ1_NEIGHBOURS = memory.data(IQ1_NEIGHBOUR_COUNT << 1, 16);
let iq1Built = false;

export function iq1Tables(): void {
  if (iq1Built) return;
  const used = buildIq2Tables(IQ1S_GRID, 2048, 3, IQ1_KMAP, IQ1_NEIGHBOURS, IQ1_NEIGHBOUR_COUNT);
  if (used != IQ1_NEIGHBOUR_COUNT) unreachable();
  iq1Built = true;
}

// ---- IQ1 search steps ---------------------------------------------------------------------

// The two level sets of IQ1 (levels -1, 0, 1 plus the offset +1/8 or -1/8), by field value.
export const IQ1_XP = memory.data<f32>([-0.875, 0.125, 1.125, 0]);
export const IQ1_XM = memory.data<f32>([-1.125, -0.125, 0.875, 0]);

/**
 * Grid index of 8 values whose code has ternary index t that llama.cpp would pick: the code
 * itself when on the grid, else the neighbour minimising sum w*(scale*xg[field] - x)^2 (first of
 * equals), as its iq1_find_best_neighbour2.
 */
export function iq1GridIndex(t: u32, x: usize, w: usize, scale: f32, xg: usize): i32 {
  const m = load<i32>(IQ1_KMAP + (<usize>t << 2));
  if (m >= 0) return m;
  const list = IQ1_NEIGHBOURS + (<usize>(-m - 1) << 1);
  const n = <i32>load<u16>(list);
  let best = F32.MAX_VALUE;
  let found = -1;
  for (let j = 1; j <= n; j++) {
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
  for (let j = 0; j < n; j++) {
    store<f32>(keys + (<usize>j << 2), load<f32>(x + (<usize>j << 2)));
    store<i32>(order + (<usize>j << 2), j);
  }
  mergeSort(keys, order, n);
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
