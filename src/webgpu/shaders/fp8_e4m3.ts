// FP8 E4M3FN (assembly/bnb/fp8.ts): one code byte per element, f32 scale per row (channel, at
// P.off1) or per tensor (P.tscale; P.flags bit 1). Dequantize: fp8(code) decoded by bits, times s
// (f_mul). Quantize (channel): one workgroup per row; s by calibration (absmax: amax/448,
// clip: (amax*r)/448, fixed: P.p0 with inputs clamped to +-P.p1), y = x * (1/s) (x / s when 1/s
// overflows), saturate at 448, round to nearest even on the E4M3 grid, keep the sign bit of y.
export const FP8_E4M3_DEQUANT = /* wgsl */ `
fn e4m3(c: u32) -> u32 {
  let m = c & 0x7fu;
  var v: u32;
  if (m == 0x7fu) { v = F_QNAN; }
  else if ((m >> 3u) == 0u) {
    // subnormal: (m & 7) * 2^-9, exact
    if (m == 0u) { v = 0u; } else { v = f_mul(f_from_i(i32(m)), 0x3b000000u); }
  } else { v = (((m >> 3u) + 120u) << 23u) | ((m & 7u) << 20u); }
  return v | ((c & 0x80u) << 24u);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let e = item(gid);
  if (e >= P.n) { return; }
  var s: u32;
  if ((P.flags & 2u) != 0u) { s = P.tscale; } else { s = src[(P.off1 >> 2u) + e / P.row_len]; }
  dst[e] = f_mul(e4m3(ld8(e)), s);
}
`;

export const FP8_E4M3_QUANT = /* wgsl */ `
var<workgroup> wmax: atomic<u32>;
const FMAX: u32 = 0x43e00000u;   // 448
const MAGIC: u32 = 0x46800000u;  // 2^14: its ulp is the E4M3 subnormal step 2^-9
const MIN_NORM: u32 = 0x3c800000u; // 2^-6

fn encode(a: u32) -> u32 {
  if (f_lt(a, MIN_NORM)) { return f_add(a, MAGIC) - MAGIC; }
  return ((a + ((1u << 19u) - 1u) + ((a >> 20u) & 1u)) >> 20u) - 960u;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let r = wid.x + wid.y * P.nx;
  if (li == 0u) { atomicStore(&wmax, 0u); }
  workgroupBarrier();
  let n = P.row_len;
  let x0 = r * n;
  let fixed = P.calib == 3u;
  var m = 0u;
  if (r < P.n && !fixed) {
    for (var i = li; i < n; i = i + 64u) { m = max(m, src[x0 + i] & ABS); }
  }
  atomicMax(&wmax, m);
  workgroupBarrier();
  if (r >= P.n) { return; }
  var s: u32;
  if (fixed) { s = P.p0; }
  else if (P.calib == 4u) { s = f_div(f_mul(atomicLoad(&wmax), P.p0), FMAX); }
  else { s = f_div(atomicLoad(&wmax), FMAX); }
  if (li == 0u) { st32(P.off1 + 4u * r, s); }
  var inv = 0u;
  if (!f_is_zero(s)) { inv = f_div(F_ONE, s); }
  let div = inv == F_INF;
  for (var i = li; i < n; i = i + 64u) {
    var y = src[x0 + i];
    if (fixed) { y = f_max(f_min(y, P.p1), P.p1 ^ SIGN); }
    if (div) { y = f_div(y, s); } else { y = f_mul(y, inv); }
    let a = f_min(y & ABS, FMAX);
    st8(x0 + i, encode(a) | ((y >> 24u) & 0x80u));
  }
}
`;
