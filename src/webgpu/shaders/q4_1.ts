// Q4_1 (spec §3): fp16 d, fp16 m, 16 bytes (nibble order of Q4_0). Dequantize q * d + m.
// Quantize (reference path): first min / max in element order, d = (max - min)/15,
// codes min(15, trunc((x - min) * (1/d) + 0.5)); 1/d = inf gives codes 0.
export const Q4_1_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 20u;
  let d = bitcast<f32>(h2f(ld16(base)));
  let m = bitcast<f32>(h2f(ld16(base + 2u)));
  for (var j = 0u; j < 16u; j = j + 1u) {
    let q = ld8(base + 4u + j);
    dst[b * 32u + j] = bitcast<u32>(f32(q & 15u) * d + m);
    dst[b * 32u + j + 16u] = bitcast<u32>(f32(q >> 4u) * d + m);
  }
}
`;

export const Q4_1_QUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let x0 = b * 32u;
  var mn = src[x0];
  var mx = mn;
  for (var i = 1u; i < 32u; i = i + 1u) {
    let v = src[x0 + i];
    if (f_lt(v, mn)) { mn = v; }
    if (f_gt(v, mx)) { mx = v; }
  }
  let d = f_div(f_sub(mx, mn), 0x41700000u); // 15
  var id = 0u;
  if (!f_is_zero(d)) { id = f_div(F_ONE, d); }
  let y = b * 20u;
  st16(y, f2h(d));
  st16(y + 2u, f2h(mn));
  if (id == F_INF) { return; }
  for (var j = 0u; j < 16u; j = j + 1u) {
    let a = min(15, trunc_x86(f_add(f_mul(f_sub(src[x0 + j], mn), id), 0x3f000000u)));
    let c = min(15, trunc_x86(f_add(f_mul(f_sub(src[x0 + j + 16u], mn), id), 0x3f000000u)));
    st8(y + 4u + j, u32(a) | (u32(c) << 4u));
  }
}
`;
