// Q6_K (ggml type 14): super-blocks of 256 = 16 sub-blocks x 16, 210 bytes, 6.5625 bits per weight.
// Layout: ql: uint8[128] at 0, qh: uint8[64] at 128, scales: int8[16] at 192, d: fp16 at 208.
// Codes L = q + 32 (6 bits); half h (128 values) uses ql[64h..], qh[32h..]; for l < 32 the
// elements l, l+32, l+64, l+96 of the half take the low nibble of ql[l], ql[l+32], the high
// nibble of ql[l], ql[l+32], and bits 0-1, 2-3, 4-5, 6-7 of qh[l]. Value = (d*scale)*(L - 32).
// Quantizer: spec §5 (reference, QX with weights x*x) and §14.6 (QX with the raw importances).
import { GROUP_MAX_EPS, f16ToF32, f32ToF16, nearestInt, signedAbsmax } from '../common';
import { f32At, hiNibbles, NIB, quantizeBlockRows, storeAQ } from './pack';
import { makeQxQuants4 } from './qx_search';
import { quantDiv } from './searches';

export const Q6_K_BLOCK: i32 = 256;
export const Q6_K_BYTES: i32 = 210;

const L = memory.data(256);
const W = memory.data(256 * 4);
const SC = memory.data(16 * 4);

function quantizeBlock(x: usize, qw: usize, y: usize): void {
  let w = qw;
  if (qw == 0) {
    w = W;
    if (ASC_FEATURE_SIMD) {
      for (let l = 0; l < 256; l += 4) {
        const v = v128.load(x + (<usize>l << 2));
        v128.store(W + (<usize>l << 2), f32x4.mul(v, v));
      }
    } else {
      for (let l = 0; l < 256; l++) {
        const v = f32At(x, l);
        store<f32>(W + (<usize>l << 2), v * v);
      }
    }
  }
  for (let g = 0; g < 4; g++) {
    const o = <usize>g << 8; // 4 sub-blocks = 64 values = 256 bytes
    makeQxQuants4(16, 32, x + o, w + o, L + (<usize>g << 6), SC + (<usize>g << 4));
  }
  const maxScale = signedAbsmax(SC, 16);
  if (Mathf.abs(maxScale) < GROUP_MAX_EPS) {
    memory.fill(y, 0, 210);
    return;
  }
  const iscale: f32 = <f32>-128 / maxScale;
  store<u16>(y + 208, f32ToF16(1 / iscale));
  for (let j = 0; j < 16; j++) store<i8>(y + 192 + <usize>j, <i8>min(127, nearestInt(iscale * f32At(SC, j))));
  // Final pass with the stored (fp16) super-scale.
  const d = f16ToF32(<u32>load<u16>(y + 208));
  for (let j = 0; j < 16; j++) {
    const dj: f32 = d * <f32>load<i8>(y + 192 + <usize>j);
    if (dj == 0) continue;
    quantDiv(x + (<usize>j << 6), 16, false, 0, dj, -32, 31, 32, L + (<usize>j << 4));
  }
  for (let h = 0; h < 2; h++) {
    const ql = y + (<usize>h << 6);
    const qh = y + 128 + (<usize>h << 5);
    const Lh = L + (<usize>h << 7);
    if (ASC_FEATURE_SIMD) {
      const m = i8x16.splat(15);
      for (let k = 0; k < 2; k++) {
        const o = <usize>k << 4;
        const a = v128.load(Lh + o);
        const b = v128.load(Lh + 32 + o);
        const c = v128.load(Lh + 64 + o);
        const e = v128.load(Lh + 96 + o);
        v128.store(ql + o, v128.or(v128.and(a, m), i8x16.shl(c, 4)));
        v128.store(ql + 32 + o, v128.or(v128.and(b, m), i8x16.shl(e, 4)));
        const hb = v128.or(
          v128.or(i8x16.shr_u(a, 4), i8x16.shl(i8x16.shr_u(b, 4), 2)),
          v128.or(i8x16.shl(i8x16.shr_u(c, 4), 4), i8x16.shl(i8x16.shr_u(e, 4), 6)),
        );
        v128.store(qh + o, hb);
      }
    } else {
      for (let l = 0; l < 32; l++) {
        const a = <u32>load<u8>(Lh + <usize>l);
        const b = <u32>load<u8>(Lh + 32 + <usize>l);
        const c = <u32>load<u8>(Lh + 64 + <usize>l);
        const e = <u32>load<u8>(Lh + 96 + <usize>l);
        store<u8>(ql + <usize>l, <u8>((a & 15) | ((c & 15) << 4)));
        store<u8>(ql + 32 + <usize>l, <u8>((b & 15) | ((e & 15) << 4)));
        store<u8>(qh + <usize>l, <u8>((a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6)));
      }
    }
  }
}

export function q6_k_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 210, quantizeBlock);
}

export function q6_k_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 210;
    const d = f16ToF32(<u32>load<u16>(blk + 208));
    const y = dst + (b << 10);
    for (let h = 0; h < 2; h++) {
      const ql = blk + (<usize>h << 6);
      const qh = blk + 128 + (<usize>h << 5);
      const sc = blk + 192 + (<usize>h << 3);
      const yh = y + (<usize>h << 9);
      for (let k = 0; k < 2; k++) {
        // l in [16k, 16k + 16): scale index k (+2, +4, +6 for the other three quarters)
        const o = <usize>k << 4;
        const d0: f32 = d * <f32>load<i8>(sc + o / 16 + 0);
        const d1: f32 = d * <f32>load<i8>(sc + o / 16 + 2);
        const d2: f32 = d * <f32>load<i8>(sc + o / 16 + 4);
        const d3: f32 = d * <f32>load<i8>(sc + o / 16 + 6);
        if (ASC_FEATURE_SIMD) {
          const a = v128.load(ql + o);
          const bq = v128.load(ql + 32 + o);
          const hb = v128.load(qh + o);
          storeAQ(yh + (o << 2), q6Quarter(a, bq, hb, 0), f32x4.splat(d0));
          storeAQ(yh + 128 + (o << 2), q6Quarter(a, bq, hb, 1), f32x4.splat(d1));
          storeAQ(yh + 256 + (o << 2), q6Quarter(a, bq, hb, 2), f32x4.splat(d2));
          storeAQ(yh + 384 + (o << 2), q6Quarter(a, bq, hb, 3), f32x4.splat(d3));
        } else {
          for (let l: usize = o; l < o + 16; l++) {
            const a = <u32>load<u8>(ql + l);
            const bq = <u32>load<u8>(ql + 32 + l);
            const hb = <u32>load<u8>(qh + l);
            store<f32>(yh + (l << 2), d0 * <f32>q6Code(a, bq, hb, 0));
            store<f32>(yh + 128 + (l << 2), d1 * <f32>q6Code(a, bq, hb, 1));
            store<f32>(yh + 256 + (l << 2), d2 * <f32>q6Code(a, bq, hb, 2));
            store<f32>(yh + 384 + (l << 2), d3 * <f32>q6Code(a, bq, hb, 3));
          }
        }
      }
    }
  }
}

// Code - 32 of quarter t (elements 32t + l of a half) from ql[l] (a), ql[l + 32] (bq), qh[l] (hb):
// low nibbles of a, bq for t = 0, 1, high nibbles for 2, 3, plus bits 2t..2t+1 of hb as bits 4-5.
// Also the serving decoder's (serve/gguf.ts); t is a constant at every call.
// Shifts are 16-bit ones with the masks loaded (i8x16 shifts are emulated, splats rebuilt per use);
// the 2-bit field shifted left by 4 stays inside its byte.
@inline export function q6Quarter(a: v128, bq: v128, hb: v128, t: i32): v128 {
  const q = t & 1 ? bq : a;
  const m15 = v128.load(NIB), m3 = v128.load(NIB, 48);
  const lo = t < 2 ? v128.and(q, m15) : hiNibbles(q, m15);
  const hi = v128.and(t == 0 ? hb : i16x8.shr_u(hb, 2 * t), m3);
  return i8x16.sub(v128.or(lo, i16x8.shl(hi, 4)), v128.load(NIB, 64));
}
@inline export function q6Code(a: u32, bq: u32, hb: u32, t: i32): i32 {
  const q = t & 1 ? bq : a;
  const lo = t < 2 ? q & 15 : q >> 4;
  return <i32>(lo | (((hb >> (2 * t)) & 3) << 4)) - 32;
}
