// MLX's affine scale and bias (mx.quantize, mode "affine", as mlx_lm's convert -q runs it on a GPU):
// affine.ts's `mlx` calibration, which the `mlx` format runs. Unlike `minmax` (directed f16 rounding
// so that [min, max] lies on the grid), each step is MLX's, an f32 operation:
//   lo = min(x), hi = max(0, max(x))         (MLX's GPU kernels start the maximum at 0)
//   s = max((hi - lo) / n, 1e-7), n = 2^bits - 1; the end of larger magnitude is the edge:
//   |lo| > |hi|: s, edge = lo; otherwise -s, edge = hi
//   q0 = round(edge / s); q0 != 0: s = edge / q0, b = edge; q0 == 0: b = 0
//   q = clamp(round((x - b) / s), 0, n)
// with round() half away from zero (Metal's and CUDA's round; MLX's CPU path rounds half to even
// and starts the maximum at -inf, which differs on ties and on all-negative groups). The codes
// use s and b as computed; s and b are stored rounded (nearest even) to the scale dtype: bf16,
// f16 or f32 by flag (common.ts putStoredScale; MLX stores them in the weights' dtype). The codes'
// bit stream (pack.ts) read as little-endian u32 words is MLX's packing for every width.
// Not re-exported by int/index.ts: nothing here is a wasm export.
import { roundHalfUp } from './calib';

export let mlxScale: f32 = 0;
export let mlxBias: f32 = 0;

// MLX's s and b of a group with minimum lo and maximum hi (into mlxScale, mlxBias).
export function mlxGroup(lo: f32, hi: f32, n: f32): void {
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
  mlxScale = s;
  mlxBias = b;
}
