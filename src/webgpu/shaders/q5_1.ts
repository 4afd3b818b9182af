// Q5_1 (spec §8): fp16 d, fp16 m, qh (u32 LE at 4), qs[16] at 8 in Q5_0's order. Dequantize
// q * d + m (q * d exact, so a fused multiply-add rounds the same). Quantize (reference path):
// d = (max - min) / 31, codes trunc((x - min) * (1/d) + 0.5); with importances (IMP) the QKX
// search (nmax 31, rmin -0.9, rdelta 0.05, 36 steps) of the block, d its scale, m its min.
import { kSearch } from './k_search.js';

export const Q5_1_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 24u;
  let d = bitcast<f32>(h2f(ld16(base)));
  let m = bitcast<f32>(h2f(ld16(base + 2u)));
  let qh = ld16(base + 4u) | (ld16(base + 6u) << 16u);
  for (var j = 0u; j < 16u; j = j + 1u) {
    let q = ld8(base + 8u + j);
    let a = (q & 15u) | (((qh >> j) & 1u) << 4u);
    let c = (q >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u);
    dst[b * 32u + j] = bitcast<u32>(f32(a) * d + m);
    dst[b * 32u + j + 16u] = bitcast<u32>(f32(c) * d + m);
  }
}
`;

export const Q5_1_QUANT = /* wgsl */ `
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
    let r = qkx(31, 0xbf666666u, 0x3d4ccccdu, 36, false);
    st16(b * 24u, f2h(r.x));
    st16(b * 24u + 2u, f2h(r.y ^ SIGN));
    var qh = 0u;
    for (var j = 0u; j < 16u; j = j + 1u) {
      let a = LB[j];
      let e = LB[j + 16u];
      qh = qh | ((a >> 4u) << j) | ((e >> 4u) << (j + 16u));
      st8(b * 24u + 8u + j, (a & 15u) | ((e & 15u) << 4u));
    }
    st16(b * 24u + 4u, qh & 0xffffu);
    st16(b * 24u + 6u, qh >> 16u);
    return;
  }
  var mn = src[x0];
  var mx = mn;
  for (var i = 1u; i < 32u; i = i + 1u) {
    let v = src[x0 + i];
    if (f_lt(v, mn)) { mn = v; }
    if (f_gt(v, mx)) { mx = v; }
  }
  let d = f_div(f_sub(mx, mn), 0x41f80000u); // 31
  var id = 0u;
  if (!f_is_zero(d)) { id = f_div(F_ONE, d); }
  let y = b * 24u;
  st16(y, f2h(d));
  st16(y + 2u, f2h(mn));
  // id = inf (a block of fp32 denormals) gives code 0 on x86: the zeroed output.
  if (id == F_INF) { return; }
  var qh = 0u;
  for (var j = 0u; j < 16u; j = j + 1u) {
    let a = u32(trunc_x86(f_add(f_mul(f_sub(src[x0 + j], mn), id), 0x3f000000u))) & 31u;       // + 0.5
    let c = u32(trunc_x86(f_add(f_mul(f_sub(src[x0 + j + 16u], mn), id), 0x3f000000u))) & 31u;
    qh = qh | ((a >> 4u) << j) | ((c >> 4u) << (j + 16u));
    st8(y + 8u + j, (a & 15u) | ((c & 15u) << 4u));
  }
  st16(y + 4u, qh & 0xffffu);
  st16(y + 6u, qh >> 16u);
}
`;
