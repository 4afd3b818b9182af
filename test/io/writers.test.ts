import { describe, expect, test } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gguf as hfGguf } from '@huggingface/gguf';
import { ErrorCodes } from '../../src/errors.js';
import { fromBuffer } from '../../src/io/source.js';
import { openGguf, type GgufScalarType } from '../../src/io/gguf.js';
import { openSafetensors } from '../../src/io/safetensors.js';
import { GgufWriter, writeGguf, type GgufWriteKV, type GgufWriteTensor } from '../../src/io/gguf-writer.js';
import { SafetensorsWriter, writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect, toReadableStream } from '../../src/io/stream.js';
import { GGML_TYPES } from '../../src/io/ggml-types.js';
import { writeFileAtomic } from '../../src/io/node.js';
import { f32ToBf16, f32ToF16 } from '../../src/util/half.js';
import { bytesOf, expectCode, randomF32 } from './helpers.js';

function pseudoBytes(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) { s = (Math.imul(s, 1103515245) + 12345) >>> 0; b[i] = s >>> 24; }
  return b;
}

const ALL_KV: GgufWriteKV[] = [
  { key: 'general.architecture', type: 'string', value: 'llama' },
  { key: 'u8', type: 'u8', value: 255 },
  { key: 'i8', type: 'i8', value: -128 },
  { key: 'u16', type: 'u16', value: 65535 },
  { key: 'i16', type: 'i16', value: -32768 },
  { key: 'u32', type: 'u32', value: 4294967295 },
  { key: 'i32', type: 'i32', value: -2147483648 },
  { key: 'f32', type: 'f32', value: 0.1 },
  { key: 'bool', type: 'bool', value: true },
  { key: 'u64', type: 'u64', value: 2n ** 64n - 1n },
  { key: 'i64', type: 'i64', value: -(2n ** 63n) },
  { key: 'f64', type: 'f64', value: Math.E },
  { key: 'str_unicode', type: 'string', value: 'héllo ▁wörld 🦙' },
  { key: 'tokens', type: 'array', itemType: 'string', value: ['<unk>', '<s>', '', '▁a'] },
  { key: 'scores', type: 'array', itemType: 'f32', value: [0, -1.5, 2.25] },
  { key: 'types', type: 'array', itemType: 'i32', value: [1, 2, 3] },
  { key: 'flags', type: 'array', itemType: 'bool', value: [true, false] },
  { key: 'big', type: 'array', itemType: 'u64', value: [0n, 2n ** 40n] },
  { key: 'empty', type: 'array', itemType: 'u8', value: [] },
];

/** One tensor of every known ggml type, with row length one block (two for block-1 types). */
function everyTypeTensors(): GgufWriteTensor[] {
  return [...GGML_TYPES.values()].map((t, i) => {
    const rowLen = t.blockSize === 1 ? 8 : t.blockSize;
    const shape = [3, rowLen];
    return { name: `t.${t.name}`, ggmlType: t.name, shape, data: pseudoBytes((3 * rowLen / t.blockSize) * t.typeSize, i + 1) };
  });
}

describe('GGUF writer', () => {
  test('round trip: every metadata type and every ggml type, v3, aligned and padded', async () => {
    const tensors = everyTypeTensors();
    const file = await collect(writeGguf({ metadata: ALL_KV, tensors }));
    const g = await openGguf(fromBuffer(file, 'rt.gguf'));
    expect(g.version).toBe(3);
    expect(g.alignment).toBe(32);
    expect(g.kv.map(({ key, type, itemType }) => ({ key, type, ...(itemType ? { itemType } : {}) })))
      .toEqual(ALL_KV.map(({ key, type, itemType }) => ({ key, type, ...(itemType ? { itemType } : {}) })));
    for (const kv of ALL_KV) {
      const want = kv.type === 'f32' ? Math.fround(kv.value as number) : kv.type === 'array' && kv.itemType === 'f32' ? (kv.value as number[]).map(Math.fround) : kv.value;
      expect(g.metadata[kv.key]).toEqual(want);
    }
    for (const t of tensors) {
      const info = g.tensor(t.name);
      expect(info.shape).toEqual(t.shape);
      expect(info.dtype).toBe(t.ggmlType);
      expect(info.offset % 32).toBe(0);
      expect(await g.readRaw(t.name)).toEqual(t.data);
    }
    expect(file.length % 32).toBe(0);
  });
  test('custom alignment is written as general.alignment and honoured', async () => {
    const file = await collect(writeGguf({ alignment: 256, tensors: [{ name: 'a', ggmlType: 'F32', shape: [3], data: new Float32Array([1, 2, 3]) }, { name: 'b', ggmlType: 'F16', shape: [1], data: new Uint16Array([0x3c00]) }] }));
    const g = await openGguf(fromBuffer(file));
    expect(g.metadata['general.alignment']).toBe(256);
    expect(g.tensors.map((t) => t.offset % 256)).toEqual([0, 0]);
    expect(Array.from(await g.readF32('b'))).toEqual([1]);
  });
  test('streaming: header first, lazy tensor data fetched one at a time in order', async () => {
    const calls: string[] = [];
    const tensors = ['x', 'y', 'z'].map((name, i) => ({
      name, ggmlType: 'F32', shape: [2, 4],
      data: async () => { calls.push(name); return randomF32(8, i); },
    }));
    const it = writeGguf({ tensors });
    const first = await it.next();
    expect(calls).toEqual([]);
    const w = new GgufWriter({ tensors: tensors.map(({ name, ggmlType, shape }) => ({ name, ggmlType, shape })) });
    expect(first.value).toEqual(w.header);
    const rest: Uint8Array[] = [];
    for await (const c of it) rest.push(c);
    expect(calls).toEqual(['x', 'y', 'z']);
    expect(w.totalBytes).toBe(w.header.length + rest.reduce((a, c) => a + c.length, 0));
    // the same bytes through a web ReadableStream
    const viaStream = new Uint8Array(await new Response(toReadableStream(writeGguf({ tensors }))).arrayBuffer());
    expect(viaStream).toEqual(await collect([w.header, ...rest]));
  });
  test('writer refuses bad input with E_WRITER', async () => {
    const t = (o: Partial<GgufWriteTensor>) => ({ name: 'w', ggmlType: 'F32', shape: [4], ...o });
    await expectCode(() => new GgufWriter({ tensors: [t({ ggmlType: 'Q9_9' })] }), ErrorCodes.WRITER);
    await expectCode(() => new GgufWriter({ tensors: [t({ ggmlType: 'Q4_0', shape: [2, 48] })] }), ErrorCodes.WRITER);
    await expectCode(() => new GgufWriter({ tensors: [t({}), t({})] }), ErrorCodes.WRITER);
    await expectCode(() => new GgufWriter({ tensors: [t({ shape: [1, 1, 1, 1, 1] })] }), ErrorCodes.WRITER);
    await expectCode(() => new GgufWriter({ tensors: [], alignment: 24 }), ErrorCodes.WRITER);
    await expectCode(() => new GgufWriter({ tensors: [], metadata: [{ key: 'a', type: 'u8', value: 256 }] }), ErrorCodes.WRITER);
    await expectCode(() => new GgufWriter({ tensors: [], metadata: [{ key: 'a', type: 'i64', value: 2 ** 60 }] }), ErrorCodes.WRITER);
    await expectCode(() => new GgufWriter({ tensors: [], metadata: [{ key: 'a', type: 'string', value: '\ud800' }] }), ErrorCodes.WRITER);
    await expectCode(() => new GgufWriter({ tensors: [], metadata: [{ key: 'a', type: 'array', value: [1] }] }), ErrorCodes.WRITER);
    await expectCode(() => new GgufWriter({ tensors: [], metadata: [{ key: 'a', type: 'u8', value: 1 }, { key: 'a', type: 'u8', value: 1 }] }), ErrorCodes.WRITER);
    await expectCode(() => new GgufWriter({ tensors: [], metadata: [{ key: 'a', type: 'float' as GgufScalarType, value: 1 }] }), ErrorCodes.WRITER);
    for (const [itemType, value] of [['u8', [1, 2, 300]], ['string', ['x', 'y', 3]], ['bool', [true, false, 1]], ['u64', [1n, 2, -3n]]] as const) {
      const e = await expectCode(() => new GgufWriter({ tensors: [], metadata: [{ key: 'arr', type: 'array', itemType, value }] }), ErrorCodes.WRITER);
      expect(e.message).toContain('metadata "arr"[2]');
    }
    const w = new GgufWriter({ tensors: [t({}), t({ name: 'v' })] });
    await expectCode(() => w.tensor('v', new Float32Array(4)), ErrorCodes.WRITER);
    await expectCode(() => w.tensor('w', new Float32Array(3)), ErrorCodes.WRITER);
    w.tensor('w', new Float32Array(4));
    await expectCode(() => w.finish(), ErrorCodes.WRITER);
    await expectCode(collect(writeGguf({ tensors: [t({})] })), ErrorCodes.WRITER);
  });
  test('@huggingface/gguf parses our file with the same tensor infos and metadata', async () => {
    const tensors = everyTypeTensors();
    const file = await collect(writeGguf({ metadata: ALL_KV, tensors, alignment: 64 }));
    const dir = mkdtempSync(join(tmpdir(), 'webquant-gguf-'));
    try {
      const path = join(dir, 'model.gguf');
      await writeFileAtomic(path, [file]);
      const hf = await hfGguf(path, { allowLocalFile: true, typedMetadata: true });
      const ours = await openGguf(fromBuffer(file));
      expect(hf.metadata.version).toBe(3);
      expect(Number(hf.metadata.tensor_count)).toBe(tensors.length);
      expect(Number(hf.metadata.kv_count)).toBe(ours.kv.length);
      expect(Number(hf.tensorDataOffset)).toBe(ours.dataOffset);
      expect(hf.tensorInfos.map((t) => ({ name: t.name, ne: t.shape.map(Number), type: t.dtype, offset: Number(t.offset) })))
        .toEqual(ours.tensors.map((t) => ({ name: t.name, ne: t.ne, type: t.ggmlType, offset: t.relOffset })));
      for (const kv of ours.kv) {
        const h = hf.typedMetadata[kv.key];
        expect(h.type, kv.key).toBe(['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'f32', 'bool', 'string', 'array', 'u64', 'i64', 'f64'].indexOf(kv.type));
        if (kv.itemType) expect(h.subType, kv.key).toBe(['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'f32', 'bool', 'string', 'array', 'u64', 'i64', 'f64'].indexOf(kv.itemType));
        expect(h.value, kv.key).toEqual(kv.value);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('safetensors writer', () => {
  test('round trip with every dtype and __metadata__', async () => {
    const dtypes: [string, number][] = [['F64', 8], ['F32', 4], ['F16', 2], ['BF16', 2], ['F8_E4M3', 1], ['F8_E5M2', 1], ['I64', 8], ['U64', 8], ['I32', 4], ['U32', 4], ['I16', 2], ['U16', 2], ['I8', 1], ['U8', 1], ['BOOL', 1]];
    const tensors = dtypes.map(([dtype, size], i) => ({ name: `model.t${i}.${dtype}`, dtype, shape: [3, 5], data: pseudoBytes(15 * size, i + 7) }));
    const metadata = { format: 'pt', 'webquant.scheme': JSON.stringify({ 'model.t0.F64': { format: 'q4_k' } }) };
    const file = await collect(writeSafetensors({ tensors, metadata }));
    const c = await openSafetensors(fromBuffer(file, 'rt.safetensors'));
    expect(c.metadata).toEqual(metadata);
    expect(c.tensors.map((t) => [t.name, t.dtype, t.shape])).toEqual(tensors.map((t) => [t.name, t.dtype, t.shape]));
    for (const t of tensors) expect(await c.readRaw(t.name)).toEqual(t.data);
    // the data section starts 8-aligned
    expect(c.tensors[0].offset % 8).toBe(0);
  });
  test('float values: readF32 and readValues', async () => {
    const v = randomF32(12, 3);
    const f16 = Uint16Array.from(v, (x) => f32ToF16(x));
    const bf16 = Uint16Array.from(v, (x) => f32ToBf16(x));
    const file = await collect(writeSafetensors({ tensors: [
      { name: 'f32', dtype: 'F32', shape: [3, 4], data: v },
      { name: 'f16', dtype: 'F16', shape: [3, 4], data: f16 },
      { name: 'bf16', dtype: 'BF16', shape: [3, 4], data: bf16 },
      { name: 'f64', dtype: 'F64', shape: [3, 4], data: Float64Array.from(v) },
    ] }));
    const c = await openSafetensors(fromBuffer(file));
    expect(await c.readValues('f32')).toEqual({ values: v, dtype: 'f32' });
    expect(await c.readValues('f16')).toEqual({ values: f16, dtype: 'f16' });
    expect(await c.readValues('bf16')).toEqual({ values: bf16, dtype: 'bf16' });
    expect(await c.readF32('f64')).toEqual(v);
    const w16 = await c.readF32('f16');
    const wb = await c.readF32('bf16');
    for (let i = 0; i < 12; i++) {
      expect(f32ToF16(w16[i])).toBe(f16[i]);
      expect(new Uint32Array(wb.buffer)[i]).toBe((bf16[i] << 16) >>> 0);
    }
  });
  test('streaming shape: header from sizes, data in order', async () => {
    const spec = { tensors: [{ name: 'a', dtype: 'F32', shape: [2] }, { name: 'b', dtype: 'U8', shape: [3] }] };
    const w = new SafetensorsWriter(spec);
    expect(w.header.length % 8).toBe(0);
    const chunks = [w.header, ...w.tensor('a', new Float32Array([1, 2])), ...w.tensor('b', new Uint8Array([1, 2, 3]))];
    w.finish();
    const file = await collect(chunks);
    expect(file.length).toBe(w.totalBytes);
    const c = await openSafetensors(fromBuffer(file));
    expect(Array.from(await c.readRaw('b'))).toEqual([1, 2, 3]);
  });
  test('writer refuses bad input with E_WRITER', async () => {
    await expectCode(() => new SafetensorsWriter({ tensors: [{ name: '__proto__', dtype: 'F32', shape: [1] }] }), ErrorCodes.WRITER);
    await expectCode(() => new SafetensorsWriter({ tensors: [{ name: 'a', dtype: 'F4', shape: [1] }] }), ErrorCodes.WRITER);
    await expectCode(() => new SafetensorsWriter({ tensors: [{ name: 'a', dtype: 'F32', shape: [1] }, { name: 'a', dtype: 'F32', shape: [1] }] }), ErrorCodes.WRITER);
    await expectCode(() => new SafetensorsWriter({ tensors: [], metadata: { a: 1 as unknown as string } }), ErrorCodes.WRITER);
    await expectCode(() => new SafetensorsWriter({ tensors: [{ name: 'a', dtype: 'F32', shape: [-1] }] }), ErrorCodes.WRITER);
    const w = new SafetensorsWriter({ tensors: [{ name: 'a', dtype: 'F32', shape: [2] }] });
    await expectCode(() => w.tensor('a', new Float32Array(3)), ErrorCodes.WRITER);
    await expectCode(() => w.finish(), ErrorCodes.WRITER);
  });
  test('round trip of bytesOf views with offsets', async () => {
    const big = randomF32(10, 5);
    const view = big.subarray(3, 7);
    const file = await collect(writeSafetensors({ tensors: [{ name: 'v', dtype: 'F32', shape: [4], data: bytesOf(view) }] }));
    expect(await (await openSafetensors(fromBuffer(file))).readF32('v')).toEqual(view.slice());
  });
});

describe('readRows and openCheckpoint', () => {
  test('readRows reads only the rows asked for, in both formats', async () => {
    const { openCheckpoint } = await import('../../src/io/open.js');
    const v = randomF32(5 * 8, 11);
    const h = Uint16Array.from(v, (x) => f32ToBf16(x));
    const st = await collect(writeSafetensors({ tensors: [{ name: 'a', dtype: 'F32', shape: [5, 8], data: v }, { name: 'b', dtype: 'BF16', shape: [5, 8], data: h }, { name: 'i', dtype: 'I8', shape: [2], data: new Int8Array(2) }] }));
    const gg = await collect(writeGguf({ tensors: [{ name: 'a', ggmlType: 'F32', shape: [5, 8], data: v }, { name: 'b', ggmlType: 'BF16', shape: [5, 8], data: h }, { name: 'i', ggmlType: 'I8', shape: [2], data: new Int8Array(2) }] }));
    for (const file of [st, gg]) {
      const reads: [number, number][] = [];
      const inner = fromBuffer(file);
      const c = await openCheckpoint({ name: 'x', size: inner.size, read: (o, l) => { reads.push([o, l]); return inner.read(o, l); } });
      expect(c.format).toBe(file === st ? 'safetensors' : 'gguf');
      reads.length = 0;
      const r = await c.readRows!('a', 1, 3);
      expect(r).toEqual({ values: v.slice(8, 32), dtype: 'f32' });
      expect(reads).toEqual([[c.tensor('a').offset + 32, 96]]);
      expect(await c.readRows!('b', 4, 1)).toEqual({ values: h.slice(32, 40), dtype: 'bf16' });
      expect((await c.readRows!('b', 5, 0)).values.length).toBe(0);
      await expectCode(c.readRows!('a', 4, 2), ErrorCodes.BAD_INPUT);
      await expectCode(c.readRows!('a', -1, 1), ErrorCodes.BAD_INPUT);
      await expectCode(c.readRows!('i', 0, 1), ErrorCodes.UNSUPPORTED_DTYPE);
    }
    await expectCode(openCheckpoint(fromBuffer(new Uint8Array(3))), ErrorCodes.ST_HEADER_TOO_SMALL);
  });
});
