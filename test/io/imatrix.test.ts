// importanceFor: which vectors go to which planned tensors, and the warnings it gives.
import { describe, expect, it } from 'vitest';
import { importanceFor, imatrixMetadata, readImatrix, type ImportanceTarget } from '../../src/io/imatrix.js';
import { fromBuffer } from '../../src/io/source.js';
import { writeGguf } from '../../src/io/gguf-writer.js';
import { collect } from '../../src/io/stream.js';
import { ErrorCodes } from '../../src/errors.js';
import { quantize, dequantize } from '../../src/index.js';

const target = (name: string, format: string | 'keep', rowLength = 512, shape: number[] = [4, rowLength]): ImportanceTarget =>
  ({ name, shape, rowLength, scheme: format === 'keep' ? 'keep' : { format } });

/** Importance 1 everywhere but columns [from, to). */
function withZeros(n: number, from: number, to: number): Float32Array {
  return new Float32Array(n).map((_, i) => (i >= from && i < to ? 0 : 1));
}

describe('importanceFor: blocks of all-zero importance in formats that store NaN scales for them', () => {
  it('names the tensor, the count and the first columns for IQ4_NL (32) and Q4_K (256)', () => {
    const m = new Map([
      ['a', withZeros(512, 32, 96)], // two IQ4_NL blocks
      ['b', withZeros(512, 256, 512)], // one Q4_K super-block
      ['c', withZeros(512, 0, 255)], // 255 columns: no whole super-block
    ]);
    const r = importanceFor(m, [target('a', 'iq4_nl'), target('b', 'q4_k'), target('c', 'q5_k')], 'im.gguf', 'model');
    expect(r.warnings).toHaveLength(2);
    expect(r.warnings[0]).toMatch(/imatrix im\.gguf: "a" has zero importance over 2 whole 32-column blocks \(first: columns 32-63\); iq4_nl then stores a NaN scale/);
    expect(r.warnings[1]).toMatch(/"b" has zero importance over 1 whole 256-column block \(first: columns 256-511\); q4_k/);
  });

  it('says nothing for formats whose all-zero blocks are finite, kept tensors and partial zeros', () => {
    const z = withZeros(512, 0, 512);
    const m = new Map([['a', z], ['b', z], ['c', z], ['d', withZeros(512, 1, 32)]]);
    const r = importanceFor(m, [target('a', 'q6_k'), target('b', 'iq4_xs'), target('c', 'keep'), target('d', 'iq4_nl')], 'im.gguf', 'model');
    expect(r.warnings).toEqual([]);
  });

  it('names the expert of a stacked MoE tensor', () => {
    const v = new Float32Array(3 * 256).fill(1);
    v.fill(0, 2 * 256 + 32, 2 * 256 + 64);
    const r = importanceFor(new Map([['e', v]]), [target('e', 'iq4_nl', 256, [3, 8, 256])], 'im.gguf', 'model');
    expect(r.warnings[0]).toMatch(/over 1 whole 32-column block \(first: columns 32-63 of expert 2\)/);
  });

  it('the warning is true: such a block dequantizes to NaN (spec §16.2), a block with one nonzero weight does not', async () => {
    const x = new Float32Array(512).map((_, i) => Math.sin(i) * 0.02);
    for (const [format, imp] of [['iq4_nl', withZeros(512, 32, 64)], ['q4_k', withZeros(512, 256, 512)]] as const) {
      const y = await dequantize(await quantize(x, { format, rowLength: 512, importance: imp }));
      const nan = [...y].map((v, i) => (Number.isNaN(v) ? i : -1)).filter((i) => i >= 0);
      expect(nan.length, format).toBeGreaterThan(0);
      expect(Math.min(...nan), format).toBe(format === 'iq4_nl' ? 32 : 256);
      const one = imp.slice();
      one[format === 'iq4_nl' ? 40 : 300] = 1;
      expect((await dequantize(await quantize(x, { format, rowLength: 512, importance: one }))).some(Number.isNaN), format).toBe(false);
    }
  });
});

describe('readImatrix records what an imatrix was computed on; imatrixMetadata writes it as llama-quantize does', () => {
  const i32 = (v: number) => new Uint8Array(new Int32Array([v]).buffer);
  const legacy = (trailer: Uint8Array[]) => {
    const name = new TextEncoder().encode('w');
    const parts = [i32(1), i32(name.length), name, i32(2), i32(2), new Uint8Array(new Float32Array([4, 6]).buffer), ...trailer];
    return new Uint8Array(parts.flatMap((p) => [...p]));
  };

  it('a legacy file with and without its trailer', async () => {
    const m = await readImatrix(fromBuffer(legacy([i32(12), i32(8), new TextEncoder().encode('wiki.txt')]), 'a.dat'));
    expect([...m.get('w')!]).toEqual([2, 3]);
    expect([m.chunks, m.datasets]).toEqual([12, ['wiki.txt']]);
    const bare = await readImatrix(fromBuffer(legacy([]), 'b.dat'));
    expect([bare.size, bare.chunks, bare.datasets]).toEqual([1, 0, []]);
    expect(imatrixMetadata('b.dat', bare)).toEqual([
      { key: 'quantize.imatrix.file', type: 'string', value: 'b.dat' },
      { key: 'quantize.imatrix.entries_count', type: 'u32', value: 1 },
    ]);
  });

  it('the keys, with strings cut to 127 bytes as llama.cpp\'s overrides hold them', async () => {
    const m = await readImatrix(fromBuffer(legacy([i32(3), i32(4), new TextEncoder().encode('text')]), 'c.dat'));
    const long = 'd'.repeat(140) + '.dat';
    expect(imatrixMetadata(long, m)).toEqual([
      { key: 'quantize.imatrix.file', type: 'string', value: long.slice(0, 127) },
      { key: 'quantize.imatrix.dataset', type: 'string', value: 'text' },
      { key: 'quantize.imatrix.entries_count', type: 'u32', value: 1 },
      { key: 'quantize.imatrix.chunks_count', type: 'u32', value: 3 },
    ]);
    // The name alone, from a path or a URL.
    for (const f of ['/home/u/cal/im.gguf', 'C:\\cal\\im.gguf', 'https://h/x/im.gguf?download=1']) expect(imatrixMetadata(f, m)[0].value, f).toBe('im.gguf');
    // A multi-byte character across byte 127 is dropped whole.
    expect(imatrixMetadata('a'.repeat(126) + 'é', m)[0].value).toBe('a'.repeat(126));
  });

  it('refuses a GGUF that is no imatrix, a scalar in_sum2, and sums that are not finite and >= 0, naming the file', async () => {
    const f32 = (v: number[]) => new Uint8Array(new Float32Array(v).buffer);
    const gguf = async (metadata: { key: string; type: 'string'; value: string }[], tensors: { name: string; shape: number[]; v: number[] }[]) =>
      fromBuffer(await collect(writeGguf({ metadata, tensors: tensors.map((t) => ({ name: t.name, ggmlType: 0, shape: t.shape, data: f32(t.v) })) })), 'x.gguf');
    const model = await gguf([{ key: 'general.architecture', type: 'string', value: 'llama' }], [{ name: 'token_embd.weight', shape: [2, 4], v: [1, 2, 3, 4, 5, 6, 7, 8] }]);
    await expect(readImatrix(model)).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT, details: { file: 'x.gguf' }, message: expect.stringMatching(/not an importance matrix/) });
    const type = { key: 'general.type', type: 'string' as const, value: 'imatrix' };
    expect((await readImatrix(await gguf([type], []))).size).toBe(0);
    const good = await readImatrix(await gguf([type], [{ name: 'w.in_sum2', shape: [1, 2], v: [4, 6] }, { name: 'w.counts', shape: [1, 1], v: [2] }]));
    expect([...good.get('w')!]).toEqual([2, 3]);
    const scalar = await gguf([type], [{ name: 'w.in_sum2', shape: [], v: [4] }, { name: 'w.counts', shape: [1, 1], v: [2] }]);
    await expect(readImatrix(scalar)).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT, details: { tensor: 'w.in_sum2' } });
    const nan = await gguf([type], [{ name: 'w.in_sum2', shape: [1, 2], v: [4, NaN] }, { name: 'w.counts', shape: [1, 1], v: [2] }]);
    await expect(readImatrix(nan)).rejects.toMatchObject({ code: ErrorCodes.NON_FINITE, details: { file: 'x.gguf', tensor: 'w.in_sum2', index: 1 } });
    const legacyNeg = legacy([]);
    new DataView(legacyNeg.buffer).setFloat32(legacyNeg.byteLength - 4, -1, true);
    await expect(readImatrix(fromBuffer(legacyNeg, 'n.dat'))).rejects.toMatchObject({ code: ErrorCodes.NON_FINITE, details: { file: 'n.dat', tensor: 'w', index: 1 } });
  });
});
