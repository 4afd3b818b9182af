// The quantizers of the ternary and sub-4-bit IQ types against digests of llama.cpp's own bytes
// (fixtures/llamacpp-quantize.json, recorded from its ggml_quantize_chunk by bench/llamacpp-quantize.ts):
// every case of test/helpers/llamacpp-cases.ts on both wasm builds, row by row.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { formats, quantize } from '../../src/index.js';
import { llamacppCases } from '../helpers/llamacpp-cases.js';

interface Entry { sha256: string; rows: string[] }
const fixture = JSON.parse(readFileSync(new URL('./fixtures/llamacpp-quantize.json', import.meta.url), 'utf8')) as Record<string, Record<string, Entry> | string>;
const cases = llamacppCases();
const sha = (a: Uint8Array) => createHash('sha256').update(a).digest('hex');
const recorded = new Set(Object.entries(fixture).flatMap(([k, v]) => (k === '_about' ? [] : Object.keys(v as object))));

describe('fixture covers what it claims', () => {
  it('every case is recorded, and every recorded type is a format webquant writes', () => {
    expect(Object.keys(fixture).filter((k) => k !== '_about').sort()).toEqual(Object.keys(cases).sort());
    for (const t of recorded) expect(formats.has(t), t).toBe(true);
    expect([...recorded]).toEqual(expect.arrayContaining(['tq1_0', 'tq2_0']));
  });
});

for (const backend of ['wasm-simd', 'wasm'] as const) {
  describe(`llama.cpp's ggml_quantize_chunk bytes (${backend})`, () => {
    for (const [name, c] of Object.entries(cases)) {
      for (const [fmt, want] of Object.entries(fixture[name] as Record<string, Entry>)) {
        it(`${name} ${fmt}`, async () => {
          const got = (await quantize(c.x, { format: fmt, rowLength: c.rowLength, backend, importance: c.importance })).data;
          const g = formats.get(fmt)!.ggml!;
          const rowBytes = (c.rowLength / g.blockSize) * g.typeSize;
          expect(got.length).toBe(want.rows.length * rowBytes);
          const bad = want.rows.flatMap((d, r) => (sha(got.subarray(r * rowBytes, (r + 1) * rowBytes)).startsWith(d) ? [] : [c.rowName(r)]));
          expect(bad, 'rows whose bytes differ from llama.cpp').toEqual([]);
          expect(sha(got)).toBe(want.sha256);
        });
      }
    }
  });
}
