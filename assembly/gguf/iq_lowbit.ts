// Shared decoding of the sub-4-bit IQ types webquant reads (IQ1_S, IQ1_M, IQ2_*, IQ3_*). Each
// value is computed as llama.cpp's dequantize_row_<type> does, with the same float operations
// in the same order: (scale * grid value) negated by a sign bit, or scale * (grid value + delta).
import { IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID } from './iq_grids';
import { storeAQ } from './pack';

// The sign byte of 7 stored bits: the 8th bit makes the count of set bits even. The SIMD build
// reads it from a table (llama.cpp's ksigns), which its decoders found 3-6% faster than popcnt.
@inline export function evenSigns(s: u32): u32 {
  if (ASC_FEATURE_SIMD) return <u32>load<u8>(EVEN_SIGNS + <usize>s);
  return s | ((popcnt<u32>(s) & 1) << 7);
}
const EVEN_SIGNS = memory.data<u8>([
  0, 129, 130, 3, 132, 5, 6, 135, 136, 9, 10, 139, 12, 141, 142, 15,
  144, 17, 18, 147, 20, 149, 150, 23, 24, 153, 154, 27, 156, 29, 30, 159,
  160, 33, 34, 163, 36, 165, 166, 39, 40, 169, 170, 43, 172, 45, 46, 175,
  48, 177, 178, 51, 180, 53, 54, 183, 184, 57, 58, 187, 60, 189, 190, 63,
  192, 65, 66, 195, 68, 197, 198, 71, 72, 201, 202, 75, 204, 77, 78, 207,
  80, 209, 210, 83, 212, 85, 86, 215, 216, 89, 90, 219, 92, 221, 222, 95,
  96, 225, 226, 99, 228, 101, 102, 231, 232, 105, 106, 235, 108, 237, 238, 111,
  240, 113, 114, 243, 116, 245, 246, 119, 120, 249, 250, 123, 252, 125, 126, 255,
]);

// Grid levels as floats: IQ2 (8, 25, 43), IQ3_XXS (4, 12, ..., 52, 62), IQ3_S (1, 3, ..., 15).
const IQ2_LEVELS = memory.data<f32>([8, 25, 43, 0]);
export const IQ3XXS_LEVELS = memory.data<f32>([4, 12, 20, 28, 36, 44, 52, 62]);
export const IQ3S_LEVELS = memory.data<f32>([1, 3, 5, 7, 9, 11, 13, 15]);
const IQ1_LEVELS = memory.data<f32>([-1, 0, 1, 0]);

// db * level, negated where `neg` is 1: flipping the sign bit is llama.cpp's multiplication by -1
// for every value but NaN, whose bits the tests do not compare.
@inline function signed(v: f32, neg: u32): f32 {
  return reinterpret<f32>(reinterpret<u32>(v) ^ (neg << 31));
}

// Eight values of entry `idx` of an IQ2 grid (levels 8, 25, 43) times db, negated where bit j of
// `signs` is set.
@inline export function iq2Eight(grid: usize, idx: u32, db: f32, signs: u32, y: usize): void {
  const w = <u32>load<u16>(grid + (<usize>idx << 1));
  for (let j: u32 = 0; j < 8; j++) {
    const v = db * load<f32>(IQ2_LEVELS + (<usize>((w >> (j << 1)) & 3) << 2));
    store<f32>(y + (<usize>j << 2), signed(v, (signs >> j) & 1));
  }
}

// Four values of entry `idx` of an IQ3 grid (its level table: IQ3XXS_LEVELS or IQ3S_LEVELS) times
// db, negated where bit j of `signs` is set.
@inline export function iq3Four(grid: usize, levels: usize, idx: u32, db: f32, signs: u32, y: usize): void {
  const w = <u32>load<u16>(grid + (<usize>idx << 1));
  for (let j: u32 = 0; j < 4; j++) {
    const v = db * load<f32>(levels + (<usize>((w >> (j * 3)) & 7) << 2));
    store<f32>(y + (<usize>j << 2), signed(v, (signs >> j) & 1));
  }
}

// ---- SIMD: wide grids, 16 values a step ---------------------------------------------------
// wasm has no gather, so the packed grids cost a shift, a mask and a table load per value. The
// SIMD build widens each IQ2 / IQ3 grid once into bytes (an IQ2 entry's 8 levels, an IQ3 entry's
// 4; the levels are small integers), loads two IQ2 or four IQ3 entries into one vector, negates
// the bytes whose sign bit is set and widens them to floats. db * (-l) is -(db * l) exactly
// (rounding is symmetric), so both builds give the same floats. IQ1_S's grid, which has no signs,
// is widened to floats (64 KiB; 13% faster than bytes). The scalar build keeps the packed grids
// as the reference path. Wide grids are built on a kernel's first call.
const WIDE_IQ2XXS = memory.data(256 << 3, 16);
const WIDE_IQ2XS = memory.data(512 << 3, 16);
const WIDE_IQ2S = memory.data(1024 << 3, 16);
const WIDE_IQ3XXS = memory.data(256 << 2, 16);
const WIDE_IQ3S = memory.data(512 << 2, 16);
const WIDE_IQ1S = memory.data(2048 << 5, 16); // floats
const WIDE_READY = memory.data(8); // one flag byte per wide grid
// Sign bit j of byte k of a u16 of signs, tested in byte lane 8k + j.
const SIGN_BITS = memory.data<u8>([1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128]);

// Entry i's levels at out + i * per (bytes), or as floats at out + 4 * i * per.
function widen(grid: usize, n: usize, per: usize, levels: usize, out: usize, floats: bool): void {
  const bits: u32 = per == 8 ? 2 : 3;
  const mask: u32 = (1 << bits) - 1;
  for (let i: usize = 0; i < n; i++) {
    const w = <u32>load<u16>(grid + (i << 1));
    for (let j: usize = 0; j < per; j++) {
      const v = load<f32>(levels + (<usize>((w >> (<u32>j * bits)) & mask) << 2));
      if (floats) store<f32>(out + ((i * per + j) << 2), v);
      else store<u8>(out + i * per + j, <u8><i32>v);
    }
  }
}

/** The wide grid the SIMD decoders read for a packed grid (built on first use); 0 in the scalar build. */
export function wideGrid(grid: usize): usize {
  if (!ASC_FEATURE_SIMD) return 0;
  let slot: usize, out: usize, n: usize, per: usize = 8, levels = IQ2_LEVELS;
  if (grid == IQ2XXS_GRID) { slot = 0; out = WIDE_IQ2XXS; n = 256; }
  else if (grid == IQ2XS_GRID) { slot = 1; out = WIDE_IQ2XS; n = 512; }
  else if (grid == IQ2S_GRID) { slot = 2; out = WIDE_IQ2S; n = 1024; }
  else if (grid == IQ3XXS_GRID) { slot = 3; out = WIDE_IQ3XXS; n = 256; per = 4; levels = IQ3XXS_LEVELS; }
  else if (grid == IQ3S_GRID) { slot = 4; out = WIDE_IQ3S; n = 512; per = 4; levels = IQ3S_LEVELS; }
  else { slot = 5; out = WIDE_IQ1S; n = 2048; levels = IQ1_LEVELS; }
  if (load<u8>(WIDE_READY + slot) == 0) {
    widen(grid, n, per, levels, out, slot == 5);
    store<u8>(WIDE_READY + slot, 1);
  }
  return out;
}

// 16 level bytes negated where bit j of byte k of `signs` is set (lane 8k + j), times db, stored.
@inline function signedTimes16(g: v128, signs: u32, db: f32, y: usize): void {
  const bit = v128.load(SIGN_BITS);
  const s = i16x8.splat(<i16>signs);
  const m = i8x16.eq(v128.and(i8x16.shuffle(s, s, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), bit), bit);
  storeAQ(y, i8x16.sub(v128.xor(g, m), m), f32x4.splat(db));
}

// Entries i0 and i1 of an IQ2 grid (16 values) times db, signed by the low and high byte of
// `signs`. `wide` is wideGrid(grid).
@inline export function iq2Pair(grid: usize, wide: usize, i0: u32, i1: u32, signs: u32, db: f32, y: usize): void {
  if (ASC_FEATURE_SIMD) {
    const g = v128.load64_lane(wide + (<usize>i1 << 3), v128.load64_zero(wide + (<usize>i0 << 3)), 1);
    signedTimes16(g, signs, db, y);
    return;
  }
  iq2Eight(grid, i0, db, signs & 255, y);
  iq2Eight(grid, i1, db, signs >> 8, y + 32);
}

// Entries i0..i3 of an IQ3 grid (16 values) times db: i0, i1 signed by the low byte of `signs`,
// i2, i3 by the high byte. `wide` is wideGrid(grid).
@inline export function iq3Quad(
  grid: usize, levels: usize, wide: usize, i0: u32, i1: u32, i2: u32, i3: u32, signs: u32, db: f32, y: usize,
): void {
  if (ASC_FEATURE_SIMD) {
    let g = v128.load32_zero(wide + (<usize>i0 << 2));
    g = v128.load32_lane(wide + (<usize>i1 << 2), g, 1);
    g = v128.load32_lane(wide + (<usize>i2 << 2), g, 2);
    g = v128.load32_lane(wide + (<usize>i3 << 2), g, 3);
    signedTimes16(g, signs, db, y);
    return;
  }
  iq3Four(grid, levels, i0, db, signs, y);
  iq3Four(grid, levels, i1, db, signs >> 4, y + 16);
  iq3Four(grid, levels, i2, db, signs >> 8, y + 32);
  iq3Four(grid, levels, i3, db, signs >> 12, y + 48);
}

// Eight values of entry `idx` of IQ1_S's grid (levels -1, 0, 1): dl * (value + delta).
@inline export function iq1Eight(grid: usize, idx: u32, dl: f32, delta: f32, y: usize): void {
  const w = <u32>load<u16>(grid + (<usize>idx << 1));
  for (let j: u32 = 0; j < 8; j++) {
    const g = <f32>(<i32>((w >> (j << 1)) & 3) - 1);
    store<f32>(y + (<usize>j << 2), dl * (g + delta));
  }
}

// Entries i0 and i1 of IQ1_S's grid (16 values): dl * (value + delta0), then dl * (value + delta1).
// `wide` is wideGrid(IQ1S_GRID).
@inline export function iq1Pair(grid: usize, wide: usize, i0: u32, i1: u32, dl: f32, delta0: f32, delta1: f32, y: usize): void {
  if (ASC_FEATURE_SIMD) {
    const vdl = f32x4.splat(dl);
    const d0 = f32x4.splat(delta0);
    const d1 = f32x4.splat(delta1);
    const a = wide + (<usize>i0 << 5);
    const b = wide + (<usize>i1 << 5);
    v128.store(y, f32x4.mul(vdl, f32x4.add(v128.load(a), d0)));
    v128.store(y, f32x4.mul(vdl, f32x4.add(v128.load(a, 16), d0)), 16);
    v128.store(y, f32x4.mul(vdl, f32x4.add(v128.load(b), d1)), 32);
    v128.store(y, f32x4.mul(vdl, f32x4.add(v128.load(b, 16), d1)), 48);
    return;
  }
  iq1Eight(grid, i0, dl, delta0, y);
  iq1Eight(grid, i1, dl, delta1, y + 32);
}
