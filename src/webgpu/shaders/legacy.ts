// The quantizers of the legacy types (assembly/gguf/q4_0.ts, q4_1.ts, q5_0.ts, q5_1.ts): one
// generator over the code width (4 or 5 bits) and the kind (symmetric: Q4_0, Q5_0; with a min:
// Q4_1, Q5_1), as the four differ only there.
// - Reference path (spec §2, §3, §7, §8): symmetric: signed absmax `max`, d = max / -2^(bits-1),
//   codes min(nmax, trunc(x * (1/d) + 2^(bits-1) + 0.5)); with a min: first min / max in element
//   order, d = (max - min)/nmax, codes trunc((x - min) * (1/d) + 0.5) (Q4_1 also min(15, .)),
//   1/d = inf giving codes 0.
// - With importances (IMP, spec §14.1): weights qw*sqrt(sigma2 + x^2), sigma2 the row's
//   sum(x^2)/rowLen (after the importances in src); the QX search (nmax 2^(bits-1)) or the QKX
//   search (nmax 2^bits - 1, rmin -0.9, rdelta 0.05, 36 steps), whose codes are stored as found.
// Layout: fp16 d (and fp16 m), then for 5 bits qh (u32: bit j = bit 4 of code j), then 16 bytes:
// code j low nibble, code j+16 high.
import { kSearch } from './k_search.js';
import { qxSearch } from './qx_search.js';

export function legacyQuant(bits: 4 | 5, withMin: boolean): string {
  const nmax = withMin ? 2 ** bits - 1 : 2 ** (bits - 1);
  const head = withMin ? 4 : 2; // bytes of d (and m)
  const bytes = head + (bits === 5 ? 4 : 0) + 16;
  const f32 = (v: number) => `0x${new Uint32Array(new Float32Array([v]).buffer)[0].toString(16)}u`;
  // The codes of the reference path: symmetric ones clamp to nmax - 1 (their top), Q4_1 to 15.
  const code = (x: string) => (withMin
    ? (bits === 4 ? `min(15, trunc_x86(f_add(f_mul(f_sub(${x}, mn), id), 0x3f000000u)))` : `trunc_x86(f_add(f_mul(f_sub(${x}, mn), id), 0x3f000000u))`)
    : `min(${2 * nmax - 1}, trunc_x86(f_add(f_mul(${x}, id), ${f32(nmax + 0.5)})))`);
  return /* wgsl */ `
override IMP: bool = false;
${withMin ? kSearch(32, 8, 63) : qxSearch(32)}
var<private> CODES: array<u32, 32>;

// The 32 codes in CODES, packed after the scale(s) of block b.
fn pack(b: u32) {
  let y = b * ${bytes}u;${bits === 5 ? `
  var qh = 0u;
  for (var j = 0u; j < 32u; j = j + 1u) { qh = qh | (((CODES[j] >> 4u) & 1u) << j); }
  st16(y + ${head}u, qh & 0xffffu);
  st16(y + ${head + 2}u, qh >> 16u);` : ''}
  for (var j = 0u; j < 16u; j = j + 1u) { st8(y + ${bytes - 16}u + j, (CODES[j] & 15u) | ((CODES[j + 16u] & 15u) << 4u)); }
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let x0 = b * 32u;
  let y = b * ${bytes}u;
  if (IMP) {
    let per = P.row_len / 32u;
    let q0 = P.aux + (b % per) * 32u;
    let sigma2 = src[P.aux + P.row_len + b / per];
    for (var j = 0u; j < 32u; j = j + 1u) {
      let v = src[x0 + j];
      let w = f_mul(src[q0 + j], f_sqrt(f_add(sigma2, f_mul(v, v))));${withMin ? `
      XS[j] = v;
      WS[j] = w;
    }
    let r = qkx(${nmax}, 0xbf666666u, 0x3d4ccccdu, 36, false);
    st16(y, f2h(r.x));
    st16(y + 2u, f2h(r.y ^ SIGN));
    for (var j = 0u; j < 32u; j = j + 1u) { CODES[j] = LB[j]; }` : `
      XV[j] = v;
      WV[j] = w;
    }
    st16(y, f2h(qx(${nmax})));
    for (var j = 0u; j < 32u; j = j + 1u) { CODES[j] = LQ[j]; }`}
    pack(b);
    return;
  }${withMin ? `
  var mn = src[x0];
  var mx = mn;
  for (var i = 1u; i < 32u; i = i + 1u) {
    let v = src[x0 + i];
    if (f_lt(v, mn)) { mn = v; }
    if (f_gt(v, mx)) { mx = v; }
  }
  let d = f_div(f_sub(mx, mn), ${f32(nmax)});
  var id = 0u;
  if (!f_is_zero(d)) { id = f_div(F_ONE, d); }
  st16(y, f2h(d));
  st16(y + 2u, f2h(mn));
  // id = inf (a block of fp32 denormals) gives code 0 on x86: the zeroed output.
  if (id == F_INF) { return; }` : `
  var amax = 0u;
  var mx = 0u;
  for (var i = 0u; i < 32u; i = i + 1u) {
    let v = src[x0 + i];
    if ((v & ABS) > amax) { amax = v & ABS; mx = v; }
  }
  let d = f_div(mx, ${f32(-nmax)});
  var id = 0u;
  if (!f_is_zero(d)) { id = f_div(F_ONE, d); }
  st16(y, f2h(d));`}
  for (var j = 0u; j < 32u; j = j + 1u) { CODES[j] = u32(${code('src[x0 + j]')}) & 31u; }
  pack(b);
}
`;
}
