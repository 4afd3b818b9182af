// SIMD building blocks of the f32-activation serving kernels: small integer codes held as bytes
// (or nibbles) become f32 lanes with integer shifts and one f32x4.convert_i32x4_s per 4 values,
// and every sum stays in registers (no decoded block goes through memory).
//
// Lane order. 16 code bytes are read as four i32 lanes; byte k of lane j holds value 4j + k of the
// 16. Shifting byte k to the top of each lane and back down (arithmetic for signed codes, logical
// for unsigned ones) yields values k, 4 + k, 8 + k, 12 + k in one vector, so the kernels dot it with
// x transposed per 16 (transposeX16: xt[4k + j] = x[4j + k]), prepared once per call and shared by
// every row. Shifts need no constant registers: V8 materialises every v128 constant with 3-5
// instructions wherever its scheduler places it, often inside the loop.
//
// Code generation notes that shaped these kernels (V8 TurboFan, x64, 16 vector registers): every
// load of a loop body is scheduled before its arithmetic, so a body that loads more than about 8
// vectors of x spills; a branch inside the body splits it (loads before, arithmetic after), so the
// bodies are branch-free (halfToF32, constant lane arguments), and loops cover 32 values per trip.

export const TWO_M24: f32 = reinterpret<f32>(0x33800000); // 2^-24

// Signed byte k (a constant) of each i32 lane, as i32.
@inline export function byteS(v: v128, k: i32): v128 {
  return k == 3 ? i32x4.shr_s(v, 24) : i32x4.shr_s(i32x4.shl(v, 24 - 8 * k), 24);
}

// Unsigned byte k (a constant) of each i32 lane, as i32.
@inline export function byteU(v: v128, k: i32): v128 {
  return k == 3 ? i32x4.shr_u(v, 24) : i32x4.shr_u(i32x4.shl(v, 24 - 8 * k), 24);
}

// Nibble n (0..7, a constant: low nibble of byte k is 2k, high nibble 2k + 1) of each i32 lane, as
// i32: two's complement (signed) or unsigned.
@inline export function nibS(v: v128, n: i32): v128 {
  return n == 7 ? i32x4.shr_s(v, 28) : i32x4.shr_s(i32x4.shl(v, 28 - 4 * n), 28);
}
@inline export function nibU(v: v128, n: i32): v128 {
  return n == 7 ? i32x4.shr_u(v, 28) : i32x4.shr_u(i32x4.shl(v, 28 - 4 * n), 28);
}

// A store of each 16-value partial sum (never read): V8 keeps memory operations in program
// order, so the loads of the next 16 values cannot be scheduled above it and the arithmetic of
// these 16 values happens first. Without it V8 issues all loads of a loop body up front and
// spills (5-30% slower); a store costs one instruction.
const SINK = memory.data(16, 16);
@inline export function barrier(v: v128): v128 {
  v128.store(SINK, v);
  return v;
}

// i32 lanes a, b, c, d (values k = 0..3 of the transposed order) times the 16 floats at xt.
@inline export function dot4x4(a: v128, b: v128, c: v128, d: v128, xt: usize): v128 {
  const p = f32x4.mul(f32x4.convert_i32x4_s(a), v128.load(xt));
  const q = f32x4.mul(f32x4.convert_i32x4_s(b), v128.load(xt, 16));
  const r = f32x4.mul(f32x4.convert_i32x4_s(c), v128.load(xt, 32));
  const s = f32x4.mul(f32x4.convert_i32x4_s(d), v128.load(xt, 48));
  return barrier(f32x4.add(f32x4.add(p, q), f32x4.add(r, s)));
}

// 16 signed / unsigned byte codes dotted with 16 transposed floats: 4 partial sums.
@inline export function dotS8(v: v128, xt: usize): v128 {
  return dot4x4(byteS(v, 0), byteS(v, 1), byteS(v, 2), byteS(v, 3), xt);
}
@inline export function dotU8(v: v128, xt: usize): v128 {
  return dot4x4(byteU(v, 0), byteU(v, 1), byteU(v, 2), byteU(v, 3), xt);
}

// The low (h = 0) or high (h = 1) nibbles of 16 bytes dotted with 16 transposed floats.
@inline export function dotS4(v: v128, h: i32, xt: usize): v128 {
  return dot4x4(nibS(v, h), nibS(v, 2 + h), nibS(v, 4 + h), nibS(v, 6 + h), xt);
}
@inline export function dotU4(v: v128, h: i32, xt: usize): v128 {
  return dot4x4(nibU(v, h), nibU(v, 2 + h), nibU(v, 4 + h), nibU(v, 6 + h), xt);
}

// x transposed per 16 values (see the top); n a multiple of 16.
export function transposeX16(x: usize, n: i32, dst: usize): void {
  for (let i = 0; i < n; i += 16) {
    const p = x + (<usize>i << 2);
    const a = v128.load(p);
    const b = v128.load(p, 16);
    const c = v128.load(p, 32);
    const d = v128.load(p, 48);
    const ab0 = i32x4.shuffle(a, b, 0, 4, 1, 5);
    const ab1 = i32x4.shuffle(a, b, 2, 6, 3, 7);
    const cd0 = i32x4.shuffle(c, d, 0, 4, 1, 5);
    const cd1 = i32x4.shuffle(c, d, 2, 6, 3, 7);
    const q = dst + (<usize>i << 2);
    v128.store(q, i64x2.shuffle(ab0, cd0, 0, 2));
    v128.store(q, i64x2.shuffle(ab0, cd0, 1, 3), 16);
    v128.store(q, i64x2.shuffle(ab1, cd1, 0, 2), 32);
    v128.store(q, i64x2.shuffle(ab1, cd1, 1, 3), 48);
  }
}

// x reordered per 32 values into the 16 even-indexed then the 16 odd-indexed ones, each half
// transposed per 16 when `transpose`: for 4-bit codes packed two per byte with consecutive values
// in one byte (int4 / affine: value 2i low nibble; NF4 / FP4: value 2i high nibble). n: a multiple of 32.
export function evenOddX(x: usize, n: i32, dst: usize, transpose: bool): void {
  for (let i = 0; i < n; i += 32) {
    const p = x + (<usize>i << 2);
    const q = dst + (<usize>i << 2);
    for (let k = 0; k < 4; k++) {
      const a = v128.load(p + (<usize>k << 5));
      const b = v128.load(p + (<usize>k << 5), 16);
      v128.store(q + (<usize>k << 4), i32x4.shuffle(a, b, 0, 2, 4, 6));
      v128.store(q + 64 + (<usize>k << 4), i32x4.shuffle(a, b, 1, 3, 5, 7));
    }
    if (transpose) {
      transposeX16(q, 32, q);
    }
  }
}

// Lane k (a constant) of v in all four lanes (one pshufd).
@inline export function lane(v: v128, k: i32): v128 {
  if (k == 0) return i32x4.shuffle(v, v, 0, 0, 0, 0);
  if (k == 1) return i32x4.shuffle(v, v, 1, 1, 1, 1);
  if (k == 2) return i32x4.shuffle(v, v, 2, 2, 2, 2);
  return i32x4.shuffle(v, v, 3, 3, 3, 3);
}

// IEEE half bits -> f32 without branches (common.ts f16ToF32 branches on the exponent, which
// splits a kernel's loop body). Integer selects (cmov); the same values as f16ToF32.
@inline export function halfToF32(h: u32): f32 {
  const e = h & 0x7c00;
  const em = (h & 0x7fff) << 13;
  let bits = select<u32>(reinterpret<u32>(<f32>(h & 0x3ff) * TWO_M24), em + 0x38000000, e == 0);
  bits = select<u32>(em | 0x7f800000, bits, e == 0x7c00);
  return reinterpret<f32>(bits | ((h & 0x8000) << 16));
}
