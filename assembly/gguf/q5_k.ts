// Q5_K (ggml type 13): super-blocks of 256 = 8 sub-blocks x 32, 176 bytes, 5.5 bits per weight.
// Layout: d: fp16 at 0, dmin: fp16 at 2, scales: uint8[12] at 4 (k4 packing as Q4_K),
// qh: uint8[32] at 16, qs: uint8[128] at 48. Element 64c + 32t + l: low 4 bits = nibble t of
// qs[32c + l], bit 4 = bit (2c + t) of qh[l]. Dequantized value = (d*ls)*q - (dmin*lm).
// Quantizer: spec §11 (reference: Q4_K's algorithm with nmax 31, QKX (-0.5, 0.1, 15)) and §14.5.
import { A_IMATRIX, A_SCRATCH, argU32, f16ToF32, rowF32 } from '../common';
import { KL, k4Min, k4Scale, quantizeK4Header, storeU4 } from './q4_k';

export const Q5_K_BLOCK: i32 = 256;
export const Q5_K_BYTES: i32 = 176;

export function q5_k_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const imat = argU32(args, A_IMATRIX);
  const nb = rowLen >> 8;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * <usize>nb * 176;
    for (let b = 0; b < nb; b++) {
      const yb = y + <usize>b * 176;
      quantizeK4Header(x + (<usize>b << 10), imat != 0 ? imat + (<usize>b << 10) : 0, yb, 31);
      const qh = yb + 16;
      const qs = yb + 48;
      if (ASC_FEATURE_SIMD) {
        const mask = i8x16.splat(15);
        for (let h = 0; h < 2; h++) {
          let hb = i8x16.splat(0);
          for (let c = 0; c < 4; c++) {
            const p = KL + (<usize>c << 6) + (<usize>h << 4);
            const a = v128.load(p);
            const b2 = v128.load(p + 32);
            hb = v128.or(hb, i8x16.shl(i8x16.shr_u(a, 4), 2 * c));
            hb = v128.or(hb, i8x16.shl(i8x16.shr_u(b2, 4), 2 * c + 1));
            v128.store(qs + (<usize>c << 5) + (<usize>h << 4), v128.or(v128.and(a, mask), i8x16.shl(v128.and(b2, mask), 4)));
          }
          v128.store(qh + (<usize>h << 4), hb);
        }
      } else {
        memory.fill(qh, 0, 32);
        for (let c = 0; c < 4; c++) {
          for (let l = 0; l < 32; l++) {
            const p = KL + (<usize>c << 6) + <usize>l;
            let l1 = <u32>load<u8>(p);
            let l2 = <u32>load<u8>(p + 32);
            let h = <u32>load<u8>(qh + <usize>l);
            if (l1 > 15) { l1 -= 16; h |= <u32>1 << (2 * c); }
            if (l2 > 15) { l2 -= 16; h |= <u32>2 << (2 * c); }
            store<u8>(qh + <usize>l, <u8>h);
            store<u8>(qs + (<usize>c << 5) + <usize>l, <u8>(l1 | (l2 << 4)));
          }
        }
      }
    }
  }
}

export function q5_k_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 176;
    const d = f16ToF32(<u32>load<u16>(blk));
    const dmin = f16ToF32(<u32>load<u16>(blk + 2));
    const sc = blk + 4;
    const qh = blk + 16;
    const qs = blk + 48;
    const y = dst + (b << 10);
    for (let c = 0; c < 4; c++) {
      const d1: f32 = d * <f32>k4Scale(sc, 2 * c);
      const m1: f32 = dmin * <f32>k4Min(sc, 2 * c);
      const d2: f32 = d * <f32>k4Scale(sc, 2 * c + 1);
      const m2: f32 = dmin * <f32>k4Min(sc, 2 * c + 1);
      const qc = qs + (<usize>c << 5);
      const yc = y + (<usize>c << 8);
      if (ASC_FEATURE_SIMD) {
        const vd1 = f32x4.splat(d1), vm1 = f32x4.splat(m1), vd2 = f32x4.splat(d2), vm2 = f32x4.splat(m2);
        const mask = i8x16.splat(15);
        const bit = i8x16.splat(16);
        for (let h = 0; h < 2; h++) {
          const bytes = v128.load(qc + (<usize>h << 4));
          const hb = v128.load(qh + (<usize>h << 4));
          const lo = v128.or(v128.and(bytes, mask), v128.and(i8x16.shl(i8x16.shr_u(hb, 2 * c), 4), bit));
          const hi = v128.or(i8x16.shr_u(bytes, 4), v128.and(i8x16.shl(i8x16.shr_u(hb, 2 * c + 1), 4), bit));
          storeU4(yc + (<usize>h << 6), lo, vd1, vm1);
          storeU4(yc + 128 + (<usize>h << 6), hi, vd2, vm2);
        }
      } else {
        for (let l = 0; l < 32; l++) {
          const v = <u32>load<u8>(qc + <usize>l);
          const h = <u32>load<u8>(qh + <usize>l);
          store<f32>(yc + (<usize>l << 2), d1 * <f32>((v & 15) | (((h >> (2 * c)) & 1) << 4)) - m1);
          store<f32>(yc + 128 + (<usize>l << 2), d2 * <f32>((v >> 4) | (((h >> (2 * c + 1)) & 1) << 4)) - m2);
        }
      }
    }
  }
}
