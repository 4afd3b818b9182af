// MXFP4 as GGUF stores it (ggml type 39, registry name mxfp4_gguf): blocks of 32 values, 17 bytes.
// Byte 0 is an E8M0 exponent e, bytes 1..16 the 4-bit codes, element j in the low nibble of byte
// 1+j and element j+16 in the high nibble. ggml keeps E2M1 doubled, as the integers
// KV = 0 1 2 3 4 6 8 12 (codes 0-7) and 0 -1 -2 -3 -4 -6 -8 -12 (codes 8-15), and halves the
// scale to make up for it: value = KV[code] * 2^(e-128) (e = 0, 1 are fp32 subnormals, e = 255 is
// 2^127; nothing is NaN), the same values as OCP MXFP4 (bnb/mxfp4.ts) except at e = 255.
// Quantizer: llama.cpp's reference, which llama-quantize runs (no importance matrix):
//  - e = floor(log2f(amax)) - 2 + 127 for amax > 0, else 0. log2f rounds to fp32, so an amax a few
//    ulps below a power of two takes the next exponent; that rounding is reproduced by rounding
//    the f64 log2 to fp32. The C code converts the float to uint8 with undefined behaviour below 0
//    (amax < 2^-125); x86 builds keep the low byte of the int, as here.
//  - code = the first i minimising |KV[i]*d - x| in fp32, d = 2^(e-128).
// Fast path (e in 2..252: every amax from 2^-123 to a few ulps below 2^128): with
// y = |x| * 2^(128-e) (exact: a power of two, y < 16) the fp32 errors compare as the real distances do (the differences of y and the
// grid are exact near every midpoint, and rounding is monotone), and for x < 0 every positive
// entry loses to code 0, as does -0 (code 8) for any x: so the magnitude code is
// #{midpoints 0.5 1.5 2.5 3.5 5 7 10 below y} (a tie goes to the lower entry, found first), and
// x < 0 with a nonzero magnitude sets bit 3. Other exponents take the literal 16-entry search: at
// e = 253 (amax within ulps of 2^128) 8*d and 12*d overflow to inf in fp32 as the C source writes
// them (a build that fuses the multiply and subtract into an FMA would not overflow there).
import { A_SCRATCH, argU32, rowF32 } from '../common';
import { absmax, planeTable, planesStore16 } from '../bnb/lut';
import { hiNibbles, NIB } from './pack';

export const MXFP4_GGUF_BLOCK: i32 = 32;
export const MXFP4_GGUF_BYTES: i32 = 17;

// ggml's kvalues_mxfp4 (E2M1 doubled); NVFP4 (nvfp4.ts) uses the same table and search.
export const KV = memory.data<i8>([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]);
// KV as floats (code 8 is +0, as the converted byte is).
export const KVF = memory.data<f32>([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]);
// SIMD constants, loaded (a v128.const in a loop is rebuilt at every use; a load is one op).
const C = memory.data<u32>([
  0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff, // |x| mask
  0x3e800000, 0x3e800000, 0x3e800000, 0x3e800000, // 0.25
  0x3f400000, 0x3f400000, 0x3f400000, 0x3f400000, // 0.75
  0x001fffff, 0x001fffff, 0x001fffff, 0x001fffff, // mantissa rounding, half down
  252, 252, 252, 252,
  7, 7, 7, 7,
  8, 8, 8, 8,
], 16);

// ggml's E8M0 -> fp32 "half" scale, 2^(e-128).
@inline function e8m0Half(e: u32): f32 {
  return reinterpret<f32>(e < 2 ? <u32>0x00200000 << e : (e - 1) << 23);
}

// floor(log2f(amax)) for amax > 0. log2f can round up to the next integer only for an amax
// within about 44 ulps below a power of two (the fp32 spacing near |log2| <= 149), so the
// exponent field answers every other normal amax without a logarithm.
function floorLog2f(amax: f32): i32 {
  const bits = reinterpret<u32>(amax);
  if (bits >= 0x00800000 && (bits & 0x7fffff) < 0x7fff00) return <i32>(bits >> 23) - 127;
  return <i32>Mathf.floor(<f32>Math.log2(<f64>amax));
}

// ggml's best_index_mxfp4: the first code minimising |KV[i]*d - x| in fp32 (any scale).
export function codeLiteral(x: f32, d: f32): u32 {
  let best: u32 = 0;
  let bestErr = Mathf.abs(<f32>load<i8>(KV) * d - x);
  for (let i: u32 = 1; i < 16; i++) {
    const err = Mathf.abs(<f32>load<i8>(KV + <usize>i) * d - x);
    if (err < bestErr) {
      best = i;
      bestErr = err;
    }
  }
  return best;
}

@inline function codeFast(x: f32, inv: f32): u32 {
  const y = Mathf.abs(x) * inv;
  const m = <u32>(y > 0.5) + <u32>(y > 1.5) + <u32>(y > 2.5) + <u32>(y > 3.5) + <u32>(y > 5) + <u32>(y > 7) + <u32>(y > 10);
  return m | (x < 0 && m != 0 ? 8 : 0);
}

// Codes of four values as i32 lanes (the SIMD build's codeFast), in E2M1 units a = y/2 < 8:
// below 1 the subnormal steps by two compares; from 1 up the fp32 mantissa rounded to one bit,
// half down (adding 0x1fffff before the shift), and the exponent rebiased, as E2M1's normal codes
// 2..7 sit (8 and up: 7). Below 1 that formula gives at most the compares' count, from 1 up at
// least 2 = their count there, so the larger of the two is the code.
@inline function codes4(x: v128, vinv2: v128): v128 {
  const a = f32x4.mul(v128.and(x, v128.load(C)), vinv2);
  const sub = i32x4.neg(i32x4.add(f32x4.gt(a, v128.load(C, 16)), f32x4.gt(a, v128.load(C, 32))));
  const nrm = i32x4.sub(i32x4.shr_u(i32x4.add(a, v128.load(C, 48)), 22), v128.load(C, 64));
  const mag = i32x4.max_s(sub, i32x4.min_s(nrm, v128.load(C, 80)));
  const neg = v128.andnot(f32x4.lt(x, f32x4.splat(0)), i32x4.eq(mag, f32x4.splat(0)));
  return v128.or(mag, v128.and(neg, v128.load(C, 96)));
}

function quantizeBlock(x: usize, y: usize): void {
  const amax = absmax(x, 32);
  const k = amax > 0 ? floorLog2f(amax) : -125;
  const e = <u32>(k + 125) & 0xff;
  store<u8>(y, <u8>e);
  if (k >= -123 && k <= 127) {
    const inv = reinterpret<f32>((255 - e) << 23); // 2^(128-e)
    if (ASC_FEATURE_SIMD) {
      const vinv = f32x4.splat(inv * 0.5);
      const c0 = i8x16.narrow_i16x8_u(
        i16x8.narrow_i32x4_u(codes4(v128.load(x), vinv), codes4(v128.load(x, 16), vinv)),
        i16x8.narrow_i32x4_u(codes4(v128.load(x, 32), vinv), codes4(v128.load(x, 48), vinv)));
      const c1 = i8x16.narrow_i16x8_u(
        i16x8.narrow_i32x4_u(codes4(v128.load(x, 64), vinv), codes4(v128.load(x, 80), vinv)),
        i16x8.narrow_i32x4_u(codes4(v128.load(x, 96), vinv), codes4(v128.load(x, 112), vinv)));
      v128.store(y + 1, v128.or(c0, i8x16.shl(c1, 4)));
    } else {
      for (let j: usize = 0; j < 16; j++) {
        const a = codeFast(load<f32>(x + (j << 2)), inv);
        const b = codeFast(load<f32>(x + ((j + 16) << 2)), inv);
        store<u8>(y + 1 + j, <u8>(a | (b << 4)));
      }
    }
    return;
  }
  const d = e8m0Half(e);
  for (let j: usize = 0; j < 16; j++) {
    const a = codeLiteral(load<f32>(x + (j << 2)), d);
    const b = codeLiteral(load<f32>(x + ((j + 16) << 2)), d);
    store<u8>(y + 1 + j, <u8>(a | (b << 4)));
  }
}

export function mxfp4_gguf_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const nb = rowLen >> 5;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * <usize>nb * 17;
    for (let b = 0; b < nb; b++) quantizeBlock(x + (<usize>b << 7), y + <usize>b * 17);
  }
}

// SIMD decode: every exponent byte's 16 products KV[i] * d are exact (d is a power of two, 2^127
// at most, the products infinite past the top) with their low 16 bits zero, so each byte has
// scaled planes (lut.ts): no multiply per value.
const PLANES = memory.data(256 * 32, 16);
const PLANES_READY = memory.data(1);

export function mxfp4_gguf_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 5;
  if (ASC_FEATURE_SIMD) planeTable(KVF, 256, (e: u32): f32 => e8m0Half(e), PLANES, PLANES_READY);
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 17;
    const y = dst + (b << 7);
    if (ASC_FEATURE_SIMD) {
      const q = v128.load(blk + 1);
      const mask = v128.load(NIB);
      const t = PLANES + (<usize>load<u8>(blk) << 5);
      const lo = v128.load(t);
      const hi = v128.load(t + 16);
      planesStore16(v128.and(q, mask), lo, hi, y, false, v128.splat<i32>(0));
      planesStore16(hiNibbles(q, mask), lo, hi, y + 64, false, v128.splat<i32>(0));
    } else {
      const d = e8m0Half(<u32>load<u8>(blk));
      for (let j: usize = 0; j < 16; j++) {
        const q = <usize>load<u8>(blk + 1 + j);
        store<f32>(y + (j << 2), d * <f32>load<i8>(KV + (q & 15)));
        store<f32>(y + ((j + 16) << 2), d * <f32>load<i8>(KV + (q >> 4)));
      }
    }
  }
}
