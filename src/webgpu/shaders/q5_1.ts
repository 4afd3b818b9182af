// Q5_1 (spec §8): fp16 d, fp16 m, qh (u32 LE at 4), qs[16] at 8 in Q5_0's order. Dequantize
// q * d + m (q * d exact, so a fused multiply-add rounds the same). Quantize (reference path):
// d = (max - min) / 31, codes trunc((x - min) * (1/d) + 0.5); with importances (IMP) the QKX
// search (nmax 31, rmin -0.9, rdelta 0.05, 36 steps) of the block, d its scale, m its min.
import { legacyQuant } from './legacy.js';

export const Q5_1_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 24u;
  let d = bitcast<f32>(h2f(ld16(base)));
  let m = bitcast<f32>(h2f(ld16(base + 2u)));
  let qh = ld16(base + 4u) | (ld16(base + 6u) << 16u);
  for (var j = 0u; j < 16u; j = j + 1u) {
    let q = ld8(base + 8u + j);
    let a = (q & 15u) | (((qh >> j) & 1u) << 4u);
    let c = (q >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u);
    dst[b * 32u + j] = bitcast<u32>(f32(a) * d + m);
    dst[b * 32u + j + 16u] = bitcast<u32>(f32(c) * d + m);
  }
}
`;

export const Q5_1_QUANT = legacyQuant(5, true);
