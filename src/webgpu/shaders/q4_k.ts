import { kSearch } from './k_search.js';

// Q4_K (spec §4): 256 values per 144-byte block: fp16 d, fp16 dmin, 12 bytes of packed 6-bit
// scales and mins, 128 code bytes. Chunk c (0..3) of 64 values: 32 bytes, low nibbles use
// scale/min 2c, high nibbles 2c+1. Value = (d*sc) * q - (dmin*m) (both products exact, §15).
// Q5_K (q5_k.ts) is the same family: 176-byte blocks whose qh[32] at 16 adds bit 4 of each code
// and moves the nibbles to 48; both shaders come from the generators here, as in the wasm.

/** The dequantizer of Q4_K (five false) or Q5_K (five true). */
export function k4Dequant(five: boolean): string {
  const bytes = five ? 176 : 144;
  return /* wgsl */ `
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
  let base = b * ${bytes}u;
  let d = bitcast<f32>(h2f(ld16(base)));
  let dmin = bitcast<f32>(h2f(ld16(base + 2u)));
  let sc = base + 4u;
  let q = base + ${five ? 48 : 16}u;
  let y = b * 256u;
  for (var c = 0u; c < 4u; c = c + 1u) {
    let d1 = d * f32(k4_scale(sc, 2u * c));
    let m1 = dmin * f32(k4_min(sc, 2u * c));
    let d2 = d * f32(k4_scale(sc, 2u * c + 1u));
    let m2 = dmin * f32(k4_min(sc, 2u * c + 1u));
    for (var l = 0u; l < 32u; l = l + 1u) {
      let v = ld8(q + 32u * c + l);${five ? `
      let h = ld8(base + 16u + l);
      let lo = (v & 15u) | (((h >> (2u * c)) & 1u) << 4u);
      let hi = (v >> 4u) | (((h >> (2u * c + 1u)) & 1u) << 4u);` : `
      let lo = v & 15u;
      let hi = v >> 4u;`}
      dst[y + 64u * c + l] = bitcast<u32>(d1 * f32(lo) - m1);
      dst[y + 64u * c + 32u + l] = bitcast<u32>(d2 * f32(hi) - m2);
    }
  }
}
`;
}

export const Q4_K_DEQUANT = k4Dequant(false);

// Quantize (assembly/gguf/q4_k.ts, spec §4 and §14.5): one invocation per super-block runs the
// scalar wasm build's steps in its order, every f32 operation in soft-float (common.ts), so the
// bytes are the wasm bytes. Per sub-block of 32: weights (av + |x|, or the importances
// qw*sqrt(sigma2 + x^2)), the QKX (scale, min) search of §13.3 (squared error); then 6-bit
// sub-scales and sub-mins (scaled to the largest, or by the QP search of §13.4 with
// importances), and the final codes from the stored fp16 super-scales.
// The searches are k_search.ts's.
/**
 * The quantizer of Q4_K (nmax 15) or Q5_K (nmax 31): the QKX search parameters, the clamps and
 * the code packing differ (assembly/gguf/q4_k.ts quantizeK4Header).
 */
export function k4Quant(nmax: 15 | 31): string {
  const five = nmax === 31;
  // Without importances: rmin -1 and 20 steps (Q4_K), -0.5 and 15 (Q5_K); rdelta 0.1 both.
  const plainRmin = five ? '0xbf000000u' : '0xbf800000u';
  const plainSteps = five ? 15 : 20;
  return /* wgsl */ `
// Pipeline constant: importances at src word P.aux (one per column). The pipeline built without
// them compiles without the QP search and the importance weights.
override IMP: bool = false;

${kSearch(32, 8, 63)}
var<private> KL: array<u32, 256>; // codes of the super-block
var<private> SB: array<u32, 12>;  // the 12 scale bytes

// k4 packing of (ls, lm) for sub-block j, byte-wise as the reference (stores keep 8 bits).
fn pack_k4(j: u32, ls: u32, lm: u32) {
  if (j < 4u) {
    SB[j] = ls & 0xffu;
    SB[j + 4u] = lm & 0xffu;
  } else {
    SB[j + 4u] = ((ls & 15u) | ((lm & 15u) << 4u)) & 0xffu;
    SB[j - 4u] = (SB[j - 4u] | ((ls >> 4u) << 6u)) & 0xffu;
    SB[j] = (SB[j] | ((lm >> 4u) << 6u)) & 0xffu;
  }
}
fn sb_scale(j: u32) -> u32 {
  if (j < 4u) { return SB[j] & 63u; }
  return (SB[j + 4u] & 15u) | ((SB[j - 4u] >> 6u) << 4u);
}
fn sb_min(j: u32) -> u32 {
  if (j < 4u) { return SB[j + 4u] & 63u; }
  return (SB[j + 4u] >> 4u) | ((SB[j] >> 6u) << 4u);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let x0 = b * 256u;
  let q0 = P.aux + (b % (P.row_len / 256u)) * 256u;
  // With importances: sigma2 = (2 * sum x^2) / 256 over the super-block.
  var sigma2 = 0u;
  if (IMP) { sigma2 = f_div(f_mul(0x40000000u, sum_sq(x0, 256u)), 0x43800000u); }
  for (var j = 0u; j < 8u; j = j + 1u) {
    for (var l = 0u; l < 32u; l = l + 1u) { XS[l] = src[x0 + 32u * j + l]; }
    var r: vec2<u32>;
    if (IMP) {
      var sw = 0u;
      for (var l = 0u; l < 32u; l = l + 1u) {
        let v = XS[l];
        WS[l] = f_mul(src[q0 + 32u * j + l], f_sqrt(f_add(sigma2, f_mul(v, v))));
        sw = f_add(sw, WS[l]);
      }
      SW[j] = sw;
    } else {
      // av + |x|, av = sqrt(sum x^2 / 32) over the sub-block
      var s = 0u;
      for (var l = 0u; l < 32u; l = l + 1u) { let v = XS[l]; s = f_add(s, f_mul(v, v)); }
      let av = f_sqrt(f_div(s, 0x42000000u));
      for (var l = 0u; l < 32u; l = l + 1u) { WS[l] = f_add(av, XS[l] & ABS); }
    }
    // rmin -0.9, rdelta 0.05, 36 steps with importances.
    r = qkx(${nmax}, select(${plainRmin}, 0xbf666666u, IMP), select(0x3dcccccdu, 0x3d4ccccdu, IMP), select(${plainSteps}, 36, IMP), false);
    SC[j] = r.x;
    MN[j] = r.y;
    for (var l = 0u; l < 32u; l = l + 1u) { KL[32u * j + l] = LB[l]; }
  }
  // The super-scales d, dmin (as fp16) and the 6-bit sub-scales and sub-mins.
  var dm: array<u32, 2>;
  if (IMP) {
    for (var k = 0u; k < 2u; k = k + 1u) { dm[k] = qp(k); }
    for (var j = 0u; j < 8u; j = j + 1u) { pack_k4(j, ${five ? 'min(63u, QL[j]), min(63u, QL[8u + j])' : 'QL[j], QL[8u + j]'}); }
  } else {
    var mx = array<u32, 2>(0u, 0u);
    for (var j = 0u; j < 8u; j = j + 1u) {
      if (f_gt(SC[j], mx[0])) { mx[0] = SC[j]; }
      if (f_gt(MN[j], mx[1])) { mx[1] = MN[j]; }
    }
    var inv = array<u32, 2>(0u, 0u);
    for (var k = 0u; k < 2u; k = k + 1u) {
      if (f_gt(mx[k], 0u)) { inv[k] = f_div(0x427c0000u, mx[k]); }
      dm[k] = f_div(mx[k], 0x427c0000u);
    }
    for (var j = 0u; j < 8u; j = j + 1u) {
      var lsm: array<u32, 2>;
      for (var k = 0u; k < 2u; k = k + 1u) {
        lsm[k] = min(63u, u32(nearest_int(f_mul(inv[k], select(SC[j], MN[j], k == 1u)))) & 0xffu);
      }
      pack_k4(j, lsm[0], lsm[1]);
    }
  }
  let dh = f2h(dm[0]);
  let mh = f2h(dm[1]);
  // Final codes with the stored (fp16) super-scales; a sub-block whose scale is 0 keeps its
  // search codes.
  let d = h2f(dh);
  let dmin = h2f(mh);
  for (var j = 0u; j < 8u; j = j + 1u) {
    let dj = f_mul(d, f_from_i(i32(sb_scale(j))));
    if (f_eq(dj, 0u)) { continue; }
    let mj = f_mul(dmin, f_from_i(i32(sb_min(j))));
    for (var l = 0u; l < 32u; l = l + 1u) {
      KL[32u * j + l] = u32(clamp(nearest_int(f_div(f_add(src[x0 + 32u * j + l], mj), dj)), 0, ${nmax}));
    }
  }
  let y = b * ${five ? 176 : 144}u;
  st16(y, dh);
  st16(y + 2u, mh);
  for (var i = 0u; i < 12u; i = i + 1u) { st8(y + 4u + i, SB[i]); }${five ? `
  // qs at 48: low 4 bits, two codes a byte as Q4_K; qh at 16: bit 4 of code 64c + 32t + l is
  // bit 2c + t of qh[l].
  for (var l = 0u; l < 32u; l = l + 1u) {
    var h = 0u;
    for (var c = 0u; c < 4u; c = c + 1u) { h = h | ((KL[64u * c + l] >> 4u) << (2u * c)) | ((KL[64u * c + 32u + l] >> 4u) << (2u * c + 1u)); }
    st8(y + 16u + l, h);
  }` : ''}
  for (var c = 0u; c < 4u; c = c + 1u) {
    for (var l = 0u; l < 32u; l = l + 1u) {
      st8(y + ${five ? 48 : 16}u + 32u * c + l, (KL[64u * c + l] & 15u) | ((KL[64u * c + 32u + l] & 15u) << 4u));
    }
  }
}
`;
}

export const Q4_K_QUANT = k4Quant(15);
