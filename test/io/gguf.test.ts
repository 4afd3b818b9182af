import { describe, expect, test } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { fromBuffer, type ByteSource } from '../../src/io/source.js';
import { openGguf } from '../../src/io/gguf.js';
import { writeGguf } from '../../src/io/gguf-writer.js';
import { collect } from '../../src/io/stream.js';
import { quantize, dequantize } from '../../src/quantize.js';
import { Bytes, expectCode, randomF32 } from './helpers.js';
import { withImportance } from '../helpers/data.js';

const open = (b: Uint8Array, initialRead?: number) => openGguf(fromBuffer(b, 'test.gguf'), { initialRead });

/** Header start: magic, version, counts (u32 in v1, u64 later). */
function head(version: number, nTensors: number | bigint, nKv: number | bigint): Bytes {
  const b = new Bytes().raw([0x47, 0x47, 0x55, 0x46]).u32(version);
  if (version === 1) b.u32(Number(nTensors)).u32(Number(nKv));
  else b.u64(nTensors).u64(nKv);
  return b;
}
const kvU32 = (b: Bytes, key: string, v: number, v1 = false) => b.str(key, v1).u32(4).u32(v);
function tinfo(b: Bytes, name: string, ne: number[], type: number, offset: number | bigint, v1 = false) {
  b.str(name, v1).u32(ne.length);
  for (const d of ne) { if (v1) b.u32(d); else b.i64(d); }
  return b.u32(type).u64(offset);
}
const finish = (b: Bytes, dataBytes: number, align = 32) => b.padTo(align).zeros(dataBytes).bytes();

/** One F32 tensor [2 x 8] and one KV, in the given version. */
function valid(version: number): Uint8Array {
  const v1 = version === 1;
  const b = head(version, 1, 1);
  kvU32(b, 'general.x', 7, v1);
  tinfo(b, 'w', [8, 2], 0, 0, v1);
  return finish(b, 64);
}

describe('GGUF reader', () => {
  test('versions 1, 2 and 3', async () => {
    for (const v of [1, 2, 3]) {
      const g = await open(valid(v));
      expect(g.version).toBe(v);
      expect(g.metadata['general.x']).toBe(7);
      expect(g.tensors[0]).toMatchObject({ name: 'w', dtype: 'F32', shape: [2, 8], ne: [8, 2], byteLength: 64 });
      expect(g.tensors[0].offset % 32).toBe(0);
    }
  });
  test('every metadata value type, arrays included', async () => {
    const b = head(3, 0, 14);
    b.str('u8').u32(0).u8(200);
    b.str('i8').u32(1).u8(0xff);
    b.str('u16').u32(2).raw([0x34, 0x12]);
    b.str('i16').u32(3).raw([0xfe, 0xff]);
    b.str('u32').u32(4).u32(0xfffffffe);
    b.str('i32').u32(5).i32(-5);
    b.str('f32').u32(6).f32(1.5);
    b.str('bool').u32(7).u8(1);
    b.str('string').u32(8).str('héllo');
    b.str('u64').u32(10).u64(2n ** 63n + 1n);
    b.str('i64').u32(11).i64(-3n);
    b.str('f64').u32(12).raw(new Uint8Array(new Float64Array([Math.PI]).buffer));
    b.str('arr_s').u32(9).u32(8).u64(2).str('a').str('bc');
    b.str('arr_i').u32(9).u32(5).u64(3).i32(1).i32(-2).i32(3);
    const g = await open(finish(b, 0));
    expect(g.metadata).toEqual({
      u8: 200, i8: -1, u16: 0x1234, i16: -2, u32: 0xfffffffe, i32: -5, f32: 1.5, bool: true, string: 'héllo',
      u64: 2n ** 63n + 1n, i64: -3n, f64: Math.PI, arr_s: ['a', 'bc'], arr_i: [1, -2, 3],
    });
    expect(g.kv.find((k) => k.key === 'arr_s')).toEqual({ key: 'arr_s', type: 'array', itemType: 'string', value: ['a', 'bc'] });
  });
  test('a header larger than the first read grows the prefix (few reads)', async () => {
    const b = head(3, 1, 1);
    b.str('tokens').u32(9).u32(8).u64(5000);
    for (let i = 0; i < 5000; i++) b.str(`token-${i}`);
    tinfo(b, 'w', [1 << 20], 0, 0);
    const file = finish(b, 4 << 20);
    const reads: number[] = [];
    const inner = fromBuffer(file, 'big.gguf');
    const src: ByteSource = { name: inner.name, size: inner.size, read: (o, l) => { reads.push(l); return inner.read(o, l); } };
    const g = await openGguf(src, { initialRead: 1024 });
    expect((g.metadata.tokens as string[])[4999]).toBe('token-4999');
    expect(reads.length).toBeLessThanOrEqual(8);
    // the prefix grows 4x per step: at most 4x the header is read, far less than the file
    expect(reads.reduce((a, x) => a + x, 0)).toBeLessThanOrEqual(4 * g.dataOffset);
    expect(Array.from(await g.readF32('w')).slice(0, 2)).toEqual([0, 0]);
  });
  test('GGUF_MAGIC', async () => {
    const f = valid(3);
    f[3] = 0x58;
    const e = await expectCode(open(f), ErrorCodes.GGUF_MAGIC);
    expect(e.details.file).toBe('test.gguf');
    await expectCode(open(new Uint8Array([0x47, 0x47])), ErrorCodes.GGUF_MAGIC);
  });
  test('GGUF_VERSION (also a big-endian file)', async () => {
    await expectCode(open(finish(head(4, 0, 0), 0)), ErrorCodes.GGUF_VERSION);
    await expectCode(open(finish(head(0, 0, 0), 0)), ErrorCodes.GGUF_VERSION);
    const e = await expectCode(open(finish(head(0x03000000, 0, 0), 0)), ErrorCodes.GGUF_VERSION);
    expect(e.message).toMatch(/big-endian/);
  });
  test('GGUF_COUNT: tensor, KV and array counts the file cannot hold', async () => {
    await expectCode(open(finish(head(3, 2n ** 62n, 0), 0)), ErrorCodes.GGUF_COUNT);
    await expectCode(open(finish(head(3, 0, 1_000_000), 0)), ErrorCodes.GGUF_COUNT);
    await expectCode(open(finish(head(1, 0xffffffff, 0), 0)), ErrorCodes.GGUF_COUNT);
    const b = head(3, 0, 1);
    b.str('a').u32(9).u32(4).u64(2n ** 61n);
    await expectCode(open(finish(b, 0)), ErrorCodes.GGUF_COUNT);
    // a count that fits the file but makes the header larger than maxHeaderBytes
    // (strings: few elements for their bytes, so the element budget does not decide it)
    const c = head(3, 0, 1);
    c.str('a').u32(9).u32(8).u64(1000);
    for (let i = 0; i < 1000; i++) c.str('x'.repeat(100));
    const f = finish(c, 100_000);
    const e = await expectCode(openGguf(fromBuffer(f), { initialRead: 1024, maxHeaderBytes: 50_000 }), ErrorCodes.GGUF_COUNT);
    expect(e.message).toMatch(/the header needs more than 50000 bytes/);
    expect(((await openGguf(fromBuffer(f), { initialRead: 1024 })).metadata.a as string[]).length).toBe(1000);
  });
  test('numeric arrays of every element type, at unaligned offsets, in v1 and v3', async () => {
    for (const v of [1, 3]) {
      const v1 = v === 1;
      const arr = (b: Bytes, key: string, type: number, n: number) => (v1 ? b.str(key, true).u32(9).u32(type).u32(n) : b.str(key).u32(9).u32(type).u64(n));
      const b = head(v, 0, 11);
      arr(b, 'u8x', 0, 3).raw([0, 1, 255]);
      arr(b, 'i8', 1, 2).raw([0x80, 0x7f]);
      arr(b, 'u16', 2, 2).raw([0x34, 0x12, 0xff, 0xff]);
      arr(b, 'i16', 3, 1).raw([0xfe, 0xff]);
      arr(b, 'u32', 4, 2).u32(0xffffffff).u32(7);
      arr(b, 'i32', 5, 2).i32(-(2 ** 31)).i32(3);
      arr(b, 'f32', 6, 2).f32(-1.5).f32(Infinity);
      arr(b, 'bool', 7, 3).raw([1, 0, 2]);
      arr(b, 'u64', 10, 2).u64(2n ** 64n - 1n).u64(5);
      arr(b, 'i64', 11, 1).i64(-(2n ** 63n));
      arr(b, 'f64', 12, 1).raw(new Uint8Array(new Float64Array([Math.E]).buffer));
      const g = await open(finish(b, 0));
      expect(g.metadata).toEqual({
        u8x: [0, 1, 255], i8: [-128, 127], u16: [0x1234, 0xffff], i16: [-2], u32: [0xffffffff, 7], i32: [-(2 ** 31), 3], f32: [-1.5, Infinity],
        bool: [true, false, true], u64: [2n ** 64n - 1n, 5n], i64: [-(2n ** 63n)], f64: [Math.E],
      });
    }
  });
  test('a numeric array asks for all its bytes at once, not a step at a time', async () => {
    const n = 1 << 20;
    const b = head(3, 0, 1);
    b.str('charsmap').u32(9).u32(0).u64(n).raw(new Uint8Array(n).fill(9));
    const inner = fromBuffer(finish(b, 0), 'big.gguf');
    const reads: number[] = [];
    const src: ByteSource = { name: inner.name, size: inner.size, read: (o, l) => { reads.push(l); return inner.read(o, l); } };
    const g = await openGguf(src, { initialRead: 1024 });
    expect((g.metadata.charsmap as number[]).length).toBe(n);
    expect(reads.length).toBe(2);
  });
  test('GGUF_COUNT: more metadata array elements in all than maxHeaderBytes / 8', async () => {
    // 1000 u8 and 1000 empty strings: 9 KB of header, under either cap, but 2000 elements where 16,000 bytes allow 2000 and 12,000 allow 1500
    const b = head(3, 0, 2);
    b.str('a').u32(9).u32(0).u64(1000).zeros(1000);
    b.str('b').u32(9).u32(8).u64(1000).zeros(8000);
    const f = finish(b, 0);
    expect(((await openGguf(fromBuffer(f), { maxHeaderBytes: 16_000 })).metadata.b as string[]).length).toBe(1000);
    const e = await expectCode(openGguf(fromBuffer(f), { maxHeaderBytes: 12_000 }), ErrorCodes.GGUF_COUNT);
    expect(e.message).toMatch(/2000 elements in all by "b", more than the 1500/);
  });
  test('a bad element of a string array is named by its index', async () => {
    const b = head(3, 0, 1).str('toks').u32(9).u32(8).u64(3).str('a').str(new Uint8Array([0xff])).str('c');
    const e = await expectCode(open(finish(b, 0)), ErrorCodes.GGUF_UTF8);
    expect(e.message).toContain('metadata "toks"[1]');
  });
  test('GGUF_STRING: a length past the end', async () => {
    const b = head(3, 0, 1).u64(2n ** 50n).raw([0x61]);
    await expectCode(open(finish(b, 0)), ErrorCodes.GGUF_STRING);
    const c = head(3, 0, 1);
    c.str('k').u32(8).u64(10_000).raw([0x61]);
    await expectCode(open(finish(c, 0)), ErrorCodes.GGUF_STRING);
  });
  test('GGUF_UTF8', async () => {
    const b = head(3, 0, 1).str(new Uint8Array([0x61, 0xff, 0x62])).u32(4).u32(1);
    await expectCode(open(finish(b, 0)), ErrorCodes.GGUF_UTF8);
    const c = head(3, 1, 0);
    tinfo(c, '\u00e9', [32], 0, 0);
    const f = finish(c, 128);
    f[24 + 8] = 0xc3; f[24 + 9] = 0x28; // an invalid 2-byte sequence as the tensor name
    await expectCode(open(f), ErrorCodes.GGUF_UTF8);
  });
  test('GGUF_VALUE_TYPE: unknown type, array of arrays', async () => {
    await expectCode(open(finish(head(3, 0, 1).str('k').u32(13).u32(0), 0)), ErrorCodes.GGUF_VALUE_TYPE);
    await expectCode(open(finish(head(3, 0, 1).str('k').u32(9).u32(9).u64(0), 0)), ErrorCodes.GGUF_VALUE_TYPE);
    await expectCode(open(finish(head(3, 0, 1).str('k').u32(9).u32(77).u64(0), 0)), ErrorCodes.GGUF_VALUE_TYPE);
  });
  test('GGUF_ALIGNMENT: not a power of two, zero, wrong type', async () => {
    for (const a of [3, 0, 48]) {
      const b = head(3, 0, 1);
      kvU32(b, 'general.alignment', a);
      await expectCode(open(finish(b, 0)), ErrorCodes.GGUF_ALIGNMENT);
    }
    await expectCode(open(finish(head(3, 0, 1).str('general.alignment').u32(10).u64(32), 0)), ErrorCodes.GGUF_ALIGNMENT);
  });
  test('general.alignment is honoured', async () => {
    const b = head(3, 2, 1);
    kvU32(b, 'general.alignment', 64);
    tinfo(b, 'a', [4], 0, 0);
    tinfo(b, 'b', [4], 0, 64);
    const g = await open(finish(b, 80, 64));
    expect(g.alignment).toBe(64);
    expect(g.dataOffset % 64).toBe(0);
    expect(g.tensor('b').offset).toBe(g.dataOffset + 64);
  });
  test('GGUF_TENSOR: too many dimensions, negative dimension', async () => {
    await expectCode(open(finish(tinfo(head(3, 1, 0), 'w', [1, 1, 1, 1, 1], 0, 0), 32)), ErrorCodes.GGUF_TENSOR);
    await expectCode(open(finish(tinfo(head(3, 1, 0), 'w', [4, -1], 0, 0), 32)), ErrorCodes.GGUF_TENSOR);
    await expectCode(open(finish(tinfo(head(3, 1, 0), 'w', [2 ** 31, 2 ** 31, 2 ** 31], 0, 0), 32)), ErrorCodes.GGUF_TENSOR);
  });
  test('GGUF_TYPE: removed and unknown ggml types', async () => {
    for (const t of [4, 5, 31, 43, 1000]) {
      const e = await expectCode(open(finish(tinfo(head(3, 1, 0), 'w', [32], t, 0), 128)), ErrorCodes.GGUF_TYPE);
      expect(e.details).toMatchObject({ tensor: 'w', value: t });
    }
  });
  test('MXFP4 and NVFP4 tensors are listed with their block geometry', async () => {
    const g = await open(finish(tinfo(head(3, 1, 0), 'w', [64, 2], 40, 0), 128));
    expect(g.tensor('w')).toMatchObject({ dtype: 'NVFP4', byteLength: 72 });
    const m = await open(finish(tinfo(head(3, 1, 0), 'w', [64, 2], 39, 0), 128));
    expect(m.tensor('w')).toMatchObject({ dtype: 'MXFP4', byteLength: 68 });
  });
  test('GGUF_BLOCK: ne[0] not a multiple of the block', async () => {
    const e = await expectCode(open(finish(tinfo(head(3, 1, 0), 'w', [48, 2], 2, 0), 128)), ErrorCodes.GGUF_BLOCK);
    expect(e.details).toMatchObject({ tensor: 'w', value: 48 });
    await expectCode(open(finish(tinfo(head(3, 1, 0), 'w', [128, 1], 12, 0), 256)), ErrorCodes.GGUF_BLOCK);
  });
  test('GGUF_OFFSET: offset not aligned', async () => {
    await expectCode(open(finish(tinfo(head(3, 1, 0), 'w', [4], 0, 8), 64)), ErrorCodes.GGUF_OFFSET);
  });
  test('GGUF_TRUNCATED: header cut short, data past the end', async () => {
    const f = valid(3);
    await expectCode(open(f.subarray(0, 60)), ErrorCodes.GGUF_TRUNCATED);
    await expectCode(open(f.subarray(0, f.length - 1)), ErrorCodes.GGUF_TRUNCATED);
    await expectCode(open(finish(tinfo(head(3, 1, 0), 'w', [4], 0, 2n ** 60n), 64)), ErrorCodes.GGUF_TRUNCATED);
  });
  test('GGUF_OVERLAP', async () => {
    const b = head(3, 2, 0);
    tinfo(b, 'a', [16], 0, 0);
    tinfo(b, 'b', [16], 0, 32);
    const e = await expectCode(open(finish(b, 128)), ErrorCodes.GGUF_OVERLAP);
    expect(e.details.tensor).toBe('b');
  });
  test('GGUF_DUPLICATE: keys and tensor names', async () => {
    const b = head(3, 0, 2);
    kvU32(b, 'k', 1);
    kvU32(b, 'k', 2);
    await expectCode(open(finish(b, 0)), ErrorCodes.GGUF_DUPLICATE);
    const c = head(3, 2, 0);
    tinfo(c, 'w', [8], 0, 0);
    tinfo(c, 'w', [8], 0, 32);
    await expectCode(open(finish(c, 64)), ErrorCodes.GGUF_DUPLICATE);
  });
  test('quantized tensors are read through dequantize()', async () => {
    const values = randomF32(4 * 64, 9);
    const q8 = await quantize(values, { format: 'q8_0', rowLength: 64 });
    const q4 = await quantize(values, { format: 'q4_0', rowLength: 64 });
    const file = await collect(writeGguf({
      tensors: [
        { name: 'q8', ggmlType: 'Q8_0', shape: [4, 64], data: q8.data },
        { name: 'q4', ggmlType: 'Q4_0', shape: [2, 2, 64], data: q4.data },
        { name: 'q81', ggmlType: 'Q8_1', shape: [1, 32], data: new Uint8Array(36) },
        { name: 'i32', ggmlType: 'I32', shape: [3], data: new Int32Array([1, 2, 3]) },
      ],
    }));
    const g = await open(file);
    expect(g.tensor('q4').shape).toEqual([2, 2, 64]);
    expect(Array.from(await g.readF32('q8'))).toEqual(Array.from(await dequantize(q8)));
    expect(Array.from(await g.readF32('q4'))).toEqual(Array.from(await dequantize(q4)));
    for (const backend of ['wasm', 'wasm-simd'] as const) {
      const gb = await openGguf(fromBuffer(file, 'x'), { backend });
      expect(Array.from(await gb.readF32('q8'))).toEqual(Array.from(await dequantize(q8)));
    }
    await expectCode(g.readF32('q81'), ErrorCodes.UNSUPPORTED_DTYPE); // ggml's activation type: never in a model file
    await expectCode(g.readF32('i32'), ErrorCodes.UNSUPPORTED_DTYPE);
    await expectCode(g.readValues('q8'), ErrorCodes.UNSUPPORTED_DTYPE);
    expect(Array.from(new Int32Array((await g.readRaw('i32')).slice().buffer))).toEqual([1, 2, 3]);
    await expectCode(() => g.tensor('missing'), ErrorCodes.TENSOR_NOT_FOUND);
  });
});

describe('ggml type table', () => {
  test('agrees with the format registry on every GGUF type it knows', async () => {
    const { formats } = await import('../../src/formats/registry.js');
    const { GGML_TYPES } = await import('../../src/io/ggml-types.js');
    let n = 0;
    for (const f of formats.values()) {
      if (!f.ggml) continue;
      const t = GGML_TYPES.get(f.ggml.type);
      expect(t, f.name).toBeDefined();
      expect([t!.name.toLowerCase(), t!.blockSize, t!.typeSize], f.name).toEqual([f.ggml.name ?? f.name, f.ggml.blockSize, f.ggml.typeSize]);
      n++;
    }
    expect(n).toBeGreaterThanOrEqual(23);
  });
});

describe('every registered GGUF format reads back through readF32', () => {
  test('quantize -> writeGguf -> openGguf.readF32 equals dequantize', async () => {
    const { formats } = await import('../../src/formats/registry.js');
    const { loadKernels } = await import('../../src/kernels/loader.js');
    const k = await loadKernels('auto');
    const values = randomF32(3 * 256, 21);
    const done: string[] = [];
    for (const f of formats.values()) {
      // Formats whose kernels are not in the current wasm build yet are someone else's work in progress.
      if (!f.ggml || !k.has(`${f.kernel}_quantize`) || !k.has(`${f.kernel}_dequantize`)) continue;
      const qt = await quantize(values, withImportance({ format: f.name, rowLength: 256 }, f));
      const file = await collect(writeGguf({ tensors: [{ name: 't', ggmlType: f.ggml.type, shape: [3, 256], data: qt.data }] }));
      const g = await open(file);
      expect(g.tensor('t').dtype.toLowerCase(), f.name).toBe(f.ggml.name ?? f.name);
      expect(await g.readF32('t'), f.name).toEqual(await dequantize(qt));
      done.push(f.name);
    }
    expect(done).toContain('q8_0');
    expect(done).toContain('q4_0');
  });
});
