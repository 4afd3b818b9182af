// int8 symmetric (assembly/int/sym.ts, bits 8): one code byte per element (two's complement).
// Dequantize, one invocation per element: q * s, with s the row's scale (channel), the group's
// (group; P.group = group size) or the tensor's (P.tscale; P.flags bit 1). f_mul: s is any f32.
// Quantize (channel, absmax): one workgroup per row; s = max|x| / 127, codes
// clamp(round_half_even(x / s), -127, 127), all zero when s = 0.
export const INT8_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let e = item(gid);
  if (e >= P.n) { return; }
  var s: u32;
  if ((P.flags & 2u) != 0u) { s = P.tscale; }
  else if ((P.flags & 4u) != 0u) { s = src[(P.off1 >> 2u) + e / P.row_len]; }
  else { s = src[(P.off1 >> 2u) + e / P.group]; }
  dst[e] = f_mul(f_from_i(ldi8(e)), s);
}
`;

export const INT8_QUANT = /* wgsl */ `
var<workgroup> wmax: atomic<u32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let r = wid.x + wid.y * P.nx;
  if (li == 0u) { atomicStore(&wmax, 0u); }
  workgroupBarrier();
  let n = P.row_len;
  let x0 = r * n;
  var m = 0u;
  if (r < P.n) {
    for (var i = li; i < n; i = i + 64u) { m = max(m, src[x0 + i] & ABS); }
  }
  atomicMax(&wmax, m);
  workgroupBarrier();
  if (r >= P.n) { return; }
  let s = f_div(atomicLoad(&wmax), 0x42fe0000u); // amax / 127
  if (li == 0u) { st32(P.off1 + 4u * r, s); }
  if (f_is_zero(s)) { return; }
  for (var i = li; i < n; i = i + 64u) {
    let t = f_min(f_max(f_div(src[x0 + i], s), 0xc2fe0000u), 0x42fe0000u);
    st8(x0 + i, u32(round_even(t)) & 0xffu);
  }
}
`;
