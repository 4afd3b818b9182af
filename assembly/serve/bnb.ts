// Serving matvec for NF4 / FP4 (absmax per group, optional double-quantized absmax) and FP8
// (E4M3FN / E5M2, f32 scale per row or per tensor). Layouts: assembly/bnb/bnb4.ts, dq.ts, fp8.ts.
// Code-book values are looked up 16 at a time into F16BUF (SIMD: byte-plane swizzles, lut.ts) and
// dotted with x in f32; the group absmax / row scale multiplies each partial sum once.
import { A_AUX, A_FLAGS, A_GROUP, A_SCALES, A_SCRATCH, FLAG_DOUBLE_QUANT, FLAG_PER_TENSOR, argI32, argU32 } from '../common';
import { FP4_TABLE, NF4_TABLE, rowAbsmax } from '../bnb/bnb4';
import { lookupStore16, splitPlanes } from '../bnb/lut';
import { F16BUF, LUT, rowAddF16, rowBegin, rowEnd } from './common';

function matvec4(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, table: usize): void {
  const gs = argI32(args, A_GROUP);
  const dq = (argI32(args, A_FLAGS) & FLAG_DOUBLE_QUANT) != 0;
  const nb = rowLen / gs;
  const am = argU32(args, A_SCRATCH);
  if (ASC_FEATURE_SIMD) splitPlanes(table);
  for (let r = 0; r < nrows; r++) {
    const sc = rowAbsmax(args, r, nb, dq, am);
    const q = w + <usize>r * <usize>(rowLen >> 1);
    rowBegin();
    for (let b = 0; b < nb; b++) {
      const s = load<f32>(sc + (<usize>b << 2));
      for (let i = b * gs; i < (b + 1) * gs; i += 32) {
        const qb = q + (<usize>i >> 1);
        const xb = x + (<usize>i << 2);
        if (ASC_FEATURE_SIMD) {
          const one = f32x4.splat(1);
          const bytes = v128.load(qb);
          const hi = i8x16.shr_u(bytes, 4);
          const lo = v128.and(bytes, i8x16.splat(15));
          lookupStore16(i8x16.shuffle(hi, lo, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), one, F16BUF);
          rowAddF16(F16BUF, s, xb);
          lookupStore16(i8x16.shuffle(hi, lo, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), one, F16BUF);
          rowAddF16(F16BUF, s, xb + 64);
        } else {
          for (let h = 0; h < 2; h++) {
            for (let j = 0; j < 8; j++) {
              const c = <u32>load<u8>(qb + <usize>(8 * h + j));
              store<f32>(F16BUF + (<usize>(2 * j) << 2), load<f32>(table + (<usize>(c >> 4) << 2)));
              store<f32>(F16BUF + (<usize>(2 * j + 1) << 2), load<f32>(table + (<usize>(c & 15) << 2)));
            }
            rowAddF16(F16BUF, s, xb + (<usize>h << 6));
          }
        }
      }
    }
    store<f32>(y + (<usize>r << 2), rowEnd());
  }
}

export function nf4_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec4(w, nrows, rowLen, x, y, args, NF4_TABLE);
}
export function fp4_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec4(w, nrows, rowLen, x, y, args, FP4_TABLE);
}

// FP8 code -> f32 for all 256 codes, as fp8.ts's dequantizer forms them (scale applied later).
function fp8Table(mshift: i32, scaleUp: f32, isE4M3: bool): void {
  const special: u32 = isE4M3 ? 0x7f : 0x7c;
  for (let c: u32 = 0; c < 256; c++) {
    const m = c & 0x7f;
    let v = reinterpret<f32>(m << mshift) * scaleUp;
    if (m >= special) v = isE4M3 || m > special ? NaN : Infinity;
    v = reinterpret<f32>(reinterpret<u32>(v) | ((c & 0x80) << 24));
    store<f32>(LUT + (<usize>c << 2), v);
  }
}

function matvec8(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  const perTensor = (argI32(args, A_FLAGS) & FLAG_PER_TENSOR) != 0;
  for (let r = 0; r < nrows; r++) {
    const s = perTensor ? load<f32>(argU32(args, A_AUX)) : load<f32>(argU32(args, A_SCALES) + (<usize>r << 2));
    const q = w + <usize>r * <usize>rowLen;
    rowBegin();
    let i = 0;
    for (; i + 16 <= rowLen; i += 16) {
      for (let j = 0; j < 16; j++) {
        store<f32>(F16BUF + (<usize>j << 2), load<f32>(LUT + (<usize>load<u8>(q + <usize>(i + j)) << 2)));
      }
      rowAddF16(F16BUF, s, x + (<usize>i << 2));
    }
    let t: f32 = 0;
    for (; i < rowLen; i++) t += load<f32>(LUT + (<usize>load<u8>(q + <usize>i) << 2)) * load<f32>(x + (<usize>i << 2));
    store<f32>(y + (<usize>r << 2), rowEnd() + s * t);
  }
}

export function fp8_e4m3_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  fp8Table(20, reinterpret<f32>(0x7b800000), true);
  matvec8(w, nrows, rowLen, x, y, args);
}
export function fp8_e5m2_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  fp8Table(21, reinterpret<f32>(0x77800000), false);
  matvec8(w, nrows, rowLen, x, y, args);
}
