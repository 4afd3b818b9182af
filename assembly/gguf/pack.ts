// Pieces shared by the GGUF block kernels: the row driver, byte-code -> f32 stores, 4- and 2-bit
// packing and the importance weights of a 256-value super-block. The @inline ones sit in hot loops;
// each keeps the exact operation order of the kernels that used to carry a copy (outputs are
// compared byte for byte).
import { A_IMATRIX, A_SCRATCH, argU32, rowF32 } from '../common';

/**
 * Row driver of the block quantizers whose block function takes (x, qw, y): each row is read as
 * f32 (rowF32), then each block of `block` values (qw: its importances, or 0) is written to
 * `bytes` bytes. The block call is indirect: fine for the 256-value super-blocks (microseconds
 * each), measurable (~6%) on 32-value blocks, whose kernels keep their own direct-call loops.
 */
export function quantizeBlockRows(
  src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize,
  block: i32, bytes: i32, quantizeBlock: (x: usize, qw: usize, y: usize) => void,
): void {
  const scratch = argU32(args, A_SCRATCH);
  const qw = argU32(args, A_IMATRIX);
  const nb = rowLen / block;
  const step = <usize>block << 2;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * <usize>nb * <usize>bytes;
    for (let b = 0; b < nb; b++) {
      quantizeBlock(x + <usize>b * step, qw != 0 ? qw + <usize>b * step : 0, y + <usize>b * <usize>bytes);
    }
  }
}

@inline export function f32At(p: usize, i: i32): f32 {
  return load<f32>(p + (<usize>i << 2));
}

// Byte constants of the dequantizers, loaded rather than splat (a splat in a block loop is rebuilt
// per block): 15 at NIB, 8 at NIB + 16, 16 at NIB + 32, 3 at NIB + 48, 32 at NIB + 64.
export const NIB = memory.data<u8>([
  15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
  8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8,
  16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
  3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
  32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32,
]);

// The high nibbles of 16 bytes: a 16-bit shift and the nibble mask (i8x16.shr_u is both, plus a
// mask rebuilt at each use).
@inline export function hiNibbles(q: v128, mask: v128): v128 {
  return v128.and(i16x8.shr_u(q, 4), mask);
}

// 16 unsigned byte codes -> q*d + m (multiply, then add: the product is exact, spec §15) (Q4_1, Q5_1).
@inline export function storeQDM(y: usize, c: v128, vd: v128, vm: v128): void {
  const lo = i16x8.extend_low_i8x16_u(c);
  const hi = i16x8.extend_high_i8x16_u(c);
  v128.store(y, f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_u(lo)), vd), vm));
  v128.store(y + 16, f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_u(lo)), vd), vm));
  v128.store(y + 32, f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_u(hi)), vd), vm));
  v128.store(y + 48, f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_u(hi)), vd), vm));
}

// 16 unsigned byte codes -> 16 floats a*q - b (Q2_K, Q4_K, Q5_K).
@inline export function storeAQB(y: usize, c: v128, va: v128, vb: v128): void {
  const lo = i16x8.extend_low_i8x16_u(c);
  const hi = i16x8.extend_high_i8x16_u(c);
  v128.store(y, f32x4.sub(f32x4.mul(va, f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_u(lo))), vb));
  v128.store(y + 16, f32x4.sub(f32x4.mul(va, f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_u(lo))), vb));
  v128.store(y + 32, f32x4.sub(f32x4.mul(va, f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_u(hi))), vb));
  v128.store(y + 48, f32x4.sub(f32x4.mul(va, f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_u(hi))), vb));
}

// 16 signed byte codes -> 16 floats a*q (Q4_0, Q5_0, Q3_K, Q6_K, IQ4, the IQ2 / IQ3 grids, Q2_0).
@inline export function storeAQ(y: usize, c: v128, va: v128): void {
  const lo = i16x8.extend_low_i8x16_s(c);
  const hi = i16x8.extend_high_i8x16_s(c);
  v128.store(y, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(lo)), va));
  v128.store(y + 16, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(lo)), va));
  v128.store(y + 32, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(hi)), va));
  v128.store(y + 48, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(hi)), va));
}

// 16 bytes at y = codes at lo (low nibbles) | codes at hi (high nibbles).
@inline export function packNibbles16(lo: usize, hi: usize, y: usize): void {
  if (ASC_FEATURE_SIMD) {
    v128.store(y, v128.or(v128.load(lo), i8x16.shl(v128.load(hi), 4)));
  } else {
    for (let j: usize = 0; j < 16; j++) store<u8>(y + j, load<u8>(lo + j) | (load<u8>(hi + j) << 4));
  }
}

// 32 four-bit codes at c -> element j low nibble, j + 16 high (Q4_0, Q4_1).
@inline export function packNibbles32(c: usize, y: usize): void {
  packNibbles16(c, c + 16, y);
}

/**
 * Importance weights of one 256-value super-block (Q2_K..Q4_K/Q5_K, spec §14):
 * W[l] = qw[l]*sqrt(sigma2 + x[l]^2), sigma2 = k*sum(x^2)/256, and SW[j] = the sum of W over each
 * of the 256/len sub-blocks of len values.
 */
export function imatrixWeights256(x: usize, qw: usize, k: f32, len: i32, W: usize, SW: usize): void {
  let sumX2: f32 = 0;
  for (let l = 0; l < 256; l++) {
    const v = f32At(x, l);
    sumX2 += v * v;
  }
  const sigma2: f32 = (k * sumX2) / 256;
  if (ASC_FEATURE_SIMD) {
    const vs = f32x4.splat(sigma2);
    for (let l = 0; l < 256; l += 4) {
      const v = v128.load(x + (<usize>l << 2));
      v128.store(W + (<usize>l << 2), f32x4.mul(v128.load(qw + (<usize>l << 2)), f32x4.sqrt(f32x4.add(vs, f32x4.mul(v, v)))));
    }
  } else {
    for (let l = 0; l < 256; l++) {
      const v = f32At(x, l);
      store<f32>(W + (<usize>l << 2), f32At(qw, l) * Mathf.sqrt(sigma2 + v * v));
    }
  }
  for (let j = 0; j < 256 / len; j++) {
    let sumw: f32 = 0;
    for (let l = 0; l < len; l++) sumw += f32At(W, len * j + l);
    store<f32>(SW + (<usize>j << 2), sumw);
  }
}

// 2-bit packing (also Q3_K's low bits): element 128h + 32j + l -> bits 2j..2j+1 of q[32h + l].
export function packCodes2(L: usize, q: usize): void {
  if (ASC_FEATURE_SIMD) {
    for (let h = 0; h < 2; h++) {
      for (let k = 0; k < 2; k++) {
        const p = L + (<usize>h << 7) + (<usize>k << 4);
        const v = v128.or(
          v128.or(v128.load(p), i8x16.shl(v128.load(p + 32), 2)),
          v128.or(i8x16.shl(v128.load(p + 64), 4), i8x16.shl(v128.load(p + 96), 6)),
        );
        v128.store(q + (<usize>h << 5) + (<usize>k << 4), v);
      }
    }
  } else {
    for (let h = 0; h < 2; h++) {
      for (let l = 0; l < 32; l++) {
        const p = L + (<usize>h << 7) + <usize>l;
        const v = <u32>load<u8>(p) | (<u32>load<u8>(p + 32) << 2) | (<u32>load<u8>(p + 64) << 4) | (<u32>load<u8>(p + 96) << 6);
        store<u8>(q + (<usize>h << 5) + <usize>l, <u8>v);
      }
    }
  }
}
