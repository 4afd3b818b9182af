// IQ4_XS (spec §12): 256 values per 136-byte block: fp16 d, scales_h (u16: 2 high bits of each
// sub-block's 6-bit scale), scales_l[4] (its low 4 bits, two a byte), qs[128] (sub-block ib of
// 32 at 16*ib in IQ4_NL's nibble order). Value = (d * (ls - 32)) * kvalues[q].
import { IQ4_SEARCH } from './iq4_nl.js';

export const IQ4_XS_DEQUANT = /* wgsl */ `
const KV = array<i32, 16>(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 136u;
  let d = bitcast<f32>(h2f(ld16(base)));
  let sh = ld16(base + 2u);
  for (var ib = 0u; ib < 8u; ib = ib + 1u) {
    let ls = ((ld8(base + 4u + ib / 2u) >> (4u * (ib & 1u))) & 15u) | (((sh >> (2u * ib)) & 3u) << 4u);
    let dl = d * f32(i32(ls) - 32);
    let q = base + 8u + 16u * ib;
    let y = b * 256u + 32u * ib;
    for (var j = 0u; j < 16u; j = j + 1u) {
      let v = ld8(q + j);
      dst[y + j] = bitcast<u32>(dl * f32(KV[v & 15u]));
      dst[y + j + 16u] = bitcast<u32>(dl * f32(KV[v >> 4u]));
    }
  }
}
`;

// Quantize (assembly/gguf/iq4_xs.ts, spec §12, §13.5 and §14.7): one invocation per super-block.
// Per sub-block of 32 the IQ4 search (weights x^2, or qw*sqrt(sigma2 + x^2) with sigma2 =
// sum(x^2)*(2/256) over the super-block); d = -max_scale/32, each sub-block's
// l = clamp(nearest_int(scale/d), -32, 31), codes best_index(x / (d*l)).
export const IQ4_XS_QUANT = IQ4_SEARCH + /* wgsl */ `
var<private> SCL: array<u32, 8>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let x0 = b * 256u;
  let y = b * 136u;
  var sigma2 = 0u;
  if (IMP) {
    sigma2 = f_mul(sum_sq(x0, 256u), 0x3c000000u); // sum x^2 * (2/256)
  }
  let q0 = P.aux + (b % (P.row_len / 256u)) * 256u;
  var max_scale = 0u;
  var amax_scale = 0u;
  for (var ib = 0u; ib < 8u; ib = ib + 1u) {
    let xb = x0 + 32u * ib;
    var amax = 0u;
    for (var j = 0u; j < 32u; j = j + 1u) { amax = absmax_step(amax, src[xb + j]); }
    var d = 0u;
    if (!f_lt(amax & ABS, GROUP_EPS)) {
      iq4_weights(xb, q0 + 32u * ib, sigma2);
      d = iq4_search(xb, amax);
    }
    SCL[ib] = d;
    // A NaN scale (every weight zero, spec §16.2) never wins this comparison.
    if (f_gt(d & ABS, amax_scale)) {
      amax_scale = d & ABS;
      max_scale = d;
    }
  }
  let d = f_div(max_scale ^ SIGN, 0x42000000u); // -max_scale / 32
  st16(y, f2h(d));
  var id = 0u;
  if (!f_is_zero(d)) { id = f_div(F_ONE, d); }
  var sh = 0u;
  var sl = 0u;
  for (var ib = 0u; ib < 8u; ib = ib + 1u) {
    let s = SCL[ib];
    var l = 0;
    if (!is_nan(s)) { l = clamp(nearest_int(f_mul(id, s)), -32, 31); }
    let dl = f_mul(d, f_from_i(l));
    var idl = 0u;
    if (!f_is_zero(dl)) { idl = f_div(F_ONE, dl); }
    iq4_codes(x0 + 32u * ib, idl, y + 8u + 16u * ib);
    let ls = u32(l + 32);
    sl = sl | ((ls & 15u) << (4u * ib));
    sh = sh | ((ls >> 4u) << (2u * ib));
  }
  st16(y + 2u, sh);
  st16(y + 4u, sl & 0xffffu);
  st16(y + 6u, sl >> 16u);
}
`;
