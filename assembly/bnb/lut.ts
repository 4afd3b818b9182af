// 16-entry float table lookups for the 4-bit dequantizers (NF4, FP4, MXFP4, NVFP4).
// SIMD: the table is split into four byte planes once per call, then one i8x16.swizzle per plane
// looks up 16 codes at a time and two rounds of byte shuffles reassemble the floats. The result
// is the table entry itself, so both builds multiply the same two floats.

export const planes = memory.data(64);

// Splits the f32 table at `table` (16 entries) into planes[0..63]: plane p holds byte p of every entry.
export function splitPlanes(table: usize): void {
  if (ASC_FEATURE_SIMD) {
    const t0 = v128.load(table);
    const t1 = v128.load(table + 16);
    const t2 = v128.load(table + 32);
    const t3 = v128.load(table + 48);
    // bytes p, 4+p, 8+p, 12+p of t0 then of t1 (entries 0..7); the same for t2, t3 (entries 8..15)
    v128.store(planes, i64x2.shuffle(
      i8x16.shuffle(t0, t1, 0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0),
      i8x16.shuffle(t2, t3, 0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0), 0, 2));
    v128.store(planes + 16, i64x2.shuffle(
      i8x16.shuffle(t0, t1, 1, 5, 9, 13, 17, 21, 25, 29, 0, 0, 0, 0, 0, 0, 0, 0),
      i8x16.shuffle(t2, t3, 1, 5, 9, 13, 17, 21, 25, 29, 0, 0, 0, 0, 0, 0, 0, 0), 0, 2));
    v128.store(planes + 32, i64x2.shuffle(
      i8x16.shuffle(t0, t1, 2, 6, 10, 14, 18, 22, 26, 30, 0, 0, 0, 0, 0, 0, 0, 0),
      i8x16.shuffle(t2, t3, 2, 6, 10, 14, 18, 22, 26, 30, 0, 0, 0, 0, 0, 0, 0, 0), 0, 2));
    v128.store(planes + 48, i64x2.shuffle(
      i8x16.shuffle(t0, t1, 3, 7, 11, 15, 19, 23, 27, 31, 0, 0, 0, 0, 0, 0, 0, 0),
      i8x16.shuffle(t2, t3, 3, 7, 11, 15, 19, 23, 27, 31, 0, 0, 0, 0, 0, 0, 0, 0), 0, 2));
  }
}

// Stores table[c[i]] * s for the 16 codes (bytes 0..15) in `c` as 16 floats at y; p0..p3 are the
// four planes, loaded once by the caller so that they stay in registers.
@inline export function lookupStore16(c: v128, p0: v128, p1: v128, p2: v128, p3: v128, vs: v128, y: usize): void {
  const b0 = i8x16.swizzle(p0, c);
  const b1 = i8x16.swizzle(p1, c);
  const b2 = i8x16.swizzle(p2, c);
  const b3 = i8x16.swizzle(p3, c);
  const l01 = i8x16.shuffle(b0, b1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const h01 = i8x16.shuffle(b0, b1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const l23 = i8x16.shuffle(b2, b3, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const h23 = i8x16.shuffle(b2, b3, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  v128.store(y, f32x4.mul(i16x8.shuffle(l01, l23, 0, 8, 1, 9, 2, 10, 3, 11), vs));
  v128.store(y, f32x4.mul(i16x8.shuffle(l01, l23, 4, 12, 5, 13, 6, 14, 7, 15), vs), 16);
  v128.store(y, f32x4.mul(i16x8.shuffle(h01, h23, 0, 8, 1, 9, 2, 10, 3, 11), vs), 32);
  v128.store(y, f32x4.mul(i16x8.shuffle(h01, h23, 4, 12, 5, 13, 6, 14, 7, 15), vs), 48);
}

// Scaled planes, for 4-bit codes whose value times the block scale is always exact with its low
// 16 bits zero (E2M1 has at most two significant bits: times a power of two, or an E4M3 scale's
// four, it has at most six; an overflow to infinity is 0x7f800000). Such a table of 16 products is
// 16 high words, kept as a plane of their low bytes and one of their high bytes; a format keeps
// one pair per scale code, built on its first call from the very products its scalar build
// computes, and decodes 16 values with two swizzles and byte / word interleaves, no multiply.
// planeTable fills `out` (count * 32 bytes) with the planes of codes 0..count-1, whose scale is
// scaleOf(code), once: `ready` is its flag byte.
export function planeTable(values: usize, count: u32, scaleOf: (code: u32) => f32, out: usize, ready: usize): void {
  if (load<u8>(ready) != 0) return;
  for (let c: u32 = 0; c < count; c++) {
    const s = scaleOf(c);
    const t = out + (<usize>c << 5);
    for (let i: usize = 0; i < 16; i++) {
      const w = reinterpret<u32>(load<f32>(values + (i << 2)) * s) >> 16;
      store<u8>(t + i, <u8>w);
      store<u8>(t + 16 + i, <u8>(w >> 8));
    }
  }
  store<u8>(ready, 1);
}

// Stores the 16 floats whose high words the codes in `c` (bytes 0..15) pick from the planes
// lo / hi of planeTable (low words 0); with `scaled` (a constant), each float times vs, as the
// scalar build multiplies the table entry by a scale the planes do not hold (OCP NVFP4).
@inline export function planesStore16(c: v128, lo: v128, hi: v128, y: usize, scaled: bool, vs: v128): void {
  const l = i8x16.swizzle(lo, c);
  const h = i8x16.swizzle(hi, c);
  const w0 = i8x16.shuffle(l, h, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const w1 = i8x16.shuffle(l, h, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const z = v128.splat<i32>(0);
  const f0 = i16x8.shuffle(z, w0, 0, 8, 1, 9, 2, 10, 3, 11);
  const f1 = i16x8.shuffle(z, w0, 4, 12, 5, 13, 6, 14, 7, 15);
  const f2 = i16x8.shuffle(z, w1, 0, 8, 1, 9, 2, 10, 3, 11);
  const f3 = i16x8.shuffle(z, w1, 4, 12, 5, 13, 6, 14, 7, 15);
  if (scaled) {
    v128.store(y, f32x4.mul(f0, vs));
    v128.store(y, f32x4.mul(f1, vs), 16);
    v128.store(y, f32x4.mul(f2, vs), 32);
    v128.store(y, f32x4.mul(f3, vs), 48);
  } else {
    v128.store(y, f0);
    v128.store(y, f1, 16);
    v128.store(y, f2, 32);
    v128.store(y, f3, 48);
  }
}

// Largest |x| over n floats, as the scan "if (|x| > amax) amax = |x|" from 0 finds it: a NaN never
// wins. Max is exact, so the lane order does not matter, and f32x4.pmax (one maxps, which keeps m
// where |x| is NaN) gives the scan's answer: both builds agree on every input.
export function absmax(x: usize, n: i32): f32 {
  let amax: f32 = 0;
  if (ASC_FEATURE_SIMD) {
    let m0 = f32x4.splat(0);
    let m1 = f32x4.splat(0);
    let i = 0;
    for (; i + 8 <= n; i += 8) {
      m0 = f32x4.pmax(m0, f32x4.abs(v128.load(x + (<usize>i << 2))));
      m1 = f32x4.pmax(m1, f32x4.abs(v128.load(x + (<usize>i << 2) + 16)));
    }
    for (; i + 4 <= n; i += 4) m0 = f32x4.pmax(m0, f32x4.abs(v128.load(x + (<usize>i << 2))));
    m0 = f32x4.pmax(m0, m1);
    m0 = f32x4.pmax(m0, i32x4.shuffle(m0, m0, 2, 3, 0, 1));
    m0 = f32x4.pmax(m0, i32x4.shuffle(m0, m0, 1, 0, 3, 2));
    amax = f32x4.extract_lane(m0, 0);
    for (; i < n; i++) amax = maxAbs(amax, load<f32>(x + (<usize>i << 2)));
  } else {
    for (let i = 0; i < n; i++) amax = maxAbs(amax, load<f32>(x + (<usize>i << 2)));
  }
  return amax;
}

@inline function maxAbs(amax: f32, v: f32): f32 {
  const a = Mathf.abs(v);
  return a > amax ? a : amax;
}
