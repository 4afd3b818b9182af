// Q5_0 (spec §7): fp16 d, qh (u32 LE at 2: bit j = bit 4 of element j), qs[16] at 6 (element j
// low nibble, j+16 high). Dequantize (q - 16) * d. Quantize (reference path): signed absmax
// `max`, d = max / -16, codes min(31, trunc(x * (1/d) + 16.5)); with importances (IMP) the QX
// search (nmax 16) of the block.
import { qxSearch } from './qx_search.js';

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
override IMP: bool = false;
${qxSearch(32)}
fn pack5(y: u32, c: u32) {
  var qh = 0u;
  for (var j = 0u; j < 16u; j = j + 1u) {
    let a = LQ[j];
    let e = LQ[j + 16u];
    qh = qh | ((a >> 4u) << j) | ((e >> 4u) << (j + 16u));
    st8(c + j, (a & 15u) | ((e & 15u) << 4u));
  }
  st16(y, qh & 0xffffu);
  st16(y + 2u, qh >> 16u);
}

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
    st16(b * 22u, f2h(qx(16)));
    pack5(b * 22u + 2u, b * 22u + 6u);
    return;
  }
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
