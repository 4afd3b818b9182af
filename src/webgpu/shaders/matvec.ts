// y = W x for quantized W: one workgroup of 64 per row. Invocation t accumulates the products of
// elements t, t+64, ... in f32, in element order, then a tree reduction adds the 64 partial sums.
// Element values come from each format's `wval` (the dequantizer's formula per element, hardware
// f32 ops). Results differ from an exact dot product by at most about (rowLen/64 + 7) f32
// rounding errors relative to sum |w_i x_i| (the documented tolerance, MATVEC_TOLERANCE).
const MATVEC_MAIN = /* wgsl */ `
@group(0) @binding(3) var<storage, read> xv: array<f32>;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let r = wid.x + wid.y * P.nx;
  var acc = 0.0;
  if (r < P.n) {
    for (var i = li; i < P.row_len; i = i + 64u) { acc = acc + wval(r * P.row_len + i) * xv[i]; }
  }
  part[li] = acc;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s = s >> 1u) {
    if (li < s) { part[li] = part[li] + part[li + s]; }
    workgroupBarrier();
  }
  if (li == 0u && r < P.n) { dst[r] = bitcast<u32>(part[0]); }
}
`;

const hf = 'bitcast<f32>(h2f(';

/** Q4_K's element (five false) or Q5_K's, whose qh at 16 adds bit 4 and moves the nibbles to 48. */
function k4Wval(five: boolean): string {
  return `fn wval(e: u32) -> f32 {
    let base = (e / 256u) * ${five ? 176 : 144}u; let t = e % 256u; let c = t / 64u; let hi = (t % 64u) >= 32u; let l = t % 32u;
    let j = 2u * c + select(0u, 1u, hi);
    let sc = base + 4u;
    var s: u32; var m: u32;
    if (j < 4u) { s = ld8(sc + j) & 63u; m = ld8(sc + j + 4u) & 63u; }
    else { s = (ld8(sc + j + 4u) & 15u) | ((ld8(sc + j - 4u) >> 6u) << 4u); m = (ld8(sc + j + 4u) >> 4u) | ((ld8(sc + j) >> 6u) << 4u); }
    let v = ld8(base + ${five ? 48 : 16}u + 32u * c + l);
    let q = select(v & 15u, v >> 4u, hi)${five ? ' | (((ld8(base + 16u + l) >> j) & 1u) << 4u)' : ''};
    return ${hf}ld16(base))) * f32(s) * f32(q) - ${hf}ld16(base + 2u))) * f32(m); }`;
}

export const MATVEC_WVAL: Record<string, string> = {
  q8_0: `fn wval(e: u32) -> f32 { let b = e / 32u; return f32(ldi8(b * 34u + 2u + e % 32u)) * ${hf}ld16(b * 34u))); }`,
  q4_0: `fn wval(e: u32) -> f32 {
    let b = e / 32u; let j = e % 32u; let c = ld8(b * 18u + 2u + j % 16u);
    let q = select(c >> 4u, c & 15u, j < 16u);
    return f32(i32(q) - 8) * ${hf}ld16(b * 18u))); }`,
  q4_1: `fn wval(e: u32) -> f32 {
    let b = e / 32u; let j = e % 32u; let c = ld8(b * 20u + 4u + j % 16u);
    let q = select(c >> 4u, c & 15u, j < 16u);
    return f32(q) * ${hf}ld16(b * 20u))) + ${hf}ld16(b * 20u + 2u))); }`,
  q5_0: `fn wval(e: u32) -> f32 {
    let b = e / 32u; let j = e % 32u; let c = ld8(b * 22u + 6u + j % 16u);
    let qh = ld16(b * 22u + 2u) | (ld16(b * 22u + 4u) << 16u);
    let q = select(c >> 4u, c & 15u, j < 16u) | (((qh >> j) & 1u) << 4u);
    return f32(i32(q) - 16) * ${hf}ld16(b * 22u))); }`,
  q5_1: `fn wval(e: u32) -> f32 {
    let b = e / 32u; let j = e % 32u; let c = ld8(b * 24u + 8u + j % 16u);
    let qh = ld16(b * 24u + 4u) | (ld16(b * 24u + 6u) << 16u);
    let q = select(c >> 4u, c & 15u, j < 16u) | (((qh >> j) & 1u) << 4u);
    return f32(q) * ${hf}ld16(b * 24u))) + ${hf}ld16(b * 24u + 2u))); }`,
  q2_k: `fn wval(e: u32) -> f32 {
    let base = (e / 256u) * 84u; let t = e % 256u; let h = t / 128u; let j = (t % 128u) / 32u; let l = t % 32u;
    let s = ld8(base + t / 16u);
    let q = (ld8(base + 16u + 32u * h + l) >> (2u * j)) & 3u;
    return ${hf}ld16(base + 80u))) * f32(s & 15u) * f32(q) - ${hf}ld16(base + 82u))) * f32(s >> 4u); }`,
  q3_k: `fn wval(e: u32) -> f32 {
    let base = (e / 256u) * 110u; let t = e % 256u; let h = t / 128u; let j = (t % 128u) / 32u; let l = t % 32u;
    let k = t / 16u; let sc = base + 96u;
    var lo = ld8(sc + k) & 15u;
    if (k >= 8u) { lo = ld8(sc + k - 8u) >> 4u; }
    let s = i32(lo | (((ld8(sc + 8u + (k & 3u)) >> (2u * (k >> 2u))) & 3u) << 4u)) - 32;
    let low = (ld8(base + 32u + 32u * h + l) >> (2u * j)) & 3u;
    let hbit = (ld8(base + (t & 31u)) >> (t / 32u)) & 1u;
    return ${hf}ld16(base + 108u))) * f32(s) * f32(i32(low | (hbit << 2u)) - 4); }`,
  q5_k: k4Wval(true),
  iq4_xs: `const KV = array<i32, 16>(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
  fn wval(e: u32) -> f32 {
    let base = (e / 256u) * 136u; let t = e % 256u; let ib = t / 32u; let j = t % 32u;
    let ls = ((ld8(base + 4u + ib / 2u) >> (4u * (ib & 1u))) & 15u) | (((ld16(base + 2u) >> (2u * ib)) & 3u) << 4u);
    let c = ld8(base + 8u + 16u * ib + j % 16u);
    let q = select(c >> 4u, c & 15u, j < 16u);
    return ${hf}ld16(base))) * f32(i32(ls) - 32) * f32(KV[q]); }`,
  iq4_nl: `const KV = array<i32, 16>(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
  fn wval(e: u32) -> f32 {
    let b = e / 32u; let j = e % 32u; let c = ld8(b * 18u + 2u + j % 16u);
    let q = select(c >> 4u, c & 15u, j < 16u);
    return ${hf}ld16(b * 18u))) * f32(KV[q]); }`,
  q4_k: k4Wval(false),
  q6_k: `fn wval(e: u32) -> f32 {
    let base = (e / 256u) * 210u; let t = e % 256u; let h = t / 128u; let u = t % 128u; let qt = u / 32u; let l = u % 32u;
    let a = ld8(base + 64u * h + l); let bq = ld8(base + 64u * h + 32u + l); let hb = ld8(base + 128u + 32u * h + l);
    var q: u32;
    if (qt == 0u) { q = (a & 15u) | ((hb & 3u) << 4u); }
    else if (qt == 1u) { q = (bq & 15u) | (((hb >> 2u) & 3u) << 4u); }
    else if (qt == 2u) { q = (a >> 4u) | (((hb >> 4u) & 3u) << 4u); }
    else { q = (bq >> 4u) | ((hb >> 6u) << 4u); }
    let sc = f32(ldi8(base + 192u + 8u * h + l / 16u + 2u * qt));
    return ${hf}ld16(base + 208u))) * sc * f32(i32(q) - 32); }`,
  nf4: `const NF4_TABLE = array<u32, 16>(
    0xbf800000u, 0xbf3239b1u, 0xbf066b30u, 0xbeca32a0u, 0xbe91a24du, 0xbe3d353fu, 0xbdba7871u, 0x00000000u,
    0x3da2faffu, 0x3e24cae3u, 0x3e7c04ddu, 0x3ead033au, 0x3ee1a4b8u, 0x3f1007abu, 0x3f3913b3u, 0x3f800000u);
  fn wval(e: u32) -> f32 {
    let c = ld8(e / 2u);
    let q = select(c & 15u, c >> 4u, e % 2u == 0u);
    return bitcast<f32>(NF4_TABLE[q]) * bitcast<f32>(src[(P.off1 >> 2u) + e / P.group]); }`,
  int8: `fn wval(e: u32) -> f32 {
    var s: u32;
    if ((P.flags & 2u) != 0u) { s = P.tscale; }
    else if ((P.flags & 4u) != 0u) { s = src[(P.off1 >> 2u) + e / P.row_len]; }
    else { s = src[(P.off1 >> 2u) + e / P.group]; }
    return f32(ldi8(e)) * bitcast<f32>(s); }`,
  affine: `fn wval(e: u32) -> f32 {
    let k = e / P.group; let c = ld8(e / 2u);
    let q = select(c >> 4u, c & 15u, e % 2u == 0u);
    return ${hf}ld16(P.off1 + 2u * k))) * f32(q) + ${hf}ld16(P.off2 + 2u * k))); }`,
  fp8_e4m3: `fn wval(e: u32) -> f32 {
    let c = ld8(e); let m = c & 0x7fu;
    var v: f32;
    if ((m >> 3u) == 0u) { v = f32(m) * 0.001953125; } else { v = bitcast<f32>((((m >> 3u) + 120u) << 23u) | ((m & 7u) << 20u)); }
    if ((c & 0x80u) != 0u) { v = -v; }
    var s: u32;
    if ((P.flags & 2u) != 0u) { s = P.tscale; } else { s = src[(P.off1 >> 2u) + e / P.row_len]; }
    return v * bitcast<f32>(s); }`,
  // The FP4 block types: ggml's doubled E2M1 integers times a halved scale (GGUF), or E2M1 itself.
  mxfp4_gguf: `const KV = array<f32, 16>(0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);
  fn wval(e: u32) -> f32 {
    let b = e / 32u; let j = e % 32u; let c = ld8(b * 17u + 1u + j % 16u);
    let q = select(c >> 4u, c & 15u, j < 16u);
    let x = ld8(b * 17u);
    return KV[q] * bitcast<f32>(select((x - 1u) << 23u, 0x00200000u << x, x < 2u)); }`,
  nvfp4_gguf: `const KV = array<f32, 16>(0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);
  fn wval(e: u32) -> f32 {
    let base = (e / 64u) * 36u; let s = (e % 64u) / 16u; let j = e % 16u;
    let c = ld8(base + 4u + 8u * s + j % 8u);
    let q = select(c >> 4u, c & 15u, j < 8u);
    let u = ld8(base + s); let x = (u >> 3u) & 15u;
    var d = bitcast<f32>(((x + 119u) << 23u) | ((u & 7u) << 20u));
    if (x == 0u) { d = f32(u & 7u) * 0.0009765625; }
    if (u == 0x7fu) { d = 0.0; }
    return KV[q] * d; }`,
  mxfp4: `const E2M1 = array<f32, 16>(0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0);
  fn wval(e: u32) -> f32 {
    let b = e / 32u; let j = e % 32u; let c = ld8(b * 17u + 1u + j % 16u);
    let q = select(c >> 4u, c & 15u, j < 16u);
    let x = ld8(b * 17u);
    return E2M1[q] * bitcast<f32>(select(x << 23u, 0x00400000u, x == 0u)); }`,
};
MATVEC_WVAL.intsym = MATVEC_WVAL.int8;

export function matvecBody(format: string): string | undefined {
  const w = MATVEC_WVAL[format];
  return w === undefined ? undefined : w + MATVEC_MAIN;
}
