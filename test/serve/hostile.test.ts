// The serving API fed wrong arguments and hostile files: every one is a WebquantError naming the
// file, tensor or option, never a TypeError or a result computed from bytes that are not there.
import { describe, expect, it } from 'vitest';
import { collect, fromBuffer, writeGguf } from '../../src/io/index.js';
import { quantize } from '../../src/quantize.js';
import { ErrorCodes } from '../../src/errors.js';
import { openQuantized, servedFromQuantized } from '../../src/serve/index.js';
import { buildSafetensors, f32Bytes, randomValues } from '../pipeline/helpers.js';

const plain = { name: 'p', dtype: 'F32', shape: [2, 8], data: f32Bytes(randomValues(16, 4)) };
const withMeta = (meta: string) => fromBuffer(buildSafetensors([plain], { 'webquant.quantization': meta }), 'm.safetensors');

describe('openQuantized on a hostile webquant.quantization entry', () => {
  const q8 = { format: 'q8_0', sections: ['p'], shape: [2, 32], options: {} };
  const cases: [string, unknown, Record<string, unknown>][] = [
    ['null', null, { file: 'm.safetensors' }],
    ['a list', [1, 2], { file: 'm.safetensors' }],
    ['an entry that is null', { p: null }, { tensor: 'p' }],
    ['a shape that is a string', { t: { ...q8, shape: 'abc' } }, { tensor: 't', option: 'shape' }],
    ['a negative size', { t: { ...q8, shape: [-2, 32] } }, { tensor: 't', option: 'shape' }],
    ['sections that are a string', { t: { ...q8, sections: 'p' } }, { tensor: 't', option: 'sections' }],
    ['options that are a string', { t: { ...q8, options: 'x' } }, { tensor: 't', option: 'options' }],
    ['a stored shape larger than the data', { p: { storedAs: 'F32', shape: [1000, 1000] } }, { tensor: 'p', value: [1000, 1000], expected: '16 values' }],
    ['a GGUF block shape that is not the data', { p: { storedAs: 'Q8_0', shape: [2, 64] } }, { tensor: 'p', value: [2, 64], expected: '64 bytes' }],
  ];
  for (const [what, meta, details] of cases) {
    it(`${what}: E_BAD_INPUT naming it`, async () => {
      await expect(openQuantized(withMeta(JSON.stringify(meta)))).rejects.toMatchObject({ name: 'WebquantError', code: ErrorCodes.BAD_INPUT, details });
    });
  }
});

describe('serving options and arguments', () => {
  const ROWS = 4, COLS = 64;
  const x = randomValues(COLS, 3);
  const qt = () => quantize(randomValues(ROWS * COLS, 1), { format: 'q8_0', rowLength: COLS });
  const gguf = async () => fromBuffer(await collect(writeGguf({ tensors: [{ name: 'w', ggmlType: 'Q8_0', shape: [ROWS, COLS], data: (await qt()).data }] })), 'w.gguf');

  it('chunkBytes and activations are checked (E_BAD_OPTION), not computed with', async () => {
    for (const chunkBytes of [NaN, 0, -1, 1.5, Infinity]) {
      await expect(openQuantized(await gguf(), { chunkBytes }), String(chunkBytes)).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'chunkBytes' } });
      await expect(servedFromQuantized(await qt(), { chunkBytes }), String(chunkBytes)).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'chunkBytes' } });
    }
    const activations = 'int8' as 'q8';
    await expect(openQuantized(await gguf(), { activations })).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'activations', expected: ['f32', 'q8'] } });
    await expect(servedFromQuantized(await qt(), { activations })).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'activations' } });
    // the smallest chunk still computes the same bits
    const y = await (await openQuantized(await gguf())).tensor('w').matvec(x);
    expect([...await (await openQuantized(await gguf(), { chunkBytes: 1 })).tensor('w').matvec(x)]).toEqual([...y]);
  });

  it('servedFromQuantized refuses data shorter than its layout and a shape that is not [rows, rowLength]', async () => {
    const q = await qt();
    await expect(servedFromQuantized({ ...q, data: q.data.subarray(0, 10) })).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT, details: { option: 'data', value: 10, expected: 272 } });
    await expect(servedFromQuantized({ ...q, shape: [ROWS * COLS] as unknown as [number, number] })).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT, details: { option: 'shape' } });
  });

  it('openQuantized of something that is neither a ByteSource nor a Checkpoint', async () => {
    for (const s of [null, undefined, {}, 'w.gguf']) {
      await expect(openQuantized(s as never), String(s)).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT, details: { option: 'source' } });
    }
  });
});
