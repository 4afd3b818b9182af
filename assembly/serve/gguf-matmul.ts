// The GGUF formats' batched serving kernels (<fmt>_matmul): the drivers over gguf-batch.ts's
// decoders and dots, falling back to gguf.ts matvec per position.
import { A_FLAGS, A_SCRATCH, argI32, argU32 } from '../common';
import { SERVE_Q8_ACT, hsum, sums16, sums32 } from './common';
import { IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0, rowScales } from './gguf-simd';
import { MIN_BYTES, decode256F, decode32F, rowDot256F, rowDot32F, rowDot32FMin, rowMin256 } from './gguf-batch';
import { matvec } from './gguf';
import { halfToF32, transposeX16 } from './simd';

// Several positions at once, each result matvec's bits:
//   <fmt>_matmul(w, nrows, rowLen, x, y, args, batch, yStride): y[b*yStride + r] = row r . x[b].
// SIMD with f32 activations: the positions are transposed once, then the rows go a block at a
// time: each row's codes are converted to f32 once (gguf-batch.ts) and dotted with every position
// in ggufRowsSimd's order, the block's converted codes staying in L2 while the positions pass,
// instead of every position decoding every row again. The scalar build and int8 activations run
// matvec per position. The host sizes the scratch (src/serve, matmulScratch).
const ROWS_F_BYTES = 256 << 10;
@inline function matvecEach(kind: i32, block: i32, bytes: i32, hasMin: bool, w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  for (let b = 0; b < batch; b++) {
    matvec(kind, block, bytes, hasMin, w, nrows, rowLen, x + ((<usize>b * <usize>rowLen) << 2), y + ((<usize>b * <usize>yStride) << 2), args);
  }
}

// 32-value formats. Scratch: [positions transposed: batch * rowLen f32][Q4_1 / Q5_1: per
// position, x sums per 16][a block of rows' converted codes, 128 bytes a block][their scales, one
// f32 a block][Q4_1 / Q5_1: their mins, one f32 a block].
function matmul32(kind: i32, bytes: i32, w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  const hasMin = kind == Q4_1 || kind == Q5_1;
  if (!ASC_FEATURE_SIMD || (argI32(args, A_FLAGS) & SERVE_Q8_ACT) != 0) {
    matvecEach(kind, 32, bytes, hasMin, w, nrows, rowLen, x, y, args, batch, yStride);
    return;
  }
  const nb = rowLen >> 5;
  const xt = (argU32(args, A_SCRATCH) + 15) & ~(<usize>15);
  const xBytes = <usize>rowLen << 2;
  const sumBytes = hasMin ? <usize>(rowLen >> 4) << 2 : 0;
  const sums = xt + <usize>batch * xBytes;
  for (let b = 0; b < batch; b++) {
    transposeX16(x + <usize>b * xBytes, rowLen, xt + <usize>b * xBytes);
    if (hasMin) sums16(x + <usize>b * xBytes, rowLen, sums + <usize>b * sumBytes);
  }
  const cf = (sums + <usize>batch * sumBytes + 15) & ~(<usize>15);
  const rowF = <usize>nb << 7;
  const per = max(1, <i32>(<usize>ROWS_F_BYTES / rowF));
  const ds = cf + <usize>per * rowF;
  const ms = ds + ((<usize>per * <usize>nb) << 2);
  for (let r0 = 0; r0 < nrows; r0 += per) {
    const n = min(per, nrows - r0);
    for (let r = 0; r < n; r++) {
      const row = w + <usize>(r0 + r) * <usize>nb * <usize>bytes;
      for (let k = 0; k < nb; k++) {
        const i = <usize>r * <usize>nb + <usize>k;
        const blk = row + <usize>k * <usize>bytes;
        store<f32>(ds + (i << 2), decode32F(kind, blk, cf + (i << 7)));
        if (hasMin) store<f32>(ms + (i << 2), halfToF32(<u32>load<u16>(blk, 2)));
      }
    }
    for (let b = 0; b < batch; b++) {
      const xb = xt + <usize>b * xBytes;
      const yb = y + ((<usize>b * <usize>yStride + <usize>r0) << 2);
      for (let r = 0; r < n; r++) {
        const c = cf + <usize>r * rowF;
        const o = (<usize>r * <usize>nb) << 2;
        store<f32>(yb + (<usize>r << 2), hasMin ? rowDot32FMin(c, ds + o, ms + o, sums + <usize>b * sumBytes, nb, xb) : rowDot32F(c, ds + o, nb, xb));
      }
    }
  }
}
// The 256-value formats. Scratch: [positions transposed][per position: x sums per 16, then per
// 32 (as matvec forms them)][a block of rows' converted codes, 1 KiB a super-block][their
// sub-block scales, rowLen / 16 f32 a row][their min factors, MIN_BYTES a super-block].
function matmul256(kind: i32, bytes: i32, w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  if (!ASC_FEATURE_SIMD || (argI32(args, A_FLAGS) & SERVE_Q8_ACT) != 0) {
    matvecEach(kind, 256, bytes, kind == Q2_K || kind == Q4_K || kind == Q5_K, w, nrows, rowLen, x, y, args, batch, yStride);
    return;
  }
  const nb = rowLen >> 8;
  const n16 = rowLen >> 4;
  const n32 = rowLen >> 5;
  const xt = (argU32(args, A_SCRATCH) + 15) & ~(<usize>15);
  const xBytes = <usize>rowLen << 2;
  const sumBytes = <usize>(n16 + n32) << 2;
  const sums = xt + <usize>batch * xBytes;
  for (let b = 0; b < batch; b++) {
    const xb = x + <usize>b * xBytes;
    transposeX16(xb, rowLen, xt + <usize>b * xBytes);
    const s16 = sums + <usize>b * sumBytes;
    sums16(xb, rowLen, s16);
    sums32(s16, rowLen, s16 + (<usize>n16 << 2));
  }
  const cf = (sums + <usize>batch * sumBytes + 15) & ~(<usize>15);
  const per = max(1, <i32>(<usize>ROWS_F_BYTES / xBytes));
  const scs = cf + <usize>per * xBytes;
  const scBytes = <usize>n16 << 2;
  const mins = scs + <usize>per * scBytes;
  const minBytes = <usize>nb * MIN_BYTES;
  for (let r0 = 0; r0 < nrows; r0 += per) {
    const n = min(per, nrows - r0);
    for (let r = 0; r < n; r++) {
      const row = w + <usize>(r0 + r) * <usize>nb * <usize>bytes;
      // the scales only (the min term it also returns is per position: rowMin256)
      rowScales(kind, row, nb, bytes, scs + <usize>r * scBytes, sums, sums + (<usize>n16 << 2));
      for (let k = 0; k < nb; k++) {
        decode256F(kind, row + <usize>k * <usize>bytes, cf + <usize>r * xBytes + (<usize>k << 10), mins + <usize>r * minBytes + <usize>k * MIN_BYTES);
      }
    }
    for (let b = 0; b < batch; b++) {
      const xb = xt + <usize>b * xBytes;
      const s16 = sums + <usize>b * sumBytes;
      const yb = y + ((<usize>b * <usize>yStride + <usize>r0) << 2);
      for (let r = 0; r < n; r++) {
        const sc = scs + <usize>r * scBytes;
        const mn = -rowMin256(kind, nb, sc, mins + <usize>r * minBytes, s16, s16 + (<usize>n16 << 2));
        store<f32>(yb + (<usize>r << 2), hsum(f32x4.add(rowDot256F(kind, nb, cf + <usize>r * xBytes, sc, xb), f32x4.splat(0))) + mn);
      }
    }
  }
}
export function q8_0_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul32(Q8_0, 34, w, nrows, rowLen, x, y, args, batch, yStride);
}
export function q4_0_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul32(Q4_0, 18, w, nrows, rowLen, x, y, args, batch, yStride);
}
export function q5_0_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul32(Q5_0, 22, w, nrows, rowLen, x, y, args, batch, yStride);
}
export function iq4_nl_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul32(IQ4_NL, 18, w, nrows, rowLen, x, y, args, batch, yStride);
}

export function q4_1_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul32(Q4_1, 20, w, nrows, rowLen, x, y, args, batch, yStride);
}
export function q5_1_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul32(Q5_1, 24, w, nrows, rowLen, x, y, args, batch, yStride);
}
export function iq4_xs_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul256(IQ4_XS, 136, w, nrows, rowLen, x, y, args, batch, yStride);
}
export function q2_k_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul256(Q2_K, 84, w, nrows, rowLen, x, y, args, batch, yStride);
}
export function q3_k_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul256(Q3_K, 110, w, nrows, rowLen, x, y, args, batch, yStride);
}
export function q4_k_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul256(Q4_K, 144, w, nrows, rowLen, x, y, args, batch, yStride);
}
export function q5_k_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul256(Q5_K, 176, w, nrows, rowLen, x, y, args, batch, yStride);
}
export function q6_k_matmul(w: usize, nrows: i32, rowLen: i32, x: usize, y: usize, args: usize, batch: i32, yStride: i32): void {
  matmul256(Q6_K, 210, w, nrows, rowLen, x, y, args, batch, yStride);
}
