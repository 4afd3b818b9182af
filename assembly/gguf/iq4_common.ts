// Block helpers shared by the 32-value GGUF kernels (Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS) and the
// IQ4 block search (spec §13.5). Not re-exported by gguf/index.ts: nothing here is a wasm export.
import { signedAbsmax } from '../common';
import { storeAQ } from './pack';

// The IQ4 non-linear grid (spec §6).
export const KVALUES = memory.data<i8>([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]);

// ---- signed absmax / first min-max over 32 floats ---------------------------------------------

// Spec §0 absmax: the first element whose |x| is strictly largest, +0.0 when all are zero.
// The SIMD build takes lane maxima of the |x| bit patterns (for non-negative floats integer order
// is numeric order, and NaN patterns lie above inf), then the first element reaching the maximum,
// which is the same element; NaN input (never passed by the host) takes the literal scan.
export function absmax32(x: usize): f32 {
  if (ASC_FEATURE_SIMD) {
    const mask = i32x4.splat(0x7fffffff);
    const a0 = v128.and(v128.load(x), mask);
    const a1 = v128.and(v128.load(x, 16), mask);
    const a2 = v128.and(v128.load(x, 32), mask);
    const a3 = v128.and(v128.load(x, 48), mask);
    const a4 = v128.and(v128.load(x, 64), mask);
    const a5 = v128.and(v128.load(x, 80), mask);
    const a6 = v128.and(v128.load(x, 96), mask);
    const a7 = v128.and(v128.load(x, 112), mask);
    let m = i32x4.max_s(i32x4.max_s(i32x4.max_s(a0, a1), i32x4.max_s(a2, a3)), i32x4.max_s(i32x4.max_s(a4, a5), i32x4.max_s(a6, a7)));
    m = i32x4.max_s(m, v128.shuffle<i32>(m, m, 2, 3, 0, 1));
    m = i32x4.max_s(m, v128.shuffle<i32>(m, m, 1, 0, 3, 2));
    const amax = i32x4.extract_lane(m, 0);
    if (amax == 0) return 0;
    if (amax > 0x7f800000) return signedAbsmax(x, 32);
    const e0 = i16x8.narrow_i32x4_s(i32x4.eq(a0, m), i32x4.eq(a1, m));
    const e1 = i16x8.narrow_i32x4_s(i32x4.eq(a2, m), i32x4.eq(a3, m));
    const e2 = i16x8.narrow_i32x4_s(i32x4.eq(a4, m), i32x4.eq(a5, m));
    const e3 = i16x8.narrow_i32x4_s(i32x4.eq(a6, m), i32x4.eq(a7, m));
    const bits = <u32>i8x16.bitmask(i8x16.narrow_i16x8_s(e0, e1)) | (<u32>i8x16.bitmask(i8x16.narrow_i16x8_s(e2, e3)) << 16);
    return load<f32>(x + (<usize>ctz(bits) << 2));
  } else {
    return signedAbsmax(x, 32);
  }
}

// Spec §0 first min / first max (Q4_1, Q5_1): start from x0, replace on strictly smaller/larger.
// The SIMD build maps each float to an integer key with the same order (negative patterns get
// their magnitude bits flipped) and takes lane minima/maxima. That gives the same values except
// for the sign of a zero extreme (-0 orders below +0 here, the scan keeps the first), so a zero
// extreme, like NaN (keys beyond the infinities), takes the literal scan.
export let blockMin: f32 = 0;
export let blockMax: f32 = 0;
@inline function orderKey(v: v128): v128 {
  return v128.xor(v, i32x4.shr_u(i32x4.shr_s(v, 31), 1));
}
export function minMax32(x: usize): void {
  if (ASC_FEATURE_SIMD) {
    const k0 = orderKey(v128.load(x));
    const k1 = orderKey(v128.load(x, 16));
    const k2 = orderKey(v128.load(x, 32));
    const k3 = orderKey(v128.load(x, 48));
    const k4 = orderKey(v128.load(x, 64));
    const k5 = orderKey(v128.load(x, 80));
    const k6 = orderKey(v128.load(x, 96));
    const k7 = orderKey(v128.load(x, 112));
    let lo = i32x4.min_s(i32x4.min_s(i32x4.min_s(k0, k1), i32x4.min_s(k2, k3)), i32x4.min_s(i32x4.min_s(k4, k5), i32x4.min_s(k6, k7)));
    let hi = i32x4.max_s(i32x4.max_s(i32x4.max_s(k0, k1), i32x4.max_s(k2, k3)), i32x4.max_s(i32x4.max_s(k4, k5), i32x4.max_s(k6, k7)));
    lo = i32x4.min_s(lo, v128.shuffle<i32>(lo, lo, 2, 3, 0, 1));
    lo = i32x4.min_s(lo, v128.shuffle<i32>(lo, lo, 1, 0, 3, 2));
    hi = i32x4.max_s(hi, v128.shuffle<i32>(hi, hi, 2, 3, 0, 1));
    hi = i32x4.max_s(hi, v128.shuffle<i32>(hi, hi, 1, 0, 3, 2));
    const kmn = i32x4.extract_lane(lo, 0);
    const kmx = i32x4.extract_lane(hi, 0);
    // Keys: +0 -> 0, -0 -> -1, +inf -> 0x7f800000, -inf -> 0x807fffff; beyond those: NaN.
    if (kmn != 0 && kmn != -1 && kmx != 0 && kmx != -1 && kmn >= <i32>0x807fffff && kmx <= 0x7f800000) {
      blockMin = reinterpret<f32>(kmn ^ (<i32>(<u32>(kmn >> 31) >> 1)));
      blockMax = reinterpret<f32>(kmx ^ (<i32>(<u32>(kmx >> 31) >> 1)));
      return;
    }
  }
  let mn = load<f32>(x);
  let mx = mn;
  for (let i = 1; i < 32; i++) {
    const v = load<f32>(x + (<usize>i << 2));
    if (v < mn) mn = v;
    if (v > mx) mx = v;
  }
  blockMin = mn;
  blockMax = mx;
}

// ---- IQ4 nearest grid entry --------------------------------------------------------------------

// best_index of spec §6 (exact midpoint -> upper entry; NaN -> 15), as the midpoint count
// #{i : 2m_i <= floor(2v)} that bestIndex16 explains, read from a table of floor(2v) in
// [-256, 255]; the test suite checks it against the literal binary search around every midpoint.
const BI_TABLE = memory.data(512);
for (let f = -256; f < 256; f++) {
  let c = 0;
  for (let i = 0; i < 15; i++) {
    if (<i32>load<i8>(KVALUES + <usize>i) + <i32>load<i8>(KVALUES + <usize>(i + 1)) <= f) c++;
  }
  store<u8>(BI_TABLE + <usize>(f + 256), <u8>c);
}
@inline export function bestIndex(v: f32): i32 {
  if (v != v) return 15;
  const f = Mathf.floor(Mathf.max(<f32>-256, Mathf.min(<f32>255, v * 2)));
  return <i32>load<u8>(BI_TABLE + <usize>(<i32>f + 256));
}

// SIMD best_index for 16 values given as 2v (four f32x4, lanes in order), returning the 16 indices
// as bytes. Why this equals the literal search: the entries are integers and every midpoint
// m_i = (k_i + k_{i+1})/2 is a half-integer; near a midpoint both fp32 differences v - a and b - v
// are exact (|v| and the differences share a binade or v's is coarser), so the fp32 test
// (v - a) < (b - v) is exactly v < m_i and the index is #{i : m_i <= v} = #{i : 2m_i <= floor(2v)}.
// 2v is computed as (2*id)*x, which is exactly 2*(id*x). f = floor(2v), clamped to [-256, 255]
// (no midpoint lies outside), is split into a bucket b = f >> 4 in [-16, 15] and r = f & 15; the
// 2m_i are at least 23 apart, so a bucket holds at most one: index = base[b] + (r >= rel[b])
// (rel = 16: no midpoint in the bucket).
// NaN gives 15, as best_index (see floorI16).
// The SIMD constants of bestIndex16 and the search, loaded from memory: V8 rematerializes a
// v128.const at every use inside a loop (two to four instructions), a load is one.
export const BI16 = memory.data<u32>([
  0x01010000, 0x03020201, 0x05040403, 0x07060605, // base, first half (b + 16 in 0..15)
  0x0a090908, 0x0c0c0b0b, 0x0e0e0d0d, 0x0f0f0f0e, // base, second half (b in 0..15)
  0x10100910, 0x100c1005, 0x100c100e, 0x07001007, // rel, first half
  0x0f06100e, 0x0a100b10, 0x10100e10, 0x1010100a, // rel, second half
  0xc3800000, 0xc3800000, 0xc3800000, 0xc3800000, // f32 -256
  0x437f0000, 0x437f0000, 0x437f0000, 0x437f0000, // f32 255
  0x4b400000, 0x4b400000, 0x4b400000, 0x4b400000, // f32 1.5*2^23
  0x000f000f, 0x000f000f, 0x000f000f, 0x000f000f, // i16 15
  0x10101010, 0x10101010, 0x10101010, 0x10101010, // i8 16
  0xbfad9881, 0xf6eaddcf, 0x26190d01, 0x71594535, // KVALUES
  0x3f000000, 0x3f000000, 0x3f000000, 0x3f000000, // f32 0.5
  0x01010101, 0x01010101, 0x01010101, 0x01010101, // i8 1
], 16);
export const BI16_KV: usize = 144;
export const BI16_HALF: usize = 160;
export const BI16_ONE8: usize = 176;

@inline export function bestIndex16(a0: v128, a1: v128, a2: v128, a3: v128): v128 {
  // floor, clamp to [-256, 255], then the 1.5*2^23 trick puts the
  // integer in the low mantissa bits: the low 16 bits of each lane are floor(2v) as an i16.
  const h0 = i8x16.shuffle(floorI16(a0), floorI16(a1), 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29);
  const h1 = i8x16.shuffle(floorI16(a2), floorI16(a3), 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29);
  const m15 = v128.load(BI16, 112);
  const b = i8x16.narrow_i16x8_s(i16x8.shr_s(h0, 4), i16x8.shr_s(h1, 4));
  const r = i8x16.narrow_i16x8_s(v128.and(h0, m15), v128.and(h1, m15));
  const bi = i8x16.add(b, v128.load(BI16, 128));
  // 32-entry tables as two halves: b + 16 in [0, 15] hits the first, b in [0, 15] the second; a
  // swizzle index >= 16 (or a negative byte) yields 0, so OR-ing the two lookups selects.
  const base = v128.or(i8x16.swizzle(v128.load(BI16), bi), i8x16.swizzle(v128.load(BI16, 16), b));
  const rel = v128.or(i8x16.swizzle(v128.load(BI16, 32), bi), i8x16.swizzle(v128.load(BI16, 48), b));
  return i8x16.sub(base, i8x16.ge_s(r, rel));
}

// pmin(255, NaN) is 255 (pmin(a, b) = b < a ? b : a), so NaN lands in the top bucket: index 15,
// as best_index(NaN).
@inline function floorI16(v: v128): v128 {
  const f = f32x4.pmax(v128.load(BI16, 64), f32x4.pmin(v128.load(BI16, 80), f32x4.floor(v)));
  return f32x4.add(f, v128.load(BI16, 96));
}

@inline export function kvTable(): v128 {
  return v128.load(BI16, BI16_KV);
}

// Writes the 16 IQ4 nibble bytes for 32 values: code of x*id, element j low / j+16 high nibble.
// id = NaN (an IQ4_NL block whose weights are all zero, spec §16.2) gives best_index(NaN) = 15.
export function iq4Codes32(x: usize, id: f32, y: usize): void {
  if (id != id) {
    memory.fill(y, 0xff, 16);
    return;
  }
  if (ASC_FEATURE_SIMD) {
    const id2 = f32x4.splat(id * 2);
    const lo = bestIndex16(
      f32x4.mul(v128.load(x), id2), f32x4.mul(v128.load(x, 16), id2),
      f32x4.mul(v128.load(x, 32), id2), f32x4.mul(v128.load(x, 48), id2),
    );
    const hi = bestIndex16(
      f32x4.mul(v128.load(x, 64), id2), f32x4.mul(v128.load(x, 80), id2),
      f32x4.mul(v128.load(x, 96), id2), f32x4.mul(v128.load(x, 112), id2),
    );
    v128.store(y, v128.or(lo, i8x16.shl(hi, 4)));
  } else {
    for (let j = 0; j < 16; j++) {
      const a = bestIndex(id * load<f32>(x + (<usize>j << 2)));
      const b = bestIndex(id * load<f32>(x + (<usize>(j + 16) << 2)));
      store<u8>(y + <usize>j, <u8>(a | (b << 4)));
    }
  }
}

// ---- IQ4 block search (spec §13.5, ntry = 7) ---------------------------------------------------

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

// The 16 passes' sums, 4 passes in the 4 lanes. For element j the trial values id_t*x_j are
// monotone in t (fp32 division and multiplication are monotone), so its trial codes lie between
// the codes of t = -7 and t = 7; when those differ by at most one (the grid is coarse: always,
// in practice), code(id_t*x_j) = lo + (m_lo <= id_t*x_j) with m_lo = (k_lo + k_lo+1)/2, exactly
// (best_index(v) = #{midpoints <= v}, see bestIndex16). The products (w*q)*x and (w*q)*q of both
// candidates are then precomputed per element, and each pass only selects and adds them, in
// element order. Returns false (nothing written) when some element spans two grid steps.
function searchTwoCandidates(x: usize, w: usize): bool {
  const kv = kvTable();
  const i0 = f32x4.splat(load<f32>(ids) * 2);
  const iLo = f32x4.splat(load<f32>(ids, 4) * 2);
  const iHi = f32x4.splat(load<f32>(ids, 60) * 2);
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
    const cHi = bestIndex16(f32x4.pmax(a0, b0), f32x4.pmax(a1, b1), f32x4.pmax(a2, b2), f32x4.pmax(a3, b3));
    if (v128.any_true(i8x16.gt_u(i8x16.sub(cHi, cLo), v128.load(BI16, BI16_ONE8)))) return false;
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
  return true;
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
// and the SIMD build's fallback should an element ever span two grid steps (it cannot: over the
// trials |id_t*x_j| moves within [120, 134]*|x_j/max|, and no two midpoints fit in such a range).
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
    if (!searchTwoCandidates(x, w)) searchScalar(x, w);
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

// ---- importance weights (spec §14.0) ---------------------------------------------------------

// w_i = qw_i * sqrt(sigma2 + x_i*x_i) for 32 values; elementwise, so lanes are free.
export function imatrixWeights32(x: usize, qw: usize, sigma2: f32, w: usize): void {
  if (ASC_FEATURE_SIMD) {
    const s = f32x4.splat(sigma2);
    for (let i: usize = 0; i < 128; i += 16) {
      const v = v128.load(x + i);
      v128.store(w + i, f32x4.mul(v128.load(qw + i), f32x4.sqrt(f32x4.add(s, f32x4.mul(v, v)))));
    }
  } else {
    for (let i: usize = 0; i < 128; i += 4) {
      const v = load<f32>(x + i);
      store<f32>(w + i, load<f32>(qw + i) * Mathf.sqrt(sigma2 + v * v));
    }
  }
}

// w_i = x_i*x_i (the IQ4 weights without an importance matrix).
export function squareWeights32(x: usize, w: usize): void {
  if (ASC_FEATURE_SIMD) {
    for (let i: usize = 0; i < 128; i += 16) {
      const v = v128.load(x + i);
      v128.store(w + i, f32x4.mul(v, v));
    }
  } else {
    for (let i: usize = 0; i < 128; i += 4) {
      const v = load<f32>(x + i);
      store<f32>(w + i, v * v);
    }
  }
}

// Sequential sum of squares, left to right from +0.0 (spec §0, §14.0).
export function sumSquares(x: usize, n: i32): f32 {
  let s: f32 = 0;
  for (let i = 0; i < n; i++) {
    const v = load<f32>(x + (<usize>i << 2));
    s += v * v;
  }
  return s;
}

// ---- 5-bit packing (Q5_0, Q5_1) ----------------------------------------------------------------

// Packs 32 five-bit codes (bytes at c) into qh at y and qs at y + 4.
export function pack5(c: usize, y: usize): void {
  if (ASC_FEATURE_SIMD) {
    const lo = v128.load(c);
    const hi = v128.load(c + 16);
    const qh = <u32>i8x16.bitmask(i8x16.shl(lo, 3)) | (<u32>i8x16.bitmask(i8x16.shl(hi, 3)) << 16);
    store<u32>(y, qh);
    const m = i8x16.splat(15);
    v128.store(y + 4, v128.or(v128.and(lo, m), i8x16.shl(hi, 4)));
  } else {
    let qh: u32 = 0;
    for (let j: usize = 0; j < 16; j++) {
      const a = <u32>load<u8>(c + j);
      const b = <u32>load<u8>(c + 16 + j);
      qh |= ((a >> 4) & 1) << <u32>j;
      qh |= ((b >> 4) & 1) << <u32>(j + 16);
      store<u8>(y + 4 + j, <u8>((a & 15) | ((b & 15) << 4)));
    }
    store<u32>(y, qh);
  }
}

// Bytes 0xFF where bit i of qh is set, for elements 16*half .. 16*half+15 (SIMD build only):
// byte i of the lookup picks the qh byte holding bit i, the AND keeps that bit.
@inline export function highBits32(qh: u32, half: i32): v128 {
  const v = i32x4.splat(qh);
  const sel = i8x16(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  const b = half == 0
    ? i8x16.swizzle(v, i8x16(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1))
    : i8x16.swizzle(v, i8x16(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  return i8x16.eq(v128.and(b, sel), sel);
}

// ---- IQ4 dequantization ---------------------------------------------------------------------

// y = dl * KVALUES[nibble] for the 32 values of one 16-byte nibble group.
export function iq4Dequant32(qs: usize, dl: f32, y: usize): void {
  if (ASC_FEATURE_SIMD) {
    const kv = i8x16(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    const q = v128.load(qs);
    const vd = f32x4.splat(dl);
    storeAQ(y, i8x16.swizzle(kv, v128.and(q, i8x16.splat(15))), vd);
    storeAQ(y + 64, i8x16.swizzle(kv, i8x16.shr_u(q, 4)), vd);
  } else {
    for (let j: usize = 0; j < 16; j++) {
      const q = <usize>load<u8>(qs + j);
      store<f32>(y + (j << 2), dl * <f32>load<i8>(KVALUES + (q & 15)));
      store<f32>(y + ((j + 16) << 2), dl * <f32>load<i8>(KVALUES + (q >> 4)));
    }
  }
}
