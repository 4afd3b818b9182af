// The reference forward's attention products (src/eval/attention.ts), float64 as there and in the
// same order, so the results are its bits: each score is one sum over the head's dimensions in
// order, each output dimension one sum over positions in order. SIMD runs several independent
// sums side by side (two per f64x2) instead of reordering any one of them.
//
// The host lays out, per call of attention over n positions:
//   kT: keys transposed, f64, kT[(kvHead * hd + i) * n + s], so that positions are contiguous;
//   vf: values as f64 in their own layout, vf[s * vStride + kvHead * vd + i];
//   scores: n f64 indexed by position.

// scores[s] = (sum over i < hd of q[i] * kT[i * n + s]) * scale, for s = s0..t; q: hd f32.
export function attn_scores(q: usize, kT: usize, n: i32, s0: i32, t: i32, hd: i32, scale: f64, scores: usize): void {
  const row = <usize>n << 3;
  let s = s0;
  if (ASC_FEATURE_SIMD) {
    for (; s + 8 <= t + 1; s += 8) {
      let a0 = f64x2.splat(0), a1 = a0, a2 = a0, a3 = a0;
      let p = kT + (<usize>s << 3);
      for (let i = 0; i < hd; i++, p += row) {
        const qi = f64x2.splat(<f64>load<f32>(q + (<usize>i << 2)));
        a0 = f64x2.add(a0, f64x2.mul(qi, v128.load(p)));
        a1 = f64x2.add(a1, f64x2.mul(qi, v128.load(p, 16)));
        a2 = f64x2.add(a2, f64x2.mul(qi, v128.load(p, 32)));
        a3 = f64x2.add(a3, f64x2.mul(qi, v128.load(p, 48)));
      }
      const vs = f64x2.splat(scale);
      const o = scores + (<usize>s << 3);
      v128.store(o, f64x2.mul(a0, vs));
      v128.store(o, f64x2.mul(a1, vs), 16);
      v128.store(o, f64x2.mul(a2, vs), 32);
      v128.store(o, f64x2.mul(a3, vs), 48);
    }
  }
  for (; s <= t; s++) {
    let a: f64 = 0;
    let p = kT + (<usize>s << 3);
    for (let i = 0; i < hd; i++, p += row) a += <f64>load<f32>(q + (<usize>i << 2)) * load<f64>(p);
    store<f64>(scores + (<usize>s << 3), a * scale);
  }
}

// out[i] = f32((sum over s = s0..t of w[s] * vf[s * vStride + i]) / sum), i < vd; w: the
// softmax numerators (f64, indexed by position), vf: this head's first value.
export function attn_values(w: usize, vf: usize, s0: i32, t: i32, vd: i32, vStride: i32, sum: f64, out: usize): void {
  const row = <usize>vStride << 3;
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    for (; i + 8 <= vd; i += 8) {
      let a0 = f64x2.splat(0), a1 = a0, a2 = a0, a3 = a0;
      let p = vf + (<usize>i << 3) + <usize>s0 * row;
      for (let s = s0; s <= t; s++, p += row) {
        const ws = v128.load64_splat(w + (<usize>s << 3));
        a0 = f64x2.add(a0, f64x2.mul(ws, v128.load(p)));
        a1 = f64x2.add(a1, f64x2.mul(ws, v128.load(p, 16)));
        a2 = f64x2.add(a2, f64x2.mul(ws, v128.load(p, 32)));
        a3 = f64x2.add(a3, f64x2.mul(ws, v128.load(p, 48)));
      }
      const vs = f64x2.splat(sum);
      const o = out + (<usize>i << 2);
      v128.store64_lane(o, f32x4.demote_f64x2_zero(f64x2.div(a0, vs)), 0);
      v128.store64_lane(o, f32x4.demote_f64x2_zero(f64x2.div(a1, vs)), 0, 8);
      v128.store64_lane(o, f32x4.demote_f64x2_zero(f64x2.div(a2, vs)), 0, 16);
      v128.store64_lane(o, f32x4.demote_f64x2_zero(f64x2.div(a3, vs)), 0, 24);
    }
  }
  for (; i < vd; i++) {
    let a: f64 = 0;
    let p = vf + (<usize>i << 3) + <usize>s0 * row;
    for (let s = s0; s <= t; s++, p += row) a += load<f64>(w + (<usize>s << 3)) * load<f64>(p);
    store<f32>(out + (<usize>i << 2), <f32>(a / sum));
  }
}
