// MLX's affine quantization (mx.quantize, mode "affine", as mlx_lm's convert -q runs it on a GPU):
// per group of G (32/64/128) values a scale s and a bias b, x' = s*q + b, q in [0, 2^bits - 1],
// bits in {2, 3, 4, 5, 6, 8}. Unlike `affine` (affine.ts: directed f16 rounding so that [min, max]
// lies on the grid), this follows MLX's rules, each step an f32 operation:
//   lo = min(x), hi = max(0, max(x))         (MLX's GPU kernels start the maximum at 0)
//   s = max((hi - lo) / n, 1e-7), n = 2^bits - 1; the end of larger magnitude is the edge:
//   |lo| > |hi|: s, edge = lo; otherwise -s, edge = hi
//   q0 = round(edge / s); q0 != 0: s = edge / q0, b = edge; q0 == 0: b = 0
//   q = clamp(round((x - b) / s), 0, n)
// with round() half away from zero (Metal's and CUDA's round; MLX's CPU path rounds half to even
// and starts the maximum at -inf, which differs on ties and on all-negative groups). The codes
// use s and b as computed; s and b are stored rounded (nearest even) to the scale dtype: bf16 by
// default, f16 or f32 by flag (MLX stores them in the weights' dtype).
// Sections per row: codes (the bit stream of pack.ts, which read as little-endian u32 words is
// MLX's packing for every width), scales, biases.
import {
  A_BIASES, A_BITS, A_FLAGS, A_GROUP, A_SCALES, A_SCRATCH, FLAG_SCALE_BF16, FLAG_SCALE_F32,
  argI32, argU32, f32ToBf16, f32ToF16, rowF32,
} from '../common';
import { minMax } from './calib';
import { packCodes } from './pack';
import { affine_dequantize } from './affine';
import { mlxQuantRun } from './quant';

const codes = memory.data(256 * 4, 16);
const mm = memory.data(8, 8);

// Half away from zero for v >= 0 (the caller clamps first): trunc(v) + (fraction >= 0.5); the
// fraction v - trunc(v) is exact, unlike v + 0.5 (0.49999997 + 0.5 rounds to 1).
@inline function roundHalfUp(v: f32): f32 {
  const t = Mathf.trunc(v);
  return v - t >= 0.5 ? t + 1 : t;
}

// Codes of g values at x against s, b, as i32 at `codes`.
function groupCodes(x: usize, g: i32, s: f32, b: f32, n: f32): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    const vs = f32x4.splat(s);
    const vb = f32x4.splat(b);
    const vn = f32x4.splat(n);
    const zero = f32x4.splat(0);
    const half = f32x4.splat(0.5);
    const one = f32x4.splat(1);
    for (; i + 4 <= g; i += 4) {
      const v = f32x4.pmin(f32x4.pmax(f32x4.div(f32x4.sub(v128.load(x + (<usize>i << 2)), vb), vs), zero), vn);
      const t = f32x4.trunc(v);
      const q = f32x4.add(t, v128.and(f32x4.ge(f32x4.sub(v, t), half), one));
      v128.store(codes + (<usize>i << 2), i32x4.trunc_sat_f32x4_u(q));
    }
  }
  for (; i < g; i++) {
    const v = (load<f32>(x + (<usize>i << 2)) - b) / s;
    // Comparisons, not min/max: the same result without NaN (never passed) and as pmin/pmax above.
    const c = v < 0 ? <f32>0 : v > n ? n : v;
    store<i32>(codes + (<usize>i << 2), <i32>roundHalfUp(c));
  }
}

@inline function storeScale(p: usize, k: usize, v: f32, flags: i32): void {
  if (flags & FLAG_SCALE_F32) store<f32>(p + (k << 2), v);
  else if (flags & FLAG_SCALE_BF16) store<u16>(p + (k << 1), f32ToBf16(v));
  else store<u16>(p + (k << 1), f32ToF16(v));
}

export function mlx_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const bits = argI32(args, A_BITS);
  const g = argI32(args, A_GROUP);
  const flags = argI32(args, A_FLAGS);
  const n = <f32>((1 << bits) - 1);
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
      let hi = load<f32>(mm, 4);
      if (!(hi > 0)) hi = 0;
      let s = (hi - lo) / n;
      if (!(s > <f32>1e-7)) s = <f32>1e-7;
      const low = Mathf.abs(lo) > Mathf.abs(hi);
      if (!low) s = -s;
      const edge = low ? lo : hi;
      // round(edge / s), half away from zero
      const e = edge / s;
      const q0 = e < 0 ? -roundHalfUp(-e) : roundHalfUp(e);
      let b: f32 = 0;
      if (q0 != 0) {
        s = edge / q0;
        b = edge;
      }
      const y = dst + <usize>r * rowBytes + <usize>j * groupBytes;
      // The vector loops of quant.ts code and pack 8, 4 and 2 bits; the rest goes through `codes`.
      const done = mlxQuantRun(xg, g, s, b, (1 << bits) - 1, bits, y);
      if (done < g) {
        groupCodes(xg + (<usize>done << 2), g - done, s, b, n);
        packCodes(codes, g - done, bits, y + ((<usize>done * <usize>bits) >> 3));
      }
      const k = <usize>r * <usize>ng + <usize>j;
      storeScale(scales, k, s, flags);
      storeScale(biases, k, b, flags);
    }
  }
}

// x' = s*q + b in f32 from the stored scale and bias (MLX's own dequantize works in the scale
// dtype): affine's dequantizer, which reads the scale dtype from the flags.
export function mlx_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  affine_dequantize(src, nrows, rowLen, dst, args);
}
