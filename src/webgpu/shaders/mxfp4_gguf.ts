// MXFP4 as GGUF stores it (ggml type 39, assembly/gguf/mxfp4.ts): blocks of 32 values, 17 bytes:
// the E8M0 byte e, then element j in the low nibble of byte 1 + j and j + 16 in the high one.
// Dequantize: KV[code] * 2^(e-128) (e = 0, 1: f32 subnormals). Quantize: e = floor(log2f(amax))
// + 125 (mod 256), then the midpoint count of |x| * 2^(128-e) for e in 2..252, ggml's literal
// search otherwise, as the wasm kernel does.
//
// log2f rounds to f32, so an amax a few ulps below a power of two takes the next exponent. WGSL
// has no f64 and no guaranteed log2 accuracy, so the rounding becomes a table: per exponent field
// (and per leading bit of a subnormal), the least mantissa whose log2, rounded to f32, reaches the
// next integer. It is computed here the way the wasm kernel computes floor(log2f): the f64 log2
// rounded to f32 (test/webgpu/mxfp4-gguf-exponent.test.ts compares every such amax with wasm).
import { FP4_GGUF_WGSL } from './nvfp4_gguf.js';

const floorLog2f = (x: number): number => Math.floor(Math.fround(Math.log2(x)));

/** Least m in [lo, hi] with floorLog2f(value(m)) above base, else hi + 1 (rounding up only happens at the top). */
function leastRoundingUp(lo: number, hi: number, base: number, value: (m: number) => number): number {
  let m = hi;
  while (m >= lo && floorLog2f(value(m)) > base) m--;
  return m + 1;
}

/**
 * Thresholds of the rounding up: `normal[ef]` on the 23-bit mantissa of an amax with exponent
 * field ef (0x800000: never; entries 0 and 255 unused), `subnormal[p]` on the whole bits of a
 * subnormal amax whose leading bit is p.
 */
function buildLog2Table(): { normal: number[]; subnormal: number[] } {
  const normal = Array.from({ length: 256 }, (_, ef) =>
    ef === 0 || ef === 255 ? 0x800000 : leastRoundingUp(0, 0x7fffff, ef - 127, (m) => (1 + m / 2 ** 23) * 2 ** (ef - 127)));
  const subnormal = Array.from({ length: 23 }, (_, p) => leastRoundingUp(2 ** p, 2 ** (p + 1) - 1, p - 149, (m) => m * 2 ** -149));
  return { normal, subnormal };
}

const TABLE = buildLog2Table();

/** The thresholds the shader carries (built once). */
export function mxfp4GgufLog2Table(): { normal: number[]; subnormal: number[] } {
  return TABLE;
}

/** floor(log2f(a)) for the bits a > 0 of a finite amax, from the table (the WGSL's formula). */
export function mxfp4GgufFloorLog2(a: number): number {
  const t = TABLE;
  const ef = a >>> 23;
  if (ef !== 0) return ef - 127 + ((a & 0x7fffff) >= t.normal[ef] ? 1 : 0);
  const p = 31 - Math.clz32(a);
  return p - 149 + (a >= t.subnormal[p] ? 1 : 0);
}

const hex = (v: number[]) => v.map((x) => `0x${x.toString(16)}u`).join(', ');

const MXFP4_GGUF_COMMON = FP4_GGUF_WGSL + /* wgsl */ `
// ggml's E8M0 "half" scale 2^(e-128), as f32 bits.
fn e8m0_half(e: u32) -> u32 {
  if (e < 2u) { return 0x00200000u << e; }
  return (e - 1u) << 23u;
}
`;

export const MXFP4_GGUF_DEQUANT = MXFP4_GGUF_COMMON + /* wgsl */ `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let base = b * 17u;
  let d = e8m0_half(ld8(base));
  for (var j = 0u; j < 16u; j = j + 1u) {
    let c = ld8(base + 1u + j);
    dst[b * 32u + j] = f_mul(FP4_KV[c & 15u], d);
    dst[b * 32u + j + 16u] = f_mul(FP4_KV[c >> 4u], d);
  }
}
`;

export const MXFP4_GGUF_QUANT = MXFP4_GGUF_COMMON + /* wgsl */ `
const LOG2_UP_NORMAL = array<u32, 256>(${hex(TABLE.normal)});
const LOG2_UP_SUBNORMAL = array<u32, 23>(${hex(TABLE.subnormal)});

// floor(log2f(a)) for the bits a > 0 of a finite amax.
fn floor_log2f(a: u32) -> i32 {
  let ef = a >> 23u;
  if (ef != 0u) { return i32(ef) - 127 + select(0, 1, (a & 0x7fffffu) >= LOG2_UP_NORMAL[ef]); }
  let p = firstLeadingBit(a);
  return i32(p) - 149 + select(0, 1, a >= LOG2_UP_SUBNORMAL[p]);
}

// The wasm codeFast: midpoints of the doubled grid below y = |x| * 2^(128-e) (exact), sign bit 3.
fn mx_code_fast(x: u32, inv: u32) -> u32 {
  let y = f_mul(x & ABS, inv);
  var m = 0u;
  for (var i = 0u; i < 7u; i = i + 1u) { if (f_gt(y, FP4_MID[i])) { m = m + 1u; } }
  return m | select(0u, 8u, (x & SIGN) != 0u && m != 0u);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let b = item(gid);
  if (b >= P.n) { return; }
  let x0 = b * 32u;
  let amax = amax_bits(x0, 32u);
  var k = -125;
  if (amax != 0u) { k = floor_log2f(amax); }
  let e = u32(k + 125) & 0xffu;
  let y = b * 17u;
  st8(y, e);
  let fast = k >= -123 && k <= 127;
  let inv = (255u - e) << 23u;
  let d = e8m0_half(e);
  for (var j = 0u; j < 16u; j = j + 1u) {
    var lo: u32; var hi: u32;
    if (fast) { lo = mx_code_fast(src[x0 + j], inv); hi = mx_code_fast(src[x0 + j + 16u], inv); }
    else { lo = fp4_code_literal(src[x0 + j], d); hi = fp4_code_literal(src[x0 + j + 16u], d); }
    st8(y + 1u + j, lo | (hi << 4u));
  }
}
`;
