// The reference forward's float32 matmul (matmulF32 in src/eval/weights.ts) with its bits: every
// output is one float64 sum over the columns in order, of exact float32 x float32 products,
// rounded to float32 once. SIMD runs two positions per f64x2 (eight at a time, two weight rows
// at once so that eight sums hide the add latency) instead of reordering any one sum.
//
// The host lays out, per call: w, a block of rows x cols weights widened to f64 (exact; a splat
// load per weight instead of load, convert and splat), small enough to stay in L2 while every
// group of positions passes over it; xg, the positions as f64 in groups of eight,
// xg[(g * cols + c) * 8 + j] for position 8g + j (the last group padded), so that a group's
// values for one column are contiguous and a group (cols * 64 bytes) stays in L1/L2; y, rows x n
// f32, row-major by weight row.

// y[r * n + t] = f32(sum over c < cols of w[r * cols + c] * x[t, c]), r < rows, t < n.
export function f32_matmul_exact(w: usize, rows: i32, cols: i32, xg: usize, n: i32, y: usize): void {
  const groups = (n + 7) >> 3;
  for (let g = 0; g < groups; g++) {
    const xs = xg + ((<usize>g * <usize>cols) << 6);
    const t0 = g << 3;
    const m = min(8, n - t0);
    let r = 0;
    if (ASC_FEATURE_SIMD && m == 8) {
      // Two rows at once: each position load serves both rows.
      for (; r + 2 <= rows; r += 2) {
        const wr = w + ((<usize>r * <usize>cols) << 3);
        const wq = wr + (<usize>cols << 3);
        let a0 = f64x2.splat(0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        let p = xs;
        for (let c = 0; c < cols; c++, p += 64) {
          const x0 = v128.load(p), x1 = v128.load(p, 16), x2 = v128.load(p, 32), x3 = v128.load(p, 48);
          const wc = v128.load64_splat(wr + (<usize>c << 3));
          const wd = v128.load64_splat(wq + (<usize>c << 3));
          a0 = f64x2.add(a0, f64x2.mul(wc, x0));
          a1 = f64x2.add(a1, f64x2.mul(wc, x1));
          a2 = f64x2.add(a2, f64x2.mul(wc, x2));
          a3 = f64x2.add(a3, f64x2.mul(wc, x3));
          b0 = f64x2.add(b0, f64x2.mul(wd, x0));
          b1 = f64x2.add(b1, f64x2.mul(wd, x1));
          b2 = f64x2.add(b2, f64x2.mul(wd, x2));
          b3 = f64x2.add(b3, f64x2.mul(wd, x3));
        }
        const o = y + ((<usize>r * <usize>n + <usize>t0) << 2);
        const q = o + (<usize>n << 2);
        v128.store(o, v128.shuffle<f32>(f32x4.demote_f64x2_zero(a0), f32x4.demote_f64x2_zero(a1), 0, 1, 4, 5));
        v128.store(o, v128.shuffle<f32>(f32x4.demote_f64x2_zero(a2), f32x4.demote_f64x2_zero(a3), 0, 1, 4, 5), 16);
        v128.store(q, v128.shuffle<f32>(f32x4.demote_f64x2_zero(b0), f32x4.demote_f64x2_zero(b1), 0, 1, 4, 5));
        v128.store(q, v128.shuffle<f32>(f32x4.demote_f64x2_zero(b2), f32x4.demote_f64x2_zero(b3), 0, 1, 4, 5), 16);
      }
    }
    for (; r < rows; r++) {
      const wr = w + ((<usize>r * <usize>cols) << 3);
      const o = y + ((<usize>r * <usize>n + <usize>t0) << 2);
      if (ASC_FEATURE_SIMD) {
        let a0 = f64x2.splat(0), a1 = a0, a2 = a0, a3 = a0;
        let p = xs;
        for (let c = 0; c < cols; c++, p += 64) {
          const wc = v128.load64_splat(wr + (<usize>c << 3));
          a0 = f64x2.add(a0, f64x2.mul(wc, v128.load(p)));
          a1 = f64x2.add(a1, f64x2.mul(wc, v128.load(p, 16)));
          a2 = f64x2.add(a2, f64x2.mul(wc, v128.load(p, 32)));
          a3 = f64x2.add(a3, f64x2.mul(wc, v128.load(p, 48)));
        }
        if (m == 8) {
          v128.store(o, v128.shuffle<f32>(f32x4.demote_f64x2_zero(a0), f32x4.demote_f64x2_zero(a1), 0, 1, 4, 5));
          v128.store(o, v128.shuffle<f32>(f32x4.demote_f64x2_zero(a2), f32x4.demote_f64x2_zero(a3), 0, 1, 4, 5), 16);
        } else {
          // The last, partial group: its padded positions are computed and dropped.
          for (let j = 0; j < m; j++) {
            const v = j < 2 ? a0 : j < 4 ? a1 : j < 6 ? a2 : a3;
            store<f32>(o + (<usize>j << 2), <f32>((j & 1) == 0 ? f64x2.extract_lane(v, 0) : f64x2.extract_lane(v, 1)));
          }
        }
      } else {
        for (let j = 0; j < m; j++) {
          let a: f64 = 0;
          let p = xs + (<usize>j << 3);
          for (let c = 0; c < cols; c++, p += 64) a += load<f64>(wr + (<usize>c << 3)) * load<f64>(p);
          store<f32>(o + (<usize>j << 2), <f32>a);
        }
      }
    }
  }
}
