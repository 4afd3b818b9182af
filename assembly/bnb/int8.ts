// LLM.int8 weights as bitsandbytes quantizes them (int8_vectorwise_quant) and transformers saves
// them (load_in_8bit): one byte per element and the row's absmax (SCB) in f32.
// Code of x: round half to even of x * (127 / amax), in f32 (127 / amax rounded once, as torch
// computes `A * (127.0 / row_stats)`), so |code| <= 127. Rows whose 127 / amax overflows (amax
// below about 2^-120, where bitsandbytes multiplies by inf) use x / amax * 127 instead; an all-zero
// row (amax 0) gets zeros. Dequantized value = (code * SCB) * f32(1/127), bitsandbytes'
// int8_vectorwise_dequant.
// Sections: codes (rowLen bytes, i8), scb (f32 per row); the tensor section weight_format is the
// one byte 0 ("row", the only layout bitsandbytes still saves).
import { A_AUX, A_SCALES, A_SCRATCH, argU32, rowF32 } from '../common';
import { absmax } from './lut';

const INV127: f32 = <f32>1 / <f32>127;

@inline function code(x: f32, inv: f32, amax: f32, div: bool): i32 {
  const v = div ? (x / amax) * 127 : x * inv;
  return <i32>Mathf.max(-127, Mathf.min(127, nearest<f32>(v)));
}

export function bnb_int8_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  store<u8>(argU32(args, A_AUX), 0);
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const q = dst + <usize>r * <usize>rowLen;
    const amax = absmax(x, rowLen);
    store<f32>(argU32(args, A_SCALES) + (<usize>r << 2), amax);
    if (amax == 0) {
      memory.fill(q, 0, <usize>rowLen);
      continue;
    }
    const inv = <f32>127 / amax;
    const div = inv == Infinity;
    let i = 0;
    if (ASC_FEATURE_SIMD && !div) {
      const vinv = f32x4.splat(inv);
      for (; i + 16 <= rowLen; i += 16) {
        const p = x + (<usize>i << 2);
        // |x * inv| <= 127 rounds to at most 127: the saturating narrows never clip.
        const c0 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(p), vinv)));
        const c1 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(p, 16), vinv)));
        const c2 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(p, 32), vinv)));
        const c3 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(p, 48), vinv)));
        v128.store(q + <usize>i, i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(c0, c1), i16x8.narrow_i32x4_s(c2, c3)));
      }
    }
    for (; i < rowLen; i++) store<i8>(q + <usize>i, <i8>code(load<f32>(x + (<usize>i << 2)), inv, amax, div));
  }
}

export function bnb_int8_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  for (let r = 0; r < nrows; r++) {
    const s = load<f32>(argU32(args, A_SCALES) + (<usize>r << 2));
    const q = src + <usize>r * <usize>rowLen;
    const y = dst + (<usize>r * <usize>rowLen << 2);
    let i = 0;
    if (ASC_FEATURE_SIMD) {
      const vs = f32x4.splat(s);
      const vk = f32x4.splat(INV127);
      for (; i + 16 <= rowLen; i += 16) {
        const b = v128.load(q + <usize>i);
        const lo = i16x8.extend_low_i8x16_s(b);
        const hi = i16x8.extend_high_i8x16_s(b);
        const o = y + (<usize>i << 2);
        v128.store(o, f32x4.mul(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(lo)), vs), vk));
        v128.store(o, f32x4.mul(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(lo)), vs), vk), 16);
        v128.store(o, f32x4.mul(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(hi)), vs), vk), 32);
        v128.store(o, f32x4.mul(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(hi)), vs), vk), 48);
      }
    }
    for (; i < rowLen; i++) store<f32>(y + (<usize>i << 2), (<f32>load<i8>(q + <usize>i) * s) * INV127);
  }
}
