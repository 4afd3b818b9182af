// Decoding the low-bit GGUF types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, TQ1_0,
// TQ2_0): both builds' dequantization against digests of llama.cpp's own dequantize_row_<type> on
// seeded blocks, raw scales included (fixtures/llamacpp-decode.json, recorded by
// bench/llamacpp-decode.ts, which also compares value by value), plus layout facts worked out by
// hand from the format descriptions. Their quantizers: gguf-quantize-lowbit.test.ts.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { dequantize, ErrorCodes, formats, getFormat, type QuantizedTensor } from '../../src/index.js';
import { loadKernels } from '../../src/kernels/loader.js';
import { canonicalNaN, LOW_BIT_TYPES, randomBlocks, setScale, type LowBitType } from '../helpers/ggml-blocks.js';

type Case = { count: number; seed: number; sha256: string };
const fixture = JSON.parse(readFileSync(new URL('./fixtures/llamacpp-decode.json', import.meta.url), 'utf8')) as Record<string, Record<string, Case>>;
const builds = ['wasm-simd', 'wasm'] as const;
const type = (name: string) => LOW_BIT_TYPES.find((t) => t.name === name)!;
const sha = (a: Uint8Array) => createHash('sha256').update(a).digest('hex');

/** The tensor a GGUF file's bytes make: GGUF types need no options. */
const stored = (t: LowBitType, data: Uint8Array) => ({ format: t.name, shape: [data.length / t.bytes, t.block], data }) as unknown as QuantizedTensor;

describe('registry', () => {
  it('lists every low-bit type with both wasm kernels and the GGUF geometry stated independently here', async () => {
    for (const build of builds) {
      const k = await loadKernels(build);
      for (const t of LOW_BIT_TYPES) {
        const f = getFormat(t.name);
        expect(formats.has(t.name), t.name).toBe(true);
        expect(k.has(`${f.kernel}_dequantize`), `${build} ${t.name}`).toBe(true);
        expect(k.has(`${f.kernel}_quantize`), `${build} ${t.name}`).toBe(true);
        expect([k.constant(`${f.kernel.toUpperCase()}_BLOCK`), k.constant(`${f.kernel.toUpperCase()}_BYTES`)]).toEqual([t.block, t.bytes]);
        expect([f.ggml!.blockSize, f.ggml!.typeSize], t.name).toEqual([t.block, t.bytes]);
      }
    }
  });

  it('names are case-insensitive; an unknown one is a typed error', () => {
    expect(getFormat('TQ2_0').name).toBe('tq2_0');
    expect(getFormat('IQ2_XXS').name).toBe('iq2_xxs');
    expect(() => getFormat('iq5_zz')).toThrow(expect.objectContaining({ code: ErrorCodes.UNKNOWN_FORMAT }));
  });
});

describe('dequantization equals llama.cpp\'s', () => {
  for (const t of LOW_BIT_TYPES) {
    it(`${t.name}: both builds, weight-like and raw scales (subnormal, infinite, NaN)`, async () => {
      const cases = fixture[t.name];
      expect(Object.keys(cases).sort()).toEqual(['raw', 'weights']);
      for (const [name, c] of Object.entries(cases)) {
        const blocks = randomBlocks(t, c.count, c.seed, name as 'weights' | 'raw');
        for (const backend of builds) {
          const y = await dequantize(stored(t, blocks), { backend });
          expect(sha(canonicalNaN(y)), `${t.name} ${name} ${backend}`).toBe(c.sha256);
        }
      }
    });
  }
});

// One block with every byte zero except what a case sets, the scale d = 1 unless given.
function block(t: LowBitType, set: (b: Uint8Array, dv: DataView) => void, d = 0x3c00): Uint8Array {
  const b = new Uint8Array(t.bytes);
  setScale(t, b, d);
  set(b, new DataView(b.buffer));
  return b;
}
const values = async (t: LowBitType, b: Uint8Array) => Array.from(await dequantize(stored(t, b), { backend: 'wasm' }));

describe('layout facts, by hand', () => {
  it('tq2_0: 2-bit codes q of value 128h + 32l + m in bits 2l of byte 32h + m, value (q - 1) * d', async () => {
    const t = type('tq2_0');
    const y = await values(t, block(t, (b) => { b[0] = 0b11_10_01_00; b[32 + 5] = 0b10_00_00_00; }, 0x4000 /* 2 */));
    expect([y[0], y[32], y[64], y[96]]).toEqual([-2, 0, 2, 4]);
    expect([y[128 + 5], y[128 + 96 + 5], y[1]]).toEqual([-2, 2, -2]);
  });

  it('tq1_0: five base-3 digits per byte as a fraction of 256; qs[0..32) then qs[32..48) then qh', async () => {
    const t = type('tq1_0');
    // digits 2, 0, 1, 1, 2: 2*81 + 9 + 3 + 2 = 176, stored as ceil(176 * 256 / 243) = 186
    const y = await values(t, block(t, (b) => { b[0] = 186; b[32] = 186; b[48] = 186; }));
    expect([0, 32, 64, 96, 128].map((i) => y[i])).toEqual([1, -1, 0, 0, 1]);
    expect([160, 176, 192, 208, 224].map((i) => y[i])).toEqual([1, -1, 0, 0, 1]);
    expect([240, 244, 248, 252].map((i) => y[i])).toEqual([1, -1, 0, 0]); // qh holds four digits
    expect(y[1]).toBe(-1); // byte 0: digit value 0 - 1
  });

  it('q1_0: bit j % 8 of byte j / 8 is the sign of value j, 1 giving d and 0 giving -d', async () => {
    const t = type('q1_0');
    const y = await values(t, block(t, (b) => { b[2] = 0b1000_0001; b[2 + 15] = 0x80; }, 0x4000 /* 2 */));
    expect([y[0], y[1], y[6], y[7], y[8]]).toEqual([2, -2, -2, 2, -2]);
    expect([y[126], y[127]]).toEqual([-2, 2]);
    expect(y.filter((v) => v === 2).length).toBe(3);
  });

  it('q2_0: 2-bit code q of value 4k + l in bits 2l of byte k, value (q - 1) * d', async () => {
    const t = type('q2_0');
    const y = await values(t, block(t, (b) => { b[2] = 0b11_10_01_00; b[2 + 15] = 0b00_01_10_11; }, 0x4000 /* 2 */));
    expect(y.slice(0, 4)).toEqual([-2, 0, 2, 4]);
    expect(y.slice(60, 64)).toEqual([4, 2, 0, -2]);
    expect(y.slice(4, 60).every((v) => v === -2)).toBe(true);
  });

  it('iq2_xxs: the 7 stored sign bits get an 8th making the count even; top 4 bits s scale by (0.5 + s) / 4', async () => {
    const t = type('iq2_xxs');
    // group 0: entries 0 (all 8s in the grid) at l = 0..3; sign index 1 at l = 0 -> bits 0 and 7
    const y = await values(t, block(t, (b, dv) => dv.setUint32(2 + 4, 1 | (3 << 28), true)));
    const db = (0.5 + 3) * 0.25;
    expect(y.slice(0, 8)).toEqual([-8 * db, 8 * db, 8 * db, 8 * db, 8 * db, 8 * db, 8 * db, -8 * db]);
    expect(y.slice(8, 32).every((v) => v === 8 * db)).toBe(true);
    expect(y.slice(32).every((v) => v === 8 * 0.125)).toBe(true);
  });

  it('iq1_m: the fp16 scale is assembled from the four scale words\' top nibbles', async () => {
    const t = type('iq1_m');
    // d = 2 (0x4000): nibble 3 = 4; group 0 scales s = 1 (first 16 values) and 2 (next 16)
    const y = await values(t, block(t, (b) => { b[48] = 1 | (2 << 3); }, 0x4000));
    const g0 = y[0] / (2 * 3); // grid value + delta of value 0, scale d * (2s + 1) = 6
    expect([y[16] / (2 * 5), y[32] / 2]).toEqual([g0, g0]); // the same grid entry 0, other scales
    expect(Math.abs(g0 - Math.round(g0))).toBe(0.125);
  });

  it('iq3_s: a 4-bit s per 32 values gives the scale d * (1 + 2s); signs are explicit bytes', async () => {
    const t = type('iq3_s');
    const y = await values(t, block(t, (b) => { b[106] = 0x21; b[74] = 0x81; }));
    const g = y.slice(1, 7); // entry 0 at s = 1: values 3 * grid
    expect(y[0]).toBe(-g[0]);
    expect(y[7]).toBe(-g[0]);
    expect(y[32] * 3).toBe(y[1] * 5); // second 32 values: s = 2, scale 5
    expect(y[64]).toBe(y[1] / 3); // third: s = 0
  });
});
