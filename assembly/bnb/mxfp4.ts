// MXFP4 (OCP Microscaling Formats v1.0): blocks of 32 E2M1 values sharing one E8M0 scale.
// Storage: 17 bytes per block, as GGUF's later MXFP4 type stores it: byte 0 = E8M0 scale code
// (2^(code-127)), bytes 1..16: byte 1+j holds element j in the low nibble and element j+16 in the
// high nibble. E2M1 nibble: bit 3 sign, bits 2..1 exponent (bias 1), bit 0 mantissa:
// 0, 0.5, 1, 1.5, 2, 3, 4, 6.
// Scale (OCP rule): shared exponent e = floor(log2(amax)) - 2 (emax of E2M1), clamped to >= -127
// (an all-zero or fp32-denormal block gets code 0); it cannot exceed 125 for finite f32 input.
// Elements: y = x * 2^-e (exact), rounded to nearest even on the E2M1 grid with saturation to +-6
// (values in [6, 8) * 2^e clip, as the spec's rule implies); the sign bit of y is kept (-0 -> 0x8).
// Dequantized value = E2M1(nibble) * 2^(code-127); code 255 (NaN in E8M0) dequantizes to NaN.
import { A_SCRATCH, argU32, rowF32 } from '../common';
import { absmax, planeTable, planesStore16 } from './lut';
import { hiNibbles, NIB } from '../gguf/pack';

export const MXFP4_BLOCK: i32 = 32;
export const MXFP4_BYTES: i32 = 17;

export const E2M1 = memory.data<f32>([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]);
const MAGIC: f32 = 4194304; // 2^22: its ulp is 0.5, the E2M1 subnormal step

// E2M1 magnitude code of a = |y| <= 6: subnormals (a < 1) by the magic-number add, normals by
// rounding the f32 mantissa to 1 bit (round half to even) and rebiasing the exponent (127-1) << 1.
@inline export function e2m1Mag(a: f32): u32 {
  const bits = reinterpret<u32>(a);
  const nrm = ((bits + 0x1fffff + ((bits >> 22) & 1)) >> 22) - 252;
  return select<u32>(reinterpret<u32>(a + MAGIC) - reinterpret<u32>(MAGIC), nrm, a < 1);
}

@inline function e2m1Codes4(x: v128, vmul: v128): v128 {
  const y = f32x4.mul(x, vmul);
  const a = f32x4.pmin(v128.and(y, i32x4.splat(0x7fffffff)), f32x4.splat(6)); // = min: no NaN
  const sub = i32x4.sub(f32x4.add(a, f32x4.splat(MAGIC)), i32x4.splat(reinterpret<i32>(MAGIC)));
  const odd = v128.and(i32x4.shr_u(a, 22), i32x4.splat(1));
  const nrm = i32x4.sub(i32x4.shr_u(i32x4.add(i32x4.add(a, i32x4.splat(0x1fffff)), odd), 22), i32x4.splat(252));
  const mag = v128.bitselect(sub, nrm, f32x4.lt(a, f32x4.splat(1)));
  return v128.or(mag, i32x4.shr_u(v128.and(y, i32x4.splat(0x80000000)), 28));
}

@inline function quantizeBlock(x: usize, y: usize): void {
  const amax = absmax(x, 32);
  const e = max(<i32>((reinterpret<u32>(amax) >> 23) & 0xff) - 129, -127);
  store<u8>(y, <u8>(e + 127));
  const mul = reinterpret<f32>(<u32>(127 - e) << 23);
  if (ASC_FEATURE_SIMD) {
    const vmul = f32x4.splat(mul);
    const c0 = i8x16.narrow_i16x8_u(
      i16x8.narrow_i32x4_u(e2m1Codes4(v128.load(x), vmul), e2m1Codes4(v128.load(x + 16), vmul)),
      i16x8.narrow_i32x4_u(e2m1Codes4(v128.load(x + 32), vmul), e2m1Codes4(v128.load(x + 48), vmul)));
    const c1 = i8x16.narrow_i16x8_u(
      i16x8.narrow_i32x4_u(e2m1Codes4(v128.load(x + 64), vmul), e2m1Codes4(v128.load(x + 80), vmul)),
      i16x8.narrow_i32x4_u(e2m1Codes4(v128.load(x + 96), vmul), e2m1Codes4(v128.load(x + 112), vmul)));
    v128.store(y + 1, v128.or(c0, i8x16.shl(c1, 4)));
  } else {
    for (let j = 0; j < 16; j++) {
      const a = load<f32>(x + (<usize>j << 2)) * mul;
      const b = load<f32>(x + (<usize>(j + 16) << 2)) * mul;
      const ca = e2m1Mag(Mathf.min(Mathf.abs(a), 6)) | ((reinterpret<u32>(a) >> 28) & 8);
      const cb = e2m1Mag(Mathf.min(Mathf.abs(b), 6)) | ((reinterpret<u32>(b) >> 28) & 8);
      store<u8>(y + 1 + <usize>j, <u8>(ca | (cb << 4)));
    }
  }
}

export function mxfp4_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const nb = rowLen >> 5;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * <usize>nb * 17;
    for (let b = 0; b < nb; b++) quantizeBlock(x + (<usize>b << 7), y + <usize>b * 17);
  }
}

@inline function e8m0(code: u32): f32 {
  if (code == 255) return NaN;
  return reinterpret<f32>(code == 0 ? 0x00400000 : code << 23);
}

// SIMD: codes 0..254 decode through scaled planes (lut.ts); 255 (NaN) takes the scalar loop.
const PLANES = memory.data(255 * 32, 16);
const PLANES_READY = memory.data(1);

function mxfp4Planes(): void {
  planeTable(E2M1, 255, (c: u32): f32 => e8m0(c), PLANES, PLANES_READY);
}

/** The planes of E2M1 itself (scale code 127, 2^0), for OCP NVFP4's decode. */
export function e2m1Planes(): usize {
  mxfp4Planes();
  return PLANES + (127 << 5);
}

export function mxfp4_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 5;
  if (ASC_FEATURE_SIMD) mxfp4Planes();
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 17;
    const code = <u32>load<u8>(blk);
    const y = dst + (b << 7);
    if (ASC_FEATURE_SIMD && code != 255) {
      const qs = v128.load(blk + 1);
      const m = v128.load(NIB);
      const t = PLANES + (<usize>code << 5);
      const lo = v128.load(t);
      const hi = v128.load(t + 16);
      planesStore16(v128.and(qs, m), lo, hi, y, false, v128.splat<i32>(0));
      planesStore16(hiNibbles(qs, m), lo, hi, y + 64, false, v128.splat<i32>(0));
      continue;
    }
    const s = e8m0(code);
    for (let j: usize = 0; j < 16; j++) {
      const c = <u32>load<u8>(blk + 1 + j);
      store<f32>(y + (j << 2), load<f32>(E2M1 + (<usize>(c & 15) << 2)) * s);
      store<f32>(y + ((j + 16) << 2), load<f32>(E2M1 + (<usize>(c >> 4) << 2)) * s);
    }
  }
}
