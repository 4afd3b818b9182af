// Serving matvec for the low-bit GGUF types whose value is a small code times one block scale:
// Q1_0 (sign bits, +-d per 128), Q2_0 (codes 0..3 as q - 1, per 64) and TQ2_0 (the same codes
// per 256, in TQ2_0's order). Per block, the codes' dot with x is formed in f32 and multiplied
// by d once; layouts: assembly/gguf/q1_0.ts, q2_0.ts, tq2_0.ts. x stays f32 (no int8 path).
import { f16ToF32 } from '../common';
import { q2Values8 } from '../gguf/q2_0';
import { hsum } from './common';

export function q1_0_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  const nb = rowLen >> 7;
  for (let r = 0; r < nrows; r++) {
    const row = w + <usize>r * <usize>nb * 18;
    if (ASC_FEATURE_SIMD) {
      // A 0 bit flips the sign of x: xor with the sign bit where (byte & bit) == 0.
      const lo = i32x4(1, 2, 4, 8);
      const hi = i32x4(16, 32, 64, 128);
      const sign = i32x4.splat(0x80000000);
      let a = f32x4.splat(0);
      for (let b = 0; b < nb; b++) {
        const blk = row + <usize>b * 18;
        const xb = x + (<usize>b << 9);
        let s0 = f32x4.splat(0);
        let s1 = f32x4.splat(0);
        for (let k: usize = 0; k < 16; k++) {
          const q = i32x4.splat(<i32>load<u8>(blk + 2 + k));
          s0 = f32x4.add(s0, v128.xor(v128.load(xb + (k << 5)), v128.andnot(sign, i32x4.eq(v128.and(q, lo), lo))));
          s1 = f32x4.add(s1, v128.xor(v128.load(xb + (k << 5) + 16), v128.andnot(sign, i32x4.eq(v128.and(q, hi), hi))));
        }
        a = f32x4.add(a, f32x4.mul(f32x4.add(s0, s1), f32x4.splat(f16ToF32(<u32>load<u16>(blk)))));
      }
      store<f32>(y + (<usize>r << 2), hsum(a));
      continue;
    }
    let acc: f32 = 0;
    for (let b = 0; b < nb; b++) {
      const blk = row + <usize>b * 18;
      const xb = x + (<usize>b << 9);
      let s: f32 = 0;
      for (let j: usize = 0; j < 128; j++) {
        const v = load<f32>(xb + (j << 2));
        s += ((<u32>load<u8>(blk + 2 + (j >> 3)) >> <u32>(j & 7)) & 1) != 0 ? v : -v;
      }
      acc += s * f16ToF32(<u32>load<u16>(blk));
    }
    store<f32>(y + (<usize>r << 2), acc);
  }
}

// 16 signed codes (i16 lanes of two vectors c0, c1: values 8 at a time) dotted with 16 floats.
@inline function dot16(c0: v128, c1: v128, x: usize): v128 {
  const p0 = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(c0)), v128.load(x));
  const p1 = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(c0)), v128.load(x, 16));
  const p2 = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(c1)), v128.load(x, 32));
  const p3 = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(c1)), v128.load(x, 48));
  return f32x4.add(f32x4.add(p0, p1), f32x4.add(p2, p3));
}

export function q2_0_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  const nb = rowLen >> 6;
  for (let r = 0; r < nrows; r++) {
    const row = w + <usize>r * <usize>nb * 18;
    if (ASC_FEATURE_SIMD) {
      let a = f32x4.splat(0);
      for (let b = 0; b < nb; b++) {
        const blk = row + <usize>b * 18;
        const xb = x + (<usize>b << 8);
        const q = v128.load(blk + 2);
        let s = f32x4.splat(0);
        for (let k: usize = 0; k < 16; k += 4) {
          s = f32x4.add(s, dot16(q2Values8(q, k), q2Values8(q, k + 2), xb + (k << 4)));
        }
        a = f32x4.add(a, f32x4.mul(s, f32x4.splat(f16ToF32(<u32>load<u16>(blk)))));
      }
      store<f32>(y + (<usize>r << 2), hsum(a));
      continue;
    }
    let acc: f32 = 0;
    for (let b = 0; b < nb; b++) {
      const blk = row + <usize>b * 18;
      const xb = x + (<usize>b << 8);
      let s: f32 = 0;
      for (let j: usize = 0; j < 64; j++) {
        const q = (<i32>load<u8>(blk + 2 + (j >> 2)) >> <i32>((j & 3) << 1)) & 3;
        s += <f32>(q - 1) * load<f32>(xb + (j << 2));
      }
      acc += s * f16ToF32(<u32>load<u16>(blk));
    }
    store<f32>(y + (<usize>r << 2), acc);
  }
}

export function tq2_0_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  const nb = rowLen >> 8;
  for (let r = 0; r < nrows; r++) {
    const row = w + <usize>r * <usize>nb * 66;
    if (ASC_FEATURE_SIMD) {
      const three = i16x8.splat(3);
      const one = i16x8.splat(1);
      let a = f32x4.splat(0);
      for (let b = 0; b < nb; b++) {
        const blk = row + <usize>b * 66;
        let s = f32x4.splat(0);
        // value 128h + 32l + m: bits 2l of byte 32h + m
        for (let h: usize = 0; h < 2; h++) {
          for (let m: usize = 0; m < 32; m += 16) {
            const v = v128.load(blk + (h << 5) + m);
            const lo = i16x8.extend_low_i8x16_u(v);
            const hi = i16x8.extend_high_i8x16_u(v);
            for (let l: u32 = 0; l < 4; l++) {
              const c0 = i16x8.sub(v128.and(i16x8.shr_u(lo, l << 1), three), one);
              const c1 = i16x8.sub(v128.and(i16x8.shr_u(hi, l << 1), three), one);
              s = f32x4.add(s, dot16(c0, c1, x + ((<usize>b << 10) + (((h << 7) + (<usize>l << 5) + m) << 2))));
            }
          }
        }
        a = f32x4.add(a, f32x4.mul(s, f32x4.splat(f16ToF32(<u32>load<u16>(blk, 64)))));
      }
      store<f32>(y + (<usize>r << 2), hsum(a));
      continue;
    }
    let acc: f32 = 0;
    for (let b = 0; b < nb; b++) {
      const blk = row + <usize>b * 66;
      const xb = x + (<usize>b << 10);
      let s: f32 = 0;
      for (let h: usize = 0; h < 2; h++) {
        for (let l: u32 = 0; l < 4; l++) {
          for (let m: usize = 0; m < 32; m++) {
            const q = (<i32>load<u8>(blk + (h << 5) + m) >> <i32>(l << 1)) & 3;
            s += <f32>(q - 1) * load<f32>(xb + (((h << 7) + (<usize>l << 5) + m) << 2));
          }
        }
      }
      acc += s * f16ToF32(<u32>load<u16>(blk, 64));
    }
    store<f32>(y + (<usize>r << 2), acc);
  }
}
