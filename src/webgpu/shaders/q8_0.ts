// Q8_0 (spec §1): block = fp16 d, 32 x int8. Dequantize: one invocation per block, q * d.
// Quantize: d = amax/127, codes roundf(x * (1/d)); a block whose 1/d overflows is all zero.
export const Q8_0_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 34u;
  let d = bitcast<f32>(h2f(ld16(base)));
  for (var i = 0u; i < 32u; i = i + 1u) {
    dst[b * 32u + i] = bitcast<u32>(f32(ldi8(base + 2u + i)) * d);
  }
}
`;

export const Q8_0_QUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let x0 = b * 32u;
  let amax = amax_bits(x0, 32u);
  let d = f_div(amax, 0x42fe0000u); // 127
  var id = 0u;
  if (!f_is_zero(d)) { id = f_div(F_ONE, d); }
  if (id == F_INF) { return; } // fp32-denormal block: d = 0 and codes 0 (buffer is zeroed)
  let y = b * 34u;
  st16(y, f2h(d));
  for (var i = 0u; i < 32u; i = i + 1u) {
    st8(y + 2u + i, u32(round_away(f_mul(src[x0 + i], id))) & 0xffu);
  }
}
`;
