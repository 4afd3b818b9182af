// Q4_K (spec §4): 256 values per 144-byte block: fp16 d, fp16 dmin, 12 bytes of packed 6-bit
// scales and mins, 128 code bytes. Chunk c (0..3) of 64 values: 32 bytes, low nibbles use
// scale/min 2c, high nibbles 2c+1. Value = (d*sc) * q - (dmin*m) (both products exact, §15).
export const Q4_K_DEQUANT = /* wgsl */ `
fn k4_scale(sc: u32, j: u32) -> u32 {
  if (j < 4u) { return ld8(sc + j) & 63u; }
  return (ld8(sc + j + 4u) & 15u) | ((ld8(sc + j - 4u) >> 6u) << 4u);
}
fn k4_min(sc: u32, j: u32) -> u32 {
  if (j < 4u) { return ld8(sc + j + 4u) & 63u; }
  return (ld8(sc + j + 4u) >> 4u) | ((ld8(sc + j) >> 6u) << 4u);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 144u;
  let d = bitcast<f32>(h2f(ld16(base)));
  let dmin = bitcast<f32>(h2f(ld16(base + 2u)));
  let sc = base + 4u;
  let q = base + 16u;
  let y = b * 256u;
  for (var c = 0u; c < 4u; c = c + 1u) {
    let d1 = d * f32(k4_scale(sc, 2u * c));
    let m1 = dmin * f32(k4_min(sc, 2u * c));
    let d2 = d * f32(k4_scale(sc, 2u * c + 1u));
    let m2 = dmin * f32(k4_min(sc, 2u * c + 1u));
    for (var l = 0u; l < 32u; l = l + 1u) {
      let v = ld8(q + 32u * c + l);
      dst[y + 64u * c + l] = bitcast<u32>(d1 * f32(v & 15u) - m1);
      dst[y + 64u * c + 32u + l] = bitcast<u32>(d2 * f32(v >> 4u) - m2);
    }
  }
}
`;
