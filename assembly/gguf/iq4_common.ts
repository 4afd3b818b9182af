// Block helpers shared by the 32-value GGUF kernels (Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS) and the
// IQ4 block search (iq4_search.ts, spec §13.5). Not re-exported by gguf/index.ts: nothing here is
// a wasm export.
import { signedAbsmax } from '../common';
import { hiNibbles, NIB, storeAQ } from './pack';

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

// Block minimum and maximum of the Q4_1 / Q5_1 reference (spec §3): from +FLT_MAX / -FLT_MAX,
// replaced on strictly smaller / larger, so a NaN is skipped and among equal values (±0 included)
// the first is kept. The SIMD build takes lane minima/maxima with pmin/pmax (one instruction each
// on x64), which keep their first operand when either is NaN: with ±FLT_MAX as the first operand
// of the leftmost step, every NaN is a second operand somewhere and is dropped, as the scan skips
// it. Only the sign of a zero extreme may differ: that case takes the scan.
export let blockMin: f32 = 0;
export let blockMax: f32 = 0;
export function minMax32(x: usize): void {
  if (ASC_FEATURE_SIMD) {
    const v0 = v128.load(x), v1 = v128.load(x, 16), v2 = v128.load(x, 32), v3 = v128.load(x, 48);
    const v4 = v128.load(x, 64), v5 = v128.load(x, 80), v6 = v128.load(x, 96), v7 = v128.load(x, 112);
    const l0 = f32x4.pmin(f32x4.splat(f32.MAX_VALUE), v0);
    const h0 = f32x4.pmax(f32x4.splat(-f32.MAX_VALUE), v0);
    let lo = f32x4.pmin(f32x4.pmin(f32x4.pmin(l0, v1), f32x4.pmin(v2, v3)), f32x4.pmin(f32x4.pmin(v4, v5), f32x4.pmin(v6, v7)));
    let hi = f32x4.pmax(f32x4.pmax(f32x4.pmax(h0, v1), f32x4.pmax(v2, v3)), f32x4.pmax(f32x4.pmax(v4, v5), f32x4.pmax(v6, v7)));
    lo = f32x4.pmin(lo, v128.shuffle<f32>(lo, lo, 2, 3, 0, 1));
    lo = f32x4.pmin(lo, v128.shuffle<f32>(lo, lo, 1, 0, 3, 2));
    hi = f32x4.pmax(hi, v128.shuffle<f32>(hi, hi, 2, 3, 0, 1));
    hi = f32x4.pmax(hi, v128.shuffle<f32>(hi, hi, 1, 0, 3, 2));
    const mn = f32x4.extract_lane(lo, 0);
    const mx = f32x4.extract_lane(hi, 0);
    if (mn != 0 && mx != 0) {
      blockMin = mn;
      blockMax = mx;
      return;
    }
  }
  let mn = f32.MAX_VALUE;
  let mx = -f32.MAX_VALUE;
  for (let i = 0; i < 32; i++) {
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
  0x0f0f0f0f, 0x0f0f0f0f, 0x0f0f0f0f, 0x0f0f0f0f, // i8 15
], 16);
export const BI16_KV: usize = 144;
export const BI16_HALF: usize = 160;
export const BI16_ONE8: usize = 176;
export const BI16_FIFTEEN8: usize = 192;

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
@inline export function iq4Dequant32(qs: usize, dl: f32, y: usize): void {
  if (ASC_FEATURE_SIMD) {
    const kv = v128.load(KVALUES); // loaded: a v128 constant is rebuilt at each call
    const q = v128.load(qs);
    const vd = f32x4.splat(dl);
    const mask = v128.load(NIB);
    storeAQ(y, i8x16.swizzle(kv, v128.and(q, mask)), vd);
    storeAQ(y + 64, i8x16.swizzle(kv, hiNibbles(q, mask)), vd);
  } else {
    for (let j: usize = 0; j < 16; j++) {
      const q = <usize>load<u8>(qs + j);
      store<f32>(y + (j << 2), dl * <f32>load<i8>(KVALUES + (q & 15)));
      store<f32>(y + ((j + 16) << 2), dl * <f32>load<i8>(KVALUES + (q >> 4)));
    }
  }
}
