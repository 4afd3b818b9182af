// Q4_1 (ggml type 3): blocks of 32 values, 20 bytes, 5.0 bits per weight.
// Layout: d: fp16 at 0, m: fp16 at 2, qs: uint8[16] at 4 (element j low nibble, j+16 high).
// Dequantized value = q * d + m.
// Reference quantizer (spec §3): min/max of the block, d = (max - min)/15, codes
// min(15, trunc((x - min)/d + 0.5)) with the fp32 d. With an importance matrix (spec §14.2):
// the QKX search (nmax 15, rmin -0.9, rdelta 0.05, 36 steps) with weights qw*sqrt(sigma2 + x^2),
// sigma2 = sum(x^2)/rowLen over the whole row; its codes are stored as they are.
import { A_IMATRIX, A_SCRATCH, argU32, f16PairToF32x4, f16ToF32, f32ToF16, rowF32, truncX86 } from '../common';
import { blockMax, blockMin, imatrixWeights32, minMax32, sumSquares } from './iq4_common';
import { hiNibbles, NIB, packNibbles32, storeQDM } from './pack';
import { makeQkxQuants } from './qkx_search';

export const Q4_1_BLOCK: i32 = 32;
export const Q4_1_BYTES: i32 = 20;

const codes = memory.data(32, 16);
const laux = memory.data(32, 16);
const weights = memory.data(128, 16);
const theMin = memory.data(4, 4);

function quantizeBlockRef(x: usize, y: usize): void {
  minMax32(x);
  const mn = blockMin;
  const d: f32 = (blockMax - mn) / 15;
  const id: f32 = d != 0 ? 1 / d : 0;
  store<u16>(y, f32ToF16(d));
  store<u16>(y, f32ToF16(mn), 2);
  if (ASC_FEATURE_SIMD) {
    // Finite id keeps (x - min)*id + 0.5 in [0.5, 16) or NaN (inf - inf), where trunc_sat and the
    // x86 conversion agree; id = inf (fp32-denormal blocks) gives code 0 everywhere on x86.
    if (id != Infinity) {
      const vid = f32x4.splat(id);
      const vmn = f32x4.splat(mn);
      const half = f32x4.splat(0.5);
      const top = i32x4.splat(15);
      const c0 = i16x8.narrow_i32x4_s(
        i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(f32x4.sub(v128.load(x), vmn), vid), half)), top),
        i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(f32x4.sub(v128.load(x, 16), vmn), vid), half)), top));
      const c1 = i16x8.narrow_i32x4_s(
        i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(f32x4.sub(v128.load(x, 32), vmn), vid), half)), top),
        i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(f32x4.sub(v128.load(x, 48), vmn), vid), half)), top));
      const c2 = i16x8.narrow_i32x4_s(
        i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(f32x4.sub(v128.load(x, 64), vmn), vid), half)), top),
        i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(f32x4.sub(v128.load(x, 80), vmn), vid), half)), top));
      const c3 = i16x8.narrow_i32x4_s(
        i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(f32x4.sub(v128.load(x, 96), vmn), vid), half)), top),
        i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.add(f32x4.mul(f32x4.sub(v128.load(x, 112), vmn), vid), half)), top));
      const lo = i8x16.narrow_i16x8_u(c0, c1);
      const hi = i8x16.narrow_i16x8_u(c2, c3);
      v128.store(y + 4, v128.or(lo, i8x16.shl(hi, 4)));
    } else {
      v128.store(y + 4, i8x16.splat(0));
    }
  } else {
    for (let j = 0; j < 16; j++) {
      const a = min(15, truncX86((load<f32>(x + (<usize>j << 2)) - mn) * id + 0.5));
      const b = min(15, truncX86((load<f32>(x + (<usize>(j + 16) << 2)) - mn) * id + 0.5));
      store<u8>(y + 4 + <usize>j, <u8>(a | (b << 4)));
    }
  }
}

function quantizeBlockImatrix(x: usize, qw: usize, sigma2: f32, y: usize): void {
  imatrixWeights32(x, qw, sigma2, weights);
  const d = makeQkxQuants(32, 15, x, weights, codes, laux, theMin, -0.9, 0.05, 36, false);
  store<u16>(y, f32ToF16(d));
  store<u16>(y, f32ToF16(-load<f32>(theMin)), 2);
  packNibbles32(codes, y + 4);
}

export function q4_1_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const qw = argU32(args, A_IMATRIX);
  const nb = rowLen >> 5;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * <usize>nb * 20;
    if (qw != 0) {
      const sigma2: f32 = sumSquares(x, rowLen) / <f32>rowLen;
      for (let b = 0; b < nb; b++) quantizeBlockImatrix(x + (<usize>b << 7), qw + (<usize>b << 7), sigma2, y + <usize>b * 20);
    } else {
      for (let b = 0; b < nb; b++) quantizeBlockRef(x + (<usize>b << 7), y + <usize>b * 20);
    }
  }
}

export function q4_1_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 5;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 20;
    const y = dst + (b << 7);
    if (ASC_FEATURE_SIMD) {
      const qs = v128.load(blk + 4);
      const dm = f16PairToF32x4(blk);
      const vd = i32x4.shuffle(dm, dm, 0, 0, 0, 0);
      const vm = i32x4.shuffle(dm, dm, 1, 1, 1, 1);
      const mask = v128.load(NIB);
      storeQDM(y, v128.and(qs, mask), vd, vm);
      storeQDM(y + 64, hiNibbles(qs, mask), vd, vm);
    } else {
      const d = f16ToF32(<u32>load<u16>(blk));
      const m = f16ToF32(<u32>load<u16>(blk, 2));
      for (let j: usize = 0; j < 16; j++) {
        const q = <i32>load<u8>(blk + 4 + j);
        store<f32>(y + (j << 2), <f32>(q & 15) * d + m);
        store<f32>(y + ((j + 16) << 2), <f32>(q >> 4) * d + m);
      }
    }
  }
}
