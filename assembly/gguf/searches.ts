// The scale searches of llama.cpp's quantizers (spec §13.1–§13.4), bit-exact: §13.2 (Q3) and
// §13.4 (QP) here with the K-quants' final code passes and the helpers every search shares;
// §13.1 in qx_search.ts, §13.3 in qkx_search.ts, Q3_K's sixteen-unit §13.2 in q3_search.ts.
//
// Every sum is a sequential left-to-right fp32 accumulation in element order (spec §0), so the
// SIMD build never vectorises *along* a sum. It vectorises across independent sums instead: trial
// scales of one unit in the lanes (the winner then picked in trial order with the scalar
// comparisons), or four units in the lanes (lane k runs unit k through every scalar step,
// branches replaced by lane masks; transposeIn / transposeOutBytes move units into and out of
// that layout).
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

const LI = memory.data(32 * 4); // int codes of §13.2 / §13.4

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
export function transposeOutBytes(src: usize, n: i32, L: usize): void {
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
