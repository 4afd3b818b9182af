// Q5_0 (spec §7): fp16 d, qh (u32 LE at 2: bit j = bit 4 of element j), qs[16] at 6 (element j
// low nibble, j+16 high). Dequantize (q - 16) * d. Quantize (reference path, no importance):
// signed absmax `max`, d = max / -16, codes min(31, trunc(x * (1/d) + 16.5)).
export const Q5_0_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 22u;
  let d = bitcast<f32>(h2f(ld16(base)));
  let qh = ld16(base + 2u) | (ld16(base + 4u) << 16u);
  for (var j = 0u; j < 16u; j = j + 1u) {
    let q = ld8(base + 6u + j);
    let a = (q & 15u) | (((qh >> j) & 1u) << 4u);
    let c = (q >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u);
    dst[b * 32u + j] = bitcast<u32>(f32(i32(a) - 16) * d);
    dst[b * 32u + j + 16u] = bitcast<u32>(f32(i32(c) - 16) * d);
  }
}
`;

export const Q5_0_QUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let x0 = b * 32u;
  var amax = 0u;
  var mx = 0u;
  for (var i = 0u; i < 32u; i = i + 1u) {
    let v = src[x0 + i];
    if ((v & ABS) > amax) { amax = v & ABS; mx = v; }
  }
  let d = f_div(mx, 0xc1800000u); // -16
  var id = 0u;
  if (!f_is_zero(d)) { id = f_div(F_ONE, d); }
  let y = b * 22u;
  st16(y, f2h(d));
  var qh = 0u;
  for (var j = 0u; j < 16u; j = j + 1u) {
    let a = u32(min(31, trunc_x86(f_add(f_mul(src[x0 + j], id), 0x41840000u)))) & 31u;       // + 16.5
    let c = u32(min(31, trunc_x86(f_add(f_mul(src[x0 + j + 16u], id), 0x41840000u)))) & 31u;
    qh = qh | ((a >> 4u) << j) | ((c >> 4u) << (j + 16u));
    st8(y + 6u + j, (a & 15u) | ((c & 15u) << 4u));
  }
  st16(y + 2u, qh & 0xffffu);
  st16(y + 4u, qh >> 16u);
}
`;
