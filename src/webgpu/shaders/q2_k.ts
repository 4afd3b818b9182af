// Q2_K (spec §9): 256 values per 84-byte block: scales[16] (low nibble the sub-scale, high the
// sub-min of each 16-value sub-block), qs[64] (element 128h + 32j + l is bits 2j..2j+1 of
// qs[32h + l]), fp16 d at 80, fp16 dmin at 82. Value = (d*(sc & 15))*q - (dmin*(sc >> 4)).
import { kSearch } from './k_search.js';

export const Q2_K_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 84u;
  let d = bitcast<f32>(h2f(ld16(base + 80u)));
  let dmin = bitcast<f32>(h2f(ld16(base + 82u)));
  for (var e = 0u; e < 256u; e = e + 1u) {
    let h = e / 128u;
    let j = (e % 128u) / 32u;
    let l = e % 32u;
    let s = ld8(base + e / 16u);
    let q = (ld8(base + 16u + 32u * h + l) >> (2u * j)) & 3u;
    dst[b * 256u + e] = bitcast<u32>(d * f32(s & 15u) * f32(q) - dmin * f32(s >> 4u));
  }
}
`;

// Quantize (assembly/gguf/q2_k.ts, spec §9 and §14.3): one invocation per super-block, the
// scalar wasm build's steps in its order in soft-float. Per sub-block of 16 the QKX search:
// weights |x| and absolute error (rmin -0.5, rdelta 0.1, 15 steps), or with importances
// qw*sqrt(sigma2 + x^2), sigma2 = sum(x^2)/256, squared error (-0.9, 0.05, 36); then 4-bit
// sub-scales and sub-mins (scaled to the largest, or by the QP search with importances), and
// the final codes from the stored fp16 super-scales.
export const Q2_K_QUANT = /* wgsl */ `
override IMP: bool = false;

${kSearch(16, 16, 15)}
var<private> KL: array<u32, 256>; // codes of the super-block
var<private> SB: array<u32, 16>;  // the scale bytes

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let x0 = b * 256u;
  let q0 = P.aux + (b % (P.row_len / 256u)) * 256u;
  var sigma2 = 0u;
  if (IMP) { sigma2 = f_div(sum_sq(x0, 256u), 0x43800000u); } // sum x^2 / 256
  for (var j = 0u; j < 16u; j = j + 1u) {
    var sw = 0u;
    for (var l = 0u; l < 16u; l = l + 1u) {
      let v = src[x0 + 16u * j + l];
      XS[l] = v;
      if (IMP) {
        WS[l] = f_mul(src[q0 + 16u * j + l], f_sqrt(f_add(sigma2, f_mul(v, v))));
        sw = f_add(sw, WS[l]);
      } else {
        WS[l] = v & ABS;
      }
    }
    SW[j] = sw;
    let r = qkx(3, select(0xbf000000u, 0xbf666666u, IMP), select(0x3dcccccdu, 0x3d4ccccdu, IMP), select(15, 36, IMP), !IMP);
    SC[j] = r.x;
    MN[j] = r.y;
    for (var l = 0u; l < 16u; l = l + 1u) { KL[16u * j + l] = LB[l]; }
  }
  var dh = 0u;
  var mh = 0u;
  if (IMP) {
    dh = f2h(qp(0u));
    mh = f2h(qp(1u));
    for (var j = 0u; j < 16u; j = j + 1u) { SB[j] = (QL[j] | (QL[16u + j] << 4u)) & 0xffu; }
  } else {
    var mxs = 0u;
    var mxm = 0u;
    for (var j = 0u; j < 16u; j = j + 1u) {
      if (f_gt(SC[j], mxs)) { mxs = SC[j]; }
      if (f_gt(MN[j], mxm)) { mxm = MN[j]; }
    }
    if (f_gt(mxs, 0u)) {
      let is = f_div(0x41700000u, mxs); // 15 / max
      for (var j = 0u; j < 16u; j = j + 1u) { SB[j] = u32(nearest_int(f_mul(is, SC[j]))) & 0xffu; }
      dh = f2h(f_div(mxs, 0x41700000u));
    } else {
      for (var j = 0u; j < 16u; j = j + 1u) { SB[j] = 0u; }
    }
    if (f_gt(mxm, 0u)) {
      let im = f_div(0x41700000u, mxm);
      for (var j = 0u; j < 16u; j = j + 1u) { SB[j] = (SB[j] | (u32(nearest_int(f_mul(im, MN[j]))) << 4u)) & 0xffu; }
      mh = f2h(f_div(mxm, 0x41700000u));
    }
  }
  // Final codes with the stored (fp16) super-scales; a sub-block whose scale is 0 keeps its
  // search codes.
  let d = h2f(dh);
  let dmin = h2f(mh);
  for (var j = 0u; j < 16u; j = j + 1u) {
    let dj = f_mul(d, f_from_i(i32(SB[j] & 15u)));
    if (f_eq(dj, 0u)) { continue; }
    let mj = f_mul(dmin, f_from_i(i32(SB[j] >> 4u)));
    for (var l = 0u; l < 16u; l = l + 1u) {
      KL[16u * j + l] = u32(clamp(nearest_int(f_div(f_add(src[x0 + 16u * j + l], mj), dj)), 0, 3));
    }
  }
  let y = b * 84u;
  for (var j = 0u; j < 16u; j = j + 1u) { st8(y + j, SB[j]); }
  for (var h = 0u; h < 2u; h = h + 1u) {
    for (var l = 0u; l < 32u; l = l + 1u) {
      let k = 128u * h + l;
      st8(y + 16u + 32u * h + l, KL[k] | (KL[k + 32u] << 2u) | (KL[k + 64u] << 4u) | (KL[k + 96u] << 6u));
    }
  }
  st16(y + 80u, dh);
  st16(y + 82u, mh);
}
`;
