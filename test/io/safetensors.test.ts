import { describe, expect, test } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { fromBuffer } from '../../src/io/source.js';
import { openSafetensors, openSafetensorsIndex, ST_MAX_HEADER } from '../../src/io/safetensors.js';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect } from '../../src/io/stream.js';
import { readConfig } from '../../src/io/config.js';
import { openCheckpoint } from '../../src/io/open.js';
import { E4M3_TO_F32, E5M2_TO_F32 } from '../../src/io/dtypes.js';
import { bytesOf, expectCode, randomF32, stFile } from './helpers.js';

const open = (b: Uint8Array) => openSafetensors(fromBuffer(b, 'test.safetensors'));
const ok = { w: { dtype: 'F32', shape: [2, 2], data_offsets: [0, 16] } };

describe('openCheckpoint on a file that is neither GGUF nor safetensors', () => {
  test('names the file and quotes its first bytes instead of a header length they happen to spell', async () => {
    const page = new TextEncoder().encode('<!doctype html><html><head><title>Sign in</title></head><body></body></html>');
    const e = await expectCode(openCheckpoint(fromBuffer(page, 'https://example.com/model.safetensors')), ErrorCodes.ST_NOT_JSON);
    expect(e.message).toContain('https://example.com/model.safetensors');
    expect(e.message).toContain('<!doctype html><html>');
    expect(e.message).toContain('an HTML page?');
    const text = await expectCode(openCheckpoint(fromBuffer(new TextEncoder().encode('just some notes here'), 'notes.safetensors')), ErrorCodes.ST_NOT_JSON);
    expect(text.message).not.toContain('HTML');
    // A real header still opens (and its own checks still answer).
    expect((await openCheckpoint(fromBuffer(stFile(ok, bytesOf(new Float32Array(4))), 'ok.safetensors'))).tensors).toHaveLength(1);
    await expectCode(openCheckpoint(fromBuffer(stFile(ok, 16, { lengthOverride: BigInt(ST_MAX_HEADER + 1) }), 'big.safetensors')), ErrorCodes.ST_HEADER_TOO_LARGE);
  });
});

describe('safetensors reader: one error code per check', () => {
  test('valid minimal file', async () => {
    const c = await open(stFile(ok, bytesOf(new Float32Array([1, 2, 3, 4]))));
    expect(c.tensors).toEqual([{ name: 'w', dtype: 'F32', shape: [2, 2], offset: 8 + JSON.stringify(ok).length, byteLength: 16 }]);
    expect(Array.from(await c.readF32('w'))).toEqual([1, 2, 3, 4]);
  });
  test('ST_HEADER_TOO_SMALL', async () => {
    await expectCode(open(new Uint8Array(5)), ErrorCodes.ST_HEADER_TOO_SMALL);
    await expectCode(open(stFile({}, 0, { rawText: '{' })), ErrorCodes.ST_HEADER_TOO_SMALL);
  });
  test('ST_HEADER_TOO_LARGE', async () => {
    const e = await expectCode(open(stFile(ok, 16, { lengthOverride: BigInt(ST_MAX_HEADER + 1) })), ErrorCodes.ST_HEADER_TOO_LARGE);
    expect(e.details.file).toBe('test.safetensors');
    await expectCode(open(stFile(ok, 16, { lengthOverride: 2n ** 64n - 1n })), ErrorCodes.ST_HEADER_TOO_LARGE);
  });
  test('ST_HEADER_PAST_END', async () => {
    await expectCode(open(stFile(ok, 0, { lengthOverride: 1000n })), ErrorCodes.ST_HEADER_PAST_END);
  });
  test('ST_NOT_UTF8', async () => {
    const f = stFile({}, 0, { rawText: '{"a\u00e9":1}' });
    f[8 + 3] = 0xff; // break the 2-byte sequence of é
    await expectCode(open(f), ErrorCodes.ST_NOT_UTF8);
  });
  test('ST_NOT_JSON (syntax, and not an object)', async () => {
    await expectCode(open(stFile({}, 0, { rawText: '{"w": ' })), ErrorCodes.ST_NOT_JSON);
    await expectCode(open(stFile([1, 2])), ErrorCodes.ST_NOT_JSON);
    await expectCode(open(stFile(null)), ErrorCodes.ST_NOT_JSON);
    await expectCode(open(stFile({}, 0, { rawText: '"{}"' })), ErrorCodes.ST_NOT_JSON);
  });
  test('ST_DUPLICATE (tensor keys, entry keys, escaped spellings)', async () => {
    const e = ',"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}';
    await expectCode(open(stFile({}, 4, { rawText: `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}${e}}` })), ErrorCodes.ST_DUPLICATE);
    await expectCode(open(stFile({}, 4, { rawText: '{"w":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}}' })), ErrorCodes.ST_DUPLICATE);
    const d = await expectCode(open(stFile({}, 4, { rawText: `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"\\u0077":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}` })), ErrorCodes.ST_DUPLICATE);
    expect(d.details.value).toBe('w');
    // the same key in different objects is fine
    await open(stFile({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] }, b: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, 8));
  });
  test('ST_BAD_NAME', async () => {
    const entry = '{"dtype":"F32","shape":[1],"data_offsets":[0,4]}';
    for (const name of ['__proto__', 'constructor', 'prototype', '', 'a\u0000b']) {
      const e = await expectCode(open(stFile({}, 4, { rawText: `{${JSON.stringify(name)}:${entry}}` })), ErrorCodes.ST_BAD_NAME);
      expect(e.details.tensor).toBe(name);
    }
  });
  test('ST_BAD_ENTRY', async () => {
    const bad = [
      { w: 5 },
      { w: { shape: [1], data_offsets: [0, 4] } },
      { w: { dtype: 'F32', shape: [-1], data_offsets: [0, 4] } },
      { w: { dtype: 'F32', shape: [1.5], data_offsets: [0, 4] } },
      { w: { dtype: 'F32', shape: '1', data_offsets: [0, 4] } },
      { w: { dtype: 'F32', shape: [1], data_offsets: [4, 0] } },
      { w: { dtype: 'F32', shape: [1], data_offsets: [0] } },
      { w: { dtype: 7, shape: [1], data_offsets: [0, 4] } },
      { __metadata__: { a: 1 }, w: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } },
      { __metadata__: ['x'], w: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } },
    ];
    for (const h of bad) await expectCode(open(stFile(h, 4)), ErrorCodes.ST_BAD_ENTRY);
  });
  test('ST_BAD_DTYPE', async () => {
    const e = await expectCode(open(stFile({ w: { dtype: 'F4', shape: [2], data_offsets: [0, 1] } }, 1)), ErrorCodes.ST_BAD_DTYPE);
    expect(e.details).toMatchObject({ file: 'test.safetensors', tensor: 'w', value: 'F4' });
    await expectCode(open(stFile({ w: { dtype: 'toString', shape: [2], data_offsets: [0, 1] } }, 1)), ErrorCodes.ST_BAD_DTYPE);
  });
  test('ST_SHAPE_OVERFLOW', async () => {
    await expectCode(open(stFile({ w: { dtype: 'F32', shape: [2 ** 30, 2 ** 30, 16], data_offsets: [0, 4] } }, 4)), ErrorCodes.ST_SHAPE_OVERFLOW);
    await expectCode(open(stFile({ w: { dtype: 'F32', shape: [1e300], data_offsets: [0, 4] } }, 4)), ErrorCodes.ST_SHAPE_OVERFLOW);
  });
  test('ST_BAD_SPAN', async () => {
    const e = await expectCode(open(stFile({ w: { dtype: 'F16', shape: [3], data_offsets: [0, 4] } }, 4)), ErrorCodes.ST_BAD_SPAN);
    expect(e.details).toMatchObject({ tensor: 'w', value: [0, 4], expected: 6 });
  });
  test('ST_BAD_OFFSETS (not at 0, gap, overlap)', async () => {
    await expectCode(open(stFile({ w: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, 8)), ErrorCodes.ST_BAD_OFFSETS);
    await expectCode(open(stFile({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] }, b: { dtype: 'F32', shape: [1], data_offsets: [8, 12] } }, 12)), ErrorCodes.ST_BAD_OFFSETS);
    const e = await expectCode(open(stFile({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, 8)), ErrorCodes.ST_BAD_OFFSETS);
    expect(e.details.tensor).toBe('b');
  });
  test('ST_DATA_PAST_END', async () => {
    await expectCode(open(stFile(ok, 12)), ErrorCodes.ST_DATA_PAST_END);
  });
  test('ST_TRAILING', async () => {
    await expectCode(open(stFile(ok, 17)), ErrorCodes.ST_TRAILING);
  });
  test('checks run in the documented order', async () => {
    // a bad name wins over a bad dtype, a bad dtype over a bad span, a span over offsets
    await expectCode(open(stFile({ x: { dtype: 'Q9', shape: [1], data_offsets: [0, 1] }, constructor: { dtype: 'F32', shape: [1], data_offsets: [9, 13] } }, 1)), ErrorCodes.ST_BAD_NAME);
    await expectCode(open(stFile({ x: { dtype: 'F32', shape: [1], data_offsets: [0, 1] }, y: { dtype: 'Q9', shape: [1], data_offsets: [9, 13] } }, 1)), ErrorCodes.ST_BAD_DTYPE);
    await expectCode(open(stFile({ x: { dtype: 'F32', shape: [1], data_offsets: [4, 8] }, y: { dtype: 'F32', shape: [1], data_offsets: [0, 3] } }, 8)), ErrorCodes.ST_BAD_SPAN);
  });
  test('empty checkpoint and zero-size tensors', async () => {
    expect((await open(stFile({}))).tensors).toEqual([]);
    const c = await open(stFile({ e: { dtype: 'F32', shape: [0, 5], data_offsets: [0, 0] }, w: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } }, 4));
    expect((await c.readF32('e')).length).toBe(0);
  });
  test('__metadata__ is exposed, with __proto__ as a plain key', async () => {
    const text = '{"__metadata__":{"format":"pt","__proto__":"x"},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}';
    const c = await open(stFile({}, 4, { rawText: text }));
    expect(c.metadata.format).toBe('pt');
    expect(Object.getPrototypeOf(c.metadata)).toBe(Object.prototype);
    expect(Object.prototype.hasOwnProperty.call(c.metadata, '__proto__')).toBe(true);
  });
  test('TENSOR_NOT_FOUND and UNSUPPORTED_DTYPE', async () => {
    const c = await open(stFile({ i: { dtype: 'I32', shape: [1], data_offsets: [0, 4] }, f: { dtype: 'F8_E4M3', shape: [4], data_offsets: [4, 8] } }, 8));
    await expectCode(() => c.tensor('nope'), ErrorCodes.TENSOR_NOT_FOUND);
    await expectCode(c.readRaw('nope'), ErrorCodes.TENSOR_NOT_FOUND);
    await expectCode(c.readF32('i'), ErrorCodes.UNSUPPORTED_DTYPE);
    await expectCode(c.readValues('f'), ErrorCodes.UNSUPPORTED_DTYPE);
    expect((await c.readRaw('i')).length).toBe(4);
  });
});

describe('NVFP4 weights (ModelOpt, compressed-tensors)', () => {
  // Two rows of 32 values: codes 0..15 then 15..0 per 16, bytes holding element 2i low, 2i+1 high.
  const rows = 2, cols = 32;
  const codes = Uint8Array.from({ length: rows * cols }, (_, i) => (Math.floor(i / 16) % 2 ? 15 - (i % 16) : i % 16));
  const packed = Uint8Array.from({ length: rows * cols / 2 }, (_, i) => codes[2 * i] | (codes[2 * i + 1] << 4));
  const e2m1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];
  const block = new Uint8Array([0x38, 0x40, 0x30, 0x01]); // E4M3 1, 2, 0.5, 2^-9
  const file = (modelopt: boolean, extra: { name: string; dtype: string; shape: number[]; data: ArrayBufferView }[] = []) => collect(writeSafetensors({
    tensors: [
      { name: modelopt ? 'l.weight' : 'l.weight_packed', dtype: 'U8', shape: [rows, cols / 2], data: packed },
      { name: 'l.weight_scale', dtype: 'F8_E4M3', shape: [rows, cols / 16], data: block },
      { name: modelopt ? 'l.weight_scale_2' : 'l.weight_global_scale', dtype: 'F32', shape: modelopt ? [] : [1], data: new Float32Array([modelopt ? 0.375 : 3]) },
      ...extra,
    ],
  }));
  test('ModelOpt: code * (scale * weight_scale_2), under the weight name with its logical shape', async () => {
    const c = await open(await file(true));
    expect(c.tensor('l.weight')).toMatchObject({ dtype: 'F4_E2M1', shape: [rows, cols], byteLength: rows * cols / 2 });
    const got = await c.readF32('l.weight');
    const want = Float32Array.from(codes, (q, i) => e2m1[q] * Math.fround(E4M3_TO_F32[block[Math.floor(i / 16)]] * 0.375));
    expect(Array.from(got)).toEqual(Array.from(want));
    expect([got[1], got[17], got[63]]).toEqual([0.5 * 0.375, -4 * 2 * 0.375, 0 * 2 ** -9 * 0.375]);
    expect(Array.from((await c.readRows!('l.weight', 1, 1)).values)).toEqual(Array.from(want.subarray(cols)));
    expect(c.locate!('l.weight', 0, 1)).toBeUndefined();
    await expectCode(c.readValues('l.weight'), ErrorCodes.UNSUPPORTED_DTYPE);
  });
  test('compressed-tensors: weight_packed, code * (scale / weight_global_scale)', async () => {
    const c = await open(await file(false));
    expect(c.tensors.map((t) => t.name)).toEqual(['l.weight', 'l.weight_scale', 'l.weight_global_scale']);
    const want = Float32Array.from(codes, (q, i) => e2m1[q] * Math.fround(E4M3_TO_F32[block[Math.floor(i / 16)]] / 3));
    expect(Array.from(await c.readF32('l.weight'))).toEqual(Array.from(want));
  });
  test('ST_SCALE: scales that do not fit, naming the weight', async () => {
    const bad = (scale: { shape: number[]; dtype?: string }, global: number[] = []) => collect(writeSafetensors({
      tensors: [
        { name: 'l.weight', dtype: 'U8', shape: [rows, cols / 2], data: packed },
        { name: 'l.weight_scale', dtype: scale.dtype ?? 'F8_E4M3', shape: scale.shape, data: new Uint8Array(scale.shape.reduce((a, b) => a * b, 1)) },
        { name: 'l.weight_scale_2', dtype: 'F32', shape: global, data: new Float32Array(Math.max(1, global.reduce((a, b) => a * b, 1))) },
      ],
    }));
    for (const [sc, g] of [[{ shape: [rows, 1] }, []], [{ shape: [rows * 2] }, []], [{ shape: [rows, 2] }, [2]]] as const) {
      const e = await expectCode(open(await bad(sc, [...g])), ErrorCodes.ST_SCALE);
      expect(e.details).toMatchObject({ tensor: 'l.weight' });
    }
    // An F32 weight_scale is compressed-tensors' FP8-style scale, not NVFP4: the U8 tensor stays U8.
    const c = await open(await bad({ shape: [rows, 2], dtype: 'U8' }));
    expect(c.tensor('l.weight').dtype).toBe('U8');
  });
});

describe('FP8', () => {
  test('decoding tables', () => {
    expect(E4M3_TO_F32[0x38]).toBe(1);
    expect(E4M3_TO_F32[0x7e]).toBe(448);
    expect(E4M3_TO_F32[0xfe]).toBe(-448);
    expect(E4M3_TO_F32[0x01]).toBe(2 ** -9);
    expect(E4M3_TO_F32[0x7f]).toBeNaN();
    expect(E4M3_TO_F32[0x78]).toBe(256);
    expect(E5M2_TO_F32[0x3c]).toBe(1);
    expect(E5M2_TO_F32[0x7b]).toBe(57344);
    expect(E5M2_TO_F32[0x7c]).toBe(Infinity);
    expect(E5M2_TO_F32[0x7d]).toBeNaN();
    expect(E5M2_TO_F32[0x01]).toBe(2 ** -16);
  });
  test('block-scaled weights (DeepSeek-V3 weight_scale_inv) are dequantized by readF32', async () => {
    const rows = 130;
    const cols = 260;
    const w = new Uint8Array(rows * cols);
    for (let i = 0; i < w.length; i++) w[i] = (i * 37) % 256 === 0x7f || (i * 37) % 256 === 0xff ? 0x38 : (i * 37) % 256;
    const scale = new Float32Array([1, 2, 0.5, 4, 0.25, 8]);
    const file = await collect(writeSafetensors({
      tensors: [
        { name: 'l.weight', dtype: 'F8_E4M3', shape: [rows, cols], data: w },
        { name: 'l.weight_scale_inv', dtype: 'F32', shape: [2, 3], data: scale },
        { name: 'e5', dtype: 'F8_E5M2', shape: [4], data: new Uint8Array([0x3c, 0x40, 0xbc, 0]) },
      ],
    }));
    const c = await open(file);
    const got = await c.readF32('l.weight');
    for (let r = 0; r < rows; r++) {
      for (let k = 0; k < cols; k++) {
        const want = Math.fround(E4M3_TO_F32[w[r * cols + k]] * scale[Math.floor(r / 128) * 3 + Math.floor(k / 128)]);
        if (got[r * cols + k] !== want) throw new Error(`mismatch at ${r},${k}: ${got[r * cols + k]} vs ${want}`);
      }
    }
    expect(Array.from(await c.readF32('e5'))).toEqual([1, 2, -1, 0]);
    // Row ranges, inside one scale row and across the boundary at 128: readF32's values for them.
    for (const [r0, n] of [[0, 0], [0, 5], [120, 10], [127, 3], [128, 2], [0, rows]]) {
      const part = await c.readRows!('l.weight', r0, n);
      expect(part.dtype).toBe('f32');
      expect(Buffer.from(part.values.buffer, part.values.byteOffset, part.values.byteLength).equals(Buffer.from(got.buffer, r0 * cols * 4, n * cols * 4)), `${r0}+${n}`).toBe(true);
    }
    expect((await c.readRows!('e5', 0, 1)).values).toEqual(new Float32Array([1, 2, -1, 0]));
    await expectCode(c.readRows!('l.weight', 129, 2), ErrorCodes.BAD_INPUT);
  });
  test('a block size other than 128 x 128 (config.json weight_block_size) scales accordingly', async () => {
    const w = new Uint8Array(6 * 4).fill(0x38); // 1.0
    const file = await collect(writeSafetensors({ tensors: [
      { name: 'l.weight', dtype: 'F8_E4M3', shape: [6, 4], data: w },
      { name: 'l.weight_scale_inv', dtype: 'F32', shape: [3, 2], data: new Float32Array([1, 2, 3, 4, 5, 6]) },
    ] }));
    const c = await openSafetensors(fromBuffer(file, 'b.safetensors'), { fp8BlockSize: [2, 2] });
    expect(Array.from(await c.readF32('l.weight'))).toEqual([1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4, 5, 5, 6, 6, 5, 5, 6, 6]);
    expect(Array.from((await c.readRows!('l.weight', 3, 2)).values)).toEqual([3, 3, 4, 4, 5, 5, 6, 6]);
    // With the default 128 x 128 these scales do not fit the weight.
    await expectCode(openSafetensors(fromBuffer(file, 'b.safetensors')), ErrorCodes.ST_SCALE);
  });
  test('ST_SCALE: scales of the wrong shape or dtype', async () => {
    const mk = (shape: number[], dtype = 'F32', suffix = '_scale_inv') => collect(writeSafetensors({
      tensors: [
        { name: 'l.weight', dtype: 'F8_E4M3', shape: [130, 100], data: new Uint8Array(13000) },
        { name: `l.weight${suffix}`, dtype, shape, data: new Uint8Array(shape.reduce((a, b) => a * b, 1) * (dtype === 'F32' || dtype === 'I32' ? 4 : 2)) },
      ],
    }));
    await open(await mk([2, 1]));
    await open(await mk([2, 1], 'BF16'));
    // _scale_inv is per block only; weight_scale may be one value or one per row too.
    await expectCode(open(await mk([1, 1])), ErrorCodes.ST_SCALE);
    await expectCode(open(await mk([130, 1])), ErrorCodes.ST_SCALE);
    for (const shape of [[1], [], [130, 1], [130], [2, 1]]) await open(await mk(shape, 'F32', '_scale'));
    await expectCode(open(await mk([2, 1], 'I32')), ErrorCodes.ST_SCALE);
    await expectCode(open(await mk([129, 1], 'F32', '_scale')), ErrorCodes.ST_SCALE);
  });
  test('compressed-tensors FP8 (weight_scale): one scale for the tensor or one per output row, F32 or BF16', async () => {
    const rows = 6, cols = 4;
    const codes = Uint8Array.from({ length: rows * cols }, (_, i) => [0x38, 0x40, 0xb8, 0x30][i % 4]); // 1, 2, -1, 0.5
    const plain = Array.from(codes, (c) => E4M3_TO_F32[c]);
    const bf16 = (v: number) => new Uint32Array(new Float32Array([v]).buffer)[0] >>> 16;
    const perRow = [0.5, 1, 2, 4, 8, 16];
    const c = await open(await collect(writeSafetensors({ tensors: [
      { name: 't.weight', dtype: 'F8_E4M3', shape: [rows, cols], data: codes },
      { name: 't.weight_scale', dtype: 'F32', shape: [1], data: new Float32Array([0.25]) },
      { name: 't.input_scale', dtype: 'F32', shape: [1], data: new Float32Array([9]) },
      { name: 'c.weight', dtype: 'F8_E4M3', shape: [rows, cols], data: codes },
      { name: 'c.weight_scale', dtype: 'BF16', shape: [rows, 1], data: Uint16Array.from(perRow, bf16) },
    ] })));
    expect(Array.from(await c.readF32('t.weight'))).toEqual(plain.map((v) => v * 0.25));
    const want = plain.map((v, i) => v * perRow[Math.floor(i / cols)]);
    expect(Array.from(await c.readF32('c.weight'))).toEqual(want);
    expect(Array.from((await c.readRows!('c.weight', 2, 3)).values)).toEqual(want.slice(2 * cols, 5 * cols));
    expect(Array.from((await c.readRows!('t.weight', 4, 2)).values)).toEqual(plain.slice(4 * cols).map((v) => v * 0.25));
  });
});

describe('sharded checkpoints', () => {
  const shard = (names: string[], seed: number) => collect(writeSafetensors({
    tensors: names.map((n, i) => ({ name: n, dtype: 'F32', shape: [2, 3], data: randomF32(6, seed + i) })),
    metadata: { format: 'pt' },
  }));
  const indexOf = (o: unknown) => fromBuffer(new TextEncoder().encode(JSON.stringify(o)), 'model.safetensors.index.json');

  test('weight_map across shards', async () => {
    const files: Record<string, Uint8Array> = {
      'model-00001-of-00002.safetensors': await shard(['a', 'b'], 1),
      'model-00002-of-00002.safetensors': await shard(['c', 'extra'], 3),
    };
    const opened: string[] = [];
    const c = await openSafetensorsIndex(indexOf({
      metadata: { total_size: 72 },
      weight_map: { a: 'model-00001-of-00002.safetensors', c: 'model-00002-of-00002.safetensors', b: 'model-00001-of-00002.safetensors' },
    }), (f) => { opened.push(f); return fromBuffer(files[f], f); });
    expect(opened.sort()).toEqual(Object.keys(files).sort());
    expect(c.tensors.map((t) => [t.name, t.file])).toEqual([
      ['a', 'model-00001-of-00002.safetensors'], ['b', 'model-00001-of-00002.safetensors'], ['c', 'model-00002-of-00002.safetensors'],
    ]);
    expect(c.metadata).toMatchObject({ total_size: 72, format: 'pt' });
    expect(Array.from(await c.readF32('c'))).toEqual(Array.from(randomF32(6, 3)));
    expect(Array.from(await c.readF32('b'))).toEqual(Array.from(randomF32(6, 2)));
  });
  test('ST_INDEX', async () => {
    const files: Record<string, Uint8Array> = { 's.safetensors': await shard(['a'], 1) };
    const r = (f: string) => fromBuffer(files[f], f);
    await expectCode(openSafetensorsIndex(indexOf({ nothing: 1 }), r), ErrorCodes.ST_INDEX);
    await expectCode(openSafetensorsIndex(fromBuffer(new TextEncoder().encode('{oops'), 'i'), r), ErrorCodes.ST_INDEX);
    await expectCode(openSafetensorsIndex(indexOf({ weight_map: { a: '../etc/passwd' } }), r), ErrorCodes.ST_INDEX);
    await expectCode(openSafetensorsIndex(indexOf({ weight_map: { a: 5 } }), r), ErrorCodes.ST_INDEX);
    const e = await expectCode(openSafetensorsIndex(indexOf({ weight_map: { a: 's.safetensors', zz: 's.safetensors' } }), r), ErrorCodes.ST_INDEX);
    expect(e.details.tensor).toBe('zz');
  });
  test('a broken shard reports its own code and file', async () => {
    const e = await expectCode(openSafetensorsIndex(indexOf({ weight_map: { a: 'x.safetensors' } }), (f) => fromBuffer(new Uint8Array(3), f)), ErrorCodes.ST_HEADER_TOO_SMALL);
    expect(e.details.file).toBe('x.safetensors');
  });
});

describe('readConfig', () => {
  const cfg = (o: unknown) => readConfig(fromBuffer(new TextEncoder().encode(JSON.stringify(o)), 'config.json'));
  test('typed fields, defaults, text_config', async () => {
    const c = await cfg({ architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: 64, num_hidden_layers: 5, num_attention_heads: 8, vocab_size: 512 });
    expect(c).toMatchObject({ architecture: 'LlamaForCausalLM', numKvHeads: 8, headDim: 8, tieWordEmbeddings: false });
    const m = await cfg({ architectures: ['X'], text_config: { hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 10, head_dim: 16 } });
    expect(m).toMatchObject({ hiddenSize: 32, numKvHeads: 2, headDim: 16 });
  });
  test('E_CONFIG on bad values', async () => {
    await expectCode(cfg({ architectures: ['X'], num_hidden_layers: 5, num_attention_heads: 8, vocab_size: 512 }), ErrorCodes.CONFIG);
    await expectCode(cfg({ architectures: ['X'], hidden_size: 64, num_hidden_layers: 5, num_attention_heads: 8, num_key_value_heads: 3, vocab_size: 512 }), ErrorCodes.CONFIG);
    await expectCode(cfg({ architectures: ['X'], hidden_size: '64', num_hidden_layers: 5, num_attention_heads: 8, vocab_size: 512 }), ErrorCodes.CONFIG);
    await expectCode(readConfig(fromBuffer(new Uint8Array([0x7b]), 'c')), ErrorCodes.CONFIG);
    await expectCode(cfg([1]), ErrorCodes.CONFIG);
  });
  test('the FP8 block size from quantization_config.weight_block_size', async () => {
    const base = { architectures: ['X'], hidden_size: 64, num_hidden_layers: 5, num_attention_heads: 8, vocab_size: 512 };
    expect((await cfg({ ...base, quantization_config: { quant_method: 'fp8', weight_block_size: [64, 32] } })).fp8Block).toEqual([64, 32]);
    expect((await cfg(base)).fp8Block).toBeUndefined();
    for (const bad of [[128], [128, 0], [128, 1.5], '128'])
      await expectCode(cfg({ ...base, quantization_config: { weight_block_size: bad } }), ErrorCodes.CONFIG);
  });
});
