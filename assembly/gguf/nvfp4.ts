// NVFP4 as GGUF stores it (ggml type 40, registry name nvfp4_gguf): blocks of 64 values, 36 bytes.
// Bytes 0..3 are one UE4M3 scale per 16 values (sub-block s); bytes 4+8s .. 4+8s+7 hold that
// sub-block's codes, its element j in the low nibble of byte j and element j+8 in the high one.
// As for MXFP4 (mxfp4.ts), ggml keeps E2M1 doubled (KV) and halves the scale: value =
// KV[code] * ue4m3Half(byte). UE4M3 is unsigned (bit 7 is ignored): exponent bits 3-6, mantissa
// bits 0-2, exponent 0 subnormal; the bytes 0 and 0x7F decode to 0. The per-tensor fp32 scale of
// NVIDIA's NVFP4 is not part of the block: ggml applies it outside, as a separate multiply.
// Quantizer: ggml's reference, quantize_row_nvfp4_ref, which ignores importance:
//  - per 16 values, amax = max |x|; scale byte = fp32_to_ue4m3(amax / 6): for amax/6 below 2^-6
//    int(x*512 + 0.5) clamped to 1..7 (0 below 1), else the fp32 mantissa's top 3 bits rounded
//    half up by the next bit, saturating at 0x7E (448);
//  - code = the first i minimising |KV[i]*d - x| in fp32, d = ue4m3Half(byte).
// Fast path (d > 0 and amax <= 6*448, i.e. the scale did not saturate): every KV[i]*d and every
// midpoint (KV[i]+KV[i+1])/2*d is exact (d has 4 significant bits), near a midpoint both
// differences to its neighbours are exact (adjacent nonzero levels are within a factor 2), and
// |x|/d < 2^22 keeps farther levels' rounded errors apart; so the literal search gives the
// magnitude #{midpoints below |x|} (a tie goes to the lower entry, found first), and x < 0 with
// a nonzero magnitude sets bit 3 (+0 at code 0 and -0 at code 8 tie; the first wins). Otherwise
// (d = 0: every code 0; a saturated scale, where |x| can dwarf 12*d) the literal 16-entry search.
import { A_SCRATCH, argU32, rowF32 } from '../common';
import { absmax, planeTable, planesStore16 } from '../bnb/lut';
import { KV, KVF, codeLiteral } from './mxfp4';
import { hiNibbles } from './pack';

export const NVFP4_GGUF_BLOCK: i32 = 64;
export const NVFP4_GGUF_BYTES: i32 = 36;

// Midpoints of KV 0..7 (units of d) splatted, and SIMD constants: |x| mask, 8, low nibbles (loaded:
// a v128.const is rebuilt at every use).
const C = memory.data<f32>([
  0.5, 0.5, 0.5, 0.5, 1.5, 1.5, 1.5, 1.5, 2.5, 2.5, 2.5, 2.5, 3.5, 3.5, 3.5, 3.5,
  5, 5, 5, 5, 7, 7, 7, 7, 10, 10, 10, 10,
], 16);
const CI = memory.data<u32>([
  0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff,
  8, 8, 8, 8,
  0x0f0f0f0f, 0x0f0f0f0f, 0x0f0f0f0f, 0x0f0f0f0f,
], 16);

// ggml_ue4m3_to_fp32: the UE4M3 value halved.
@inline export function ue4m3Half(b: u32): f32 {
  if (b == 0 || b == 0x7f) return 0;
  const e = (b >> 3) & 15;
  const m = b & 7;
  if (e == 0) return <f32>m * reinterpret<f32>(<u32>0x3a800000); // m * 2^-10
  return reinterpret<f32>(((e + 119) << 23) | (m << 20)); // (1 + m/8) * 2^(e-8)
}

// ggml_fp32_to_ue4m3 (as its reference quantizer calls it, with amax/6 >= 0).
export function fp32ToUe4m3(v: f32): u32 {
  if (!(v > 0)) return 0;
  const x = Mathf.min(v, 448);
  const bits = reinterpret<u32>(x);
  let e = <i32>((bits >> 23) & 0xff) - 127 + 7;
  if (e <= 0) {
    const m = <i32>(x * 512 + <f32>0.5);
    return m < 1 ? 0 : <u32>min(m, 7);
  }
  if (e >= 15) return 0x7e;
  let m = ((bits >> 20) & 7) + ((bits >> 19) & 1);
  if (m > 7) {
    m = 0;
    if (++e >= 15) return 0x7e;
  }
  return (<u32>e << 3) | m;
}

@inline function codeFast(x: f32, d: f32): u32 {
  const a = Mathf.abs(x);
  let m: u32 = 0;
  for (let i: usize = 0; i < 7; i++) m += <u32>(a > load<f32>(C + (i << 4)) * d); // C's midpoints, lane 0
  return m | (x < 0 && m != 0 ? 8 : 0);
}

// Codes of four values as i32 lanes: the count of midpoints below |x|, bit 3 for x < 0 with a
// nonzero count.
@inline function codes4(x: v128, m0: v128, m1: v128, m2: v128, m3: v128, m4: v128, m5: v128, m6: v128): v128 {
  const a = v128.and(x, v128.load(CI));
  const s = i32x4.add(i32x4.add(i32x4.add(f32x4.gt(a, m0), f32x4.gt(a, m1)), i32x4.add(f32x4.gt(a, m2), f32x4.gt(a, m3))),
    i32x4.add(i32x4.add(f32x4.gt(a, m4), f32x4.gt(a, m5)), f32x4.gt(a, m6)));
  const mag = i32x4.neg(s);
  const neg = v128.andnot(f32x4.lt(x, f32x4.splat(0)), i32x4.eq(mag, f32x4.splat(0)));
  return v128.or(mag, v128.and(neg, v128.load(CI, 16)));
}

// The 16 codes of sub-block x (scale d > 0, fast path) as bytes in element order.
@inline function codes16(x: usize, d: f32): v128 {
  const vd = f32x4.splat(d);
  const m0 = f32x4.mul(v128.load(C), vd);
  const m1 = f32x4.mul(v128.load(C, 16), vd);
  const m2 = f32x4.mul(v128.load(C, 32), vd);
  const m3 = f32x4.mul(v128.load(C, 48), vd);
  const m4 = f32x4.mul(v128.load(C, 64), vd);
  const m5 = f32x4.mul(v128.load(C, 80), vd);
  const m6 = f32x4.mul(v128.load(C, 96), vd);
  return i8x16.narrow_i16x8_u(
    i16x8.narrow_i32x4_u(codes4(v128.load(x), m0, m1, m2, m3, m4, m5, m6), codes4(v128.load(x, 16), m0, m1, m2, m3, m4, m5, m6)),
    i16x8.narrow_i32x4_u(codes4(v128.load(x, 32), m0, m1, m2, m3, m4, m5, m6), codes4(v128.load(x, 48), m0, m1, m2, m3, m4, m5, m6)));
}

function quantizeBlock(x: usize, y: usize): void {
  let fast = 0;
  for (let s: usize = 0; s < 4; s++) {
    const amax = absmax(x + (s << 6), 16);
    const b = fp32ToUe4m3(amax / <f32>6);
    store<u8>(y + s, <u8>b);
    if (b != 0 && amax <= <f32>2688) fast |= 1 << <i32>s;
  }
  if (ASC_FEATURE_SIMD && fast == 15) {
    // Sub-blocks 0,1 then 2,3: byte j of sub-block s = code j | code j+8 << 4.
    for (let s: usize = 0; s < 4; s += 2) {
      const a = codes16(x + (s << 6), ue4m3Half(load<u8>(y + s)));
      const b = codes16(x + ((s + 1) << 6), ue4m3Half(load<u8>(y + s + 1)));
      const lo = i8x16.shuffle(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
      const hi = i8x16.shuffle(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
      v128.store(y + 4 + (s << 3), v128.or(lo, i8x16.shl(hi, 4)));
    }
    return;
  }
  for (let s: usize = 0; s < 4; s++) {
    const d = ue4m3Half(load<u8>(y + s));
    const xs = x + (s << 6);
    const q = y + 4 + (s << 3);
    const isFast = (fast >> <i32>s) & 1;
    for (let j: usize = 0; j < 8; j++) {
      const v0 = load<f32>(xs + (j << 2));
      const v1 = load<f32>(xs + ((j + 8) << 2));
      const a = isFast ? codeFast(v0, d) : codeLiteral(v0, d);
      const b = isFast ? codeFast(v1, d) : codeLiteral(v1, d);
      store<u8>(q + j, <u8>(a | (b << 4)));
    }
  }
}

export function nvfp4_gguf_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const nb = rowLen >> 6;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * <usize>nb * 36;
    for (let b = 0; b < nb; b++) quantizeBlock(x + (<usize>b << 8), y + <usize>b * 36);
  }
}

// SIMD decode: d has at most 4 significant bits and KV at most 2, so every product KV[i] * d is
// exact with its low 16 bits zero (d = 0 included: +-0). PLANES holds, per scale byte, the
// products' high words as a plane of low bytes and one of high bytes (lut.ts, planesStore16),
// built on the first call from the products the scalar build computes: no multiply per value.
const PLANES = memory.data(256 * 32, 16);
const PLANES_READY = memory.data(1);

export function nvfp4_gguf_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 6;
  if (ASC_FEATURE_SIMD) planeTable(KVF, 256, (b: u32): f32 => ue4m3Half(b), PLANES, PLANES_READY);
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 36;
    const y = dst + (b << 8);
    for (let s: usize = 0; s < 4; s++) {
      const q = blk + 4 + (s << 3);
      const ys = y + (s << 6);
      if (ASC_FEATURE_SIMD) {
        // Eight bytes give elements 0..7 (low nibbles) and 8..15 (high nibbles).
        const v = v128.load64_zero(q);
        const m = v128.load(CI, 32);
        const codes = i8x16.shuffle(v128.and(v, m), hiNibbles(v, m),
          0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
        const t = PLANES + (<usize>load<u8>(blk + s) << 5);
        planesStore16(codes, v128.load(t), v128.load(t + 16), ys, false, v128.splat<i32>(0));
      } else {
        const d = ue4m3Half(load<u8>(blk + s));
        for (let j: usize = 0; j < 8; j++) {
          const c = <usize>load<u8>(q + j);
          store<f32>(ys + (j << 2), d * <f32>load<i8>(KV + (c & 15)));
          store<f32>(ys + ((j + 8) << 2), d * <f32>load<i8>(KV + (c >> 4)));
        }
      }
    }
  }
}
