// Shared decoding of the sub-4-bit IQ types webquant reads (IQ1_S, IQ1_M, IQ2_*, IQ3_*). Each
// value is computed as llama.cpp's dequantize_row_<type> does, with the same float operations
// in the same order: (scale * grid value) negated by a sign bit, or scale * (grid value + delta).

// The sign byte of 7 stored bits: the 8th bit makes the count of set bits even.
@inline export function evenSigns(s: u32): u32 {
  return s | ((popcnt<u32>(s) & 1) << 7);
}

// Grid levels as floats: IQ2 (8, 25, 43), IQ3_XXS (4, 12, ..., 52, 62), IQ3_S (1, 3, ..., 15).
const IQ2_LEVELS = memory.data<f32>([8, 25, 43, 0]);
export const IQ3XXS_LEVELS = memory.data<f32>([4, 12, 20, 28, 36, 44, 52, 62]);
export const IQ3S_LEVELS = memory.data<f32>([1, 3, 5, 7, 9, 11, 13, 15]);

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

// Eight values of entry `idx` of IQ1_S's grid (levels -1, 0, 1): dl * (value + delta).
const IQ1_MASK = memory.data<u32>([3, 3 << 2, 3 << 4, 3 << 6]);
const IQ1_UNSHIFT = memory.data<f32>([1, 0.25, 0.0625, 0.015625]);

@inline export function iq1Eight(grid: usize, idx: u32, dl: f32, delta: f32, y: usize): void {
  const w = <u32>load<u16>(grid + (<usize>idx << 1));
  if (ASC_FEATURE_SIMD) {
    // Field j of a lane, masked in place and scaled by 2^-2j: the level index exactly.
    const mask = v128.load(IQ1_MASK);
    const unshift = v128.load(IQ1_UNSHIFT);
    const one = f32x4.splat(1);
    const vdl = f32x4.splat(dl);
    const vdelta = f32x4.splat(delta);
    const a = f32x4.sub(f32x4.mul(f32x4.convert_i32x4_s(v128.and(i32x4.splat(w), mask)), unshift), one);
    const b = f32x4.sub(f32x4.mul(f32x4.convert_i32x4_s(v128.and(i32x4.splat(w >> 8), mask)), unshift), one);
    v128.store(y, f32x4.mul(vdl, f32x4.add(a, vdelta)));
    v128.store(y + 16, f32x4.mul(vdl, f32x4.add(b, vdelta)));
    return;
  }
  for (let j: u32 = 0; j < 8; j++) {
    const g = <f32>(<i32>((w >> (j << 1)) & 3) - 1);
    store<f32>(y + (<usize>j << 2), dl * (g + delta));
  }
}
