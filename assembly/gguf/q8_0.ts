// Q8_0 (ggml type 8): blocks of 32 values, 34 bytes, 8.5 bits per weight.
// Layout: d: fp16 at 0, qs: int8[32] at 2. Dequantized value = qs[i] * d.
// Reference quantizer (spec §1): d = amax/127, codes roundf(x/d) with the fp32 d, ties away
// from zero. The importance matrix is ignored, as in llama.cpp.
import { A_SCRATCH, argU32, f16ToF32, f32ToF16, roundAway, rowF32 } from '../common';

export const Q8_0_BLOCK: i32 = 32;
export const Q8_0_BYTES: i32 = 34;

function quantizeBlock(x: usize, y: usize): void {
  let amax: f32 = 0;
  if (ASC_FEATURE_SIMD) {
    let m = f32x4.splat(0);
    for (let i = 0; i < 32; i += 4) m = f32x4.max(m, f32x4.abs(v128.load(x + (<usize>i << 2))));
    amax = Mathf.max(
      Mathf.max(f32x4.extract_lane(m, 0), f32x4.extract_lane(m, 1)),
      Mathf.max(f32x4.extract_lane(m, 2), f32x4.extract_lane(m, 3)),
    );
  } else {
    for (let i = 0; i < 32; i++) amax = Mathf.max(amax, Mathf.abs(load<f32>(x + (<usize>i << 2))));
  }
  const d: f32 = amax / 127;
  const id: f32 = d != 0 ? 1 / d : 0;
  // 1/d overflows for fp32-denormal blocks; the x86 reference yields d = 0 and codes 0 there.
  if (id == Infinity) {
    memory.fill(y, 0, 34);
    return;
  }
  if (ASC_FEATURE_SIMD) {
    codes(x, y, d, id);
    return;
  }
  store<u16>(y, f32ToF16(d));
  for (let i = 0; i < 32; i++) {
    store<i8>(y + 2 + <usize>i, <i8>(<i32>roundAway(load<f32>(x + (<usize>i << 2)) * id)));
  }
}

// roundf on four lanes, as integers: for |v| >= 0.5, v + copysign(0.5, v) is exact or rounds
// without crossing an integer, so its truncation is roundf(v); below 0.5 the sum can round up to 1
// (v = 0.49999997), so those lanes are forced to 0, which is roundf's answer there.
@inline function roundAwayI32x4(v: v128, half: v128, signMask: v128): v128 {
  const q = i32x4.trunc_sat_f32x4_s(f32x4.add(v, v128.or(v128.and(v, signMask), half)));
  return v128.andnot(q, f32x4.lt(f32x4.abs(v), half));
}

// SIMD: four blocks at a time, so that the two divisions per block (d = amax/127, 1/d) run as
// one vector division each. Every lane computes exactly the scalar expression.
// The maxima are taken on the bit patterns of |x|: for non-negative floats the integer order is
// the float order, +inf included, and a NaN's pattern is above every other. One pmaxsd each where
// f32x4.max costs V8 several instructions for IEEE's NaN and signed-zero rules. A group with a
// NaN or an infinity goes to quantizeBlock (whose f32 max lets a NaN through as the scalar build
// does), so that the codes here are of finite values only.
function quantize4Blocks(x: usize, y: usize): void {
  const m0 = blockMax(x), m1 = blockMax(x + 128), m2 = blockMax(x + 256), m3 = blockMax(x + 384);
  const s01 = i32x4.max_s(v128.shuffle<i32>(m0, m1, 0, 1, 4, 5), v128.shuffle<i32>(m0, m1, 2, 3, 6, 7));
  const s23 = i32x4.max_s(v128.shuffle<i32>(m2, m3, 0, 1, 4, 5), v128.shuffle<i32>(m2, m3, 2, 3, 6, 7));
  const amax = i32x4.max_s(v128.shuffle<i32>(s01, s23, 0, 2, 4, 6), v128.shuffle<i32>(s01, s23, 1, 3, 5, 7));
  const d = f32x4.div(amax, f32x4.splat(127));
  const nz = f32x4.ne(d, f32x4.splat(0));
  const id = v128.and(f32x4.div(f32x4.splat(1), d), nz);
  if (v128.any_true(v128.or(f32x4.eq(id, f32x4.splat(Infinity)), i32x4.gt_s(amax, i32x4.splat(0x7f7fffff))))) {
    for (let j = 0; j < 4; j++) quantizeBlock(x + (<usize>j << 7), y + <usize>j * 34);
    return;
  }
  codes(x, y, f32x4.extract_lane(d, 0), f32x4.extract_lane(id, 0), true);
  codes(x + 128, y + 34, f32x4.extract_lane(d, 1), f32x4.extract_lane(id, 1), true);
  codes(x + 256, y + 68, f32x4.extract_lane(d, 2), f32x4.extract_lane(id, 2), true);
  codes(x + 384, y + 102, f32x4.extract_lane(d, 3), f32x4.extract_lane(id, 3), true);
}

// The largest |x| bit pattern of each lane's eight values of a block (see quantize4Blocks).
@inline function blockMax(x: usize): v128 {
  const a = i32x4.max_s(f32x4.abs(v128.load(x)), f32x4.abs(v128.load(x, 16)));
  const b = i32x4.max_s(f32x4.abs(v128.load(x, 32)), f32x4.abs(v128.load(x, 48)));
  const c = i32x4.max_s(f32x4.abs(v128.load(x, 64)), f32x4.abs(v128.load(x, 80)));
  const e = i32x4.max_s(f32x4.abs(v128.load(x, 96)), f32x4.abs(v128.load(x, 112)));
  return i32x4.max_s(i32x4.max_s(a, b), i32x4.max_s(c, e));
}

// roundAwayI32x4 where every lane is finite and below 2^22 in magnitude (the codes of a block
// whose amax and 1/d are finite: |x * id| <= 127 and a little): the truncation by roundps
// (f32x4.trunc) and the integer read off t + 1.5 * 2^23, whose bits are 0x4B400000 + t, in place
// of i32x4.trunc_sat, whose NaN and overflow fix-ups cost V8 several instructions.
@inline function roundAwayFiniteI32x4(v: v128, half: v128, signMask: v128): v128 {
  const t = f32x4.trunc(f32x4.add(v, v128.or(v128.and(v, signMask), half)));
  const q = i32x4.sub(f32x4.add(t, f32x4.splat(12582912.0)), i32x4.splat(0x4b400000));
  return v128.andnot(q, f32x4.lt(f32x4.abs(v), half));
}

// `finite`: the block's amax and id are finite (quantize4Blocks), so roundAwayFiniteI32x4 applies.
@inline function codes(x: usize, y: usize, d: f32, id: f32, finite: bool = false): void {
  store<u16>(y, f32ToF16(d));
  const vid = f32x4.splat(id);
  const half = f32x4.splat(0.5);
  const signMask = i32x4.splat(0x80000000);
  const q = y + 2;
  for (let i = 0; i < 32; i += 16) {
    const v0 = f32x4.mul(v128.load(x + (<usize>i << 2)), vid);
    const v1 = f32x4.mul(v128.load(x + (<usize>(i + 4) << 2)), vid);
    const v2 = f32x4.mul(v128.load(x + (<usize>(i + 8) << 2)), vid);
    const v3 = f32x4.mul(v128.load(x + (<usize>(i + 12) << 2)), vid);
    const c0 = finite ? roundAwayFiniteI32x4(v0, half, signMask) : roundAwayI32x4(v0, half, signMask);
    const c1 = finite ? roundAwayFiniteI32x4(v1, half, signMask) : roundAwayI32x4(v1, half, signMask);
    const c2 = finite ? roundAwayFiniteI32x4(v2, half, signMask) : roundAwayI32x4(v2, half, signMask);
    const c3 = finite ? roundAwayFiniteI32x4(v3, half, signMask) : roundAwayI32x4(v3, half, signMask);
    v128.store(q + <usize>i, i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(c0, c1), i16x8.narrow_i32x4_s(c2, c3)));
  }
}

export function q8_0_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const nb = rowLen >> 5;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * <usize>nb * 34;
    let b = 0;
    if (ASC_FEATURE_SIMD) {
      for (; b + 4 <= nb; b += 4) quantize4Blocks(x + (<usize>b << 7), y + <usize>b * 34);
    }
    for (; b < nb; b++) quantizeBlock(x + (<usize>b << 7), y + <usize>b * 34);
  }
}

export function q8_0_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 5;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 34;
    const d = f16ToF32(<u32>load<u16>(blk));
    const q = blk + 2;
    const y = dst + (b << 7);
    if (ASC_FEATURE_SIMD) {
      const vd = f32x4.splat(d);
      for (let i: usize = 0; i < 32; i += 16) {
        const c = v128.load(q + i);
        const lo = i16x8.extend_low_i8x16_s(c);
        const hi = i16x8.extend_high_i8x16_s(c);
        v128.store(y + (i << 2), f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(lo)), vd));
        v128.store(y + (i << 2) + 16, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(lo)), vd));
        v128.store(y + (i << 2) + 32, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(hi)), vd));
        v128.store(y + (i << 2) + 48, f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(hi)), vd));
      }
    } else {
      for (let i: usize = 0; i < 32; i++) store<f32>(y + (i << 2), <f32>load<i8>(q + i) * d);
    }
  }
}
