// SIMD f32-activation matvec for the GGUF block types (serve/gguf.ts keeps the scalar build's
// decode-then-dot path and the int8-activation path). Codes go from the block's bytes to f32
// lanes by shifts (simd.ts), dotted with x transposed per 16 (xt); the block or sub-block scale
// multiplies each partial sum once. Minimum terms (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K) use the sums of x
// per 16 (xs) computed once per call.
//
// Signed codes stored with an offset (q - 8, q - 16, q - 32) are the two's complement of q with the
// top bit flipped, so one xor per 16 bytes makes them sign-extendable by the shifts.
import { hsum } from './common';
import { byteU, dot4x4, dotS4, dotS8, dotU4, halfToF32 } from './simd';
import { KVALUES, highBits32 } from '../gguf/iq4_common';

export const Q8_0: i32 = 0, Q4_0: i32 = 1, Q4_1: i32 = 2, Q5_0: i32 = 3, Q5_1: i32 = 4, IQ4_NL: i32 = 5;
export const IQ4_XS: i32 = 6, Q2_K: i32 = 7, Q3_K: i32 = 8, Q4_K: i32 = 9, Q5_K: i32 = 10, Q6_K: i32 = 11;

// IQ4_NL / IQ4_XS code book (kvalues_iq4nl): the quantizers' table.
export const KV: usize = KVALUES;

// Bytes 0x10 where bit (16*half + i) of qh is set (the 5th bit of Q5_0 / Q5_1 codes).
@inline export function hi5(qh: u32, half: i32): v128 {
  return v128.and(highBits32(qh, half), i8x16.splat(16));
}

// Signed 5- / 6-bit codes held in the low bits of each byte (higher bits ignored), 16 of them
// dotted with 16 transposed floats.
@inline export function sext(v: v128, k: i32, bits: i32): v128 {
  return i32x4.shr_s(i32x4.shl(v, 32 - bits - 8 * k), 32 - bits);
}
@inline function dotSBits(v: v128, bits: i32, xt: usize): v128 {
  return dot4x4(sext(v, 0, bits), sext(v, 1, bits), sext(v, 2, bits), sext(v, 3, bits), xt);
}

// Unsigned bytes dotted like dotU8, byte 0 of each lane by one and with a mask loaded from memory
// instead of two shifts (Q6_K: 1.05x; docs/CONTRIBUTING-kernels.md).
const LOW_BYTE = memory.data<u32>([0xff, 0xff, 0xff, 0xff]);
@inline function dotU8Low(v: v128, xt: usize): v128 {
  return dot4x4(v128.and(v, v128.load(LOW_BYTE)), byteU(v, 1), byteU(v, 2), byteU(v, 3), xt);
}

// ---- 32-value blocks: the scaled partial sums of one block (xt at the block's first value) ----

@inline function block32(kind: i32, blk: usize, xt: usize): v128 {
  let s: v128;
  let d = halfToF32(<u32>load<u16>(blk));
  switch (kind) {
    case Q8_0: {
      s = f32x4.add(dotS8(v128.load(blk, 2), xt), dotS8(v128.load(blk, 18), xt + 64));
      break;
    }
    case Q4_0: {
      const b = v128.xor(v128.load(blk, 2), i8x16.splat(-120)); // nibbles q ^ 8 = two's complement q - 8
      s = f32x4.add(dotS4(b, 0, xt), dotS4(b, 1, xt + 64));
      break;
    }
    case Q4_1: {
      const b = v128.load(blk, 4);
      s = f32x4.add(dotU4(b, 0, xt), dotU4(b, 1, xt + 64));
      break;
    }
    case Q5_0:
    case Q5_1: {
      const q5 = kind == Q5_1;
      const b = v128.load(blk + (q5 ? 8 : 6));
      const qh = load<u32>(blk + (q5 ? 4 : 2));
      // 5-bit codes (nibble | bit << 4) in bytes; Q5_0's q - 16 via the flipped top bit
      const m = i8x16.splat(15);
      const lo = v128.or(v128.and(b, m), hi5(qh, 0));
      const hi = v128.or(v128.and(i16x8.shr_u(b, 4), m), hi5(qh, 1));
      if (q5) {
        s = f32x4.add(dotS8(lo, xt), dotS8(hi, xt + 64));
      } else {
        const f = i8x16.splat(16);
        s = f32x4.add(dotSBits(v128.xor(lo, f), 5, xt), dotSBits(v128.xor(hi, f), 5, xt + 64));
      }
      break;
    }
    default: {
      // IQ4_NL: the code book by swizzle (nibbles 0..15 index a 16-byte table)
      const b = v128.load(blk, 2);
      const kv = v128.load(KV);
      const m = i8x16.splat(15);
      s = f32x4.add(dotS8(i8x16.swizzle(kv, v128.and(b, m)), xt), dotS8(i8x16.swizzle(kv, v128.and(i16x8.shr_u(b, 4), m)), xt + 64));
      break;
    }
  }
  return f32x4.mul(s, f32x4.splat(d));
}

// m * (sum of x over the block) for Q4_1 / Q5_1 (value = d q + m); xs = this block's two x sums per 16.
@inline function min32(blk: usize, xs: usize): f32 {
  return halfToF32(<u32>load<u16>(blk, 2)) * (load<f32>(xs) + load<f32>(xs, 4));
}

// ---- 256-value super-blocks -------------------------------------------------------------------
// Two passes per row: the first decodes every sub-block scale of the row (times d) into `sc`, in
// value order, and returns the row's minimum term; then a branch-free SIMD loop walks the row in
// chunks that share their code loads (64 values for Q4_K / Q5_K, 128 for Q2_K / Q3_K / Q6_K, 32 for
// IQ4_XS), reading each scale back with load32_splat.

// Q4_K / Q5_K: the 8 6-bit scales and mins packed in 12 bytes (llama.cpp get_scale_min_k4), as
// two u32 of scale bytes (sub-blocks 0-3, 4-7) and two of min bytes.
@inline export function k4Words(sc: usize): v128 {
  const a = load<u32>(sc);
  const b = load<u32>(sc, 4);
  const c = load<u32>(sc, 8);
  const s47 = (c & 0x0f0f0f0f) | (((a >> 6) & 0x03030303) << 4);
  const m47 = ((c >> 4) & 0x0f0f0f0f) | (((b >> 6) & 0x03030303) << 4);
  return i32x4.replace_lane(i32x4.replace_lane(i32x4.replace_lane(i32x4.splat(a & 0x3f3f3f3f), 1, s47), 2, b & 0x3f3f3f3f), 3, m47);
}

// Bytes 4k..4k+3 of v (k a constant) zero-extended to f32 lanes, in order.
@inline export function bytesF32(v: v128, k: i32): v128 {
  const h = k < 2 ? i16x8.extend_low_i8x16_u(v) : i16x8.extend_high_i8x16_u(v);
  return f32x4.convert_i32x4_s(k & 1 ? i32x4.extend_high_i16x8_u(h) : i32x4.extend_low_i16x8_u(h));
}
@inline export function sbytesF32(v: v128, k: i32): v128 {
  const h = k < 2 ? i16x8.extend_low_i8x16_s(v) : i16x8.extend_high_i8x16_s(v);
  return f32x4.convert_i32x4_s(k & 1 ? i32x4.extend_high_i16x8_s(h) : i32x4.extend_low_i16x8_s(h));
}

// Scales of every sub-block of a row into sc (one per 32 values for Q4_K / Q5_K / IQ4_XS, one per
// 16 for the others); returns the sum of dmin * m * (x sum of the sub-block) over the row.
// xs = x sums per 16, xs32 = per 32 (the int8-activation path passes the sums of x^).
// q6Offset: Q6_K's codes are dotted unsigned (0..63, see halfQ6), so its -32 offset is a minimum
// term, 32 d sc (x sum) per 16; the int8-activation path dots signed codes and passes false.
@inline export function rowScales(kind: i32, row: usize, nb: i32, bytes: i32, sc: usize, xs: usize, xs32: usize, q6Offset: bool = false): f32 {
  let mn = f32x4.splat(0);
  for (let b = 0; b < nb; b++) {
    const blk = row + <usize>b * <usize>bytes;
    switch (kind) {
      case Q4_K:
      case Q5_K: {
        const w = k4Words(blk + 4);
        const d = f32x4.splat(halfToF32(<u32>load<u16>(blk)));
        const dmin = f32x4.splat(halfToF32(<u32>load<u16>(blk, 2)));
        const o = <usize>b << 5;
        v128.store(sc + o, f32x4.mul(bytesF32(w, 0), d));
        v128.store(sc + o, f32x4.mul(bytesF32(w, 1), d), 16);
        const m = f32x4.add(f32x4.mul(bytesF32(w, 2), v128.load(xs32 + o)), f32x4.mul(bytesF32(w, 3), v128.load(xs32 + o, 16)));
        mn = f32x4.add(mn, f32x4.mul(m, dmin));
        break;
      }
      case Q6_K: {
        const d = f32x4.splat(halfToF32(<u32>load<u16>(blk, 208)));
        const v = v128.load(blk, 192);
        const o = <usize>b << 6;
        const s0 = f32x4.mul(sbytesF32(v, 0), d);
        const s1 = f32x4.mul(sbytesF32(v, 1), d);
        const s2 = f32x4.mul(sbytesF32(v, 2), d);
        const s3 = f32x4.mul(sbytesF32(v, 3), d);
        v128.store(sc + o, s0);
        v128.store(sc + o, s1, 16);
        v128.store(sc + o, s2, 32);
        v128.store(sc + o, s3, 48);
        if (q6Offset) {
          const m = f32x4.add(
            f32x4.add(f32x4.mul(s0, v128.load(xs + o)), f32x4.mul(s1, v128.load(xs + o, 16))),
            f32x4.add(f32x4.mul(s2, v128.load(xs + o, 32)), f32x4.mul(s3, v128.load(xs + o, 48))));
          mn = f32x4.add(mn, f32x4.mul(m, f32x4.splat(32)));
        }
        break;
      }
      case Q2_K: {
        // scale byte: low nibble scale, high nibble min
        const d = f32x4.splat(halfToF32(<u32>load<u16>(blk, 80)));
        const dmin = f32x4.splat(halfToF32(<u32>load<u16>(blk, 82)));
        const v = v128.load(blk);
        const ls = v128.and(v, i8x16.splat(15));
        const ms = v128.and(i16x8.shr_u(v, 4), i8x16.splat(15));
        const o = <usize>b << 6;
        v128.store(sc + o, f32x4.mul(bytesF32(ls, 0), d));
        v128.store(sc + o, f32x4.mul(bytesF32(ls, 1), d), 16);
        v128.store(sc + o, f32x4.mul(bytesF32(ls, 2), d), 32);
        v128.store(sc + o, f32x4.mul(bytesF32(ls, 3), d), 48);
        const m = f32x4.add(
          f32x4.add(f32x4.mul(bytesF32(ms, 0), v128.load(xs + o)), f32x4.mul(bytesF32(ms, 1), v128.load(xs + o, 16))),
          f32x4.add(f32x4.mul(bytesF32(ms, 2), v128.load(xs + o, 32)), f32x4.mul(bytesF32(ms, 3), v128.load(xs + o, 48))));
        mn = f32x4.add(mn, f32x4.mul(m, dmin));
        break;
      }
      case Q3_K: {
        // 16 6-bit scales (minus 32) from 12 bytes: low 4 bits of scale j in byte j (j < 8) or the
        // high nibble of byte j - 8, top 2 bits = bits 2 (j >> 2) of byte 8 + (j & 3); as u32 words
        const d = f32x4.splat(halfToF32(<u32>load<u16>(blk, 108)));
        const a = load<u32>(blk, 96);
        const c4 = load<u32>(blk, 100);
        const c = load<u32>(blk, 104);
        const m4 = 0x0f0f0f0f;
        const m2 = 0x03030303;
        const w0 = (a & m4) | ((c & m2) << 4);
        const w1 = (c4 & m4) | (((c >> 2) & m2) << 4);
        const w2 = ((a >> 4) & m4) | (((c >> 4) & m2) << 4);
        const w3 = ((c4 >> 4) & m4) | (((c >> 6) & m2) << 4);
        const v = i8x16.sub(i32x4.replace_lane(i32x4.replace_lane(i32x4.replace_lane(i32x4.splat(w0), 1, w1), 2, w2), 3, w3), i8x16.splat(32));
        const o = <usize>b << 6;
        v128.store(sc + o, f32x4.mul(sbytesF32(v, 0), d));
        v128.store(sc + o, f32x4.mul(sbytesF32(v, 1), d), 16);
        v128.store(sc + o, f32x4.mul(sbytesF32(v, 2), d), 32);
        v128.store(sc + o, f32x4.mul(sbytesF32(v, 3), d), 48);
        break;
      }
      default: {
        // IQ4_XS: d * (6-bit ls - 32) per 32; ls_j = nibble j of scales_l (low nibble first) |
        // bits 2j, 2j + 1 of scales_h << 4. Even j and odd j as two u32 words of bytes, then interleaved.
        const d = f32x4.splat(halfToF32(<u32>load<u16>(blk)));
        const sh = <u32>load<u16>(blk, 2);
        const sl = load<u32>(blk, 4);
        const ev = (sh & 3) | (((sh >> 4) & 3) << 8) | (((sh >> 8) & 3) << 16) | (((sh >> 12) & 3) << 24);
        const od = ((sh >> 2) & 3) | (((sh >> 6) & 3) << 8) | (((sh >> 10) & 3) << 16) | (((sh >> 14) & 3) << 24);
        const we = (sl & 0x0f0f0f0f) | (ev << 4);
        const wo = ((sl >> 4) & 0x0f0f0f0f) | (od << 4);
        const v = i32x4.replace_lane(i32x4.splat(we), 1, wo);
        const ls = i8x16.sub(i8x16.shuffle(v, v, 0, 4, 1, 5, 2, 6, 3, 7, 8, 8, 8, 8, 8, 8, 8, 8), i8x16.splat(32));
        const o = <usize>b << 5;
        v128.store(sc + o, f32x4.mul(sbytesF32(ls, 0), d));
        v128.store(sc + o, f32x4.mul(sbytesF32(ls, 1), d), 16);
        break;
      }
    }
  }
  return hsum(mn);
}

// Two sub-blocks of 16 (codes c0 then c1, signed `bits` wide in the low bits of each byte) with
// scales sc[0], sc[1].
@inline function pair16(c0: v128, c1: v128, bits: i32, xt: usize, sc: usize): v128 {
  // bits 0: unsigned bytes (Q6_K)
  const p = bits == 8 ? dotS8(c0, xt) : bits == 0 ? dotU8Low(c0, xt) : dotSBits(c0, bits, xt);
  const q = bits == 8 ? dotS8(c1, xt + 64) : bits == 0 ? dotU8Low(c1, xt + 64) : dotSBits(c1, bits, xt + 64);
  return f32x4.add(f32x4.mul(p, v128.load32_splat(sc)), f32x4.mul(q, v128.load32_splat(sc, 4)));
}

// Q4_K / Q5_K chunk c of a super-block: sub-block 2c = low nibbles of qs[32c ..], 2c + 1 = high
// nibbles; Q5_K: bit 2c (2c + 1) of qh[l] as bit 4. xt, sc: at the chunk's first value / scale.
@inline function chunkK45(q5: bool, blk: usize, c: i32, xt: usize, sc: usize): v128 {
  const q = blk + (q5 ? 48 : 16) + (<usize>c << 5);
  const b0 = v128.load(q);
  const b1 = v128.load(q, 16);
  let lo: v128, hi: v128;
  if (q5) {
    const m15 = i8x16.splat(15);
    const m16 = i8x16.splat(16);
    const h0 = i16x8.shr_u(v128.load(blk, 16), <u32>(2 * c)); // bit 2c at bit 0, 2c + 1 at bit 1
    const h1 = i16x8.shr_u(v128.load(blk, 32), <u32>(2 * c));
    lo = f32x4.add(
      dotS8(v128.or(v128.and(b0, m15), v128.and(i16x8.shl(h0, 4), m16)), xt),
      dotS8(v128.or(v128.and(b1, m15), v128.and(i16x8.shl(h1, 4), m16)), xt + 64));
    hi = f32x4.add(
      dotS8(v128.or(v128.and(i16x8.shr_u(b0, 4), m15), v128.and(i16x8.shl(h0, 3), m16)), xt + 128),
      dotS8(v128.or(v128.and(i16x8.shr_u(b1, 4), m15), v128.and(i16x8.shl(h1, 3), m16)), xt + 192));
  } else {
    lo = f32x4.add(dotU4(b0, 0, xt), dotU4(b1, 0, xt + 64));
    hi = f32x4.add(dotU4(b0, 1, xt + 128), dotU4(b1, 1, xt + 192));
  }
  return f32x4.add(f32x4.mul(lo, v128.load32_splat(sc)), f32x4.mul(hi, v128.load32_splat(sc, 4)));
}

// Q6_K half h of a super-block (128 values 32t + 16k + l): low 4 bits = nibble t >> 1 of
// ql[64h + 32 (t & 1) + 16k + l], bits 4-5 = bits 2t, 2t + 1 of qh[32h + 16k + l]. Sub-block 2t + k
// of the half. The codes stay unsigned (no xor per 16, and byte 3 of a lane needs one shift, not
// two); rowScales subtracts the 32 offset once per 16 values from the x sums.
@inline export function q6Codes(ql: v128, qh: v128, t: i32): v128 {
  const lo = t >> 1 ? i16x8.shr_u(ql, 4) : ql;
  const hb = t == 0 ? i16x8.shl(qh, 4) : t == 1 ? i16x8.shl(qh, 2) : t == 2 ? qh : i16x8.shr_u(qh, 2);
  return v128.or(v128.and(lo, i8x16.splat(15)), v128.and(hb, i8x16.splat(0x30)));
}
// One sub-block of 16 (unsigned codes c, scale at sc) added to acc right away: fewer partial sums
// live at once than pair16's (they spilled).
@inline function addQ6(acc: v128, c: v128, xt: usize, sc: usize): v128 {
  return f32x4.add(acc, f32x4.mul(dotU8Low(c, xt), v128.load32_splat(sc)));
}
@inline function halfQ6(blk: usize, h: i32, xt: usize, sc: usize): v128 {
  const ql = blk + (<usize>h << 6);
  const qh = blk + 128 + (<usize>h << 5);
  // sub-blocks in the order that ends each loaded vector's use early: those of ql[0..16) and
  // qh[0..16) (2t + 0), then those of ql[16..32), qh[16..32) (2t + 1)
  const h0 = v128.load(qh);
  const a0 = v128.load(ql);
  let acc = addQ6(f32x4.splat(0), q6Codes(a0, h0, 0), xt, sc);
  acc = addQ6(acc, q6Codes(a0, h0, 2), xt + 256, sc + 16);
  const b0 = v128.load(ql, 32);
  acc = addQ6(acc, q6Codes(b0, h0, 1), xt + 128, sc + 8);
  acc = addQ6(acc, q6Codes(b0, h0, 3), xt + 384, sc + 24);
  const h1 = v128.load(qh, 16);
  const a1 = v128.load(ql, 16);
  acc = addQ6(acc, q6Codes(a1, h1, 0), xt + 64, sc + 4);
  acc = addQ6(acc, q6Codes(a1, h1, 2), xt + 320, sc + 20);
  const b1 = v128.load(ql, 48);
  acc = addQ6(acc, q6Codes(b1, h1, 1), xt + 192, sc + 12);
  return addQ6(acc, q6Codes(b1, h1, 3), xt + 448, sc + 28);
}

// Q3_K half h (128 values 32i + 16k + l): bits 2i, 2i + 1 of qs[32h + 16k + l], minus 4 unless
// bit 4h + i of hmask[16k + l] is set (= bit 2 flipped, then a 3-bit two's complement).
@inline export function q3Codes(q: v128, hm: v128, i: i32): v128 {
  const lo = i == 0 ? q : i16x8.shr_u(q, 2 * i);
  const hb = i < 2 ? i16x8.shl(hm, 2 - i) : i == 2 ? hm : i16x8.shr_u(hm, 1);
  return v128.xor(v128.or(v128.and(lo, i8x16.splat(3)), v128.and(hb, i8x16.splat(4))), i8x16.splat(4));
}
@inline function halfQ3(blk: usize, h: i32, xt: usize, sc: usize): v128 {
  const q0 = v128.load(blk + 32 + (<usize>h << 5));
  const q1 = v128.load(blk + 48 + (<usize>h << 5));
  const m0 = i16x8.shr_u(v128.load(blk), <u32>(4 * h)); // hmask bit 4h + i at bit i
  const m1 = i16x8.shr_u(v128.load(blk, 16), <u32>(4 * h));
  const p0 = pair16(q3Codes(q0, m0, 0), q3Codes(q1, m1, 0), 3, xt, sc);
  const p1 = pair16(q3Codes(q0, m0, 1), q3Codes(q1, m1, 1), 3, xt + 128, sc + 8);
  const p2 = pair16(q3Codes(q0, m0, 2), q3Codes(q1, m1, 2), 3, xt + 256, sc + 16);
  const p3 = pair16(q3Codes(q0, m0, 3), q3Codes(q1, m1, 3), 3, xt + 384, sc + 24);
  return f32x4.add(f32x4.add(p0, p1), f32x4.add(p2, p3));
}

// Q2_K half h (128 values 32i + 16k + l): bits 2i, 2i + 1 of qs[32h + 16k + l].
@inline export function q2Codes(q: v128, i: i32): v128 {
  return v128.and(i == 0 ? q : i16x8.shr_u(q, 2 * i), i8x16.splat(3));
}
@inline function halfQ2(blk: usize, h: i32, xt: usize, sc: usize): v128 {
  const q0 = v128.load(blk + 16 + (<usize>h << 5));
  const q1 = v128.load(blk + 32 + (<usize>h << 5));
  const p0 = pair16(q2Codes(q0, 0), q2Codes(q1, 0), 8, xt, sc);
  const p1 = pair16(q2Codes(q0, 1), q2Codes(q1, 1), 8, xt + 128, sc + 8);
  const p2 = pair16(q2Codes(q0, 2), q2Codes(q1, 2), 8, xt + 256, sc + 16);
  const p3 = pair16(q2Codes(q0, 3), q2Codes(q1, 3), 8, xt + 384, sc + 24);
  return f32x4.add(f32x4.add(p0, p1), f32x4.add(p2, p3));
}

// IQ4_XS sub-block j: low then high nibbles of qs[16j ..] through the code book.
@inline function unitIQ4XS(blk: usize, j: i32, xt: usize, sc: usize): v128 {
  const b = v128.load(blk + 8 + (<usize>j << 4));
  const kv = v128.load(KV);
  const m = i8x16.splat(15);
  const s = f32x4.add(dotS8(i8x16.swizzle(kv, v128.and(b, m)), xt), dotS8(i8x16.swizzle(kv, v128.and(i16x8.shr_u(b, 4), m)), xt + 64));
  return f32x4.mul(s, v128.load32_splat(sc));
}

// The row's sum for a 256-value kind, after rowScales: chunks of 64 / 128 / 32 values.
@inline function row256(kind: i32, row: usize, nb: i32, bytes: i32, xt: usize, sc: usize): v128 {
  let a = f32x4.splat(0);
  if (kind == Q4_K || kind == Q5_K) {
    for (let i = 0; i < nb << 2; i++) {
      const blk = row + <usize>(i >> 2) * <usize>bytes;
      a = f32x4.add(a, chunkK45(kind == Q5_K, blk, i & 3, xt + (<usize>i << 8), sc + (<usize>i << 3)));
    }
  } else if (kind == IQ4_XS) {
    for (let i = 0; i < nb << 3; i++) {
      const blk = row + <usize>(i >> 3) * <usize>bytes;
      a = f32x4.add(a, unitIQ4XS(blk, i & 7, xt + (<usize>i << 7), sc + (<usize>i << 2)));
    }
  } else {
    for (let i = 0; i < nb << 1; i++) {
      const blk = row + <usize>(i >> 1) * <usize>bytes;
      const h = i & 1;
      const xi = xt + (<usize>i << 9);
      const si = sc + (<usize>i << 5);
      a = f32x4.add(a, kind == Q6_K ? halfQ6(blk, h, xi, si) : kind == Q3_K ? halfQ3(blk, h, xi, si) : halfQ2(blk, h, xi, si));
    }
  }
  return a;
}

// ---- rows ------------------------------------------------------------------------------------

// y[r] for rows [0, nrows) of `kind` (block values, bytes per block); xt = x transposed per 16,
// xs = sums of x per 16 and xs32 per 32 (formats with mins), sc = room for a row's sub-block
// scales (rowLen / 16 floats). 32 values go two per loop trip into two accumulators (shorter add chains; more per
// trip spills registers, see simd.ts).
@inline export function ggufRowsSimd(kind: i32, block: i32, bytes: i32, hasMin: bool, w: usize, nrows: i32, rowLen: i32, xt: usize, y: usize, xs: usize, xs32: usize, sc: usize): void {
  const nb = rowLen / block;
  const rowBytes = <usize>nb * <usize>bytes;
  for (let r = 0; r < nrows; r++) {
    const row = w + <usize>r * rowBytes;
    let a0 = f32x4.splat(0);
    let a1 = f32x4.splat(0);
    let mn: f32 = 0;
    if (block == 32) {
      let b = 0;
      for (; b + 2 <= nb; b += 2) {
        const p = row + <usize>b * <usize>bytes;
        const xb = xt + (<usize>b << 7);
        a0 = f32x4.add(a0, block32(kind, p, xb));
        a1 = f32x4.add(a1, block32(kind, p + <usize>bytes, xb + 128));
        if (hasMin) mn += min32(p, xs + (<usize>b << 3)) + min32(p + <usize>bytes, xs + (<usize>b << 3) + 8);
      }
      if (b < nb) {
        const p = row + <usize>b * <usize>bytes;
        a0 = f32x4.add(a0, block32(kind, p, xt + (<usize>b << 7)));
        if (hasMin) mn += min32(p, xs + (<usize>b << 3));
      }
    } else {
      // the K-quants subtract their minimum terms (value = d sc q - dmin m)
      mn = -rowScales(kind, row, nb, bytes, sc, xs, xs32, true);
      a0 = row256(kind, row, nb, bytes, xt, sc);
    }
    // Q4_1 / Q5_1 add their minimum terms (value = d q + m)
    store<f32>(y + (<usize>r << 2), hsum(f32x4.add(a0, a1)) + mn);
  }
}
