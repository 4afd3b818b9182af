// Q5_0 (spec §7): fp16 d, qh (u32 LE at 2: bit j = bit 4 of element j), qs[16] at 6 (element j
// low nibble, j+16 high). Dequantize (q - 16) * d. Quantize (reference path): signed absmax
// `max`, d = max / -16, codes min(31, trunc(x * (1/d) + 16.5)); with importances (IMP) the QX
// search (nmax 16) of the block.
import { legacyQuant } from './legacy.js';

export const Q5_0_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 22u;
  let d = bitcast<f32>(h2f(ld16(base)));
  let qh = ld16(base + 2u) | (ld16(base + 4u) << 16u);
  for (var j = 0u; j < 16u; j = j + 1u) {
    let q = ld8(base + 6u + j);
    let a = (q & 15u) | (((qh >> j) & 1u) << 4u);
    let c = (q >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u);
    dst[b * 32u + j] = bitcast<u32>(f32(i32(a) - 16) * d);
    dst[b * 32u + j + 16u] = bitcast<u32>(f32(i32(c) - 16) * d);
  }
}
`;

export const Q5_0_QUANT = legacyQuant(5, false);
