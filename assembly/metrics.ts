// Error metrics between an input row range and its dequantized float32 values.
// Accumulates into out (f64 x 6): sum (x-y)^2, max |x-y|, sum x^2, sum y^2, sum x*y, count.
// The host sums chunks and derives RMSE, max abs error, SQNR and cosine similarity.
import { SRC_F32, SRC_BF16, bf16ToF32, f16ToF32 } from './common';

export function metrics_accumulate(src: usize, srcType: i32, deq: usize, n: i32, out: usize): void {
  let se: f64 = 0, mx: f64 = load<f64>(out, 8), sx: f64 = 0, sy: f64 = 0, sxy: f64 = 0;
  for (let i = 0; i < n; i++) {
    let x: f32;
    if (srcType == SRC_F32) x = load<f32>(src + (<usize>i << 2));
    else if (srcType == SRC_BF16) x = bf16ToF32(<u32>load<u16>(src + (<usize>i << 1)));
    else x = f16ToF32(<u32>load<u16>(src + (<usize>i << 1)));
    const y = <f64>load<f32>(deq + (<usize>i << 2));
    const xd = <f64>x;
    const e = xd - y;
    se += e * e;
    const ae = Math.abs(e);
    if (ae > mx) mx = ae;
    sx += xd * xd;
    sy += y * y;
    sxy += xd * y;
  }
  store<f64>(out, load<f64>(out) + se);
  store<f64>(out, mx, 8);
  store<f64>(out, load<f64>(out, 16) + sx, 16);
  store<f64>(out, load<f64>(out, 24) + sy, 24);
  store<f64>(out, load<f64>(out, 32) + sxy, 32);
  store<f64>(out, load<f64>(out, 40) + <f64>n, 40);
}
