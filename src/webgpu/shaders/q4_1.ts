// Q4_1 (spec §3): fp16 d, fp16 m, 16 bytes (nibble order of Q4_0). Dequantize q * d + m.
// Quantize (reference path): first min / max in element order, d = (max - min)/15,
// codes min(15, trunc((x - min) * (1/d) + 0.5)), 1/d = inf giving codes 0; with importances
// (IMP) the QKX search (nmax 15, rmin -0.9, rdelta 0.05, 36 steps) of the block.
import { legacyQuant } from './legacy.js';

export const Q4_1_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 20u;
  let d = bitcast<f32>(h2f(ld16(base)));
  let m = bitcast<f32>(h2f(ld16(base + 2u)));
  for (var j = 0u; j < 16u; j = j + 1u) {
    let q = ld8(base + 4u + j);
    dst[b * 32u + j] = bitcast<u32>(f32(q & 15u) * d + m);
    dst[b * 32u + j + 16u] = bitcast<u32>(f32(q >> 4u) * d + m);
  }
}
`;

export const Q4_1_QUANT = legacyQuant(4, true);
