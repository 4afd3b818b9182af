// OCP MXFP4 (assembly/bnb/mxfp4.ts): blocks of 32 values, 17 bytes: an E8M0 scale code, then
// element j in the low nibble of byte 1 + j and element j + 16 in the high one. Dequantize:
// E2M1[code] * 2^(scale - 127) (code 0: 2^-127, 255: NaN). Quantize: e = floor(log2 amax) - 2
// from amax's exponent field (at least -127), y = x * 2^-e, |y| rounded to nearest even on the
// E2M1 grid and saturated at 6, the sign bit kept.
const MXFP4_COMMON = /* wgsl */ `
const MX_E2M1 = array<u32, 16>(
  0x00000000u, 0x3f000000u, 0x3f800000u, 0x3fc00000u, 0x40000000u, 0x40400000u, 0x40800000u, 0x40c00000u,
  0x80000000u, 0xbf000000u, 0xbf800000u, 0xbfc00000u, 0xc0000000u, 0xc0400000u, 0xc0800000u, 0xc0c00000u);
`;

export const MXFP4_DEQUANT = MXFP4_COMMON + /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 17u;
  let code = ld8(base);
  var s = code << 23u;
  if (code == 0u) { s = 0x00400000u; }
  if (code == 255u) { s = F_QNAN; }
  for (var j = 0u; j < 16u; j = j + 1u) {
    let c = ld8(base + 1u + j);
    dst[b * 32u + j] = f_mul(MX_E2M1[c & 15u], s);
    dst[b * 32u + j + 16u] = f_mul(MX_E2M1[c >> 4u], s);
  }
}
`;

export const MXFP4_QUANT = MXFP4_COMMON + /* wgsl */ `
// E2M1 code of y: below 1 by adding 2^22 (its ulp is the subnormal step 0.5, rounding to even),
// from 1 up by rounding the mantissa to one bit (to even) and rebiasing the exponent.
fn e2m1_code(y: u32) -> u32 {
  let a = f_min(y & ABS, 0x40c00000u); // min(|y|, 6)
  var m: u32;
  if (f_lt(a, F_ONE)) { m = f_add(a, 0x4a800000u) - 0x4a800000u; }
  else { m = ((a + 0x1fffffu + ((a >> 22u) & 1u)) >> 22u) - 252u; }
  return m | ((y >> 28u) & 8u);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let x0 = b * 32u;
  let amax = amax_bits(x0, 32u);
  let e = max(i32((amax >> 23u) & 0xffu) - 129, -127);
  let y = b * 17u;
  st8(y, u32(e + 127));
  let mul = u32(127 - e) << 23u;
  for (var j = 0u; j < 16u; j = j + 1u) {
    st8(y + 1u + j, e2m1_code(f_mul(src[x0 + j], mul)) | (e2m1_code(f_mul(src[x0 + j + 16u], mul)) << 4u));
  }
}
`;
