// IQ4_XS (ggml type 23): super-blocks of 256 values, 136 bytes, 4.25 bits per weight.
// Layout: d: fp16 at 0, scales_h: uint16 LE at 2, scales_l: uint8[4] at 4, qs: uint8[128] at 8;
// sub-block ib (32 values) uses qs[16ib..] in the IQ4_NL nibble order and the 6-bit scale
// ls = low nibble (scales_l[ib/2], ib odd: high) | 2 bits of scales_h << 4.
// Dequantized value = (d * (ls - 32)) * KVALUES[nibble].
// Quantizer (spec §12, §14.7): per sub-block the IQ4 search (§13.5, ntry = 7) with weights x^2 or
// qw*sqrt(sigma2 + x^2), sigma2 = sum(x^2)*(2/256) over the super-block; d = -max_scale/32;
// l = clamp(nearest_int(scale/d), -32, 31); codes best_index(x / (d*l)) with the fp32 d.
import { GROUP_MAX_EPS, f16ToF32, f32ToF16, nearestInt } from '../common';
import { quantizeBlockRows } from './pack';
import { absmax32, imatrixWeights32, iq4Codes32, iq4Dequant32, squareWeights32, sumSquares } from './iq4_common';
import { iq4Search } from './iq4_search';

export const IQ4_XS_BLOCK: i32 = 256;
export const IQ4_XS_BYTES: i32 = 136;

const weights = memory.data(128, 16);
const scales = memory.data(32, 16);

function quantizeSuperBlock(x: usize, qw: usize, y: usize): void {
  const sigma2: f32 = qw != 0 ? sumSquares(x, 256) * (<f32>2 / <f32>256) : 0;
  let maxScale: f32 = 0;
  let amaxScale: f32 = 0;
  for (let ib: usize = 0; ib < 8; ib++) {
    const xb = x + (ib << 7);
    const max = absmax32(xb);
    let d: f32 = 0;
    if (Mathf.abs(max) >= GROUP_MAX_EPS) {
      if (qw != 0) imatrixWeights32(xb, qw + (ib << 7), sigma2, weights);
      else squareWeights32(xb, weights);
      d = iq4Search(xb, weights, max);
    }
    store<f32>(scales + (ib << 2), d);
    // A NaN scale (all weights zero, spec §16.2) never wins this comparison.
    const ad = Mathf.abs(d);
    if (ad > amaxScale) {
      amaxScale = ad;
      maxScale = d;
    }
  }
  const d: f32 = -maxScale / 32;
  store<u16>(y, f32ToF16(d));
  const id: f32 = d != 0 ? 1 / d : 0;
  let sh: u32 = 0;
  let sl: u32 = 0;
  for (let ib: usize = 0; ib < 8; ib++) {
    const s = load<f32>(scales + (ib << 2));
    // nearest_int(NaN) is 0 with x86's (and wasm's canonical) NaN; spelled out here.
    const l = s != s ? 0 : max(-32, min(31, nearestInt(id * s)));
    const dl: f32 = d * <f32>l;
    iq4Codes32(x + (ib << 7), dl != 0 ? 1 / dl : 0, y + 8 + (ib << 4));
    const ls = <u32>(l + 32);
    sl |= (ls & 15) << (<u32>ib << 2);
    sh |= (ls >> 4) << (<u32>ib << 1);
  }
  store<u16>(y, <u16>sh, 2);
  store<u32>(y, sl, 4);
}

export function iq4_xs_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 136, quantizeSuperBlock);
}

export function iq4_xs_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 8;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 136;
    const d = f16ToF32(<u32>load<u16>(blk));
    const sh = <u32>load<u16>(blk, 2);
    const y = dst + (b << 10);
    for (let ib: usize = 0; ib < 8; ib++) {
      const ls = ((<u32>load<u8>(blk + 4 + (ib >> 1)) >> (<u32>(ib & 1) << 2)) & 15) | (((sh >> (<u32>ib << 1)) & 3) << 4);
      iq4Dequant32(blk + 8 + (ib << 4), d * <f32>(<i32>ls - 32), y + (ib << 7));
    }
  }
}
