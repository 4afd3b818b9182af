// IQ4_NL (ggml type 20): blocks of 32 values, 18 bytes, 4.5 bits per weight.
// Layout as Q4_0 (d: fp16 at 0, qs: uint8[16] at 2, element j low nibble, j+16 high); nibbles
// index the non-linear grid KVALUES. Dequantized value = d * KVALUES[nibble].
// Quantizer: what ggml_quantize_chunk (llama-quantize) runs, spec §6 chunk path: the IQ4 block
// search (§13.5, ntry = 7) with weights x^2, or with an importance matrix qw*sqrt(sigma2 + x^2),
// sigma2 = sum(x^2)*(2/32) over the 32-value block (§14.7); codes best_index(x * (1/d)) with
// the fp32 d. Blocks below 1e-15 store d = 0 and nibbles 8.
import { A_IMATRIX, A_SCRATCH, GROUP_MAX_EPS, argU32, f16ToF32, f32ToF16, rowF32 } from '../common';
import { absmax32, imatrixWeights32, iq4Codes32, iq4Dequant32, squareWeights32, sumSquares } from './iq4_common';
import { iq4Search } from './iq4_search';

export const IQ4_NL_BLOCK: i32 = 32;
export const IQ4_NL_BYTES: i32 = 18;

const weights = memory.data(128, 16);

function quantizeBlock(x: usize, qw: usize, y: usize): void {
  const max = absmax32(x);
  if (Mathf.abs(max) < GROUP_MAX_EPS) {
    store<u16>(y, 0);
    memory.fill(y + 2, 0x88, 16);
    return;
  }
  if (qw != 0) {
    const sigma2: f32 = sumSquares(x, 32) * (<f32>2 / <f32>32);
    imatrixWeights32(x, qw, sigma2, weights);
  } else {
    squareWeights32(x, weights);
  }
  const d = iq4Search(x, weights, max);
  // d is NaN only as 0/0 (every weight zero, spec §16.2): x86's default NaN, stored 0xFE00.
  store<u16>(y, d != d ? <u16>0xfe00 : f32ToF16(d));
  iq4Codes32(x, d != 0 ? 1 / d : 0, y + 2);
}

export function iq4_nl_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const scratch = argU32(args, A_SCRATCH);
  const qw = argU32(args, A_IMATRIX);
  const nb = rowLen >> 5;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const y = dst + <usize>r * <usize>nb * 18;
    for (let b = 0; b < nb; b++) {
      quantizeBlock(x + (<usize>b << 7), qw != 0 ? qw + (<usize>b << 7) : 0, y + <usize>b * 18);
    }
  }
}

export function iq4_nl_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  const nblocks = (<usize>nrows * <usize>rowLen) >> 5;
  for (let b: usize = 0; b < nblocks; b++) {
    const blk = src + b * 18;
    iq4Dequant32(blk + 2, f16ToF32(<u32>load<u16>(blk)), dst + (b << 7));
  }
}
