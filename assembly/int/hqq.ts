// Half-quadratic quantization (HQQ: Badri & Shaji, "Half-Quadratic Quantization of Large Machine
// Learning Models", 2023) of one affine group, calibration-free.
//
// The published algorithm fixes the scale from min/max and optimises the zero point z of
// Q_z(W) = clamp(round(W * s + z), 0, qmax) (s the inverse scale), minimising ||W - Q_z^-1(Q_z(W))||_p^p
// with p < 1 through half-quadratic splitting: an auxiliary error W_e and a penalty beta that grows
// by kappa each iteration. Each iteration:
//   1. W_e = shrink_p(W - Q_z^-1(Q_z(W)), beta), the generalised soft threshold
//      shrink_p(x, beta) = sign(x) * max(|x| - |x|^(p-1) / beta, 0)
//   2. z   = mean(Q_z(W) - (W - W_e) * s)           (closed-form zero update)
//   3. beta = beta * kappa
// Defaults from the authors' reference implementation: p = 0.7, beta = 10, kappa = 1.01, 20
// iterations (ours: ITERS). |x|^(p-1) uses |x| + 1e-8 as there.
// Our additions, all deterministic: with importance weights w the mean of step 2 is the w-weighted
// mean (the penalty is weighted by w too, so step 1 is unchanged); every iterate is stored as f16
// (scale, bias) = (1/s, -z/s), its codes recomputed against the stored values, and scored by the
// objective sum w_i |x_i - x'_i|^p; the best one wins, starting from the minmax result, and the
// loop stops at the first iterate that does not improve (as the reference stops when its error
// grows). All iteration arithmetic is f64 and scalar in both builds; pow is our own exp2/log2
// below (polynomials in +,-,*,/ only) so that the host reference reproduces it bit for bit.
import { f16ToF32, f32ToF16 } from '../common';

export const HQQ_P: f64 = 0.7;
export const HQQ_BETA: f64 = 10.0;
export const HQQ_KAPPA: f64 = 1.01;

const LOG2E: f64 = 1.4426950408889634;
const LN2: f64 = 0.6931471805599453;
const SQRT2: f64 = 1.4142135623730951;
const INV3: f64 = 1.0 / 3.0;
const INV4: f64 = 1.0 / 4.0;
const INV5: f64 = 1.0 / 5.0;
const INV6: f64 = 1.0 / 6.0;
const INV7: f64 = 1.0 / 7.0;
const INV8: f64 = 1.0 / 8.0;
const INV9: f64 = 1.0 / 9.0;
const INV11: f64 = 1.0 / 11.0;

// log2(x) for finite x > 0 (normal): exponent plus 2*atanh(u)/ln2, u = (m-1)/(m+1), m in
// [sqrt2/2, sqrt2), atanh by its series to u^11 (relative error < 1e-9: ample for a threshold and
// an objective, and exactly reproducible). Coefficients are IEEE quotients 1/k, folded identically
// by the compiler and by the host reference.
export function log2P(x: f64): f64 {
  const bits = reinterpret<u64>(x);
  let e = <i32>(bits >> 52) - 1023;
  let m = reinterpret<f64>((bits & 0x000fffffffffffff) | 0x3ff0000000000000);
  if (m > SQRT2) {
    m = m * 0.5;
    e = e + 1;
  }
  const u = (m - 1.0) / (m + 1.0);
  const u2 = u * u;
  let p = INV11;
  p = p * u2 + INV9;
  p = p * u2 + INV7;
  p = p * u2 + INV5;
  p = p * u2 + INV3;
  p = p * u2 + 1.0;
  return <f64>e + 2.0 * u * p * LOG2E;
}

// 2^t for |t| < 1000: 2^k * exp(f ln2), f in [-0.5, 0.5], Taylor polynomial of degree 9
// (relative error < 3e-10) in Horner form with the factorial reciprocals as products of 1/k.
export function exp2P(t: f64): f64 {
  const k = Math.floor(t + 0.5);
  const z = (t - k) * LN2;
  let p = 1.0 + z * INV9;
  p = 1.0 + z * p * INV8;
  p = 1.0 + z * p * INV7;
  p = 1.0 + z * p * INV6;
  p = 1.0 + z * p * INV5;
  p = 1.0 + z * p * INV4;
  p = 1.0 + z * p * INV3;
  p = 1.0 + z * p * 0.5;
  p = 1.0 + z * p;
  return p * reinterpret<f64>(<u64>(<i64>k + 1023) << 52);
}

// x^y for x >= 0 (0 for x == 0, y > 0 assumed).
@inline export function powP(x: f64, y: f64): f64 {
  return x > 0 ? exp2P(y * log2P(x)) : 0;
}

// Objective of stored (scale, bias): sum w_i |x_i - (scale*q_i + bias)|^p with the dequantizer's
// f32 arithmetic and the codes affineCodes would produce.
export function hqqObjective(x: usize, n: i32, imp: usize, s: f32, b: f32, qmax: i32): f64 {
  const lim = <f32>qmax;
  let o: f64 = 0;
  for (let i = 0; i < n; i++) {
    const xv = load<f32>(x + (<usize>i << 2));
    const q: f32 = s == 0 ? 0 : min(max(nearest<f32>((xv - b) / s), <f32>0), lim);
    const y: f32 = s * q + b;
    const t = powP(Math.abs(<f64>xv - <f64>y), HQQ_P);
    o = imp ? o + t * <f64>load<f32>(imp + (<usize>i << 2)) : o + t;
  }
  return o;
}

// Runs HQQ on one group whose minmax result (f16 bits) is in io[0], io[1] (scale, bias) and min/max
// in lo/hi; leaves the best (scale, bias) f16 bits in io.
export function hqqGroup(x: usize, n: i32, imp: usize, qmax: i32, iters: i32, lo: f32, hi: f32, io: usize): void {
  if (!(hi > lo)) return;
  const q = <f64>qmax;
  let best = hqqObjective(x, n, imp, f16ToF32(<u32>load<u16>(io)), f16ToF32(<u32>load<u16>(io, 2)), qmax);
  const scale = q / (<f64>hi - <f64>lo);
  let zero = -<f64>lo * scale;
  let beta = HQQ_BETA;
  for (let it = 0; it < iters; it++) {
    let num: f64 = 0;
    let den: f64 = 0;
    for (let i = 0; i < n; i++) {
      const xi = <f64>load<f32>(x + (<usize>i << 2));
      const wq = min(max(nearest<f64>(xi * scale + zero), 0.0), q);
      const e = xi - (wq - zero) / scale;
      const ae = Math.abs(e);
      let we = ae - powP(ae + 1e-8, HQQ_P - 1.0) / beta;
      we = we > 0 ? (e < 0 ? -we : we) : 0;
      const t = wq - (xi - we) * scale;
      if (imp) {
        const w = <f64>load<f32>(imp + (<usize>i << 2));
        num = num + w * t;
        den = den + w;
      } else {
        num = num + t;
        den = den + 1.0;
      }
    }
    if (!(den > 0)) return;
    zero = num / den;
    beta = beta * HQQ_KAPPA;
    const sd = 1.0 / scale;
    const sh = f32ToF16(<f32>sd);
    const bh = f32ToF16(<f32>(-zero * sd));
    const o = hqqObjective(x, n, imp, f16ToF32(<u32>sh), f16ToF32(<u32>bh), qmax);
    if (!(o < best)) return;
    best = o;
    store<u16>(io, sh);
    store<u16>(io, bh, 2);
  }
}
