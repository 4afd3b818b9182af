// bitsandbytes-style 4-bit NF4 and FP4 with an absmax per block of groupSize (32/64/128/256).
// Row sections: codes (rowLen/2 bytes; byte j holds element 2j in the high nibble and 2j+1 in the
// low nibble, as bitsandbytes packs), then either scales (f32 absmax per block) or, with double
// quantization, absmax codes (u8 per block) whose group absmax values (f32 per 256 blocks of the
// flattened tensor, see dq.ts) the host puts at the start of aux, the offset in A_TSCALE.
// Code of x: v = x * (1/absmax) in f32 (bitsandbytes multiplies by the reciprocal; when 1/absmax
// overflows, i.e. fp32-denormal blocks, v = x / absmax), then the number of decision thresholds
// strictly below v. The thresholds are bitsandbytes' decision-tree constants (midpoints of adjacent
// table entries) rounded directly to f32, so a value exactly on a threshold takes the lower entry,
// as in bitsandbytes' `x > t` tree. An all-zero block has absmax 0 and 1/absmax := 0, so its codes
// are those of 0.0 (bitsandbytes computes 0 * inf = NaN there and emits code 0, i.e. -1.0 * 0).
// FP4 sign: v < 0, bitsandbytes' rule (-0.0 gets code 0; a tiny negative gets 8, i.e. -0.0).
// Dequantized value = TABLE[code] * absmax (f32).
import { A_AUX, A_FLAGS, A_GROUP, A_ROW0, A_SCALES, A_SCRATCH, A_TSCALE, FLAG_DOUBLE_QUANT, argF32, argI32, argU32, rowF32 } from '../common';
import { absmax, lookupStore16, planes, splitPlanes } from './lut';
import { hiNibbles, NIB } from '../gguf/pack';
import { dqDequantizeRow, dqQuantizeRow } from './dq';

const KIND_NF4: i32 = 0;
const KIND_FP4: i32 = 1;

// NF4 values (bitsandbytes' normal-float table, index order = value order).
export const NF4_TABLE = memory.data<u32>([
  0xbf800000, 0xbf3239b1, 0xbf066b30, 0xbeca32a0, 0xbe91a24d, 0xbe3d353f, 0xbdba7871, 0x00000000,
  0x3da2faff, 0x3e24cae3, 0x3e7c04dd, 0x3ead033a, 0x3ee1a4b8, 0x3f1007ab, 0x3f3913b3, 0x3f800000,
]);
// NF4 thresholds T[k] between entries k and k+1 (bitsandbytes' literals, e.g. 0.03979014977812767f).
const NF4_T = memory.data<u32>([
  0xbf591cd9, 0xbf1c5270, 0xbeeb8480, 0xbeadea76, 0xbe703cec, 0xbe0d38bc, 0xbd3a7871, 0x3d22faff,
  0x3df64863, 0x3e5067e0, 0x3e9582d4, 0x3ec753f9, 0x3f006d03, 0x3f248daf, 0x3f5c89d9, 0,
]);
// FP4 (bitsandbytes' E2M1 variant: values 0, 1/192, 1/6, 1/4, 1/3, 1/2, 2/3, 1 of the 3-bit magnitude
// codes 000, 001, 110, 111, 100, 101, 010, 011; bit 3 = sign). Entries 8..15 are the negatives.
export const FP4_TABLE = memory.data<u32>([
  0x00000000, 0x3baaaaab, 0x3f2aaaab, 0x3f800000, 0x3eaaaaab, 0x3f000000, 0x3e2aaaab, 0x3e800000,
  0x80000000, 0xbbaaaaab, 0xbf2aaaab, 0xbf800000, 0xbeaaaaab, 0xbf000000, 0xbe2aaaab, 0xbe800000,
]);
// FP4 magnitude thresholds between magnitude ranks r and r+1 (0.00260417f ... 0.8333333f).
const FP4_T = memory.data<u32>([0x3b2aaab9, 0x3db00000, 0x3e555555, 0x3e955555, 0x3ed55556, 0x3f155550, 0x3f555555, 0]);
// The SIMD NF4 stage-2 tables s0, s1, s2 (T[k], T[4+k], T[8+k], T[12+k]) and the swizzle base, as
// memory: V8 would rebuild vector constants inside the loop.
const NF4_S = memory.data<u32>([
  0xbf591cd9, 0xbe703cec, 0x3df64863, 0x3f006d03, // T[0], T[4], T[8], T[12]
  0xbf1c5270, 0xbe0d38bc, 0x3e5067e0, 0x3f248daf, // T[1], T[5], T[9], T[13]
  0xbeeb8480, 0xbd3a7871, 0x3e9582d4, 0x3f5c89d9, // T[2], T[6], T[10], T[14]
  0x03020100, 0x03020100, 0x03020100, 0x03020100, // byte offsets 0..3 in every lane
], 16);

// Magnitude rank (0..7, ascending value) -> 3-bit FP4 code.
const FP4_RANK_CODE = memory.data<u8>([0, 1, 6, 7, 4, 5, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0]);

@inline function thr(t: usize, k: i32): f32 {
  return load<f32>(t + (<usize>k << 2));
}

// Scalar codes: the same count as a 4-level binary search over the sorted thresholds, branch-free
// (the comparisons are data-dependent and would mispredict half the time).
@inline function nf4Code(v: f32): u32 {
  let c = <i32>(v > thr(NF4_T, 7)) << 3;
  c += <i32>(v > thr(NF4_T, c + 3)) << 2;
  c += <i32>(v > thr(NF4_T, c + 1)) << 1;
  return <u32>(c + <i32>(v > thr(NF4_T, c)));
}

@inline function fp4Code(v: f32): u32 {
  const a = Mathf.abs(v);
  let r = <i32>(a > thr(FP4_T, 3)) << 2;
  r += <i32>(a > thr(FP4_T, r + 1)) << 1;
  r += <i32>(a > thr(FP4_T, r));
  return <u32>load<u8>(FP4_RANK_CODE + <usize>r) | (<u32>(v < 0) << 3);
}

// NF4 codes of 4 lanes, negated, in every byte of each lane: a two-stage count of the thresholds
// below v. The comparison masks are -1 in all four bytes, so the counts run in i8 lanes. Stage 1
// counts T[3], T[7], T[11] (bucket b = 0..3); stage 2 counts the three thresholds inside the bucket,
// T[4b], T[4b+1], T[4b+2], picked per lane by a byte swizzle from s0/s1/s2 (= T[j], T[4+j], T[8+j],
// T[12+j]; byte index 4b + 0..3). The thresholds are sorted, so this equals the plain count of all 15.
@inline function nf4NegCodes4(v: v128, t3: v128, t7: v128, t11: v128, s0: v128, s1: v128, s2: v128): v128 {
  const nb = i8x16.add(i8x16.add(f32x4.gt(v, t3), f32x4.gt(v, t7)), f32x4.gt(v, t11)); // -b
  const nb2 = i8x16.add(nb, nb);
  const nb4 = i8x16.add(nb2, nb2); // -4b
  const idx = i8x16.sub(v128.load(NF4_S, 48), nb4);
  let c = i8x16.add(nb4, f32x4.gt(v, i8x16.swizzle(s0, idx)));
  c = i8x16.add(c, f32x4.gt(v, i8x16.swizzle(s1, idx)));
  return i8x16.add(c, f32x4.gt(v, i8x16.swizzle(s2, idx)));
}

// Four vectors of negated codes (every byte of a lane holds -code) -> 16 codes as bytes.
@inline function negCodes16(a: v128, b: v128, c: v128, d: v128): v128 {
  const m = i32x4.splat(0xff);
  return i8x16.neg(i8x16.narrow_i16x8_u(
    i16x8.narrow_i32x4_u(v128.and(a, m), v128.and(b, m)), i16x8.narrow_i32x4_u(v128.and(c, m), v128.and(d, m))));
}

// 16 codes (bytes) -> 8 bytes in the low half: element 2j in the high nibble, 2j+1 in the low one.
@inline function pack16(c: v128): v128 {
  const p = v128.or(i16x8.shl(v128.and(c, i16x8.splat(0xff)), 4), i16x8.shr_u(c, 8));
  return i8x16.narrow_i16x8_u(p, p);
}

// FP4: magnitude rank = count of the 7 magnitude thresholds below |v|.
@inline function fp4Rank4(v: v128, m0: v128, m1: v128, m2: v128, m3: v128, m4: v128, m5: v128, m6: v128): v128 {
  const a = f32x4.abs(v);
  let c = i32x4.neg(f32x4.gt(a, m0));
  c = i32x4.sub(c, f32x4.gt(a, m1));
  c = i32x4.sub(c, f32x4.gt(a, m2));
  c = i32x4.sub(c, f32x4.gt(a, m3));
  c = i32x4.sub(c, f32x4.gt(a, m4));
  c = i32x4.sub(c, f32x4.gt(a, m5));
  return i32x4.sub(c, f32x4.gt(a, m6));
}

@inline function narrow16(a: v128, b: v128, c: v128, d: v128): v128 {
  return i8x16.narrow_i16x8_u(i16x8.narrow_i32x4_u(a, b), i16x8.narrow_i32x4_u(c, d));
}

// Packs 32 codes (two vectors of 16 bytes) into 16 bytes: element 2j high nibble, 2j+1 low nibble.
@inline function pack32(c0: v128, c1: v128): v128 {
  const lo = i16x8.splat(0xff);
  const p0 = v128.or(i16x8.shl(v128.and(c0, lo), 4), i16x8.shr_u(c0, 8));
  const p1 = v128.or(i16x8.shl(v128.and(c1, lo), 4), i16x8.shr_u(c1, 8));
  return i8x16.narrow_i16x8_u(p0, p1);
}

// v = x * inv (blocks where 1/s overflows take the scalar path, which divides).
@inline function scaled(x: usize, vinv: v128): v128 {
  return f32x4.mul(v128.load(x), vinv);
}

@inline function tsplat(t: usize, k: i32): v128 {
  return f32x4.splat(load<f32>(t + (<usize>k << 2)));
}

// One row, SIMD: codes to q, block absmax values to sc (f32 each).
function quantizeRowSimd(x: usize, rowLen: i32, gs: i32, kind: i32, q: usize, sc: usize): void {
  if (kind == KIND_NF4) {
    const t3 = tsplat(NF4_T, 3), t7 = tsplat(NF4_T, 7), t11 = tsplat(NF4_T, 11);
    const s0 = v128.load(NF4_S), s1 = v128.load(NF4_S, 16), s2 = v128.load(NF4_S, 32);
    for (let b0 = 0; b0 < rowLen; b0 += gs) {
      const xb = x + (<usize>b0 << 2);
      const s = absmax(xb, gs);
      store<f32>(sc + (<usize>(b0 / gs) << 2), s);
      const inv: f32 = s != 0 ? 1 / s : 0;
      if (inv == Infinity) {
        quantizeBlockScalar(xb, gs, s, inv, true, KIND_NF4, q + (<usize>b0 >> 1));
        continue;
      }
      const vinv = f32x4.splat(inv);
      // 16 values at a time (8 output bytes), so that few vectors are live at once.
      for (let i = 0; i < gs; i += 16) {
        const p = xb + (<usize>i << 2);
        const c = negCodes16(
          nf4NegCodes4(scaled(p, vinv), t3, t7, t11, s0, s1, s2),
          nf4NegCodes4(scaled(p + 16, vinv), t3, t7, t11, s0, s1, s2),
          nf4NegCodes4(scaled(p + 32, vinv), t3, t7, t11, s0, s1, s2),
          nf4NegCodes4(scaled(p + 48, vinv), t3, t7, t11, s0, s1, s2));
        v128.store64_lane(q + (<usize>(b0 + i) >> 1), pack16(c), 0);
      }
    }
  } else {
    const m0 = tsplat(FP4_T, 0), m1 = tsplat(FP4_T, 1), m2 = tsplat(FP4_T, 2), m3 = tsplat(FP4_T, 3);
    const m4 = tsplat(FP4_T, 4), m5 = tsplat(FP4_T, 5), m6 = tsplat(FP4_T, 6);
    const rankCode = v128.load(FP4_RANK_CODE);
    const eight = i8x16.splat(8);
    const zero = f32x4.splat(0);
    for (let b0 = 0; b0 < rowLen; b0 += gs) {
      const xb = x + (<usize>b0 << 2);
      const s = absmax(xb, gs);
      store<f32>(sc + (<usize>(b0 / gs) << 2), s);
      const inv: f32 = s != 0 ? 1 / s : 0;
      if (inv == Infinity) {
        quantizeBlockScalar(xb, gs, s, inv, true, KIND_FP4, q + (<usize>b0 >> 1));
        continue;
      }
      const vinv = f32x4.splat(inv);
      for (let i = 0; i < gs; i += 32) {
        const p = xb + (<usize>i << 2);
        let c0 = v128(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        let c1 = c0;
        for (let h = 0; h < 2; h++) {
          const ph = p + <usize>(h << 6);
          const v0 = scaled(ph, vinv);
          const v1 = scaled(ph + 16, vinv);
          const v2 = scaled(ph + 32, vinv);
          const v3 = scaled(ph + 48, vinv);
          const r = narrow16(fp4Rank4(v0, m0, m1, m2, m3, m4, m5, m6), fp4Rank4(v1, m0, m1, m2, m3, m4, m5, m6),
            fp4Rank4(v2, m0, m1, m2, m3, m4, m5, m6), fp4Rank4(v3, m0, m1, m2, m3, m4, m5, m6));
          const neg = i8x16.narrow_i16x8_s(
            i16x8.narrow_i32x4_s(f32x4.lt(v0, zero), f32x4.lt(v1, zero)),
            i16x8.narrow_i32x4_s(f32x4.lt(v2, zero), f32x4.lt(v3, zero)));
          const c = v128.or(i8x16.swizzle(rankCode, r), v128.and(neg, eight));
          if (h == 0) c0 = c;
          else c1 = c;
        }
        v128.store(q + (<usize>(b0 + i) >> 1), pack32(c0, c1));
      }
    }
  }
}

// One block, scalar. `div`: v = x / s (1/s overflowed), else v = x * inv.
function quantizeBlockScalar(xb: usize, gs: i32, s: f32, inv: f32, div: bool, kind: i32, q: usize): void {
  for (let i = 0; i < gs; i += 2) {
    const a = load<f32>(xb + (<usize>i << 2));
    const b = load<f32>(xb + (<usize>i << 2) + 4);
    const va = div ? a / s : a * inv;
    const vb = div ? b / s : b * inv;
    const ca = kind == KIND_NF4 ? nf4Code(va) : fp4Code(va);
    const cb = kind == KIND_NF4 ? nf4Code(vb) : fp4Code(vb);
    store<u8>(q + (<usize>i >> 1), <u8>((ca << 4) | cb));
  }
}

// One row, scalar.
function quantizeRowScalar(x: usize, rowLen: i32, gs: i32, kind: i32, q: usize, sc: usize): void {
  for (let b0 = 0; b0 < rowLen; b0 += gs) {
    const xb = x + (<usize>b0 << 2);
    const s = absmax(xb, gs);
    store<f32>(sc + (<usize>(b0 / gs) << 2), s);
    const inv: f32 = s != 0 ? 1 / s : 0;
    quantizeBlockScalar(xb, gs, s, inv, inv == Infinity, kind, q + (<usize>b0 >> 1));
  }
}

function quantize4(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize, kind: i32): void {
  const gs = argI32(args, A_GROUP);
  const scratch = argU32(args, A_SCRATCH);
  const dq = (argI32(args, A_FLAGS) & FLAG_DOUBLE_QUANT) != 0;
  const nb = rowLen / gs;
  // With double quantization the row's f32 absmax values wait in scratch after the widened row,
  // and the group absmax values and offset come from the prepare hook (dq.ts).
  const am = scratch + (<usize>rowLen << 2);
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const q = dst + <usize>r * <usize>(rowLen >> 1);
    const sc = dq ? am : argU32(args, A_SCALES) + (<usize>r * <usize>nb << 2);
    if (ASC_FEATURE_SIMD) quantizeRowSimd(x, rowLen, gs, kind, q, sc);
    else quantizeRowScalar(x, rowLen, gs, kind, q, sc);
    if (dq) dqQuantizeRow(am, nb, argF32(args, A_TSCALE), firstBlock(args, r, nb), argU32(args, A_AUX), argU32(args, A_SCALES) + <usize>r * <usize>nb);
  }
}

// Number of the first block of row r of this call in the flattened tensor.
@inline function firstBlock(args: usize, r: i32, nb: i32): usize {
  return <usize>(argI32(args, A_ROW0) + r) * <usize>nb;
}

// Row r's f32 absmax per block: the scales section, or with double quantization its dequantized
// copy written to am (scratch). Shared with the serving matvec (serve/bnb.ts).
@inline export function rowAbsmax(args: usize, r: i32, nb: i32, dq: bool, am: usize): usize {
  if (dq) {
    dqDequantizeRow(argU32(args, A_SCALES) + <usize>r * <usize>nb, argU32(args, A_AUX), firstBlock(args, r, nb), nb, argF32(args, A_TSCALE), am);
    return am;
  }
  return argU32(args, A_SCALES) + (<usize>r * <usize>nb << 2);
}

function dequantize4(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize, table: usize): void {
  const gs = argI32(args, A_GROUP);
  const dq = (argI32(args, A_FLAGS) & FLAG_DOUBLE_QUANT) != 0;
  const nb = rowLen / gs;
  const am = argU32(args, A_SCRATCH);
  if (ASC_FEATURE_SIMD) {
    // One trip per 32 values (groups are multiples of 32); planes, nibble mask and pointers stay
    // in registers, as the lookups leave little else to save (9% over reloading them per trip).
    splitPlanes(table);
    const p0 = v128.load(planes);
    const p1 = v128.load(planes, 16);
    const p2 = v128.load(planes, 32);
    const p3 = v128.load(planes, 48);
    const m = v128.load(NIB);
    const steps = gs >> 5;
    for (let r = 0; r < nrows; r++) {
      let sp = rowAbsmax(args, r, nb, dq, am);
      let qp = src + <usize>r * <usize>(rowLen >> 1);
      let yp = dst + (<usize>r * <usize>rowLen << 2);
      for (let b = 0; b < nb; b++) {
        const vs = v128.load32_splat(sp);
        for (let j = 0; j < steps; j++) {
          const bytes = v128.load(qp);
          const hi = hiNibbles(bytes, m);
          const lo = v128.and(bytes, m);
          lookupStore16(i8x16.shuffle(hi, lo, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), p0, p1, p2, p3, vs, yp);
          lookupStore16(i8x16.shuffle(hi, lo, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), p0, p1, p2, p3, vs, yp + 64);
          qp += 16;
          yp += 128;
        }
        sp += 4;
      }
    }
    return;
  }
  for (let r = 0; r < nrows; r++) {
    const sc = rowAbsmax(args, r, nb, dq, am);
    const q = src + <usize>r * <usize>(rowLen >> 1);
    const y = dst + (<usize>r * <usize>rowLen << 2);
    for (let b = 0; b < nb; b++) {
      const s = load<f32>(sc + (<usize>b << 2));
      const qb = q + (<usize>(b * gs) >> 1);
      const yb = y + (<usize>(b * gs) << 2);
      for (let i = 0; i < gs; i += 2) {
        const c = <u32>load<u8>(qb + (<usize>i >> 1));
        store<f32>(yb + (<usize>i << 2), load<f32>(table + (<usize>(c >> 4) << 2)) * s);
        store<f32>(yb + (<usize>i << 2) + 4, load<f32>(table + (<usize>(c & 15) << 2)) * s);
      }
    }
  }
}

export function nf4_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantize4(src, srcType, nrows, rowLen, dst, args, KIND_NF4);
}
export function nf4_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  dequantize4(src, nrows, rowLen, dst, args, NF4_TABLE);
}
export function fp4_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantize4(src, srcType, nrows, rowLen, dst, args, KIND_FP4);
}
export function fp4_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  dequantize4(src, nrows, rowLen, dst, args, FP4_TABLE);
}
