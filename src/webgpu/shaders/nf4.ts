// NF4 (bitsandbytes, assembly/bnb/bnb4.ts), without double quantization. Sections: codes
// (byte j = element 2j in the high nibble, 2j+1 in the low one), then f32 absmax per block at
// byte P.off1. Dequantize: TABLE[code] * absmax (f_mul: absmax may be subnormal).
// Quantize: s = max |x| of the block, v = x * (1/s) (x / s when 1/s overflows, 0 when s = 0),
// code = number of thresholds T[k] strictly below v.
const NF4_COMMON = /* wgsl */ `
const NF4_TABLE = array<u32, 16>(
  0xbf800000u, 0xbf3239b1u, 0xbf066b30u, 0xbeca32a0u, 0xbe91a24du, 0xbe3d353fu, 0xbdba7871u, 0x00000000u,
  0x3da2faffu, 0x3e24cae3u, 0x3e7c04ddu, 0x3ead033au, 0x3ee1a4b8u, 0x3f1007abu, 0x3f3913b3u, 0x3f800000u);
const NF4_T = array<u32, 15>(
  0xbf591cd9u, 0xbf1c5270u, 0xbeeb8480u, 0xbeadea76u, 0xbe703cecu, 0xbe0d38bcu, 0xbd3a7871u, 0x3d22faffu,
  0x3df64863u, 0x3e5067e0u, 0x3e9582d4u, 0x3ec753f9u, 0x3f006d03u, 0x3f248dafu, 0x3f5c89d9u);
`;

export const NF4_DEQUANT = NF4_COMMON + /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let gs = P.group;
  let s = src[(P.off1 >> 2u) + b];
  let q0 = b * (gs >> 1u);
  for (var i = 0u; i < gs; i = i + 2u) {
    let c = ld8(q0 + (i >> 1u));
    dst[b * gs + i] = f_mul(NF4_TABLE[c >> 4u], s);
    dst[b * gs + i + 1u] = f_mul(NF4_TABLE[c & 15u], s);
  }
}
`;

export const NF4_QUANT = NF4_COMMON + /* wgsl */ `
fn nf4_code(v: u32) -> u32 {
  var c = 0u;
  for (var k = 0u; k < 15u; k = k + 1u) { if (f_gt(v, NF4_T[k])) { c = c + 1u; } }
  return c;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let gs = P.group;
  let x0 = b * gs;
  var s = 0u;
  for (var i = 0u; i < gs; i = i + 1u) { s = max(s, src[x0 + i] & ABS); }
  st32(P.off1 + 4u * b, s);
  var inv = 0u;
  if (s != 0u) { inv = f_div(F_ONE, s); }
  let div = inv == F_INF;
  for (var i = 0u; i < gs; i = i + 2u) {
    var va: u32; var vb: u32;
    if (div) { va = f_div(src[x0 + i], s); vb = f_div(src[x0 + i + 1u], s); }
    else { va = f_mul(src[x0 + i], inv); vb = f_mul(src[x0 + i + 1u], inv); }
    st8((x0 + i) >> 1u, (nf4_code(va) << 4u) | nf4_code(vb));
  }
}
`;
