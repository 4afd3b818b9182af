// IQ4_NL (spec §6): fp16 d, 16 bytes in Q4_0's nibble order; value = d * kvalues[q].
export const IQ4_NL_DEQUANT = /* wgsl */ `
const KV = array<i32, 16>(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 18u;
  let d = bitcast<f32>(h2f(ld16(base)));
  for (var j = 0u; j < 16u; j = j + 1u) {
    let q = ld8(base + 2u + j);
    dst[b * 32u + j] = bitcast<u32>(d * f32(KV[q & 15u]));
    dst[b * 32u + j + 16u] = bitcast<u32>(d * f32(KV[q >> 4u]));
  }
}
`;

// The IQ4 search (spec §13.5, assembly/gguf/iq4_search.ts) shared by IQ4_NL and IQ4_XS: one
// 32-value block at a time, the scalar wasm build's steps in its order in soft-float (common.ts).
export const IQ4_SEARCH = /* wgsl */ `
override IMP: bool = false;
const KV = array<i32, 16>(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
// 2 * the midpoints between neighbouring grid values.
const MID2 = array<i32, 15>(-231, -187, -148, -114, -84, -57, -32, -9, 14, 38, 63, 91, 122, 158, 202);

var<private> W: array<u32, 32>;

// floor(a) for finite a, clamped to [-256, 255].
fn floor_clamped(a: u32) -> i32 {
  let e = i32((a >> 23u) & 0xffu);
  let neg = (a & SIGN) != 0u;
  if (e >= 136) { return select(255, -256, neg); } // |a| >= 512
  if (f_is_zero(a)) { return 0; }
  if (e < 127) { return select(0, -1, neg); }
  let m = (a & 0x7fffffu) | 0x800000u;
  let sh = u32(150 - e);
  let t = i32(m >> sh);
  if (!neg) { return min(t, 255); }
  let frac = (m & ((1u << sh) - 1u)) != 0u;
  return max(-t - select(0, 1, frac), -256);
}

// best_index of spec §6: the number of midpoints <= v (an exact midpoint takes the upper
// entry), from floor(2v) since 2*midpoint is an integer; NaN -> 15.
fn best_index(v: u32) -> u32 {
  if (is_nan(v)) { return 15u; }
  let f = floor_clamped(f_twice(v));
  var c = 0u;
  for (var i = 0u; i < 15u; i = i + 1u) { if (MID2[i] <= f) { c = c + 1u; } }
  return c;
}

// Weights of the 32 values at x0 into W: x^2, or (IMP) qw*sqrt(sigma2 + x^2) with the
// importances at src word q0.
fn iq4_weights(x0: u32, q0: u32, sigma2: u32) {
  for (var j = 0u; j < 32u; j = j + 1u) {
    let v = src[x0 + j];
    if (IMP) { W[j] = f_mul(src[q0 + j], f_sqrt(f_add(sigma2, f_mul(v, v)))); }
    else { W[j] = f_mul(v, v); }
  }
}

// The fitted scale d of the 32 values at x0 (weights W, signed absmax amax).
// Pass 0: id = 1/d0, d0 = -max/-127; passes 1..15: id = (t - 127)/max for t = -7..7.
fn iq4_search(x0: u32, amax: u32) -> u32 {
  var d = 0u;
  var best = 0u;
  for (var p = 0; p < 16; p = p + 1) {
    var id: u32;
    if (p == 0) { id = f_div(F_ONE, f_div(amax ^ SIGN, 0xc2fe0000u)); }
    else { id = f_div(f_from_i(p - 8 - 127), amax); }
    var sx = 0u;
    var s2 = 0u;
    for (var j = 0u; j < 32u; j = j + 1u) {
      let xj = src[x0 + j];
      let q = f_from_i(KV[best_index(f_mul(id, xj))]);
      let wq = f_mul(W[j], q);
      sx = f_add(sx, f_mul(wq, xj));
      s2 = f_add(s2, f_mul(wq, q));
    }
    if (p == 0) {
      d = f_div(sx, s2);
      best = f_mul(d, sx);
    } else if (f_gt(s2, 0u) && f_gt(f_mul(sx, sx), f_mul(best, s2))) {
      d = f_div(sx, s2);
      best = f_mul(d, sx);
    }
  }
  return d;
}

// Codes best_index(id * x) of the 32 values at x0, in the IQ4_NL nibble order, to 16 bytes at y.
fn iq4_codes(x0: u32, id: u32, y: u32) {
  for (var j = 0u; j < 16u; j = j + 1u) {
    let lo = best_index(f_mul(id, src[x0 + j]));
    let hi = best_index(f_mul(id, src[x0 + j + 16u]));
    st8(y + j, lo | (hi << 4u));
  }
}
`;

// Quantize (assembly/gguf/iq4_nl.ts, spec §6, §13.5 and §14.7): one invocation per block of 32.
// Weights x^2, or with importances (pipeline constant IMP: src word P.aux) qw*sqrt(sigma2 + x^2),
// sigma2 = sum(x^2)/16; d from the IQ4 search, codes best_index(x / d) with the fp32 d.
export const IQ4_NL_QUANT = IQ4_SEARCH + /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let x0 = b * 32u;
  let y = b * 18u;
  var amax = 0u;
  for (var j = 0u; j < 32u; j = j + 1u) { amax = absmax_step(amax, src[x0 + j]); }
  if (f_lt(amax & ABS, GROUP_EPS)) {
    for (var j = 0u; j < 16u; j = j + 1u) { st8(y + 2u + j, 0x88u); }
    return;
  }
  var sigma2 = 0u;
  if (IMP) {
    sigma2 = f_mul(sum_sq(x0, 32u), 0x3d800000u); // sum x^2 * (2/32)
  }
  iq4_weights(x0, P.aux + (b % (P.row_len / 32u)) * 32u, sigma2);
  let d = iq4_search(x0, amax);
  // d is NaN only as 0/0 (every weight zero, spec §16.2): x86's default NaN, stored 0xFE00.
  if (is_nan(d)) {
    st16(y, 0xfe00u);
    for (var j = 0u; j < 16u; j = j + 1u) { st8(y + 2u + j, 0xffu); }
    return;
  }
  st16(y, f2h(d));
  var id = 0u;
  if (!f_is_zero(d)) { id = f_div(F_ONE, d); }
  iq4_codes(x0, id, y + 2u);
}
`;
