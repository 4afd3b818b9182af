// Declarations shared by every kernel (prepended to each shader's source).
//
// Exactness. WGSL lets an implementation flush f32 subnormals, contract a*b+c into one fma,
// evaluate `/` to 2.5 ULP and assume that no NaN or infinity occurs. The wasm kernels rely on
// none of that freedom, so every quantizer here does its f32 arithmetic in integers, on IEEE bit
// patterns held in u32: f_add / f_mul / f_div are correctly rounded (round to nearest even),
// keep subnormals, and follow IEEE for zeros, infinities and NaN (NaN results keep the payload
// of the first NaN operand, as x86 and V8's wasm do). Comparisons and min/max run on order keys.
// Dequantizers of the GGUF and affine formats use hardware f32 ops: there each product is exact
// (a small integer times an fp16 value, spec §15) and no operand or result is subnormal, so fma
// contraction and subnormal flushing cannot change a bit. Formats whose scale is an arbitrary f32
// (NF4, FP8, int8) multiply with f_mul.
export const COMMON_WGSL = /* wgsl */ `
struct Params {
  n: u32,        // work items (blocks, groups, rows or elements, per kernel)
  row_len: u32,
  group: u32,
  nx: u32,       // invocations per row of the 2-D dispatch grid
  off1: u32,     // byte offset of the second section in src / dst
  off2: u32,     // byte offset of the third section
  flags: u32,
  tscale: u32,   // f32 bits
  p0: u32,       // f32 bits
  p1: u32,       // f32 bits
  calib: u32,
  aux: u32,      // src word of the importances (one per column), for the quantizers that take them
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<uniform> P: Params;

const F_ONE: u32 = 0x3f800000u;
const F_INF: u32 = 0x7f800000u;
const F_QNAN: u32 = 0x7fc00000u;
const SIGN: u32 = 0x80000000u;
const ABS: u32 = 0x7fffffffu;

fn item(gid: vec3<u32>) -> u32 { return gid.x + gid.y * P.nx; }

// Bits of the largest |x| among src[x0 .. x0 + n) (non-negative floats order as their bits).
fn amax_bits(x0: u32, n: u32) -> u32 {
  var m = 0u;
  for (var i = 0u; i < n; i = i + 1u) { m = max(m, src[x0 + i] & ABS); }
  return m;
}

fn ld8(i: u32) -> u32 { return (src[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu; }
fn ld16(i: u32) -> u32 { return ld8(i) | (ld8(i + 1u) << 8u); }
fn ld32(i: u32) -> u32 { return ld8(i) | (ld8(i + 1u) << 8u) | (ld8(i + 2u) << 16u) | (ld8(i + 3u) << 24u); }
fn ldi8(i: u32) -> i32 { return (i32(ld8(i)) << 24u) >> 24u; }

fn is_nan(a: u32) -> bool { return (a & ABS) > F_INF; }
fn is_inf(a: u32) -> bool { return (a & ABS) == F_INF; }
fn quiet(a: u32) -> u32 { return a | 0x400000u; }

// Order key: integer order equals f32 order for non-NaN values, -0 and +0 equal.
fn okey(a: u32) -> i32 {
  if ((a & SIGN) != 0u) { return -i32(a & ABS); }
  return i32(a);
}
// IEEE comparisons: false when either operand is NaN, -0 == +0.
fn f_lt(a: u32, b: u32) -> bool { return !is_nan(a) & !is_nan(b) & (okey(a) < okey(b)); }
fn f_gt(a: u32, b: u32) -> bool { return !is_nan(a) & !is_nan(b) & (okey(a) > okey(b)); }
fn f_le(a: u32, b: u32) -> bool { return !is_nan(a) & !is_nan(b) & (okey(a) <= okey(b)); }
fn f_eq(a: u32, b: u32) -> bool { return !is_nan(a) & !is_nan(b) & (okey(a) == okey(b)); }
fn f_is_zero(a: u32) -> bool { return (a & ABS) == 0u; }

// The arithmetic below is branch-free (selects, one fixed-count loop in f_div / f_sqrt): every
// call site inlines it, and SwiftShader (like a GPU) runs both sides of a branch anyway, so
// fewer blocks compile and run faster. The ordinary path is computed for every operand, then
// zeros, infinities and NaN override its result, the highest priority last.

// Packs sign | magnitude from x, whose top mantissa bit (the implicit 1 of a normal result) is bit
// 23 + extra, for the biased exponent e; bit 0 of x is a sticky bit; x < 2^30. Rounds to
// nearest even, producing subnormals and infinity as IEEE does.
fn round_pack(sign: u32, e: i32, x: u32, extra: u32) -> u32 {
  // Below the normal range the mantissa shifts right by 1 - e more (a shift >= 31 leaves
  // x < 2^30 under half a subnormal step: zero).
  let sh = min(extra + u32(max(1 - e, 0)), 31u);
  let m = x >> sh;
  let rem = x & ((1u << sh) - 1u);
  let half = 1u << (sh - 1u);
  let up = (rem > half) | ((rem == half) & ((m & 1u) == 1u));
  // the implicit bit of m carries into the exponent field; rounding up may carry into infinity
  let bits = min((u32(max(e, 1) - 1) << 23u) + m + select(0u, 1u, up), F_INF);
  return sign | select(bits, F_INF, e > 254);
}

// Mantissa with the implicit bit and the biased exponent of a finite nonzero value, normalised so
// that bit 23 is set (subnormals get an exponent below 1). Garbage for zero.
fn unpack_m(a: u32) -> vec2<i32> {
  let e = i32((a >> 23u) & 0xffu);
  let f = a & 0x7fffffu;
  let s = countLeadingZeros(f) - 8u;
  return select(vec2<i32>(i32(f | 0x800000u), e), vec2<i32>(i32(f << s), 1 - i32(s)), e == 0);
}

// Results of an operation on a NaN operand: the first NaN, quieted.
fn nan_first(r: u32, a: u32, b: u32) -> u32 {
  return select(select(r, quiet(b), is_nan(b)), quiet(a), is_nan(a));
}

fn f_mul(a: u32, b: u32) -> u32 {
  let sign = (a ^ b) & SIGN;
  let ua = unpack_m(a);
  let ub = unpack_m(b);
  let ma = u32(ua.x);
  let mb = u32(ub.x);
  // 24 x 24 -> 48-bit product in hi:lo from 16-bit halves.
  let al = ma & 0xffffu; let ah = ma >> 16u;
  let bl = mb & 0xffffu; let bh = mb >> 16u;
  let ll = al * bl;
  let mid = ah * bl + al * bh;
  let lo = ll + (mid << 16u);
  let hi0 = ah * bh + (mid >> 16u) + select(0u, 1u, lo < ll);
  // a product below 2^47 has one more bit of mantissa
  let low = (hi0 & 0x8000u) == 0u;
  let hi = select(hi0, (hi0 << 1u) | (lo >> 31u), low);
  let lo2 = select(lo, lo << 1u, low);
  let e = ua.y + ub.y - 126 - select(0, 1, low);
  // top 24 bits = hi(16) : lo2 bits 31..24; then guard (bit 23) and sticky (bits 22..0)
  let m24 = (hi << 8u) | (lo2 >> 24u);
  let x = (m24 << 2u) | (((lo2 >> 23u) & 1u) << 1u) | select(0u, 1u, (lo2 & 0x7fffffu) != 0u);
  var r = round_pack(sign, e, x, 2u);
  let zero = f_is_zero(a) | f_is_zero(b);
  let inf = is_inf(a) | is_inf(b);
  r = select(r, sign, zero);
  r = select(r, sign | F_INF, inf);
  r = select(r, F_QNAN | SIGN, zero & inf);
  return nan_first(r, a, b);
}

fn f_div(a: u32, b: u32) -> u32 {
  let sign = (a ^ b) & SIGN;
  let ua = unpack_m(a);
  let ub = unpack_m(b);
  let mb = u32(ub.x);
  // restoring division: 26 quotient bits, the first one set
  let shift = u32(ua.x) < mb;
  var r = select(u32(ua.x), u32(ua.x) << 1u, shift);
  let e = ua.y - ub.y + 127 - select(0, 1, shift);
  var q = 0u;
  for (var i = 0u; i < 26u; i = i + 1u) {
    let ge = r >= mb;
    q = (q << 1u) | select(0u, 1u, ge);
    r = (r - select(0u, mb, ge)) << 1u;
  }
  var res = round_pack(sign, e, (q << 1u) | select(0u, 1u, r != 0u), 3u);
  let az = f_is_zero(a);
  let bz = f_is_zero(b);
  let ai = is_inf(a);
  let bi = is_inf(b);
  res = select(res, sign, az | bi);
  res = select(res, sign | F_INF, ai | bz);
  res = select(res, F_QNAN | SIGN, (az & bz) | (ai & bi));
  return nan_first(res, a, b);
}

// Operands are aligned unnormalised (a subnormal is its fraction at exponent 1), with three
// extra bits (guard, round, sticky); the sum is then normalised and rounded once.
fn f_add(a: u32, b: u32) -> u32 {
  let swap = (b & ABS) > (a & ABS);
  let x = select(a, b, swap);
  let y = select(b, a, swap);
  let ex = max((x >> 23u) & 0xffu, 1u);
  let ey = max((y >> 23u) & 0xffu, 1u);
  let mx = ((x & 0x7fffffu) | select(0u, 0x800000u, (x & F_INF) != 0u)) << 3u;
  let my0 = ((y & 0x7fffffu) | select(0u, 0x800000u, (y & F_INF) != 0u)) << 3u;
  // align y, its shifted-out bits as sticky (a shift of 27 or more leaves only the sticky bit)
  let d = min(ex - ey, 31u);
  let my = (my0 >> d) | select(0u, 1u, (my0 & ((1u << d) - 1u)) != 0u);
  let m0 = select(mx - my, mx + my, ((x ^ y) & SIGN) == 0u);
  // leading bit to position 26 (it is at most at 27)
  let lz = countLeadingZeros(m0);
  let carry = lz < 5u;
  let m = select(m0 << min(lz - 5u, 31u), (m0 >> 1u) | (m0 & 1u), carry);
  var r = round_pack(x & SIGN, i32(ex) + select(5 - i32(lz), 1, carry), m, 3u);
  r = select(r, 0u, m0 == 0u);                        // x - x = +0
  r = select(r, a & b, ((a | b) & ABS) == 0u);        // zero + zero: -0 only for -0 + -0
  let ai = is_inf(a);
  let bi = is_inf(b);
  r = select(r, select(b, a, ai), ai | bi);
  r = select(r, F_QNAN | SIGN, ai & bi & (a != b));   // inf - inf
  return nan_first(r, a, b);
}
fn f_sub(a: u32, b: u32) -> u32 { return f_add(a, b ^ SIGN); }

// Correctly rounded square root: 26 result bits by the digit-by-digit method, then sticky and
// round to nearest even. sqrt(-0) = -0, sqrt(+inf) = +inf, a negative operand gives x86's
// default NaN, a NaN operand itself (quieted).
fn f_sqrt(a: u32) -> u32 {
  let u = unpack_m(a);
  let odd = ((u.y - 127) & 1) != 0;
  let m = select(u32(u.x), u32(u.x) << 1u, odd);
  let e = u.y - 127 - select(0, 1, odd);
  // q = floor(sqrt(m * 2^27)), m * 2^27 in [2^50, 2^52): its top 32 bits are m << 7, the rest 0.
  let top = m << 7u;
  var q = 0u;
  var r = 0u;
  for (var i = 0u; i < 26u; i = i + 1u) {
    r = (r << 2u) | select(0u, (top >> (30u - 2u * min(i, 15u))) & 3u, i < 16u);
    let t = (q << 2u) | 1u;
    let ge = r >= t;
    r = r - select(0u, t, ge);
    q = (q << 1u) | select(0u, 1u, ge);
  }
  var res = round_pack(0u, (e >> 1u) + 127, (q << 1u) | select(0u, 1u, r != 0u), 3u);
  res = select(res, F_QNAN | SIGN, (a & SIGN) != 0u);
  res = select(res, a, f_is_zero(a) | (a == F_INF));
  return select(res, quiet(a), is_nan(a));
}

// Exact 2*a (the exponent goes up by one; subnormals shift; overflow gives infinity).
fn f_twice(a: u32) -> u32 {
  let e = (a >> 23u) & 0xffu;
  if (e == 255u) { return a; }
  if (e == 0u) { return (a & SIGN) | ((a & ABS) << 1u); }
  if (e == 254u) { return (a & SIGN) | F_INF; }
  return a + 0x800000u;
}

// ggml's nearest_int: the 1.5*2^23 bit trick, on every input (inf -> -4194304, NaN by payload).
fn nearest_int(a: u32) -> i32 { return i32(f_add(a, 0x4b400000u) & 0x7fffffu) - 0x400000; }

// Spec §0 signed absmax step: the first element whose |x| is strictly largest.
// sum x^2 over src[x0 .. x0 + n), left to right from +0 (spec §0: the sigma2 of the searches).
fn sum_sq(x0: u32, n: u32) -> u32 {
  var s = 0u;
  for (var l = 0u; l < n; l = l + 1u) { let v = src[x0 + l]; s = f_add(s, f_mul(v, v)); }
  return s;
}

fn absmax_step(best: u32, v: u32) -> u32 {
  if (f_gt(v & ABS, best & ABS)) { return v; }
  return best;
}

// GROUP_MAX_EPS (1e-15 as f32): groups whose absmax is below it quantize to zero.
const GROUP_EPS: u32 = 0x26901d7du;

fn f_min(a: u32, b: u32) -> u32 { return select(a, b, f_lt(b, a)); }
fn f_max(a: u32, b: u32) -> u32 { return select(a, b, f_gt(b, a)); }

// C float->int as the x86 reference build does it: truncation, 0 when |v| >= 2^31, inf or NaN.
fn trunc_x86(a: u32) -> i32 {
  let e = i32((a >> 23u) & 0xffu);
  if (e < 127 || e >= 158) { return 0; }
  let m = (a & 0x7fffffu) | 0x800000u;
  var v: u32;
  if (e >= 150) { v = m << u32(e - 150); } else { v = m >> u32(150 - e); }
  if ((a & SIGN) != 0u) { return -i32(v); }
  return i32(v);
}

// C roundf (half away from zero) to int, for |v| < 2^31.
fn round_away(a: u32) -> i32 {
  let e = i32((a >> 23u) & 0xffu);
  if (e < 126) { return 0; }
  let m = (a & 0x7fffffu) | 0x800000u;
  var v: u32;
  if (e >= 150) { v = m << u32(e - 150); } else {
    let sh = u32(150 - e);
    v = (m + (1u << (sh - 1u))) >> sh;
  }
  if ((a & SIGN) != 0u) { return -i32(v); }
  return i32(v);
}

// Round half to even to int, for |v| < 2^31.
fn round_even(a: u32) -> i32 {
  let e = i32((a >> 23u) & 0xffu);
  if (e < 125) { return 0; }
  let m = (a & 0x7fffffu) | 0x800000u;
  var v: u32;
  if (e >= 150) { v = m << u32(e - 150); } else {
    let sh = u32(150 - e);
    v = m >> sh;
    let rem = m & ((1u << sh) - 1u);
    let half = 1u << (sh - 1u);
    if (rem > half || (rem == half && (v & 1u) == 1u)) { v = v + 1u; }
  }
  if ((a & SIGN) != 0u) { return -i32(v); }
  return i32(v);
}

fn f_from_i(i: i32) -> u32 { return bitcast<u32>(f32(i)); }

// fp16 bits -> f32 bits, exact (subnormals normalised by bits, no float op involved).
fn h2f(h: u32) -> u32 {
  let sign = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0u) {
    if (m == 0u) { return sign; }
    let s = countLeadingZeros(m) - 21u;
    return sign | ((113u - s) << 23u) | (((m << s) & 0x3ffu) << 13u);
  }
  if (e == 31u) { return sign | F_INF | (m << 13u); }
  return sign | ((e + 112u) << 23u) | (m << 13u);
}

// f32 bits -> fp16 bits, round to nearest even, subnormals kept, overflow -> inf, NaN -> sign|0x7E00.
fn f2h(x: u32) -> u32 {
  let sign = (x >> 16u) & 0x8000u;
  let ax = x & ABS;
  if (ax > F_INF) { return sign | 0x7e00u; }
  if (ax >= 0x477ff000u) { return sign | 0x7c00u; }
  if (ax >= 0x38800000u) {
    let m = ax + 0xfffu + ((ax >> 13u) & 1u);
    return sign | ((m - 0x38000000u) >> 13u);
  }
  if (ax < 0x33000000u) { return sign; }
  let e = ax >> 23u;
  let mant = (ax & 0x7fffffu) | 0x800000u;
  let drop = 126u - e;
  let half = 1u << (drop - 1u);
  var r = mant >> drop;
  let rem = mant & ((1u << drop) - 1u);
  if (rem > half || (rem == half && (r & 1u) != 0u)) { r = r + 1u; }
  return sign | r;
}
`;

/** Output helpers for kernels whose dst is written byte-wise (several invocations share a word). */
export const BYTE_OUT_WGSL = /* wgsl */ `
@group(0) @binding(1) var<storage, read_write> dst: array<atomic<u32>>;
fn st8(i: u32, v: u32) {
  let s = (i & 3u) * 8u;
  if ((v & 0xffu) != 0u) { atomicOr(&dst[i >> 2u], (v & 0xffu) << s); }
}
fn st16(i: u32, v: u32) { st8(i, v & 0xffu); st8(i + 1u, (v >> 8u) & 0xffu); }
fn st32(i: u32, v: u32) { st16(i, v & 0xffffu); st16(i + 2u, v >> 16u); }
`;

/** Output of the dequantizers: f32 values as bit patterns. */
export const F32_OUT_WGSL = /* wgsl */ `
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
`;
