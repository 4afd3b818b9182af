// The shared scale searches of llama.cpp's quantizers (spec §13.1–§13.4), bit-exact.
//
// Every sum is a sequential left-to-right fp32 accumulation in element order (spec §0), so the
// SIMD build never vectorises *along* a sum. It vectorises across independent sums instead:
// * makeQxQuants / makeQkxQuants (one unit): four trial scales in the four lanes, each lane
//   summing over the elements in the scalar order; the winner is then picked in trial order
//   with the scalar comparisons (QKX: speculatively, see there).
// * makeQxQuants4 / makeQkxQuants4 (four units, used by the K-quants): lane k runs unit k
//   through every scalar step, branches replaced by lane masks.
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
function transposeIn(src: usize, n: i32, dst: usize): void {
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

// ---- §13.2 Q3 on sixteen units (SIMD build) -----------------------------------------------------

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
  // Phase 2 with two slots (s = 0 and 64); a slot's unit is -1 when empty.
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

// ---- §13.4 QP: non-negative sub-scales on an unsigned grid --------------------------------

// x86's default NaN (sign set): what 0/0 yields in the reference build (spec §16.1, §16.2).
const NAN_X86: f32 = reinterpret<f32>(<u32>0xffc00000);

/** §13.4 make_qp_quants. Writes byte codes L (stores wrap), returns sumlx/suml2 (NaN as x86's). */
export function makeQpQuants(n: i32, nmax: i32, x: usize, L: usize, w: usize): f32 {
  let vmax: f32 = 0;
  for (let i = 0; i < n; i++) {
    const v = f32At(x, i);
    vmax = vmax > v ? vmax : v;
  }
  if (vmax == 0) {
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
  const r: f32 = sumlx / suml2;
  return r != r ? NAN_X86 : r;
}
