import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { quantize, WebquantError } from '../../src/index.js';
import { openSafetensors } from '../../src/io/safetensors.js';
import { fromBuffer } from '../../src/io/source.js';
import type { Checkpoint, TensorInfo } from '../../src/io/checkpoint.js';
import { quantizeCheckpoint, type PlannedTensor, type ProgressEvent, type QuantizeCheckpointOptions } from '../../src/pipeline/pipeline.js';
import { createPool } from '../../src/pipeline/pool.js';
import { blobSink, readableStreamSink, type Sink } from '../../src/pipeline/sink.js';
import { fileSink } from '../../src/pipeline/sink-node.js';
import { liveWorkerThreads } from '../../src/pipeline/spawn-node.js';
import { openGguf } from '../../src/io/gguf.js';
import { ggufContainer } from '../../src/pipeline/container.js';
import { rowReader } from '../../src/pipeline/rows.js';
import { dirStore } from '../../src/pipeline/cache-node.js';
import { buildSafetensors, compiledUrl, f32Bytes, randomValues, sameBytes, syntheticModel } from './helpers.js';

const workerUrl = () => compiledUrl('src/pipeline/worker-node.js');

function planFor(ck: Checkpoint): PlannedTensor[] {
  return ck.tensors.map((t) => {
    if (t.shape.length < 2) return { name: t.name, scheme: 'keep' as const };
    if (t.name.includes('down_proj') || t.name.includes('lm_head')) return { name: t.name, scheme: { format: 'q8_0' } };
    return { name: t.name, scheme: { format: 'q4_0' } };
  });
}

function memorySink(): Sink & { bytes(): Uint8Array; closed: boolean; aborted: boolean } {
  const parts: Uint8Array[] = [];
  const s = {
    closed: false, aborted: false,
    async write(c: Uint8Array) { parts.push(c.slice()); },
    async close() { s.closed = true; },
    async abort() { s.aborted = true; parts.length = 0; },
    bytes() { return Buffer.concat(parts); },
  };
  return s;
}

async function runTo(ck: Checkpoint, extra: Partial<QuantizeCheckpointOptions> = {}) {
  const sink = memorySink();
  const result = await quantizeCheckpoint({ input: ck, plan: planFor(ck), sink, poolOptions: { workerUrl: workerUrl() }, ...extra });
  return { bytes: sink.bytes(), result, sink };
}

const model = syntheticModel(12);
const open = () => openSafetensors(fromBuffer(model.bytes, 'synthetic.safetensors'));

afterEach(() => {
  expect(liveWorkerThreads()).toBe(0);
});

describe('quantizeCheckpoint', () => {
  it('writes the same bytes with 1, 2 and 4 workers, each tensor equal to quantize()', async () => {
    const ck = await open();
    const runs = [];
    for (const workers of [1, 2, 4]) runs.push(await runTo(ck, { workers }));
    expect(sameBytes(runs[0].bytes, runs[1].bytes)).toBe(true);
    expect(sameBytes(runs[0].bytes, runs[2].bytes)).toBe(true);
    expect(runs[0].sink.closed).toBe(true);

    const out = await openSafetensors(fromBuffer(runs[0].bytes, 'out.safetensors'));
    const quant = JSON.parse(out.metadata['webquant.quantization'] as string);
    for (const p of planFor(ck)) {
      const info = ck.tensor(p.name);
      if (p.scheme === 'keep') {
        expect(sameBytes(await out.readRaw(p.name), await ck.readRaw(p.name)), p.name).toBe(true);
        expect(out.tensor(p.name).dtype).toBe(info.dtype);
        continue;
      }
      const { values, dtype } = await ck.readValues(p.name);
      const want = await quantize(values, { format: p.scheme.format, rowLength: info.shape[1], dtype });
      expect(sameBytes(await out.readRaw(p.name), want.data), p.name).toBe(true);
      expect(quant[p.name]).toMatchObject({ format: p.scheme.format, shape: info.shape });
    }
  });

  it('processes tensors in layer order and reports progress per tensor and per layer', async () => {
    const ck = await open();
    const seen: ProgressEvent[] = [];
    const run = quantizeCheckpoint({ input: ck, plan: planFor(ck), sink: memorySink(), workers: 2, poolOptions: { workerUrl: workerUrl() }, onProgress: (e) => seen.push(e) });
    const iterated: ProgressEvent[] = [];
    for await (const e of run) iterated.push(e);
    const result = await run;
    expect(iterated).toEqual(seen);
    const tensorEvents = seen.filter((e) => e.type === 'tensor');
    expect(tensorEvents.map((e) => e.name)).toEqual(result.tensors.map((t) => t.name));
    const layers = tensorEvents.map((e) => e.layer).filter((l) => l !== undefined);
    expect(layers).toEqual([...layers].sort((a, b) => a! - b!));
    expect(tensorEvents[0].name).toBe('model.embed_tokens.weight');
    const layerEvents = seen.filter((e) => e.type === 'layer');
    expect(layerEvents.map((e) => e.group)).toEqual(['embeddings', ...Array.from({ length: 12 }, (_, i) => `layer ${i}`), 'other']);
    const last = tensorEvents[tensorEvents.length - 1];
    expect(last.bytesDone).toBe(last.bytesTotal);
    expect(last.bytesTotal).toBe(ck.tensors.reduce((a, t) => a + t.byteLength, 0));
    for (const e of tensorEvents) {
      expect(e.count).toBe(ck.tensors.length);
      if (e.format !== 'keep') {
        expect(e.metrics!.count).toBe(ck.tensor(e.name).shape.reduce((a, b) => a * b, 1));
        expect(e.metrics!.sqnrDb).toBeGreaterThan(10);
      }
    }
    expect(last.throughput).toBeGreaterThan(0);
  });

  it('cuts a tensor larger than the budget into row chunks with identical output', async () => {
    const ck = await open();
    const whole = await runTo(ck, { workers: 2 });
    const reads: string[] = [];
    const ranged = rowReader(fromBuffer(model.bytes, 'synthetic.safetensors'));
    const readRows = async (info: TensorInfo, r0: number, n: number) => {
      reads.push(`${info.name}:${r0}+${n}`);
      return ranged(info, r0, n);
    };
    // 32 KiB: the 256x128 F32 up_proj (128 KiB + output) must be cut; small tensors are not.
    const chunked = await runTo(ck, { workers: 2, maxInFlightBytes: 32 << 10, readRows });
    expect(sameBytes(chunked.bytes, whole.bytes)).toBe(true);
    expect(chunked.result.peakInFlightBytes).toBeLessThanOrEqual(32 << 10);
    const up = chunked.result.tensors.find((t) => t.name === 'model.layers.0.mlp.up_proj.weight')!;
    expect(up.chunks).toBeGreaterThan(4);
    expect(reads.some((r) => r.startsWith('model.layers.0.mlp.up_proj.weight:'))).toBe(true);
    const ref = whole.result.tensors.find((t) => t.name === up.name)!;
    expect(up.metrics!.rmse).toBeCloseTo(ref.metrics!.rmse, 6);
    expect(up.metrics!.maxAbsError).toBe(ref.metrics!.maxAbsError);
    // Without ranged reads the tensor is read once and only the quantization is chunked.
    const fallback = await runTo(ck, { workers: 1, maxInFlightBytes: 32 << 10 });
    expect(sameBytes(fallback.bytes, whole.bytes)).toBe(true);
  });

  it('cuts layouts without value-dependent tensor sections (int8 per channel, nf4, fp8 per row, int4 groups, bitsandbytes\' constant ones); the others run whole', async () => {
    const ck = await open();
    const ranged = rowReader(fromBuffer(model.bytes, 'synthetic.safetensors'));
    const readRows = (info: TensorInfo, r0: number, n: number) => ranged(info, r0, n);
    const up = 'model.layers.0.mlp.up_proj.weight';
    const cases: [string, Record<string, unknown>, boolean][] = [
      ['int8', { format: 'int8' }, true], ['nf4', { format: 'nf4' }, true], ['fp8_e4m3', { format: 'fp8_e4m3' }, true],
      ['int4', { format: 'int4', groupSize: 32 }, true],
      ['bnb_nf4', { format: 'bnb_nf4' }, true], ['bnb_fp4', { format: 'bnb_fp4', groupSize: 128 }, true], ['bnb_int8', { format: 'bnb_int8' }, true],
      ['bnb_nf4 dq', { format: 'bnb_nf4', doubleQuant: true }, false],
      // a per-tensor scale and double quantization need the whole tensor
      ['fp8_e4m3 per tensor', { format: 'fp8_e4m3', granularity: 'tensor' }, false], ['nf4 dq', { format: 'nf4', doubleQuant: true }, false],
    ];
    for (const [label, scheme, cut] of cases) {
      const plan = ck.tensors.map((t) => ({ name: t.name, scheme: t.shape.length === 2 && t.name.includes('mlp') ? scheme : 'keep' as const }));
      const whole = await runTo(ck, { workers: 2, plan: plan as never });
      const small = await runTo(ck, { workers: 2, plan: plan as never, maxInFlightBytes: 32 << 10, readRows });
      expect(sameBytes(small.bytes, whole.bytes), label).toBe(true);
      const t = small.result.tensors.find((x) => x.name === up)!;
      if (cut) {
        expect(t.chunks, label).toBeGreaterThan(4);
        expect(small.result.peakInFlightBytes, label).toBeLessThanOrEqual(32 << 10);
      } else {
        expect(t.chunks, label).toBe(1);
      }
    }
  });

  it('a cut bitsandbytes tensor resumed from the store gets its constant sections (the F16 input\'s quant state) all the same', async () => {
    const ck = await open();
    const plan = ck.tensors.map((t) => ({ name: t.name, scheme: t.shape.length === 2 && t.name.includes('mlp') ? { format: 'bnb_nf4' } : 'keep' as const }));
    const whole = await runTo(ck, { workers: 1, plan });
    const resume = dirStore(mkdtempSync(join(tmpdir(), 'wq-bnb-resume-')));
    const first = await runTo(ck, { workers: 2, plan, maxInFlightBytes: 32 << 10, resume, keepResumeData: true });
    const again = await runTo(ck, { workers: 2, plan, maxInFlightBytes: 32 << 10, resume });
    const down = 'model.layers.0.mlp.down_proj.weight';
    expect(ck.tensor(down).dtype).toBe('F16');
    expect(again.result.tensors.find((t) => t.name === down)!.chunks).toBeGreaterThan(1);
    expect(again.result.resumedUnits).toBe(again.result.tensors.filter((t) => t.format !== 'keep').reduce((a, t) => a + t.chunks, 0));
    expect(sameBytes(first.bytes, whole.bytes)).toBe(true);
    expect(sameBytes(again.bytes, whole.bytes)).toBe(true);
    const state = await (await openSafetensors(fromBuffer(again.bytes, 'out'))).readRaw(`${down}.quant_state.bitsandbytes__nf4`);
    expect(JSON.parse(new TextDecoder().decode(state))).toMatchObject({ dtype: 'float16', shape: ck.tensor(down).shape });
  });

  it('cuts MLX weights (values only readF32 / readRows give) into row chunks too, with identical output', async () => {
    // An mlx_lm-style file: one 256 x 128 weight at 4 bits in groups of 64 (with config's settings).
    const x = randomValues(256 * 128, 9);
    const q = await quantize(x, { format: 'mlx', rowLength: 128 });
    const codes = 256 * 128 / 2, per = 256 * 2 * 2;
    const bytes = buildSafetensors([
      { name: 'm.weight', dtype: 'U32', shape: [256, 16], data: q.data.subarray(0, codes) },
      { name: 'm.scales', dtype: 'BF16', shape: [256, 2], data: q.data.subarray(codes, codes + per) },
      { name: 'm.biases', dtype: 'BF16', shape: [256, 2], data: q.data.subarray(codes + per) },
    ]);
    const ck = await openSafetensors(fromBuffer(bytes, 'mlx.safetensors'), { mlx: { groupSize: 64, bits: 4 } });
    const plan = [{ name: 'm.weight', scheme: { format: 'q8_0' } }];
    const sinkA = memorySink(), sinkB = memorySink();
    const whole = await quantizeCheckpoint({ input: ck, plan, sink: sinkA, workers: 2, poolOptions: { workerUrl: workerUrl() } });
    const chunked = await quantizeCheckpoint({ input: ck, plan, sink: sinkB, workers: 2, maxInFlightBytes: 32 << 10, poolOptions: { workerUrl: workerUrl() } });
    expect(whole.tensors[0].chunks).toBe(1);
    expect(chunked.tensors[0].chunks).toBeGreaterThan(4);
    expect(chunked.peakInFlightBytes).toBeLessThanOrEqual(32 << 10);
    expect(sameBytes(sinkB.bytes(), sinkA.bytes())).toBe(true);
    const out = await openSafetensors(fromBuffer(sinkA.bytes(), 'out'));
    const ref = await quantize(await ck.readF32('m.weight'), { format: 'q8_0', rowLength: 128 });
    expect(sameBytes(await out.readRaw('m.weight'), ref.data)).toBe(true);
    // kept, it is written as its F32 values, in row chunks too under the small budget
    const sinkC = memorySink();
    const kept = await quantizeCheckpoint({ input: ck, plan: [{ name: 'm.weight', scheme: 'keep' }], sink: sinkC, workers: 1, maxInFlightBytes: 32 << 10, poolOptions: { workerUrl: workerUrl() } });
    expect(kept.tensors[0].chunks).toBeGreaterThan(1);
    expect(kept.peakInFlightBytes).toBeLessThanOrEqual(32 << 10);
    const keptOut = await openSafetensors(fromBuffer(sinkC.bytes(), 'kept'));
    expect(keptOut.tensor('m.weight')).toMatchObject({ dtype: 'F32', shape: [256, 128] });
    expect([...await keptOut.readF32('m.weight')]).toEqual([...await ck.readF32('m.weight')]);
  });

  it('uses a caller pool without terminating it, and streams to a ReadableStream and a Blob', async () => {
    const ck = await open();
    const ref = await runTo(ck, { workers: 1 });
    const pool = await createPool({ size: 2, workerUrl: workerUrl() });
    try {
      const rs = readableStreamSink(1024);
      const [, streamed] = await Promise.all([
        quantizeCheckpoint({ input: ck, plan: planFor(ck), sink: rs.sink, pool }),
        new Response(rs.stream).arrayBuffer(),
      ]);
      expect(sameBytes(new Uint8Array(streamed), ref.bytes)).toBe(true);
      const bs = blobSink();
      await quantizeCheckpoint({ input: ck, plan: planFor(ck), sink: bs.sink, pool });
      expect(sameBytes(new Uint8Array(await (await bs.blob()).arrayBuffer()), ref.bytes)).toBe(true);
      expect(pool.workers).toBeGreaterThan(0);
    } finally {
      await pool.terminate();
    }
  });

  it('fails before writing anything on a bad plan, naming the tensor', async () => {
    const ck = await open();
    const sink = memorySink();
    const plan = planFor(ck).map((p) => (p.name === 'model.layers.3.mlp.up_proj.weight' ? { ...p, scheme: { format: 'q8_0', bits: 3 } } : p));
    const err = await quantizeCheckpoint({ input: ck, plan, sink, workers: 1, poolOptions: { workerUrl: workerUrl() } }).then(() => undefined, (e) => e);
    expect(err).toBeInstanceOf(WebquantError);
    expect(err.code).toBe('E_BAD_OPTION');
    expect(err.details.tensor).toBe('model.layers.3.mlp.up_proj.weight');
    expect(sink.bytes().byteLength).toBe(0);
    const err2 = await quantizeCheckpoint({ input: ck, plan: [{ name: 'model.position_ids', scheme: { format: 'q8_0' } }], sink, workers: 1, poolOptions: { workerUrl: workerUrl() } }).then(() => undefined, (e) => e);
    expect(err2.code).toBe('E_PLAN');
  });

  it('aborts: rejects with E_ABORTED, leaves no output file and no worker thread', async () => {
    const ck = await open();
    const dir = mkdtempSync(join(tmpdir(), 'wq-abort-'));
    const path = join(dir, 'out.safetensors');
    const ac = new AbortController();
    let tensors = 0, maxLive = 0;
    const run = quantizeCheckpoint({
      input: ck, plan: planFor(ck), sink: await fileSink(path), workers: 2, poolOptions: { workerUrl: workerUrl() }, signal: ac.signal,
      onProgress: (e) => { maxLive = Math.max(maxLive, liveWorkerThreads()); if (e.type === 'tensor' && ++tensors === 5) ac.abort(); },
    });
    const err = await run.then(() => undefined, (e) => e);
    expect(err).toBeInstanceOf(WebquantError);
    expect(err.code).toBe('E_ABORTED');
    expect(tensors).toBeLessThan(ck.tensors.length);
    expect(maxLive).toBeGreaterThan(0);
    expect(existsSync(path)).toBe(false);
    expect(readdirSync(dir)).toEqual([]);
    expect(liveWorkerThreads()).toBe(0);
    // An already aborted signal fails at once.
    const again = await quantizeCheckpoint({ input: ck, plan: planFor(ck), sink: await fileSink(path), signal: ac.signal, poolOptions: { workerUrl: workerUrl() } }).then(() => undefined, (e) => e);
    expect(again.code).toBe('E_ABORTED');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('writes a file atomically with the Node file sink', async () => {
    const ck = await open();
    const ref = await runTo(ck, { workers: 2 });
    const dir = mkdtempSync(join(tmpdir(), 'wq-file-'));
    const path = join(dir, 'out.safetensors');
    await quantizeCheckpoint({ input: ck, plan: planFor(ck), sink: await fileSink(path), workers: 2, poolOptions: { workerUrl: workerUrl() } });
    expect(sameBytes(new Uint8Array(readFileSync(path)), ref.bytes)).toBe(true);
    expect(readdirSync(dir)).toEqual(['out.safetensors']);
  });
});

describe('quantizeCheckpoint: multi-section formats and GGUF output', () => {
  const mixed = (ck: Checkpoint): PlannedTensor[] => ck.tensors.map((t) => {
    if (t.shape.length < 2) return { name: t.name, scheme: 'keep' as const };
    if (t.name.includes('up_proj')) return { name: t.name, scheme: { format: 'affine', bits: 4, groupSize: 64 } };
    if (t.name.includes('q_proj')) return { name: t.name, scheme: { format: 'int4', granularity: 'tensor' } };
    return { name: t.name, scheme: { format: 'q4_0' } };
  });

  it('cuts a multi-section tensor into chunks and keeps tensors with tensor-level sections whole', async () => {
    const ck = await open();
    const sink1 = memorySink();
    const whole = await quantizeCheckpoint({ input: ck, plan: mixed(ck), sink: sink1, workers: 2, poolOptions: { workerUrl: workerUrl() } });
    const sink2 = memorySink();
    const cut = await quantizeCheckpoint({ input: ck, plan: mixed(ck), sink: sink2, workers: 2, maxInFlightBytes: 24 << 10, poolOptions: { workerUrl: workerUrl() } });
    expect(sameBytes(sink1.bytes(), sink2.bytes())).toBe(true);
    const up = cut.tensors.find((t) => t.name === 'model.layers.1.mlp.up_proj.weight')!;
    expect(up.chunks).toBeGreaterThan(2);
    // int4 per tensor (one scale from a pass over the whole tensor): never cut, whatever the budget.
    expect(cut.tensors.find((t) => t.name === 'model.layers.1.self_attn.q_proj.weight')!.chunks).toBe(1);
    expect(whole.tensors.every((t) => t.chunks === 1)).toBe(true);

    const out = await openSafetensors(fromBuffer(sink2.bytes(), 'out.safetensors'));
    for (const name of ['model.layers.1.mlp.up_proj.weight', 'model.layers.1.self_attn.q_proj.weight']) {
      const { values, dtype } = await ck.readValues(name);
      const p = mixed(ck).find((x) => x.name === name)!;
      const want = await quantize(values, { ...(p.scheme as { format: string }), rowLength: ck.tensor(name).shape[1], dtype });
      for (const [i, s] of want.layout.sections.entries()) {
        const entry = i === 0 ? name : `${name}.${s.name}`;
        expect(sameBytes(await out.readRaw(entry), want.data.subarray(s.offset, s.offset + s.bytes)), entry).toBe(true);
      }
      expect(want.layout.sections.length).toBeGreaterThan(1);
    }
  });

  it('writes GGUF through the GGUF writer, readable by openGguf with the same tensor bytes', async () => {
    const ck = await open();
    const sink = memorySink();
    await quantizeCheckpoint({
      input: ck, plan: planFor(ck), sink, workers: 2, poolOptions: { workerUrl: workerUrl() },
      container: ggufContainer({ metadata: [{ key: 'general.architecture', type: 'string', value: 'llama' }] }),
    });
    const g = await openGguf(fromBuffer(sink.bytes(), 'out.gguf'));
    expect(g.metadata['general.architecture']).toBe('llama');
    expect(g.tensors[0].name).toBe('model.embed_tokens.weight');
    for (const p of planFor(ck)) {
      const info = ck.tensor(p.name);
      if (p.scheme === 'keep') { expect(sameBytes(await g.readRaw(p.name), await ck.readRaw(p.name))).toBe(true); continue; }
      const { values, dtype } = await ck.readValues(p.name);
      const want = await quantize(values, { format: p.scheme.format, rowLength: info.shape[1], dtype });
      expect(g.tensor(p.name).dtype).toBe(p.scheme.format.toUpperCase());
      expect(sameBytes(await g.readRaw(p.name), want.data), p.name).toBe(true);
    }
    // A format without a GGUF type is refused before anything is written.
    const sink2 = memorySink();
    const err = await quantizeCheckpoint({ input: ck, plan: [{ name: 'lm_head.weight', scheme: { format: 'affine' } }], sink: sink2, workers: 1, container: ggufContainer(), poolOptions: { workerUrl: workerUrl() } }).then(() => undefined, (e) => e);
    expect(err.code).toBe('E_PLAN');
    expect(err.details.tensor).toBe('lm_head.weight');
    expect(sink2.bytes().byteLength).toBe(0);
  });
});

describe('quantizeCheckpoint: importance per expert', () => {
  it('a [experts, rows, cols] tensor with one importance vector per expert: each expert quantized with its own, whole or in chunks', async () => {
    const E = 4, R = 8, C = 256;
    const values = randomValues(E * R * C, 21);
    const ck = await openSafetensors(fromBuffer(buildSafetensors([{ name: 'blk.0.ffn_down_exps.weight', dtype: 'F32', shape: [E, R, C], data: f32Bytes(values) }]), 'moe.safetensors'));
    const imp = Float32Array.from({ length: E * C }, (_, i) => 0.1 + ((i * 7919) % 97) / 10 * (1 + Math.floor(i / C)));
    const want = Buffer.concat(await Promise.all(Array.from({ length: E }, async (_, e) =>
      (await quantize(values.subarray(e * R * C, (e + 1) * R * C), { format: 'q4_k', rowLength: C, importance: imp.subarray(e * C, (e + 1) * C) })).data)));
    const same = (await quantize(values, { format: 'q4_k', rowLength: C, importance: imp.subarray(0, C) })).data;
    expect(sameBytes(want, same)).toBe(false); // the experts' vectors matter
    const plan = [{ name: 'blk.0.ffn_down_exps.weight', scheme: { format: 'q4_k' } }];
    for (const maxInFlightBytes of [undefined, 12 << 10]) {
      const sink = memorySink();
      await quantizeCheckpoint({ input: ck, plan, sink, workers: 2, importance: { 'blk.0.ffn_down_exps.weight': imp }, maxInFlightBytes, poolOptions: { workerUrl: workerUrl() } });
      const out = await openSafetensors(fromBuffer(sink.bytes(), 'out.safetensors'));
      expect(sameBytes(await out.readRaw('blk.0.ffn_down_exps.weight'), want), `budget ${maxInFlightBytes}`).toBe(true);
    }
  });
});

describe('quantizeCheckpoint: worker crashes', () => {
  const crashModel = (prefix: string) => {
    const tensors = [0, 1, 2].map((i) => ({ name: `${prefix}blk.${i}.ffn_up.weight`, dtype: 'F32' as const, shape: [16, 64], data: f32Bytes(randomValues(16 * 64, 40 + i)) }));
    return buildSafetensors(tensors);
  };
  const crashUrl = () => compiledUrl('test/pipeline/fixtures/crash-worker.js');

  it('retries a tensor whose worker crashed and writes the same bytes', async () => {
    process.env.WEBQUANT_CRASH_DIR = mkdtempSync(join(tmpdir(), 'wq-crash-'));
    const plain = await openSafetensors(fromBuffer(crashModel(''), 'plain'));
    const crashy = await openSafetensors(fromBuffer(crashModel('crash-once-'), 'crashy'));
    const plan = (ck: Checkpoint) => ck.tensors.map((t) => ({ name: t.name, scheme: { format: 'q4_0' } }));
    const a = memorySink(), b = memorySink();
    await quantizeCheckpoint({ input: plain, plan: plan(plain), sink: a, workers: 2, poolOptions: { workerUrl: workerUrl() }, container: ggufContainer() });
    await quantizeCheckpoint({ input: crashy, plan: plan(crashy), sink: b, workers: 2, poolOptions: { workerUrl: crashUrl() }, container: ggufContainer() });
    expect(readdirSync(process.env.WEBQUANT_CRASH_DIR).length).toBe(3); // every tensor crashed once
    const ga = await openGguf(fromBuffer(a.bytes(), 'a')), gb = await openGguf(fromBuffer(b.bytes(), 'b'));
    for (let i = 0; i < 3; i++) {
      expect(sameBytes(await gb.readRaw(`crash-once-blk.${i}.ffn_up.weight`), await ga.readRaw(`blk.${i}.ffn_up.weight`))).toBe(true);
    }
  });

  it('fails naming the tensor when the retry crashes too, leaving no file', async () => {
    const ck = await openSafetensors(fromBuffer(crashModel('crash-always-'), 'crashy'));
    const dir = mkdtempSync(join(tmpdir(), 'wq-crash2-'));
    const err = await quantizeCheckpoint({
      input: ck, plan: ck.tensors.map((t) => ({ name: t.name, scheme: { format: 'q4_0' } })), sink: await fileSink(join(dir, 'o.gguf')),
      workers: 2, poolOptions: { workerUrl: crashUrl() },
    }).then(() => undefined, (e) => e);
    expect(err).toBeInstanceOf(WebquantError);
    expect(err.code).toBe('E_WORKER_CRASHED');
    expect(err.details.tensor).toMatch(/^crash-always-blk\.\d\.ffn_up\.weight$/);
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe('quantizeCheckpoint with resolvePlan', () => {
  it('takes a ResolvedPlan and follows its per-tensor schemes', async () => {
    const { resolvePlan } = await import('../../src/plan/plan.js');
    const ck = await open();
    const resolved = resolvePlan({ default: { format: 'q4_0' }, rules: [{ role: 'ffn', kind: 'down', scheme: { format: 'q8_0' } }], skip: [] }, ck.tensors);
    expect(resolved.ok).toBe(true);
    const sink = memorySink();
    const r = await quantizeCheckpoint({ input: ck, plan: resolved, sink, workers: 2, poolOptions: { workerUrl: workerUrl() } });
    for (const t of resolved.tensors) {
      const rep = r.tensors.find((x) => x.name === t.name)!;
      expect(rep.format, t.name).toBe(t.scheme === 'keep' ? 'keep' : t.scheme.format);
    }
    expect(r.tensors.some((t) => t.format === 'q8_0')).toBe(true);
    const broken = { ...resolved, ok: false, problems: [{ severity: 'error', message: 'boom', tensor: 'x' }] };
    const err = await quantizeCheckpoint({ input: ck, plan: broken, sink: memorySink(), workers: 1, poolOptions: { workerUrl: workerUrl() } }).then(() => undefined, (e) => e);
    expect(err.code).toBe('E_PLAN');
  });
});

describe('quantizeCheckpoint: memory budget', () => {
  it('stops reading while the bytes in flight would exceed the budget', async () => {
    const ck = await open();
    // Count tensors read but not yet written, behind a sink slow enough that reading would run ahead.
    let read = 0, writtenTensors = 0, ahead = 0;
    const counting: Checkpoint = Object.assign(Object.create(ck), {
      readValues: async (n: string) => { read++; ahead = Math.max(ahead, read - writtenTensors); return ck.readValues(n); },
      readRaw: async (n: string) => { read++; ahead = Math.max(ahead, read - writtenTensors); return ck.readRaw(n); },
    });
    const slow = memorySink();
    const write = slow.write;
    slow.write = async (c) => { await new Promise((r) => setTimeout(r, 2)); return write(c); };
    const budget = 100 << 10;
    const r = await quantizeCheckpoint({
      input: counting, plan: planFor(ck), sink: slow, workers: 2, maxInFlightBytes: budget, poolOptions: { workerUrl: workerUrl() },
      onProgress: (e) => { if (e.type === 'tensor') writtenTensors++; },
    });
    expect(r.peakInFlightBytes).toBeLessThanOrEqual(budget);
    expect(r.peakInFlightBytes).toBeGreaterThan(budget / 4);
    // The smallest quantized tensors cost ~20 KiB in flight: at most a handful can be ahead.
    expect(ahead).toBeLessThanOrEqual(8);
    expect(ahead).toBeGreaterThan(1);
    const unlimited = await runTo(ck, { workers: 2 });
    expect(sameBytes(slow.bytes(), unlimited.bytes)).toBe(true);
    expect(unlimited.result.peakInFlightBytes).toBeGreaterThan(budget);
  });

  it('runs a unit larger than the budget alone', async () => {
    const ck = await open();
    // int4 per tensor has a tensor-level section (its scale), so its tensors cannot be cut: each
    // runs alone over a 1 KiB budget.
    const plan = ck.tensors.map((t) => ({ name: t.name, scheme: t.shape.length < 2 ? ('keep' as const) : { format: 'int4', granularity: 'tensor' as const } }));
    const r = await quantizeCheckpoint({ input: ck, plan, sink: memorySink(), workers: 2, maxInFlightBytes: 1024, poolOptions: { workerUrl: workerUrl() } });
    const biggest = Math.max(...r.tensors.map((t) => (t.format === 'keep' ? t.bytes : t.bytes + t.outputBytes)));
    expect(r.peakInFlightBytes).toBe(biggest);
    expect(r.tensors.every((t) => t.chunks === 1)).toBe(true);
  });
});
