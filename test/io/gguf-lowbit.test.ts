// A GGUF file holding the low-bit types (IQ1/IQ2/IQ3, TQ1_0/TQ2_0), as llama.cpp's low-bit files
// do: read as f32, requantized by the pipeline (also into the low-bit types themselves), served
// (dequantize and matvec through the generic path).
import { describe, expect, it } from 'vitest';
import { dequantize, ErrorCodes, getFormat, quantize, type QuantizedTensor } from '../../src/index.js';
import { openGguf } from '../../src/io/gguf.js';
import { writeGguf } from '../../src/io/gguf-writer.js';
import { fromBuffer } from '../../src/io/source.js';
import { collect } from '../../src/io/stream.js';
import { ggufContainer } from '../../src/pipeline/container.js';
import { quantizeCheckpoint } from '../../src/pipeline/pipeline.js';
import { resolvePlan } from '../../src/plan/plan.js';
import { openQuantized } from '../../src/serve/index.js';
import { LOW_BIT_TYPES, randomBlocks } from '../helpers/ggml-blocks.js';
import { compiledUrl } from '../pipeline/helpers.js';

const ROWS = 3;
const COLS = 512;

async function lowBitFile(): Promise<Uint8Array> {
  return collect(writeGguf({
    metadata: [{ key: 'general.architecture', type: 'string', value: 'llama' }],
    tensors: LOW_BIT_TYPES.map((t, i) => ({
      name: `blk.${i}.${t.name}.weight`, ggmlType: t.name.toUpperCase(), shape: [ROWS, COLS],
      data: randomBlocks(t, (ROWS * COLS) / t.block, 100 + i, 'weights'),
    })),
  }));
}

const asStored = (format: string, data: Uint8Array) => ({ format, shape: [ROWS, COLS], data }) as unknown as QuantizedTensor;

describe('GGUF input of the low-bit types', () => {
  it('readF32 gives dequantize() of the tensor bytes, on both builds', async () => {
    const file = await lowBitFile();
    for (const backend of ['wasm-simd', 'wasm'] as const) {
      const g = await openGguf(fromBuffer(file, 'low.gguf'), { backend });
      for (const [i, t] of LOW_BIT_TYPES.entries()) {
        const name = `blk.${i}.${t.name}.weight`;
        expect(g.tensor(name).dtype, name).toBe(t.name.toUpperCase());
        const want = await dequantize(asStored(t.name, await g.readRaw(name)), { backend: 'wasm' });
        const got = await g.readF32(name);
        expect(got.every(Number.isFinite), name).toBe(true);
        expect(Buffer.from(got.buffer).equals(Buffer.from(want.buffer)), `${backend} ${name}`).toBe(true);
      }
    }
  });

  it('the pipeline requantizes them (Q8_0 of the dequantized values) and copies them raw when kept', async () => {
    const file = await lowBitFile();
    const input = await openGguf(fromBuffer(file, 'low.gguf'));
    const parts: Uint8Array[] = [];
    const sink = { async write(c: Uint8Array) { parts.push(c.slice()); }, async close() {}, async abort() { parts.length = 0; } };
    const plan = input.tensors.map((t, i) => ({ name: t.name, scheme: i % 2 ? ('keep' as const) : { format: 'q8_0' } }));
    await quantizeCheckpoint({ input, plan, sink, workers: 2, container: ggufContainer(), poolOptions: { workerUrl: compiledUrl('src/pipeline/worker-node.js') } });
    const out = await openGguf(fromBuffer(Buffer.concat(parts), 'out.gguf'));
    for (const [i, t] of input.tensors.entries()) {
      if (i % 2) {
        expect(out.tensor(t.name).dtype).toBe(t.dtype);
        expect(Buffer.from(await out.readRaw(t.name)).equals(Buffer.from(await input.readRaw(t.name))), t.name).toBe(true);
      } else {
        const want = await quantize(await input.readF32(t.name), { format: 'q8_0', rowLength: COLS });
        expect(out.tensor(t.name).dtype).toBe('Q8_0');
        expect(Buffer.from(await out.readRaw(t.name)).equals(Buffer.from(want.data)), t.name).toBe(true);
      }
    }
  });

  it('openQuantized serves them: dequantize equals readF32, matvec is the dot with those rows', async () => {
    const file = await lowBitFile();
    const g = await openGguf(fromBuffer(file, 'low.gguf'));
    const q = await openQuantized(g);
    const x = Float32Array.from({ length: COLS }, (_, i) => Math.sin(i * 0.37));
    for (const t of g.tensors) {
      const info = q.tensor(t.name).info;
      expect([info.format, info.quantized], t.name).toEqual([t.dtype.toLowerCase(), true]);
      const w = await g.readF32(t.name);
      expect(Array.from(await q.tensor(t.name).dequantize()), t.name).toEqual(Array.from(w));
      const y = await q.tensor(t.name).matvec(x);
      for (let r = 0; r < ROWS; r++) {
        let dot = 0;
        let mag = 0;
        for (let c = 0; c < COLS; c++) { dot += w[r * COLS + c] * x[c]; mag += Math.abs(w[r * COLS + c] * x[c]); }
        expect(Math.abs(y[r] - dot), `${t.name} row ${r}`).toBeLessThanOrEqual(1e-5 * mag);
      }
    }
  });

  it('the pipeline writes them too: each tensor into the next low-bit type, the bytes of quantize() of the values read', async () => {
    const input = await openGguf(fromBuffer(await lowBitFile(), 'low.gguf'));
    const names = LOW_BIT_TYPES.map((t) => t.name).filter((n) => !getFormat(n).requiresImportance);
    const target = (i: number) => names[(i + 1) % names.length];
    const parts: Uint8Array[] = [];
    const sink = { async write(c: Uint8Array) { parts.push(c.slice()); }, async close() {}, async abort() { parts.length = 0; } };
    const plan = input.tensors.map((t, i) => ({ name: t.name, scheme: { format: target(i) } }));
    await quantizeCheckpoint({ input, plan, sink, workers: 2, container: ggufContainer(), poolOptions: { workerUrl: compiledUrl('src/pipeline/worker-node.js') } });
    const out = await openGguf(fromBuffer(Buffer.concat(parts), 'out.gguf'));
    for (const [i, t] of input.tensors.entries()) {
      const want = await quantize(await input.readF32(t.name), { format: target(i), rowLength: COLS });
      expect(out.tensor(t.name).dtype).toBe(target(i).toUpperCase());
      expect(Buffer.from(await out.readRaw(t.name)).equals(Buffer.from(want.data)), t.name).toBe(true);
    }
    // The types llama.cpp needs an importance matrix for are refused by a plan without one.
    const r = resolvePlan({ rules: [{ match: '.*', scheme: { format: 'iq2_xs' } }] }, input.tensors);
    expect(r.problems.filter((p) => p.severity === 'error').map((p) => p.code)).toEqual(input.tensors.map(() => ErrorCodes.BAD_OPTION));
    expect(resolvePlan({ rules: [{ match: '.*', scheme: { format: 'iq2_xs' } }] }, input.tensors, { importance: true }).ok).toBe(true);
  });
});
