// §13.3 make_qkx2_quants / make_qkx3_quants, llama.cpp's asymmetric (scale, min) search (Q4_1,
// Q5_1 with an importance matrix; Q2_K, Q4_K, Q5_K), bit-exact; see searches.ts for how the SIMD
// build keeps every sum's order.
// * makeQkxQuants (one unit): four trial scales in the lanes, the winner picked speculatively in
//   trial order with the scalar comparisons.
// * makeQkxQuants4 (four units, the K-quants): lane k runs unit k through every scalar step.
import { nearestInt } from '../common';
import { f32At } from './pack';
import { nearestIntV, transposeIn, transposeOutBytes } from './searches';

// Per-trial lane storage (n <= 32 elements, 4 lanes each).
const LANES = memory.data(32 * 16);
// Per-element splats (x, w, x - min) so the trial loops load one v128 per operand.
const XS = memory.data(32 * 16);
const WS = memory.data(32 * 16);
const XMS = memory.data(32 * 16);
const TMP4 = memory.data(64);

// Per lane: sum over i of w_i * |ts*L_i + tm - x_i| (useMad) or w_i * (ts*L_i + tm - x_i)^2, in
// order; L, X, W hold n lane vectors. The SIMD QKX searches' trial error.
@inline function weightedErrV(ts: v128, tm: v128, L: usize, X: usize, W: usize, n: i32, useMad: bool): v128 {
  let mad = f32x4.splat(0);
  if (useMad) {
    for (let i = 0; i < n; i++) {
      const o = <usize>i << 4;
      const diff = f32x4.abs(f32x4.sub(f32x4.add(f32x4.mul(ts, v128.load(L + o)), tm), v128.load(X + o)));
      mad = f32x4.add(mad, f32x4.mul(v128.load(W + o), diff));
    }
  } else {
    for (let i = 0; i < n; i++) {
      const o = <usize>i << 4;
      const diff = f32x4.sub(f32x4.add(f32x4.mul(ts, v128.load(L + o)), tm), v128.load(X + o));
      mad = f32x4.add(mad, f32x4.mul(v128.load(W + o), f32x4.mul(diff, diff)));
    }
  }
  return mad;
}

// ---- §13.3 QKX: asymmetric (scale, min) search --------------------------------------------

/**
 * §13.3 make_qkx2_quants / make_qkx3_quants with weights w. Writes codes L in [0, nmax] and
 * the_min = -min (>= 0, may be -0.0) to theMin; returns the scale. Laux: n bytes of temp.
 */
export function makeQkxQuants(
  n: i32, nmax: i32, x: usize, w: usize, L: usize, Laux: usize, theMin: usize,
  rmin: f32, rdelta: f32, nstep: i32, useMad: bool,
): f32 {
  let vmin = f32At(x, 0);
  let vmax = vmin;
  let sumW = f32At(w, 0);
  let sumX: f32 = sumW * vmin;
  for (let i = 1; i < n; i++) {
    const xi = f32At(x, i);
    if (xi < vmin) vmin = xi;
    if (xi > vmax) vmax = xi;
    const wi = f32At(w, i);
    sumW += wi;
    sumX += wi * xi;
  }
  const xlo = vmin; // smallest element: with vmax it bounds |x - min| in the SIMD trials
  if (vmin > 0) vmin = 0;
  if (vmax <= vmin) {
    memory.fill(L, 0, <usize>n);
    store<f32>(theMin, -vmin);
    return 0;
  }
  const fnmax = <f32>nmax;
  let iscale: f32 = fnmax / (vmax - vmin);
  let scale: f32 = 1 / iscale;
  let best: f32 = 0;
  for (let i = 0; i < n; i++) {
    const xi = f32At(x, i);
    const l = min(nmax, max(0, nearestInt(iscale * (xi - vmin))));
    store<u8>(L + <usize>i, <u8>l);
    let diff: f32 = scale * <f32>l + vmin - xi;
    diff = useMad ? Mathf.abs(diff) : diff * diff;
    best += f32At(w, i) * diff;
  }
  if (nstep < 1) {
    store<f32>(theMin, -vmin);
    return scale;
  }
  let pos = 0;
  if (ASC_FEATURE_SIMD) {
    // Speculative batches of 4 trials sharing the current min. A trial depends on earlier ones
    // only through the running min, so when an accepted trial changes the min (bitwise), the
    // batch is abandoned after it and the next batch restarts at the following trial.
    for (let i = 0; i < n; i++) {
      v128.store(XS + (<usize>i << 4), v128.load32_splat(x + (<usize>i << 2)));
      v128.store(WS + (<usize>i << 4), v128.load32_splat(w + (<usize>i << 2)));
    }
    const vsumW = f32x4.splat(sumW);
    const vsumX = f32x4.splat(sumX);
    const zero = f32x4.splat(0);
    const ftop = f32x4.splat(fnmax);
    const top = i32x4.splat(nmax);
    const izero = i32x4.splat(0);
    let xmFor: u32 = reinterpret<u32>(vmin) ^ 1; // forces the first fill of XMS
    while (pos <= nstep) {
      const cnt = min(4, nstep + 1 - pos);
      const range: f32 = vmax - vmin;
      let ismax: f32 = 0;
      for (let k = 0; k < 4; k++) {
        const is = pos + min(k, cnt - 1);
        const v: f32 = (rmin + rdelta * <f32>is + fnmax) / range;
        store<f32>(TMP4 + (<usize>k << 2), v);
        ismax = Mathf.max(ismax, Mathf.abs(v));
      }
      const isv = v128.load(TMP4);
      if (xmFor != reinterpret<u32>(vmin)) {
        for (let i = 0; i < n; i++) v128.store(XMS + (<usize>i << 4), f32x4.splat(f32At(x, i) - vmin));
        xmFor = reinterpret<u32>(vmin);
      }
      // Every |iscale*(x - min)| below 2^20 (and finite): round-half-even (f32x4.nearest) is
      // exactly the bit trick there, and pmax(+0, .) turns its -0.0 into +0.0.
      // Otherwise (fp32-denormal or extreme rows) the bit trick itself, lane by lane.
      const bound: f32 = ismax * Mathf.max(Mathf.abs(range), Mathf.abs(xlo - vmin));
      const fast = bound < <f32>1048576.0;
      let sl = f32x4.splat(0);
      let sl2 = f32x4.splat(0);
      let sxl = f32x4.splat(0);
      if (fast) {
        for (let i = 0; i < n; i++) {
          const o = <usize>i << 4;
          const l = f32x4.pmin(ftop, f32x4.pmax(zero, f32x4.nearest(f32x4.mul(isv, v128.load(XMS + o)))));
          v128.store(LANES + o, l);
          const wl = f32x4.mul(v128.load(WS + o), l);
          sl = f32x4.add(sl, wl);
          sl2 = f32x4.add(sl2, f32x4.mul(wl, l));
          sxl = f32x4.add(sxl, f32x4.mul(wl, v128.load(XS + o)));
        }
      } else {
        for (let i = 0; i < n; i++) {
          const o = <usize>i << 4;
          const l = f32x4.convert_i32x4_s(i32x4.min_s(top, i32x4.max_s(izero, nearestIntV(f32x4.mul(isv, v128.load(XMS + o))))));
          v128.store(LANES + o, l);
          const wl = f32x4.mul(v128.load(WS + o), l);
          sl = f32x4.add(sl, wl);
          sl2 = f32x4.add(sl2, f32x4.mul(wl, l));
          sxl = f32x4.add(sxl, f32x4.mul(wl, v128.load(XS + o)));
        }
      }
      const D = f32x4.sub(f32x4.mul(vsumW, sl2), f32x4.mul(sl, sl));
      let ts = f32x4.div(f32x4.sub(f32x4.mul(vsumW, sxl), f32x4.mul(vsumX, sl)), D);
      let tm = f32x4.div(f32x4.sub(f32x4.mul(sl2, vsumX), f32x4.mul(sl, sxl)), D);
      const pos0 = f32x4.gt(tm, zero);
      ts = v128.bitselect(f32x4.div(sxl, sl2), ts, pos0);
      tm = v128.bitselect(zero, tm, pos0);
      const mad = weightedErrV(ts, tm, LANES, XS, WS, n, useMad);
      v128.store(TMP4, D);
      v128.store(TMP4 + 16, mad);
      v128.store(TMP4 + 32, ts);
      v128.store(TMP4 + 48, tm);
      let next = pos + cnt;
      for (let k = 0; k < cnt; k++) {
        const dk = load<f32>(TMP4 + (<usize>k << 2));
        const mk = load<f32>(TMP4 + 16 + (<usize>k << 2));
        if (dk > 0 && mk < best) {
          for (let i = 0; i < n; i++) store<u8>(L + <usize>i, <u8>load<f32>(LANES + (<usize>i << 4) + (<usize>k << 2)));
          best = mk;
          scale = load<f32>(TMP4 + 32 + (<usize>k << 2));
          const nm = load<f32>(TMP4 + 48 + (<usize>k << 2));
          if (reinterpret<u32>(nm) != reinterpret<u32>(vmin)) {
            vmin = nm;
            next = pos + k + 1;
            break;
          }
        }
      }
      pos = next;
    }
  }
  for (let is = pos; is <= nstep; is++) {
    iscale = (rmin + rdelta * <f32>is + fnmax) / (vmax - vmin);
    let sl: f32 = 0;
    let sl2: f32 = 0;
    let sxl: f32 = 0;
    for (let i = 0; i < n; i++) {
      const xi = f32At(x, i);
      const l = min(nmax, max(0, nearestInt(iscale * (xi - vmin))));
      store<u8>(Laux + <usize>i, <u8>l);
      const wl = f32At(w, i) * <f32>l;
      sl += wl;
      sl2 += wl * <f32>l;
      sxl += wl * xi;
    }
    const D: f32 = sumW * sl2 - sl * sl;
    if (D > 0) {
      let ts: f32 = (sumW * sxl - sumX * sl) / D;
      let tm: f32 = (sl2 * sumX - sl * sxl) / D;
      if (tm > 0) {
        tm = 0;
        ts = sxl / sl2;
      }
      let mad: f32 = 0;
      for (let i = 0; i < n; i++) {
        let diff: f32 = ts * <f32>load<u8>(Laux + <usize>i) + tm - f32At(x, i);
        diff = useMad ? Mathf.abs(diff) : diff * diff;
        mad += f32At(w, i) * diff;
      }
      if (mad < best) {
        memory.copy(L, Laux, <usize>n);
        best = mad;
        scale = ts;
        vmin = tm;
      }
    }
  }
  store<f32>(theMin, -vmin);
  return scale;
}

// ---- §13.3 QKX on four independent units at once (SIMD build) ------------------------------

const X4 = memory.data(32 * 16);
const W4 = memory.data(32 * 16);
const LA4 = memory.data(32 * 16);
const LB4 = memory.data(32 * 16);

/**
 * makeQkxQuants on 4 consecutive units of n values (x, w: 4*n floats; L: 4*n bytes; theMin,
 * scales: 4 floats each). Lane k of every v128 runs unit k through exactly the scalar steps,
 * running min and acceptance included (lane masks instead of branches), so each unit gets the
 * bytes makeQkxQuants would give it. The scalar build simply calls makeQkxQuants four times.
 */
export function makeQkxQuants4(
  n: i32, nmax: i32, x: usize, w: usize, L: usize, Laux: usize, theMin: usize, scales: usize,
  rmin: f32, rdelta: f32, nstep: i32, useMad: bool,
): void {
  if (!ASC_FEATURE_SIMD || nstep < 1) {
    for (let k = 0; k < 4; k++) {
      const o = <usize>(k * n);
      store<f32>(scales + (<usize>k << 2), makeQkxQuants(n, nmax, x + (o << 2), w + (o << 2), L + o, Laux, theMin + (<usize>k << 2), rmin, rdelta, nstep, useMad));
    }
    return;
  }
  transposeIn(x, n, X4);
  transposeIn(w, n, W4);
  const zero = f32x4.splat(0);
  const ftop = f32x4.splat(<f32>nmax);
  const top = i32x4.splat(nmax);
  const izero = i32x4.splat(0);
  // step 1: first min / max (strict), sum_w and sum_x starting from the first term
  let vmin = v128.load(X4);
  let vmax = vmin;
  let sumW = v128.load(W4);
  let sumX = f32x4.mul(sumW, vmin);
  for (let i = 1; i < n; i++) {
    const xi = v128.load(X4 + (<usize>i << 4));
    const wi = v128.load(W4 + (<usize>i << 4));
    vmin = v128.bitselect(xi, vmin, f32x4.lt(xi, vmin));
    vmax = v128.bitselect(xi, vmax, f32x4.gt(xi, vmax));
    sumW = f32x4.add(sumW, wi);
    sumX = f32x4.add(sumX, f32x4.mul(wi, xi));
  }
  const xlo = vmin;
  vmin = v128.bitselect(zero, vmin, f32x4.gt(vmin, zero));
  const vmin0 = vmin;
  const degenerate = f32x4.le(vmax, vmin);
  // step 3: initial codes and error (exact bit-trick rounding)
  let iscale = f32x4.div(ftop, f32x4.sub(vmax, vmin));
  let scale = f32x4.div(f32x4.splat(1), iscale);
  let best = f32x4.splat(0);
  for (let i = 0; i < n; i++) {
    const o = <usize>i << 4;
    const xi = v128.load(X4 + o);
    const l = f32x4.convert_i32x4_s(i32x4.min_s(top, i32x4.max_s(izero, nearestIntV(f32x4.mul(iscale, f32x4.sub(xi, vmin))))));
    v128.store(LB4 + o, l);
    let diff = f32x4.sub(f32x4.add(f32x4.mul(scale, l), vmin), xi);
    diff = useMad ? f32x4.abs(diff) : f32x4.mul(diff, diff);
    best = f32x4.add(best, f32x4.mul(v128.load(W4 + o), diff));
  }
  // step 4: the trials
  const fnmax = <f32>nmax;
  const limit = f32x4.splat(<f32>1048576.0);
  for (let is = 0; is <= nstep; is++) {
    const range = f32x4.sub(vmax, vmin);
    const isv = f32x4.div(f32x4.splat(rmin + rdelta * <f32>is + fnmax), range);
    // |iscale*(x - min)| < 2^20 in every live lane: f32x4.nearest (round-half-even) equals
    // the bit trick, and pmax(+0, .) removes its -0.0. Otherwise the bit trick itself.
    const bound = f32x4.mul(f32x4.abs(isv), f32x4.max(f32x4.abs(range), f32x4.abs(f32x4.sub(xlo, vmin))));
    const fast = i32x4.all_true(v128.or(f32x4.lt(bound, limit), degenerate));
    let sl = f32x4.splat(0);
    let sl2 = f32x4.splat(0);
    let sxl = f32x4.splat(0);
    if (fast) {
      for (let i = 0; i < n; i++) {
        const o = <usize>i << 4;
        const xi = v128.load(X4 + o);
        const l = f32x4.pmin(ftop, f32x4.pmax(zero, f32x4.nearest(f32x4.mul(isv, f32x4.sub(xi, vmin)))));
        v128.store(LA4 + o, l);
        const wl = f32x4.mul(v128.load(W4 + o), l);
        sl = f32x4.add(sl, wl);
        sl2 = f32x4.add(sl2, f32x4.mul(wl, l));
        sxl = f32x4.add(sxl, f32x4.mul(wl, xi));
      }
    } else {
      for (let i = 0; i < n; i++) {
        const o = <usize>i << 4;
        const xi = v128.load(X4 + o);
        const l = f32x4.convert_i32x4_s(i32x4.min_s(top, i32x4.max_s(izero, nearestIntV(f32x4.mul(isv, f32x4.sub(xi, vmin))))));
        v128.store(LA4 + o, l);
        const wl = f32x4.mul(v128.load(W4 + o), l);
        sl = f32x4.add(sl, wl);
        sl2 = f32x4.add(sl2, f32x4.mul(wl, l));
        sxl = f32x4.add(sxl, f32x4.mul(wl, xi));
      }
    }
    const D = f32x4.sub(f32x4.mul(sumW, sl2), f32x4.mul(sl, sl));
    const dpos = f32x4.gt(D, zero);
    if (!v128.any_true(dpos)) continue;
    let ts = f32x4.div(f32x4.sub(f32x4.mul(sumW, sxl), f32x4.mul(sumX, sl)), D);
    let tm = f32x4.div(f32x4.sub(f32x4.mul(sl2, sumX), f32x4.mul(sl, sxl)), D);
    const mpos = f32x4.gt(tm, zero);
    ts = v128.bitselect(f32x4.div(sxl, sl2), ts, mpos);
    tm = v128.bitselect(zero, tm, mpos);
    const mad = weightedErrV(ts, tm, LA4, X4, W4, n, useMad);
    const acc = v128.and(dpos, f32x4.lt(mad, best));
    if (!v128.any_true(acc)) continue;
    best = v128.bitselect(mad, best, acc);
    scale = v128.bitselect(ts, scale, acc);
    vmin = v128.bitselect(tm, vmin, acc);
    for (let i = 0; i < n; i++) {
      const o = <usize>i << 4;
      v128.store(LB4 + o, v128.bitselect(v128.load(LA4 + o), v128.load(LB4 + o), acc));
    }
  }
  // step 2 for units with max <= min: codes 0, scale 0, the_min from the (clamped) first min
  scale = v128.bitselect(zero, scale, degenerate);
  vmin = v128.bitselect(vmin0, vmin, degenerate);
  v128.store(scales, scale);
  v128.store(theMin, f32x4.neg(vmin));
  for (let i = 0; i < n; i++) {
    const o = <usize>i << 4;
    v128.store(LB4 + o, v128.andnot(i32x4.trunc_sat_f32x4_s(v128.load(LB4 + o)), degenerate));
  }
  transposeOutBytes(LB4, n, L);
}
