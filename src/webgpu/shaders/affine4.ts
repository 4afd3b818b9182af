// Affine int4 group-wise (MLX style, assembly/int/affine.ts, bits 4, minmax calibration).
// Sections: codes (byte j = code 2j low nibble | code 2j+1 high), fp16 scales at P.off1, fp16
// biases at P.off2, one per group of P.group. Dequantize, one invocation per group:
// f32(s * q) + b (the product is exact: an fp16 times a 4-bit integer).
// Quantize: lo/hi = min/max (+0 for a zero), bias = largest fp16 <= lo, scale = smallest fp16 >=
// (hi - bias)/15, codes clamp(round_half_even((x - bias) / scale), 0, 15) against the stored fp16s.
export const AFFINE4_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let k = item(gid);
  if (k >= P.n) { return; }
  let g = P.group;
  let s = bitcast<f32>(h2f(ld16(P.off1 + 2u * k)));
  let bb = bitcast<f32>(h2f(ld16(P.off2 + 2u * k)));
  let q0 = k * (g >> 1u);
  for (var i = 0u; i < g; i = i + 2u) {
    let c = ld8(q0 + (i >> 1u));
    dst[k * g + i] = bitcast<u32>(s * f32(c & 15u) + bb);
    dst[k * g + i + 1u] = bitcast<u32>(s * f32(c >> 4u) + bb);
  }
}
`;

export const AFFINE4_QUANT = /* wgsl */ `
fn f16_down(v: u32) -> u32 {
  let ax = v & ABS;
  if (ax >= 0x38800000u && ax <= 0x477fe000u) {
    let t = ((v >> 16u) & 0x8000u) | ((ax - 0x38000000u) >> 13u);
    if ((v >> 31u) != 0u && (ax & 0x1fffu) != 0u) { return t + 1u; }
    return t;
  }
  var h = f2h(v);
  if (f_gt(h2f(h), v)) {
    if ((h & 0x7fffu) == 0u) { h = 0x8001u; } else if ((h & 0x8000u) != 0u) { h = h + 1u; } else { h = h - 1u; }
  }
  if (h == 0xfc00u) { return 0xfbffu; }
  return h;
}
fn f16_up(v: u32) -> u32 {
  let ax = v & ABS;
  if (ax >= 0x38800000u && ax <= 0x477fe000u) {
    let t = ((v >> 16u) & 0x8000u) | ((ax - 0x38000000u) >> 13u);
    if ((v >> 31u) == 0u && (ax & 0x1fffu) != 0u) { return t + 1u; }
    return t;
  }
  var h = f2h(v);
  if (f_lt(h2f(h), v)) {
    if ((h & 0x7fffu) == 0u) { h = 0x0001u; } else if ((h & 0x8000u) != 0u) { h = h - 1u; } else { h = h + 1u; }
  }
  if (h == 0x7c00u) { return 0x7bffu; }
  return h;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let k = item(gid);
  if (k >= P.n) { return; }
  let g = P.group;
  let x0 = k * g;
  var lo = src[x0];
  var hi = lo;
  for (var i = 1u; i < g; i = i + 1u) {
    let v = src[x0 + i];
    if (f_lt(v, lo)) { lo = v; }
    if (f_gt(v, hi)) { hi = v; }
  }
  // The wasm stores lo + 0 and hi + 0: -0 becomes +0.
  if (f_is_zero(lo)) { lo = 0u; }
  if (f_is_zero(hi)) { hi = 0u; }
  let bh = f16_down(lo);
  let sh = f16_up(f_div(f_sub(hi, h2f(bh)), 0x41700000u)); // / 15
  st16(P.off1 + 2u * k, sh);
  st16(P.off2 + 2u * k, bh);
  let s = h2f(sh);
  let bb = h2f(bh);
  if (f_is_zero(s)) { return; }
  for (var i = 0u; i < g; i = i + 2u) {
    let a = round_even(f_min(f_max(f_div(f_sub(src[x0 + i], bb), s), 0u), 0x41700000u));
    let c = round_even(f_min(f_max(f_div(f_sub(src[x0 + i + 1u], bb), s), 0u), 0x41700000u));
    st8((x0 + i) >> 1u, u32(a) | (u32(c) << 4u));
  }
}
`;
