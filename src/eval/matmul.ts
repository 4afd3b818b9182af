// The reference forward's float32 matmul in wasm (assembly/serve/matmul64.ts) with the bits of
// matmulF32 (llama.ts), which stays beside it as the reference the tests compare it with: every
// output is one float64 sum over the columns in order, rounded to float32 once.
//
// The weights stay in JavaScript; each call copies a block of rows at a time into the kernels'
// memory, widened to float64 (a copy per weight per window of positions: small beside the n
// multiply-adds per weight), so the wasm memory holds one block, the positions as float64, and
// the block's output.
import type { Kernels } from '../kernels/loader.js';

/** Bytes of a block of rows (as float64) in wasm memory: stays in L2 while the groups pass. */
const BLOCK_BYTES = 512 << 10;

/** Y[t, r] = sum_c W[r, c] X[t, c] for n positions, as matmulF32: W [rows, cols], X [n, cols], Y [n, rows]. */
export function matmulExact(k: Kernels, w: Float32Array, rows: number, cols: number, x: Float32Array, n: number, y: Float32Array): void {
  if (rows === 0 || n === 0) return;
  const block = Math.max(1, Math.min(rows, Math.floor(BLOCK_BYTES / Math.max(1, cols * 8))));
  const groups = Math.ceil(n / 8);
  const xgBytes = groups * cols * 64, wBytes = block * cols * 8, yBytes = block * n * 4;
  const base = k.reserve(xgBytes + wBytes + yBytes);
  const xgAt = base, wAt = base + xgBytes, yAt = wAt + wBytes;
  const buf = k.buffer;
  // Positions in groups of eight, f64, column by column (see the kernel); the padding is zero.
  const xg = new Float64Array(buf, xgAt, groups * cols * 8).fill(0);
  for (let t = 0; t < n; t++) {
    const o = t * cols, g = (t >> 3) * cols * 8 + (t & 7);
    for (let c = 0; c < cols; c++) xg[g + c * 8] = x[o + c];
  }
  const wv = new Float64Array(buf, wAt, block * cols);
  const yv = new Float32Array(buf, yAt, block * n);
  const fn = k.fn('f32_matmul_exact');
  for (let r0 = 0; r0 < rows; r0 += block) {
    const nr = Math.min(block, rows - r0);
    wv.set(w.subarray(r0 * cols, (r0 + nr) * cols));
    fn(wAt, nr, cols, xgAt, n, yAt);
    for (let r = 0; r < nr; r++) {
      const o = r * n;
      for (let t = 0; t < n; t++) y[t * rows + r0 + r] = yv[o + t];
    }
  }
}
