// SIMD int8-activation matvec for the GGUF block types (args flag SERVE_Q8_ACT; the scalar build
// keeps serve/gguf.ts's decode-then-dot path). x is quantized per 32 by common.ts quantizeX (both
// builds): xq (i16 per value), dx (per 16), x^ sums (per 16). Each block's codes are decoded into
// signed bytes in value order, in registers, widened to i16 and dotted with xq exactly in i32
// (i32x4.dot_i16x8_s); the sum of every 16 (K-quants) or 32 values times (weight scale * dx) goes
// to an f32 accumulator. Same results as the decode-then-dot path up to the order of f32 sums.
import { hsum } from './common';
import { IQ4_NL, KV, Q2_K, Q3_K, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0, hi5, rowScales } from './gguf-simd';
import { barrier, halfToF32 } from './simd';

// 16 signed byte codes c times 16 i16 activations at q: exact i32 partial sums (4 lanes).
@inline function dotQ16(c: v128, q: usize): v128 {
  const s = i32x4.add(i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(c), v128.load(q)), i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(c), v128.load(q, 16)));
  return barrier(s);
}

@inline function lo4(b: v128): v128 {
  return v128.and(b, i8x16.splat(15));
}
@inline function hi4(b: v128): v128 {
  return v128.and(i16x8.shr_u(b, 4), i8x16.splat(15));
}

// The i32 sums of a 32-value block's codes times xq (q at the block's first value).
@inline function block32q8(kind: i32, blk: usize, q: usize): v128 {
  switch (kind) {
    case Q8_0: return i32x4.add(dotQ16(v128.load(blk, 2), q), dotQ16(v128.load(blk, 18), q + 32));
    case Q4_0: {
      const b = v128.load(blk, 2);
      const o = i8x16.splat(8);
      return i32x4.add(dotQ16(i8x16.sub(lo4(b), o), q), dotQ16(i8x16.sub(hi4(b), o), q + 32));
    }
    case Q4_1: {
      const b = v128.load(blk, 4);
      return i32x4.add(dotQ16(lo4(b), q), dotQ16(hi4(b), q + 32));
    }
    case Q5_0:
    case Q5_1: {
      const q5 = kind == Q5_1;
      const b = v128.load(blk + (q5 ? 8 : 6));
      const qh = load<u32>(blk + (q5 ? 4 : 2));
      let lo = v128.or(lo4(b), hi5(qh, 0));
      let hi = v128.or(hi4(b), hi5(qh, 1));
      if (!q5) {
        lo = i8x16.sub(lo, i8x16.splat(16));
        hi = i8x16.sub(hi, i8x16.splat(16));
      }
      return i32x4.add(dotQ16(lo, q), dotQ16(hi, q + 32));
    }
    default: {
      // IQ4_NL
      const b = v128.load(blk, 2);
      const kv = v128.load(KV);
      return i32x4.add(dotQ16(i8x16.swizzle(kv, lo4(b)), q), dotQ16(i8x16.swizzle(kv, hi4(b)), q + 32));
    }
  }
}

// Block b of a row (p = its bytes) times d * dx (dx is the same for both 16s of a 32-value block).
@inline function scaled32(kind: i32, p: usize, b: i32, xq: usize, dx: usize): v128 {
  const d = halfToF32(<u32>load<u16>(p)) * load<f32>(dx + (<usize>b << 3));
  return f32x4.mul(f32x4.convert_i32x4_s(block32q8(kind, p, xq + (<usize>b << 6))), f32x4.splat(d));
}

// ---- 256-value super-blocks: codes per 16 values, each times comb[g] = scale * dx -----------

// 16 codes of sub-block g of the row (value 16g..) against xq, times comb[g].
@inline function part16(c: v128, xq: usize, comb: usize, g: i32): v128 {
  return f32x4.mul(f32x4.convert_i32x4_s(dotQ16(c, xq + (<usize>g << 5))), v128.load32_splat(comb + (<usize>g << 2)));
}

// Q4_K / Q5_K chunk i of the row (values 64i..: low nibbles of qs[32c ..] then high nibbles, c = i & 3).
@inline function chunkK45q8(q5: bool, blk: usize, c: i32, i: i32, xq: usize, comb: usize): v128 {
  const q = blk + (q5 ? 48 : 16) + (<usize>c << 5);
  const b0 = v128.load(q);
  const b1 = v128.load(q, 16);
  let l0 = lo4(b0), l1 = lo4(b1), h0 = hi4(b0), h1 = hi4(b1);
  if (q5) {
    // bits 2c, 2c + 1 of qh[l] as bit 4 of the low / high nibble codes
    const m16 = i8x16.splat(16);
    const g0 = i16x8.shr_u(v128.load(blk, 16), <u32>(2 * c));
    const g1 = i16x8.shr_u(v128.load(blk, 32), <u32>(2 * c));
    l0 = v128.or(l0, v128.and(i16x8.shl(g0, 4), m16));
    l1 = v128.or(l1, v128.and(i16x8.shl(g1, 4), m16));
    h0 = v128.or(h0, v128.and(i16x8.shl(g0, 3), m16));
    h1 = v128.or(h1, v128.and(i16x8.shl(g1, 3), m16));
  }
  const g = i << 2;
  return f32x4.add(f32x4.add(part16(l0, xq, comb, g), part16(l1, xq, comb, g + 1)), f32x4.add(part16(h0, xq, comb, g + 2), part16(h1, xq, comb, g + 3)));
}

// Q6_K / Q3_K / Q2_K half i of the row (128 values, super-block i >> 1, half h = i & 1): sub-block
// 2t + k of the half is codes(t) of bytes [16k ..] (layouts: gguf-simd.ts halfQ6 / halfQ3 / halfQ2).
@inline function codesHalf(kind: i32, a: v128, b: v128, m: v128, t: i32): v128 {
  if (kind == Q6_K) {
    // a = ql[16k..], b = ql[32 + 16k..], m = qh[16k..]: (nibble | 2 qh bits << 4) - 32
    const lo = t & 1 ? (t >> 1 ? hi4(b) : lo4(b)) : (t >> 1 ? hi4(a) : lo4(a));
    const hb = t == 0 ? i16x8.shl(m, 4) : t == 1 ? i16x8.shl(m, 2) : t == 2 ? m : i16x8.shr_u(m, 2);
    return i8x16.sub(v128.or(lo, v128.and(hb, i8x16.splat(0x30))), i8x16.splat(32));
  }
  if (kind == Q3_K) {
    // a = qs[16k..], m = hmask[16k..] >> 4h: (2 bits | hmask bit << 2) - 4
    const lo = v128.and(t == 0 ? a : i16x8.shr_u(a, 2 * t), i8x16.splat(3));
    const hb = t < 2 ? i16x8.shl(m, 2 - t) : t == 2 ? m : i16x8.shr_u(m, 1);
    return i8x16.sub(v128.or(lo, v128.and(hb, i8x16.splat(4))), i8x16.splat(4));
  }
  // Q2_K: a = qs[16k..]
  return v128.and(t == 0 ? a : i16x8.shr_u(a, 2 * t), i8x16.splat(3));
}
@inline function halfQ8(kind: i32, blk: usize, h: i32, i: i32, xq: usize, comb: usize): v128 {
  const z = i32x4.splat(0);
  let a0 = z, a1 = z, b0 = z, b1 = z, m0 = z, m1 = z;
  if (kind == Q6_K) {
    const ql = blk + (<usize>h << 6);
    a0 = v128.load(ql);
    a1 = v128.load(ql, 16);
    b0 = v128.load(ql, 32);
    b1 = v128.load(ql, 48);
    m0 = v128.load(blk + 128 + (<usize>h << 5));
    m1 = v128.load(blk + 144 + (<usize>h << 5));
  } else {
    const qs = blk + (kind == Q3_K ? 32 : 16) + (<usize>h << 5);
    a0 = v128.load(qs);
    a1 = v128.load(qs, 16);
    if (kind == Q3_K) {
      m0 = i16x8.shr_u(v128.load(blk), <u32>(4 * h));
      m1 = i16x8.shr_u(v128.load(blk, 16), <u32>(4 * h));
    }
  }
  const g = i << 3;
  const p0 = f32x4.add(part16(codesHalf(kind, a0, b0, m0, 0), xq, comb, g), part16(codesHalf(kind, a1, b1, m1, 0), xq, comb, g + 1));
  const p1 = f32x4.add(part16(codesHalf(kind, a0, b0, m0, 1), xq, comb, g + 2), part16(codesHalf(kind, a1, b1, m1, 1), xq, comb, g + 3));
  const p2 = f32x4.add(part16(codesHalf(kind, a0, b0, m0, 2), xq, comb, g + 4), part16(codesHalf(kind, a1, b1, m1, 2), xq, comb, g + 5));
  const p3 = f32x4.add(part16(codesHalf(kind, a0, b0, m0, 3), xq, comb, g + 6), part16(codesHalf(kind, a1, b1, m1, 3), xq, comb, g + 7));
  return f32x4.add(f32x4.add(p0, p1), f32x4.add(p2, p3));
}

// IQ4_XS sub-block i of the row (32 values: low then high nibbles of qs[16j ..], j = i & 7).
@inline function unitIQ4XSq8(blk: usize, j: i32, i: i32, xq: usize, comb: usize): v128 {
  const b = v128.load(blk + 8 + (<usize>j << 4));
  const kv = v128.load(KV);
  return f32x4.add(part16(i8x16.swizzle(kv, lo4(b)), xq, comb, 2 * i), part16(i8x16.swizzle(kv, hi4(b)), xq, comb, 2 * i + 1));
}

// ---- rows ------------------------------------------------------------------------------------

// y[r] for rows [0, nrows); xs = x^ sums per 16, dx per 16, xq (common.ts quantizeX); xs32 and
// comb (rowLen / 32 and rowLen / 16 floats) and sc (rowLen / 16) are scratch.
@inline export function ggufRowsQ8(kind: i32, block: i32, bytes: i32, hasMin: bool, w: usize, nrows: i32, rowLen: i32, y: usize, xs: usize, xs32: usize, sc: usize, comb: usize): void {
  const nb = rowLen / block;
  const rowBytes = <usize>nb * <usize>bytes;
  const n16 = rowLen >> 4;
  const dx = xs + (<usize>n16 << 2);
  const xq = dx + (<usize>n16 << 2);
  for (let r = 0; r < nrows; r++) {
    const row = w + <usize>r * rowBytes;
    let a0 = f32x4.splat(0);
    let a1 = f32x4.splat(0);
    let mn: f32 = 0;
    if (block == 32) {
      let b = 0;
      for (; b + 2 <= nb; b += 2) {
        a0 = f32x4.add(a0, scaled32(kind, row + <usize>b * <usize>bytes, b, xq, dx));
        a1 = f32x4.add(a1, scaled32(kind, row + <usize>(b + 1) * <usize>bytes, b + 1, xq, dx));
      }
      if (b < nb) a0 = f32x4.add(a0, scaled32(kind, row + <usize>b * <usize>bytes, b, xq, dx));
      if (hasMin) {
        for (b = 0; b < nb; b++) mn += halfToF32(<u32>load<u16>(row + <usize>b * <usize>bytes, 2)) * (load<f32>(xs + (<usize>b << 3)) + load<f32>(xs + (<usize>b << 3), 4));
      }
    } else {
      mn = -rowScales(kind, row, nb, bytes, sc, xs, xs32);
      // comb[g] = the sub-block scale of values 16g.. times dx[g]
      const per32 = kind != Q6_K && kind != Q3_K && kind != Q2_K;
      for (let g = 0; g < n16; g++) {
        const s = load<f32>(sc + (<usize>(per32 ? g >> 1 : g) << 2));
        store<f32>(comb + (<usize>g << 2), s * load<f32>(dx + (<usize>g << 2)));
      }
      if (kind == Q4_K || kind == Q5_K) {
        for (let i = 0; i < nb << 2; i++) a0 = f32x4.add(a0, chunkK45q8(kind == Q5_K, row + <usize>(i >> 2) * <usize>bytes, i & 3, i, xq, comb));
      } else if (kind == Q6_K || kind == Q3_K || kind == Q2_K) {
        for (let i = 0; i < nb << 1; i++) a0 = f32x4.add(a0, halfQ8(kind, row + <usize>(i >> 1) * <usize>bytes, i & 1, i, xq, comb));
      } else {
        for (let i = 0; i < nb << 3; i++) a0 = f32x4.add(a0, unitIQ4XSq8(row + <usize>(i >> 3) * <usize>bytes, i & 7, i, xq, comb));
      }
    }
    store<f32>(y + (<usize>r << 2), hsum(f32x4.add(a0, a1)) + mn);
  }
}
