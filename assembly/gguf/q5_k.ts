// Q5_K (ggml type 13): super-blocks of 256 = 8 sub-blocks x 32, 176 bytes, 5.5 bits per weight.
// Layout: d: fp16 at 0, dmin: fp16 at 2, scales: uint8[12] at 4 (k4 packing as Q4_K),
// qh: uint8[32] at 16, qs: uint8[128] at 48. Element 64c + 32t + l: low 4 bits = nibble t of
// qs[32c + l], bit 4 = bit (2c + t) of qh[l]. Dequantized value = (d*ls)*q - (dmin*lm).
// Quantizer: spec §11 (reference: Q4_K's algorithm with nmax 31, QKX (-0.5, 0.1, 15)) and §14.5.
import { quantizeBlockRows } from './pack';
import { KL, dequantizeK4, quantizeK4Header } from './q4_k';

export const Q5_K_BLOCK: i32 = 256;
export const Q5_K_BYTES: i32 = 176;

function quantizeBlock(x: usize, qw: usize, y: usize): void {
  quantizeK4Header(x, qw, y, 31);
  const qh = y + 16;
  const qs = y + 48;
  if (ASC_FEATURE_SIMD) {
    const mask = i8x16.splat(15);
    for (let h = 0; h < 2; h++) {
      let hb = i8x16.splat(0);
      for (let c = 0; c < 4; c++) {
        const p = KL + (<usize>c << 6) + (<usize>h << 4);
        const a = v128.load(p);
        const b2 = v128.load(p + 32);
        hb = v128.or(hb, i8x16.shl(i8x16.shr_u(a, 4), 2 * c));
        hb = v128.or(hb, i8x16.shl(i8x16.shr_u(b2, 4), 2 * c + 1));
        v128.store(qs + (<usize>c << 5) + (<usize>h << 4), v128.or(v128.and(a, mask), i8x16.shl(v128.and(b2, mask), 4)));
      }
      v128.store(qh + (<usize>h << 4), hb);
    }
  } else {
    memory.fill(qh, 0, 32);
    for (let c = 0; c < 4; c++) {
      for (let l = 0; l < 32; l++) {
        const p = KL + (<usize>c << 6) + <usize>l;
        let l1 = <u32>load<u8>(p);
        let l2 = <u32>load<u8>(p + 32);
        let h = <u32>load<u8>(qh + <usize>l);
        if (l1 > 15) { l1 -= 16; h |= <u32>1 << (2 * c); }
        if (l2 > 15) { l2 -= 16; h |= <u32>2 << (2 * c); }
        store<u8>(qh + <usize>l, <u8>h);
        store<u8>(qs + (<usize>c << 5) + <usize>l, <u8>(l1 | (l2 << 4)));
      }
    }
  }
}

export function q5_k_quantize(src: usize, srcType: i32, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  quantizeBlockRows(src, srcType, nrows, rowLen, dst, args, 256, 176, quantizeBlock);
}

export function q5_k_dequantize(src: usize, nrows: i32, rowLen: i32, dst: usize, args: usize): void {
  dequantizeK4(src, nrows, rowLen, dst, 176, true);
}
