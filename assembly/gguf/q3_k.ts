// Q3_K (ggml type 11): super-blocks of 256 = 16 sub-blocks x 16, 110 bytes, 3.4375 bits per weight.
// Layout: hmask: uint8[32] at 0 (bit 2 of element e = bit e/32 of hmask[e % 32]), qs: uint8[64]
// at 32 (low 2 bits, 2-bit packing as Q2_K), scales: uint8[12] at 96 (6-bit sub-scales + 32:
// low nibbles in scales[0..7], high 2 bits in scales[8..11]), d: fp16 at 108.
// Dequantized value = (d*(sc - 32))*(c - 4).
// Quantizer: spec §10 (reference, §13.2 search) and §14.4 (importance matrix, §13.1 searches).
import { f16ToF32, f32ToF16, nearestInt } from '../common';
import { f32At, imatrixWeights256, packCodes2, quantizeBlockRows, storeAQ } from './pack';
import { makeQ3Quants16, makeQxQuants, makeQxQuants4, quantDiv } from './searches';

export const Q3_K_BLOCK: i32 = 256;
export const Q3_K_BYTES: i32 = 110;

const L = memory.data(256);
const W = memory.data(256 * 4);
const SC = memory.data(16 * 4);
const SW = memory.data(16 * 4);
const LS = memory.data(16);

// Packs one 6-bit stored scale l (0..63) of sub-block j into the 12 bytes at sc (zeroed first).
function packScale(sc: usize, j: i32, l: u32): void {
  if (j < 8) store<u8>(sc + <usize>j, <u8>(l & 15));
  else store<u8>(sc + <usize>(j - 8), <u8>(<u32>load<u8>(sc + <usize>(j - 8)) | ((l & 15) << 4)));
  const k = sc + 8 + <usize>(j & 3);
  store<u8>(k, <u8>(<u32>load<u8>(k) | ((l >> 4) << (2 * (j >> 2)))));
}

// Also the serving decoder's (serve/gguf.ts).
@inline export function q3Scale(sc: usize, j: i32): i32 {
  const lo = j < 8 ? <u32>load<u8>(sc + <usize>j) & 15 : <u32>load<u8>(sc + <usize>(j - 8)) >> 4;
  return <i32>(lo | (((<u32>load<u8>(sc + 8 + <usize>(j & 3)) >> (2 * (j >> 2))) & 3) << 4)) - 32;
}

function quantizeBlock(x: usize, qw: usize, y: usize): void {
  const sc = y + 96;
  memory.fill(sc, 0, 12);
  if (qw == 0) {
    let amax: f32 = 0;
    let maxScale: f32 = 0;
    makeQ3Quants16(x, L, SC);
    for (let j = 0; j < 16; j++) {
      const s = f32At(SC, j);
      const a = Mathf.abs(s);
      if (a > amax) {
        amax = a;
        maxScale = s;
      }
    }
    if (maxScale != 0) {
      const iscale: f32 = <f32>-32 / maxScale;
      for (let j = 0; j < 16; j++) {
        const l = <i32>(<i8>nearestInt(iscale * f32At(SC, j)));
        packScale(sc, j, <u32>(min(31, max(-32, l)) + 32));
      }
      store<u16>(y + 108, f32ToF16(1 / iscale));
    } else {
      store<u16>(y + 108, 0);
    }
  } else {
    imatrixWeights256(x, qw, 2, 16, W, SW);
    for (let g = 0; g < 4; g++) {
      const o = <usize>g << 8;
      makeQxQuants4(16, 4, x + o, W + o, L + (<usize>g << 6), SC + (<usize>g << 4));
    }
    const dBlock = makeQxQuants(16, 32, SC, LS, SW);
    for (let j = 0; j < 16; j++) packScale(sc, j, <u32>load<u8>(LS + <usize>j));
    store<u16>(y + 108, f32ToF16(dBlock));
  }
  // Final pass with the stored (fp16) super-scale.
  const d = f16ToF32(<u32>load<u16>(y + 108));
  for (let j = 0; j < 16; j++) {
    const dj: f32 = d * <f32>q3Scale(sc, j);
    if (dj == 0) continue;
    quantDiv(x + (<usize>j << 6), 16, false, 0, dj, -4, 3, 4, L + (<usize>j << 4));
  }
  // hmask: bit e/32 of hmask[e % 32] for codes > 3, which then lose the 4.
  if (ASC_FEATURE_SIMD) {
    const three = i8x16.splat(3);
    for (let k = 0; k < 2; k++) {
      let hm = i8x16.splat(0);
      for (let b = 0; b < 8; b++) {
        const p = L + (<usize>b << 5) + (<usize>k << 4);
        const v = v128.load(p);
        const hi = i8x16.gt_u(v, three);
        hm = v128.or(hm, v128.and(hi, i8x16.splat(<i8>(<u8>1 << <u8>b))));
        v128.store(p, v128.and(v, three));
      }
      v128.store(y + (<usize>k << 4), hm);
    }
  } else {
    memory.fill(y, 0, 32);
    for (let e = 0; e < 256; e++) {
      const c = <u32>load<u8>(L + <usize>e);
      if (c > 3) {
        const p = y + <usize>(e & 31);
        store<u8>(p, <u8>(<u32>load<u8>(p) | (<u32>1 << (e >> 5))));
        store<u8>(L + <usize>e, <u8>(c - 4));
      }
    }
  }
  packCodes2(L, y + 32);
}

export function q3_k_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 110, quantizeBlock);
}

export function q3_k_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 110;
    const d = f16ToF32(<u32>load<u16>(blk + 108));
    const sc = blk + 96;
    const y = dst + (b << 10);
    for (let h = 0; h < 2; h++) {
      for (let j = 0; j < 4; j++) {
        for (let k = 0; k < 2; k++) {
          // elements e = 128h + 32j + 16k + l: sub-block 8h + 2j + k, hmask bit 4h + j
          const dl: f32 = d * <f32>q3Scale(sc, 8 * h + 2 * j + k);
          const q = blk + 32 + (<usize>h << 5) + (<usize>k << 4);
          const hm = blk + (<usize>k << 4);
          const ye = y + ((<usize>(128 * h + 32 * j + 16 * k)) << 2);
          const hb = 4 * h + j;
          if (ASC_FEATURE_SIMD) {
            const low = v128.and(i8x16.shr_u(v128.load(q), 2 * j), i8x16.splat(3));
            // (hbit ? 0 : 4) subtracted: 4 - 4*hbit
            const hbit = v128.and(i8x16.shr_u(v128.load(hm), hb), i8x16.splat(1));
            const c = i8x16.sub(low, i8x16.sub(i8x16.splat(4), i8x16.shl(hbit, 2)));
            storeAQ(ye, c, f32x4.splat(dl));
          } else {
            for (let l = 0; l < 16; l++) {
              const low = <i32>((<u32>load<u8>(q + <usize>l) >> (2 * j)) & 3);
              const hbit = (<u32>load<u8>(hm + <usize>l) >> hb) & 1;
              store<f32>(ye + (<usize>l << 2), dl * <f32>(low - (hbit != 0 ? 0 : 4)));
            }
          }
        }
      }
    }
  }
}
