// Workers that read their input and write their output themselves (pipeline.ts, "Worker I/O"):
// the bytes must be those of a run where everything passes through the main thread, whatever
// the source (file path, Blob, URL), the number of workers, the cut into chunks, a crash or an
// abort; and the main thread must really read no quantized tensor and write no worker's output.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { quantize, WebquantError } from '../../src/index.js';
import { loadKernels } from '../../src/kernels/loader.js';
import { quantizeFrom } from '../../src/quantize.js';
import { getFormat } from '../../src/formats/registry.js';
import { layoutOf, tensorSectionsOf } from '../../src/formats/types.js';
import { resolveOptions } from '../../src/options.js';
import { openSafetensors } from '../../src/io/safetensors.js';
import { fromBlob, fromBuffer, fromUrl, type ByteSource } from '../../src/io/source.js';
import { fromPath } from '../../src/io/node.js';
import type { Checkpoint } from '../../src/io/checkpoint.js';
import { quantizeCheckpoint, type PlannedTensor, type QuantizeCheckpointOptions } from '../../src/pipeline/pipeline.js';
import { fileSink } from '../../src/pipeline/sink-node.js';
import { dirStore } from '../../src/pipeline/cache-node.js';
import { ggufContainer } from '../../src/pipeline/container.js';
import { liveWorkerThreads } from '../../src/pipeline/spawn-node.js';
import type { Sink } from '../../src/pipeline/sink.js';
import { buildSafetensors, compiledUrl, f32Bytes, randomValues, sameBytes, syntheticModel } from './helpers.js';

const workerUrl = () => compiledUrl('src/pipeline/worker-node.js');

/** Row-only formats (one and several sections, with and without a prepare pass), formats with constant and with value-dependent tensor-level sections, and kept tensors. */
function mixedPlan(ck: Checkpoint): PlannedTensor[] {
  return ck.tensors.map((t) => {
    if (t.shape.length < 2 || t.dtype === 'I32') return { name: t.name, scheme: 'keep' as const };
    if (t.name.includes('embed')) return { name: t.name, scheme: 'keep' as const };
    // constant tensor sections (code book, quant state, weight_format): cut and written by workers all the same
    if (t.name === 'model.layers.1.mlp.down_proj.weight') return { name: t.name, scheme: { format: 'bnb_nf4' } }; // F16: the quant state says float16
    if (t.name === 'model.layers.1.self_attn.q_proj.weight') return { name: t.name, scheme: { format: 'bnb_int8' } };
    if (t.name.includes('up_proj')) return { name: t.name, scheme: { format: 'affine', bits: 4, groupSize: 64 } };
    if (t.name.includes('q_proj')) return { name: t.name, scheme: { format: 'int4' } };
    if (t.name.includes('k_proj')) return { name: t.name, scheme: { format: 'nf4', doubleQuant: true } };
    if (t.name.includes('down_proj')) return { name: t.name, scheme: { format: 'q8_0' } };
    return { name: t.name, scheme: { format: 'q4_0' } };
  });
}

/** Records the main thread's reads (read() and readInto()) of a source, keeping its ref. */
function spied(src: ByteSource): ByteSource & { reads: [number, number][] } {
  const reads: [number, number][] = [];
  return {
    name: src.name,
    reads,
    freshReads: src.freshReads,
    size: () => src.size(),
    read: (offset, length) => { reads.push([offset, length]); return src.read(offset, length); },
    readInto: src.readInto && ((dst, offset) => { reads.push([offset, dst.byteLength]); return src.readInto!(dst, offset); }),
    ref: src.ref && (() => src.ref!()),
    close: async () => { await src.close?.(); },
  };
}

/** A file sink whose appends, positional writes and worker-written bytes are counted. */
async function countingFileSink(path: string) {
  const f = await fileSink(path);
  const n = { appended: 0, here: 0, workers: 0 };
  const sink: Sink = {
    write: (c) => { n.appended += c.byteLength; return f.write(c); },
    close: () => f.close(),
    abort: (r) => f.abort(r),
    positional: {
      path: f.positional.path,
      writeAt: (b, o) => { n.here += b.byteLength; return f.positional.writeAt(b, o); },
      wrote: (k) => { n.workers += k; f.positional.wrote(k); },
    },
  };
  return { sink, n };
}

function memorySink(): Sink & { bytes(): Uint8Array } {
  const parts: Uint8Array[] = [];
  return {
    async write(c) { parts.push(c.slice()); },
    async close() {},
    async abort() { parts.length = 0; },
    bytes: () => Buffer.concat(parts),
  };
}

/** Does any read touch the data of a tensor that the plan quantizes? */
function readsOfQuantized(ck: Checkpoint, plan: PlannedTensor[], reads: [number, number][]): string[] {
  const hit: string[] = [];
  for (const p of plan) {
    if (p.scheme === 'keep') continue;
    const t = ck.tensor(p.name);
    if (reads.some(([o, l]) => o < t.offset + t.byteLength && o + l > t.offset)) hit.push(p.name);
  }
  return hit;
}

const model = syntheticModel(6);
let dir = '';
let inputPath = '';
let reference: Uint8Array;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'wq-worker-io-'));
  inputPath = join(dir, 'in.safetensors');
  writeFileSync(inputPath, model.bytes);
  // Everything through the main thread: values read here, results written here.
  const ck = await openSafetensors(fromBuffer(model.bytes, 'in.safetensors'));
  const sink = memorySink();
  await quantizeCheckpoint({ input: ck, plan: mixedPlan(ck), sink, workers: 1, workerIo: false, poolOptions: { workerUrl: workerUrl() } });
  reference = sink.bytes();
});

afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

afterEach(() => {
  expect(liveWorkerThreads()).toBe(0);
});

async function fileRun(extra: Partial<QuantizeCheckpointOptions> & { out: string }) {
  const src = spied(fromPath(inputPath));
  const ck = await openSafetensors(src);
  const plan = mixedPlan(ck);
  const { sink, n } = await countingFileSink(extra.out);
  try {
    const result = await quantizeCheckpoint({ input: ck, plan, sink, poolOptions: { workerUrl: workerUrl() }, ...extra });
    return { ck, plan, src, n, result, bytes: new Uint8Array(readFileSync(extra.out)) };
  } finally {
    await src.close();
  }
}

describe('workers read the input and write the output themselves', () => {
  it.each([1, 2, 4])('file in, file out, %i worker(s), whole and cut into chunks: the bytes of the main-thread run', async (workers) => {
    for (const budget of [undefined, 24 << 10]) {
      const out = join(dir, `out-${workers}-${budget ?? 'default'}.safetensors`);
      const r = await fileRun({ out, workers, maxInFlightBytes: budget });
      expect(sameBytes(r.bytes, reference)).toBe(true);
      // No quantized tensor was read here, nothing was appended; the workers wrote the rows of
      // every quantized tensor but a whole nf4-dq one (tensor-level sections from the values),
      // this thread the header, the kept tensors, the whole nf4-dq tensors and every tensor
      // section (bitsandbytes' constant ones, a sliced nf4-dq tensor's from its first slice).
      expect(readsOfQuantized(r.ck, r.plan, r.src.reads)).toEqual([]);
      expect(r.n.appended).toBe(0);
      const quantized = r.result.tensors.filter((t) => t.format !== 'keep');
      const tensorSecs = (t: (typeof quantized)[number]) => {
        const [rows, cols] = r.ck.tensor(t.name).shape;
        const spec = getFormat(t.format);
        const scheme = r.plan.find((p) => p.name === t.name)!.scheme as Record<string, unknown>;
        return tensorSectionsOf(layoutOf(spec, rows, cols, resolveOptions(spec, scheme as never))).bytes;
      };
      const wholeDq = quantized.filter((t) => t.format === 'nf4' && t.chunks === 1);
      const sum = (ts: typeof quantized, f: (t: (typeof quantized)[number]) => number) => ts.reduce((acc, t) => acc + f(t), 0);
      const heldWhole = sum(wholeDq, (t) => t.outputBytes);
      const sections = sum(quantized.filter((t) => !wholeDq.includes(t)), tensorSecs);
      expect(sum(quantized.filter((t) => t.format.startsWith('bnb_')), tensorSecs)).toBeGreaterThan(0);
      expect(r.n.workers).toBe(sum(quantized.filter((t) => !wholeDq.includes(t)), (t) => t.outputBytes) - sections);
      expect(r.n.here).toBeGreaterThanOrEqual(heldWhole + sections);
      expect(r.n.here + r.n.workers).toBe(r.bytes.byteLength);
      if (budget) {
        for (const name of ['model.layers.1.mlp.up_proj.weight', 'model.layers.1.mlp.down_proj.weight', 'model.layers.1.self_attn.q_proj.weight']) {
          expect(r.result.tensors.find((t) => t.name === name)!.chunks, name).toBeGreaterThan(1);
        }
        // with two workers and more, each gets 12 KiB or less: the nf4-dq tensors are sliced too
        if (workers > 1) expect(wholeDq).toEqual([]);
      }
      // Held in memory on the way: the whole nf4-dq outputs, the tensor sections that come back
      // and the I32 tensor (no ranged copy); the rest costs no buffer.
      const i32 = r.ck.tensors.filter((t) => t.dtype === 'I32').reduce((acc, t) => acc + t.byteLength, 0);
      expect(r.result.peakInFlightBytes).toBeGreaterThan(0);
      expect(r.result.peakInFlightBytes).toBeLessThanOrEqual(heldWhole + sections + i32);
      expect(readdirSync(dir).filter((f) => f.includes('.partial-'))).toEqual([]);
    }
  });

  it('GGUF output (aligned, padded tensors): the workers write at the padded offsets', async () => {
    const gguf = (ck: Checkpoint): PlannedTensor[] => ck.tensors.map((t) => ({
      name: t.name,
      scheme: t.shape.length < 2 || t.dtype === 'I32' ? 'keep' as const : { format: t.name.includes('down_proj') ? 'q8_0' : 'q4_0' },
    }));
    const want = memorySink();
    const ck0 = await openSafetensors(fromBuffer(model.bytes, 'in.safetensors'));
    await quantizeCheckpoint({ input: ck0, plan: gguf(ck0), sink: want, container: ggufContainer(), workers: 1, workerIo: false, poolOptions: { workerUrl: workerUrl() } });
    const src = spied(fromPath(inputPath));
    const ck = await openSafetensors(src);
    const out = join(dir, 'out.gguf');
    const { sink, n } = await countingFileSink(out);
    await quantizeCheckpoint({ input: ck, plan: gguf(ck), sink, container: ggufContainer(), workers: 2, maxInFlightBytes: 24 << 10, poolOptions: { workerUrl: workerUrl() } });
    await src.close();
    expect(sameBytes(new Uint8Array(readFileSync(out)), want.bytes())).toBe(true);
    expect(n.workers).toBeGreaterThan(0);
    expect(readsOfQuantized(ck, gguf(ck), src.reads)).toEqual([]);
  });

  it('workerIo: false reads and writes everything on the main thread, with the same bytes', async () => {
    const r = await fileRun({ out: join(dir, 'out-off.safetensors'), workers: 2, workerIo: false });
    expect(sameBytes(r.bytes, reference)).toBe(true);
    expect(readsOfQuantized(r.ck, r.plan, r.src.reads).length).toBeGreaterThan(0);
    expect(r.n.workers).toBe(0);
    expect(r.n.appended).toBe(r.bytes.byteLength);
    // Everything passes through here: the biggest unit's input and output at least.
    expect(r.result.peakInFlightBytes).toBeGreaterThan(Math.max(...r.result.tensors.map((t) => t.bytes)));
  });

  it('a Blob and a URL (Range requests) are read by the workers too', async () => {
    const blob = spied(fromBlob(new Blob([model.bytes]), 'in.safetensors'));
    const server: Server = createServer((req, res) => {
      const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
      if (!m) { res.writeHead(200, { 'Content-Length': model.bytes.length }); res.end(model.bytes); return; }
      const end = Math.min(Number(m[2]), model.bytes.length - 1);
      res.writeHead(206, { 'Content-Range': `bytes ${m[1]}-${end}/${model.bytes.length}` });
      res.end(model.bytes.subarray(Number(m[1]), end + 1));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = spied(fromUrl(`http://127.0.0.1:${(server.address() as AddressInfo).port}/in.safetensors`));
      for (const src of [blob, url]) {
        const ck = await openSafetensors(src);
        const sink = memorySink();
        await quantizeCheckpoint({ input: ck, plan: mixedPlan(ck), sink, workers: 2, maxInFlightBytes: 24 << 10, poolOptions: { workerUrl: workerUrl() } });
        expect(sameBytes(sink.bytes(), reference), src.name).toBe(true);
        expect(readsOfQuantized(ck, mixedPlan(ck), src.reads), src.name).toEqual([]);
      }
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it.each(['blob', 'file', 'url'])('a double-quantized 2 MiB tensor read from a %s: the workers calibrate it once and quantize it in slices within the budget', async (kind) => {
    const v = randomValues(512 * 1024, 31);
    const bytes = buildSafetensors([{ name: 'blk.0.ffn_up.weight', dtype: 'F32', shape: [512, 1024], data: f32Bytes(v) }]);
    const path = join(dir, 'big.safetensors');
    writeFileSync(path, bytes);
    let served = 0;
    const server: Server = createServer((req, res) => {
      const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
      if (!m) { res.writeHead(200, { 'Content-Length': bytes.length }); res.end(bytes); return; }
      res.writeHead(206, { 'Content-Range': `bytes ${m[1]}-${m[2]}/${bytes.length}` });
      served += Number(m[2]) + 1 - Number(m[1]);
      res.end(bytes.subarray(Number(m[1]), Number(m[2]) + 1));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const src = kind === 'blob' ? fromBlob(new Blob([bytes]), 'big.safetensors') : kind === 'file' ? fromPath(path)
      : fromUrl(`http://127.0.0.1:${(server.address() as AddressInfo).port}/big.safetensors`);
    try {
      const ck = await openSafetensors(src);
      for (const format of ['nf4', 'bnb_nf4', 'int8']) {
        const scheme = format === 'int8' ? { format, granularity: 'tensor', calibration: 'mse' } : { format, doubleQuant: true };
        const plan = [{ name: 'blk.0.ffn_up.weight', scheme }];
        const sink = memorySink();
        served = 0;
        const r = await quantizeCheckpoint({ input: ck, plan, sink, workers: 2, maxInFlightBytes: 64 << 10, poolOptions: { workerUrl: workerUrl() } });
        expect(r.tensors[0].chunks, format).toBeGreaterThan(8);
        expect(r.peakInFlightBytes, format).toBeLessThanOrEqual(64 << 10);
        // The calibration fetches the tensor once (one block: its passes share it), the slices
        // their rows once more.
        if (kind === 'url') expect(served, format).toBe(2 * 4 * 512 * 1024);
        const want = memorySink();
        await quantizeCheckpoint({ input: await openSafetensors(fromBuffer(bytes, 'big.safetensors')), plan, sink: want, workers: 1, workerIo: false, poolOptions: { workerUrl: workerUrl() } });
        expect(sameBytes(sink.bytes(), want.bytes()), format).toBe(true);
        if (kind === 'file') {
          // Resumed: the first slice's tensor sections come from the store (a fresh calibration
          // only for slices not stored).
          const store = dirStore(mkdtempSync(join(dir, `resume-${format}-`)));
          const base = { input: ck, plan, workers: 2, maxInFlightBytes: 64 << 10, poolOptions: { workerUrl: workerUrl() }, resume: store };
          const a = memorySink(), b = memorySink();
          await quantizeCheckpoint({ ...base, sink: a, keepResumeData: true });
          const again = await quantizeCheckpoint({ ...base, sink: b });
          expect(again.resumedUnits, format).toBe(r.tensors[0].chunks);
          expect(sameBytes(a.bytes(), want.bytes()) && sameBytes(b.bytes(), want.bytes()), format).toBe(true);
        }
      }
    } finally {
      await src.close?.();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('a 20 MiB tensor from a URL is fetched in Range requests of at most 8 MiB, its calibration included', async () => {
    // BF16 [2560, 4096]: the top halves of random floats.
    const v = randomValues(2560 * 4096, 47);
    const bf16 = new Uint8Array(v.length * 2);
    const words = new Uint32Array(v.buffer);
    for (let i = 0; i < v.length; i++) { bf16[2 * i] = (words[i] >>> 16) & 255; bf16[2 * i + 1] = words[i] >>> 24; }
    const bytes = buildSafetensors([{ name: 'blk.0.ffn_up.weight', dtype: 'BF16', shape: [2560, 4096], data: bf16 }]);
    const MiB = 1 << 20;
    const requests: number[] = [];
    const server: Server = createServer((req, res) => {
      const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
      if (!m) { res.writeHead(200, { 'Content-Length': bytes.length }); res.end(bytes); return; }
      requests.push(Number(m[2]) + 1 - Number(m[1]));
      res.writeHead(206, { 'Content-Range': `bytes ${m[1]}-${m[2]}/${bytes.length}` });
      res.end(bytes.subarray(Number(m[1]), Number(m[2]) + 1));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const ck = await openSafetensors(fromUrl(`http://127.0.0.1:${(server.address() as AddressInfo).port}/big.safetensors`));
      const plan = [{ name: 'blk.0.ffn_up.weight', scheme: { format: 'nf4', doubleQuant: true } }];
      requests.length = 0;
      const sink = memorySink();
      const r = await quantizeCheckpoint({ input: ck, plan, sink, workers: 2, maxInFlightBytes: 16 << 20, poolOptions: { workerUrl: workerUrl() } });
      expect(r.tensors[0].chunks).toBeGreaterThan(2);
      expect(r.peakInFlightBytes).toBeLessThanOrEqual(16 << 20);
      expect(Math.max(...requests)).toBe(8 << 20);
      // The calibration's two passes (the mean of the absmax values, then the nested absmax):
      // 20 MiB, then blocks 0 and 1 again (the last block is still held); the slices: 20 MiB.
      expect(requests.reduce((a, b) => a + b, 0)).toBe(20 * MiB + 16 * MiB + 20 * MiB);
      const want = memorySink();
      await quantizeCheckpoint({ input: await openSafetensors(fromBuffer(bytes, 'big.safetensors')), plan, sink: want, workers: 1, workerIo: false, poolOptions: { workerUrl: workerUrl() } });
      expect(sameBytes(sink.bytes(), want.bytes())).toBe(true);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('a source without a reference (custom fetch, in-memory buffer) is read here, with the same bytes', async () => {
    const src = spied(fromBuffer(model.bytes, 'in.safetensors'));
    const ck = await openSafetensors(src);
    const sink = memorySink();
    await quantizeCheckpoint({ input: ck, plan: mixedPlan(ck), sink, workers: 2, poolOptions: { workerUrl: workerUrl() } });
    expect(sameBytes(sink.bytes(), reference)).toBe(true);
    expect(readsOfQuantized(ck, mixedPlan(ck), src.reads).length).toBeGreaterThan(0);
    expect(fromUrl('http://example.invalid/x', { fetch: globalThis.fetch }).ref).toBeUndefined();
  });

  it('with a resume store the workers still read, the results come back, and a second run resumes every unit', async () => {
    const cache = dirStore(join(dir, 'cache'));
    const a = await fileRun({ out: join(dir, 'out-resume-a.safetensors'), workers: 2, resume: cache, keepResumeData: true });
    expect(sameBytes(a.bytes, reference)).toBe(true);
    expect(readsOfQuantized(a.ck, a.plan, a.src.reads)).toEqual([]);
    expect(a.n.workers).toBe(0); // the store needs the bytes: nothing written by the workers
    const b = await fileRun({ out: join(dir, 'out-resume-b.safetensors'), workers: 2, resume: cache });
    expect(sameBytes(b.bytes, reference)).toBe(true);
    expect(b.result.resumedUnits).toBe(b.result.tensors.filter((t) => t.format !== 'keep').length);
  });

  it('retries a unit whose worker crashed while reading and writing by itself', async () => {
    process.env.WEBQUANT_CRASH_DIR = mkdtempSync(join(tmpdir(), 'wq-crash-io-'));
    const tensors = [0, 1, 2].map((i) => ({ name: `crash-once-blk.${i}.ffn_up.weight`, dtype: 'F32' as const, shape: [16, 64], data: f32Bytes(randomValues(16 * 64, 40 + i)) }));
    const bytes = buildSafetensors(tensors);
    const path = join(dir, 'crashy.safetensors');
    writeFileSync(path, bytes);
    const plan = tensors.map((t) => ({ name: t.name, scheme: { format: 'q4_0' } }));
    const want = memorySink();
    await quantizeCheckpoint({ input: await openSafetensors(fromBuffer(bytes, 'x')), plan, sink: want, workers: 1, workerIo: false, poolOptions: { workerUrl: workerUrl() } });
    const out = join(dir, 'crashy.out');
    const { sink, n } = await countingFileSink(out);
    const src = fromPath(path);
    await quantizeCheckpoint({ input: await openSafetensors(src), plan, sink, workers: 2, poolOptions: { workerUrl: compiledUrl('test/pipeline/fixtures/crash-worker.js') } });
    await src.close();
    expect(readdirSync(process.env.WEBQUANT_CRASH_DIR).length).toBe(3);
    expect(n.workers).toBeGreaterThan(0);
    expect(sameBytes(new Uint8Array(readFileSync(out)), want.bytes())).toBe(true);
  });

  it('an abort leaves no output file and no worker thread', async () => {
    const out = join(dir, 'aborted', 'out.safetensors');
    mkdirSync(join(dir, 'aborted'));
    const ac = new AbortController();
    let tensors = 0;
    const err = await fileRun({
      out, workers: 2, maxInFlightBytes: 24 << 10, signal: ac.signal,
      onProgress: (e) => { if (e.type === 'tensor' && ++tensors === 4) ac.abort(); },
    }).then(() => undefined, (e) => e);
    expect(err).toBeInstanceOf(WebquantError);
    expect(err.code).toBe('E_ABORTED');
    expect(existsSync(out)).toBe(false);
    expect(readdirSync(join(dir, 'aborted'))).toEqual([]);
  });
});

describe('quantizeFrom with a row output', () => {
  it('hands over the bytes quantize() returns, section by section, and refuses formats with tensor-level sections', async () => {
    const k = await loadKernels('auto');
    const v = randomValues(48 * 256, 9);
    const src = new Uint8Array(v.buffer);
    const input = { length: v.length, dtype: 'f32' as const, copy: (dst: Uint8Array, at: number) => dst.set(src.subarray(at, at + dst.byteLength)) };
    for (const opts of [{ format: 'q8_0' }, { format: 'affine', bits: 4, groupSize: 64 }, { format: 'int4' }, { format: 'bnb_nf4' }, { format: 'bnb_int8' }]) {
      const want = await quantize(v, { ...opts, rowLength: 256 });
      // Constant tensor sections are not handed over: the caller writes them.
      const rowBytes = want.layout.sections.filter((x) => x.perRow > 0).reduce((a, x) => a + x.bytes, 0);
      const got = new Uint8Array(rowBytes);
      // Small chunks: several calls per section.
      const r = await quantizeFrom(k, input, { ...opts, rowLength: 256, chunkBytes: 4096 }, undefined, (s, at, bytes) => got.set(bytes, want.layout.sections[s].offset + at));
      expect(sameBytes(got, want.data.subarray(0, rowBytes)), opts.format).toBe(true);
      // The result keeps the tensor sections (none for rows-only layouts).
      expect(sameBytes(r.data, want.data.subarray(rowBytes)), opts.format).toBe(true);
    }
    await expect(quantizeFrom(k, input, { format: 'nf4', doubleQuant: true, rowLength: 256 }, undefined, () => undefined)).rejects.toMatchObject({ code: 'E_BAD_OPTION' });
    // ... unless in slices with the whole tensor's calibration: then its rows are handed over too
    const dq = { format: 'nf4', doubleQuant: true, rowLength: 256 };
    const want = await quantize(v, dq);
    const { prepared } = await quantize(v, { ...dq, prepareOnly: true });
    const rowBytes = want.layout.sections.filter((x) => x.perRow > 0).reduce((a, x) => a + x.bytes, 0);
    const got = new Uint8Array(rowBytes);
    const half = (v.length / 256 / 2) * 256;
    for (const [a, b] of [[0, half], [half, v.length]]) {
      const part = { length: b - a, dtype: 'f32' as const, copy: (dst: Uint8Array, at: number) => dst.set(src.subarray(a * 4 + at, a * 4 + at + dst.byteLength)) };
      const r = await quantizeFrom(k, part, { ...dq, chunkBytes: 4096, slice: { row0: a / 256, rows: v.length / 256, prepared } }, undefined, (s, at, bytes) => {
        const sec = want.layout.sections[s];
        got.set(bytes, sec.offset + sec.perRow * (a / 256) + at);
      });
      expect(sameBytes(r.data, want.data.subarray(rowBytes))).toBe(true);
    }
    expect(sameBytes(got, want.data.subarray(0, rowBytes))).toBe(true);
  });
});
