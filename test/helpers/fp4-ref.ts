// Shared by the GGUF MXFP4 and NVFP4 kernel tests: ggml's literal code search and the check that
// both wasm builds give a reference transcription's bytes and decode them as it does.
import { expect } from 'vitest';
import { dequantize, quantize } from '../../src/index.js';

const f = Math.fround;
/** ggml's kvalues_mxfp4: E2M1 doubled (codes 8-15 negative, 8 = -0). */
export const KV = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/** best_index_mxfp4: the first code minimising |KV[i]*d - x| in fp32. */
export function bestFp4(x: number, d: number): number {
  let bi = 0;
  let be = Math.abs(f(f(KV[0] * d) - x));
  for (let i = 1; i < 16; i++) {
    const err = Math.abs(f(f(KV[i] * d) - x));
    if (err < be) { bi = i; be = err; }
  }
  return bi;
}

/** Each row quantized whole by both builds equals `ref`'s bytes and dequantizes as `refDeq`. */
export async function expectReferenceBytes(format: string, rows: { name: string; values: Float32Array }[], ref: (x: Float32Array) => Uint8Array, refDeq: (q: Uint8Array) => Float32Array): Promise<void> {
  for (const { name, values } of rows) {
    const want = ref(values);
    for (const backend of ['wasm-simd', 'wasm'] as const) {
      const qt = await quantize(values, { format, rowLength: values.length, backend });
      expect(Buffer.from(qt.data).equals(Buffer.from(want)), `${name} ${backend}`).toBe(true);
      const back = await dequantize(qt, { backend });
      expect(Buffer.from(back.buffer).equals(Buffer.from(refDeq(want).buffer)), `${name} ${backend} dequantize`).toBe(true);
    }
  }
}
