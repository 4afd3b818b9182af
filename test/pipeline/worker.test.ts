// The pool worker's own code, run in this thread: a Blob range is read block by block however
// many calibration passes read it (a tensor that runs whole is never held whole), and calls that
// overlap in time take turns on the kernels.
import { describe, expect, it } from 'vitest';
import { quantize } from '../../src/index.js';
import { createWorkerApi, type WorkerQuantizeOptions } from '../../src/pipeline/worker.js';
import { randomValues, sameBytes } from './helpers.js';

/** A Blob that records the ranges read from it. */
class SpyBlob extends Blob {
  reads: [number, number][] = [];
  override slice(start?: number, end?: number, type?: string): Blob {
    this.reads.push([start ?? 0, end ?? this.size]);
    return super.slice(start, end, type);
  }
}

const rows = 2048, cols = 1024; // 8 MiB of f32: two and more blocks
const values = randomValues(rows * cols, 21);
const lead = 1000; // the tensor starts inside the blob, off any block boundary

function blobOf(v: Float32Array) {
  const bytes = new Uint8Array(lead + v.byteLength);
  bytes.set(new Uint8Array(v.buffer, v.byteOffset, v.byteLength), lead);
  return new SpyBlob([bytes]);
}

const cases: [string, Omit<WorkerQuantizeOptions, 'rowLength' | 'dtype'>][] = [
  ['int8 per tensor, MSE clipping (a reduction per four trials)', { format: 'int8', granularity: 'tensor', calibration: 'mse' }],
  ['nf4 double-quantized (two reductions)', { format: 'nf4', doubleQuant: true }],
  ['bnb_int8 (rows only)', { format: 'bnb_int8' }],
];

describe('worker: Blob ranges', () => {
  it.each(cases)('%s: the bytes of quantize(), read in blocks of at most 4 MiB', async (_label, opts) => {
    const api = createWorkerApi();
    const blob = blobOf(values);
    const r = await api.quantizeRange({ source: { kind: 'blob', name: 'x', blob }, offset: lead, length: values.byteLength }, { ...opts, rowLength: cols, dtype: 'f32' });
    const want = await quantize(values, { ...opts, rowLength: cols });
    expect(sameBytes(new Uint8Array(r.data), want.data)).toBe(true);
    expect(blob.reads.length).toBeGreaterThan(1);
    for (const [a, b] of blob.reads) {
      expect(b - a).toBeLessThanOrEqual(4 << 20);
      expect(a).toBeGreaterThanOrEqual(lead);
      expect(b).toBeLessThanOrEqual(lead + values.byteLength);
    }
  });

  it('calls that overlap (one API and two sharing the thread) each get their own bytes', async () => {
    const other = randomValues(rows * cols, 22);
    const apis = [createWorkerApi(), createWorkerApi()];
    const opts = { format: 'int8', granularity: 'tensor' as const, calibration: 'mse', rowLength: cols, dtype: 'f32' as const };
    const nf4 = { format: 'nf4', doubleQuant: true, rowLength: cols, dtype: 'f32' as const };
    const q8 = { format: 'q8_0', rowLength: cols, dtype: 'f32' as const };
    const runs = await Promise.all([
      apis[0].quantizeRange({ source: { kind: 'blob', name: 'a', blob: blobOf(values) }, offset: lead, length: values.byteLength }, opts),
      apis[0].quantizeRange({ source: { kind: 'blob', name: 'b', blob: blobOf(other) }, offset: lead, length: other.byteLength }, opts),
      apis[1].quantizeRange({ source: { kind: 'blob', name: 'c', blob: blobOf(other) }, offset: lead, length: other.byteLength }, nf4),
      apis[1].quantizeTensor(values.slice().buffer, q8),
    ]);
    const wants = [
      await quantize(values, opts), await quantize(other, opts),
      await quantize(other, nf4), await quantize(values, q8),
    ];
    runs.forEach((r, i) => expect(sameBytes(new Uint8Array(r.data), wants[i].data), `call ${i}`).toBe(true));
  });
});
