// make_q3_quants (spec §13.2) on the sixteen 16-value sub-blocks of a Q3_K block at once, for the
// SIMD build; the scalar build (and this file's fallback) runs searches.ts' makeQ3Quants per unit.
// Same bytes as that loop: each unit's tests and sums keep its order, only units run side by side.
// Not re-exported by gguf/index.ts: nothing here is a wasm export.
import { GROUP_MAX_EPS } from '../common';
import { makeQ3Quants, nearestIntV, transposeIn } from './searches';

// Phase 1, per group of 4 units (lane k = unit 4g + k): x, the codes (i32) of the 16 elements and
// their terms w*x*l and w*l*l of the sums (w = x*x); per unit the sums, the first scale and
// whether it is below eps.
const Q3X = memory.data(4 * 16 * 16, 16);
const Q3A = memory.data(4 * 16 * 16, 16);
const Q3B = memory.data(4 * 16 * 16, 16);
const Q3C = memory.data(4 * 16 * 16, 16);
const Q3SX = memory.data(16 * 4, 16);
const Q3S2 = memory.data(16 * 4, 16);
const Q3IS = memory.data(16 * 4, 16);
const Q3LOW = memory.data(16 * 4, 16);
// Phase 2, two slots of one unit each (lanes = its elements): w, w*x, codes (as floats), the
// old-code terms w*x*l and w*l*l of the sums, and a round's candidate codes; slot s
// at byte offset s (0 or 64).
const Q3W1 = memory.data(128, 16);
const Q3WX1 = memory.data(128, 16);
const Q3L1 = memory.data(128, 16);
const Q3A1 = memory.data(128, 16);
const Q3B1 = memory.data(128, 16);
const Q3NL = memory.data(128, 16);
const Q3NS = memory.data(16, 16); // a commit's new sums (sumlx, suml2) per slot, at + s/8

// Phase 2: elements e..e+3 of the unit at x in slot s. Stores each candidate code and its sums,
// returns the lanes where the scalar loop accepts the change: slx > 0, a different code,
// sl2 > 0 and a strictly better fit.
@inline function q3RoundFour(x: usize, s: usize, e: usize, sumlx: v128, suml2: v128, sq: v128): u32 {
  const zero = f32x4.splat(0);
  const o = s + e;
  const xi = v128.load(x + e);
  const lf = v128.load(Q3L1 + o);
  let slx = f32x4.sub(sumlx, v128.load(Q3A1 + o));
  const pos = f32x4.gt(slx, zero);
  let sl2 = f32x4.sub(suml2, v128.load(Q3B1 + o));
  const nl = i32x4.min_s(i32x4.splat(3), i32x4.max_s(i32x4.splat(-4), nearestIntV(f32x4.div(f32x4.mul(xi, sl2), slx))));
  const nf = f32x4.convert_i32x4_s(nl);
  slx = f32x4.add(slx, f32x4.mul(v128.load(Q3WX1 + o), nf));
  sl2 = f32x4.add(sl2, f32x4.mul(f32x4.mul(v128.load(Q3W1 + o), nf), nf));
  v128.store(Q3NL + o, nf);
  const better = v128.and(f32x4.gt(sl2, zero), f32x4.gt(f32x4.mul(f32x4.mul(slx, slx), suml2), f32x4.mul(sq, sl2)));
  return <u32>i32x4.bitmask(v128.and(pos, v128.andnot(better, f32x4.eq(nf, lf))));
}

// Phase 2 round: bits of the elements >= start whose change the scalar loop would accept (the
// quads wholly before start are not tested).
@inline function q3Round(x: usize, s: usize, sumlx: f32, suml2: f32, start: u32): u32 {
  const vx = f32x4.splat(sumlx);
  const v2 = f32x4.splat(suml2);
  const sq = f32x4.mul(vx, vx);
  // Unrolled by start quad: a loop's bound check and interrupt check cost as much as a quad.
  let bits: u32 = q3RoundFour(x, s, 48, vx, v2, sq) << 12;
  if (start < 12) {
    bits |= q3RoundFour(x, s, 32, vx, v2, sq) << 8;
    if (start < 8) {
      bits |= q3RoundFour(x, s, 16, vx, v2, sq) << 4;
      if (start < 4) bits |= q3RoundFour(x, s, 0, vx, v2, sq);
    }
  }
  return bits & (<u32>0xffff << start);
}

// Phase 1, element i (byte offset) of group g: stores its initial code and the terms w*x*l and
// w*l*l, and returns sumlx with the element added; q3InitY then adds it to suml2.
@inline function q3Init(i: usize, g: usize, sumlx: v128): v128 {
  const o = (g << 8) + i;
  const xi = v128.load(Q3X + o);
  const l = i32x4.min_s(i32x4.splat(3), i32x4.max_s(i32x4.splat(-4), nearestIntV(f32x4.mul(v128.load(Q3IS + (g << 4)), xi))));
  const lf = f32x4.convert_i32x4_s(l);
  const w = f32x4.mul(xi, xi);
  const a = f32x4.mul(f32x4.mul(w, xi), lf);
  v128.store(Q3C + o, l);
  v128.store(Q3A + o, a);
  v128.store(Q3B + o, f32x4.mul(f32x4.mul(w, lf), lf));
  return f32x4.add(sumlx, a);
}
@inline function q3InitY(i: usize, g: usize, suml2: v128): v128 {
  return f32x4.add(suml2, v128.load(Q3B + (g << 8) + i));
}

// Phase 2: unit u (values at x) into slot s: its initial codes recomputed from x as in phase 1
// (same operations, so the same codes) and the terms of its sums.
function q3Load(x: usize, u: usize, s: usize): void {
  const vi = f32x4.splat(load<f32>(Q3IS + (u << 2)));
  q3LoadFour(x, vi, s, 0);
  q3LoadFour(x, vi, s, 16);
  q3LoadFour(x, vi, s, 32);
  q3LoadFour(x, vi, s, 48);
}
@inline function q3LoadFour(x: usize, vi: v128, s: usize, e: usize): void {
  const xi = v128.load(x + e);
  const lf = f32x4.convert_i32x4_s(i32x4.min_s(i32x4.splat(3), i32x4.max_s(i32x4.splat(-4), nearestIntV(f32x4.mul(vi, xi)))));
  const w = f32x4.mul(xi, xi);
  const wx = f32x4.mul(w, xi);
  v128.store(Q3W1 + s + e, w);
  v128.store(Q3WX1 + s + e, wx);
  v128.store(Q3L1 + s + e, lf);
  v128.store(Q3A1 + s + e, f32x4.mul(wx, lf));
  v128.store(Q3B1 + s + e, f32x4.mul(f32x4.mul(w, lf), lf));
}

// Phase 2: element i of slot s takes its round's candidate code (the scalar loop's store), and
// the sums their new values, with the round's operations: (sum - old term) + new term.
function q3Commit(s: usize, i: usize, sumlx: f32, suml2: f32): void {
  const o = s + (i << 2);
  const nf = load<f32>(Q3NL + o);
  const a = load<f32>(Q3WX1 + o) * nf;
  const b = load<f32>(Q3W1 + o) * nf * nf;
  store<f32>(Q3NS + (s >> 3), (sumlx - load<f32>(Q3A1 + o)) + a);
  store<f32>(Q3NS + (s >> 3) + 4, (suml2 - load<f32>(Q3B1 + o)) + b);
  store<f32>(Q3L1 + o, nf);
  store<f32>(Q3A1 + o, a);
  store<f32>(Q3B1 + o, b);
}

// Phase 2: unit u in slot s is done: its scale, and its codes (+ nmax, as bytes) into L.
function q3Store(u: usize, s: usize, sumlx: f32, suml2: f32, scales: usize, L: usize): void {
  store<f32>(scales + (u << 2), sumlx / suml2);
  const off = i32x4.splat(4);
  const a = i32x4.add(i32x4.trunc_sat_f32x4_s(v128.load(Q3L1 + s)), off);
  const b = i32x4.add(i32x4.trunc_sat_f32x4_s(v128.load(Q3L1 + s, 16)), off);
  const c = i32x4.add(i32x4.trunc_sat_f32x4_s(v128.load(Q3L1 + s, 32)), off);
  const d = i32x4.add(i32x4.trunc_sat_f32x4_s(v128.load(Q3L1 + s, 48)), off);
  v128.store(L + (u << 4), i8x16.narrow_i16x8_u(i16x8.narrow_i32x4_s(a, b), i16x8.narrow_i32x4_s(c, d)));
}

// Phase 1, element i (byte offset) of group g: the lanes whose first step's candidate code
// differs from the code (slx > 0 and a different nearest code), against the initial sums.
@inline function q3Differs(i: usize, g: usize, sumlx: v128, suml2: v128): v128 {
  const o = (g << 8) + i;
  const slx = f32x4.sub(sumlx, v128.load(Q3A + o));
  const sl2 = f32x4.sub(suml2, v128.load(Q3B + o));
  const nl = i32x4.min_s(i32x4.splat(3), i32x4.max_s(i32x4.splat(-4), nearestIntV(f32x4.div(f32x4.mul(v128.load(Q3X + o), sl2), slx))));
  return v128.andnot(f32x4.gt(slx, f32x4.splat(0)), i32x4.eq(nl, v128.load(Q3C + o)));
}

// Phase 1, group g: stores its units' scales (0 below eps, whose codes are 0: see q3Codes16) and
// returns the busy units (differing, not below eps) as bits 4g..4g+3.
@inline function q3Busy(g: usize, differs: v128, sumlx: v128, suml2: v128, scales: usize): u32 {
  const below = v128.load(Q3LOW + (g << 4));
  v128.store(scales + (g << 4), v128.bitselect(f32x4.splat(0), f32x4.div(sumlx, suml2), below));
  return <u32>i32x4.bitmask(v128.andnot(differs, below)) << <u32>(g << 2);
}

// Signed absmax (spec §0) of the 4 units of group o (byte offset into Q3X) from their largest
// (h, starting at +0) and smallest (l, starting at +0) values: h when h > -l, l when -l > h (the
// extreme of that sign is the first strictly largest |x|). When h == -l != 0 both signs reach
// the maximum and the order decides: the literal scan. (+0 when all are zero, as the scan.)
function q3Absmax(o: usize, h: v128, l: v128): v128 {
  const nl = f32x4.neg(l);
  if (v128.any_true(v128.and(f32x4.eq(h, nl), f32x4.ne(h, f32x4.splat(0))))) {
    let amax = f32x4.splat(0);
    let vmax = amax;
    for (let i: usize = 0; i < 256; i += 16) {
      const v = v128.load(Q3X + o + i);
      const av = f32x4.abs(v);
      const m = f32x4.gt(av, amax);
      amax = v128.bitselect(av, amax, m);
      vmax = v128.bitselect(v, vmax, m);
    }
    return vmax;
  }
  return v128.bitselect(h, l, f32x4.gt(h, nl));
}

// SIMD build: the units whose codes phase 2 wrote to L (the others' are in Q3C).
let q3Ran: u32 = 0;

/**
 * SIMD build, after makeQ3Quants16: the codes of the units in the mask `need` that it left out of
 * L. Q3_K overwrites the codes of every sub-block whose quantized scale is not 0, so only the
 * others' are ever needed; this saves transposing all 256 codes out for them.
 */
export function q3Codes16(L: usize, need: u32): void {
  let m = need & ~q3Ran;
  while (m != 0) {
    const u = <usize>ctz(m);
    m &= m - 1;
    const col = ((u >> 2) << 8) + ((u & 3) << 2);
    const low = load<i32>(Q3LOW + (u << 2)) != 0;
    for (let i: usize = 0; i < 16; i++) {
      store<u8>(L + (u << 4) + i, low ? 0 : <u8>(load<i32>(Q3C + col + (i << 4)) + 4));
    }
  }
}

/**
 * makeQ3Quants (nmax = 4) on 16 consecutive units of 16 values (x: 256 floats; L: 256 bytes;
 * scales: 16 floats), each with exactly the scalar steps. The SIMD build writes to L only the
 * codes of the units phase 2 ran; q3Codes16 gives the others' when they are needed.
 * The coordinate descent is serial within a unit (an accepted change feeds the next element's
 * test), but until a change is accepted every test of a pass sees the same sums. So:
 * Phase 1, lanes = 4 units: signed absmax, scale, initial codes and sums (sequential per unit),
 *   then the first pass's candidate codes, all against the initial sums. A unit where none
 *   differs from its code accepts no change and is finished (the scalar loop breaks after that
 *   pass): three quarters of the units here.
 * Phase 2, the others, lanes = a unit's elements: a round tests all remaining elements of the
 *   pass against the current sums; the first one accepted is exactly where the scalar loop
 *   accepts next. It is committed and the next round resumes after it. Rounds are serial
 *   within a unit, so two units are in flight at a time to overlap their latencies.
 */
export function makeQ3Quants16(x: usize, L: usize, scales: usize): void {
  const n = 16;
  const nmax = 4;
  if (!ASC_FEATURE_SIMD) {
    for (let k = 0; k < 16; k++) {
      store<f32>(scales + (<usize>k << 2), makeQ3Quants(n, nmax, x + (<usize>k << 6), L + (<usize>k << 4)));
    }
    return;
  }
  const zero = f32x4.splat(0);
  const ilo = i32x4.splat(-nmax);
  // The four groups' chains (absmax, sums) run side by side so that their latencies overlap.
  for (let g: usize = 0; g < 4; g++) transposeIn(x + (g << 8), n, Q3X + (g << 8));
  // Signed absmax per unit: the largest and smallest x give |max| and its sign, unless both
  // signs reach it (then the first such element decides: q3Absmax scans).
  let h0 = zero, h1 = zero, h2 = zero, h3 = zero;
  let l0 = zero, l1 = zero, l2 = zero, l3 = zero;
  for (let i: usize = 0; i < 256; i += 16) {
    let v = v128.load(Q3X + i);
    h0 = f32x4.pmax(h0, v);
    l0 = f32x4.pmin(l0, v);
    v = v128.load(Q3X + i, 256);
    h1 = f32x4.pmax(h1, v);
    l1 = f32x4.pmin(l1, v);
    v = v128.load(Q3X + i, 512);
    h2 = f32x4.pmax(h2, v);
    l2 = f32x4.pmin(l2, v);
    v = v128.load(Q3X + i, 768);
    h3 = f32x4.pmax(h3, v);
    l3 = f32x4.pmin(l3, v);
  }
  const a0 = f32x4.pmax(h0, f32x4.neg(l0)), a1 = f32x4.pmax(h1, f32x4.neg(l1));
  const a2 = f32x4.pmax(h2, f32x4.neg(l2)), a3 = f32x4.pmax(h3, f32x4.neg(l3));
  const m0 = q3Absmax(0, h0, l0), m1 = q3Absmax(256, h1, l1), m2 = q3Absmax(512, h2, l2), m3 = q3Absmax(768, h3, l3);
  const eps = f32x4.splat(GROUP_MAX_EPS);
  v128.store(Q3LOW, f32x4.lt(a0, eps));
  v128.store(Q3LOW, f32x4.lt(a1, eps), 16);
  v128.store(Q3LOW, f32x4.lt(a2, eps), 32);
  v128.store(Q3LOW, f32x4.lt(a3, eps), 48);
  const nm = f32x4.splat(<f32>(-nmax));
  v128.store(Q3IS, f32x4.div(nm, m0));
  v128.store(Q3IS, f32x4.div(nm, m1), 16);
  v128.store(Q3IS, f32x4.div(nm, m2), 32);
  v128.store(Q3IS, f32x4.div(nm, m3), 48);
  let x0 = zero, x1 = zero, x2 = zero, x3 = zero;
  let y0 = zero, y1 = zero, y2 = zero, y3 = zero;
  for (let i: usize = 0; i < 256; i += 16) {
    x0 = q3Init(i, 0, x0);
    x1 = q3Init(i, 1, x1);
    x2 = q3Init(i, 2, x2);
    x3 = q3Init(i, 3, x3);
    y0 = q3InitY(i, 0, y0);
    y1 = q3InitY(i, 1, y1);
    y2 = q3InitY(i, 2, y2);
    y3 = q3InitY(i, 3, y3);
  }
  v128.store(Q3SX, x0);
  v128.store(Q3SX, x1, 16);
  v128.store(Q3SX, x2, 32);
  v128.store(Q3SX, x3, 48);
  v128.store(Q3S2, y0);
  v128.store(Q3S2, y1, 16);
  v128.store(Q3S2, y2, 32);
  v128.store(Q3S2, y3, 48);
  // A unit where no candidate of the first step differs from its code accepts nothing; the rare
  // unit flagged here whose differing candidates all fail the fit test costs one empty round in
  // phase 2. The four groups side by side, as above.
  let d0 = zero, d1 = zero, d2 = zero, d3 = zero;
  for (let i: usize = 0; i < 256; i += 16) {
    d0 = v128.or(d0, q3Differs(i, 0, x0, y0));
    d1 = v128.or(d1, q3Differs(i, 1, x1, y1));
    d2 = v128.or(d2, q3Differs(i, 2, x2, y2));
    d3 = v128.or(d3, q3Differs(i, 3, x3, y3));
  }
  const busy = q3Busy(0, d0, x0, y0, scales) | q3Busy(1, d1, x1, y1, scales)
    | q3Busy(2, d2, x2, y2, scales) | q3Busy(3, d3, x3, y3, scales);
  q3Ran = busy;
  let queue = busy;
  // Phase 2 with two slots (s = 0 and 64); a slot's unit is -1 when empty. The two slots' steps are
  // written out twice on purpose: each slot's state then lives in locals (registers), and the two
  // independent dependency chains overlap; a shared helper would keep the state in memory.
  let uA: i32 = -1, uB: i32 = -1;
  let xA: f32 = 0, yA: f32 = 0, xB: f32 = 0, yB: f32 = 0;
  let tA = 0, tB = 0;
  let startA: u32 = 0, startB: u32 = 0;
  let chA = false, chB = false;
  if (queue != 0) {
    uA = ctz(queue);
    queue &= queue - 1;
    q3Load(x + (<usize>uA << 6), <usize>uA, 0);
    xA = load<f32>(Q3SX + (<usize>uA << 2));
    yA = load<f32>(Q3S2 + (<usize>uA << 2));
  }
  if (queue != 0) {
    uB = ctz(queue);
    queue &= queue - 1;
    q3Load(x + (<usize>uB << 6), <usize>uB, 64);
    xB = load<f32>(Q3SX + (<usize>uB << 2));
    yB = load<f32>(Q3S2 + (<usize>uB << 2));
  }
  while (uA >= 0 || uB >= 0) {
    const bitsA = uA >= 0 ? q3Round(x + (<usize>uA << 6), 0, xA, yA, startA) : 0;
    const bitsB = uB >= 0 ? q3Round(x + (<usize>uB << 6), 64, xB, yB, startB) : 0;
    if (uA >= 0) {
      if (bitsA != 0) {
        const i = <usize>ctz(bitsA);
        q3Commit(0, i, xA, yA);
        xA = load<f32>(Q3NS);
        yA = load<f32>(Q3NS, 4);
        chA = true;
        startA = <u32>i + 1;
      }
      if (bitsA == 0 || startA == 16) {
        // End of a pass: another one after a change (at most 5), else the unit is done.
        if (chA && tA < 4) {
          tA++;
          chA = false;
          startA = 0;
        } else {
          q3Store(<usize>uA, 0, xA, yA, scales, L);
          uA = -1;
          if (queue != 0) {
            uA = ctz(queue);
            queue &= queue - 1;
            q3Load(x + (<usize>uA << 6), <usize>uA, 0);
            xA = load<f32>(Q3SX + (<usize>uA << 2));
            yA = load<f32>(Q3S2 + (<usize>uA << 2));
            tA = 0;
            chA = false;
            startA = 0;
          }
        }
      }
    }
    if (uB >= 0) {
      if (bitsB != 0) {
        const i = <usize>ctz(bitsB);
        q3Commit(64, i, xB, yB);
        xB = load<f32>(Q3NS, 8);
        yB = load<f32>(Q3NS, 12);
        chB = true;
        startB = <u32>i + 1;
      }
      if (bitsB == 0 || startB == 16) {
        if (chB && tB < 4) {
          tB++;
          chB = false;
          startB = 0;
        } else {
          q3Store(<usize>uB, 64, xB, yB, scales, L);
          uB = -1;
          if (queue != 0) {
            uB = ctz(queue);
            queue &= queue - 1;
            q3Load(x + (<usize>uB << 6), <usize>uB, 64);
            xB = load<f32>(Q3SX + (<usize>uB << 2));
            yB = load<f32>(Q3S2 + (<usize>uB << 2));
            tB = 0;
            chB = false;
            startB = 0;
          }
        }
      }
    }
  }
}
