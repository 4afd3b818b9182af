// Shared kernel ABI. Every quantizer and dequantizer has the same signature:
//
//   <fmt>_quantize(src, srcType, nrows, rowLen, dst, args): void
//   <fmt>_dequantize(src, nrows, rowLen, dst, args): void     (dst is float32)
//
// `args` points at an ARGS_BYTES struct the host fills (src/kernels/args.ts mirrors it).
// Kernels never allocate: block temporaries live in static `memory.data` regions and the
// host passes a scratch area of at least scratchBytes(rowLen) bytes for whole-row work.

// Source element types (host mirror: SrcType in src/kernels/args.ts).
export const SRC_F32: i32 = 0;
export const SRC_F16: i32 = 1;
export const SRC_BF16: i32 = 2;

// Args struct field offsets.
export const A_IMATRIX: usize = 0; //  u32 ptr to rowLen f32 importance values, 0 = none
export const A_SCRATCH: usize = 4; //  u32 ptr to host scratch (>= 16*rowLen + 65536 bytes)
export const A_GROUP: usize = 8; //    i32 group / block size for variable-group formats
export const A_BITS: usize = 12; //    i32 bit width for variable-width formats
export const A_CALIB: usize = 16; //   i32 calibration method id (CALIB_*)
export const A_P0: usize = 20; //      f32 method parameter 0 (clip ratio, percentile, fixed scale)
export const A_P1: usize = 24; //      f32 method parameter 1 (fixed bound max)
export const A_ITERS: usize = 28; //   i32 iterations (HQQ) / search steps (MSE)
export const A_SCALES: usize = 32; //  u32 ptr: scales section for sectioned formats
export const A_BIASES: usize = 36; //  u32 ptr: biases / zero points section
export const A_AUX: usize = 40; //     u32 ptr: auxiliary section (double quantization, ...)
export const A_FLAGS: usize = 44; //   i32 format flags (FLAG_*)
export const A_TSCALE: usize = 48; //  f32 tensor-level scale chosen by the host (per-tensor modes)
export const A_TBIAS: usize = 52; //   f32 tensor-level bias chosen by the host
export const A_ROW0: usize = 56; //    i32 index of this call's first row in the tensor (double quantization)
export const ARGS_BYTES: i32 = 64;

// Calibration ids (host mirror: CALIBRATIONS in src/kernels/args.ts).
export const CALIB_DEFAULT: i32 = 0; //    the format's own rule (GGUF reference, absmax, ...)
export const CALIB_ABSMAX: i32 = 1;
export const CALIB_MINMAX: i32 = 2;
export const CALIB_FIXED: i32 = 3; //      P0 = scale, P1 = max
export const CALIB_CLIP: i32 = 4; //       P0 = ratio in (0, 1]
export const CALIB_PERCENTILE: i32 = 5; // P0 = percentile in (0, 100]
export const CALIB_MSE: i32 = 6; //        ITERS = grid steps
export const CALIB_HQQ: i32 = 7; //        ITERS = iterations
export const CALIB_MLX: i32 = 8; //        MLX's affine scale and bias (int/mlx.ts)

export const FLAG_DOUBLE_QUANT: i32 = 1;
export const FLAG_PER_TENSOR: i32 = 2;
export const FLAG_PER_CHANNEL: i32 = 4;
export const FLAG_SCALE_BF16: i32 = 8; // scales / biases stored as bf16 (mlx), f16 otherwise
export const FLAG_SCALE_F32: i32 = 16; // scales / biases stored as f32 (mlx)

export const GROUP_MAX_EPS: f32 = 1e-15;

@inline export function argU32(args: usize, off: usize): usize {
  return <usize>load<u32>(args + off);
}
@inline export function argI32(args: usize, off: usize): i32 {
  return load<i32>(args + off);
}
@inline export function argF32(args: usize, off: usize): f32 {
  return load<f32>(args + off);
}

export function scratchBytes(rowLen: i32): i32 {
  return 16 * rowLen + 65536;
}

// ---- fp16 / bf16 ------------------------------------------------------------------------

// fp32 -> fp16 bits, round to nearest even, subnormals kept, overflow -> inf, NaN -> sign|0x7E00.
export function f32ToF16(f: f32): u16 {
  const x = reinterpret<u32>(f);
  const sign = (x >> 16) & 0x8000;
  const ax = x & 0x7fffffff;
  if (ax > 0x7f800000) return <u16>(sign | 0x7e00);
  if (ax >= 0x477ff000) return <u16>(sign | 0x7c00); // rounds to >= 65520 -> inf
  if (ax >= 0x38800000) {
    // normal fp16: rebias exponent, round mantissa 23 -> 10 bits to nearest even
    const m = ax + 0xfff + ((ax >> 13) & 1);
    return <u16>(sign | ((m - 0x38000000) >> 13));
  }
  if (ax < 0x33000000) return <u16>sign; // below half the smallest subnormal (2^-25) -> 0
  // fp16 subnormal: result = value / 2^-24 = mant24 >> (126 - e), rounded to nearest even.
  const e = ax >> 23;
  const mant = (ax & 0x7fffff) | 0x800000;
  const drop = 126 - e;
  const half = <u32>1 << (drop - 1);
  let r = mant >> drop;
  const rem = mant & ((<u32>1 << drop) - 1);
  if (rem > half || (rem == half && (r & 1) != 0)) r++;
  return <u16>(sign | r);
}

export function f16ToF32(h: u32): f32 {
  const sign = (h & 0x8000) << 16;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e == 0) {
    // zero or subnormal: exact as m * 2^-24
    const v = <f32>m * reinterpret<f32>(0x33800000);
    return reinterpret<f32>(reinterpret<u32>(v) | sign);
  }
  if (e == 31) return reinterpret<f32>(sign | 0x7f800000 | (m << 13));
  return reinterpret<f32>(sign | ((e + 112) << 23) | (m << 13));
}

// fp32 -> bf16 bits, round to nearest even; NaN stays a quiet NaN with its sign.
export function f32ToBf16(f: f32): u16 {
  const x = reinterpret<u32>(f);
  if ((x & 0x7fffffff) > 0x7f800000) return <u16>((x >> 16) | 0x40);
  return <u16>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

@inline export function bf16ToF32(h: u32): f32 {
  return reinterpret<f32>(h << 16);
}

// Constants of f16x8ToF32, loaded from memory (a splat constant in a loop is rebuilt at each use).
const F16D = memory.data<u32>([
  0x8fffffff, 0x8fffffff, 0x8fffffff, 0x8fffffff, // sign and the 15 bits below it, after the shift
  0x77800000, 0x77800000, 0x77800000, 0x77800000, // 2^112
  0x7c007c00, 0x7c007c00, 0x7c007c00, 0x7c007c00, // fp16 exponent field
]);

// Eight fp16 values at src as fp32 at dst, the bits of f16ToF32. Sign-extended and shifted by 13,
// a value's exponent and mantissa fill fp32's low exponent bits and mantissa with its sign on top;
// times 2^112 that is the value, exactly, for normals and subnormals alike (a subnormal's bits
// read as an fp32 subnormal m * 2^-136). Exponent 31 (inf / NaN, which keep their payload) is
// rare: those eight values take the scalar conversion.
@inline export function f16x8ToF32(src: usize, dst: usize): void {
  const h = v128.load(src);
  const exp = v128.load(F16D, 32);
  if (v128.any_true(i16x8.eq(v128.and(h, exp), exp))) {
    for (let k = 0; k < 8; k++) store<f32>(dst + (<usize>k << 2), f16ToF32(<u32>load<u16>(src + (<usize>k << 1))));
    return;
  }
  const keep = v128.load(F16D), up = v128.load(F16D, 16);
  v128.store(dst, f32x4.mul(v128.and(i32x4.shl(i32x4.extend_low_i16x8_s(h), 13), keep), up));
  v128.store(dst, f32x4.mul(v128.and(i32x4.shl(i32x4.extend_high_i16x8_s(h), 13), keep), up), 16);
}

// The fp16 pair at p (a block's d and m, d and dmin) as f32 lanes [a, b, a, b], the bits of
// f16ToF32 by f16x8ToF32's method; splat lane 0 or 1 with a shuffle. An exponent of 31 in either
// half (adding 0x400 to its field carries into the half's top bit) takes the scalar conversion.
@inline export function f16PairToF32x4(p: usize): v128 {
  const w = load<u32>(p);
  if (((w & 0x7c007c00) + 0x04000400) & 0x80008000) {
    const a = f16ToF32(w & 0xffff);
    const b = f16ToF32(w >> 16);
    return f32x4.replace_lane(f32x4.replace_lane(f32x4.splat(a), 1, b), 3, b);
  }
  const h = i32x4.extend_low_i16x8_s(i32x4.splat(w));
  return f32x4.mul(v128.and(i32x4.shl(h, 13), v128.load(F16D)), v128.load(F16D, 16));
}

// Stores scale or bias k of a group section, rounded to nearest even: f16 by default, bf16 or f32 by flag.
@inline export function putStoredScale(p: usize, k: usize, v: f32, flags: i32): void {
  if (flags & FLAG_SCALE_F32) store<f32>(p + (k << 2), v);
  else if (flags & FLAG_SCALE_BF16) store<u16>(p + (k << 1), f32ToBf16(v));
  else store<u16>(p + (k << 1), f32ToF16(v));
}

// Scale or bias k of a group section: f16 by default (affine), bf16 or f32 by flag (mlx).
@inline export function storedScale(p: usize, k: usize, flags: i32): f32 {
  if (flags & FLAG_SCALE_F32) return load<f32>(p + (k << 2));
  if (flags & FLAG_SCALE_BF16) return bf16ToF32(<u32>load<u16>(p + (k << 1)));
  return f16ToF32(<u32>load<u16>(p + (k << 1)));
}

// ---- rounding helpers used by the GGUF reference algorithms ------------------------------

// ggml's nearest_int: the 1.5*2^23 trick, defined for every input (inf -> -4194304, NaN -> 0).
@inline export function nearestInt(v: f32): i32 {
  const t: f32 = v + 12582912.0;
  return <i32>(reinterpret<u32>(t) & 0x7fffff) - 0x400000;
}

// C roundf: half away from zero, exact for every float.
@inline export function roundAway(v: f32): f32 {
  const t = Mathf.trunc(v);
  return Mathf.abs(v - t) >= 0.5 ? t + (v < 0 ? <f32>-1.0 : <f32>1.0) : t;
}

// C float->int conversion as the x86 reference build yields it: truncation, and 0 for inf/NaN
// (the cases where C has undefined behaviour; see spec §16.1 row 7).
@inline export function truncX86(v: f32): i32 {
  return Mathf.abs(v) < 2147483648.0 ? <i32>v : 0;
}

// ---- reading inputs ---------------------------------------------------------------------

@inline export function elemBytes(srcType: i32): i32 {
  return srcType == SRC_F32 ? 4 : 2;
}

// Pointer to row `row` of the source as float32: F32 rows are used in place, F16/BF16 rows
// are widened into `scratch` (one cache-resident row, never a pass over the whole tensor).
export function rowF32(src: usize, srcType: i32, row: i32, rowLen: i32, scratch: usize): usize {
  if (srcType == SRC_F32) return src + (<usize>row * <usize>rowLen << 2);
  const p = src + (<usize>row * <usize>rowLen << 1);
  let i = 0;
  if (srcType == SRC_BF16) {
    if (ASC_FEATURE_SIMD) {
      for (; i + 8 <= rowLen; i += 8) {
        const h = v128.load(p + (<usize>i << 1));
        v128.store(scratch + (<usize>i << 2), i32x4.shl(i32x4.extend_low_i16x8_u(h), 16));
        v128.store(scratch + (<usize>i << 2) + 16, i32x4.shl(i32x4.extend_high_i16x8_u(h), 16));
      }
    }
    for (; i < rowLen; i++) {
      store<f32>(scratch + (<usize>i << 2), bf16ToF32(<u32>load<u16>(p + (<usize>i << 1))));
    }
  } else {
    if (ASC_FEATURE_SIMD) {
      for (; i + 8 <= rowLen; i += 8) f16x8ToF32(p + (<usize>i << 1), scratch + (<usize>i << 2));
    }
    for (; i < rowLen; i++) {
      store<f32>(scratch + (<usize>i << 2), f16ToF32(<u32>load<u16>(p + (<usize>i << 1))));
    }
  }
  return scratch;
}

// Signed absolute maximum (spec §0): first element with strictly larger |x|; (0, +0.0) if none.
// Returns the signed value; `absmaxAbs` gives its magnitude.
export function signedAbsmax(x: usize, n: i32): f32 {
  let amax: f32 = 0;
  let max: f32 = 0;
  for (let i = 0; i < n; i++) {
    const v = load<f32>(x + (<usize>i << 2));
    const av = Mathf.abs(v);
    if (av > amax) {
      amax = av;
      max = v;
    }
  }
  return max;
}

// Check for NaN/inf in the first n floats; returns the first bad index or -1.
export function findNonFinite(src: usize, srcType: i32, n: i32): i32 {
  if (srcType == SRC_F32) {
    let i = 0;
    if (ASC_FEATURE_SIMD) {
      // Skip clean 16-value stretches fast; the scalar loop below names the first bad index.
      const em = i32x4.splat(0x7f800000);
      for (; i + 16 <= n; i += 16) {
        const p = src + (<usize>i << 2);
        const a = i32x4.eq(v128.and(v128.load(p), em), em);
        const b = i32x4.eq(v128.and(v128.load(p, 16), em), em);
        const c = i32x4.eq(v128.and(v128.load(p, 32), em), em);
        const d = i32x4.eq(v128.and(v128.load(p, 48), em), em);
        if (v128.any_true(v128.or(v128.or(a, b), v128.or(c, d)))) break;
      }
    }
    for (; i < n; i++) {
      if ((load<u32>(src + (<usize>i << 2)) & 0x7f800000) == 0x7f800000) return i;
    }
  } else {
    const mask: u32 = srcType == SRC_F16 ? 0x7c00 : 0x7f80;
    let i = 0;
    if (ASC_FEATURE_SIMD) {
      // As for f32: 32 values a step (BF16 checkpoints are scanned before every quantization, and
      // one value at a time this scan cost a third of a Q8_0 unit).
      const em = i16x8.splat(<i16>mask);
      for (; i + 32 <= n; i += 32) {
        const p = src + (<usize>i << 1);
        const a = i16x8.eq(v128.and(v128.load(p), em), em);
        const b = i16x8.eq(v128.and(v128.load(p, 16), em), em);
        const c = i16x8.eq(v128.and(v128.load(p, 32), em), em);
        const d = i16x8.eq(v128.and(v128.load(p, 48), em), em);
        if (v128.any_true(v128.or(v128.or(a, b), v128.or(c, d)))) break;
      }
    }
    for (; i < n; i++) {
      if ((<u32>load<u16>(src + (<usize>i << 1)) & mask) == mask) return i;
    }
  }
  return -1;
}

// Start of host-managed memory: everything from here up belongs to the host.
export function heapBase(): usize {
  return __heap_base;
}
