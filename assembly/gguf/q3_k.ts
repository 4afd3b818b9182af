// Q3_K (ggml type 11): super-blocks of 256 = 16 sub-blocks x 16, 110 bytes, 3.4375 bits per weight.
// Layout: hmask: uint8[32] at 0 (bit 2 of element e = bit e/32 of hmask[e % 32]), qs: uint8[64]
// at 32 (low 2 bits, 2-bit packing as Q2_K), scales: uint8[12] at 96 (6-bit sub-scales + 32:
// low nibbles in scales[0..7], high 2 bits in scales[8..11]), d: fp16 at 108.
// Dequantized value = (d*(sc - 32))*(c - 4).
// Quantizer: spec §10 (reference, §13.2 search) and §14.4 (importance matrix, §13.1 searches).
import { f16ToF32, f32ToF16, nearestInt } from '../common';
import { f32At, imatrixWeights256, packCodes2, quantizeBlockRows, storeAQ } from './pack';
import { makeQ3Quants16, q3Codes16 } from './q3_search';
import { makeQxQuants, makeQxQuants4 } from './qx_search';
import { nearestIntV, quantDiv } from './searches';

export const Q3_K_BLOCK: i32 = 256;
export const Q3_K_BYTES: i32 = 110;

const L = memory.data(256);
const W = memory.data(256 * 4);
const SC = memory.data(16 * 4);
const SW = memory.data(16 * 4);
const LS = memory.data(16, 16);
// SIMD build: the 16 sub-block scales d*(sc - 32) of the final pass.
const DJ = memory.data(16 * 4, 16);

// Packs one 6-bit stored scale l (0..63) of sub-block j into the 12 bytes at sc (zeroed first).
function packScale(sc: usize, j: i32, l: u32): void {
  if (j < 8) store<u8>(sc + <usize>j, <u8>(l & 15));
  else store<u8>(sc + <usize>(j - 8), <u8>(<u32>load<u8>(sc + <usize>(j - 8)) | ((l & 15) << 4)));
  const k = sc + 8 + <usize>(j & 3);
  store<u8>(k, <u8>(<u32>load<u8>(k) | ((l >> 4) << (2 * (j >> 2)))));
}

// Also the serving decoder's (serve/gguf.ts).
@inline export function q3Scale(sc: usize, j: i32): i32 {
  const lo = j < 8 ? <u32>load<u8>(sc + <usize>j) & 15 : <u32>load<u8>(sc + <usize>(j - 8)) >> 4;
  return <i32>(lo | (((<u32>load<u8>(sc + 8 + <usize>(j & 3)) >> (2 * (j >> 2))) & 3) << 4)) - 32;
}

// SIMD build: the 16 stored 6-bit scales (bytes 0..63 of u) -> the 12 scale bytes at sc, as
// packScale writes them: low nibbles of j and j + 8 in byte j < 8; bits 4-5 of j, j + 4, j + 8,
// j + 12 in byte 8 + j (shifted 0, 2, 4, 6). Values stay below 256 per byte, so 16-bit shifts
// move no bit across bytes.
@inline function packScales16(u: v128, sc: usize): void {
  const lo = v128.and(u, i8x16.splat(15));
  const lo8 = v128.or(lo, i16x8.shl(i8x16.shuffle(lo, lo, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15), 4));
  const hi = i8x16.shr_u(u, 4);
  const h4 = v128.or(
    v128.or(hi, i16x8.shl(i8x16.shuffle(hi, hi, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7), 2)),
    v128.or(i16x8.shl(i8x16.shuffle(hi, hi, 8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11), 4),
      i16x8.shl(i8x16.shuffle(hi, hi, 12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15), 6)),
  );
  store<u64>(sc, i64x2.extract_lane(lo8, 0));
  store<u32>(sc + 8, i32x4.extract_lane(h4, 0));
}

// SIMD build: the scale of largest magnitude among the 16 at SC, the first one on ties, +0 when
// none is above 0 (NaN never wins), as the scalar scan "if (|s| > amax)" finds it.
function maxScale16(): f32 {
  let a0 = f32x4.abs(v128.load(SC)), a1 = f32x4.abs(v128.load(SC, 16));
  let a2 = f32x4.abs(v128.load(SC, 32)), a3 = f32x4.abs(v128.load(SC, 48));
  a0 = v128.and(a0, f32x4.eq(a0, a0));
  a1 = v128.and(a1, f32x4.eq(a1, a1));
  a2 = v128.and(a2, f32x4.eq(a2, a2));
  a3 = v128.and(a3, f32x4.eq(a3, a3));
  // No NaN is left and every value is >= +0: integer max on the bits is the float max.
  let m = i32x4.max_s(i32x4.max_s(a0, a1), i32x4.max_s(a2, a3));
  m = i32x4.max_s(m, v128.shuffle<i32>(m, m, 2, 3, 0, 1));
  m = i32x4.max_s(m, v128.shuffle<i32>(m, m, 1, 0, 3, 2));
  if (!(f32x4.extract_lane(m, 0) > 0)) return 0;
  const first = <u32>i32x4.bitmask(f32x4.eq(a0, m)) | (<u32>i32x4.bitmask(f32x4.eq(a1, m)) << 4)
    | (<u32>i32x4.bitmask(f32x4.eq(a2, m)) << 8) | (<u32>i32x4.bitmask(f32x4.eq(a3, m)) << 12);
  return load<f32>(SC + (<usize>ctz(first) << 2));
}

// SIMD build: scales l (i32, -32..31) of sub-blocks 4k..4k+3 -> DJ = d * l, as d * q3Scale.
@inline function storeDJ(k: usize, l: v128, d: f32): void {
  v128.store(DJ + (k << 4), f32x4.mul(f32x4.splat(d), f32x4.convert_i32x4_s(l)));
}

// SIMD build: final codes of every sub-block whose scale dj is non-zero, as quantDiv computes them
// (nearest_int(x / dj) clamped to -4..3, + 4); the others keep the search's codes (q3: those of
// make_q3_quants, fetched here).
function finalCodes16(x: usize, q3: bool): void {
  if (q3) {
    // make_q3_quants' codes of the sub-blocks that keep them.
    const z = f32x4.splat(0);
    q3Codes16(L, <u32>i32x4.bitmask(f32x4.eq(v128.load(DJ), z)) | (<u32>i32x4.bitmask(f32x4.eq(v128.load(DJ, 16), z)) << 4)
      | (<u32>i32x4.bitmask(f32x4.eq(v128.load(DJ, 32), z)) << 8) | (<u32>i32x4.bitmask(f32x4.eq(v128.load(DJ, 48), z)) << 12));
  }
  for (let j: usize = 0; j < 16; j++) {
    const dj = load<f32>(DJ + (j << 2));
    if (dj == 0) continue;
    const vd = f32x4.splat(dj);
    const p = x + (j << 6);
    const lo = i32x4.splat(-4);
    const hi = i32x4.splat(3);
    const qa = i32x4.min_s(hi, i32x4.max_s(lo, nearestIntV(f32x4.div(v128.load(p), vd))));
    const qb = i32x4.min_s(hi, i32x4.max_s(lo, nearestIntV(f32x4.div(v128.load(p, 16), vd))));
    const qc = i32x4.min_s(hi, i32x4.max_s(lo, nearestIntV(f32x4.div(v128.load(p, 32), vd))));
    const qe = i32x4.min_s(hi, i32x4.max_s(lo, nearestIntV(f32x4.div(v128.load(p, 48), vd))));
    const b = i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(qa, qb), i16x8.narrow_i32x4_s(qc, qe));
    v128.store(L + (j << 4), i8x16.add(b, i8x16.splat(4)));
  }
}

// SIMD build of the scale steps and the final pass of quantizeBlock: the same values, the 16
// scales quantized, packed and applied as vectors instead of one sub-block at a time.
function scalesAndCodesSimd(x: usize, qw: usize, y: usize): void {
  const sc = y + 96;
  let l0 = i32x4.splat(0), l1 = l0, l2 = l0, l3 = l0;
  if (qw == 0) {
    makeQ3Quants16(x, L, SC);
    const maxScale = maxScale16();
    if (maxScale == 0) {
      // Scale bytes 0 and d = 0: every dj is 0 and make_q3_quants' codes stay.
      memory.fill(sc, 0, 12);
      store<u16>(y + 108, 0);
      q3Codes16(L, 0xffff);
      return;
    }
    const iscale: f32 = <f32>-32 / maxScale;
    const vi = f32x4.splat(iscale);
    // l = clamp((i8) nearest_int(iscale * s), -32, 31), the i8 wrap as the scalar cast.
    const lo = i32x4.splat(-32);
    const hi = i32x4.splat(31);
    l0 = i32x4.min_s(hi, i32x4.max_s(lo, i32x4.shr_s(i32x4.shl(nearestIntV(f32x4.mul(vi, v128.load(SC))), 24), 24)));
    l1 = i32x4.min_s(hi, i32x4.max_s(lo, i32x4.shr_s(i32x4.shl(nearestIntV(f32x4.mul(vi, v128.load(SC, 16))), 24), 24)));
    l2 = i32x4.min_s(hi, i32x4.max_s(lo, i32x4.shr_s(i32x4.shl(nearestIntV(f32x4.mul(vi, v128.load(SC, 32))), 24), 24)));
    l3 = i32x4.min_s(hi, i32x4.max_s(lo, i32x4.shr_s(i32x4.shl(nearestIntV(f32x4.mul(vi, v128.load(SC, 48))), 24), 24)));
    const u = i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(l0, l1), i16x8.narrow_i32x4_s(l2, l3));
    packScales16(i8x16.add(u, i8x16.splat(32)), sc);
    store<u16>(y + 108, f32ToF16(1 / iscale));
  } else {
    imatrixWeights256(x, qw, 2, 16, W, SW);
    for (let g = 0; g < 4; g++) {
      const o = <usize>g << 8;
      makeQxQuants4(16, 4, x + o, W + o, L + (<usize>g << 6), SC + (<usize>g << 4));
    }
    store<u16>(y + 108, f32ToF16(makeQxQuants(16, 32, SC, LS, SW)));
    const u = v128.load(LS);
    packScales16(u, sc);
    const m = i16x8.sub(i16x8.extend_low_i8x16_u(u), i16x8.splat(32));
    const n = i16x8.sub(i16x8.extend_high_i8x16_u(u), i16x8.splat(32));
    l0 = i32x4.extend_low_i16x8_s(m);
    l1 = i32x4.extend_high_i16x8_s(m);
    l2 = i32x4.extend_low_i16x8_s(n);
    l3 = i32x4.extend_high_i16x8_s(n);
  }
  // Final pass with the stored (fp16) super-scale.
  const d = f16ToF32(<u32>load<u16>(y + 108));
  storeDJ(0, l0, d);
  storeDJ(1, l1, d);
  storeDJ(2, l2, d);
  storeDJ(3, l3, d);
  finalCodes16(x, qw == 0);
}

function quantizeBlock(x: usize, qw: usize, y: usize): void {
  const sc = y + 96;
  if (ASC_FEATURE_SIMD) {
    scalesAndCodesSimd(x, qw, y);
  } else {
    memory.fill(sc, 0, 12);
    if (qw == 0) {
      let amax: f32 = 0;
      let maxScale: f32 = 0;
      makeQ3Quants16(x, L, SC);
      for (let j = 0; j < 16; j++) {
        const s = f32At(SC, j);
        const a = Mathf.abs(s);
        if (a > amax) {
          amax = a;
          maxScale = s;
        }
      }
      if (maxScale != 0) {
        const iscale: f32 = <f32>-32 / maxScale;
        for (let j = 0; j < 16; j++) {
          const l = <i32>(<i8>nearestInt(iscale * f32At(SC, j)));
          packScale(sc, j, <u32>(min(31, max(-32, l)) + 32));
        }
        store<u16>(y + 108, f32ToF16(1 / iscale));
      } else {
        store<u16>(y + 108, 0);
      }
    } else {
      imatrixWeights256(x, qw, 2, 16, W, SW);
      for (let g = 0; g < 4; g++) {
        const o = <usize>g << 8;
        makeQxQuants4(16, 4, x + o, W + o, L + (<usize>g << 6), SC + (<usize>g << 4));
      }
      const dBlock = makeQxQuants(16, 32, SC, LS, SW);
      for (let j = 0; j < 16; j++) packScale(sc, j, <u32>load<u8>(LS + <usize>j));
      store<u16>(y + 108, f32ToF16(dBlock));
    }
    // Final pass with the stored (fp16) super-scale.
    const d = f16ToF32(<u32>load<u16>(y + 108));
    for (let j = 0; j < 16; j++) {
      const dj: f32 = d * <f32>q3Scale(sc, j);
      if (dj == 0) continue;
      quantDiv(x + (<usize>j << 6), 16, false, 0, dj, -4, 3, 4, L + (<usize>j << 4));
    }
  }
  // hmask: bit e/32 of hmask[e % 32] for codes > 3, which then lose the 4.
  if (ASC_FEATURE_SIMD) {
    const three = i8x16.splat(3);
    for (let k = 0; k < 2; k++) {
      let hm = i8x16.splat(0);
      for (let b = 0; b < 8; b++) {
        const p = L + (<usize>b << 5) + (<usize>k << 4);
        const v = v128.load(p);
        const hi = i8x16.gt_u(v, three);
        hm = v128.or(hm, v128.and(hi, i8x16.splat(<i8>(<u8>1 << <u8>b))));
        v128.store(p, v128.and(v, three));
      }
      v128.store(y + (<usize>k << 4), hm);
    }
  } else {
    memory.fill(y, 0, 32);
    for (let e = 0; e < 256; e++) {
      const c = <u32>load<u8>(L + <usize>e);
      if (c > 3) {
        const p = y + <usize>(e & 31);
        store<u8>(p, <u8>(<u32>load<u8>(p) | (<u32>1 << (e >> 5))));
        store<u8>(L + <usize>e, <u8>(c - 4));
      }
    }
  }
  packCodes2(L, y + 32);
}

export function q3_k_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 110, quantizeBlock);
}

// SIMD decode: the block's 16 scales d*(sc - 32), unpacked from the 12 bytes with u32 masks
// (scales[8..11]'s four 2-bit fields under each group of four low nibbles) and converted at once.
const DQ = memory.data(16 * 4, 16);

@inline function q3BlockScales(sc: usize, d: f32): void {
  const a0 = load<u32>(sc);
  const a1 = load<u32>(sc, 4);
  const t = load<u32>(sc, 8);
  const m4: u32 = 0x0f0f0f0f;
  const m2: u32 = 0x03030303;
  let v = i32x4.splat(<i32>((a0 & m4) | ((t & m2) << 4)));
  v = i32x4.replace_lane(v, 1, <i32>((a1 & m4) | (((t >> 2) & m2) << 4)));
  v = i32x4.replace_lane(v, 2, <i32>(((a0 >> 4) & m4) | (((t >> 4) & m2) << 4)));
  v = i32x4.replace_lane(v, 3, <i32>(((a1 >> 4) & m4) | (((t >> 6) & m2) << 4)));
  storeAQ(DQ, i8x16.sub(v, i8x16.splat(32)), f32x4.splat(d));
}

// 16 values of sub-block sb: 2-bit codes at bit `shift` of q, high bit `bit` of hm (code - 4
// where it is clear).
@inline function q3Sub16(q: v128, hm: v128, shift: i32, bit: i32, sb: usize, y: usize): void {
  const low = v128.and(i16x8.shr_u(q, shift), i8x16.splat(3));
  const bm = i8x16.splat(<i8>bit);
  const clear = i8x16.eq(v128.and(hm, bm), i8x16.splat(0));
  storeAQ(y, i8x16.add(low, v128.and(clear, i8x16.splat(-4))), v128.load32_splat(DQ + (sb << 2)));
}

// Sub-blocks 8h + 2j + k of half h: shift 2j, high bit 4h + j, codes q0 / q1, hmask hm0 / hm1.
@inline function q3Half(q0: v128, q1: v128, hm0: v128, hm1: v128, h: i32, y: usize): void {
  const sb = <usize>(8 * h);
  const hb = 4 * h;
  const yh = y + (<usize>(128 * h) << 2);
  q3Sub16(q0, hm0, 0, 1 << hb, sb, yh);
  q3Sub16(q1, hm1, 0, 1 << hb, sb + 1, yh + 64);
  q3Sub16(q0, hm0, 2, 2 << hb, sb + 2, yh + 128);
  q3Sub16(q1, hm1, 2, 2 << hb, sb + 3, yh + 192);
  q3Sub16(q0, hm0, 4, 4 << hb, sb + 4, yh + 256);
  q3Sub16(q1, hm1, 4, 4 << hb, sb + 5, yh + 320);
  q3Sub16(q0, hm0, 6, 8 << hb, sb + 6, yh + 384);
  q3Sub16(q1, hm1, 6, 8 << hb, sb + 7, yh + 448);
}

export function q3_k_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 110;
    const d = f16ToF32(<u32>load<u16>(blk + 108));
    const sc = blk + 96;
    const y = dst + (b << 10);
    if (ASC_FEATURE_SIMD) {
      q3BlockScales(sc, d);
      const hm0 = v128.load(blk);
      const hm1 = v128.load(blk + 16);
      q3Half(v128.load(blk + 32), v128.load(blk + 48), hm0, hm1, 0, y);
      q3Half(v128.load(blk + 64), v128.load(blk + 80), hm0, hm1, 1, y);
      continue;
    }
    for (let h = 0; h < 2; h++) {
      for (let j = 0; j < 4; j++) {
        for (let k = 0; k < 2; k++) {
          // elements e = 128h + 32j + 16k + l: sub-block 8h + 2j + k, hmask bit 4h + j
          const dl: f32 = d * <f32>q3Scale(sc, 8 * h + 2 * j + k);
          const q = blk + 32 + (<usize>h << 5) + (<usize>k << 4);
          const hm = blk + (<usize>k << 4);
          const ye = y + ((<usize>(128 * h + 32 * j + 16 * k)) << 2);
          const hb = 4 * h + j;
          for (let l = 0; l < 16; l++) {
            const low = <i32>((<u32>load<u8>(q + <usize>l) >> (2 * j)) & 3);
            const hbit = (<u32>load<u8>(hm + <usize>l) >> hb) & 1;
            store<f32>(ye + (<usize>l << 2), dl * <f32>(low - (hbit != 0 ? 0 : 4)));
          }
        }
      }
    }
  }
}
