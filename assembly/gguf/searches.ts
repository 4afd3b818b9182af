// The shared scale searches of llama.cpp's quantizers (spec §13.1–§13.4), bit-exact.
//
// Every sum is a sequential left-to-right fp32 accumulation in element order (spec §0), so the
// SIMD build never vectorises *along* a sum. It vectorises across independent sums instead:
// * makeQxQuants / makeQkxQuants (one unit): four trial scales in the four lanes, each lane
//   summing over the elements in the scalar order; the winner is then picked in trial order
//   with the scalar comparisons (QKX: speculatively, see there).
// * makeQxQuants4 / makeQkxQuants4 (four units, used by the K-quants): lane k runs unit k
//   through every scalar step, branches replaced by lane masks.
// * make_q3_quants on a Q3_K block's sixteen units: q3_search.ts.
// Rounding: the bit trick of nearest_int is reproduced lane-wise (nearestIntV); where the
// argument is provably inside (-2^22, 2^22) the cheaper f32x4.nearest (round-half-even) is
// used, which is the same function there. Both builds therefore produce identical bytes.
import { GROUP_MAX_EPS, nearestInt, signedAbsmax } from '../common';
import { f32At } from './pack';

const MAGIC: f32 = 12582912.0; // 1.5 * 2^23, nearest_int's bit trick

// Lane-parallel nearest_int, exactly the scalar bit trick (inf -> -4194304, canonical NaN -> 0).
@inline export function nearestIntV(v: v128): v128 {
  return i32x4.sub(v128.and(f32x4.add(v, f32x4.splat(MAGIC)), i32x4.splat(0x7fffff)), i32x4.splat(0x400000));
}

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

// Per-trial lane storage for the SIMD searches (n <= 32 elements, 4 lanes each).
const LANES = memory.data(32 * 16);
// Trial scale list of §13.1 (19 entries, padded to 20) and per-trial sums.
const QX_IS = memory.data(24 * 4);
const QX_SLX = memory.data(24 * 4);
const QX_SL2 = memory.data(24 * 4);
// Per-element splats (x, w, w*x, x - min) so the trial loops load one v128 per operand.
const XS = memory.data(32 * 16);
const WS = memory.data(32 * 16);
const WXS = memory.data(32 * 16);
const XMS = memory.data(32 * 16);
const TMP4 = memory.data(64);
// The trial offsets is = -9..-1, 1..9 of §13.1 as floats (padded to 20 entries).
const QX_K = memory.data<f32>([-9, -8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9]);
const LI = memory.data(32 * 4); // int codes of §13.2 / §13.4

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

// ---- Final passes of the K-quants (elementwise, so vectorised freely) ----------------------

/**
 * L[i] = clamp(nearest_int((x[i] + m) / d), lo, hi) + off for i < n (n a multiple of 16), or
 * nearest_int(x[i] / d) when hasAdd is false. Exact for every input (inf/NaN as the bit trick).
 */
export function quantDiv(x: usize, n: i32, hasAdd: bool, m: f32, d: f32, lo: i32, hi: i32, off: i32, L: usize): void {
  if (ASC_FEATURE_SIMD) {
    const vm = f32x4.splat(m);
    const vd = f32x4.splat(d);
    const vlo = i32x4.splat(lo);
    const vhi = i32x4.splat(hi);
    const voff = i32x4.splat(off);
    for (let i = 0; i < n; i += 16) {
      const p = x + (<usize>i << 2);
      let a = v128.load(p);
      let b = v128.load(p + 16);
      let c = v128.load(p + 32);
      let e = v128.load(p + 48);
      if (hasAdd) {
        a = f32x4.add(a, vm);
        b = f32x4.add(b, vm);
        c = f32x4.add(c, vm);
        e = f32x4.add(e, vm);
      }
      const qa = i32x4.add(i32x4.min_s(vhi, i32x4.max_s(vlo, nearestIntV(f32x4.div(a, vd)))), voff);
      const qb = i32x4.add(i32x4.min_s(vhi, i32x4.max_s(vlo, nearestIntV(f32x4.div(b, vd)))), voff);
      const qc = i32x4.add(i32x4.min_s(vhi, i32x4.max_s(vlo, nearestIntV(f32x4.div(c, vd)))), voff);
      const qe = i32x4.add(i32x4.min_s(vhi, i32x4.max_s(vlo, nearestIntV(f32x4.div(e, vd)))), voff);
      v128.store(L + <usize>i, i8x16.narrow_i16x8_u(i16x8.narrow_i32x4_s(qa, qb), i16x8.narrow_i32x4_s(qc, qe)));
    }
  } else {
    for (let i = 0; i < n; i++) {
      const xi = f32At(x, i);
      const v: f32 = hasAdd ? (xi + m) / d : xi / d;
      store<u8>(L + <usize>i, <u8>(min(hi, max(lo, nearestInt(v))) + off));
    }
  }
}

// ---- §13.2 Q3: coordinate descent (nmax = 4, weights x*x) ----------------------------------

/** §13.2 make_q3_quants (do_rmse). Writes codes L = l + nmax (0 when below eps), returns the scale. */
export function makeQ3Quants(n: i32, nmax: i32, x: usize, L: usize): f32 {
  const vmax = signedAbsmax(x, n);
  if (Mathf.abs(vmax) < GROUP_MAX_EPS) {
    memory.fill(L, 0, <usize>n);
    return 0;
  }
  const iscale: f32 = <f32>(-nmax) / vmax;
  let sumlx: f32 = 0;
  let suml2: f32 = 0;
  for (let i = 0; i < n; i++) {
    const xi = f32At(x, i);
    const l = min(nmax - 1, max(-nmax, nearestInt(iscale * xi)));
    store<i32>(LI + (<usize>i << 2), l);
    const w = xi * xi;
    sumlx += w * xi * <f32>l;
    suml2 += w * <f32>l * <f32>l;
  }
  for (let itry = 0; itry < 5; itry++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      const xi = f32At(x, i);
      const w = xi * xi;
      const li = load<i32>(LI + (<usize>i << 2));
      let slx: f32 = sumlx - w * xi * <f32>li;
      if (slx > 0) {
        let sl2: f32 = suml2 - w * <f32>li * <f32>li;
        const nl = min(nmax - 1, max(-nmax, nearestInt((xi * sl2) / slx)));
        if (nl != li) {
          slx += w * xi * <f32>nl;
          sl2 += w * <f32>nl * <f32>nl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            store<i32>(LI + (<usize>i << 2), nl);
            sumlx = slx;
            suml2 = sl2;
            changed++;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (let i = 0; i < n; i++) store<u8>(L + <usize>i, <u8>(load<i32>(LI + (<usize>i << 2)) + nmax));
  return sumlx / suml2;
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

// 4 units of n values (n % 4 == 0, unit k at src + 4*k*n) -> n vectors (lane k = unit k).
export function transposeIn(src: usize, n: i32, dst: usize): void {
  const stride = <usize>n << 2;
  for (let i = 0; i < n; i += 4) {
    const p = src + (<usize>i << 2);
    const a = v128.load(p);
    const b = v128.load(p + stride);
    const c = v128.load(p + 2 * stride);
    const d = v128.load(p + 3 * stride);
    const t0 = v128.shuffle<i32>(a, b, 0, 4, 1, 5);
    const t1 = v128.shuffle<i32>(c, d, 0, 4, 1, 5);
    const t2 = v128.shuffle<i32>(a, b, 2, 6, 3, 7);
    const t3 = v128.shuffle<i32>(c, d, 2, 6, 3, 7);
    const q = dst + (<usize>i << 4);
    v128.store(q, v128.shuffle<i32>(t0, t1, 0, 1, 4, 5));
    v128.store(q + 16, v128.shuffle<i32>(t0, t1, 2, 3, 6, 7));
    v128.store(q + 32, v128.shuffle<i32>(t2, t3, 0, 1, 4, 5));
    v128.store(q + 48, v128.shuffle<i32>(t2, t3, 2, 3, 6, 7));
  }
}

// n i32 vectors of byte-sized codes (lane k = unit k, n % 16 == 0) -> n bytes per unit at L + k*n.
function transposeOutBytes(src: usize, n: i32, L: usize): void {
  for (let i = 0; i < n; i += 16) {
    // 4 groups of 4 elements, transposed to unit-major, then narrowed to 16 bytes per unit.
    let u0a = v128.splat<i32>(0), u1a = u0a, u2a = u0a, u3a = u0a;
    let u0b = u0a, u1b = u0a, u2b = u0a, u3b = u0a;
    for (let g = 0; g < 4; g++) {
      const q = src + (<usize>(i + 4 * g) << 4);
      const a = v128.load(q);
      const b = v128.load(q + 16);
      const c = v128.load(q + 32);
      const d = v128.load(q + 48);
      const t0 = v128.shuffle<i32>(a, b, 0, 4, 1, 5);
      const t1 = v128.shuffle<i32>(c, d, 0, 4, 1, 5);
      const t2 = v128.shuffle<i32>(a, b, 2, 6, 3, 7);
      const t3 = v128.shuffle<i32>(c, d, 2, 6, 3, 7);
      const r0 = v128.shuffle<i32>(t0, t1, 0, 1, 4, 5);
      const r1 = v128.shuffle<i32>(t0, t1, 2, 3, 6, 7);
      const r2 = v128.shuffle<i32>(t2, t3, 0, 1, 4, 5);
      const r3 = v128.shuffle<i32>(t2, t3, 2, 3, 6, 7);
      if (g == 0) { u0a = r0; u1a = r1; u2a = r2; u3a = r3; }
      else if (g == 1) { u0a = i16x8.narrow_i32x4_s(u0a, r0); u1a = i16x8.narrow_i32x4_s(u1a, r1); u2a = i16x8.narrow_i32x4_s(u2a, r2); u3a = i16x8.narrow_i32x4_s(u3a, r3); }
      else if (g == 2) { u0b = r0; u1b = r1; u2b = r2; u3b = r3; }
      else { u0b = i16x8.narrow_i32x4_s(u0b, r0); u1b = i16x8.narrow_i32x4_s(u1b, r1); u2b = i16x8.narrow_i32x4_s(u2b, r2); u3b = i16x8.narrow_i32x4_s(u3b, r3); }
    }
    v128.store(L + <usize>i, i8x16.narrow_i16x8_u(u0a, u0b));
    v128.store(L + <usize>(n + i), i8x16.narrow_i16x8_u(u1a, u1b));
    v128.store(L + <usize>(2 * n + i), i8x16.narrow_i16x8_u(u2a, u2b));
    v128.store(L + <usize>(3 * n + i), i8x16.narrow_i16x8_u(u3a, u3b));
  }
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

// ---- §13.4 QP: non-negative sub-scales on an unsigned grid --------------------------------

// x86's default NaN (sign set): what 0/0 yields in the reference build (spec §16.1, §16.2).
const NAN_X86: f32 = reinterpret<f32>(<u32>0xffc00000);

/**
 * §13.4 make_qp_quants. Writes byte codes L (stores wrap), returns sumlx/suml2 (NaN as x86's).
 * `guarded`: the later release's version (IQ2_XXS): all codes 0 below GROUP_MAX_EPS rather than
 * at 0, and 0 returned where suml2 is not positive. The K-quants keep b4747's (spec §16).
 */
export function makeQpQuants(n: i32, nmax: i32, x: usize, L: usize, w: usize, guarded: bool = false): f32 {
  let vmax: f32 = 0;
  for (let i = 0; i < n; i++) {
    const v = f32At(x, i);
    vmax = vmax > v ? vmax : v;
  }
  if (guarded ? vmax < GROUP_MAX_EPS : vmax == 0) {
    memory.fill(L, 0, <usize>n);
    return 0;
  }
  const fnmax = <f32>nmax;
  let iscale: f32 = fnmax / vmax;
  for (let i = 0; i < n; i++) store<u8>(L + <usize>i, <u8>nearestInt(iscale * f32At(x, i)));
  const scale: f32 = 1 / iscale;
  let best: f32 = 0;
  for (let i = 0; i < n; i++) {
    const diff: f32 = f32At(x, i) - scale * <f32>load<u8>(L + <usize>i);
    best += f32At(w, i) * diff * diff;
  }
  for (let is = -4; is <= 4; is++) {
    if (is == 0) continue;
    const iscaleIs: f32 = (<f32>0.1 * <f32>is + fnmax) / vmax;
    const scaleIs: f32 = 1 / iscaleIs;
    let mse: f32 = 0;
    for (let i = 0; i < n; i++) {
      const xi = f32At(x, i);
      const l = min(nmax, nearestInt(iscaleIs * xi));
      const diff: f32 = xi - scaleIs * <f32>l;
      mse += f32At(w, i) * diff * diff;
    }
    if (mse < best) {
      best = mse;
      iscale = iscaleIs;
    }
  }
  let sumlx: f32 = 0;
  let suml2: f32 = 0;
  for (let i = 0; i < n; i++) {
    const xi = f32At(x, i);
    const wi = f32At(w, i);
    const l = min(nmax, nearestInt(iscale * xi));
    store<u8>(L + <usize>i, <u8>l);
    sumlx += wi * xi * <f32>l;
    suml2 += wi * <f32>l * <f32>l;
  }
  for (let itry = 0; itry < 5; itry++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      const xi = f32At(x, i);
      const wi = f32At(w, i);
      const li = <i32>load<u8>(L + <usize>i);
      let slx: f32 = sumlx - wi * xi * <f32>li;
      let sl2: f32 = suml2 - wi * <f32>li * <f32>li;
      if (slx > 0 && sl2 > 0) {
        const nl = min(nmax, nearestInt((xi * sl2) / slx));
        if (nl != li) {
          slx += wi * xi * <f32>nl;
          sl2 += wi * <f32>nl * <f32>nl;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            store<u8>(L + <usize>i, <u8>nl);
            sumlx = slx;
            suml2 = sl2;
            changed++;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  if (guarded) return suml2 > 0 ? sumlx / suml2 : 0;
  const r: f32 = sumlx / suml2;
  return r != r ? NAN_X86 : r;
}
