// Q4_K (ggml type 12): super-blocks of 256 = 8 sub-blocks x 32, 144 bytes, 4.5 bits per weight.
// Layout: d: fp16 at 0, dmin: fp16 at 2, scales: uint8[12] at 4 (6-bit sub-scales and sub-mins,
// "k4 packing"), qs: uint8[128] at 16 (chunk c of 64 values: low nibbles = sub-block 2c, high = 2c+1).
// Dequantized value = (d*ls)*q - (dmin*lm).
// Quantizer: spec §4 (reference) and §14.5 (importance matrix). Q5_K (q5_k.ts) shares the scale
// search, the final pass and the dequantizer here; only nmax, the QKX parameters and the code
// packing differ.
import { f16ToF32, f32ToF16, nearestInt } from '../common';
import { f32At, imatrixWeights256, packNibbles16, quantizeBlockRows, storeAQB } from './pack';
import { makeQkxQuants4 } from './qkx_search';
import { makeQpQuants, quantDiv } from './searches';

export const Q4_K_BLOCK: i32 = 256;
export const Q4_K_BYTES: i32 = 144;

// Block temporaries shared with q5_k.ts (kernels are single-threaded per instance).
export const KL = memory.data(256); // final codes, one byte per element
const LAUX = memory.data(32);
const W = memory.data(256 * 4);
const SC = memory.data(8 * 4);
const MN = memory.data(8 * 4);
const SW = memory.data(8 * 4);
const LS = memory.data(8);
const LM = memory.data(8);

// k4 packing of one (ls, lm) pair, byte-wise as the reference does it (stores truncate to 8 bits).
function packK4(sc: usize, j: i32, ls: u32, lm: u32): void {
  if (j < 4) {
    store<u8>(sc + <usize>j, <u8>ls);
    store<u8>(sc + <usize>(j + 4), <u8>lm);
  } else {
    store<u8>(sc + <usize>(j + 4), <u8>((ls & 15) | ((lm & 15) << 4)));
    store<u8>(sc + <usize>(j - 4), <u8>(<u32>load<u8>(sc + <usize>(j - 4)) | ((ls >> 4) << 6)));
    store<u8>(sc + <usize>j, <u8>(<u32>load<u8>(sc + <usize>j) | ((lm >> 4) << 6)));
  }
}

@inline export function k4Scale(sc: usize, j: i32): u32 {
  return j < 4
    ? <u32>load<u8>(sc + <usize>j) & 63
    : (<u32>load<u8>(sc + <usize>(j + 4)) & 15) | ((<u32>load<u8>(sc + <usize>(j - 4)) >> 6) << 4);
}
@inline export function k4Min(sc: usize, j: i32): u32 {
  return j < 4
    ? <u32>load<u8>(sc + <usize>(j + 4)) & 63
    : (<u32>load<u8>(sc + <usize>(j + 4)) >> 4) | ((<u32>load<u8>(sc + <usize>j) >> 6) << 4);
}

/**
 * Scales, mins and codes of one 256-value super-block for Q4_K (nmax 15) / Q5_K (nmax 31).
 * Writes d, dmin and the 12 scale bytes at y (the common header of both types) and the final
 * codes into KL. qw: the block's 256 importance values, or 0.
 */
export function quantizeK4Header(x: usize, qw: usize, y: usize, nmax: i32): void {
  const sc = y + 4;
  if (qw == 0) {
    const rmin: f32 = nmax == 15 ? -1.0 : -0.5;
    const nstep = nmax == 15 ? 20 : 15;
    let maxScale: f32 = 0;
    let maxMin: f32 = 0;
    for (let j = 0; j < 8; j++) {
      const xs = x + (<usize>j << 7);
      const wj = W + (<usize>j << 7);
      let sumX2: f32 = 0;
      for (let l = 0; l < 32; l++) {
        const v = f32At(xs, l);
        sumX2 += v * v;
      }
      const av = Mathf.sqrt(sumX2 / 32);
      if (ASC_FEATURE_SIMD) {
        const vav = f32x4.splat(av);
        for (let l = 0; l < 32; l += 4) v128.store(wj + (<usize>l << 2), f32x4.add(vav, f32x4.abs(v128.load(xs + (<usize>l << 2)))));
      } else {
        for (let l = 0; l < 32; l++) store<f32>(wj + (<usize>l << 2), av + Mathf.abs(f32At(xs, l)));
      }
    }
    makeQkxQuants4(32, nmax, x, W, KL, LAUX, MN, SC, rmin, 0.1, nstep, false);
    makeQkxQuants4(32, nmax, x + 512, W + 512, KL + 128, LAUX, MN + 16, SC + 16, rmin, 0.1, nstep, false);
    for (let j = 0; j < 8; j++) {
      const s = f32At(SC, j);
      if (s > maxScale) maxScale = s;
      const m = f32At(MN, j);
      if (m > maxMin) maxMin = m;
    }
    const invS: f32 = maxScale > 0 ? <f32>63 / maxScale : 0;
    const invM: f32 = maxMin > 0 ? <f32>63 / maxMin : 0;
    for (let j = 0; j < 8; j++) {
      const ls = min<u32>(63, <u32><u8>nearestInt(invS * f32At(SC, j)));
      const lm = min<u32>(63, <u32><u8>nearestInt(invM * f32At(MN, j)));
      packK4(sc, j, ls, lm);
    }
    store<u16>(y, f32ToF16(maxScale / 63));
    store<u16>(y + 2, f32ToF16(maxMin / 63));
  } else {
    imatrixWeights256(x, qw, 2, 32, W, SW);
    makeQkxQuants4(32, nmax, x, W, KL, LAUX, MN, SC, -0.9, 0.05, 36, false);
    makeQkxQuants4(32, nmax, x + 512, W + 512, KL + 128, LAUX, MN + 16, SC + 16, -0.9, 0.05, 36, false);
    const dBlock = makeQpQuants(8, 63, SC, LS, SW);
    const mBlock = makeQpQuants(8, 63, MN, LM, SW);
    for (let j = 0; j < 8; j++) {
      let ls = <u32>load<u8>(LS + <usize>j);
      let lm = <u32>load<u8>(LM + <usize>j);
      if (nmax == 31) {
        ls = min<u32>(63, ls);
        lm = min<u32>(63, lm);
      }
      packK4(sc, j, ls, lm);
    }
    store<u16>(y, f32ToF16(dBlock));
    store<u16>(y + 2, f32ToF16(mBlock));
  }
  // Final pass with the stored (fp16) super-scales.
  const d = f16ToF32(<u32>load<u16>(y));
  const dmin = f16ToF32(<u32>load<u16>(y + 2));
  for (let j = 0; j < 8; j++) {
    const dj: f32 = d * <f32>k4Scale(sc, j);
    if (dj == 0) continue;
    const mj: f32 = dmin * <f32>k4Min(sc, j);
    quantDiv(x + (<usize>j << 7), 32, true, mj, dj, 0, nmax, 0, KL + (<usize>j << 5));
  }
}

function quantizeBlock(x: usize, qw: usize, y: usize): void {
  quantizeK4Header(x, qw, y, 15);
  // chunk c of 64 codes: low nibbles = its first 32, high = its last 32
  for (let c = 0; c < 4; c++) {
    const p = KL + (<usize>c << 6);
    const q = y + 16 + (<usize>c << 5);
    packNibbles16(p, p + 32, q);
    packNibbles16(p + 16, p + 48, q + 16);
  }
}

export function q4_k_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 144, quantizeBlock);
}

export function q4_k_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  dequantizeK4(src, nrows, rowLen, dst, 144, false);
}

/**
 * Q4_K / Q5_K dequantization (five: Q5_K, whose qh at 16 adds bit 4 and moves qs to 48).
 * Inlined with a constant `five`, so each kernel keeps only its own branch.
 */
@inline export function dequantizeK4(src: usize, nrows: i32, rowLen: i32, dst: usize, bytes: i32, five: bool): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * <usize>bytes;
    const d = f16ToF32(<u32>load<u16>(blk));
    const dmin = f16ToF32(<u32>load<u16>(blk + 2));
    const sc = blk + 4;
    const qh = blk + 16;
    const qs = blk + (five ? 48 : 16);
    const y = dst + (b << 10);
    if (ASC_FEATURE_SIMD) {
      dequantizeK4Simd(d, dmin, sc, qh, qs, y, five);
      continue;
    }
    for (let c = 0; c < 4; c++) {
      const d1: f32 = d * <f32>k4Scale(sc, 2 * c);
      const m1: f32 = dmin * <f32>k4Min(sc, 2 * c);
      const d2: f32 = d * <f32>k4Scale(sc, 2 * c + 1);
      const m2: f32 = dmin * <f32>k4Min(sc, 2 * c + 1);
      const qc = qs + (<usize>c << 5);
      const yc = y + (<usize>c << 8);
      for (let l = 0; l < 32; l++) {
        const v = <u32>load<u8>(qc + <usize>l);
        let lo = v & 15;
        let hi = v >> 4;
        if (five) {
          const h = <u32>load<u8>(qh + <usize>l);
          lo |= ((h >> (2 * c)) & 1) << 4;
          hi |= ((h >> (2 * c + 1)) & 1) << 4;
        }
        store<f32>(yc + (<usize>l << 2), d1 * <f32>lo - m1);
        store<f32>(yc + 128 + (<usize>l << 2), d2 * <f32>hi - m2);
      }
    }
  }
}

/**
 * One super-block of dequantizeK4 in the SIMD build. Nibbles and high bits are taken with 16-bit
 * shifts and byte masks (x64 has no byte shifts; V8 emulates them). Q5_K's bit 2c (2c+1) of qh
 * byte l is bit 4 of code l of sub-block 2c (2c+1): qh is shifted 2 per pair as 16-bit lanes,
 * and the bits read (0 and 1 of each byte) never come from the neighbouring byte.
 */
@inline function dequantizeK4Simd(d: f32, dmin: f32, sc: usize, qh: usize, qs: usize, y: usize, five: bool): void {
  const hb0 = five ? v128.load(qh) : i8x16.splat(0);
  const hb1 = five ? v128.load(qh + 16) : i8x16.splat(0);
  // Unrolled by hand: constant sub-block indices fold k4Scale / k4Min's branches away.
  k4PairSimd(d, dmin, sc, qs, y, five, 0, hb0, hb1);
  k4PairSimd(d, dmin, sc, qs, y, five, 1, i16x8.shr_u(hb0, 2), i16x8.shr_u(hb1, 2));
  k4PairSimd(d, dmin, sc, qs, y, five, 2, i16x8.shr_u(hb0, 4), i16x8.shr_u(hb1, 4));
  k4PairSimd(d, dmin, sc, qs, y, five, 3, i16x8.shr_u(hb0, 6), i16x8.shr_u(hb1, 6));
}

/** Sub-blocks 2c and 2c + 1 of a super-block; hb0 / hb1: qh shifted right by 2c as 16-bit lanes. */
@inline function k4PairSimd(d: f32, dmin: f32, sc: usize, qs: usize, y: usize, five: bool, c: i32, hb0: v128, hb1: v128): void {
  const mask = i8x16.splat(15);
  const bit = i8x16.splat(16);
  const vd1 = f32x4.splat(d * <f32>k4Scale(sc, 2 * c));
  const vm1 = f32x4.splat(dmin * <f32>k4Min(sc, 2 * c));
  const vd2 = f32x4.splat(d * <f32>k4Scale(sc, 2 * c + 1));
  const vm2 = f32x4.splat(dmin * <f32>k4Min(sc, 2 * c + 1));
  const qc = qs + (<usize>c << 5);
  const yc = y + (<usize>c << 8);
  for (let h = 0; h < 2; h++) {
    const bytes = v128.load(qc + (<usize>h << 4));
    let lo = v128.and(bytes, mask);
    let hi = v128.and(i16x8.shr_u(bytes, 4), mask);
    if (five) {
      const hb = h ? hb1 : hb0;
      lo = v128.or(lo, v128.and(i16x8.shl(hb, 4), bit));
      hi = v128.or(hi, v128.and(i16x8.shl(hb, 3), bit));
    }
    storeAQB(yc + (<usize>h << 6), lo, vd1, vm1);
    storeAQB(yc + 128 + (<usize>h << 6), hi, vd2, vm2);
  }
}
