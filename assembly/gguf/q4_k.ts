// Q4_K (ggml type 12): super-blocks of 256 = 8 sub-blocks x 32, 144 bytes, 4.5 bits per weight.
// Layout: d: fp16 at 0, dmin: fp16 at 2, scales: uint8[12] at 4 (6-bit sub-scales and sub-mins,
// "k4 packing"), qs: uint8[128] at 16 (chunk c of 64 values: low nibbles = sub-block 2c, high = 2c+1).
// Dequantized value = (d*ls)*q - (dmin*lm).
// Quantizer: spec §4 (reference) and §14.5 (importance matrix). Q5_K (q5_k.ts) shares the scale
// search and the final pass here; only nmax, the QKX parameters and the code packing differ.
import { A_IMATRIX, A_SCRATCH, argU32, f16ToF32, f32ToF16, nearestInt, rowF32 } from '../common';
import { makeQkxQuants4, makeQpQuants, quantDiv } from './searches';

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

@inline function f32At(p: usize, i: i32): f32 {
  return load<f32>(p + (<usize>i << 2));
}

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
    let sumX2: f32 = 0;
    for (let l = 0; l < 256; l++) {
      const v = f32At(x, l);
      sumX2 += v * v;
    }
    const sigma2: f32 = (2 * sumX2) / 256;
    if (ASC_FEATURE_SIMD) {
      const vs = f32x4.splat(sigma2);
      for (let l = 0; l < 256; l += 4) {
        const v = v128.load(x + (<usize>l << 2));
        v128.store(W + (<usize>l << 2), f32x4.mul(v128.load(qw + (<usize>l << 2)), f32x4.sqrt(f32x4.add(vs, f32x4.mul(v, v)))));
      }
    } else {
      for (let l = 0; l < 256; l++) {
        const v = f32At(x, l);
        store<f32>(W + (<usize>l << 2), f32At(qw, l) * Mathf.sqrt(sigma2 + v * v));
      }
    }
    for (let j = 0; j < 8; j++) {
      let sumw: f32 = 0;
      for (let l = 0; l < 32; l++) sumw += f32At(W, 32 * j + l);
      store<f32>(SW + (<usize>j << 2), sumw);
    }
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

export function q4_k_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const imat = argU32(args, A_IMATRIX);
  const nb = rowLen >> 8;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * <usize>nb * 144;
    for (let b = 0; b < nb; b++) {
      const yb = y + <usize>b * 144;
      quantizeK4Header(x + (<usize>b << 10), imat != 0 ? imat + (<usize>b << 10) : 0, yb, 15);
      const q = yb + 16;
      if (ASC_FEATURE_SIMD) {
        for (let c = 0; c < 4; c++) {
          const p = KL + (<usize>c << 6);
          v128.store(q + (<usize>c << 5), v128.or(v128.load(p), i8x16.shl(v128.load(p + 32), 4)));
          v128.store(q + (<usize>c << 5) + 16, v128.or(v128.load(p + 16), i8x16.shl(v128.load(p + 48), 4)));
        }
      } else {
        for (let c = 0; c < 4; c++) {
          for (let l = 0; l < 32; l++) {
            const p = KL + (<usize>c << 6) + <usize>l;
            store<u8>(q + (<usize>c << 5) + <usize>l, <u8>(<u32>load<u8>(p) | (<u32>load<u8>(p + 32) << 4)));
          }
        }
      }
    }
  }
}

export function q4_k_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 144;
    const d = f16ToF32(<u32>load<u16>(blk));
    const dmin = f16ToF32(<u32>load<u16>(blk + 2));
    const sc = blk + 4;
    const q = blk + 16;
    const y = dst + (b << 10);
    for (let c = 0; c < 4; c++) {
      const d1: f32 = d * <f32>k4Scale(sc, 2 * c);
      const m1: f32 = dmin * <f32>k4Min(sc, 2 * c);
      const d2: f32 = d * <f32>k4Scale(sc, 2 * c + 1);
      const m2: f32 = dmin * <f32>k4Min(sc, 2 * c + 1);
      const qc = q + (<usize>c << 5);
      const yc = y + (<usize>c << 8);
      if (ASC_FEATURE_SIMD) {
        const vd1 = f32x4.splat(d1), vm1 = f32x4.splat(m1), vd2 = f32x4.splat(d2), vm2 = f32x4.splat(m2);
        const mask = i8x16.splat(15);
        for (let h = 0; h < 2; h++) {
          const bytes = v128.load(qc + (<usize>h << 4));
          storeU4(yc + (<usize>h << 6), v128.and(bytes, mask), vd1, vm1);
          storeU4(yc + 128 + (<usize>h << 6), i8x16.shr_u(bytes, 4), vd2, vm2);
        }
      } else {
        for (let l = 0; l < 32; l++) {
          const v = <u32>load<u8>(qc + <usize>l);
          store<f32>(yc + (<usize>l << 2), d1 * <f32>(v & 15) - m1);
          store<f32>(yc + 128 + (<usize>l << 2), d2 * <f32>(v >> 4) - m2);
        }
      }
    }
  }
}

// 16 unsigned byte codes -> 16 floats a*q - b.
@inline export function storeU4(y: usize, c: v128, va: v128, vb: v128): void {
  const lo = i16x8.extend_low_i8x16_u(c);
  const hi = i16x8.extend_high_i8x16_u(c);
  v128.store(y, f32x4.sub(f32x4.mul(va, f32x4.convert_i32x4_u(i32x4.extend_low_i16x8_u(lo))), vb));
  v128.store(y + 16, f32x4.sub(f32x4.mul(va, f32x4.convert_i32x4_u(i32x4.extend_high_i16x8_u(lo))), vb));
  v128.store(y + 32, f32x4.sub(f32x4.mul(va, f32x4.convert_i32x4_u(i32x4.extend_low_i16x8_u(hi))), vb));
  v128.store(y + 48, f32x4.sub(f32x4.mul(va, f32x4.convert_i32x4_u(i32x4.extend_high_i16x8_u(hi))), vb));
}
