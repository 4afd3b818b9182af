// Error metrics between an input row range and its dequantized float32 values.
// Accumulates into out (f64 x 6): sum (x-y)^2, max |x-y|, sum x^2, sum y^2, sum x*y, count.
// The host sums chunks and derives RMSE, max abs error, SQNR and cosine similarity. These are
// reported figures, not stored bytes: the SIMD build sums in two f64 lanes, so its last bits may
// differ from the scalar build's.
import { SRC_F32, SRC_BF16, bf16ToF32, f16ToF32 } from './common';

export function metrics_accumulate(src: usize, srcType: i32, deq: usize, n: i32, out: usize): void {
  let se: f64 = 0, mx: f64 = load<f64>(out, 8), sx: f64 = 0, sy: f64 = 0, sxy: f64 = 0;
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    if (srcType == SRC_F32 || srcType == SRC_BF16) {
      let vse = f64x2.splat(0), vmx = f64x2.splat(mx), vsx = f64x2.splat(0), vsy = f64x2.splat(0), vsxy = f64x2.splat(0);
      for (; i + 4 <= n; i += 4) {
        let x4: v128;
        if (srcType == SRC_F32) x4 = v128.load(src + (<usize>i << 2));
        else x4 = i32x4.shl(i32x4.extend_low_i16x8_u(v128.load64_zero(src + (<usize>i << 1))), 16);
        const y4 = v128.load(deq + (<usize>i << 2));
        const xl = f64x2.promote_low_f32x4(x4), yl = f64x2.promote_low_f32x4(y4);
        const xh = f64x2.promote_low_f32x4(v128.shuffle<u32>(x4, x4, 2, 3, 0, 1));
        const yh = f64x2.promote_low_f32x4(v128.shuffle<u32>(y4, y4, 2, 3, 0, 1));
        const el = f64x2.sub(xl, yl), eh = f64x2.sub(xh, yh);
        vse = f64x2.add(vse, f64x2.add(f64x2.mul(el, el), f64x2.mul(eh, eh)));
        vmx = f64x2.max(vmx, f64x2.max(f64x2.abs(el), f64x2.abs(eh)));
        vsx = f64x2.add(vsx, f64x2.add(f64x2.mul(xl, xl), f64x2.mul(xh, xh)));
        vsy = f64x2.add(vsy, f64x2.add(f64x2.mul(yl, yl), f64x2.mul(yh, yh)));
        vsxy = f64x2.add(vsxy, f64x2.add(f64x2.mul(xl, yl), f64x2.mul(xh, yh)));
      }
      se = f64x2.extract_lane(vse, 0) + f64x2.extract_lane(vse, 1);
      mx = Math.max(f64x2.extract_lane(vmx, 0), f64x2.extract_lane(vmx, 1));
      sx = f64x2.extract_lane(vsx, 0) + f64x2.extract_lane(vsx, 1);
      sy = f64x2.extract_lane(vsy, 0) + f64x2.extract_lane(vsy, 1);
      sxy = f64x2.extract_lane(vsxy, 0) + f64x2.extract_lane(vsxy, 1);
    }
  }
  for (; i < n; i++) {
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
