// Q6_K (spec §5): 256 values per 210-byte block: ql[128], qh[64], int8 scales[16], fp16 d at 208.
// Half h (0..1) of 128 values: ql + 64h, qh + 32h, scales + 8h; element l (0..31) of the four
// quarters takes the scale 16-group l/16 (+2, +4, +6). Value = (d * scale) * (q - 32).
export const Q6_K_DEQUANT = /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 210u;
  let d = bitcast<f32>(h2f(ld16(base + 208u)));
  let y = b * 256u;
  for (var h = 0u; h < 2u; h = h + 1u) {
    let ql = base + 64u * h;
    let qh = base + 128u + 32u * h;
    let sc = base + 192u + 8u * h;
    let yh = y + 128u * h;
    for (var l = 0u; l < 32u; l = l + 1u) {
      let is = l / 16u;
      let a = ld8(ql + l);
      let bq = ld8(ql + 32u + l);
      let hb = ld8(qh + l);
      let q1 = i32((a & 15u) | ((hb & 3u) << 4u)) - 32;
      let q2 = i32((bq & 15u) | (((hb >> 2u) & 3u) << 4u)) - 32;
      let q3 = i32((a >> 4u) | (((hb >> 4u) & 3u) << 4u)) - 32;
      let q4 = i32((bq >> 4u) | (((hb >> 6u) & 3u) << 4u)) - 32;
      dst[yh + l] = bitcast<u32>((d * f32(ldi8(sc + is))) * f32(q1));
      dst[yh + 32u + l] = bitcast<u32>((d * f32(ldi8(sc + is + 2u))) * f32(q2));
      dst[yh + 64u + l] = bitcast<u32>((d * f32(ldi8(sc + is + 4u))) * f32(q3));
      dst[yh + 96u + l] = bitcast<u32>((d * f32(ldi8(sc + is + 6u))) * f32(q4));
    }
  }
}
`;
