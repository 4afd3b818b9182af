// Q4_0 (spec §2): fp16 d, 16 bytes; byte j = element j (low nibble) | element j+16 (high).
// Dequantize (q - 8) * d. Quantize (reference path): signed absmax `max`, d = max / -8, codes
// min(15, trunc(x * (1/d) + 8.5)); with importances (IMP) the QX search (nmax 8) of the block.
import { qxSearch } from './qx_search.js';

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
override IMP: bool = false;
${qxSearch(32)}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let x0 = b * 32u;
  if (IMP) {
  // With importances (spec §14.1): weights qw*sqrt(sigma2 + x^2), sigma2 the row's sum(x^2)/rowLen
  // (after the importances in src), and the block's search.
  let per = P.row_len / 32u;
  let q0 = P.aux + (b % per) * 32u;
  let sigma2 = src[P.aux + P.row_len + b / per];
    for (var j = 0u; j < 32u; j = j + 1u) {
      let v = src[x0 + j];
      XV[j] = v;
      WV[j] = f_mul(src[q0 + j], f_sqrt(f_add(sigma2, f_mul(v, v))));
    }
    st16(b * 18u, f2h(qx(8)));
    for (var j = 0u; j < 16u; j = j + 1u) { st8(b * 18u + 2u + j, LQ[j] | (LQ[j + 16u] << 4u)); }
    return;
  }
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
