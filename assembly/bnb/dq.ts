// Double quantization of the NF4/FP4 block absmax values, bitsandbytes' (compress_statistics):
// the block absmax values minus their tensor-wide mean (the `offset`, computed by the prepare hook
// through bnb4_absmax_sum) are quantized to 8 bits with bitsandbytes' signed dynamic map, in groups
// of 256 over the flattened tensor's blocks (block b of row r is number r*nb + b), so groups cross
// rows. Each group's f32 absmax is computed first over the whole tensor (bnb4_nested_absmax) and
// read by the kernels from aux; A_ROW0 says which rows a call holds, so any split of the rows into
// chunks gives the same bytes.
// Dequantized absmax = DYN[q] * groupAbsmax + offset (f32, no FMA).
import { A_GROUP, A_ROW0, A_SCRATCH, argI32, argU32, rowF32 } from '../common';
import { absmax } from './lut';

// bitsandbytes create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): for i = 0..6 the
// 2^i midpoints of linspace(0.1, 1, 2^i + 1) times 10^(i-6), both signs, plus 0 and 1.0, sorted.
// Entry = the exact value (2^(i+1) + 18k + 9) / (2^(i+1) * 10^(7-i)) rounded once to f32 (bitsandbytes
// evaluates the same formula in float32 torch ops, which may differ in the last bit of some entries).
// Index 127 is 0, index 255 is 1.0, index 0 is about -0.99297, the smallest magnitude 5.5e-7.
export const DYN = memory.data<u32>([
  0xbf7e3333, 0xbf7a999a, 0xbf770000, 0xbf736666, 0xbf6fcccd, 0xbf6c3333, 0xbf68999a, 0xbf650000,
  0xbf616666, 0xbf5dcccd, 0xbf5a3333, 0xbf56999a, 0xbf530000, 0xbf4f6666, 0xbf4bcccd, 0xbf483333,
  0xbf44999a, 0xbf410000, 0xbf3d6666, 0xbf39cccd, 0xbf363333, 0xbf32999a, 0xbf2f0000, 0xbf2b6666,
  0xbf27cccd, 0xbf243333, 0xbf20999a, 0xbf1d0000, 0xbf196666, 0xbf15cccd, 0xbf123333, 0xbf0e999a,
  0xbf0b0000, 0xbf076666, 0xbf03cccd, 0xbf003333, 0xbef93333, 0xbef20000, 0xbeeacccd, 0xbee3999a,
  0xbedc6666, 0xbed53333, 0xbece0000, 0xbec6cccd, 0xbebf999a, 0xbeb86666, 0xbeb13333, 0xbeaa0000,
  0xbea2cccd, 0xbe9b999a, 0xbe946666, 0xbe8d3333, 0xbe860000, 0xbe7d999a, 0xbe6f3333, 0xbe60cccd,
  0xbe526666, 0xbe440000, 0xbe35999a, 0xbe273333, 0xbe18cccd, 0xbe0a6666, 0xbdf80000, 0xbddb3333,
  0xbdc9eb85, 0xbdc428f6, 0xbdbe6666, 0xbdb8a3d7, 0xbdb2e148, 0xbdad1eb8, 0xbda75c29, 0xbda1999a,
  0xbd9bd70a, 0xbd96147b, 0xbd9051ec, 0xbd8a8f5c, 0xbd84cccd, 0xbd7e147b, 0xbd728f5c, 0xbd670a3d,
  0xbd5b851f, 0xbd500000, 0xbd447ae1, 0xbd38f5c3, 0xbd2d70a4, 0xbd21eb85, 0xbd166666, 0xbd0ae148,
  0xbcfeb852, 0xbce7ae14, 0xbcd0a3d7, 0xbcb9999a, 0xbca28f5c, 0xbc8b851f, 0xbc68f5c3, 0xbc3ae148,
  0xbc1f3b64, 0xbc160419, 0xbc0ccccd, 0xbc039581, 0xbbf4bc6a, 0xbbe24dd3, 0xbbcfdf3b, 0xbbbd70a4,
  0xbbab020c, 0xbb989375, 0xbb8624dd, 0xbb676c8b, 0xbb428f5c, 0xbb1db22d, 0xbaf1a9fc, 0xbaa7ef9e,
  0xba7765fe, 0xba59e83e, 0xba3c6a7f, 0xba1eecc0, 0xba016f00, 0xb9c7e282, 0xb98ce704, 0xb923d70a,
  0xb8ba1f4b, 0xb88aefb3, 0xb8378034, 0xb7b24207, 0xb70205ff, 0xb65a1a93, 0xb513a3b6, 0x00000000,
  0x3513a3b6, 0x365a1a93, 0x370205ff, 0x37b24207, 0x38378034, 0x388aefb3, 0x38ba1f4b, 0x3923d70a,
  0x398ce704, 0x39c7e282, 0x3a016f00, 0x3a1eecc0, 0x3a3c6a7f, 0x3a59e83e, 0x3a7765fe, 0x3aa7ef9e,
  0x3af1a9fc, 0x3b1db22d, 0x3b428f5c, 0x3b676c8b, 0x3b8624dd, 0x3b989375, 0x3bab020c, 0x3bbd70a4,
  0x3bcfdf3b, 0x3be24dd3, 0x3bf4bc6a, 0x3c039581, 0x3c0ccccd, 0x3c160419, 0x3c1f3b64, 0x3c3ae148,
  0x3c68f5c3, 0x3c8b851f, 0x3ca28f5c, 0x3cb9999a, 0x3cd0a3d7, 0x3ce7ae14, 0x3cfeb852, 0x3d0ae148,
  0x3d166666, 0x3d21eb85, 0x3d2d70a4, 0x3d38f5c3, 0x3d447ae1, 0x3d500000, 0x3d5b851f, 0x3d670a3d,
  0x3d728f5c, 0x3d7e147b, 0x3d84cccd, 0x3d8a8f5c, 0x3d9051ec, 0x3d96147b, 0x3d9bd70a, 0x3da1999a,
  0x3da75c29, 0x3dad1eb8, 0x3db2e148, 0x3db8a3d7, 0x3dbe6666, 0x3dc428f6, 0x3dc9eb85, 0x3ddb3333,
  0x3df80000, 0x3e0a6666, 0x3e18cccd, 0x3e273333, 0x3e35999a, 0x3e440000, 0x3e526666, 0x3e60cccd,
  0x3e6f3333, 0x3e7d999a, 0x3e860000, 0x3e8d3333, 0x3e946666, 0x3e9b999a, 0x3ea2cccd, 0x3eaa0000,
  0x3eb13333, 0x3eb86666, 0x3ebf999a, 0x3ec6cccd, 0x3ece0000, 0x3ed53333, 0x3edc6666, 0x3ee3999a,
  0x3eeacccd, 0x3ef20000, 0x3ef93333, 0x3f003333, 0x3f03cccd, 0x3f076666, 0x3f0b0000, 0x3f0e999a,
  0x3f123333, 0x3f15cccd, 0x3f196666, 0x3f1d0000, 0x3f20999a, 0x3f243333, 0x3f27cccd, 0x3f2b6666,
  0x3f2f0000, 0x3f32999a, 0x3f363333, 0x3f39cccd, 0x3f3d6666, 0x3f410000, 0x3f44999a, 0x3f483333,
  0x3f4bcccd, 0x3f4f6666, 0x3f530000, 0x3f56999a, 0x3f5a3333, 0x3f5dcccd, 0x3f616666, 0x3f650000,
  0x3f68999a, 0x3f6c3333, 0x3f6fcccd, 0x3f736666, 0x3f770000, 0x3f7a999a, 0x3f7e3333, 0x3f800000
]);

// MID[k] = f32((DYN[k] + DYN[k+1]) / 2): the code of v is the number of midpoints strictly below v,
// so a value on a midpoint takes the lower entry.
const MID = memory.data<u32>([
  0xbf7c6666, 0xbf78cccd, 0xbf753333, 0xbf71999a, 0xbf6e0000, 0xbf6a6666, 0xbf66cccd, 0xbf633333,
  0xbf5f999a, 0xbf5c0000, 0xbf586666, 0xbf54cccd, 0xbf513333, 0xbf4d999a, 0xbf4a0000, 0xbf466666,
  0xbf42cccd, 0xbf3f3333, 0xbf3b999a, 0xbf380000, 0xbf346666, 0xbf30cccd, 0xbf2d3333, 0xbf29999a,
  0xbf260000, 0xbf226666, 0xbf1ecccd, 0xbf1b3333, 0xbf17999a, 0xbf140000, 0xbf106666, 0xbf0ccccd,
  0xbf093333, 0xbf05999a, 0xbf020000, 0xbefccccc, 0xbef5999a, 0xbeee6666, 0xbee73334, 0xbee00000,
  0xbed8cccc, 0xbed1999a, 0xbeca6666, 0xbec33334, 0xbebc0000, 0xbeb4cccc, 0xbead999a, 0xbea66666,
  0xbe9f3334, 0xbe980000, 0xbe90cccc, 0xbe89999a, 0xbe826666, 0xbe766666, 0xbe680000, 0xbe59999a,
  0xbe4b3333, 0xbe3ccccd, 0xbe2e6666, 0xbe200000, 0xbe11999a, 0xbe033333, 0xbde9999a, 0xbdd28f5c,
  0xbdc70a3e, 0xbdc147ae, 0xbdbb851e, 0xbdb5c290, 0xbdb00000, 0xbdaa3d70, 0xbda47ae2, 0xbd9eb852,
  0xbd98f5c2, 0xbd933334, 0xbd8d70a4, 0xbd87ae14, 0xbd81eb85, 0xbd7851ec, 0xbd6ccccc, 0xbd6147ae,
  0xbd55c290, 0xbd4a3d70, 0xbd3eb852, 0xbd333334, 0xbd27ae14, 0xbd1c28f6, 0xbd10a3d7, 0xbd051eb8,
  0xbcf33333, 0xbcdc28f6, 0xbcc51eb8, 0xbcae147b, 0xbc970a3e, 0xbc800000, 0xbc51eb86, 0xbc2d0e56,
  0xbc1a9fbe, 0xbc116873, 0xbc083127, 0xbbfdf3b6, 0xbbeb851e, 0xbbd91687, 0xbbc6a7f0, 0xbbb43958,
  0xbba1cac0, 0xbb8f5c29, 0xbb79db22, 0xbb54fdf4, 0xbb3020c4, 0xbb0b4396, 0xbacccccd, 0xba91d14e,
  0xba68a71e, 0xba4b295e, 0xba2daba0, 0xba102de0, 0xb9e56041, 0xb9aa64c3, 0xb95ed289, 0xb9007358,
  0xb8a2877f, 0xb866afcd, 0xb808509c, 0xb7734506, 0xb6b88ca4, 0xb5ff0380, 0xb493a3b6, 0x3493a3b6,
  0x35ff0380, 0x36b88ca4, 0x37734506, 0x3808509c, 0x3866afcd, 0x38a2877f, 0x39007358, 0x395ed289,
  0x39aa64c3, 0x39e56041, 0x3a102de0, 0x3a2daba0, 0x3a4b295e, 0x3a68a71e, 0x3a91d14e, 0x3acccccd,
  0x3b0b4396, 0x3b3020c4, 0x3b54fdf4, 0x3b79db22, 0x3b8f5c29, 0x3ba1cac0, 0x3bb43958, 0x3bc6a7f0,
  0x3bd91687, 0x3beb851e, 0x3bfdf3b6, 0x3c083127, 0x3c116873, 0x3c1a9fbe, 0x3c2d0e56, 0x3c51eb86,
  0x3c800000, 0x3c970a3e, 0x3cae147b, 0x3cc51eb8, 0x3cdc28f6, 0x3cf33333, 0x3d051eb8, 0x3d10a3d7,
  0x3d1c28f6, 0x3d27ae14, 0x3d333334, 0x3d3eb852, 0x3d4a3d70, 0x3d55c290, 0x3d6147ae, 0x3d6ccccc,
  0x3d7851ec, 0x3d81eb85, 0x3d87ae14, 0x3d8d70a4, 0x3d933334, 0x3d98f5c2, 0x3d9eb852, 0x3da47ae2,
  0x3daa3d70, 0x3db00000, 0x3db5c290, 0x3dbb851e, 0x3dc147ae, 0x3dc70a3e, 0x3dd28f5c, 0x3de9999a,
  0x3e033333, 0x3e11999a, 0x3e200000, 0x3e2e6666, 0x3e3ccccd, 0x3e4b3333, 0x3e59999a, 0x3e680000,
  0x3e766666, 0x3e826666, 0x3e89999a, 0x3e90cccc, 0x3e980000, 0x3e9f3334, 0x3ea66666, 0x3ead999a,
  0x3eb4cccc, 0x3ebc0000, 0x3ec33334, 0x3eca6666, 0x3ed1999a, 0x3ed8cccc, 0x3ee00000, 0x3ee73334,
  0x3eee6666, 0x3ef5999a, 0x3efccccc, 0x3f020000, 0x3f05999a, 0x3f093333, 0x3f0ccccd, 0x3f106666,
  0x3f140000, 0x3f17999a, 0x3f1b3333, 0x3f1ecccd, 0x3f226666, 0x3f260000, 0x3f29999a, 0x3f2d3333,
  0x3f30cccd, 0x3f346666, 0x3f380000, 0x3f3b999a, 0x3f3f3333, 0x3f42cccd, 0x3f466666, 0x3f4a0000,
  0x3f4d999a, 0x3f513333, 0x3f54cccd, 0x3f586666, 0x3f5c0000, 0x3f5f999a, 0x3f633333, 0x3f66cccd,
  0x3f6a6666, 0x3f6e0000, 0x3f71999a, 0x3f753333, 0x3f78cccd, 0x3f7c6666, 0x3f7f199a
]);

@inline export function dynValue(q: u32): f32 {
  return load<f32>(DYN + (<usize>q << 2));
}

// Branch-free lower bound: after the step of size 2^k, c is the count of midpoints below v among
// the first c + 2^k - 1.
function nearestDyn(v: f32): u32 {
  let c: u32 = 0;
  for (let step: u32 = 128; step > 0; step >>= 1) c += <u32>(v > load<f32>(MID + (<usize>(c + step - 1) << 2))) * step;
  return c;
}

// Codes of the nb absmax values (at am) of the row whose first block is number first, with the
// group absmax values a2 of the whole tensor: the dynamic-map code of (a - offset) / gmax,
// multiplying by 1/gmax as bitsandbytes does (dividing where 1/gmax overflows: denormal gmax).
export function dqQuantizeRow(am: usize, nb: i32, offset: f32, first: usize, a2: usize, q: usize): void {
  for (let b = 0; b < nb; b++) {
    const gmax = load<f32>(a2 + (((first + <usize>b) >> 8) << 2));
    const inv: f32 = gmax != 0 ? 1 / gmax : 0;
    const d = load<f32>(am + (<usize>b << 2)) - offset;
    store<u8>(q + <usize>b, <u8>nearestDyn(inv == Infinity ? d / gmax : d * inv));
  }
}

// The nb absmax values of the row whose first block is number first, into out (f32).
export function dqDequantizeRow(q: usize, a2: usize, first: usize, nb: i32, offset: f32, out: usize): void {
  for (let b = 0; b < nb; b++) {
    const s = load<f32>(a2 + (((first + <usize>b) >> 8) << 2));
    store<f32>(out + (<usize>b << 2), dynValue(<u32>load<u8>(q + <usize>b)) * s + offset);
  }
}

// Reduction for the prepare hook: out[0] (f64) += every block absmax, in row-major block order;
// out[8] (f64) += the number of blocks. The host turns the sum into offset = f32(sum / count).
export function bnb4_absmax_sum(src: usize, srcType: i32, nrows: i32, rowLen: i32, out: usize, args: usize): void {
  const gs = argI32(args, A_GROUP);
  const scratch = argU32(args, A_SCRATCH);
  let sum = load<f64>(out);
  const nb = rowLen / gs;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    for (let b = 0; b < nb; b++) sum += <f64>absmax(x + (<usize>(b * gs) << 2), gs);
  }
  store<f64>(out, sum);
  store<f64>(out + 8, load<f64>(out + 8) + <f64>nrows * <f64>nb);
}

// Reduction for the prepare hook: out[0] holds the offset (f32, set by the host); out + 16 + 4g
// (f32) becomes the largest |absmax - offset| of the blocks of group g, the blocks numbered over the
// flattened tensor from row A_ROW0 of this call on.
export function bnb4_nested_absmax(src: usize, srcType: i32, nrows: i32, rowLen: i32, out: usize, args: usize): void {
  const gs = argI32(args, A_GROUP);
  const scratch = argU32(args, A_SCRATCH);
  const offset = load<f32>(out);
  const nb = rowLen / gs;
  const a2 = out + 16;
  for (let r = 0; r < nrows; r++) {
    const x = rowF32(src, srcType, r, rowLen, scratch);
    const first = <usize>(argI32(args, A_ROW0) + r) * <usize>nb;
    for (let b = 0; b < nb; b++) {
      const at = a2 + (((first + <usize>b) >> 8) << 2);
      store<f32>(at, Mathf.max(load<f32>(at), Mathf.abs(absmax(x + (<usize>(b * gs) << 2), gs) - offset)));
    }
  }
}
