// Q4_1 (spec §3): fp16 d, fp16 m, 16 bytes (nibble order of Q4_0). Dequantize q * d + m.
// Quantize (reference path): first min / max in element order, d = (max - min)/15,
// codes min(15, trunc((x - min) * (1/d) + 0.5)); 1/d = inf gives codes 0.
import { kSearch } from './k_search.js';

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

// With importances (IMP): the QKX search (nmax 15, rmin -0.9, rdelta 0.05, 36 steps) of the
// block; d = its scale, m = its min.
export const Q4_1_QUANT = /* wgsl */ `
override IMP: bool = false;
${kSearch(32, 8, 63)}
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
      XS[j] = v;
      WS[j] = f_mul(src[q0 + j], f_sqrt(f_add(sigma2, f_mul(v, v))));
    }
    let r = qkx(15, 0xbf666666u, 0x3d4ccccdu, 36, false);
    st16(b * 20u, f2h(r.x));
    st16(b * 20u + 2u, f2h(r.y ^ SIGN));
    for (var j = 0u; j < 16u; j = j + 1u) { st8(b * 20u + 4u + j, LB[j] | (LB[j + 16u] << 4u)); }
    return;
  }
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
