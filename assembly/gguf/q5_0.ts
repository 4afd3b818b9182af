// Q5_0 (ggml type 6): blocks of 32 values, 22 bytes, 5.5 bits per weight.
// Layout: d: fp16 at 0, qh: uint32 LE at 2 (bit j = bit 4 of element j), qs: uint8[16] at 6
// (low 4 bits: element j low nibble, j+16 high). Dequantized value = (q - 16) * d.
// Reference quantizer (spec §7): d = max/-16 (signed absmax), codes min(31, trunc(x/d + 16.5))
// with the fp32 d. With an importance matrix (spec §14.1): the QX search with nmax 16 and
// weights qw*sqrt(sigma2 + x^2), sigma2 = sum(x^2)/rowLen over the row; codes stored as found.
import { A_IMATRIX, A_SCRATCH, argU32, f16ToF32, f32ToF16, rowF32, truncX86 } from '../common';
import { absmax32, highBits32, imatrixWeights32, pack5, sumSquares } from './iq4_common';
import { hiNibbles, NIB, storeAQ } from './pack';
import { makeQxQuants } from './qx_search';

export const Q5_0_BLOCK: i32 = 32;
export const Q5_0_BYTES: i32 = 22;

const codes = memory.data(32, 16);
const weights = memory.data(128, 16);

function quantizeBlockRef(x: usize, y: usize): void {
  const max = absmax32(x);
  const d: f32 = max / -16;
  const id: f32 = d != 0 ? 1 / d : 0;
  store<u16>(y, f32ToF16(d));
  if (ASC_FEATURE_SIMD) {
    // |x*id| <= 16 for finite id; id = +-inf (fp32-denormal blocks) gives code 0 on x86.
    if (Mathf.abs(id) != Infinity) {
      const vid = f32x4.splat(id);
      const off = f32x4.splat(16.5);
      const top = i32x4.splat(31);
      for (let i: usize = 0; i < 32; i += 8) {
        const a = i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(v128.load(x + (i << 2)), vid), off)), top);
        const b = i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(v128.load(x + (i << 2) + 16), vid), off)), top);
        v128.store64_lane(codes + i, i8x16.narrow_i16x8_u(i16x8.narrow_i32x4_s(a, b), i16x8.splat(0)), 0);
      }
    } else {
      memory.fill(codes, 0, 32);
    }
  } else {
    for (let j: usize = 0; j < 32; j++) {
      store<u8>(codes + j, <u8>min(31, truncX86(load<f32>(x + (j << 2)) * id + 16.5)));
    }
  }
  pack5(codes, y + 2);
}

function quantizeBlockImatrix(x: usize, qw: usize, sigma2: f32, y: usize): void {
  imatrixWeights32(x, qw, sigma2, weights);
  const d = makeQxQuants(32, 16, x, codes, weights);
  store<u16>(y, f32ToF16(d));
  pack5(codes, y + 2);
}

export function q5_0_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const qw = argU32(args, A_IMATRIX);
  const nb = rowLen >> 5;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * <usize>nb * 22;
    if (qw != 0) {
      const sigma2: f32 = sumSquares(x, rowLen) / <f32>rowLen;
      for (let b = 0; b < nb; b++) quantizeBlockImatrix(x + (<usize>b << 7), qw + (<usize>b << 7), sigma2, y + <usize>b * 22);
    } else {
      for (let b = 0; b < nb; b++) quantizeBlockRef(x + (<usize>b << 7), y + <usize>b * 22);
    }
  }
}

export function q5_0_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 5;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 22;
    const d = f16ToF32(<u32>load<u16>(blk));
    const qh = load<u32>(blk, 2);
    const y = dst + (b << 7);
    if (ASC_FEATURE_SIMD) {
      const qs = v128.load(blk + 6);
      const vd = f32x4.splat(d);
      const mask = v128.load(NIB), sixteen = v128.load(NIB, 32);
      const lo = i8x16.sub(v128.or(v128.and(qs, mask), v128.and(highBits32(qh, 0), sixteen)), sixteen);
      const hi = i8x16.sub(v128.or(hiNibbles(qs, mask), v128.and(highBits32(qh, 1), sixteen)), sixteen);
      storeAQ(y, lo, vd);
      storeAQ(y + 64, hi, vd);
    } else {
      for (let j: u32 = 0; j < 16; j++) {
        const q = <i32>load<u8>(blk + 6 + <usize>j);
        const a = (q & 15) | (<i32>((qh >> j) & 1) << 4);
        const c = (q >> 4) | (<i32>((qh >> (j + 16)) & 1) << 4);
        store<f32>(y + (<usize>j << 2), <f32>(a - 16) * d);
        store<f32>(y + (<usize>(j + 16) << 2), <f32>(c - 16) * d);
      }
    }
  }
}
