// Q4_0 (ggml type 2): blocks of 32 values, 18 bytes, 4.5 bits per weight.
// Layout: d: fp16 at 0, qs: uint8[16] at 2; byte j holds element j (low nibble) and j+16 (high).
// Dequantized value = (q - 8) * d.
// Reference quantizer (spec §2): d = max/-8 where max is the signed absmax, codes
// min(15, trunc(x/d + 8.5)) with the fp32 d.
// With an importance matrix (spec §14.1): the QX search with nmax 8 and weights
// qw*sqrt(sigma2 + x^2), sigma2 = sum(x^2)/rowLen over the whole row; its codes are stored as they
// are (never re-derived from the fp16 d).
import { A_IMATRIX, A_SCRATCH, argU32, f16ToF32, f32ToF16, rowF32, truncX86 } from '../common';
import { absmax32, imatrixWeights32, sumSquares } from './iq4_common';
import { hiNibbles, NIB, packNibbles32, storeAQ } from './pack';
import { makeQxQuants } from './qx_search';

export const Q4_0_BLOCK: i32 = 32;
export const Q4_0_BYTES: i32 = 18;

const codes = memory.data(32);
const weights = memory.data(128, 16);

function quantizeBlockRef(x: usize, y: usize): void {
  const max = absmax32(x);
  const d: f32 = max / -8;
  const id: f32 = d != 0 ? 1 / d : 0;
  store<u16>(y, f32ToF16(d));
  if (ASC_FEATURE_SIMD) {
    if (Mathf.abs(id) != Infinity) {
      const vid = f32x4.splat(id);
      const off = f32x4.splat(8.5);
      const top = i32x4.splat(15);
      for (let i = 0; i < 32; i += 8) {
        const a = i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(v128.load(x + (<usize>i << 2)), vid), off)), top);
        const b = i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(v128.load(x + (<usize>i << 2) + 16), vid), off)), top);
        v128.store64_lane(codes + <usize>i, i8x16.narrow_i16x8_u(i16x8.narrow_i32x4_u(a, b), i16x8.splat(0)), 0);
      }
      packNibbles32(codes, y + 2);
      return;
    }
  }
  for (let j = 0; j < 16; j++) {
    const a = min(15, truncX86(load<f32>(x + (<usize>j << 2)) * id + 8.5));
    const b = min(15, truncX86(load<f32>(x + (<usize>(j + 16) << 2)) * id + 8.5));
    store<u8>(y + 2 + <usize>j, <u8>(a | (b << 4)));
  }
}

function quantizeBlockImatrix(x: usize, qw: usize, sigma2: f32, y: usize): void {
  imatrixWeights32(x, qw, sigma2, weights);
  const d = makeQxQuants(32, 8, x, codes, weights);
  store<u16>(y, f32ToF16(d));
  packNibbles32(codes, y + 2);
}

export function q4_0_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const qw = argU32(args, A_IMATRIX);
  const nb = rowLen >> 5;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * <usize>nb * 18;
    if (qw != 0) {
      const sigma2: f32 = sumSquares(x, rowLen) / <f32>rowLen;
      for (let b = 0; b < nb; b++) quantizeBlockImatrix(x + (<usize>b << 7), qw + (<usize>b << 7), sigma2, y + <usize>b * 18);
    } else {
      for (let b = 0; b < nb; b++) quantizeBlockRef(x + (<usize>b << 7), y + <usize>b * 18);
    }
  }
}

export function q4_0_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 5;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 18;
    const d = f16ToF32(<u32>load<u16>(blk));
    const y = dst + (b << 7);
    if (ASC_FEATURE_SIMD) {
      const qs = v128.load(blk + 2);
      const mask = v128.load(NIB), eight = v128.load(NIB, 16);
      const lo = i8x16.sub(v128.and(qs, mask), eight);
      const hi = i8x16.sub(hiNibbles(qs, mask), eight);
      const vd = f32x4.splat(d);
      storeAQ(y, lo, vd);
      storeAQ(y + 64, hi, vd);
    } else {
      for (let j: usize = 0; j < 16; j++) {
        const q = <i32>load<u8>(blk + 2 + j);
        store<f32>(y + (j << 2), <f32>((q & 15) - 8) * d);
        store<f32>(y + ((j + 16) << 2), <f32>((q >> 4) - 8) * d);
      }
    }
  }
}
