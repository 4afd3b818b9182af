// llama.cpp reference bytes (shared/vectors) for the types that ship them, on both builds.
import { describe, expect, it } from 'vitest';
import { quantize, dequantize } from '../../src/index.js';
import { sharedBytes, sharedF32 } from '../helpers/shared.js';

const input = sharedF32('vectors/input_f32.bin');

for (const backend of ['wasm-simd', 'wasm'] as const) {
  describe(`reference vectors (${backend})`, () => {
    for (const fmt of ['q8_0', 'q4_0']) {
      it(`${fmt} bytes equal llama.cpp`, async () => {
        const qt = await quantize(input, { format: fmt, rowLength: 4096, backend });
        const want = sharedBytes(`vectors/${fmt}.bin`);
        expect(qt.data.length).toBe(want.length);
        const rowBytes = want.length / 11;
        for (let r = 0; r < 11; r++) {
          expect(Buffer.from(qt.data.subarray(r * rowBytes, (r + 1) * rowBytes)).equals(Buffer.from(want.subarray(r * rowBytes, (r + 1) * rowBytes))), `${fmt} row ${r}`).toBe(true);
        }
      });
      it(`${fmt} dequantization equals llama.cpp bit for bit`, async () => {
        const want = sharedF32(`vectors/${fmt}.dequant_f32.bin`);
        const qt = await quantize(input, { format: fmt, rowLength: 4096, backend });
        const got = await dequantize(qt, { backend });
        expect(Buffer.from(got.buffer).equals(Buffer.from(want.buffer))).toBe(true);
      });
    }
  });
}

describe('plain TypeScript reference', async () => {
  const { quantizeQ8_0Ts, quantizeQ4_0Ts } = await import('../reference/baseline-ref.js');
  it('Q8_0 and Q4_0 references reproduce the vectors', () => {
    expect(Buffer.from(quantizeQ8_0Ts(input, 4096)).equals(Buffer.from(sharedBytes('vectors/q8_0.bin')))).toBe(true);
    expect(Buffer.from(quantizeQ4_0Ts(input, 4096)).equals(Buffer.from(sharedBytes('vectors/q4_0.bin')))).toBe(true);
  });
});
