// The IQ4 block search (spec §13.5, ntry = 7) of IQ4_NL and IQ4_XS, bit-exact in both builds.
// Not re-exported by gguf/index.ts: nothing here is a wasm export.
import { BI16, BI16_FIFTEEN8, BI16_HALF, BI16_ONE8, KVALUES, bestIndex, bestIndex16, kvTable } from './iq4_common';

// Sums of the 16 passes: pass 0 is the first scale (-max)/(-127), passes 1..15 the trials
// t = -7..7 with id = (t - 127)/max. Each pass sums left to right over the 32 elements; the SIMD
// build runs 4 passes in the 4 lanes, which does not reorder any pass's sum.
const ids = memory.data(64, 16);
const sqx = memory.data(64, 16);
const sq2 = memory.data(64, 16);

// Per-element tables of the two-candidate SIMD search (32 floats each).
const tM = memory.data(128, 16);
const tAxLo = memory.data(128, 16);
const tAxHi = memory.data(128, 16);
const tA2Lo = memory.data(128, 16);
const tA2Hi = memory.data(128, 16);
const tP0 = memory.data(256, 16);

// The 16 passes' sums, 4 passes in the 4 lanes. For element j the trial values v_t = id_t*x_j
// are monotone in t (fp32 division and multiplication are monotone) and share one sign, and
// |v_-7/v_7| <= 134/120 (1.117, plus a few ulps), while two midpoints of one sign are at least a
// factor 1.235 apart (115.5/93.5 is the closest pair); so at most one midpoint lies in
// (v_min, v_max] and code(v_t) = lo + (m_lo <= v_t), exactly, with lo = code(v_min) and
// m_lo = (k_lo + k_lo+1)/2 (best_index(v) = #{midpoints <= v}, see bestIndex16; for lo = 15 the
// "hi" candidate is 15 again). That needs |x_j| <= |max| finite: the caller checks max. The
// products (w*q)*x and (w*q)*q of both candidates are then precomputed per element, and each
// pass only selects and adds them, in element order.
function searchTwoCandidates(x: usize, w: usize): void {
  const kv = kvTable();
  const i0 = f32x4.splat(load<f32>(ids) * 2);
  const iLo = f32x4.splat(load<f32>(ids, 4) * 2);
  const iHi = f32x4.splat(load<f32>(ids, 60) * 2);
  const one8 = v128.load(BI16, BI16_ONE8);
  const fifteen8 = v128.load(BI16, BI16_FIFTEEN8);
  for (let h: usize = 0; h < 128; h += 64) {
    const x0 = v128.load(x + h);
    const x1 = v128.load(x + h, 16);
    const x2 = v128.load(x + h, 32);
    const x3 = v128.load(x + h, 48);
    const a0 = f32x4.mul(x0, iLo), b0 = f32x4.mul(x0, iHi);
    const a1 = f32x4.mul(x1, iLo), b1 = f32x4.mul(x1, iHi);
    const a2 = f32x4.mul(x2, iLo), b2 = f32x4.mul(x2, iHi);
    const a3 = f32x4.mul(x3, iLo), b3 = f32x4.mul(x3, iHi);
    const cLo = bestIndex16(f32x4.pmin(a0, b0), f32x4.pmin(a1, b1), f32x4.pmin(a2, b2), f32x4.pmin(a3, b3));
    const cHi = i8x16.min_u(i8x16.add(cLo, one8), fifteen8);
    const c0 = bestIndex16(f32x4.mul(x0, i0), f32x4.mul(x1, i0), f32x4.mul(x2, i0), f32x4.mul(x3, i0));
    const qLo = i8x16.swizzle(kv, cLo);
    const qHi = i8x16.swizzle(kv, cHi);
    const q0 = i8x16.swizzle(kv, c0);
    // Widen the grid bytes to floats (elements h/4 .. h/4+15 in four vectors of four).
    const l16 = i16x8.extend_low_i8x16_s(qLo), h16 = i16x8.extend_high_i8x16_s(qLo);
    const l16b = i16x8.extend_low_i8x16_s(qHi), h16b = i16x8.extend_high_i8x16_s(qHi);
    const l16c = i16x8.extend_low_i8x16_s(q0), h16c = i16x8.extend_high_i8x16_s(q0);
    precomputeFour(x, w, h,
      f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(l16)), f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(l16b)),
      f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(l16c)));
    precomputeFour(x, w, h + 16,
      f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(l16)), f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(l16b)),
      f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(l16c)));
    precomputeFour(x, w, h + 32,
      f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(h16)), f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(h16b)),
      f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(h16c)));
    precomputeFour(x, w, h + 48,
      f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(h16)), f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(h16b)),
      f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(h16c)));
  }
  // Pass 0 runs in its own accumulator (sumqx, sumq2 in lanes 0 and 1); lane 0 of the first
  // group computes a trial again and is overwritten. Two loops of two groups each keep every
  // accumulator in a register.
  let s0 = f32x4.splat(0);
  let sxA = f32x4.splat(0), sxB = f32x4.splat(0), s2A = f32x4.splat(0), s2B = f32x4.splat(0);
  let gA = v128.load(ids);
  let gB = v128.load(ids, 16);
  for (let j: usize = 0; j < 128; j += 4) {
    const xj = v128.load32_splat(x + j);
    const mj = v128.load32_splat(j, tM);
    const axLo = v128.load32_splat(j, tAxLo);
    const axD = v128.load32_splat(j, tAxHi);
    const a2Lo = v128.load32_splat(j, tA2Lo);
    const a2D = v128.load32_splat(j, tA2Hi);
    s0 = f32x4.add(s0, v128.load64_zero(j << 1, tP0));
    let m = f32x4.ge(f32x4.mul(gA, xj), mj);
    sxA = f32x4.add(sxA, v128.xor(axLo, v128.and(axD, m)));
    s2A = f32x4.add(s2A, v128.xor(a2Lo, v128.and(a2D, m)));
    m = f32x4.ge(f32x4.mul(gB, xj), mj);
    sxB = f32x4.add(sxB, v128.xor(axLo, v128.and(axD, m)));
    s2B = f32x4.add(s2B, v128.xor(a2Lo, v128.and(a2D, m)));
  }
  v128.store(sqx, sxA);
  v128.store(sqx, sxB, 16);
  v128.store(sq2, s2A);
  v128.store(sq2, s2B, 16);
  store<f32>(sqx, f32x4.extract_lane(s0, 0));
  store<f32>(sq2, f32x4.extract_lane(s0, 1));
  sxA = f32x4.splat(0); sxB = f32x4.splat(0); s2A = f32x4.splat(0); s2B = f32x4.splat(0);
  gA = v128.load(ids, 32);
  gB = v128.load(ids, 48);
  for (let j: usize = 0; j < 128; j += 4) {
    const xj = v128.load32_splat(x + j);
    const mj = v128.load32_splat(j, tM);
    const axLo = v128.load32_splat(j, tAxLo);
    const axD = v128.load32_splat(j, tAxHi);
    const a2Lo = v128.load32_splat(j, tA2Lo);
    const a2D = v128.load32_splat(j, tA2Hi);
    let m = f32x4.ge(f32x4.mul(gA, xj), mj);
    sxA = f32x4.add(sxA, v128.xor(axLo, v128.and(axD, m)));
    s2A = f32x4.add(s2A, v128.xor(a2Lo, v128.and(a2D, m)));
    m = f32x4.ge(f32x4.mul(gB, xj), mj);
    sxB = f32x4.add(sxB, v128.xor(axLo, v128.and(axD, m)));
    s2B = f32x4.add(s2B, v128.xor(a2Lo, v128.and(a2D, m)));
  }
  v128.store(sqx, sxA, 32);
  v128.store(sqx, sxB, 48);
  v128.store(sq2, s2A, 32);
  v128.store(sq2, s2B, 48);
}

// Tables for four elements at byte offset o: midpoint, and the products (w*q)*x, (w*q)*q of the
// "lo" candidate, of the "hi" candidate (stored XOR lo) and of pass 0.
@inline function precomputeFour(x: usize, w: usize, o: usize, lo: v128, hi: v128, z: v128): void {
  const xv = v128.load(x + o);
  const wv = v128.load(w + o);
  v128.store(tM + o, f32x4.mul(f32x4.add(lo, hi), v128.load(BI16, BI16_HALF)));
  let wq = f32x4.mul(wv, lo);
  const axLo = f32x4.mul(wq, xv);
  const a2Lo = f32x4.mul(wq, lo);
  v128.store(tAxLo + o, axLo);
  v128.store(tA2Lo + o, a2Lo);
  wq = f32x4.mul(wv, hi);
  v128.store(tAxHi + o, v128.xor(f32x4.mul(wq, xv), axLo));
  v128.store(tA2Hi + o, v128.xor(f32x4.mul(wq, hi), a2Lo));
  wq = f32x4.mul(wv, z);
  const ax0 = f32x4.mul(wq, xv);
  const a20 = f32x4.mul(wq, z);
  v128.store(tP0 + (o << 1), v128.shuffle<f32>(ax0, a20, 0, 4, 1, 5));
  v128.store(tP0 + (o << 1), v128.shuffle<f32>(ax0, a20, 2, 6, 3, 7), 16);
}

// The 16 passes literally: codes by best_index, sums left to right. The scalar build's search,
// and the SIMD build's for a block with an infinite absmax (where the bound above fails).
function searchScalar(x: usize, w: usize): void {
  for (let p: usize = 0; p < 16; p++) {
    const id = load<f32>(ids + (p << 2));
    let sx: f32 = 0;
    let s2: f32 = 0;
    for (let j: usize = 0; j < 32; j++) {
      const xj = load<f32>(x + (j << 2));
      const q = <f32>load<i8>(KVALUES + <usize>bestIndex(id * xj));
      const wq = load<f32>(w + (j << 2)) * q;
      sx += wq * xj;
      s2 += wq * q;
    }
    store<f32>(sqx + (p << 2), sx);
    store<f32>(sq2 + (p << 2), s2);
  }
}

// Returns the fitted fp32 scale d of a 32-value block with weights w. `max` is the signed absmax
// (the caller has already handled |max| < GROUP_MAX_EPS).
export function iq4Search(x: usize, w: usize, max: f32): f32 {
  const d0: f32 = -max / <f32>-127;
  store<f32>(ids, 1 / d0);
  if (ASC_FEATURE_SIMD) {
    // (t - 127)/max for t = -7..7 in lanes 1..15 (IEEE division: the same bits as scalar).
    const vm = f32x4.splat(max);
    const first = load<f32>(ids);
    v128.store(ids, f32x4.div(f32x4(-135, -134, -133, -132), vm));
    v128.store(ids, f32x4.div(f32x4(-131, -130, -129, -128), vm), 16);
    v128.store(ids, f32x4.div(f32x4(-127, -126, -125, -124), vm), 32);
    v128.store(ids, f32x4.div(f32x4(-123, -122, -121, -120), vm), 48);
    store<f32>(ids, first);
    if (Mathf.abs(max) < Infinity) searchTwoCandidates(x, w);
    else searchScalar(x, w);
  } else {
    for (let t = -7; t <= 7; t++) store<f32>(ids + (<usize>(t + 8) << 2), <f32>(t - 127) / max);
    searchScalar(x, w);
  }
  if (ASC_FEATURE_SIMD) return pickScaleSimd();
  let sumqx = load<f32>(sqx);
  let sumq2 = load<f32>(sq2);
  let d: f32 = sumqx / sumq2;
  let best: f32 = d * sumqx;
  for (let p: usize = 1; p < 16; p++) {
    sumqx = load<f32>(sqx + (p << 2));
    sumq2 = load<f32>(sq2 + (p << 2));
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// The SIMD build's pick. Candidate scales d_p = sumqx/sumq2, scores best_p = d_p*sumqx and
// sumqx*sumqx for the 16 passes, four at a time (the same IEEE operations as the loop, so the same
// bits). Rather than walking the chain of winners (a division and a mispredicted branch per
// winner), guess its end f = the first pass of highest score among those with sumq2 > 0, and
// accept it when two vector tests prove the loop ends there:
//  - f beats every pass before it that could hold `best` (pass 0, and the passes with sumq2 > 0),
//    so f becomes the winner whatever the chain before it was;
//  - no pass after f beats best_f, except passes with the same (d, best) bits as f (passes whose
//    codes equal f's have equal sums; rounding can let them "win" without changing anything).
// Otherwise (near-ties that rounding orders differently, NaN, pass 0 without sumq2 > 0) the loop
// decides. A pass whose sumq2 is not > 0 gets sumqx*sumqx = NaN (all bits set), which fails every
// comparison, as the loop's "sumq2 > 0" test does.
const cD = memory.data(64, 16);
const cBest = memory.data(64, 16);
const cSq = memory.data(64, 16);
const cTop = memory.data(64, 16);

// Stores d, best, sumqx^2 (NaN unless sumq2 > 0) and best (-inf unless sumq2 > 0) of passes
// o/4 .. o/4+3; returns the last.
@inline function scoreFour(o: usize): v128 {
  const sx = v128.load(sqx + o);
  const s2 = v128.load(sq2 + o);
  const d = f32x4.div(sx, s2);
  const b = f32x4.mul(d, sx);
  const valid = f32x4.gt(s2, f32x4.splat(0));
  v128.store(cD + o, d);
  v128.store(cBest + o, b);
  v128.store(cSq + o, v128.or(f32x4.mul(sx, sx), v128.not(valid)));
  const top = v128.bitselect(b, f32x4.splat(-Infinity), valid);
  v128.store(cTop + o, top);
  return top;
}

// Bits of the passes after f that beat best_f with a different (d, best) (bits 0-3), and of the
// passes before f that could hold best and do not lose to f (bits 4-7); a pass without
// sumq2 > 0 has best -inf in cTop and loses to f.
@inline function refuteFour(o: usize, df: v128, bf: v128, s2f: v128, sqf: v128): u32 {
  const s2 = v128.load(sq2 + o);
  const same = v128.and(i32x4.eq(v128.load(cD + o), df), i32x4.eq(v128.load(cBest + o), bf));
  const beats = v128.andnot(f32x4.gt(v128.load(cSq + o), f32x4.mul(bf, s2)), same);
  const loses = f32x4.gt(sqf, f32x4.mul(v128.load(cTop + o), s2f));
  return <u32>i32x4.bitmask(beats) | (<u32>i32x4.bitmask(v128.not(loses)) << 4);
}

function pickScaleSimd(): f32 {
  let top = f32x4.pmax(f32x4.pmax(scoreFour(0), scoreFour(16)), f32x4.pmax(scoreFour(32), scoreFour(48)));
  top = f32x4.pmax(top, v128.shuffle<f32>(top, top, 2, 3, 0, 1));
  top = f32x4.pmax(top, v128.shuffle<f32>(top, top, 1, 0, 3, 2));
  const at = <u32>i32x4.bitmask(f32x4.eq(v128.load(cTop), top))
    | (<u32>i32x4.bitmask(f32x4.eq(v128.load(cTop, 16), top)) << 4)
    | (<u32>i32x4.bitmask(f32x4.eq(v128.load(cTop, 32), top)) << 8)
    | (<u32>i32x4.bitmask(f32x4.eq(v128.load(cTop, 48), top)) << 12);
  if (at != 0 && load<f32>(sq2) > 0) {
    const f = ctz(at);
    const fo = <usize>f << 2;
    const df = v128.load32_splat(cD + fo);
    const bf = v128.load32_splat(cBest + fo);
    const s2f = v128.load32_splat(sq2 + fo);
    const sqf = v128.load32_splat(cSq + fo);
    const r0 = refuteFour(0, df, bf, s2f, sqf);
    const r1 = refuteFour(16, df, bf, s2f, sqf);
    const r2 = refuteFour(32, df, bf, s2f, sqf);
    const r3 = refuteFour(48, df, bf, s2f, sqf);
    const beats = (r0 & 15) | ((r1 & 15) << 4) | ((r2 & 15) << 8) | ((r3 & 15) << 12);
    const stays = (r0 >> 4) | ((r1 >> 4) << 4) | ((r2 >> 4) << 8) | ((r3 >> 4) << 12);
    if ((beats & (<u32>0xfffe << f)) == 0 && (stays & ((<u32>1 << f) - 1)) == 0) return load<f32>(cD + fo);
  }
  let d = load<f32>(cD);
  let best = load<f32>(cBest);
  for (let q: usize = 4; q < 64; q += 4) {
    if (load<f32>(cSq + q) > best * load<f32>(sq2 + q)) {
      d = load<f32>(cD + q);
      best = load<f32>(cBest + q);
    }
  }
  return d;
}
