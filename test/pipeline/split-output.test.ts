import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { GGUF_DEFAULT_ALIGNMENT, openGguf, type GgufCheckpoint } from '../../src/io/gguf.js';
import { writeGguf } from '../../src/io/gguf-writer.js';
import { fromBuffer } from '../../src/io/source.js';
import { collect } from '../../src/io/stream.js';
import { ggufContainer, type GgufSplit } from '../../src/pipeline/container.js';
import { quantizeCheckpoint, type PlannedTensor } from '../../src/pipeline/pipeline.js';
import { splitSink, type Sink } from '../../src/pipeline/sink.js';
import { splitGguf } from '../helpers/gguf-split.js';
import { compiledUrl, randomValues, sameBytes } from './helpers.js';

// GGUF output in several files (llama.cpp's gguf-split layout) and GGUF from GGUF in llama-quantize's
// tensor order. bench notes in docs/cli.md: the files are byte-identical to llama-gguf-split's and
// llama-quantize's on the preset-check models; here the layout rules themselves are checked.

const workerUrl = () => compiledUrl('src/pipeline/worker-node.js');

function memorySink(): Sink & { bytes(): Uint8Array; events: string[] } {
  const parts: Uint8Array[] = [];
  const events: string[] = [];
  return {
    events,
    async write(c: Uint8Array) { parts.push(c.slice()); },
    async close() { events.push('close'); },
    async abort() { events.push('abort'); },
    bytes: () => Buffer.concat(parts),
  };
}

/** A split sink over memory sinks, with the files by index. */
function memorySplit() {
  const files: ReturnType<typeof memorySink>[] = [];
  const order: number[] = [];
  const sink = splitSink(async (i) => {
    const m = memorySink();
    const close = m.close;
    m.close = async () => { order.push(i); await close(); };
    files[i] = m;
    return m;
  });
  return { sink, files, closeOrder: order };
}

// Block tensors given out of name order, blk.10 before blk.2, things outside the blocks around them.
const NAMES: [string, number[]][] = [
  ['token_embd.weight', [16, 64]],
  ['blk.0.attn_q.weight', [32, 64]], ['blk.0.attn_norm.weight', [64]],
  ['blk.10.attn_q.weight', [32, 64]], ['blk.10.attn_norm.weight', [64]],
  ['blk.2.ffn_up.weight', [96, 64]], ['blk.2.attn_q.weight', [32, 64]],
  ['output_norm.weight', [64]], ['output.weight', [16, 64]],
];
const LLAMA_ORDER = ['output.weight', 'output_norm.weight', 'token_embd.weight', 'blk.0.attn_norm.weight', 'blk.0.attn_q.weight',
  'blk.2.attn_q.weight', 'blk.2.ffn_up.weight', 'blk.10.attn_norm.weight', 'blk.10.attn_q.weight'];

async function input(): Promise<GgufCheckpoint> {
  const bytes = await collect(writeGguf({
    metadata: [{ key: 'general.architecture', type: 'string', value: 'llama' }, { key: 'llama.block_count', type: 'u32', value: 11 }],
    tensors: NAMES.map(([name, shape], i) => ({ name, ggmlType: 'F32', shape, data: randomValues(shape.reduce((a, b) => a * b, 1), i + 1) })),
  }));
  return openGguf(fromBuffer(bytes, 'in.gguf'));
}

const plan = (ck: GgufCheckpoint): PlannedTensor[] => ck.tensors.map((t) => ({ name: t.name, scheme: t.shape.length === 2 ? { format: 'q8_0' } : 'keep' }));

async function quantize(ck: GgufCheckpoint, split: GgufSplit | undefined, sink: Sink) {
  return quantizeCheckpoint({ input: ck, plan: plan(ck), sink, workers: 1, container: ggufContainer({ metadata: [{ key: 'general.file_type', type: 'u32', value: 7 }], split }), poolOptions: { workerUrl: workerUrl() } });
}

async function single(ck: GgufCheckpoint): Promise<GgufCheckpoint> {
  const m = memorySink();
  await quantize(ck, undefined, m);
  return openGguf(fromBuffer(m.bytes(), 'one.gguf'));
}

async function splitRun(ck: GgufCheckpoint, split: GgufSplit) {
  const s = memorySplit();
  await quantize(ck, split, s.sink);
  const files = await Promise.all(s.files.map((f, i) => openGguf(fromBuffer(f.bytes(), `f${i}.gguf`)).catch(async () => readHeaderOnly(f.bytes()))));
  return { files, closeOrder: s.closeOrder, bytes: s.files.map((f) => f.bytes()) };
}

/** A split file opened alone: its own header (openGguf wants the other files). */
async function readHeaderOnly(bytes: Uint8Array) {
  const { readGgufHeader } = await import('../../src/io/gguf.js');
  return readGgufHeader(fromBuffer(bytes, 'x.gguf'));
}

const names = (h: { tensors: { name: string }[] }) => h.tensors.map((t) => t.name);
const keys = (h: { kv: { key: string; type: string; value: unknown }[] }) => h.kv.map((k) => [k.key, k.type, k.value]);

describe('GGUF output order and split files', () => {
  it('GGUF from GGUF is in llama-quantize\'s order: outside the blocks by name, then block by block (numerically), by name', async () => {
    const g = await single(await input());
    expect(names(g)).toEqual(LLAMA_ORDER);
    // general.file_type replaced in place of nothing: appended after the input's keys.
    expect(keys(g).map((k) => k[0])).toEqual(['general.architecture', 'llama.block_count', 'general.file_type']);
  });

  it('--split-max-tensors: files of n tensors, gguf-split\'s keys, and the same tensors as one file', async () => {
    const ck = await input();
    const one = await single(ck);
    const { files, closeOrder } = await splitRun(ck, { by: 'limit', maxTensors: 4 });
    expect(files.map((f) => f.tensors.length)).toEqual([4, 4, 1]);
    expect(files.flatMap(names)).toEqual(names(one));
    const splitKeys = (no: number) => [['split.no', 'u16', no], ['split.tensors.count', 'i32', 9], ['split.count', 'u16', 3]];
    expect(keys(files[0])).toEqual([...keys(one), ...splitKeys(0)]);
    expect(keys(files[1])).toEqual(splitKeys(1));
    expect(keys(files[2])).toEqual(splitKeys(2));
    // The first file, which names the others, is closed last.
    expect(closeOrder).toEqual([2, 1, 0]);
  });

  it('the split files open as one checkpoint with the single file\'s tensors, byte for byte', async () => {
    const ck = await input();
    const one = await single(ck);
    const { bytes } = await splitRun(ck, { by: 'limit', maxTensors: 2 });
    const byName = new Map(bytes.map((b, i) => [`m-${String(i + 1).padStart(5, '0')}-of-${String(bytes.length).padStart(5, '0')}.gguf`, b]));
    const first = [...byName.keys()][0];
    const g = await openGguf(fromBuffer(byName.get(first)!, first), { splits: (n) => fromBuffer(byName.get(n)!, n) });
    expect(names(g)).toEqual(names(one));
    for (const t of one.tensors) expect(sameBytes(await g.readRaw(t.name), await one.readRaw(t.name)), t.name).toBe(true);
  });

  it('--split-max-size: each file as full as the limit allows; a tensor larger than it alone', async () => {
    const ck = await input();
    const one = await single(ck);
    const pad = (n: number) => Math.ceil(n / GGUF_DEFAULT_ALIGNMENT) * GGUF_DEFAULT_ALIGNMENT;
    const size = new Map(one.tensors.map((t) => [t.name, pad(t.byteLength)]));
    const maxBytes = 3000; // blk.2.ffn_up (96 x 64 in Q8_0: 6528 bytes) is larger
    const { files } = await splitRun(ck, { by: 'limit', maxBytes });
    expect(files.flatMap(names)).toEqual(names(one));
    const totals = files.map((f) => names(f).reduce((a, n) => a + size.get(n)!, 0));
    files.forEach((f, i) => {
      if (f.tensors.length > 1) expect(totals[i], `file ${i}`).toBeLessThanOrEqual(maxBytes);
      // The next file's first tensor did not fit in this one.
      if (i + 1 < files.length) expect(totals[i] + size.get(names(files[i + 1])[0])!, `file ${i}`).toBeGreaterThan(maxBytes);
    });
    expect(files.some((f) => f.tensors.length === 1 && size.get(names(f)[0])! > maxBytes)).toBe(true);
  });

  it('--no-tensor-first-split: the first file holds the key/value pairs only', async () => {
    const { files } = await splitRun(await input(), { by: 'limit', firstWithoutTensors: true });
    expect(files.map((f) => f.tensors.length)).toEqual([0, 9]);
    expect(keys(files[0]).slice(-3)).toEqual([['split.no', 'u16', 0], ['split.tensors.count', 'i32', 9], ['split.count', 'u16', 2]]);
  });

  it('--keep-split: each tensor in the file its input tensor came from, in input order, llama-quantize\'s keys', async () => {
    const whole = await input();
    const parts = await splitGguf(whole, 'in', [3, 7]);
    const first = [...parts.keys()][0];
    const ck = await openGguf(fromBuffer(parts.get(first)!, first), { splits: (n) => fromBuffer(parts.get(n)!, n) });
    const { files } = await splitRun(ck, { by: 'input' });
    expect(files.map(names)).toEqual([NAMES.slice(0, 3), NAMES.slice(3, 7), NAMES.slice(7)].map((l) => l.map(([n]) => n)));
    expect(keys(files[1])).toEqual([['split.no', 'u16', 1], ['split.count', 'u16', 3], ['split.tensors.count', 'i32', 9]]);
    expect(keys(files[0]).slice(-3).map((k) => k[0])).toEqual(['split.no', 'split.count', 'split.tensors.count']);
    // A single-file input: one file, no split keys, the same bytes as without the option.
    const m = memorySink();
    await quantize(whole, { by: 'input' }, m);
    const plain = memorySink();
    await quantize(whole, undefined, plain);
    expect(sameBytes(m.bytes(), plain.bytes())).toBe(true);
  });

  it('a split output into a sink that writes one file is refused before anything is written', async () => {
    const m = memorySink();
    const err = await quantize(await input(), { by: 'limit', maxTensors: 2 }, m).catch((e) => e);
    expect(err.code).toBe(ErrorCodes.BAD_OPTION);
    expect(m.bytes().length).toBe(0);
    expect(m.events).toEqual(['abort']);
  });

  it('splitSink: chunks across file boundaries, an abort reaches every file, an early close fails', async () => {
    const s = memorySplit();
    await s.sink.files!([3, 0, 4, 2]);
    await s.sink.write(new Uint8Array([1, 2, 3, 4, 5]));
    await s.sink.write(new Uint8Array([6, 7, 8, 9]));
    await s.sink.close();
    expect(s.files.map((f) => [...f.bytes()])).toEqual([[1, 2, 3], [], [4, 5, 6, 7], [8, 9]]);
    await expect(s.sink.write(new Uint8Array(1))).rejects.toThrow(/past the end/);
    const t = memorySplit();
    await t.sink.files!([2, 2]);
    await t.sink.write(new Uint8Array(3));
    await expect(t.sink.close()).rejects.toThrow(/3 of 4 bytes/);
    await t.sink.abort(new Error('x'));
    expect(t.files.map((f) => f.events)).toEqual([['abort'], ['abort']]);
  });
});
