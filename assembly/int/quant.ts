// Fused quantize-and-pack runs: codes of n values straight into their packed bytes, vectorised for
// the 8- and 4-bit widths, through a code buffer and packCodes for the others. Purely elementwise,
// so both builds write the same bytes. Code rules: calib.ts symCodes / affineCodes.
import { absMax, affineCodes, roundHalfUp4, symCodes } from './calib';
import { packCodes } from './pack';

const SLICE: i32 = 256;
const codes = memory.data(SLICE * 4, 16);

// 1.5 * 2^23: adding it to a float of magnitude < 2^22 rounds it to an integer (half to even, the
// current rounding mode) and leaves that integer in the low mantissa bits.
const MAGIC: f32 = 12582912.0;
const MAGIC_BITS: i32 = 0x4b400000;

// clamp(x / s, lo, hi) rounded half to even, as i32 lanes; lo/hi are integers, so clamping before
// rounding equals clamping after, and the clamped value is small enough for the MAGIC trick.
@inline function code4(v: v128, vs: v128, lo: v128, hi: v128): v128 {
  const t = f32x4.pmin(f32x4.pmax(f32x4.div(v, vs), lo), hi);
  return i32x4.sub(f32x4.add(t, f32x4.splat(MAGIC)), i32x4.splat(MAGIC_BITS));
}

// clamp(v / s, lo, hi) rounded half away from zero (MLX's rule, see affine.ts), for lo >= 0.
@inline function code4Away(v: v128, vs: v128, lo: v128, hi: v128): v128 {
  return i32x4.trunc_sat_f32x4_s(roundHalfUp4(f32x4.pmin(f32x4.pmax(f32x4.div(v, vs), lo), hi)));
}

// Four code vectors (16 codes) as 16 bytes (low 8 bits of each code).
@inline function bytes16(a: v128, b: v128, c: v128, d: v128): v128 {
  const m = i32x4.splat(0xff);
  return i8x16.narrow_i16x8_u(
    i16x8.narrow_i32x4_u(v128.and(a, m), v128.and(b, m)),
    i16x8.narrow_i32x4_u(v128.and(c, m), v128.and(d, m)),
  );
}

// Codes of the 16 floats at p (less b when affine) as 16 bytes; mask != 0 keeps only those bits of
// each code (the 4- and 2-bit widths), mask = 0 the low byte (8-bit).
@inline function codes16(p: usize, vb: v128, affine: bool, vs: v128, lo: v128, hi: v128, mask: i32, away: bool = false): v128 {
  let u0 = v128.load(p), u1 = v128.load(p, 16), u2 = v128.load(p, 32), u3 = v128.load(p, 48);
  if (affine) {
    u0 = f32x4.sub(u0, vb);
    u1 = f32x4.sub(u1, vb);
    u2 = f32x4.sub(u2, vb);
    u3 = f32x4.sub(u3, vb);
  }
  let c0: v128, c1: v128, c2: v128, c3: v128;
  if (away) {
    c0 = code4Away(u0, vs, lo, hi); c1 = code4Away(u1, vs, lo, hi); c2 = code4Away(u2, vs, lo, hi); c3 = code4Away(u3, vs, lo, hi);
  } else {
    c0 = code4(u0, vs, lo, hi); c1 = code4(u1, vs, lo, hi); c2 = code4(u2, vs, lo, hi); c3 = code4(u3, vs, lo, hi);
  }
  if (mask != 0) {
    const m = i32x4.splat(mask);
    c0 = v128.and(c0, m);
    c1 = v128.and(c1, m);
    c2 = v128.and(c2, m);
    c3 = v128.and(c3, m);
  }
  return bytes16(c0, c1, c2, c3);
}

// 16 bytes holding 4-bit codes in their low nibbles -> 8 u16 lanes, byte j = code 2j | code 2j+1 << 4.
@inline function nibblePairs(w: v128): v128 {
  return v128.or(v128.and(w, i16x8.splat(0x0f)), v128.and(i16x8.shr_u(w, 4), i16x8.splat(0xf0)));
}

// Largest |x| of 16 floats at p folded into m (pmax: no NaN reaches a kernel, see calib.ts absMax).
@inline function absMax16(p: usize, m: v128): v128 {
  const a = f32x4.pmax(f32x4.abs(v128.load(p)), f32x4.abs(v128.load(p, 16)));
  const b = f32x4.pmax(f32x4.abs(v128.load(p, 32)), f32x4.abs(v128.load(p, 48)));
  return f32x4.pmax(m, f32x4.pmax(a, b));
}

// Max |x| of the `next` values the last simdRun visited alongside its own (see symQuantRunNext).
let nextAbsMax: f32 = 0;

// Codes of x[0..n) against (x - b) / s (b = 0 for symmetric) clamped to [lo, hi], packed to dst.
// s must be nonzero. The vector loop covers whole runs of 16 (8-bit) / 32 (4-bit) values. With
// next != 0 the 8- and 4-bit loops also fold max |next[j]| over the same indices j into
// nextAbsMax.
@inline function simdRun(x: usize, n: i32, s: f32, b: f32, lo: f32, hi: f32, bits: i32, dst: usize, affine: bool, next: usize = 0, away: bool = false): i32 {
  let i = 0;
  const vs = f32x4.splat(s);
  const vb = f32x4.splat(b);
  const vlo = f32x4.splat(lo);
  const vhi = f32x4.splat(hi);
  let m = f32x4.splat(0);
  if (bits == 8) {
    for (; i + 16 <= n; i += 16) {
      v128.store(dst + <usize>i, codes16(x + (<usize>i << 2), vb, affine, vs, vlo, vhi, 0, away));
      if (next != 0) m = absMax16(next + (<usize>i << 2), m);
    }
  } else if (bits == 4) {
    for (; i + 32 <= n; i += 32) {
      const p = x + (<usize>i << 2);
      const w0 = codes16(p, vb, affine, vs, vlo, vhi, 0x0f, away);
      const w1 = codes16(p + 64, vb, affine, vs, vlo, vhi, 0x0f, away);
      v128.store(dst + <usize>(i >> 1), i8x16.narrow_i16x8_u(nibblePairs(w0), nibblePairs(w1)));
      if (next != 0) m = absMax16(next + (<usize>i << 2) + 64, absMax16(next + (<usize>i << 2), m));
    }
  }
  if (next != 0) {
    m = f32x4.pmax(m, i32x4.shuffle(m, m, 2, 3, 0, 1));
    nextAbsMax = f32x4.extract_lane(f32x4.pmax(m, i32x4.shuffle(m, m, 1, 0, 3, 2)), 0);
    return i;
  }
  if (bits == 2) {
    for (; i + 16 <= n; i += 16) {
      const w = codes16(x + (<usize>i << 2), vb, affine, vs, vlo, vhi, 3, away);
      // u32 lane c0 | c1 << 8 | c2 << 16 | c3 << 24 -> byte c0 | c1 << 2 | c2 << 4 | c3 << 6.
      const f = v128.or(
        v128.or(v128.and(w, i32x4.splat(0x03)), v128.and(i32x4.shr_u(w, 6), i32x4.splat(0x0c))),
        v128.or(v128.and(i32x4.shr_u(w, 12), i32x4.splat(0x30)), v128.and(i32x4.shr_u(w, 18), i32x4.splat(0xc0))),
      );
      const h = i16x8.narrow_i32x4_u(f, f);
      v128.store32_lane(dst + <usize>(i >> 2), i8x16.narrow_i16x8_u(h, h), 0);
    }
  }
  return i;
}

// Symmetric run: codes clamp(round(x / s), -qmax, qmax) packed at dst (n*bits a multiple of 8).
export function symQuantRun(x: usize, n: i32, s: f32, qmax: i32, bits: i32, dst: usize): void {
  if (s == 0) {
    memory.fill(dst, 0, (<usize>n * <usize>bits) >> 3);
    return;
  }
  let i = 0;
  if (ASC_FEATURE_SIMD) i = simdRun(x, n, s, 0, -<f32>qmax, <f32>qmax, bits, dst, false);
  for (; i < n; i += SLICE) {
    const m = min(SLICE, n - i);
    symCodes(x + (<usize>i << 2), m, s, qmax, codes);
    packCodes(codes, m, bits, dst + ((<usize>i * <usize>bits) >> 3));
  }
}

// symQuantRun of x, returning max |next[j]| over j < n (another row of n values, SIMD build).
// Pipelining: the next row's loads overlap this row's divisions instead of following them.
export function symQuantRunNext(x: usize, n: i32, s: f32, qmax: i32, bits: i32, dst: usize, next: usize): f32 {
  if (!ASC_FEATURE_SIMD || s == 0 || (bits != 8 && bits != 4)) {
    symQuantRun(x, n, s, qmax, bits, dst);
    return absMax(next, n);
  }
  const i = simdRun(x, n, s, 0, -<f32>qmax, <f32>qmax, bits, dst, false, next);
  const m = nextAbsMax;
  if (i < n) {
    symQuantRun(x + (<usize>i << 2), n - i, s, qmax, bits, dst + ((<usize>i * <usize>bits) >> 3));
    const t = absMax(next + (<usize>i << 2), n - i);
    return t > m ? t : m;
  }
  return m;
}

// Affine run: codes clamp(round((x - b) / s), 0, qmax) packed at dst, rounded half to even or,
// with `away`, half away from zero (MLX).
export function affineQuantRun(x: usize, n: i32, s: f32, b: f32, qmax: i32, bits: i32, dst: usize, away: bool = false): void {
  if (s == 0) {
    memory.fill(dst, 0, (<usize>n * <usize>bits) >> 3);
    return;
  }
  let i = 0;
  if (ASC_FEATURE_SIMD) i = away ? simdRun(x, n, s, b, 0, <f32>qmax, bits, dst, true, 0, true) : simdRun(x, n, s, b, 0, <f32>qmax, bits, dst, true);
  for (; i < n; i += SLICE) {
    const m = min(SLICE, n - i);
    affineCodes(x + (<usize>i << 2), m, s, b, qmax, codes, away);
    packCodes(codes, m, bits, dst + ((<usize>i * <usize>bits) >> 3));
  }
}
