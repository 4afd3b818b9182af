// Blocks of the low-bit GGUF types (IQ1/IQ2/IQ3, TQ1_0/TQ2_0, Q1_0/Q2_0), made from
// a seed so that the test and the script that records llama.cpp's dequantization of them
// (bench/llamacpp-decode.ts) build the same bytes.
import { f32ToF16 } from '../../src/util/half.js';
import { mulberry32 } from './data.js';

export interface LowBitType {
  /** Our format name (also ggml's function suffix). */
  name: string;
  block: number;
  bytes: number;
  /** Byte offset of the fp16 super-block scale, or 'iq1_m' (its four nibbles in the scales' top bits). */
  d: number | 'iq1_m';
}

export const LOW_BIT_TYPES: readonly LowBitType[] = [
  { name: 'iq2_xxs', block: 256, bytes: 66, d: 0 },
  { name: 'iq2_xs', block: 256, bytes: 74, d: 0 },
  { name: 'iq2_s', block: 256, bytes: 82, d: 0 },
  { name: 'iq3_xxs', block: 256, bytes: 98, d: 0 },
  { name: 'iq3_s', block: 256, bytes: 110, d: 0 },
  { name: 'iq1_s', block: 256, bytes: 50, d: 0 },
  { name: 'iq1_m', block: 256, bytes: 56, d: 'iq1_m' },
  { name: 'tq1_0', block: 256, bytes: 54, d: 52 },
  { name: 'tq2_0', block: 256, bytes: 66, d: 64 },
  { name: 'q1_0', block: 128, bytes: 18, d: 0 },
  { name: 'q2_0', block: 64, bytes: 18, d: 0 },
];

/** Writes the fp16 bits `h` as the block's super-block scale. */
export function setScale(t: LowBitType, blk: Uint8Array, h: number): void {
  if (t.d === 'iq1_m') {
    // IQ1_M keeps its fp16 scale in the top nibble of each of its four u16 scale words (bytes 48..55).
    for (let k = 0; k < 4; k++) blk[48 + 2 * k + 1] = (blk[48 + 2 * k + 1] & 0x0f) | (((h >> (4 * k)) & 0xf) << 4);
  } else {
    blk[t.d] = h & 0xff;
    blk[t.d + 1] = h >> 8;
  }
}

/**
 * `count` blocks of random bytes. `scales`: 'weights' sets every block's scale to a random fp16 of
 * a weight-like magnitude (2^-12 .. 2^-3, either sign); 'raw' leaves the random bits (so some
 * scales are subnormal, infinite or NaN).
 */
export function randomBlocks(t: LowBitType, count: number, seed: number, scales: 'weights' | 'raw'): Uint8Array {
  const rnd = mulberry32(seed);
  const out = new Uint8Array(count * t.bytes);
  for (let i = 0; i < out.length; i++) out[i] = Math.floor(rnd() * 256);
  if (scales === 'weights') {
    for (let b = 0; b < count; b++) {
      const v = (rnd() < 0.5 ? -1 : 1) * 2 ** (-12 + 9 * rnd());
      setScale(t, out.subarray(b * t.bytes, (b + 1) * t.bytes), f32ToF16(v));
    }
  }
  return out;
}

/** The f32 bytes with every NaN made 0x7fc00000: NaN payloads are not specified by wasm arithmetic. */
export function canonicalNaN(y: Float32Array): Uint8Array {
  const c = new Float32Array(y);
  const u = new Uint32Array(c.buffer);
  for (let i = 0; i < c.length; i++) if (Number.isNaN(c[i])) u[i] = 0x7fc00000;
  return new Uint8Array(c.buffer);
}
