// Q6_K (spec §5): 256 values per 210-byte block: ql[128], qh[64], int8 scales[16], fp16 d at 208.
// Half h (0..1) of 128 values: ql + 64h, qh + 32h, scales + 8h; element l (0..31) of the four
// quarters takes the scale 16-group l/16 (+2, +4, +6). Value = (d * scale) * (q - 32).
export const Q6_K_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 210u;
  let d = bitcast<f32>(h2f(ld16(base + 208u)));
  let y = b * 256u;
  for (var h = 0u; h < 2u; h = h + 1u) {
    let ql = base + 64u * h;
    let qh = base + 128u + 32u * h;
    let sc = base + 192u + 8u * h;
    let yh = y + 128u * h;
    for (var l = 0u; l < 32u; l = l + 1u) {
      let is = l / 16u;
      let a = ld8(ql + l);
      let bq = ld8(ql + 32u + l);
      let hb = ld8(qh + l);
      let q1 = i32((a & 15u) | ((hb & 3u) << 4u)) - 32;
      let q2 = i32((bq & 15u) | (((hb >> 2u) & 3u) << 4u)) - 32;
      let q3 = i32((a >> 4u) | (((hb >> 4u) & 3u) << 4u)) - 32;
      let q4 = i32((bq >> 4u) | (((hb >> 6u) & 3u) << 4u)) - 32;
      dst[yh + l] = bitcast<u32>((d * f32(ldi8(sc + is))) * f32(q1));
      dst[yh + 32u + l] = bitcast<u32>((d * f32(ldi8(sc + is + 2u))) * f32(q2));
      dst[yh + 64u + l] = bitcast<u32>((d * f32(ldi8(sc + is + 4u))) * f32(q3));
      dst[yh + 96u + l] = bitcast<u32>((d * f32(ldi8(sc + is + 6u))) * f32(q4));
    }
  }
}
`;

// Quantize (assembly/gguf/q6_k.ts, spec §5 and §14.6): one invocation per super-block, the scalar
// wasm build's steps in its order, all f32 arithmetic in soft-float (common.ts). Per sub-block of
// 16: the QX search of §13.1 (nmax 32, 19 trial scales) with weights x*x, or the raw importances
// (pipeline constant IMP: at src word P.aux, one per column); then int8 sub-scales against the
// largest and the final codes from the stored fp16 super-scale.
export const Q6_K_QUANT = /* wgsl */ `
override IMP: bool = false;

var<private> L: array<u32, 256>; // codes (0..63) of the super-block
var<private> SC: array<u32, 16>; // sub-block scales

// Weight of element i of the super-block starting at x0.
fn q6_w(x0: u32, q0: u32, i: u32) -> u32 {
  if (IMP) { return src[q0 + i]; }
  let v = src[x0 + i];
  return f_mul(v, v);
}

// Sums (sum w*x*l, sum w*l*l) of the codes clamp(nearest_int(iscale*x), -32, 31) of sub-block j.
fn qx_trial(x0: u32, q0: u32, j: u32, iscale: u32) -> vec2<u32> {
  var slx = 0u;
  var sl2 = 0u;
  for (var i = 16u * j; i < 16u * j + 16u; i = i + 1u) {
    let xi = src[x0 + i];
    let wi = q6_w(x0, q0, i);
    let l = f_from_i(clamp(nearest_int(f_mul(iscale, xi)), -32, 31));
    slx = f_add(slx, f_mul(f_mul(wi, xi), l));
    sl2 = f_add(sl2, f_mul(f_mul(wi, l), l));
  }
  return vec2<u32>(slx, sl2);
}

// §13.1 make_qx_quants (nmax 32) on sub-block j: codes l + 32 into L, returns the scale.
fn qx(x0: u32, q0: u32, j: u32) -> u32 {
  var vmax = 0u;
  for (var i = 16u * j; i < 16u * j + 16u; i = i + 1u) { vmax = absmax_step(vmax, src[x0 + i]); }
  if (f_lt(vmax & ABS, GROUP_EPS)) {
    for (var i = 16u * j; i < 16u * j + 16u; i = i + 1u) { L[i] = 0u; }
    return 0u;
  }
  // Trial 0: iscale = -32/vmax, kept; trials k = -9..-1, 1..9: -(32 + 0.1*k)/vmax, kept when
  // their fit is better. One loop, so the trial's soft-float code is compiled once.
  var win = 0u;
  var scale = 0u;
  var best = 0u;
  for (var k = -10; k <= 9; k = k + 1) {
    if (k == 0) { continue; }
    var u = 0x42000000u; // 32
    if (k > -10) { u = f_add(u, f_mul(0x3dcccccdu, f_from_i(k))); }
    let iscale = f_div(u ^ SIGN, vmax);
    let s = qx_trial(x0, q0, j, iscale);
    if (k == -10 || (f_gt(s.y, 0u) && f_gt(f_mul(s.x, s.x), f_mul(best, s.y)))) {
      win = iscale;
      // trial 0 with sum w*l*l = 0 has scale 0
      scale = select(f_div(s.x, s.y), 0u, k == -10 && f_eq(s.y, 0u));
      best = f_mul(scale, s.x);
    }
  }
  for (var i = 16u * j; i < 16u * j + 16u; i = i + 1u) {
    L[i] = u32(clamp(nearest_int(f_mul(win, src[x0 + i])), -32, 31) + 32);
  }
  return scale;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let x0 = b * 256u;
  let q0 = P.aux + (b % (P.row_len / 256u)) * 256u;
  var max_scale = 0u;
  for (var j = 0u; j < 16u; j = j + 1u) {
    SC[j] = qx(x0, q0, j);
    max_scale = absmax_step(max_scale, SC[j]);
  }
  if (f_lt(max_scale & ABS, GROUP_EPS)) { return; } // all 210 bytes zero (the buffer starts zeroed)
  let y = b * 210u;
  let iscale = f_div(0xc3000000u, max_scale); // -128 / max
  let dh = f2h(f_div(F_ONE, iscale));
  st16(y + 208u, dh);
  let d = h2f(dh);
  for (var j = 0u; j < 16u; j = j + 1u) {
    let sc = min(127, nearest_int(f_mul(iscale, SC[j])));
    st8(y + 192u + j, u32(sc) & 0xffu);
    // Final codes with the stored super-scale and the int8 sub-scale; 0: the search codes stay.
    let dj = f_mul(d, f_from_i((sc << 24u) >> 24u));
    if (f_eq(dj, 0u)) { continue; }
    for (var i = 16u * j; i < 16u * j + 16u; i = i + 1u) {
      L[i] = u32(clamp(nearest_int(f_div(src[x0 + i], dj)), -32, 31) + 32);
    }
  }
  for (var h = 0u; h < 2u; h = h + 1u) {
    for (var l = 0u; l < 32u; l = l + 1u) {
      let a = L[128u * h + l];
      let bq = L[128u * h + 32u + l];
      let c = L[128u * h + 64u + l];
      let e = L[128u * h + 96u + l];
      st8(y + 64u * h + l, (a & 15u) | ((c & 15u) << 4u));
      st8(y + 64u * h + 32u + l, (bq & 15u) | ((e & 15u) << 4u));
      st8(y + 128u + 32u * h + l, ((a >> 4u) | ((bq >> 4u) << 2u) | ((c >> 4u) << 4u) | ((e >> 4u) << 6u)) & 0xffu);
    }
  }
}
`;
