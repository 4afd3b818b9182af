// 16-entry float table lookups for the 4-bit dequantizers (NF4, FP4, MXFP4).
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

// Stores table[c[i]] * s for the 16 codes (bytes 0..15) in `c` as 16 floats at y.
@inline export function lookupStore16(c: v128, vs: v128, y: usize): void {
  const b0 = i8x16.swizzle(v128.load(planes), c);
  const b1 = i8x16.swizzle(v128.load(planes + 16), c);
  const b2 = i8x16.swizzle(v128.load(planes + 32), c);
  const b3 = i8x16.swizzle(v128.load(planes + 48), c);
  const l01 = i8x16.shuffle(b0, b1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const h01 = i8x16.shuffle(b0, b1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const l23 = i8x16.shuffle(b2, b3, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const h23 = i8x16.shuffle(b2, b3, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  v128.store(y, f32x4.mul(i16x8.shuffle(l01, l23, 0, 8, 1, 9, 2, 10, 3, 11), vs));
  v128.store(y + 16, f32x4.mul(i16x8.shuffle(l01, l23, 4, 12, 5, 13, 6, 14, 7, 15), vs));
  v128.store(y + 32, f32x4.mul(i16x8.shuffle(h01, h23, 0, 8, 1, 9, 2, 10, 3, 11), vs));
  v128.store(y + 48, f32x4.mul(i16x8.shuffle(h01, h23, 4, 12, 5, 13, 6, 14, 7, 15), vs));
}

// Largest |x| over n floats. Max is exact, so the lane order does not matter and both builds agree.
// f32x4.pmax (one instruction) equals f32x4.max here: operands are >= +0 and never NaN.
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
    for (; i < n; i++) amax = Mathf.max(amax, Mathf.abs(load<f32>(x + (<usize>i << 2))));
  } else {
    for (let i = 0; i < n; i++) amax = Mathf.max(amax, Mathf.abs(load<f32>(x + (<usize>i << 2))));
  }
  return amax;
}
