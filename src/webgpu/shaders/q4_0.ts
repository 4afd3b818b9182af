// Q4_0 (spec §2): fp16 d, 16 bytes; byte j = element j (low nibble) | element j+16 (high).
// Dequantize (q - 8) * d. Quantize (reference path, no importance): signed absmax `max`,
// d = max / -8, codes min(15, trunc(x * (1/d) + 8.5)).
export const Q4_0_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 18u;
  let d = bitcast<f32>(h2f(ld16(base)));
  // 16 code bytes = 4 u32 words starting at byte base + 2 (read bytewise: blocks are 2-aligned)
  for (var j = 0u; j < 16u; j = j + 1u) {
    let q = ld8(base + 2u + j);
    dst[b * 32u + j] = bitcast<u32>(f32(i32(q & 15u) - 8) * d);
    dst[b * 32u + j + 16u] = bitcast<u32>(f32(i32(q >> 4u) - 8) * d);
  }
}
`;

export const Q4_0_QUANT = /* wgsl */ `
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
  let d = f_div(mx, 0xc1000000u); // -8
  var id = 0u;
  if (!f_is_zero(d)) { id = f_div(F_ONE, d); }
  let y = b * 18u;
  st16(y, f2h(d));
  for (var j = 0u; j < 16u; j = j + 1u) {
    let a = min(15, trunc_x86(f_add(f_mul(src[x0 + j], id), 0x41080000u)));       // + 8.5
    let c = min(15, trunc_x86(f_add(f_mul(src[x0 + j + 16u], id), 0x41080000u)));
    st8(y + 2u + j, u32(a) | (u32(c) << 4u));
  }
}
`;
