// Q4_0 (spec §2): fp16 d, 16 bytes; byte j = element j (low nibble) | element j+16 (high).
// Dequantize (q - 8) * d. Quantize (reference path): signed absmax `max`, d = max / -8, codes
// min(15, trunc(x * (1/d) + 8.5)); with importances (IMP) the QX search (nmax 8) of the block.
import { legacyQuant } from './legacy.js';

export const Q4_0_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 18u;
  let d = bitcast<f32>(h2f(ld16(base)));
  // 16 code bytes = 4 u32 words starting at byte base + 2 (read bytewise: blocks are 2-aligned)
  for (var j = 0u; j < 16u; j = j + 1u) {
    let q = ld8(base + 2u + j);
    dst[b * 32u + j] = bitcast<u32>(f32(i32(q & 15u) - 8) * d);
    dst[b * 32u + j + 16u] = bitcast<u32>(f32(i32(q >> 4u) - 8) * d);
  }
}
`;

export const Q4_0_QUANT = legacyQuant(4, false);
