// Q5_1 (ggml type 7): blocks of 32 values, 24 bytes, 6.0 bits per weight.
// Layout: d: fp16 at 0, m: fp16 at 2, qh: uint32 LE at 4, qs: uint8[16] at 8 (code bits as Q5_0).
// Dequantized value = q * d + m.
// Reference quantizer (spec §8): min/max, d = (max - min)/31, codes trunc((x - min)/d + 0.5)
// with the fp32 d and no clamp (bits above the fifth are dropped by the packing, as in C).
// With an importance matrix (spec §14.2): the QKX search (nmax 31, rmin -0.9, rdelta 0.05,
// 36 steps) with weights qw*sqrt(sigma2 + x^2), sigma2 over the whole row.
import { A_IMATRIX, A_SCRATCH, argU32, f16ToF32, f32ToF16, rowF32, truncX86 } from '../common';
import { blockMax, blockMin, highBits32, imatrixWeights32, minMax32, pack5, sumSquares } from './iq4_common';
import { hiNibbles, NIB, storeQDM } from './pack';
import { makeQkxQuants } from './qkx_search';

export const Q5_1_BLOCK: i32 = 32;
export const Q5_1_BYTES: i32 = 24;

const codes = memory.data(32, 16);
const laux = memory.data(32, 16);
const weights = memory.data(128, 16);
const theMin = memory.data(4, 4);

function quantizeBlockRef(x: usize, y: usize): void {
  minMax32(x);
  const mn = blockMin;
  const d: f32 = (blockMax - mn) / 31;
  const id: f32 = d != 0 ? 1 / d : 0;
  store<u16>(y, f32ToF16(d));
  store<u16>(y, f32ToF16(mn), 2);
  if (ASC_FEATURE_SIMD) {
    // Finite id keeps the argument in [0.5, 32.5) or NaN; id = inf gives code 0 on x86.
    if (id != Infinity) {
      const vid = f32x4.splat(id);
      const vmn = f32x4.splat(mn);
      const half = f32x4.splat(0.5);
      for (let i: usize = 0; i < 32; i += 8) {
        const a = i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(f32x4.sub(v128.load(x + (i << 2)), vmn), vid), half));
        const b = i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(f32x4.sub(v128.load(x + (i << 2) + 16), vmn), vid), half));
        v128.store64_lane(codes + i, i8x16.narrow_i16x8_u(i16x8.narrow_i32x4_s(a, b), i16x8.splat(0)), 0);
      }
    } else {
      memory.fill(codes, 0, 32);
    }
  } else {
    for (let j: usize = 0; j < 32; j++) {
      store<u8>(codes + j, <u8>truncX86((load<f32>(x + (j << 2)) - mn) * id + 0.5));
    }
  }
  pack5(codes, y + 4);
}

function quantizeBlockImatrix(x: usize, qw: usize, sigma2: f32, y: usize): void {
  imatrixWeights32(x, qw, sigma2, weights);
  const d = makeQkxQuants(32, 31, x, weights, codes, laux, theMin, -0.9, 0.05, 36, false);
  store<u16>(y, f32ToF16(d));
  store<u16>(y, f32ToF16(-load<f32>(theMin)), 2);
  pack5(codes, y + 4);
}

export function q5_1_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const qw = argU32(args, A_IMATRIX);
  const nb = rowLen >> 5;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * <usize>nb * 24;
    if (qw != 0) {
      const sigma2: f32 = sumSquares(x, rowLen) / <f32>rowLen;
      for (let b = 0; b < nb; b++) quantizeBlockImatrix(x + (<usize>b << 7), qw + (<usize>b << 7), sigma2, y + <usize>b * 24);
    } else {
      for (let b = 0; b < nb; b++) quantizeBlockRef(x + (<usize>b << 7), y + <usize>b * 24);
    }
  }
}

export function q5_1_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 5;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 24;
    const d = f16ToF32(<u32>load<u16>(blk));
    const m = f16ToF32(<u32>load<u16>(blk, 2));
    const qh = load<u32>(blk, 4);
    const y = dst + (b << 7);
    if (ASC_FEATURE_SIMD) {
      const qs = v128.load(blk + 8);
      const vd = f32x4.splat(d);
      const vm = f32x4.splat(m);
      const mask = v128.load(NIB), sixteen = v128.load(NIB, 32);
      storeQDM(y, v128.or(v128.and(qs, mask), v128.and(highBits32(qh, 0), sixteen)), vd, vm);
      storeQDM(y + 64, v128.or(hiNibbles(qs, mask), v128.and(highBits32(qh, 1), sixteen)), vd, vm);
    } else {
      for (let j: u32 = 0; j < 16; j++) {
        const q = <i32>load<u8>(blk + 8 + <usize>j);
        const a = (q & 15) | (<i32>((qh >> j) & 1) << 4);
        const c = (q >> 4) | (<i32>((qh >> (j + 16)) & 1) << 4);
        store<f32>(y + (<usize>j << 2), <f32>a * d + m);
        store<f32>(y + (<usize>(j + 16) << 2), <f32>c * d + m);
      }
    }
  }
}
