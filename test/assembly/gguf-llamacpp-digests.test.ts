// Every GGUF type against digests of llama.cpp's own output (fixtures/llamacpp-digests.json): the shipped
// vector rows with and without their imatrix, the varied rows of helpers/varied-rows.ts without an imatrix and
// with three importance vectors (log-normal-like, 20% zeros, zeroed 32- and 256-column ranges), and a sweep of
// finite fp32 values through F16/BF16. Both wasm builds must reproduce every row.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { quantize } from '../../src/index.js';
import { sharedF32 } from '../helpers/shared.js';
import { halfSpecials, VARIED_KINDS, VARIED_ROW_LENGTH, variedRows } from '../helpers/varied-rows.js';

interface Entry { sha256: string; rows?: string[] }
const fixture = JSON.parse(readFileSync(new URL('./fixtures/llamacpp-digests.json', import.meta.url), 'utf8')) as Record<string, Record<string, Entry> | string>;

const BLOCK: Record<string, [number, number]> = {
  q8_0: [32, 34], q4_0: [32, 18], q4_1: [32, 20], q5_0: [32, 22], q5_1: [32, 24], iq4_nl: [32, 18], iq4_xs: [256, 136],
  q2_k: [256, 84], q3_k: [256, 110], q4_k: [256, 144], q5_k: [256, 176], q6_k: [256, 210], f16: [1, 2], bf16: [1, 2],
};

const sha = (a: Uint8Array) => createHash('sha256').update(a).digest('hex');

const vectors = sharedF32('vectors/input_f32.bin');
const vectorsImatrix = sharedF32('vectors/imatrix_f32.bin');
const varied = variedRows();
const specials = halfSpecials();

interface Case { x: Float32Array; rowLength: number; importance?: Float32Array; rowName: (r: number) => string }
const cases: Record<string, Case> = {
  'vectors': { x: vectors, rowLength: 4096, rowName: (r) => `row ${r}` },
  'vectors+imatrix': { x: vectors, rowLength: 4096, importance: vectorsImatrix, rowName: (r) => `row ${r}` },
  'varied': { x: varied.rows, rowLength: VARIED_ROW_LENGTH, rowName: (r) => VARIED_KINDS[r] },
  'varied+lognormal': { x: varied.rows, rowLength: VARIED_ROW_LENGTH, importance: varied.imatrix.lognormal, rowName: (r) => VARIED_KINDS[r] },
  'varied+zeros20': { x: varied.rows, rowLength: VARIED_ROW_LENGTH, importance: varied.imatrix.zeros20, rowName: (r) => VARIED_KINDS[r] },
  'varied+zeroRanges': { x: varied.rows, rowLength: VARIED_ROW_LENGTH, importance: varied.imatrix.zeroRanges, rowName: (r) => VARIED_KINDS[r] },
  'half-specials': { x: specials, rowLength: 256, rowName: (r) => `row ${r}` },
};

describe('fixture covers what it claims', () => {
  it('every case and every GGUF type has digests', () => {
    expect(Object.keys(fixture).filter((k) => k !== '_about').sort()).toEqual(Object.keys(cases).sort());
    for (const fmt of Object.keys(BLOCK)) expect(Object.keys(fixture.varied as Record<string, Entry>)).toContain(fmt);
    for (const fmt of Object.keys(BLOCK).filter((f) => !['q8_0', 'f16', 'bf16'].includes(f))) {
      for (const c of ['vectors+imatrix', 'varied+lognormal', 'varied+zeros20', 'varied+zeroRanges']) expect(Object.keys(fixture[c] as Record<string, Entry>)).toContain(fmt);
    }
  });
});

for (const backend of ['wasm-simd', 'wasm'] as const) {
  describe(`llama.cpp digests (${backend})`, () => {
    for (const [name, c] of Object.entries(cases)) {
      for (const [fmt, want] of Object.entries(fixture[name] as Record<string, Entry>)) {
        it(`${name} ${fmt}`, async () => {
          const got = (await quantize(c.x, { format: fmt, rowLength: c.rowLength, backend, importance: c.importance })).data;
          const [block, bytes] = BLOCK[fmt];
          const rowBytes = (c.rowLength / block) * bytes;
          expect(got.length).toBe((c.x.length / block) * bytes);
          if (want.rows) {
            const bad: string[] = [];
            want.rows.forEach((d, r) => {
              if (!sha(got.subarray(r * rowBytes, (r + 1) * rowBytes)).startsWith(d)) bad.push(c.rowName(r));
            });
            expect(bad, `rows whose bytes differ from llama.cpp`).toEqual([]);
          }
          expect(sha(got)).toBe(want.sha256);
        });
      }
    }
  });
}
