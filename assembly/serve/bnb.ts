// Serving matvec for NF4 / FP4 (absmax per group, optional double-quantized absmax) and FP8
// (E4M3FN / E5M2, f32 scale per row or per tensor). Layouts: assembly/bnb/bnb4.ts, dq.ts, fp8.ts.
// Code-book values are looked up 16 at a time into F16BUF (SIMD: byte-plane swizzles, lut.ts) and
// dotted with x in f32; the group absmax / row scale multiplies each partial sum once.
import { A_AUX, A_FLAGS, A_GROUP, A_SCALES, A_SCRATCH, FLAG_DOUBLE_QUANT, FLAG_PER_TENSOR, argI32, argU32 } from '../common';
import { FP4_TABLE, NF4_TABLE, rowAbsmax } from '../bnb/bnb4';
import { lookupStore16, planes, splitPlanes } from '../bnb/lut';
import { NIB } from '../gguf/pack';
import { F16BUF, LUT, hsum, rowAddF16, rowBegin, rowEnd } from './common';
import { barrier, evenOddX } from './simd';
import { dotF } from './gguf-batch';

// SIMD: the table values of 16 codes (bytes of c) dotted with the 16 floats at x, as 4 partial
// sums: one swizzle per byte plane of the table (p0..p3, lut.ts), then two rounds of byte / 16-bit
// interleaves (punpckl/h) assemble the f32 lanes in code order, all in registers.
// With `store`, the four f32 vectors go to dst instead (the batched kernel's decode, 64 bytes).
@inline function lutDot16(c: v128, p0: v128, p1: v128, p2: v128, p3: v128, x: usize, store: bool = false, dst: usize = 0): v128 {
  const b0 = i8x16.swizzle(p0, c);
  const b1 = i8x16.swizzle(p1, c);
  const b2 = i8x16.swizzle(p2, c);
  const b3 = i8x16.swizzle(p3, c);
  const l01 = i8x16.shuffle(b0, b1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const h01 = i8x16.shuffle(b0, b1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const l23 = i8x16.shuffle(b2, b3, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const h23 = i8x16.shuffle(b2, b3, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const fa = i16x8.shuffle(l01, l23, 0, 8, 1, 9, 2, 10, 3, 11);
  const fb = i16x8.shuffle(l01, l23, 4, 12, 5, 13, 6, 14, 7, 15);
  const fd = i16x8.shuffle(h01, h23, 0, 8, 1, 9, 2, 10, 3, 11);
  const fe = i16x8.shuffle(h01, h23, 4, 12, 5, 13, 6, 14, 7, 15);
  if (store) {
    v128.store(dst, fa);
    v128.store(dst, fb, 16);
    v128.store(dst, fd, 32);
    v128.store(dst, fe, 48);
    return fa;
  }
  const a = f32x4.mul(fa, v128.load(x));
  const b = f32x4.mul(fb, v128.load(x, 16));
  const d = f32x4.mul(fd, v128.load(x, 32));
  const e = f32x4.mul(fe, v128.load(x, 48));
  return barrier(f32x4.add(f32x4.add(a, b), f32x4.add(d, e)));
}

// SIMD rows of a 4-bit code-book format, group size a multiple of 32: value 2j is the high nibble
// of byte j, so the high-nibble plane of 16 bytes pairs with the even values of x (evenOddX).
// Group sizes: powers of two, multiples of 32 (the caller checks the latter).
function matvec4Simd(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, table: usize): void {
  const gs = argI32(args, A_GROUP);
  const dq = (argI32(args, A_FLAGS) & FLAG_DOUBLE_QUANT) != 0;
  const nb = rowLen / gs;
  const am = argU32(args, A_SCRATCH);
  const xp = (am + (<usize>nb << 2) + 15) & ~(<usize>15);
  evenOddX(x, rowLen, xp, false);
  splitPlanes(table);
  const p0 = v128.load(planes);
  const p1 = v128.load(planes, 16);
  const p2 = v128.load(planes, 32);
  const p3 = v128.load(planes, 48);
  const steps = gs >> 5; // 32-value trips per group
  for (let r = 0; r < nrows; r++) {
    let sp = rowAbsmax(args, r, nb, dq, am);
    let qp = w + <usize>r * <usize>(rowLen >> 1);
    let xi = xp;
    let acc = f32x4.splat(0);
    // one trip per 32 values, both halves' sums scaled by the group's absmax at once; pointers
    // step instead of being rebuilt from the value index (fewer live integers, no spills)
    for (let g = 0; g < nb; g++) {
      const s = v128.load32_splat(sp);
      for (let j = 0; j < steps; j++) {
        const v = v128.load(qp);
        const m = v128.load(NIB);
        const hi = lutDot16(v128.and(i16x8.shr_u(v, 4), m), p0, p1, p2, p3, xi);
        const lo = lutDot16(v128.and(v, m), p0, p1, p2, p3, xi + 64);
        acc = f32x4.add(acc, f32x4.mul(f32x4.add(hi, lo), s));
        qp += 16;
        xi += 128;
      }
      sp += 4;
    }
    store<f32>(y + (<usize>r << 2), hsum(acc));
  }
}

function matvec4(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, table: usize): void {
  const gs = argI32(args, A_GROUP);
  const dq = (argI32(args, A_FLAGS) & FLAG_DOUBLE_QUANT) != 0;
  const nb = rowLen / gs;
  const am = argU32(args, A_SCRATCH);
  if (ASC_FEATURE_SIMD) {
    if ((gs & 31) == 0 && popcnt(gs) == 1) {
      matvec4Simd(w, nrows, rowLen, x, y, args, table);
      return;
    }
    splitPlanes(table);
  }
  for (let r = 0; r < nrows; r++) {
    const sc = rowAbsmax(args, r, nb, dq, am);
    const q = w + <usize>r * <usize>(rowLen >> 1);
    rowBegin();
    for (let b = 0; b < nb; b++) {
      const s = load<f32>(sc + (<usize>b << 2));
      for (let i = b * gs; i < (b + 1) * gs; i += 32) {
        const qb = q + (<usize>i >> 1);
        const xb = x + (<usize>i << 2);
        if (ASC_FEATURE_SIMD) {
          const one = f32x4.splat(1);
          const bytes = v128.load(qb);
          const hi = i8x16.shr_u(bytes, 4);
          const lo = v128.and(bytes, i8x16.splat(15));
          lookupStore16(i8x16.shuffle(hi, lo, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), v128.load(planes), v128.load(planes, 16), v128.load(planes, 32), v128.load(planes, 48), one, F16BUF);
          rowAddF16(F16BUF, s, xb);
          lookupStore16(i8x16.shuffle(hi, lo, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), v128.load(planes), v128.load(planes, 16), v128.load(planes, 32), v128.load(planes, 48), one, F16BUF);
          rowAddF16(F16BUF, s, xb + 64);
        } else {
          for (let h = 0; h < 2; h++) {
            for (let j = 0; j < 8; j++) {
              const c = <u32>load<u8>(qb + <usize>(8 * h + j));
              store<f32>(F16BUF + (<usize>(2 * j) << 2), load<f32>(table + (<usize>(c >> 4) << 2)));
              store<f32>(F16BUF + (<usize>(2 * j + 1) << 2), load<f32>(table + (<usize>(c & 15) << 2)));
            }
            rowAddF16(F16BUF, s, xb + (<usize>h << 6));
          }
        }
      }
    }
    store<f32>(y + (<usize>r << 2), rowEnd());
  }
}

// Several positions (see gguf-matmul.ts matmul32): y[b*yStride + r] = row r . x[b], each result
// matvec4Simd's bits. A block of rows' table values is decoded to f32 once (lutDot16's lanes, 128
// bytes per 32 values, in the order of x's even / odd halves) with the rows' group scales, then
// dotted with every position by matvec4Simd's operations (gguf-batch.ts dotF). The scalar build
// (and group sizes the SIMD matvec would not take) run matvec per position.
// Scratch: [a row's decoded absmax][positions, even / odd halves][the block's values][scales].
function matmul4(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32, table: usize): void {
  const gs = argI32(args, A_GROUP);
  if (!ASC_FEATURE_SIMD || (gs & 31) != 0 || popcnt(gs) != 1) {
    for (let b = 0; b < batch; b++) {
      matvec4(w, nrows, rowLen, x + ((<usize>b * <usize>rowLen) << 2), y + ((<usize>b * <usize>yStride) << 2), args, table);
    }
    return;
  }
  const dq = (argI32(args, A_FLAGS) & FLAG_DOUBLE_QUANT) != 0;
  const nb = rowLen / gs;
  const am = argU32(args, A_SCRATCH);
  const xBytes = <usize>rowLen << 2;
  const xp = (am + (<usize>nb << 2) + 15) & ~(<usize>15);
  for (let b = 0; b < batch; b++) evenOddX(x + <usize>b * xBytes, rowLen, xp + <usize>b * xBytes, false);
  splitPlanes(table);
  const p0 = v128.load(planes);
  const p1 = v128.load(planes, 16);
  const p2 = v128.load(planes, 32);
  const p3 = v128.load(planes, 48);
  const cf = xp + <usize>batch * xBytes;
  const per = max(1, <i32>(<usize>(256 << 10) / xBytes));
  const scs = cf + <usize>per * xBytes;
  const steps = gs >> 5;
  const m = v128.load(NIB);
  for (let r0 = 0; r0 < nrows; r0 += per) {
    const n = min(per, nrows - r0);
    for (let r = 0; r < n; r++) {
      memory.copy(scs + ((<usize>r * <usize>nb) << 2), rowAbsmax(args, r0 + r, nb, dq, am), <usize>nb << 2);
      const q = w + <usize>(r0 + r) * <usize>(rowLen >> 1);
      const c = cf + <usize>r * xBytes;
      for (let t = 0; t < rowLen >> 5; t++) {
        const v = v128.load(q + (<usize>t << 4));
        lutDot16(v128.and(i16x8.shr_u(v, 4), m), p0, p1, p2, p3, 0, true, c + (<usize>t << 7));
        lutDot16(v128.and(v, m), p0, p1, p2, p3, 0, true, c + (<usize>t << 7) + 64);
      }
    }
    for (let b = 0; b < batch; b++) {
      const xb = xp + <usize>b * xBytes;
      const yb = y + ((<usize>b * <usize>yStride + <usize>r0) << 2);
      for (let r = 0; r < n; r++) {
        let cp = cf + <usize>r * xBytes;
        let sp = scs + ((<usize>r * <usize>nb) << 2);
        let xi = xb;
        let acc = f32x4.splat(0);
        for (let g = 0; g < nb; g++) {
          const s = v128.load32_splat(sp);
          for (let j = 0; j < steps; j++) {
            acc = f32x4.add(acc, f32x4.mul(f32x4.add(dotF(cp, xi), dotF(cp + 64, xi + 64)), s));
            cp += 128;
            xi += 128;
          }
          sp += 4;
        }
        store<f32>(yb + (<usize>r << 2), hsum(acc));
      }
    }
  }
}
export function nf4_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul4(w, nrows, rowLen, x, y, args, batch, yStride, NF4_TABLE);
}
export function fp4_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul4(w, nrows, rowLen, x, y, args, batch, yStride, FP4_TABLE);
}

export function nf4_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec4(w, nrows, rowLen, x, y, args, NF4_TABLE);
}
export function fp4_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec4(w, nrows, rowLen, x, y, args, FP4_TABLE);
}

// FP8 code -> f32 for all 256 codes, as fp8.ts's dequantizer forms them (scale applied later).
function fp8Table(mshift: i32, scaleUp: f32, isE4M3: bool): void {
  const special: u32 = isE4M3 ? 0x7f : 0x7c;
  for (let c: u32 = 0; c < 256; c++) {
    const m = c & 0x7f;
    let v = reinterpret<f32>(m << mshift) * scaleUp;
    if (m >= special) v = isE4M3 || m > special ? NaN : Infinity;
    v = reinterpret<f32>(reinterpret<u32>(v) | ((c & 0x80) << 24));
    store<f32>(LUT + (<usize>c << 2), v);
  }
}

function matvec8(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  const perTensor = (argI32(args, A_FLAGS) & FLAG_PER_TENSOR) != 0;
  for (let r = 0; r < nrows; r++) {
    const s = perTensor ? load<f32>(argU32(args, A_AUX)) : load<f32>(argU32(args, A_SCALES) + (<usize>r << 2));
    const q = w + <usize>r * <usize>rowLen;
    rowBegin();
    let i = 0;
    for (; i + 16 <= rowLen; i += 16) {
      for (let j = 0; j < 16; j++) {
        store<f32>(F16BUF + (<usize>j << 2), load<f32>(LUT + (<usize>load<u8>(q + <usize>(i + j)) << 2)));
      }
      rowAddF16(F16BUF, s, x + (<usize>i << 2));
    }
    let t: f32 = 0;
    for (; i < rowLen; i++) t += load<f32>(LUT + (<usize>load<u8>(q + <usize>i) << 2)) * load<f32>(x + (<usize>i << 2));
    store<f32>(y + (<usize>r << 2), rowEnd() + s * t);
  }
}

// Several positions: a block of rows' values decoded through the table once (f32, value order),
// then matvec8's sums for each position: 16 values at a time into four lanes (macF16, the same
// operations as gguf-batch.ts dotF), the row scale on each 16, the tail left to right, as
// rowBegin / rowAddF16 / rowEnd form them in the SIMD build. The scalar build: matvec per position.
// Scratch: [the block's values].
function matmul8(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  if (!ASC_FEATURE_SIMD) {
    for (let b = 0; b < batch; b++) matvec8(w, nrows, rowLen, x + ((<usize>b * <usize>rowLen) << 2), y + ((<usize>b * <usize>yStride) << 2), args);
    return;
  }
  const perTensor = (argI32(args, A_FLAGS) & FLAG_PER_TENSOR) != 0;
  const xBytes = <usize>rowLen << 2;
  const cf = (argU32(args, A_SCRATCH) + 15) & ~(<usize>15);
  const per = max(1, <i32>(<usize>(256 << 10) / xBytes));
  const n16 = rowLen & ~15;
  for (let r0 = 0; r0 < nrows; r0 += per) {
    const n = min(per, nrows - r0);
    for (let r = 0; r < n; r++) {
      const q = w + <usize>(r0 + r) * <usize>rowLen;
      const c = cf + <usize>r * xBytes;
      for (let i = 0; i < rowLen; i++) store<f32>(c + (<usize>i << 2), load<f32>(LUT + (<usize>load<u8>(q + <usize>i) << 2)));
    }
    for (let b = 0; b < batch; b++) {
      const xb = x + <usize>b * xBytes;
      const yb = y + ((<usize>b * <usize>yStride + <usize>r0) << 2);
      for (let r = 0; r < n; r++) {
        const s = perTensor ? load<f32>(argU32(args, A_AUX)) : load<f32>(argU32(args, A_SCALES) + (<usize>(r0 + r) << 2));
        const c = cf + <usize>r * xBytes;
        let acc = f32x4.splat(0);
        for (let i = 0; i < n16; i += 16) {
          acc = f32x4.add(acc, f32x4.mul(dotF(c + (<usize>i << 2), xb + (<usize>i << 2)), f32x4.splat(s)));
        }
        let t: f32 = 0;
        for (let i = n16; i < rowLen; i++) t += load<f32>(c + (<usize>i << 2)) * load<f32>(xb + (<usize>i << 2));
        let v: f32 = 0;
        v += hsum(acc);
        store<f32>(yb + (<usize>r << 2), (v - 0) + s * t);
      }
    }
  }
}

export function fp8_e4m3_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  fp8Table(20, reinterpret<f32>(0x7b800000), true);
  matvec8(w, nrows, rowLen, x, y, args);
}
export function fp8_e5m2_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  fp8Table(21, reinterpret<f32>(0x77800000), false);
  matvec8(w, nrows, rowLen, x, y, args);
}
export function fp8_e4m3_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  fp8Table(20, reinterpret<f32>(0x7b800000), true);
  matmul8(w, nrows, rowLen, x, y, args, batch, yStride);
}
export function fp8_e5m2_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  fp8Table(21, reinterpret<f32>(0x77800000), false);
  matmul8(w, nrows, rowLen, x, y, args, batch, yStride);
}
