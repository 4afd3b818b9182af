// §13.1 make_qx_quants, llama.cpp's symmetric signed scale search (Q4_0, Q5_0 with an importance
// matrix; Q3_K, Q6_K), bit-exact; see searches.ts for how the SIMD build keeps every sum's order.
// * makeQxQuants (one unit): four trial scales in the four lanes, each lane summing over the
//   elements in the scalar order; the winner is then picked in trial order with the scalar
//   comparisons.
// * makeQxQuants4 (four units, the K-quants): lane k runs unit k through every scalar step.
import { GROUP_MAX_EPS, nearestInt, signedAbsmax } from '../common';
import { f32At } from './pack';
import { nearestIntV, transposeIn, transposeOutBytes } from './searches';

// Trial scale list (19 entries, padded to 20) and per-trial sums.
const QX_IS = memory.data(24 * 4);
const QX_SLX = memory.data(24 * 4);
const QX_SL2 = memory.data(24 * 4);
// Per-element splats (x, w, w*x) so the trial loops load one v128 per operand.
const XS = memory.data(32 * 16);
const WS = memory.data(32 * 16);
const WXS = memory.data(32 * 16);
// The trial offsets is = -9..-1, 1..9 as floats (padded to 20 entries).
const QX_K = memory.data<f32>([-9, -8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9]);
// Four units' x, w and codes, transposed (lane k = unit k).
const X4 = memory.data(32 * 16);
const W4 = memory.data(32 * 16);
const LB4 = memory.data(32 * 16);

// ---- §13.1 QX: symmetric signed search ---------------------------------------------------

// Codes for one iscale: L = nmax + clamp(nearest_int(iscale*x), -nmax, nmax-1).
function qxCodes(n: i32, nmax: i32, x: usize, L: usize, iscale: f32): void {
  if (ASC_FEATURE_SIMD) {
    if ((n & 15) == 0) {
      const vis = f32x4.splat(iscale);
      const lo = i32x4.splat(-nmax);
      const hi = i32x4.splat(nmax - 1);
      const off = i32x4.splat(nmax);
      for (let i = 0; i < n; i += 16) {
        const p = x + (<usize>i << 2);
        const a = i32x4.add(i32x4.min_s(hi, i32x4.max_s(lo, nearestIntV(f32x4.mul(vis, v128.load(p))))), off);
        const b = i32x4.add(i32x4.min_s(hi, i32x4.max_s(lo, nearestIntV(f32x4.mul(vis, v128.load(p + 16))))), off);
        const c = i32x4.add(i32x4.min_s(hi, i32x4.max_s(lo, nearestIntV(f32x4.mul(vis, v128.load(p + 32))))), off);
        const d = i32x4.add(i32x4.min_s(hi, i32x4.max_s(lo, nearestIntV(f32x4.mul(vis, v128.load(p + 48))))), off);
        v128.store(L + <usize>i, i8x16.narrow_i16x8_u(i16x8.narrow_i32x4_s(a, b), i16x8.narrow_i32x4_s(c, d)));
      }
      return;
    }
  }
  for (let i = 0; i < n; i++) {
    const l = min(nmax - 1, max(-nmax, nearestInt(iscale * f32At(x, i))));
    store<u8>(L + <usize>i, <u8>(l + nmax));
  }
}

/** §13.1 make_qx_quants (rmse_type 1) with weights w. Writes codes L = l + nmax, returns the scale. */
export function makeQxQuants(n: i32, nmax: i32, x: usize, L: usize, w: usize): f32 {
  const vmax = signedAbsmax(x, n);
  if (Mathf.abs(vmax) < GROUP_MAX_EPS) {
    memory.fill(L, 0, <usize>n);
    return 0;
  }
  const fnmax = <f32>nmax;
  // Trial 0 is the initial scale, trials 1..18 are is = -9..-1, 1..9 (QX_K holds those is).
  store<f32>(QX_IS, <f32>(-nmax) / vmax);
  if (ASC_FEATURE_SIMD) {
    const vn = f32x4.splat(fnmax);
    const vm = f32x4.splat(vmax);
    const tenth = f32x4.splat(<f32>0.1);
    for (let t = 0; t < 20; t += 4) {
      const u = f32x4.add(vn, f32x4.mul(tenth, v128.load(QX_K + (<usize>t << 2))));
      v128.store(QX_IS + 4 + (<usize>t << 2), f32x4.div(f32x4.neg(u), vm));
    }
  } else {
    for (let t = 1; t < 19; t++) {
      const u: f32 = fnmax + <f32>0.1 * load<f32>(QX_K + (<usize>(t - 1) << 2));
      store<f32>(QX_IS + (<usize>t << 2), -u / vmax);
    }
  }
  for (let k = 19; k < 24; k++) store<f32>(QX_IS + (<usize>k << 2), load<f32>(QX_IS + 72));
  if (ASC_FEATURE_SIMD) {
    // |iscale*x| <= nmax + 0.9 here, far inside nearest_int's exact range, where the bit trick
    // is round-half-even, i.e. f32x4.nearest. A -0.0 code (from -0.5 <= v < 0) only adds a
    // signed zero to sums that start at +0.0 and are never -0.0, so the sums are unchanged.
    for (let i = 0; i < n; i++) {
      const xi = f32At(x, i);
      const wi = f32At(w, i);
      v128.store(XS + (<usize>i << 4), f32x4.splat(xi));
      v128.store(WS + (<usize>i << 4), f32x4.splat(wi));
      v128.store(WXS + (<usize>i << 4), f32x4.splat(wi * xi));
    }
    const lo = f32x4.splat(<f32>-nmax);
    const hi = f32x4.splat(<f32>(nmax - 1));
    for (let b = 0; b < 5; b += 2) {
      const isA = v128.load(QX_IS + (<usize>b << 4));
      const isB = v128.load(QX_IS + (<usize>b << 4) + 16);
      let slxA = f32x4.splat(0);
      let sl2A = f32x4.splat(0);
      let slxB = f32x4.splat(0);
      let sl2B = f32x4.splat(0);
      for (let i = 0; i < n; i++) {
        const o = <usize>i << 4;
        const xv = v128.load(XS + o);
        const wx = v128.load(WXS + o);
        const wv = v128.load(WS + o);
        const la = f32x4.pmin(hi, f32x4.pmax(lo, f32x4.nearest(f32x4.mul(isA, xv))));
        const lb = f32x4.pmin(hi, f32x4.pmax(lo, f32x4.nearest(f32x4.mul(isB, xv))));
        slxA = f32x4.add(slxA, f32x4.mul(wx, la));
        sl2A = f32x4.add(sl2A, f32x4.mul(f32x4.mul(wv, la), la));
        slxB = f32x4.add(slxB, f32x4.mul(wx, lb));
        sl2B = f32x4.add(sl2B, f32x4.mul(f32x4.mul(wv, lb), lb));
      }
      v128.store(QX_SLX + (<usize>b << 4), slxA);
      v128.store(QX_SL2 + (<usize>b << 4), sl2A);
      v128.store(QX_SLX + (<usize>b << 4) + 16, slxB);
      v128.store(QX_SL2 + (<usize>b << 4) + 16, sl2B);
    }
  } else {
    for (let k = 0; k < 19; k++) {
      const iscale = load<f32>(QX_IS + (<usize>k << 2));
      let slx: f32 = 0;
      let sl2: f32 = 0;
      for (let i = 0; i < n; i++) {
        const xi = f32At(x, i);
        const wi = f32At(w, i);
        const l = <f32>min(nmax - 1, max(-nmax, nearestInt(iscale * xi)));
        slx += wi * xi * l;
        sl2 += wi * l * l;
      }
      store<f32>(QX_SLX + (<usize>k << 2), slx);
      store<f32>(QX_SL2 + (<usize>k << 2), sl2);
    }
  }
  const slx0 = load<f32>(QX_SLX);
  const sl20 = load<f32>(QX_SL2);
  let scale: f32 = sl20 != 0 ? slx0 / sl20 : 0;
  let best: f32 = scale * slx0;
  let win = 0;
  for (let k = 1; k < 19; k++) {
    const slx = load<f32>(QX_SLX + (<usize>k << 2));
    const sl2 = load<f32>(QX_SL2 + (<usize>k << 2));
    if (sl2 > 0 && slx * slx > best * sl2) {
      win = k;
      scale = slx / sl2;
      best = scale * slx;
    }
  }
  qxCodes(n, nmax, x, L, load<f32>(QX_IS + (<usize>win << 2)));
  return scale;
}

// ---- §13.1 QX on four independent units at once (SIMD build) --------------------------------

const WX4 = memory.data(32 * 16);

/**
 * makeQxQuants on 4 consecutive units of n values (x, w: 4*n floats; L: 4*n bytes; scales: 4
 * floats). Lane k runs unit k: the same trial sums in the same order and the same strict,
 * in-order winner selection (lane masks), hence the same scale and codes as the scalar search.
 */
export function makeQxQuants4(n: i32, nmax: i32, x: usize, w: usize, L: usize, scales: usize): void {
  if (!ASC_FEATURE_SIMD) {
    for (let k = 0; k < 4; k++) {
      const o = <usize>(k * n);
      store<f32>(scales + (<usize>k << 2), makeQxQuants(n, nmax, x + (o << 2), L + o, w + (o << 2)));
    }
    return;
  }
  transposeIn(x, n, X4);
  transposeIn(w, n, W4);
  const zero = f32x4.splat(0);
  let amax = zero;
  let vmax = zero;
  for (let i = 0; i < n; i++) {
    const o = <usize>i << 4;
    const xi = v128.load(X4 + o);
    v128.store(WX4 + o, f32x4.mul(v128.load(W4 + o), xi));
    const av = f32x4.abs(xi);
    const m = f32x4.gt(av, amax);
    amax = v128.bitselect(av, amax, m);
    vmax = v128.bitselect(xi, vmax, m);
  }
  const below = f32x4.lt(amax, f32x4.splat(GROUP_MAX_EPS));
  const lo = f32x4.splat(<f32>-nmax);
  const hi = f32x4.splat(<f32>(nmax - 1));
  const fnmax = <f32>nmax;
  let scale = zero;
  let best = zero;
  let winIs = zero;
  // 19 trials (initial + is = -9..-1, 1..9), two per pass over the elements.
  for (let t = 0; t < 18; t += 2) {
    const uA: f32 = t == 0 ? fnmax : fnmax + <f32>0.1 * load<f32>(QX_K + (<usize>(t - 1) << 2));
    const uB: f32 = fnmax + <f32>0.1 * load<f32>(QX_K + (<usize>t << 2));
    const isA = t == 0 ? f32x4.div(f32x4.splat(<f32>(-nmax)), vmax) : f32x4.div(f32x4.splat(-uA), vmax);
    const isB = f32x4.div(f32x4.splat(-uB), vmax);
    let slxA = zero;
    let sl2A = zero;
    let slxB = zero;
    let sl2B = zero;
    for (let i = 0; i < n; i++) {
      const o = <usize>i << 4;
      const xv = v128.load(X4 + o);
      const wx = v128.load(WX4 + o);
      const wv = v128.load(W4 + o);
      const la = f32x4.pmin(hi, f32x4.pmax(lo, f32x4.nearest(f32x4.mul(isA, xv))));
      const lb = f32x4.pmin(hi, f32x4.pmax(lo, f32x4.nearest(f32x4.mul(isB, xv))));
      slxA = f32x4.add(slxA, f32x4.mul(wx, la));
      sl2A = f32x4.add(sl2A, f32x4.mul(f32x4.mul(wv, la), la));
      slxB = f32x4.add(slxB, f32x4.mul(wx, lb));
      sl2B = f32x4.add(sl2B, f32x4.mul(f32x4.mul(wv, lb), lb));
    }
    if (t == 0) {
      scale = v128.bitselect(f32x4.div(slxA, sl2A), zero, f32x4.ne(sl2A, zero));
      best = f32x4.mul(scale, slxA);
      winIs = isA;
    } else {
      const m = v128.and(f32x4.gt(sl2A, zero), f32x4.gt(f32x4.mul(slxA, slxA), f32x4.mul(best, sl2A)));
      const ns = f32x4.div(slxA, sl2A);
      scale = v128.bitselect(ns, scale, m);
      best = v128.bitselect(f32x4.mul(ns, slxA), best, m);
      winIs = v128.bitselect(isA, winIs, m);
    }
    {
      const m = v128.and(f32x4.gt(sl2B, zero), f32x4.gt(f32x4.mul(slxB, slxB), f32x4.mul(best, sl2B)));
      const ns = f32x4.div(slxB, sl2B);
      scale = v128.bitselect(ns, scale, m);
      best = v128.bitselect(f32x4.mul(ns, slxB), best, m);
      winIs = v128.bitselect(isB, winIs, m);
    }
  }
  {
    // trial 18 (is = 9) alone
    const isA = f32x4.div(f32x4.splat(-(fnmax + <f32>0.1 * <f32>9)), vmax);
    let slxA = zero;
    let sl2A = zero;
    for (let i = 0; i < n; i++) {
      const o = <usize>i << 4;
      const xv = v128.load(X4 + o);
      const la = f32x4.pmin(hi, f32x4.pmax(lo, f32x4.nearest(f32x4.mul(isA, xv))));
      slxA = f32x4.add(slxA, f32x4.mul(v128.load(WX4 + o), la));
      sl2A = f32x4.add(sl2A, f32x4.mul(f32x4.mul(v128.load(W4 + o), la), la));
    }
    const m = v128.and(f32x4.gt(sl2A, zero), f32x4.gt(f32x4.mul(slxA, slxA), f32x4.mul(best, sl2A)));
    const ns = f32x4.div(slxA, sl2A);
    scale = v128.bitselect(ns, scale, m);
    best = v128.bitselect(f32x4.mul(ns, slxA), best, m);
    winIs = v128.bitselect(isA, winIs, m);
  }
  v128.store(scales, v128.bitselect(zero, scale, below));
  const ilo = i32x4.splat(-nmax);
  const ihi = i32x4.splat(nmax - 1);
  const off = i32x4.splat(nmax);
  for (let i = 0; i < n; i++) {
    const o = <usize>i << 4;
    const l = i32x4.add(i32x4.min_s(ihi, i32x4.max_s(ilo, nearestIntV(f32x4.mul(winIs, v128.load(X4 + o))))), off);
    v128.store(LB4 + o, v128.andnot(l, below));
  }
  transposeOutBytes(LB4, n, L);
}
