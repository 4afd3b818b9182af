// Affine (asymmetric) integer quantization in MLX's vocabulary: per group of G (32/64/128) values a
// scale and a bias, x' = scale * q + bias (f32 arithmetic: f32(scale*q) + bias), q in [0, 2^b - 1],
// b in {2, 3, 4, 5, 6, 8}.
//
// Storage: scales and biases are f16 (MLX keeps them in the weights' half type). Codes are always
// computed against the STORED f16 values, q = clamp(round_half_even((x - bias) / scale), 0, qmax),
// so the dequantizer reproduces exactly what the quantizer chose (scale == 0 gives q = 0).
// Sections per row: codes (rowLen*b/8 bytes, bit order in pack.ts), scales (f16 per group),
// biases (f16 per group).
//
// Calibrations:
//   minmax (default)  bias = the largest f16 <= min, scale = the smallest f16 >= (max - bias)/qmax,
//                     so [min, max] lies inside the grid and |x - x'| <= scale/2 (up to f32 rounding);
//                     values beyond the f16 range saturate at +-65504.
//   hqq               HQQ's zero-point optimisation from the minmax start (hqq.ts), ITERS iterations.
//   mlx               MLX's own scale and bias (mlx.ts; the `mlx` format): codes against the
//                     unrounded s and b, rounded half away from zero; s and b stored in the scale
//                     dtype the flags name (bf16, f16 or f32).
import {
  A_BIASES, A_BITS, A_CALIB, A_FLAGS, A_GROUP, A_IMATRIX, A_ITERS, A_SCALES, A_SCRATCH, CALIB_HQQ, CALIB_MLX,
  argI32, argU32, f16ToF32, f32ToF16, putStoredScale, rowF32, storedScale,
} from '../common';
import { minMax } from './calib';
import { hqqGroup } from './hqq';
import { unpackCodes } from './pack';
import { affineQuantRun } from './quant';
import { mlxBias, mlxGroup, mlxScale } from './mlx';

const codes = memory.data(256 * 4, 16);
const mm = memory.data(8, 8);
const io = memory.data(4, 4);

// f16 bits of the largest f16 <= v, saturated to -65504.
export function f16Down(v: f32): u32 {
  const x = reinterpret<u32>(v);
  const ax = x & 0x7fffffff;
  if (ax >= 0x38800000 && ax <= 0x477fe000) {
    // Normal f16 range: truncate the mantissa (toward zero), then step away from zero for a
    // negative value that lost bits.
    const t = ((x >> 16) & 0x8000) | ((ax - 0x38000000) >> 13);
    return (x >> 31) != 0 && (ax & 0x1fff) != 0 ? t + 1 : t;
  }
  let h = <u32>f32ToF16(v);
  if (f16ToF32(h) > v) h = (h & 0x7fff) == 0 ? 0x8001 : h & 0x8000 ? h + 1 : h - 1;
  return h == 0xfc00 ? 0xfbff : h;
}

// f16 bits of the smallest f16 >= v, saturated to +65504.
export function f16Up(v: f32): u32 {
  const x = reinterpret<u32>(v);
  const ax = x & 0x7fffffff;
  if (ax >= 0x38800000 && ax <= 0x477fe000) {
    const t = ((x >> 16) & 0x8000) | ((ax - 0x38000000) >> 13);
    return (x >> 31) == 0 && (ax & 0x1fff) != 0 ? t + 1 : t;
  }
  let h = <u32>f32ToF16(v);
  if (f16ToF32(h) < v) h = (h & 0x7fff) == 0 ? 0x0001 : h & 0x8000 ? h - 1 : h + 1;
  return h == 0x7c00 ? 0x7bff : h;
}

export function affine_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const imatrix = argU32(args, A_IMATRIX);
  const bits = argI32(args, A_BITS);
  const g = argI32(args, A_GROUP);
  const calib = argI32(args, A_CALIB);
  const hqq = calib == CALIB_HQQ;
  const mlx = calib == CALIB_MLX;
  const flags = argI32(args, A_FLAGS);
  const iters = argI32(args, A_ITERS);
  const qmax = (1 << bits) - 1;
  const lim = <f32>qmax;
  const ng = rowLen / g;
  const rowBytes = (<usize>rowLen * <usize>bits) >> 3;
  const groupBytes = (<usize>g * <usize>bits) >> 3;
  const scales = argU32(args, A_SCALES);
  const biases = argU32(args, A_BIASES);
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    for (let j = 0; j < ng; j++) {
      const xg = x + ((<usize>j * <usize>g) << 2);
      minMax(xg, g, mm);
      const lo = load<f32>(mm);
      const hi = load<f32>(mm, 4);
      const k = <usize>r * <usize>ng + <usize>j;
      const y = dst + <usize>r * rowBytes + <usize>j * groupBytes;
      if (mlx) {
        mlxGroup(lo, hi, lim);
        putStoredScale(scales, k, mlxScale, flags);
        putStoredScale(biases, k, mlxBias, flags);
        affineQuantRun(xg, g, mlxScale, mlxBias, qmax, bits, y, true);
        continue;
      }
      const bh = f16Down(lo);
      const sh = f16Up((hi - f16ToF32(bh)) / lim);
      store<u16>(io, <u16>sh);
      store<u16>(io, <u16>bh, 2);
      if (hqq) hqqGroup(xg, g, imatrix ? imatrix + ((<usize>j * <usize>g) << 2) : 0, qmax, iters, lo, hi, io);
      store<u16>(scales + (k << 1), load<u16>(io));
      store<u16>(biases + (k << 1), load<u16>(io, 2));
      affineQuantRun(xg, g, f16ToF32(<u32>load<u16>(io)), f16ToF32(<u32>load<u16>(io, 2)), qmax, bits, y);
    }
  }
}

export function affine_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const bits = argI32(args, A_BITS);
  const g = argI32(args, A_GROUP);
  const scales = argU32(args, A_SCALES);
  const biases = argU32(args, A_BIASES);
  const ng = rowLen / g;
  const groupBytes = (<usize>g * <usize>bits) >> 3;
  const total = <usize>nrows * <usize>ng;
  const flags = argI32(args, A_FLAGS);
  for (let k: usize = 0; k < total; k++) {
    const s = storedScale(scales, k, flags);
    const b = storedScale(biases, k, flags);
    unpackCodes(src + k * groupBytes, g, bits, false, codes);
    const y = dst + ((k * <usize>g) << 2);
    let i = 0;
    if (ASC_FEATURE_SIMD) {
      const vs = f32x4.splat(s);
      const vb = f32x4.splat(b);
      for (; i + 4 <= g; i += 4) {
        const q = f32x4.convert_i32x4_s(v128.load(codes + (<usize>i << 2)));
        v128.store(y + (<usize>i << 2), f32x4.add(f32x4.mul(vs, q), vb));
      }
    }
    for (; i < g; i++) store<f32>(y + (<usize>i << 2), s * <f32>load<i32>(codes + (<usize>i << 2)) + b);
  }
}
