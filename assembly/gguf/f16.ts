// F16 (ggml type 1) and BF16 (ggml type 30) as output formats: one value per 2-byte element.
// f32 -> fp16: round to nearest even, subnormals kept, overflow -> inf, NaN -> sign|0x7E00
// (common.ts f32ToF16, what ggml's x86 build writes). f32 -> bf16: round to nearest even on the
// bit pattern, NaN -> quiet NaN with its sign and payload (common.ts f32ToBf16, ggml's rule).
// The SIMD versions compute the same functions with lane operations; both are exact, so the bits
// agree for every input. An input already in the output type is copied unchanged.
import { A_SCRATCH, SRC_BF16, SRC_F16, SRC_F32, argU32, bf16ToF32, f16ToF32, f16x8ToF32, f32ToBf16, f32ToF16, rowF32 } from '../common';

export const F16_BLOCK: i32 = 1;
export const F16_BYTES: i32 = 2;
export const BF16_BLOCK: i32 = 1;
export const BF16_BYTES: i32 = 2;

// Four fp32 lanes -> fp16 bits in the low half of each lane. The fp32 scalings by 2^112 and
// 2^-110 make the addition below round the mantissa to 10 bits (to even) at the right exponent,
// including the subnormal range (bias floored at 2^-14's); NaN is tested separately.
@inline function f16x4(v: v128): v128 {
  const shl1 = i32x4.add(v, v);
  const nan = i32x4.gt_u(shl1, i32x4.splat(0xff000000));
  return v128.bitselect(v128.or(i32x4.shr_u(v128.and(v, i32x4.splat(0x80000000)), 16), i32x4.splat(0x7e00)),
    f16x4Finite(v, v128.load(F16K), v128.load(F16K, 16), v128.load(F16K, 32), v128.load(F16K, 48),
      v128.load(F16K, 64), v128.load(F16K, 80), v128.load(F16K, 96), v128.load(F16K, 112), v128.load(F16K, 128)), nan);
}

// f16x4 for lanes that are not NaN, with its constants passed in (loaded once per row: V8
// rematerializes a v128 constant at every use inside a loop, three instructions each).
const F16K = memory.data<u32>([
  0x80000000, 0x80000000, 0x80000000, 0x80000000, // sign
  0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff, // |x|
  0x77800000, 0x77800000, 0x77800000, 0x77800000, // 2^112
  0x08800000, 0x08800000, 0x08800000, 0x08800000, // 2^-110
  0xff000000, 0xff000000, 0xff000000, 0xff000000, // exponent of 2x
  0x71000000, 0x71000000, 0x71000000, 0x71000000, // bias floor
  0x07800000, 0x07800000, 0x07800000, 0x07800000, // bias add
  0x00000fff, 0x00000fff, 0x00000fff, 0x00000fff, // low bits of the sum
  0x00007c00, 0x00007c00, 0x00007c00, 0x00007c00, // exponent field of fp16
], 16);
@inline function f16x4Finite(v: v128, kSign: v128, kAbs: v128, kUp: v128, kDown: v128, kExp: v128, kFloor: v128, kAdd: v128, kLow: v128, kExp16: v128): v128 {
  const sign = i32x4.shr_u(v128.and(v, kSign), 16);
  const base = f32x4.mul(f32x4.mul(v128.and(v, kAbs), kUp), kDown);
  const bias = i32x4.max_u(v128.and(i32x4.add(v, v), kExp), kFloor);
  const sum = f32x4.add(i32x4.add(i32x4.shr_u(bias, 1), kAdd), base);
  const nonsign = i32x4.add(v128.and(i32x4.shr_u(sum, 13), kExp16), v128.and(sum, kLow));
  return v128.or(sign, nonsign);
}

@inline function bf16x4(v: v128): v128 {
  const hi = i32x4.shr_u(v, 16);
  const rounded = i32x4.shr_u(i32x4.add(i32x4.add(v, i32x4.splat(0x7fff)), v128.and(hi, i32x4.splat(1))), 16);
  const nan = i32x4.gt_u(v128.and(v, i32x4.splat(0x7fffffff)), i32x4.splat(0x7f800000));
  return v128.bitselect(v128.or(hi, i32x4.splat(0x40)), rounded, nan);
}

// Round to nearest even on the bit pattern, for lanes that are not NaN.
@inline function bf16x4Finite(v: v128): v128 {
  return i32x4.shr_u(i32x4.add(i32x4.add(v, i32x4.splat(0x7fff)), v128.and(i32x4.shr_u(v, 16), i32x4.splat(1))), 16);
}

function convertRow(x: usize, n: i32, y: usize, bf: bool): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    if (bf) {
      // 16 values at a time; NaN (never in weights) is tested once per 16 and takes bf16x4.
      for (; i + 16 <= n; i += 16) {
        const p = x + (<usize>i << 2);
        const a = v128.load(p), b = v128.load(p, 16), c = v128.load(p, 32), d = v128.load(p, 48);
        const q = y + (<usize>i << 1);
        if (v128.any_true(v128.or(v128.or(f32x4.ne(a, a), f32x4.ne(b, b)), v128.or(f32x4.ne(c, c), f32x4.ne(d, d))))) {
          v128.store(q, i16x8.narrow_i32x4_u(bf16x4(a), bf16x4(b)));
          v128.store(q, i16x8.narrow_i32x4_u(bf16x4(c), bf16x4(d)), 16);
        } else {
          v128.store(q, i16x8.narrow_i32x4_u(bf16x4Finite(a), bf16x4Finite(b)));
          v128.store(q, i16x8.narrow_i32x4_u(bf16x4Finite(c), bf16x4Finite(d)), 16);
        }
      }
      for (; i + 8 <= n; i += 8) {
        const p = x + (<usize>i << 2);
        v128.store(y + (<usize>i << 1), i16x8.narrow_i32x4_u(bf16x4(v128.load(p)), bf16x4(v128.load(p, 16))));
      }
    } else {
      const kSign = v128.load(F16K), kAbs = v128.load(F16K, 16), kUp = v128.load(F16K, 32), kDown = v128.load(F16K, 48);
      const kExp = v128.load(F16K, 64), kFloor = v128.load(F16K, 80), kAdd = v128.load(F16K, 96), kLow = v128.load(F16K, 112);
      const kExp16 = v128.load(F16K, 128);
      // 16 values at a time; NaN (never in weights) is tested once per 16 and takes f16x4.
      for (; i + 16 <= n; i += 16) {
        const p = x + (<usize>i << 2);
        const a = v128.load(p), b = v128.load(p, 16), c = v128.load(p, 32), d = v128.load(p, 48);
        const q = y + (<usize>i << 1);
        if (v128.any_true(v128.or(v128.or(f32x4.ne(a, a), f32x4.ne(b, b)), v128.or(f32x4.ne(c, c), f32x4.ne(d, d))))) {
          v128.store(q, i16x8.narrow_i32x4_u(f16x4(a), f16x4(b)));
          v128.store(q, i16x8.narrow_i32x4_u(f16x4(c), f16x4(d)), 16);
        } else {
          v128.store(q, i16x8.narrow_i32x4_u(
            f16x4Finite(a, kSign, kAbs, kUp, kDown, kExp, kFloor, kAdd, kLow, kExp16), f16x4Finite(b, kSign, kAbs, kUp, kDown, kExp, kFloor, kAdd, kLow, kExp16)));
          v128.store(q, i16x8.narrow_i32x4_u(
            f16x4Finite(c, kSign, kAbs, kUp, kDown, kExp, kFloor, kAdd, kLow, kExp16), f16x4Finite(d, kSign, kAbs, kUp, kDown, kExp, kFloor, kAdd, kLow, kExp16)), 16);
        }
      }
      for (; i + 8 <= n; i += 8) {
        const p = x + (<usize>i << 2);
        v128.store(y + (<usize>i << 1), i16x8.narrow_i32x4_u(f16x4(v128.load(p)), f16x4(v128.load(p, 16))));
      }
    }
  }
  for (; i < n; i++) {
    const v = load<f32>(x + (<usize>i << 2));
    store<u16>(y + (<usize>i << 1), bf ? f32ToBf16(v) : f32ToF16(v));
  }
}

function quantizeTo(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize, bf: bool): void {
  if ((bf && srcType == SRC_BF16) || (!bf && srcType == SRC_F16)) {
    memory.copy(dst, src, (<usize>nrows * <usize>rowLen) << 1);
    return;
  }
  const scratch = argU32(args, A_SCRATCH);
  if (srcType == SRC_F32) {
    convertRow(src, nrows * rowLen, dst, bf);
    return;
  }
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    convertRow(x, rowLen, dst + ((<usize>r * <usize>rowLen) << 1), bf);
  }
}

export function f16_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeTo(src, srcType, nrows, rowLen, dst, args, false);
}

export function bf16_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeTo(src, srcType, nrows, rowLen, dst, args, true);
}

export function f16_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const n = <i32>(<usize>nrows * <usize>rowLen);
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 8 <= n; i += 8) f16x8ToF32(src + (<usize>i << 1), dst + (<usize>i << 2));
  }
  for (; i < n; i++) store<f32>(dst + (<usize>i << 2), f16ToF32(<u32>load<u16>(src + (<usize>i << 1))));
}

export function bf16_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const n = <i32>(<usize>nrows * <usize>rowLen);
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 8 <= n; i += 8) {
      const h = v128.load(src + (<usize>i << 1));
      v128.store(dst + (<usize>i << 2), i32x4.shl(i32x4.extend_low_i16x8_u(h), 16));
      v128.store(dst + (<usize>i << 2) + 16, i32x4.shl(i32x4.extend_high_i16x8_u(h), 16));
    }
  }
  for (; i < n; i++) store<f32>(dst + (<usize>i << 2), bf16ToF32(<u32>load<u16>(src + (<usize>i << 1))));
}
