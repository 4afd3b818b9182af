// Q3_K (spec §10): 256 values per 110-byte block: hmask[32] (bit 2 of the code of element e is
// bit e/32 of hmask[e % 32]), qs[64] (its low 2 bits, packed as Q2_K's), scales[12] at 96 (6-bit
// sub-scales + 32: low nibbles in bytes 0..7, high 2 bits in 8..11), fp16 d at 108.
// Value = (d*(sc - 32))*(c - 4).
import { qxSearch } from './qx_search.js';

export const Q3_K_DEQUANT = /* wgsl */ `
fn q3_scale(sc: u32, j: u32) -> i32 {
  var lo = ld8(sc + j) & 15u;
  if (j >= 8u) { lo = ld8(sc + j - 8u) >> 4u; }
  return i32(lo | (((ld8(sc + 8u + (j & 3u)) >> (2u * (j >> 2u))) & 3u) << 4u)) - 32;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 110u;
  let d = bitcast<f32>(h2f(ld16(base + 108u)));
  for (var e = 0u; e < 256u; e = e + 1u) {
    let h = e / 128u;
    let j = (e % 128u) / 32u;
    let l = e % 32u;
    let low = (ld8(base + 32u + 32u * h + l) >> (2u * j)) & 3u;
    let hbit = (ld8(base + (e & 31u)) >> (e / 32u)) & 1u;
    dst[b * 256u + e] = bitcast<u32>(d * f32(q3_scale(base + 96u, e / 16u)) * f32(i32(low | (hbit << 2u)) - 4));
  }
}
`;

// Quantize (assembly/gguf/q3_k.ts, spec §10 and §14.4): one invocation per super-block, the
// scalar wasm build's steps in its order in soft-float. Without importances: per sub-block of
// 16 the §13.2 search (make_q3_quants: weights x^2, coordinate descent), then 6-bit sub-scales
// against the largest. With importances (qw*sqrt(sigma2 + x^2), sigma2 = 2*sum(x^2)/256): the
// §13.1 QX search (nmax 4) per sub-block, then QX (nmax 32) over the 16 sub-scales weighted by
// their sums of weights. Final codes from the stored fp16 super-scale.
export const Q3_K_QUANT = /* wgsl */ `
override IMP: bool = false;

${qxSearch(16)}
var<private> LI: array<i32, 16>;  // make_q3_quants' codes, l
var<private> L: array<u32, 256>;  // codes (0..7) of the super-block
var<private> SC: array<u32, 16>;  // sub-block scales
var<private> SW: array<u32, 16>;  // sums of the importance weights per sub-block
var<private> LS: array<u32, 16>;  // stored 6-bit scales (l + 32)
var<private> WI: array<u32, 256>; // importance weights

// §13.2 make_q3_quants (nmax 4, weights x^2, 5 rounds of coordinate descent) on XV: codes l + 4
// into LQ, returns sumlx/suml2.
fn q3() -> u32 {
  var vmax = 0u;
  for (var i = 0u; i < 16u; i = i + 1u) { vmax = absmax_step(vmax, XV[i]); }
  if (f_lt(vmax & ABS, GROUP_EPS)) {
    for (var i = 0u; i < 16u; i = i + 1u) { LQ[i] = 0u; }
    return 0u;
  }
  let iscale = f_div(0xc0800000u, vmax); // -4 / vmax
  var sumlx = 0u;
  var suml2 = 0u;
  for (var i = 0u; i < 16u; i = i + 1u) {
    let xi = XV[i];
    let l = clamp(nearest_int(f_mul(iscale, xi)), -4, 3);
    LI[i] = l;
    let w = f_mul(xi, xi);
    let fl = f_from_i(l);
    sumlx = f_add(sumlx, f_mul(f_mul(w, xi), fl));
    suml2 = f_add(suml2, f_mul(f_mul(w, fl), fl));
  }
  for (var itry = 0; itry < 5; itry = itry + 1) {
    var changed = false;
    for (var i = 0u; i < 16u; i = i + 1u) {
      let xi = XV[i];
      let w = f_mul(xi, xi);
      let fli = f_from_i(LI[i]);
      var slx = f_sub(sumlx, f_mul(f_mul(w, xi), fli));
      if (!f_gt(slx, 0u)) { continue; }
      var sl2 = f_sub(suml2, f_mul(f_mul(w, fli), fli));
      let nl = clamp(nearest_int(f_div(f_mul(xi, sl2), slx)), -4, 3);
      if (nl == LI[i]) { continue; }
      let fnl = f_from_i(nl);
      slx = f_add(slx, f_mul(f_mul(w, xi), fnl));
      sl2 = f_add(sl2, f_mul(f_mul(w, fnl), fnl));
      if (f_gt(sl2, 0u) && f_gt(f_mul(f_mul(slx, slx), suml2), f_mul(f_mul(sumlx, sumlx), sl2))) {
        LI[i] = nl;
        sumlx = slx;
        suml2 = sl2;
        changed = true;
      }
    }
    if (!changed) { break; }
  }
  for (var i = 0u; i < 16u; i = i + 1u) { LQ[i] = u32(LI[i] + 4); }
  return f_div(sumlx, suml2);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let x0 = b * 256u;
  let y = b * 110u;
  var dh = 0u;
  if (IMP) {
    let q0 = P.aux + (b % (P.row_len / 256u)) * 256u;
    let sigma2 = f_div(f_mul(0x40000000u, sum_sq(x0, 256u)), 0x43800000u); // 2 * sum x^2 / 256
    for (var l = 0u; l < 256u; l = l + 1u) { let v = src[x0 + l]; WI[l] = f_mul(src[q0 + l], f_sqrt(f_add(sigma2, f_mul(v, v)))); }
    for (var j = 0u; j < 16u; j = j + 1u) {
      var sw = 0u;
      for (var l = 0u; l < 16u; l = l + 1u) { sw = f_add(sw, WI[16u * j + l]); }
      SW[j] = sw;
    }
    for (var j = 0u; j < 16u; j = j + 1u) {
      for (var l = 0u; l < 16u; l = l + 1u) { XV[l] = src[x0 + 16u * j + l]; WV[l] = WI[16u * j + l]; }
      SC[j] = qx(4);
      for (var l = 0u; l < 16u; l = l + 1u) { L[16u * j + l] = LQ[l]; }
    }
    for (var j = 0u; j < 16u; j = j + 1u) { XV[j] = SC[j]; WV[j] = SW[j]; }
    dh = f2h(qx(32));
    for (var j = 0u; j < 16u; j = j + 1u) { LS[j] = LQ[j]; }
  } else {
    var max_scale = 0u;
    for (var j = 0u; j < 16u; j = j + 1u) {
      for (var l = 0u; l < 16u; l = l + 1u) { XV[l] = src[x0 + 16u * j + l]; }
      SC[j] = q3();
      for (var l = 0u; l < 16u; l = l + 1u) { L[16u * j + l] = LQ[l]; }
      max_scale = absmax_step(max_scale, SC[j]);
    }
    if (!f_is_zero(max_scale)) {
      let iscale = f_div(0xc2000000u, max_scale); // -32 / max
      for (var j = 0u; j < 16u; j = j + 1u) {
        // the code is cast to int8 (wrapping) before the clamp
        let l = (nearest_int(f_mul(iscale, SC[j])) << 24u) >> 24u;
        LS[j] = u32(clamp(l, -32, 31) + 32);
      }
      dh = f2h(f_div(F_ONE, iscale));
    } else {
      for (var j = 0u; j < 16u; j = j + 1u) { LS[j] = 0u; }
    }
  }
  // Final codes with the stored (fp16) super-scale; a sub-block whose scale is 0 keeps its
  // search codes.
  let d = h2f(dh);
  for (var j = 0u; j < 16u; j = j + 1u) {
    let dj = f_mul(d, f_from_i(i32(LS[j]) - 32));
    if (f_is_zero(dj)) { continue; }
    for (var l = 0u; l < 16u; l = l + 1u) {
      L[16u * j + l] = u32(clamp(nearest_int(f_div(src[x0 + 16u * j + l], dj)), -4, 3) + 4);
    }
  }
  // hmask: bit e/32 of byte e % 32 for codes above 3; qs: their low 2 bits.
  for (var l = 0u; l < 32u; l = l + 1u) {
    var h = 0u;
    for (var k = 0u; k < 8u; k = k + 1u) { h = h | ((L[32u * k + l] >> 2u) << k); }
    st8(y + l, h);
  }
  for (var h = 0u; h < 2u; h = h + 1u) {
    for (var l = 0u; l < 32u; l = l + 1u) {
      let k = 128u * h + l;
      st8(y + 32u + 32u * h + l, (L[k] & 3u) | ((L[k + 32u] & 3u) << 2u) | ((L[k + 64u] & 3u) << 4u) | ((L[k + 96u] & 3u) << 6u));
    }
  }
  // Scales: low nibbles of j and j + 8 in byte j < 8; bits 4-5 of j in byte 8 + j % 4 at 2*(j/4).
  for (var j = 0u; j < 8u; j = j + 1u) { st8(y + 96u + j, (LS[j] & 15u) | ((LS[j + 8u] & 15u) << 4u)); }
  for (var k = 0u; k < 4u; k = k + 1u) {
    st8(y + 104u + k, (LS[k] >> 4u) | ((LS[k + 4u] >> 4u) << 2u) | ((LS[k + 8u] >> 4u) << 4u) | ((LS[k + 12u] >> 4u) << 6u));
  }
  st16(y + 108u, dh);
}
`;
