// Q1_0 (ggml type 41): blocks of 128 values in 18 bytes (1.125 bpw).
// Layout: d: fp16 at 0, qs: u8[16] at 2. Bit j % 8 of qs[j / 8] is the sign of value j: 1 gives d,
// 0 gives -d.
// Quantizer (llama.cpp's quantize_row_q1_0_ref): d = (sum of |x| in order) / 128, bit = x >= 0
// (so -0 gives d). The sum is a sequential fp32 sum; the SIMD build runs four blocks' sums at
// once, one per lane, each in its own order.
import { A_SCRATCH, argU32, f16ToF32, f32ToF16, rowF32 } from '../common';

export const Q1_0_BLOCK: i32 = 128;
export const Q1_0_BYTES: i32 = 18;

/** The 128 sign bits of x into y (16 bytes). */
@inline function signBits(x: usize, y: usize): void {
  if (ASC_FEATURE_SIMD) {
    const zero = f32x4.splat(0);
    for (let j: usize = 0; j < 128; j += 16) {
      const a = i16x8.narrow_i32x4_s(f32x4.ge(v128.load(x + (j << 2)), zero), f32x4.ge(v128.load(x + (j << 2) + 16), zero));
      const b = i16x8.narrow_i32x4_s(f32x4.ge(v128.load(x + (j << 2) + 32), zero), f32x4.ge(v128.load(x + (j << 2) + 48), zero));
      store<u16>(y + (j >> 3), <u16>i8x16.bitmask(i8x16.narrow_i16x8_s(a, b)));
    }
    return;
  }
  for (let k: usize = 0; k < 16; k++) {
    let q: u32 = 0;
    for (let i: u32 = 0; i < 8; i++) if (load<f32>(x + ((k << 5) + (<usize>i << 2))) >= 0) q |= 1 << i;
    store<u8>(y + k, <u8>q);
  }
}

@inline function scalarSum(x: usize): f32 {
  let s: f32 = 0;
  for (let j: usize = 0; j < 128; j++) s += Mathf.abs(load<f32>(x + (j << 2)));
  return s;
}

/** The four blocks' sums at x, x + 512, x + 1024, x + 1536 bytes, lane b for block b. */
@inline function sums4(x: usize): v128 {
  let s = f32x4.splat(0);
  for (let j: usize = 0; j < 512; j += 16) {
    const a0 = f32x4.abs(v128.load(x + j));
    const a1 = f32x4.abs(v128.load(x + 512 + j));
    const a2 = f32x4.abs(v128.load(x + 1024 + j));
    const a3 = f32x4.abs(v128.load(x + 1536 + j));
    // 4 x 4 transpose: t_k holds value k of each block.
    const u0 = v128.shuffle<f32>(a0, a1, 0, 4, 1, 5);
    const u1 = v128.shuffle<f32>(a0, a1, 2, 6, 3, 7);
    const u2 = v128.shuffle<f32>(a2, a3, 0, 4, 1, 5);
    const u3 = v128.shuffle<f32>(a2, a3, 2, 6, 3, 7);
    s = f32x4.add(s, v128.shuffle<f32>(u0, u2, 0, 1, 4, 5));
    s = f32x4.add(s, v128.shuffle<f32>(u0, u2, 2, 3, 6, 7));
    s = f32x4.add(s, v128.shuffle<f32>(u1, u3, 0, 1, 4, 5));
    s = f32x4.add(s, v128.shuffle<f32>(u1, u3, 2, 3, 6, 7));
  }
  return s;
}

@inline function storeScale(y: usize, sum: f32): void {
  store<u16>(y, f32ToF16(sum / <f32>128));
}

export function q1_0_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const nb = rowLen >> 7;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * <usize>nb * 18;
    let b = 0;
    if (ASC_FEATURE_SIMD) {
      for (; b + 4 <= nb; b += 4) {
        const s = sums4(x + (<usize>b << 9));
        const o = y + <usize>b * 18;
        storeScale(o, f32x4.extract_lane(s, 0));
        storeScale(o + 18, f32x4.extract_lane(s, 1));
        storeScale(o + 36, f32x4.extract_lane(s, 2));
        storeScale(o + 54, f32x4.extract_lane(s, 3));
      }
    }
    for (; b < nb; b++) storeScale(y + <usize>b * 18, scalarSum(x + (<usize>b << 9)));
    for (b = 0; b < nb; b++) signBits(x + (<usize>b << 9), y + <usize>b * 18 + 2);
  }
}

export function q1_0_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 7;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 18;
    const d = f16ToF32(<u32>load<u16>(blk));
    const y = dst + (b << 9);
    if (ASC_FEATURE_SIMD) {
      const vd = f32x4.splat(d);
      const vn = f32x4.splat(-d);
      const lo = i32x4(1, 2, 4, 8);
      const hi = i32x4(16, 32, 64, 128);
      for (let k: usize = 0; k < 16; k++) {
        const q = i32x4.splat(<i32>load<u8>(blk + 2 + k));
        v128.store(y + (k << 5), v128.bitselect(vd, vn, i32x4.eq(v128.and(q, lo), lo)));
        v128.store(y + (k << 5) + 16, v128.bitselect(vd, vn, i32x4.eq(v128.and(q, hi), hi)));
      }
      continue;
    }
    const n = -d;
    for (let j: usize = 0; j < 128; j++) {
      const bit = (<u32>load<u8>(blk + 2 + (j >> 3)) >> <u32>(j & 7)) & 1;
      store<f32>(y + (j << 2), bit != 0 ? d : n);
    }
  }
}
