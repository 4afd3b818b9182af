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
