// Split GGUF (llama.cpp's gguf-split): the first file holds the key/value pairs, every file a
// share of the tensors and split.no / split.count / split.tensors.count; read as one checkpoint.
import { describe, expect, test } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { fromBuffer, type ByteSource } from '../../src/io/source.js';
import { ggufSplitName, openGguf, type GgufCheckpoint } from '../../src/io/gguf.js';
import { writeGguf, type GgufWriteKV, type GgufWriteTensor } from '../../src/io/gguf-writer.js';
import { collect } from '../../src/io/stream.js';
import { quantize } from '../../src/quantize.js';
import { expectCode } from './helpers.js';

const META: GgufWriteKV[] = [
  { key: 'general.architecture', type: 'string', value: 'llama' },
  { key: 'llama.block_count', type: 'u32', value: 2 },
];

async function tensors(): Promise<GgufWriteTensor[]> {
  const v = (n: number, s: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * s));
  return [
    { name: 'token_embd.weight', ggmlType: 'F32', shape: [4, 64], data: v(256, 0.1) },
    { name: 'blk.0.attn_q.weight', ggmlType: 'Q8_0', shape: [2, 64], data: (await quantize(v(128, 0.2), { format: 'q8_0', rowLength: 64 })).data },
    { name: 'blk.1.attn_q.weight', ggmlType: 'Q4_K', shape: [1, 256], data: (await quantize(v(256, 0.3), { format: 'q4_k', rowLength: 256 })).data },
    { name: 'output_norm.weight', ggmlType: 'F32', shape: [64], data: v(64, 0.4) },
  ];
}

type Split = { no: number; count: number; total: number };
const splitKv = (s: Split): GgufWriteKV[] => [
  { key: 'split.no', type: 'u16', value: s.no },
  { key: 'split.count', type: 'u16', value: s.count },
  { key: 'split.tensors.count', type: 'i32', value: s.total },
];

/** The files gguf-split writes for `groups` (tensor indices per file), by name; `edit` alters a file's split keys. */
async function splitFiles(prefix: string, groups: number[][], edit: (i: number, s: Split) => Split = (_i, s) => s): Promise<Map<string, Uint8Array>> {
  const all = await tensors();
  const total = groups.reduce((a, g) => a + g.length, 0);
  const out = new Map<string, Uint8Array>();
  for (let i = 0; i < groups.length; i++) {
    const kv = [...(i === 0 ? META : []), ...splitKv(edit(i, { no: i, count: groups.length, total }))];
    out.set(ggufSplitName(prefix, i, groups.length), await collect(writeGguf({ metadata: kv, tensors: groups[i].map((j) => all[j]) })));
  }
  return out;
}

function openSplit(files: Map<string, Uint8Array>, name: string, resolve = true): Promise<GgufCheckpoint> {
  const src = (n: string): ByteSource => {
    const b = files.get(n);
    if (!b) throw new Error(`no file ${n}`);
    return fromBuffer(b, `/models/${n}`);
  };
  return openGguf(src(name), resolve ? { splits: src } : {});
}

describe('split GGUF', () => {
  test('names as llama_split_path writes them', () => {
    expect(ggufSplitName('/m/model-Q4_K_M', 0, 3)).toBe('/m/model-Q4_K_M-00001-of-00003.gguf');
    expect(ggufSplitName('x', 11, 12)).toBe('x-00012-of-00012.gguf');
  });

  test('reads every file as one checkpoint: the first file\'s metadata less split.*, the tensors in file order from their own files', async () => {
    const whole = await openGguf(fromBuffer(await collect(writeGguf({ metadata: META, tensors: await tensors() })), 'whole.gguf'));
    // The first file may hold no tensors (gguf-split --no-tensor-first-split).
    for (const groups of [[[0, 1], [2], [3]], [[], [0, 1, 2, 3]]]) {
      const files = await splitFiles('model', groups);
      const g = await openSplit(files, ggufSplitName('model', 0, groups.length));
      expect(g.splits).toEqual([...files.keys()]);
      expect(g.metadata).toEqual(whole.metadata);
      expect(g.kv.map((k) => k.key)).toEqual(['general.architecture', 'llama.block_count']);
      expect(g.tensors.map((t) => [t.name, t.dtype, t.shape])).toEqual(whole.tensors.map((t) => [t.name, t.dtype, t.shape]));
      for (const t of whole.tensors) {
        expect(g.tensor(t.name).file).toBe([...files.keys()][groups.findIndex((x) => x.includes(whole.tensors.indexOf(t)))]);
        expect(await g.readRaw(t.name)).toEqual(await whole.readRaw(t.name));
        expect(await g.readF32(t.name)).toEqual(await whole.readF32(t.name));
      }
    }
  });

  test('a file whose split.count is 1 is an ordinary GGUF', async () => {
    const files = await splitFiles('one', [[0, 1, 2, 3]]);
    const g = await openSplit(files, 'one-00001-of-00001.gguf', false);
    expect(g.splits).toBeUndefined();
    expect(g.tensors).toHaveLength(4);
    expect(Object.keys(g.metadata)).toEqual(['general.architecture', 'llama.block_count']);
  });

  test('errors name the file and what is wrong (E_GGUF_SPLIT)', async () => {
    const files = await splitFiles('m', [[0], [1, 2], [3]]);
    // Not the first file; no way to find the others; the others' split.no out of order.
    let e = await expectCode(openSplit(files, 'm-00002-of-00003.gguf'), ErrorCodes.GGUF_SPLIT);
    expect(e.message).toMatch(/is split 2 of 3: open the first, m-00001-of-00003\.gguf/);
    e = await expectCode(openSplit(files, 'm-00001-of-00003.gguf', false), ErrorCodes.GGUF_SPLIT);
    expect(e.message).toMatch(/first of 3 split files \(m-00002-of-00003\.gguf, m-00003-of-00003\.gguf\)/);
    expect(e.details.file).toBe('/models/m-00001-of-00003.gguf');
    const swapped = await splitFiles('m', [[0], [1, 2], [3]], (i, s) => (i === 2 ? { ...s, no: 1 } : s));
    e = await expectCode(openSplit(swapped, 'm-00001-of-00003.gguf'), ErrorCodes.GGUF_SPLIT);
    expect(e.message).toMatch(/m-00003-of-00003\.gguf has split\.no 1, expected 2/);
    // Tensors that do not add up to split.tensors.count, or one tensor in two files.
    const short = await splitFiles('m', [[0], [1, 2], [3]], (i, s) => (i === 0 ? { ...s, total: 5 } : s));
    e = await expectCode(openSplit(short, 'm-00001-of-00003.gguf'), ErrorCodes.GGUF_SPLIT);
    expect(e.message).toMatch(/hold 4 tensors but split\.tensors\.count is 5/);
    const twice = await splitFiles('m', [[0, 1], [1, 2], [3]], (_i, s) => ({ ...s, total: 5 }));
    e = await expectCode(openSplit(twice, 'm-00001-of-00003.gguf'), ErrorCodes.GGUF_SPLIT);
    expect(e.details.tensor).toBe('blk.0.attn_q.weight');
    // A renamed first file: llama.cpp cannot derive the others' names either.
    const renamed = new Map([['model.gguf', files.get('m-00001-of-00003.gguf')!]]);
    e = await expectCode(openSplit(renamed, 'model.gguf'), ErrorCodes.GGUF_SPLIT);
    expect(e.message).toMatch(/is split 1 of 3 but its name does not end in "-00001-of-00003\.gguf"/);
  });
});
