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
  aux: u32,
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<uniform> P: Params;

const F_ONE: u32 = 0x3f800000u;
const F_INF: u32 = 0x7f800000u;
const F_QNAN: u32 = 0x7fc00000u;
const SIGN: u32 = 0x80000000u;
const ABS: u32 = 0x7fffffffu;

fn item(gid: vec3<u32>) -> u32 { return gid.x + gid.y * P.nx; }

fn ld8(i: u32) -> u32 { return (src[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu; }
fn ld16(i: u32) -> u32 { return ld8(i) | (ld8(i + 1u) << 8u); }
fn ld32(i: u32) -> u32 { return ld8(i) | (ld8(i + 1u) << 8u) | (ld8(i + 2u) << 16u) | (ld8(i + 3u) << 24u); }
fn ldi8(i: u32) -> i32 { return (i32(ld8(i)) << 24u) >> 24u; }

fn is_nan(a: u32) -> bool { return (a & ABS) > F_INF; }

// Order key: integer order equals f32 order for non-NaN values, -0 and +0 equal.
fn okey(a: u32) -> i32 {
  if ((a & SIGN) != 0u) { return -i32(a & ABS); }
  return i32(a);
}
fn f_lt(a: u32, b: u32) -> bool { return okey(a) < okey(b); }
fn f_gt(a: u32, b: u32) -> bool { return okey(a) > okey(b); }
fn f_is_zero(a: u32) -> bool { return (a & ABS) == 0u; }

// Packs sign | magnitude from x, whose top mantissa bit (the implicit 1 of a normal result) is bit
// 23 + extra, for the biased exponent e; bit 0 of x is a sticky bit. Rounds to nearest even,
// producing subnormals and infinity as IEEE does.
fn round_pack(sign: u32, e_in: i32, x: u32, extra: u32) -> u32 {
  var e = e_in;
  var t = 0u;
  if (e < 1) { t = u32(1 - e); e = 1; }
  if (e > 254) { return sign | F_INF; }
  let sh = extra + t;
  if (sh >= 31u) { return sign; }
  let m = x >> sh;
  let rem = x & ((1u << sh) - 1u);
  let half = 1u << (sh - 1u);
  var r = m;
  if (rem > half || (rem == half && (m & 1u) == 1u)) { r = r + 1u; }
  var bits = (u32(e - 1) << 23u) + r;
  if (bits >= F_INF) { bits = F_INF; }
  return sign | bits;
}

// Mantissa with the implicit bit and the biased exponent of a finite nonzero value, normalised so
// that bit 23 is set (subnormals get an exponent below 1).
fn unpack_m(a: u32) -> vec2<i32> {
  let e = i32((a >> 23u) & 0xffu);
  let f = a & 0x7fffffu;
  if (e == 0) {
    let s = countLeadingZeros(f) - 8u;
    return vec2<i32>(i32(f << s), 1 - i32(s));
  }
  return vec2<i32>(i32(f | 0x800000u), e);
}

fn quiet(a: u32) -> u32 { return a | 0x400000u; }

fn f_mul(a: u32, b: u32) -> u32 {
  let sign = (a ^ b) & SIGN;
  if (is_nan(a)) { return quiet(a); }
  if (is_nan(b)) { return quiet(b); }
  let ainf = (a & ABS) == F_INF;
  let binf = (b & ABS) == F_INF;
  if (ainf || binf) {
    if (f_is_zero(a) || f_is_zero(b)) { return F_QNAN | SIGN; }
    return sign | F_INF;
  }
  if (f_is_zero(a) || f_is_zero(b)) { return sign; }
  let ua = unpack_m(a);
  let ub = unpack_m(b);
  let ma = u32(ua.x);
  let mb = u32(ub.x);
  // 24 x 24 -> 48-bit product in hi:lo from 16-bit halves.
  let al = ma & 0xffffu; let ah = ma >> 16u;
  let bl = mb & 0xffffu; let bh = mb >> 16u;
  let ll = al * bl;
  let mid = ah * bl + al * bh;
  let hh = ah * bh;
  let lo = ll + (mid << 16u);
  let carry = select(0u, 1u, lo < ll);
  var hi = hh + (mid >> 16u) + carry;
  var lo2 = lo;
  var e = ua.y + ub.y - 126;
  if ((hi & 0x8000u) == 0u) {
    // product below 2^47: one more bit of mantissa
    hi = (hi << 1u) | (lo2 >> 31u);
    lo2 = lo2 << 1u;
    e = e - 1;
  }
  // top 24 bits = hi(16) : lo2 bits 31..24; then guard (bit 23) and sticky (bits 22..0)
  let m24 = (hi << 8u) | (lo2 >> 24u);
  let x = (m24 << 2u) | (((lo2 >> 23u) & 1u) << 1u) | select(0u, 1u, (lo2 & 0x7fffffu) != 0u);
  return round_pack(sign, e, x, 2u);
}

fn f_div(a: u32, b: u32) -> u32 {
  let sign = (a ^ b) & SIGN;
  if (is_nan(a)) { return quiet(a); }
  if (is_nan(b)) { return quiet(b); }
  let ainf = (a & ABS) == F_INF;
  let binf = (b & ABS) == F_INF;
  if (ainf && binf) { return F_QNAN | SIGN; }
  if (ainf) { return sign | F_INF; }
  if (binf) { return sign; }
  if (f_is_zero(b)) {
    if (f_is_zero(a)) { return F_QNAN | SIGN; }
    return sign | F_INF;
  }
  if (f_is_zero(a)) { return sign; }
  let ua = unpack_m(a);
  let ub = unpack_m(b);
  var r = u32(ua.x);
  let mb = u32(ub.x);
  var e = ua.y - ub.y + 127;
  if (r < mb) { r = r << 1u; e = e - 1; }
  // restoring division: 26 quotient bits, the first one set
  var q = 0u;
  for (var i = 0u; i < 26u; i = i + 1u) {
    q = q << 1u;
    if (r >= mb) { r = r - mb; q = q | 1u; }
    r = r << 1u;
  }
  let x = (q << 1u) | select(0u, 1u, r != 0u);
  return round_pack(sign, e, x, 3u);
}

fn f_add(a: u32, b: u32) -> u32 {
  if (is_nan(a)) { return quiet(a); }
  if (is_nan(b)) { return quiet(b); }
  let ainf = (a & ABS) == F_INF;
  let binf = (b & ABS) == F_INF;
  if (ainf && binf) {
    if (a != b) { return F_QNAN | SIGN; }
    return a;
  }
  if (ainf) { return a; }
  if (binf) { return b; }
  if (f_is_zero(a) && f_is_zero(b)) { return a & b; }
  if (f_is_zero(a)) { return b; }
  if (f_is_zero(b)) { return a; }
  var x = a; var y = b;
  if ((y & ABS) > (x & ABS)) { x = b; y = a; }
  let ux = unpack_m(x);
  let uy = unpack_m(y);
  var mx = u32(ux.x) << 3u;
  var my = u32(uy.x) << 3u;
  var e = ux.y;
  let d = u32(ux.y - uy.y);
  if (d >= 27u) {
    my = select(0u, 1u, my != 0u);
  } else if (d > 0u) {
    let st = select(0u, 1u, (my & ((1u << d) - 1u)) != 0u);
    my = (my >> d) | st;
  }
  let sign = x & SIGN;
  var m: u32;
  if (((x ^ y) & SIGN) == 0u) {
    m = mx + my;
    if (m >= (1u << 27u)) { m = (m >> 1u) | (m & 1u); e = e + 1; }
  } else {
    m = mx - my;
    if (m == 0u) { return 0u; }
    let s = countLeadingZeros(m) - 5u;
    m = m << s;
    e = e - i32(s);
  }
  return round_pack(sign, e, m, 3u);
}
fn f_sub(a: u32, b: u32) -> u32 { return f_add(a, b ^ SIGN); }

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
