// Symmetric integer quantization (AQT style) for int2..int8: formats intsym, int8, int4.
//
//   qmax = 2^(b-1) - 1, codes q in [-qmax, qmax] (the value -2^(b-1) is never produced, so the
//   grid is symmetric and -x quantizes to -q), scale s = bound / qmax (f32), x' = q * s,
//   q = clamp(round_half_even(x / s), -qmax, qmax), and q = 0 everywhere when s == 0.
//
// `bound` comes from the calibration (CALIB_*), over a group, a row (per channel) or the whole
// tensor (the host finds it with intsym_reduce and passes the scale in A_TSCALE):
//   absmax (default)  bound = max |x|
//   clip              bound = ratio * max |x|                     (P0 = ratio in (0, 1])
//   fixed             bound = scale * max, data independent      (P0 = scale, P1 = max)
//   percentile        bound = the ceil(p*n/100)-th smallest |x|   (P0 = p, exact nearest rank)
//   mse               bound = ratio_j * max |x| minimising sum w_i (x_i - x'_i)^2 over the grid
//                     ratio_j = 1 - 0.8 j/N, j < N = ITERS (w = importance, else 1)
//
// Sections per row: codes (rowLen*b/8 bytes, packing in pack.ts), scales (f32 per group, or one
// f32 per row per channel). Per tensor: codes only, plus a 4-byte tensor section with the f32 scale.
import {
  A_AUX, A_BITS, A_CALIB, A_FLAGS, A_GROUP, A_IMATRIX, A_ITERS, A_P0, A_P1, A_SCALES, A_SCRATCH, A_TSCALE,
  CALIB_ABSMAX, CALIB_CLIP, CALIB_DEFAULT, CALIB_FIXED, CALIB_MSE, CALIB_PERCENTILE, FLAG_PER_CHANNEL, FLAG_PER_TENSOR, SRC_F32,
  argF32, argI32, argU32, rowF32,
} from '../common';
import { absMax, kthAbsBits, mseScale, percentileRank, symErr4 } from './calib';
import { unpackCodes } from './pack';
import { symQuantRun, symQuantRunNext } from './quant';

// Codes of one slice (rows and channels are processed 256 values at a time).
const SLICE: i32 = 256;
const codes = memory.data(SLICE * 4, 16);

// Reduction ops of intsym_reduce, chosen by the i32 at out+0 (the host's init writes it).
export const INTSYM_OP_ABSMAX: i32 = 1; // out+4: f32 running max |x|
export const INTSYM_OP_RADIX: i32 = 2; //  out+4 u32 prefix, +8 u32 shift, +12 u32 width, +16 u32 counts[8]
export const INTSYM_OP_MSE: i32 = 3; //    out+8 f32 scales[4], out+24 f64 errors[4] (running sums)

function groupScale(x: usize, n: i32, imp: usize, args: usize, qmax: i32, hist: usize): f32 {
  const calib = argI32(args, A_CALIB);
  const lim = <f32>qmax;
  if (calib == CALIB_FIXED) return (argF32(args, A_P0) * argF32(args, A_P1)) / lim;
  if (calib == CALIB_PERCENTILE) {
    const k = <i32>percentileRank(argF32(args, A_P0), <f64>n);
    return reinterpret<f32>(kthAbsBits(x, n, k, hist)) / lim;
  }
  const amax = absMax(x, n);
  if (calib == CALIB_CLIP) return (argF32(args, A_P0) * amax) / lim;
  if (calib == CALIB_MSE) return mseScale(x, n, imp, amax, qmax, argI32(args, A_ITERS));
  return amax / lim;
}

export function intsym_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const hist = scratch + (<usize>rowLen << 2);
  const imatrix = argU32(args, A_IMATRIX);
  const bits = argI32(args, A_BITS);
  const flags = argI32(args, A_FLAGS);
  const qmax = (1 << (bits - 1)) - 1;
  const rowBytes = (<usize>rowLen * <usize>bits) >> 3;
  const scales = argU32(args, A_SCALES);
  if (flags & FLAG_PER_TENSOR) {
    const s = argF32(args, A_TSCALE);
    store<f32>(argU32(args, A_AUX), s);
    for (let r = 0; r < nrows; r++) {
      symQuantRun(rowF32(src, srcType, r, rowLen, scratch), rowLen, s, qmax, bits, dst + <usize>r * rowBytes);
    }
    return;
  }
  if (flags & FLAG_PER_CHANNEL) {
    const calib = argI32(args, A_CALIB);
    if (ASC_FEATURE_SIMD && srcType == SRC_F32 && nrows > 0 && (calib == CALIB_DEFAULT || calib == CALIB_ABSMAX || calib == CALIB_CLIP)) {
      // absmax / clip per row, pipelined: each row's max |x| is folded in while the previous row
      // is quantized (max is order-free, and the scale is the same f32 expression as groupScale's).
      const lim = <f32>qmax;
      let amax = absMax(src, rowLen);
      for (let r = 0; r < nrows; r++) {
        const x = src + ((<usize>r * <usize>rowLen) << 2);
        const s = calib == CALIB_CLIP ? (argF32(args, A_P0) * amax) / lim : amax / lim;
        store<f32>(scales + (<usize>r << 2), s);
        const y = dst + <usize>r * rowBytes;
        if (r + 1 < nrows) amax = symQuantRunNext(x, rowLen, s, qmax, bits, y, x + (<usize>rowLen << 2));
        else symQuantRun(x, rowLen, s, qmax, bits, y);
      }
      return;
    }
    for (let r = 0; r < nrows; r++) {
      const x = rowF32(src, srcType, r, rowLen, scratch);
      const s = groupScale(x, rowLen, imatrix, args, qmax, hist);
      store<f32>(scales + (<usize>r << 2), s);
      symQuantRun(x, rowLen, s, qmax, bits, dst + <usize>r * rowBytes);
    }
    return;
  }
  const g = argI32(args, A_GROUP);
  const ng = rowLen / g;
  const groupBytes = (<usize>g * <usize>bits) >> 3;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * rowBytes;
    const sc = scales + ((<usize>r * <usize>ng) << 2);
    for (let j = 0; j < ng; j++) {
      const xg = x + ((<usize>j * <usize>g) << 2);
      const imp = imatrix ? imatrix + ((<usize>j * <usize>g) << 2) : 0;
      const s = groupScale(xg, g, imp, args, qmax, hist);
      store<f32>(sc + (<usize>j << 2), s);
      symQuantRun(xg, g, s, qmax, bits, y + <usize>j * groupBytes);
    }
  }
}

export function intsym_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const bits = argI32(args, A_BITS);
  const flags = argI32(args, A_FLAGS);
  const scales = argU32(args, A_SCALES);
  const rowBytes = (<usize>rowLen * <usize>bits) >> 3;
  // Scale runs: the whole row per channel / per tensor, else one group.
  const run = flags & (FLAG_PER_TENSOR | FLAG_PER_CHANNEL) ? rowLen : argI32(args, A_GROUP);
  const nrun = rowLen / run;
  const tscale = flags & FLAG_PER_TENSOR ? load<f32>(argU32(args, A_AUX)) : 0;
  for (let r = 0; r < nrows; r++) {
    for (let j = 0; j < nrun; j++) {
      const s = flags & FLAG_PER_TENSOR ? tscale : load<f32>(scales + ((<usize>r * <usize>nrun + <usize>j) << 2));
      const y = dst + ((<usize>r * <usize>rowLen + <usize>j * <usize>run) << 2);
      const q = src + <usize>r * rowBytes + ((<usize>j * <usize>run * <usize>bits) >> 3);
      for (let i = 0; i < run; i += SLICE) {
        const m = min(SLICE, run - i);
        unpackCodes(q + ((<usize>i * <usize>bits) >> 3), m, bits, true, codes);
        scaleCodes(codes, m, s, y + (<usize>i << 2));
      }
    }
  }
}

// y[i] = f32(q[i]) * s.
export function scaleCodes(q: usize, n: i32, s: f32, y: usize): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    const vs = f32x4.splat(s);
    for (; i + 4 <= n; i += 4) {
      v128.store(y + (<usize>i << 2), f32x4.mul(f32x4.convert_i32x4_s(v128.load(q + (<usize>i << 2))), vs));
    }
  }
  for (; i < n; i++) store<f32>(y + (<usize>i << 2), <f32>load<i32>(q + (<usize>i << 2)) * s);
}

// Tensor-level reductions for per-tensor granularity, accumulated across the host's row chunks.
export function intsym_reduce(src: usize, srcType: i32, nrows: i32, rowLen: i32, out: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const op = load<i32>(out);
  if (op == INTSYM_OP_ABSMAX) {
    let m = load<f32>(out, 4);
    for (let r = 0; r < nrows; r++) m = max(m, absMax(rowF32(src, srcType, r, rowLen, scratch), rowLen));
    store<f32>(out, m, 4);
  } else if (op == INTSYM_OP_RADIX) {
    // Counts of |x| bits that match `prefix` above bit shift+width, by their `width` bits at `shift`.
    const prefix = load<u32>(out, 4);
    const shift = load<u32>(out, 8);
    const width = load<u32>(out, 12);
    const hi = shift + width;
    const mask: u32 = (<u32>1 << width) - 1;
    for (let r = 0; r < nrows; r++) {
      const x = rowF32(src, srcType, r, rowLen, scratch);
      for (let i = 0; i < rowLen; i++) {
        const b = load<u32>(x + (<usize>i << 2)) & 0x7fffffff;
        if (hi >= 32 || (b >>> hi) == (prefix >>> hi)) {
          const c = out + 16 + (<usize>((b >>> shift) & mask) << 2);
          store<u32>(c, load<u32>(c) + 1);
        }
      }
    }
  } else if (op == INTSYM_OP_MSE) {
    const bits = argI32(args, A_BITS);
    const qmax = (1 << (bits - 1)) - 1;
    const imatrix = argU32(args, A_IMATRIX);
    const err = scratch + (<usize>rowLen << 2);
    for (let r = 0; r < nrows; r++) {
      symErr4(rowF32(src, srcType, r, rowLen, scratch), rowLen, imatrix, out + 8, qmax, err);
      // Row sums are added to the running totals: the same order for any chunking.
      for (let l = 0; l < 4; l++) {
        const p = out + 24 + (<usize>l << 3);
        store<f64>(p, load<f64>(p) + load<f64>(err + (<usize>l << 3)));
      }
    }
  }
}

