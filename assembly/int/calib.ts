// Calibration primitives of the integer formats: range reductions, exact order statistics, the
// MSE clip-ratio grid and the codes themselves. Every reduction here is either order-free (min,
// max) or a left-to-right sum per lane, so the SIMD and scalar builds agree bit for bit.

// Largest |x| of n floats (max is order-free, so 4 lanes are as good as one). pmin/pmax (one x86
// instruction each, unlike wasm's NaN- and zero-sign-exact min/max) agree with min/max here: no
// NaN reaches a kernel and the only ties they could break differently are +0 / -0.
export function absMax(x: usize, n: i32): f32 {
  let i = 0;
  let m: f32 = 0;
  if (ASC_FEATURE_SIMD) {
    if (n >= 16) {
      let a = f32x4.splat(0), b = a, c = a, d = a;
      for (; i + 16 <= n; i += 16) {
        const p = x + (<usize>i << 2);
        a = f32x4.pmax(a, f32x4.abs(v128.load(p)));
        b = f32x4.pmax(b, f32x4.abs(v128.load(p, 16)));
        c = f32x4.pmax(c, f32x4.abs(v128.load(p, 32)));
        d = f32x4.pmax(d, f32x4.abs(v128.load(p, 48)));
      }
      a = f32x4.pmax(f32x4.pmax(a, b), f32x4.pmax(c, d));
      a = f32x4.pmax(a, i32x4.shuffle(a, a, 2, 3, 0, 1));
      m = f32x4.extract_lane(f32x4.pmax(a, i32x4.shuffle(a, a, 1, 0, 3, 2)), 0);
    }
  }
  for (; i < n; i++) {
    const a = Mathf.abs(load<f32>(x + (<usize>i << 2)));
    m = a > m ? a : m;
  }
  return m;
}

// Minimum and maximum of n >= 1 floats, written to mm[0], mm[1]. A zero result is written as +0
// (pmin/pmax may pick either sign of zero), so the result does not depend on the visiting order.
export function minMax(x: usize, n: i32, mm: usize): void {
  let i = 0;
  let lo = load<f32>(x);
  let hi = lo;
  if (ASC_FEATURE_SIMD) {
    if (n >= 8) {
      let a = v128.load(x), b = a, c = a, d = a;
      for (; i + 8 <= n; i += 8) {
        const p = x + (<usize>i << 2);
        const u = v128.load(p);
        const v = v128.load(p, 16);
        a = f32x4.pmin(a, u);
        b = f32x4.pmax(b, u);
        c = f32x4.pmin(c, v);
        d = f32x4.pmax(d, v);
      }
      a = f32x4.pmin(a, c);
      b = f32x4.pmax(b, d);
      a = f32x4.pmin(a, i32x4.shuffle(a, a, 2, 3, 0, 1));
      b = f32x4.pmax(b, i32x4.shuffle(b, b, 2, 3, 0, 1));
      lo = f32x4.extract_lane(f32x4.pmin(a, i32x4.shuffle(a, a, 1, 0, 3, 2)), 0);
      hi = f32x4.extract_lane(f32x4.pmax(b, i32x4.shuffle(b, b, 1, 0, 3, 2)), 0);
    }
  }
  for (; i < n; i++) {
    const v = load<f32>(x + (<usize>i << 2));
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  store<f32>(mm, lo + 0);
  store<f32>(mm, hi + 0, 4);
}

// The k-th smallest (1-based) of the n values |x| as float bits (|x| orders like its bits).
// Otherwise radix select over a histogram at `hist` (1 KiB): 8 passes of 4-bit digits for groups (little to
// clear and scan), 4 passes of 8-bit digits for long rows. Exact, O(n) per pass, no copy.
export function kthAbsBits(x: usize, n: i32, k: i32, hist: usize): u32 {
  // High percentiles (the usual clipping use) sit a few ranks below the top: walk down from the
  // maximum, one pass per distinct value, counting ties.
  let fromTop = n - k + 1;
  if (fromTop <= 8) {
    let below: u32 = 0x80000000; // every |x| bit pattern is smaller
    while (true) {
      let m: u32 = 0;
      let c = 0;
      for (let i = 0; i < n; i++) {
        const b = load<u32>(x + (<usize>i << 2)) & 0x7fffffff;
        if (b < below) {
          if (b > m) {
            m = b;
            c = 1;
          } else if (b == m) c++;
        }
      }
      if (c >= fromTop || c == 0) return m;
      fromTop -= c;
      below = m;
    }
  }
  const width = n <= 512 ? 4 : 8;
  const nbins = 1 << width;
  const mask: u32 = <u32>nbins - 1;
  let prefix: u32 = 0;
  let rank = k;
  for (let shift = 32 - width; shift >= 0; shift -= width) {
    memory.fill(hist, 0, <usize>nbins << 2);
    const hiShift = shift + width;
    for (let i = 0; i < n; i++) {
      const b = load<u32>(x + (<usize>i << 2)) & 0x7fffffff;
      if (hiShift == 32 || (b >>> hiShift) == (prefix >>> hiShift)) {
        const h = hist + (<usize>((b >>> shift) & mask) << 2);
        store<u32>(h, load<u32>(h) + 1);
      }
    }
    let below = 0;
    for (let bin = 0; bin < nbins; bin++) {
      const c = <i32>load<u32>(hist + (<usize>bin << 2));
      if (below + c >= rank) {
        prefix |= <u32>bin << shift;
        rank -= below;
        break;
      }
      below += c;
    }
  }
  return prefix;
}

// Nearest rank of the p-th percentile among n values: ceil(p*n/100) clamped to [1, n].
export function percentileRank(p: f32, n: f64): f64 {
  const k = Math.ceil((<f64>p * n) / 100.0);
  return k < 1 ? 1 : k > n ? n : k;
}

// clamp(round_half_even(v), lo, hi) for integer bounds lo < hi, v not NaN: clamping first is the
// same, and then adding 1.5 * 2^23 rounds (half to even) and leaves the integer in the low
// mantissa bits. Comparisons instead of min/max: cheaper in wasm and equal without NaN.
@inline export function roundClamp(v: f32, lo: f32, hi: f32): i32 {
  const c = v < lo ? lo : v > hi ? hi : v;
  return reinterpret<i32>(c + <f32>12582912.0) - 0x4b400000;
}

// Symmetric codes clamp(round_half_even(x / s), -qmax, qmax); s == 0 gives all zeros.
// Division rather than a reciprocal: a subnormal s has no finite f32 reciprocal.
export function symCodes(x: usize, n: i32, s: f32, qmax: i32, out: usize): void {
  codesRun(x, n, s, 0, -<f32>qmax, <f32>qmax, false, out);
}

// Affine codes clamp(round((x - b) / s), 0, qmax): half to even against the stored (f16) s and b,
// or half away from zero (`away`, MLX's rule, see affine.ts).
export function affineCodes(x: usize, n: i32, s: f32, b: f32, qmax: i32, out: usize, away: bool = false): void {
  // Two inlined copies with the mode constant: no branch inside the loops.
  if (away) codesRun(x, n, s, b, 0, <f32>qmax, true, out, true);
  else codesRun(x, n, s, b, 0, <f32>qmax, true, out, false);
}

// Half away from zero of v >= 0: trunc(v) + (fraction >= 0.5); the fraction v - trunc(v) is exact,
// unlike v + 0.5 (0.49999997 + 0.5 rounds to 1).
@inline export function roundHalfUp(v: f32): f32 {
  const t = Mathf.trunc(v);
  return v - t >= 0.5 ? t + 1 : t;
}

// The same for four lanes of v >= 0.
@inline export function roundHalfUp4(v: v128): v128 {
  const t = f32x4.trunc(v);
  return f32x4.add(t, v128.and(f32x4.ge(f32x4.sub(v, t), f32x4.splat(0.5)), f32x4.splat(1)));
}

// clamp(round((x - b) / s), lo, hi) as i32 (no subtraction unless affine), half to even or, with
// `away` (lo >= 0), half away from zero; s == 0: zeros.
@inline function codesRun(x: usize, n: i32, s: f32, b: f32, lo: f32, hi: f32, affine: bool, out: usize, away: bool = false): void {
  if (s == 0) {
    memory.fill(out, 0, <usize>n << 2);
    return;
  }
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    const vs = f32x4.splat(s);
    const vb = f32x4.splat(b);
    const vhi = f32x4.splat(hi);
    const vlo = f32x4.splat(lo);
    for (; i + 8 <= n; i += 8) {
      const p = x + (<usize>i << 2);
      const o = out + (<usize>i << 2);
      let u = v128.load(p);
      let v = v128.load(p, 16);
      if (affine) {
        u = f32x4.sub(u, vb);
        v = f32x4.sub(v, vb);
      }
      if (away) {
        // Clamping first equals clamping after: the bounds are integers.
        v128.store(o, i32x4.trunc_sat_f32x4_s(roundHalfUp4(f32x4.pmin(f32x4.pmax(f32x4.div(u, vs), vlo), vhi))));
        v128.store(o, i32x4.trunc_sat_f32x4_s(roundHalfUp4(f32x4.pmin(f32x4.pmax(f32x4.div(v, vs), vlo), vhi))), 16);
      } else {
        v128.store(o, i32x4.trunc_sat_f32x4_s(f32x4.pmin(f32x4.pmax(f32x4.nearest(f32x4.div(u, vs)), vlo), vhi)));
        v128.store(o, i32x4.trunc_sat_f32x4_s(f32x4.pmin(f32x4.pmax(f32x4.nearest(f32x4.div(v, vs)), vlo), vhi)), 16);
      }
    }
  }
  for (; i < n; i++) {
    const xi = load<f32>(x + (<usize>i << 2));
    const v = (affine ? xi - b : xi) / s;
    if (away) {
      // Comparisons, not min/max: the same result without NaN (never passed) and as pmin/pmax above.
      store<i32>(out + (<usize>i << 2), <i32>roundHalfUp(v < lo ? lo : v > hi ? hi : v));
    } else {
      store<i32>(out + (<usize>i << 2), roundClamp(v, lo, hi));
    }
  }
}

// Candidate clip ratio j of an N-step MSE grid: 1 - 0.8*j/N (j = 0 is plain absmax), as f32.
// (Typed step by step: inside <f32>(...) AssemblyScript would read the literals as f32.)
@inline export function gridRatio(j: i32, steps: i32): f32 {
  const a: f64 = 0.8 * <f64>j;
  const r: f64 = 1.0 - a / <f64>steps;
  return <f32>r;
}

// Squared symmetric-quantization error of n values for 4 trial scales (one per lane), each lane
// summed left to right in f64: sum w_i * (x_i - s*q_i)^2, w_i = imp[i] or 1 when imp == 0.
// Writes 4 f64 to err. A zero scale dequantizes everything to 0 (q*s = 0), as symCodes does.
export function symErr4(x: usize, n: i32, imp: usize, s: usize, qmax: i32, err: usize): void {
  const lim = <f32>qmax;
  const s0 = load<f32>(s), s1 = load<f32>(s, 4), s2 = load<f32>(s, 8), s3 = load<f32>(s, 12);
  if (ASC_FEATURE_SIMD) {
    const vs = v128.load(s);
    const one = f32x4.splat(1);
    const safe = v128.bitselect(one, vs, f32x4.eq(vs, f32x4.splat(0)));
    const hi = f32x4.splat(lim);
    const lo = f32x4.splat(-lim);
    let a01 = f64x2.splat(0), a23 = a01;
    for (let i = 0; i < n; i++) {
      const xv = load<f32>(x + (<usize>i << 2));
      const q = f32x4.pmin(f32x4.pmax(f32x4.nearest(f32x4.div(f32x4.splat(xv), safe)), lo), hi);
      const y = f32x4.mul(q, vs);
      const xd = f64x2.splat(<f64>xv);
      const e01 = f64x2.sub(xd, f64x2.promote_low_f32x4(y));
      const e23 = f64x2.sub(xd, f64x2.promote_low_f32x4(i32x4.shuffle(y, y, 2, 3, 2, 3)));
      if (imp) {
        const w = f64x2.splat(<f64>load<f32>(imp + (<usize>i << 2)));
        a01 = f64x2.add(a01, f64x2.mul(f64x2.mul(e01, e01), w));
        a23 = f64x2.add(a23, f64x2.mul(f64x2.mul(e23, e23), w));
      } else {
        a01 = f64x2.add(a01, f64x2.mul(e01, e01));
        a23 = f64x2.add(a23, f64x2.mul(e23, e23));
      }
    }
    v128.store(err, a01);
    v128.store(err, a23, 16);
    return;
  }
  let e0: f64 = 0, e1: f64 = 0, e2: f64 = 0, e3: f64 = 0;
  const d0 = s0 == 0 ? <f32>1 : s0, d1 = s1 == 0 ? <f32>1 : s1, d2 = s2 == 0 ? <f32>1 : s2, d3 = s3 == 0 ? <f32>1 : s3;
  for (let i = 0; i < n; i++) {
    const xv = load<f32>(x + (<usize>i << 2));
    const xd = <f64>xv;
    const w: f64 = imp ? <f64>load<f32>(imp + (<usize>i << 2)) : 1;
    let t = xd - <f64>(<f32>roundClamp(xv / d0, -lim, lim) * s0);
    e0 = imp ? e0 + t * t * w : e0 + t * t;
    t = xd - <f64>(<f32>roundClamp(xv / d1, -lim, lim) * s1);
    e1 = imp ? e1 + t * t * w : e1 + t * t;
    t = xd - <f64>(<f32>roundClamp(xv / d2, -lim, lim) * s2);
    e2 = imp ? e2 + t * t * w : e2 + t * t;
    t = xd - <f64>(<f32>roundClamp(xv / d3, -lim, lim) * s3);
    e3 = imp ? e3 + t * t * w : e3 + t * t;
  }
  store<f64>(err, e0);
  store<f64>(err, e1, 8);
  store<f64>(err, e2, 16);
  store<f64>(err, e3, 24);
}

const trial = memory.data(16, 16);
const trialErr = memory.data(32, 16);

// Scale of the N-step MSE grid over clip ratios with the least (weighted) squared error; ties go
// to the larger ratio, so the result is never worse than absmax (ratio 1, candidate 0).
export function mseScale(x: usize, n: i32, imp: usize, amax: f32, qmax: i32, steps: i32): f32 {
  const lim = <f32>qmax;
  let best = Infinity;
  let bestS: f32 = amax / lim;
  if (amax == 0) return 0;
  for (let j0 = 0; j0 < steps; j0 += 4) {
    for (let l = 0; l < 4; l++) {
      const j = min(j0 + l, steps - 1);
      store<f32>(trial + (<usize>l << 2), (gridRatio(j, steps) * amax) / lim);
    }
    symErr4(x, n, imp, trial, qmax, trialErr);
    for (let l = 0; l < 4 && j0 + l < steps; l++) {
      const e = load<f64>(trialErr + (<usize>l << 3));
      if (e < best) {
        best = e;
        bestS = load<f32>(trial + (<usize>l << 2));
      }
    }
  }
  return bestS;
}
