// NVFP4 as GGUF (ggml type 40, assembly/gguf/nvfp4.ts): blocks of 64 values, 36 bytes: four
// UE4M3 scales (one per 16 values), then per sub-block s eight code bytes at 4 + 8s (element j low
// nibble, j + 8 high). Dequantize: KV[code] * ue4m3_half(scale). Quantize: scale =
// fp32_to_ue4m3(amax / 6); code = the count of midpoints below |x| (sign bit 3 for x < 0), or
// ggml's literal first-minimum search where the scale is 0 or saturated, as the wasm kernel does.
/** ggml's kvalues_mxfp4 (E2M1 doubled), shared with mxfp4_gguf.ts: values, midpoints of 0..7, literal search. */
export const FP4_GGUF_WGSL = /* wgsl */ `
// As f32 bits; code 8 is +0 like the i8 table's 0.
const FP4_KV = array<u32, 16>(
  0x00000000u, 0x3f800000u, 0x40000000u, 0x40400000u, 0x40800000u, 0x40c00000u, 0x41000000u, 0x41400000u,
  0x00000000u, 0xbf800000u, 0xc0000000u, 0xc0400000u, 0xc0800000u, 0xc0c00000u, 0xc1000000u, 0xc1400000u);
// Midpoints of FP4_KV 0..7, in units of the scale.
const FP4_MID = array<u32, 7>(0x3f000000u, 0x3fc00000u, 0x40200000u, 0x40600000u, 0x40a00000u, 0x40e00000u, 0x41200000u);

// ggml's best_index_mxfp4: the first code minimising |KV[i]*d - x| in f32 (any scale).
fn fp4_code_literal(x: u32, d: u32) -> u32 {
  var best = 0u;
  var be = f_sub(f_mul(FP4_KV[0], d), x) & ABS;
  for (var i = 1u; i < 16u; i = i + 1u) {
    let err = f_sub(f_mul(FP4_KV[i], d), x) & ABS;
    if (f_lt(err, be)) { best = i; be = err; }
  }
  return best;
}
`;

const NVFP4_COMMON = FP4_GGUF_WGSL + /* wgsl */ `

fn ue4m3_half(b: u32) -> u32 {
  if (b == 0u || b == 0x7fu) { return 0u; }
  let e = (b >> 3u) & 15u;
  let m = b & 7u;
  if (e == 0u) { return f_mul(f_from_i(i32(m)), 0x3a800000u); } // m * 2^-10
  return ((e + 119u) << 23u) | (m << 20u);
}
`;

export const NVFP4_GGUF_DEQUANT = NVFP4_COMMON + /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 36u;
  for (var s = 0u; s < 4u; s = s + 1u) {
    let d = ue4m3_half(ld8(base + s));
    let y = b * 64u + s * 16u;
    for (var j = 0u; j < 8u; j = j + 1u) {
      let c = ld8(base + 4u + s * 8u + j);
      dst[y + j] = f_mul(FP4_KV[c & 15u], d);
      dst[y + j + 8u] = f_mul(FP4_KV[c >> 4u], d);
    }
  }
}
`;

export const NVFP4_GGUF_QUANT = NVFP4_COMMON + /* wgsl */ `
fn to_ue4m3(v: u32) -> u32 {
  if (!f_gt(v, 0u)) { return 0u; }
  let x = f_min(v, 0x43e00000u); // 448
  var e = i32((x >> 23u) & 0xffu) - 120;
  if (e <= 0) {
    let m = trunc_x86(f_add(f_mul(x, 0x44000000u), 0x3f000000u)); // x * 512 + 0.5
    if (m < 1) { return 0u; }
    return u32(min(m, 7));
  }
  if (e >= 15) { return 0x7eu; }
  var m = ((x >> 20u) & 7u) + ((x >> 19u) & 1u);
  if (m > 7u) {
    m = 0u;
    e = e + 1;
    if (e >= 15) { return 0x7eu; }
  }
  return (u32(e) << 3u) | m;
}

fn nv_code(x: u32, d: u32, fast: bool) -> u32 {
  if (fast) {
    let a = x & ABS;
    var m = 0u;
    for (var i = 0u; i < 7u; i = i + 1u) { if (f_gt(a, f_mul(FP4_MID[i], d))) { m = m + 1u; } }
    return m | select(0u, 8u, (x & SIGN) != 0u && m != 0u);
  }
  return fp4_code_literal(x, d);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let y = b * 36u;
  for (var s = 0u; s < 4u; s = s + 1u) {
    let x0 = b * 64u + s * 16u;
    let amax = amax_bits(x0, 16u);
    let ue = to_ue4m3(f_div(amax, 0x40c00000u)); // amax / 6
    st8(y + s, ue);
    let d = ue4m3_half(ue);
    let fast = ue != 0u && amax <= 0x45280000u; // 6 * 448: the scale did not saturate
    for (var j = 0u; j < 8u; j = j + 1u) {
      st8(y + 4u + s * 8u + j, nv_code(src[x0 + j], d, fast) | (nv_code(src[x0 + j + 8u], d, fast) << 4u));
    }
  }
}
`;
