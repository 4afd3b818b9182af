// Serving matvec for the GGUF block types. The SIMD build's f32-activation path is gguf-simd.ts
// (codes to f32 lanes in registers). Here: the scalar build, and both builds' int8-activation
// path: each block is decoded into signed byte codes (CODES, or the block's own bytes for Q8_0)
// plus a scale and a min per 16 values (value = sc*q - mn, the same f32 products the dequantizers
// form), then dotted with x (common.ts: rowAddBlock / rowAddBlockQ8).
// Layouts: see the comments at the top of each assembly/gguf/<type>.ts.
import { A_FLAGS, A_SCRATCH, argI32, argU32, f16ToF32 } from '../common';
import { q3Scale } from '../gguf/q3_k';
import { k4Min, k4Scale } from '../gguf/q4_k';
import { q6Code, q6Quarter } from '../gguf/q6_k';
import { CODES, SERVE_Q8_ACT, quantizeX, rowAddBlock, rowAddBlockQ8, rowBegin, rowEnd, setSc, sums32, xSums16 } from './common';
import { IQ4_NL, IQ4_XS, KV, Q2_K, Q3_K, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0, ggufRowsSimd, hi5 } from './gguf-simd';
import { transposeX16 } from './simd';
import { ggufRowsQ8 } from './gguf-q8';

@inline function set2(s: f32, m: f32): void {
  setSc(0, s, m);
  setSc(1, s, m);
}

// 16 nibbles (low half or high half of 16 bytes at q) into CODES + o, minus `off`, or through KV.
@inline function nibbles(q: usize, high: bool, off: i32, o: usize, kv: bool): void {
  if (ASC_FEATURE_SIMD) {
    const b = v128.load(q);
    let c = high ? i8x16.shr_u(b, 4) : v128.and(b, i8x16.splat(15));
    c = kv ? i8x16.swizzle(v128.load(KV), c) : i8x16.sub(c, i8x16.splat(<i8>off));
    v128.store(CODES + o, c);
  } else {
    for (let j: usize = 0; j < 16; j++) {
      const v = <i32>load<u8>(q + j);
      const n = high ? v >> 4 : v & 15;
      store<i8>(CODES + o + j, kv ? load<i8>(KV + <usize>n) : <i8>(n - off));
    }
  }
}

// Q5_0 / Q5_1: 32 codes from qs (16 bytes) and the 32 high bits qh, minus off.
@inline function five(qs: usize, qh: u32, off: i32): void {
  if (ASC_FEATURE_SIMD) {
    const b = v128.load(qs);
    const o = i8x16.splat(<i8>off);
    v128.store(CODES, i8x16.sub(v128.or(v128.and(b, i8x16.splat(15)), hi5(qh, 0)), o));
    v128.store(CODES + 16, i8x16.sub(v128.or(i8x16.shr_u(b, 4), hi5(qh, 1)), o));
  } else {
    for (let j: u32 = 0; j < 16; j++) {
      const q = <i32>load<u8>(qs + <usize>j);
      store<i8>(CODES + <usize>j, <i8>(((q & 15) | (<i32>((qh >> j) & 1) << 4)) - off));
      store<i8>(CODES + 16 + <usize>j, <i8>(((q >> 4) | (<i32>((qh >> (j + 16)) & 1) << 4)) - off));
    }
  }
}

// Decodes one block; returns the pointer to its codes.
@inline function decode(kind: i32, blk: usize): usize {
  switch (kind) {
    case Q8_0: {
      set2(f16ToF32(<u32>load<u16>(blk)), 0);
      return blk + 2;
    }
    case Q4_0: {
      set2(f16ToF32(<u32>load<u16>(blk)), 0);
      nibbles(blk + 2, false, 8, 0, false);
      nibbles(blk + 2, true, 8, 16, false);
      return CODES;
    }
    case Q4_1: {
      set2(f16ToF32(<u32>load<u16>(blk)), -f16ToF32(<u32>load<u16>(blk, 2)));
      nibbles(blk + 4, false, 0, 0, false);
      nibbles(blk + 4, true, 0, 16, false);
      return CODES;
    }
    case Q5_0: {
      set2(f16ToF32(<u32>load<u16>(blk)), 0);
      five(blk + 6, load<u32>(blk, 2), 16);
      return CODES;
    }
    case Q5_1: {
      set2(f16ToF32(<u32>load<u16>(blk)), -f16ToF32(<u32>load<u16>(blk, 2)));
      five(blk + 8, load<u32>(blk, 4), 0);
      return CODES;
    }
    case IQ4_NL: {
      set2(f16ToF32(<u32>load<u16>(blk)), 0);
      nibbles(blk + 2, false, 0, 0, true);
      nibbles(blk + 2, true, 0, 16, true);
      return CODES;
    }
    case IQ4_XS: {
      const d = f16ToF32(<u32>load<u16>(blk));
      const sh = <u32>load<u16>(blk, 2);
      for (let ib = 0; ib < 8; ib++) {
        const ls = ((<u32>load<u8>(blk + 4 + <usize>(ib >> 1)) >> (<u32>(ib & 1) << 2)) & 15) | (((sh >> (<u32>ib << 1)) & 3) << 4);
        const dl: f32 = d * <f32>(<i32>ls - 32);
        setSc(2 * ib, dl, 0);
        setSc(2 * ib + 1, dl, 0);
        nibbles(blk + 8 + (<usize>ib << 4), false, 0, <usize>ib << 5, true);
        nibbles(blk + 8 + (<usize>ib << 4), true, 0, (<usize>ib << 5) + 16, true);
      }
      return CODES;
    }
    case Q2_K: {
      const d = f16ToF32(<u32>load<u16>(blk + 80));
      const dmin = f16ToF32(<u32>load<u16>(blk + 82));
      for (let g = 0; g < 16; g++) {
        const s = <u32>load<u8>(blk + <usize>g);
        setSc(g, d * <f32>(s & 15), dmin * <f32>(s >> 4));
      }
      for (let h = 0; h < 2; h++) {
        for (let k = 0; k < 2; k++) {
          const q = blk + 16 + (<usize>h << 5) + (<usize>k << 4);
          for (let j = 0; j < 4; j++) {
            const o = <usize>(128 * h + 32 * j + 16 * k);
            if (ASC_FEATURE_SIMD) {
              v128.store(CODES + o, v128.and(i8x16.shr_u(v128.load(q), 2 * j), i8x16.splat(3)));
            } else {
              for (let l: usize = 0; l < 16; l++) store<u8>(CODES + o + l, <u8>((<u32>load<u8>(q + l) >> (2 * j)) & 3));
            }
          }
        }
      }
      return CODES;
    }
    case Q3_K: {
      const d = f16ToF32(<u32>load<u16>(blk + 108));
      const sc = blk + 96;
      for (let g = 0; g < 16; g++) setSc(g, d * <f32>q3Scale(sc, g), 0);
      for (let h = 0; h < 2; h++) {
        for (let k = 0; k < 2; k++) {
          const q = blk + 32 + (<usize>h << 5) + (<usize>k << 4);
          const hm = blk + (<usize>k << 4);
          for (let j = 0; j < 4; j++) {
            const o = <usize>(128 * h + 32 * j + 16 * k);
            const hb = 4 * h + j;
            if (ASC_FEATURE_SIMD) {
              const low = v128.and(i8x16.shr_u(v128.load(q), 2 * j), i8x16.splat(3));
              const hbit = v128.and(i8x16.shr_u(v128.load(hm), hb), i8x16.splat(1));
              v128.store(CODES + o, i8x16.sub(low, i8x16.sub(i8x16.splat(4), i8x16.shl(hbit, 2))));
            } else {
              for (let l: usize = 0; l < 16; l++) {
                const low = <i32>((<u32>load<u8>(q + l) >> (2 * j)) & 3);
                const hbit = (<u32>load<u8>(hm + l) >> hb) & 1;
                store<i8>(CODES + o + l, <i8>(low - (hbit != 0 ? 0 : 4)));
              }
            }
          }
        }
      }
      return CODES;
    }
    case Q4_K:
    case Q5_K: {
      const d = f16ToF32(<u32>load<u16>(blk));
      const dmin = f16ToF32(<u32>load<u16>(blk + 2));
      const sc = blk + 4;
      const isQ5 = kind == Q5_K;
      const qs = isQ5 ? blk + 48 : blk + 16;
      const qh = blk + 16;
      for (let j = 0; j < 8; j++) {
        const s: f32 = d * <f32>k4Scale(sc, j);
        const m: f32 = dmin * <f32>k4Min(sc, j);
        setSc(2 * j, s, m);
        setSc(2 * j + 1, s, m);
      }
      for (let c = 0; c < 4; c++) {
        const qc = qs + (<usize>c << 5);
        for (let h = 0; h < 2; h++) {
          const o = <usize>(64 * c + 16 * h);
          const q = qc + (<usize>h << 4);
          const hq = qh + (<usize>h << 4);
          if (ASC_FEATURE_SIMD) {
            const b = v128.load(q);
            let lo = v128.and(b, i8x16.splat(15));
            let hi = i8x16.shr_u(b, 4);
            if (isQ5) {
              const hb = v128.load(hq);
              const bit = i8x16.splat(16);
              lo = v128.or(lo, v128.and(i8x16.shl(i8x16.shr_u(hb, 2 * c), 4), bit));
              hi = v128.or(hi, v128.and(i8x16.shl(i8x16.shr_u(hb, 2 * c + 1), 4), bit));
            }
            v128.store(CODES + o, lo);
            v128.store(CODES + o + 32, hi);
          } else {
            for (let l: usize = 0; l < 16; l++) {
              const v = <u32>load<u8>(q + l);
              let lo = v & 15;
              let hi = v >> 4;
              if (isQ5) {
                const hb = <u32>load<u8>(hq + l);
                lo |= ((hb >> (2 * c)) & 1) << 4;
                hi |= ((hb >> (2 * c + 1)) & 1) << 4;
              }
              store<u8>(CODES + o + l, <u8>lo);
              store<u8>(CODES + o + 32 + l, <u8>hi);
            }
          }
        }
      }
      return CODES;
    }
    default: {
      // Q6_K: element 128h + 32t + 16k + l, scale index 8h + 2t + k = its group of 16.
      const d = f16ToF32(<u32>load<u16>(blk + 208));
      for (let g = 0; g < 16; g++) setSc(g, d * <f32>load<i8>(blk + 192 + <usize>g), 0);
      for (let h = 0; h < 2; h++) {
        const ql = blk + (<usize>h << 6);
        const qh = blk + 128 + (<usize>h << 5);
        const y = CODES + (<usize>h << 7);
        for (let k = 0; k < 2; k++) {
          const o = <usize>k << 4;
          if (ASC_FEATURE_SIMD) {
            const a = v128.load(ql + o);
            const bq = v128.load(ql + 32 + o);
            const hb = v128.load(qh + o);
            v128.store(y + o, q6Quarter(a, bq, hb, 0));
            v128.store(y + 32 + o, q6Quarter(a, bq, hb, 1));
            v128.store(y + 64 + o, q6Quarter(a, bq, hb, 2));
            v128.store(y + 96 + o, q6Quarter(a, bq, hb, 3));
          } else {
            for (let l: usize = o; l < o + 16; l++) {
              const a = <u32>load<u8>(ql + l);
              const bq = <u32>load<u8>(ql + 32 + l);
              const hb = <u32>load<u8>(qh + l);
              store<i8>(y + l, <i8>q6Code(a, bq, hb, 0));
              store<i8>(y + 32 + l, <i8>q6Code(a, bq, hb, 1));
              store<i8>(y + 64 + l, <i8>q6Code(a, bq, hb, 2));
              store<i8>(y + 96 + l, <i8>q6Code(a, bq, hb, 3));
            }
          }
        }
      }
      return CODES;
    }
  }
}

@inline export function matvec(kind: i32, block: i32, bytes: i32, hasMin: bool, w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  const nb = rowLen / block;
  const n16 = block >> 4;
  if (argI32(args, A_FLAGS) & SERVE_Q8_ACT) {
    const xs = quantizeX(x, rowLen, args);
    if (ASC_FEATURE_SIMD) {
      // scratch after quantizeX's [x^ sums][dx][xq]: [x^ sums per 32][sub-block scales][scale * dx]
      const xs32 = (xs + (<usize>(rowLen >> 4) << 3) + (<usize>rowLen << 1) + 15) & ~(<usize>15);
      sums32(xs, rowLen, xs32);
      const sc = xs32 + (<usize>(rowLen >> 5) << 2);
      ggufRowsQ8(kind, block, bytes, hasMin, w, nrows, rowLen, y, xs, xs32, sc, sc + (<usize>(rowLen >> 4) << 2));
      return;
    }
    for (let r = 0; r < nrows; r++) {
      const row = w + <usize>r * <usize>nb * <usize>bytes;
      rowBegin();
      for (let b = 0; b < nb; b++) rowAddBlockQ8(decode(kind, row + <usize>b * <usize>bytes), n16, b * block, xs, rowLen, hasMin);
      store<f32>(y + (<usize>r << 2), rowEnd());
    }
    return;
  }
  // the SIMD Q6_K kernel dots unsigned codes and subtracts 32 (x sum) per 16 (gguf-simd.ts halfQ6)
  const xs = hasMin || (ASC_FEATURE_SIMD && kind == Q6_K) ? xSums16(x, rowLen, args) : 0;
  if (ASC_FEATURE_SIMD) {
    // scratch: [x sums per 16][per 32][x transposed per 16 (simd.ts)][a row's sub-block scales]
    const xs32 = argU32(args, A_SCRATCH) + (<usize>(rowLen >> 4) << 2);
    if (hasMin) sums32(xs, rowLen, xs32);
    const xt = (xs32 + (<usize>(rowLen >> 5) << 2) + 15) & ~(<usize>15);
    transposeX16(x, rowLen, xt);
    ggufRowsSimd(kind, block, bytes, hasMin, w, nrows, rowLen, xt, y, xs, xs32, xt + (<usize>rowLen << 2));
    return;
  }
  for (let r = 0; r < nrows; r++) {
    const row = w + <usize>r * <usize>nb * <usize>bytes;
    rowBegin();
    for (let b = 0; b < nb; b++) {
      const c = decode(kind, row + <usize>b * <usize>bytes);
      const e = <usize>b * <usize>block;
      rowAddBlock(c, n16, x + (e << 2), hasMin ? xs + (e >> 2) : 0);
    }
    store<f32>(y + (<usize>r << 2), rowEnd());
  }
}

export function q8_0_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec(Q8_0, 32, 34, false, w, nrows, rowLen, x, y, args);
}
export function q4_0_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec(Q4_0, 32, 18, false, w, nrows, rowLen, x, y, args);
}
export function q4_1_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec(Q4_1, 32, 20, true, w, nrows, rowLen, x, y, args);
}
export function q5_0_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec(Q5_0, 32, 22, false, w, nrows, rowLen, x, y, args);
}
export function q5_1_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec(Q5_1, 32, 24, true, w, nrows, rowLen, x, y, args);
}
export function iq4_nl_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec(IQ4_NL, 32, 18, false, w, nrows, rowLen, x, y, args);
}
export function iq4_xs_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec(IQ4_XS, 256, 136, false, w, nrows, rowLen, x, y, args);
}
export function q2_k_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec(Q2_K, 256, 84, true, w, nrows, rowLen, x, y, args);
}
export function q3_k_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec(Q3_K, 256, 110, false, w, nrows, rowLen, x, y, args);
}
export function q4_k_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec(Q4_K, 256, 144, true, w, nrows, rowLen, x, y, args);
}
export function q5_k_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec(Q5_K, 256, 176, true, w, nrows, rowLen, x, y, args);
}
export function q6_k_matvec(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize): void {
  matvec(Q6_K, 256, 210, false, w, nrows, rowLen, x, y, args);
}
