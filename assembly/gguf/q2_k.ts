// Q2_K (ggml type 10): super-blocks of 256 = 16 sub-blocks x 16, 84 bytes, 2.625 bits per weight.
// Layout: scales: uint8[16] at 0 (low nibble sub-scale, high nibble sub-min), qs: uint8[64] at 16
// (element 128h + 32j + l is bits 2j..2j+1 of qs[32h + l]), d: fp16 at 80, dmin: fp16 at 82.
// Dequantized value = (d*(sc & 15))*q - (dmin*(sc >> 4)).
// Quantizer: spec §9 (reference) and §14.3 (importance matrix).
import { f16ToF32, f32ToF16, nearestInt } from '../common';
import { f32At, imatrixWeights256, NIB, packCodes2, quantizeBlockRows, storeAQB } from './pack';
import { makeQkxQuants4 } from './qkx_search';
import { makeQpQuants, quantDiv } from './searches';

export const Q2_K_BLOCK: i32 = 256;
export const Q2_K_BYTES: i32 = 84;

const L = memory.data(256);
const LAUX = memory.data(16);
const W = memory.data(256 * 4);
const SC = memory.data(16 * 4);
const MN = memory.data(16 * 4);
const SW = memory.data(16 * 4);
const LS = memory.data(16);
const LM = memory.data(16);

function quantizeBlock(x: usize, qw: usize, y: usize): void {
  if (qw == 0) {
    let maxScale: f32 = 0;
    let maxMin: f32 = 0;
    if (ASC_FEATURE_SIMD) {
      for (let l = 0; l < 256; l += 4) v128.store(W + (<usize>l << 2), f32x4.abs(v128.load(x + (<usize>l << 2))));
    } else {
      for (let l = 0; l < 256; l++) store<f32>(W + (<usize>l << 2), Mathf.abs(f32At(x, l)));
    }
    for (let g = 0; g < 4; g++) {
      const o = <usize>g << 6; // 4 sub-blocks = 64 values
      makeQkxQuants4(16, 3, x + (o << 2), W + (o << 2), L + o, LAUX, MN + (<usize>g << 4), SC + (<usize>g << 4), -0.5, 0.1, 15, true);
    }
    for (let j = 0; j < 16; j++) {
      const s = f32At(SC, j);
      if (s > maxScale) maxScale = s;
      const m = f32At(MN, j);
      if (m > maxMin) maxMin = m;
    }
    if (maxScale > 0) {
      const iscale: f32 = <f32>15 / maxScale;
      for (let j = 0; j < 16; j++) store<u8>(y + <usize>j, <u8>nearestInt(iscale * f32At(SC, j)));
      store<u16>(y + 80, f32ToF16(maxScale / 15));
    } else {
      memory.fill(y, 0, 16);
      store<u16>(y + 80, 0);
    }
    if (maxMin > 0) {
      const iscale: f32 = <f32>15 / maxMin;
      for (let j = 0; j < 16; j++) {
        const l = nearestInt(iscale * f32At(MN, j));
        store<u8>(y + <usize>j, <u8>(<u32>load<u8>(y + <usize>j) | (<u32>l << 4)));
      }
      store<u16>(y + 82, f32ToF16(maxMin / 15));
    } else {
      store<u16>(y + 82, 0);
    }
  } else {
    imatrixWeights256(x, qw, 1, 16, W, SW);
    for (let g = 0; g < 4; g++) {
      const o = <usize>g << 6;
      makeQkxQuants4(16, 3, x + (o << 2), W + (o << 2), L + o, LAUX, MN + (<usize>g << 4), SC + (<usize>g << 4), -0.9, 0.05, 36, false);
    }
    const dm = makeQpQuants(16, 15, SC, LS, SW);
    const mm = makeQpQuants(16, 15, MN, LM, SW);
    store<u16>(y + 80, f32ToF16(dm));
    store<u16>(y + 82, f32ToF16(mm));
    for (let j = 0; j < 16; j++) {
      store<u8>(y + <usize>j, <u8>(<u32>load<u8>(LS + <usize>j) | (<u32>load<u8>(LM + <usize>j) << 4)));
    }
  }
  // Final pass with the stored (fp16) super-scales.
  const d = f16ToF32(<u32>load<u16>(y + 80));
  const dmin = f16ToF32(<u32>load<u16>(y + 82));
  for (let j = 0; j < 16; j++) {
    const s = <u32>load<u8>(y + <usize>j);
    const dj: f32 = d * <f32>(s & 15);
    if (dj == 0) continue;
    const mj: f32 = dmin * <f32>(s >> 4);
    quantDiv(x + (<usize>j << 6), 16, true, mj, dj, 0, 3, 0, L + (<usize>j << 4));
  }
  packCodes2(L, y + 16);
}

export function q2_k_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 84, quantizeBlock);
}

export function q2_k_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 84;
    const d = f16ToF32(<u32>load<u16>(blk + 80));
    const dmin = f16ToF32(<u32>load<u16>(blk + 82));
    const y = dst + (b << 10);
    for (let h = 0; h < 2; h++) {
      for (let k = 0; k < 2; k++) {
        // elements 128h + 32j + 16k + (0..15): sub-block 8h + 2j + k, bits 2j..2j+1 of q's bytes
        const q = blk + 16 + (<usize>h << 5) + (<usize>k << 4);
        const ye = y + ((<usize>(128 * h + 16 * k)) << 2);
        const sc = blk + <usize>(8 * h + k);
        if (ASC_FEATURE_SIMD) {
          // The four shifts as constants (a loop over j made them variable: 4 instructions each).
          const v = v128.load(q), m3 = v128.load(NIB, 48);
          q2Sub(ye, v128.and(v, m3), sc, d, dmin);
          q2Sub(ye + 128, v128.and(i16x8.shr_u(v, 2), m3), sc + 2, d, dmin);
          q2Sub(ye + 256, v128.and(i16x8.shr_u(v, 4), m3), sc + 4, d, dmin);
          q2Sub(ye + 384, v128.and(i16x8.shr_u(v, 6), m3), sc + 6, d, dmin);
        } else {
          for (let j = 0; j < 4; j++) {
            const s = <u32>load<u8>(sc + <usize>(2 * j));
            const dl: f32 = d * <f32>(s & 15);
            const ml: f32 = dmin * <f32>(s >> 4);
            for (let l = 0; l < 16; l++) {
              const c = (<u32>load<u8>(q + <usize>l) >> (2 * j)) & 3;
              store<f32>(ye + ((<usize>(32 * j + l)) << 2), dl * <f32>c - ml);
            }
          }
        }
      }
    }
  }
}

// 16 codes of one sub-block: dl * c - ml, dl and ml from its scale byte.
@inline function q2Sub(ye: usize, c: v128, sc: usize, d: f32, dmin: f32): void {
  const s = <u32>load<u8>(sc);
  storeAQB(ye, c, f32x4.splat(d * <f32>(s & 15)), f32x4.splat(dmin * <f32>(s >> 4)));
}
