// The batched serving kernels' parts (SIMD build, f32 activations; drivers: gguf-matmul.ts). A
// row's codes are converted to f32 once, in the lane order of simd.ts dot4x4 (value 16g + 4j + k
// at lane j of vector k of group g, so at the byte offset of x transposed), and then
// dotted with each position by the same operations, in the same order, as gguf-simd.ts
// ggufRowsSimd: every result keeps matvec's bits (test/serve/matvec.test.ts compares them).
import { hsum } from './common';
import { barrier, byteS, byteU, halfToF32, nibS, nibU } from './simd';
import { IQ4_XS, KV, Q2_K, Q3_K, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0, bytesF32, hi5, k4Words, q2Codes, q3Codes, q6Codes, sext } from './gguf-simd';

// Four i32 lane vectors (dot4x4's a..d) stored as f32 at dst (64 bytes).
@inline export function put4(dst: usize, a: v128, b: v128, c: v128, d: v128): void {
  v128.store(dst, f32x4.convert_i32x4_s(a));
  v128.store(dst, f32x4.convert_i32x4_s(b), 16);
  v128.store(dst, f32x4.convert_i32x4_s(c), 32);
  v128.store(dst, f32x4.convert_i32x4_s(d), 48);
}
@inline export function putS8(dst: usize, v: v128): void {
  put4(dst, byteS(v, 0), byteS(v, 1), byteS(v, 2), byteS(v, 3));
}
@inline export function putU8(dst: usize, v: v128): void {
  put4(dst, byteU(v, 0), byteU(v, 1), byteU(v, 2), byteU(v, 3));
}

// dot4x4 of 16 converted codes at c with the 16 transposed floats at xt: the same operations
// (and bnb.ts lutDot16's on its decoded values).
@inline export function dotF(c: usize, xt: usize): v128 {
  const p = f32x4.mul(v128.load(c), v128.load(xt));
  const q = f32x4.mul(v128.load(c, 16), v128.load(xt, 16));
  const r = f32x4.mul(v128.load(c, 32), v128.load(xt, 32));
  const s = f32x4.mul(v128.load(c, 48), v128.load(xt, 48));
  return barrier(f32x4.add(f32x4.add(p, q), f32x4.add(r, s)));
}
// Two groups of 16 (at o and o + 64 bytes) summed, as a 32-value block or half-chunk is.
@inline function dot32F(c: usize, xt: usize, o: usize): v128 {
  return f32x4.add(dotF(c + o, xt + o), dotF(c + o + 64, xt + o + 64));
}

// ---- 32-value blocks -------------------------------------------------------------------------

// Writes the block's codes as block32 converts them (128 bytes) and returns its scale d.
export function decode32F(kind: i32, blk: usize, dst: usize): f32 {
  switch (kind) {
    case Q8_0: {
      putS8(dst, v128.load(blk, 2));
      putS8(dst + 64, v128.load(blk, 18));
      break;
    }
    case Q4_0: {
      const b = v128.xor(v128.load(blk, 2), i8x16.splat(-120));
      put4(dst, nibS(b, 0), nibS(b, 2), nibS(b, 4), nibS(b, 6));
      put4(dst + 64, nibS(b, 1), nibS(b, 3), nibS(b, 5), nibS(b, 7));
      break;
    }
    case Q4_1: {
      const b = v128.load(blk, 4);
      put4(dst, nibU(b, 0), nibU(b, 2), nibU(b, 4), nibU(b, 6));
      put4(dst + 64, nibU(b, 1), nibU(b, 3), nibU(b, 5), nibU(b, 7));
      break;
    }
    case Q5_1: {
      const b = v128.load(blk + 8);
      const qh = load<u32>(blk + 4);
      const m = i8x16.splat(15);
      putS8(dst, v128.or(v128.and(b, m), hi5(qh, 0)));
      putS8(dst + 64, v128.or(v128.and(i16x8.shr_u(b, 4), m), hi5(qh, 1)));
      break;
    }
    case Q5_0: {
      const b = v128.load(blk + 6);
      const qh = load<u32>(blk + 2);
      const m = i8x16.splat(15);
      const f = i8x16.splat(16);
      const lo = v128.xor(v128.or(v128.and(b, m), hi5(qh, 0)), f);
      const hi = v128.xor(v128.or(v128.and(i16x8.shr_u(b, 4), m), hi5(qh, 1)), f);
      put4(dst, sext(lo, 0, 5), sext(lo, 1, 5), sext(lo, 2, 5), sext(lo, 3, 5));
      put4(dst + 64, sext(hi, 0, 5), sext(hi, 1, 5), sext(hi, 2, 5), sext(hi, 3, 5));
      break;
    }
    default: {
      const b = v128.load(blk, 2);
      const kv = v128.load(KV);
      const m = i8x16.splat(15);
      putS8(dst, i8x16.swizzle(kv, v128.and(b, m)));
      putS8(dst + 64, i8x16.swizzle(kv, v128.and(i16x8.shr_u(b, 4), m)));
    }
  }
  return halfToF32(<u32>load<u16>(blk));
}

// One row's dot with one position as ggufRowsSimd computes it for a 32-value format: blocks in
// pairs into two accumulators, the odd one last into the first; Q4_1 / Q5_1 add their min terms
// (min32: m * the block's two x sums per 16) in the same pairs. c: the row's converted codes
// (128 bytes a block), ds: its block scales, ms: its block mins, xs: the position's x sums per 16,
// xt: the position transposed.
@inline function rowDot32(c: usize, ds: usize, ms: usize, xs: usize, nb: i32, xt: usize, hasMin: bool): f32 {
  let a0 = f32x4.splat(0);
  let a1 = f32x4.splat(0);
  let mn: f32 = 0;
  let b = 0;
  for (; b + 2 <= nb; b += 2) {
    const o = <usize>b << 7;
    a0 = f32x4.add(a0, f32x4.mul(dot32F(c, xt, o), f32x4.splat(load<f32>(ds + (<usize>b << 2)))));
    a1 = f32x4.add(a1, f32x4.mul(dot32F(c, xt, o + 128), f32x4.splat(load<f32>(ds + (<usize>b << 2), 4))));
    if (hasMin) mn += min32F(ms, xs, b) + min32F(ms, xs, b + 1);
  }
  if (b < nb) {
    a0 = f32x4.add(a0, f32x4.mul(dot32F(c, xt, <usize>b << 7), f32x4.splat(load<f32>(ds + (<usize>b << 2)))));
    if (hasMin) mn += min32F(ms, xs, b);
  }
  return hsum(f32x4.add(a0, a1)) + mn;
}
@inline function min32F(ms: usize, xs: usize, b: i32): f32 {
  return load<f32>(ms + (<usize>b << 2)) * (load<f32>(xs + (<usize>b << 3)) + load<f32>(xs + (<usize>b << 3), 4));
}
export function rowDot32F(c: usize, ds: usize, nb: i32, xt: usize): f32 {
  return rowDot32(c, ds, 0, 0, nb, xt, false);
}
export function rowDot32FMin(c: usize, ds: usize, ms: usize, xs: usize, nb: i32, xt: usize): f32 {
  return rowDot32(c, ds, ms, xs, nb, xt, true);
}

// ---- 256-value super-blocks (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS) -----------------------------
// The sub-block scales come from gguf-simd.ts rowScales (they do not depend on x). The minimum
// term does, so the block's min factors are kept (MIN_BYTES a block: Q4_K / Q5_K the two vectors
// of 6-bit mins and dmin, Q2_K the four vectors of 4-bit mins and dmin; Q6_K's -32 offset uses
// the scales) and rowMin256 forms it per position with rowScales's operations.
export const MIN_BYTES: usize = 80;

// Writes the super-block's codes (1 KiB) and, for the formats with one, its min factors.
export function decode256F(kind: i32, blk: usize, dst: usize, mins: usize): void {
  switch (kind) {
    case Q4_K:
    case Q5_K: {
      const w = k4Words(blk + 4);
      v128.store(mins, bytesF32(w, 2));
      v128.store(mins, bytesF32(w, 3), 16);
      store<f32>(mins, halfToF32(<u32>load<u16>(blk, 2)), 32);
      const q5 = kind == Q5_K;
      const m15 = i8x16.splat(15);
      const m16 = i8x16.splat(16);
      for (let c = 0; c < 4; c++) {
        const q = blk + (q5 ? 48 : 16) + (<usize>c << 5);
        const b0 = v128.load(q);
        const b1 = v128.load(q, 16);
        const o = dst + (<usize>c << 8);
        if (q5) {
          const h0 = i16x8.shr_u(v128.load(blk, 16), <u32>(2 * c));
          const h1 = i16x8.shr_u(v128.load(blk, 32), <u32>(2 * c));
          putS8(o, v128.or(v128.and(b0, m15), v128.and(i16x8.shl(h0, 4), m16)));
          putS8(o + 64, v128.or(v128.and(b1, m15), v128.and(i16x8.shl(h1, 4), m16)));
          putS8(o + 128, v128.or(v128.and(i16x8.shr_u(b0, 4), m15), v128.and(i16x8.shl(h0, 3), m16)));
          putS8(o + 192, v128.or(v128.and(i16x8.shr_u(b1, 4), m15), v128.and(i16x8.shl(h1, 3), m16)));
        } else {
          put4(o, nibU(b0, 0), nibU(b0, 2), nibU(b0, 4), nibU(b0, 6));
          put4(o + 64, nibU(b1, 0), nibU(b1, 2), nibU(b1, 4), nibU(b1, 6));
          put4(o + 128, nibU(b0, 1), nibU(b0, 3), nibU(b0, 5), nibU(b0, 7));
          put4(o + 192, nibU(b1, 1), nibU(b1, 3), nibU(b1, 5), nibU(b1, 7));
        }
      }
      break;
    }
    case Q6_K: {
      // halfQ6's sub-blocks, each at its value offset
      for (let h = 0; h < 2; h++) {
        const ql = blk + (<usize>h << 6);
        const qh = blk + 128 + (<usize>h << 5);
        const o = dst + (<usize>h << 9);
        for (let k = 0; k < 2; k++) {
          const hk = v128.load(qh + (<usize>k << 4));
          const a = v128.load(ql + (<usize>k << 4));
          const b = v128.load(ql + 32 + (<usize>k << 4));
          const ok = o + (<usize>k << 6);
          putU8(ok, q6Codes(a, hk, 0));
          putU8(ok + 128, q6Codes(b, hk, 1));
          putU8(ok + 256, q6Codes(a, hk, 2));
          putU8(ok + 384, q6Codes(b, hk, 3));
        }
      }
      break;
    }
    case Q3_K: {
      for (let h = 0; h < 2; h++) {
        const q0 = v128.load(blk + 32 + (<usize>h << 5));
        const q1 = v128.load(blk + 48 + (<usize>h << 5));
        const m0 = i16x8.shr_u(v128.load(blk), <u32>(4 * h));
        const m1 = i16x8.shr_u(v128.load(blk, 16), <u32>(4 * h));
        const o = dst + (<usize>h << 9);
        for (let i = 0; i < 4; i++) {
          const c0 = q3Codes(q0, m0, i);
          const c1 = q3Codes(q1, m1, i);
          put4(o + (<usize>i << 7), sext(c0, 0, 3), sext(c0, 1, 3), sext(c0, 2, 3), sext(c0, 3, 3));
          put4(o + (<usize>i << 7) + 64, sext(c1, 0, 3), sext(c1, 1, 3), sext(c1, 2, 3), sext(c1, 3, 3));
        }
      }
      break;
    }
    case Q2_K: {
      const ms = v128.and(i16x8.shr_u(v128.load(blk), 4), i8x16.splat(15));
      v128.store(mins, bytesF32(ms, 0));
      v128.store(mins, bytesF32(ms, 1), 16);
      v128.store(mins, bytesF32(ms, 2), 32);
      v128.store(mins, bytesF32(ms, 3), 48);
      store<f32>(mins, halfToF32(<u32>load<u16>(blk, 82)), 64);
      for (let h = 0; h < 2; h++) {
        const q0 = v128.load(blk + 16 + (<usize>h << 5));
        const q1 = v128.load(blk + 32 + (<usize>h << 5));
        const o = dst + (<usize>h << 9);
        for (let i = 0; i < 4; i++) {
          putS8(o + (<usize>i << 7), q2Codes(q0, i));
          putS8(o + (<usize>i << 7) + 64, q2Codes(q1, i));
        }
      }
      break;
    }
    default: {
      // IQ4_XS: 8 sub-blocks of 32 through the code book
      const kv = v128.load(KV);
      const m = i8x16.splat(15);
      for (let j = 0; j < 8; j++) {
        const b = v128.load(blk + 8 + (<usize>j << 4));
        putS8(dst + (<usize>j << 7), i8x16.swizzle(kv, v128.and(b, m)));
        putS8(dst + (<usize>j << 7) + 64, i8x16.swizzle(kv, v128.and(i16x8.shr_u(b, 4), m)));
      }
    }
  }
}

// rowScales's minimum term for one position: xs / xs32 its x sums per 16 / 32, sc the row's
// scales, mins its min factors (MIN_BYTES a block).
export function rowMin256(kind: i32, nb: i32, sc: usize, mins: usize, xs: usize, xs32: usize): f32 {
  let mn = f32x4.splat(0);
  for (let b = 0; b < nb; b++) {
    const f = mins + <usize>b * MIN_BYTES;
    if (kind == Q4_K || kind == Q5_K) {
      const o = <usize>b << 5;
      const m = f32x4.add(f32x4.mul(v128.load(f), v128.load(xs32 + o)), f32x4.mul(v128.load(f, 16), v128.load(xs32 + o, 16)));
      mn = f32x4.add(mn, f32x4.mul(m, f32x4.splat(load<f32>(f, 32))));
    } else if (kind == Q6_K || kind == Q2_K) {
      const o = <usize>b << 6;
      const k = kind == Q6_K ? sc + o : f;
      const m = f32x4.add(
        f32x4.add(f32x4.mul(v128.load(k), v128.load(xs + o)), f32x4.mul(v128.load(k, 16), v128.load(xs + o, 16))),
        f32x4.add(f32x4.mul(v128.load(k, 32), v128.load(xs + o, 32)), f32x4.mul(v128.load(k, 48), v128.load(xs + o, 48))));
      mn = f32x4.add(mn, f32x4.mul(m, f32x4.splat(kind == Q6_K ? <f32>32 : load<f32>(f, 64))));
    }
  }
  return hsum(mn);
}

// Q6_K's addQ6 on converted codes.
@inline function addQ6F(acc: v128, c: usize, xt: usize, o: usize, sc: usize, s: usize): v128 {
  return f32x4.add(acc, f32x4.mul(dotF(c + o, xt + o), v128.load32_splat(sc + (s << 2))));
}
// pair16 on converted codes: groups at o and o + 64, scales s and s + 1.
@inline function pair16F(c: usize, xt: usize, o: usize, sc: usize, s: usize): v128 {
  return f32x4.add(f32x4.mul(dotF(c + o, xt + o), v128.load32_splat(sc + (s << 2))), f32x4.mul(dotF(c + o + 64, xt + o + 64), v128.load32_splat(sc + (s << 2), 4)));
}

// row256's sum for one position over the row's converted codes c and scales sc.
export function rowDot256F(kind: i32, nb: i32, c: usize, sc: usize, xt: usize): v128 {
  let a = f32x4.splat(0);
  if (kind == Q4_K || kind == Q5_K) {
    for (let i = 0; i < nb << 2; i++) {
      const o = <usize>i << 8;
      const s = sc + (<usize>i << 3);
      a = f32x4.add(a, f32x4.add(f32x4.mul(dot32F(c, xt, o), v128.load32_splat(s)), f32x4.mul(dot32F(c, xt, o + 128), v128.load32_splat(s, 4))));
    }
  } else if (kind == IQ4_XS) {
    for (let i = 0; i < nb << 3; i++) {
      a = f32x4.add(a, f32x4.mul(dot32F(c, xt, <usize>i << 7), v128.load32_splat(sc + (<usize>i << 2))));
    }
  } else if (kind == Q6_K) {
    for (let i = 0; i < nb << 1; i++) {
      const ci = c + (<usize>i << 9);
      const xi = xt + (<usize>i << 9);
      const si = sc + (<usize>i << 5);
      let acc = addQ6F(f32x4.splat(0), ci, xi, 0, si, 0);
      acc = addQ6F(acc, ci, xi, 256, si, 4);
      acc = addQ6F(acc, ci, xi, 128, si, 2);
      acc = addQ6F(acc, ci, xi, 384, si, 6);
      acc = addQ6F(acc, ci, xi, 64, si, 1);
      acc = addQ6F(acc, ci, xi, 320, si, 5);
      acc = addQ6F(acc, ci, xi, 192, si, 3);
      a = f32x4.add(a, addQ6F(acc, ci, xi, 448, si, 7));
    }
  } else {
    // Q2_K / Q3_K: halfQ2 / halfQ3
    for (let i = 0; i < nb << 1; i++) {
      const ci = c + (<usize>i << 9);
      const xi = xt + (<usize>i << 9);
      const si = sc + (<usize>i << 5);
      const p0 = pair16F(ci, xi, 0, si, 0);
      const p1 = pair16F(ci, xi, 128, si, 2);
      const p2 = pair16F(ci, xi, 256, si, 4);
      const p3 = pair16F(ci, xi, 384, si, 6);
      a = f32x4.add(a, f32x4.add(f32x4.add(p0, p1), f32x4.add(p2, p3)));
    }
  }
  return a;
}
