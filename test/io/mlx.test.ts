// MLX checkpoints read as their values (src/io/mlx.ts): a module's U32 codes, .scales and .biases
// presented as one MLX_AFFINE weight whose reads give scale * q + bias, with group size and bits
// from config.json's "quantization" or, where only one pair fits the shapes, from the shapes.
import { describe, expect, it } from 'vitest';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { openSafetensors, openSafetensorsIndex } from '../../src/io/safetensors.js';
import { collect } from '../../src/io/stream.js';
import { fromBuffer } from '../../src/io/source.js';
import { mlxQuantizationOf } from '../../src/io/mlx.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';
import { quantize, dequantize } from '../../src/quantize.js';
import { mlxDequantizeRef } from '../reference/mlx-ref.js';

const ROWS = 6;

function weights(cols: number, seed: number): Float32Array {
  return Float32Array.from({ length: ROWS * cols }, (_v, i) => Math.fround(Math.sin(i * 0.37 + seed) * 0.05 + (i % 11 === 0 ? 0.2 : 0)));
}

/** An mlx_lm-style file (no webquant metadata): each module's .weight, .scales, .biases. */
async function mlxFile(mods: { name: string; cols: number; bits: number; groupSize: number; scaleDtype?: 'bf16' | 'f16' | 'f32' }[]) {
  const tensors = [];
  const values: Record<string, Float32Array> = {};
  for (const m of mods) {
    const x = weights(m.cols, m.name.length);
    const scaleDtype = m.scaleDtype ?? 'bf16';
    const q = await quantize(x, { format: 'mlx', rowLength: m.cols, bits: m.bits, groupSize: m.groupSize, scaleDtype });
    values[`${m.name}.weight`] = await dequantize(q);
    const codeBytes = (ROWS * m.cols * m.bits) / 8, per = ROWS * (m.cols / m.groupSize) * (scaleDtype === 'f32' ? 4 : 2);
    const st = scaleDtype === 'f32' ? 'F32' : scaleDtype === 'f16' ? 'F16' : 'BF16';
    tensors.push(
      { name: `${m.name}.weight`, dtype: 'U32', shape: [ROWS, (m.cols * m.bits) / 32], data: q.data.subarray(0, codeBytes) },
      { name: `${m.name}.scales`, dtype: st, shape: [ROWS, m.cols / m.groupSize], data: q.data.subarray(codeBytes, codeBytes + per) },
      { name: `${m.name}.biases`, dtype: st, shape: [ROWS, m.cols / m.groupSize], data: q.data.subarray(codeBytes + per) },
    );
  }
  tensors.push({ name: 'norm.weight', dtype: 'F32', shape: [4], data: new Float32Array([1, 2, 3, 4]) });
  return { bytes: await collect(writeSafetensors({ tensors })), values };
}

describe('MLX checkpoints', () => {
  const config = { quantization: { group_size: 64, bits: 4, 'b.proj': { group_size: 32, bits: 3 }, 'c.proj': false } };
  const mods = [
    { name: 'a.proj', cols: 128, bits: 4, groupSize: 64 },
    { name: 'b.proj', cols: 96, bits: 3, groupSize: 32, scaleDtype: 'f16' as const },
  ];

  it('reads config.json "quantization": a default and per-module entries', () => {
    expect(mlxQuantizationOf(config)).toEqual({ groupSize: 64, bits: 4, modules: { 'b.proj': { groupSize: 32, bits: 3 }, 'c.proj': false } });
    expect(mlxQuantizationOf({ quantization: { group_size: 32, bits: 4, mode: 'mxfp4' } })).toBeUndefined();
    expect(mlxQuantizationOf({ quantization_config: { quant_method: 'fp8' } })).toBeUndefined();
  });

  it('presents each module as one MLX_AFFINE weight with the values MLX computes', async () => {
    const { bytes, values } = await mlxFile(mods);
    const ck = await openSafetensors(fromBuffer(bytes, 'mlx'), { mlx: mlxQuantizationOf(config) });
    expect(ck.tensors.map((t) => [t.name, t.dtype, t.shape])).toEqual([
      ['a.proj.weight', 'MLX_AFFINE', [ROWS, 128]], ['b.proj.weight', 'MLX_AFFINE', [ROWS, 96]], ['norm.weight', 'F32', [4]],
    ]);
    for (const m of mods) {
      const name = `${m.name}.weight`;
      const got = await ck.readF32(name);
      expect([...got], name).toEqual([...values[name]]);
      const rows = await ck.readRows!(name, 2, 3);
      expect([...rows.values], `${name} rows 2..4`).toEqual([...values[name].subarray(2 * m.cols, 5 * m.cols)]);
      expect(ck.locate!(name, 0, 1)).toBeUndefined();
    }
    const a = await quantize(weights(128, 'a.proj'.length), { format: 'mlx', rowLength: 128 });
    expect([...await ck.readF32('a.proj.weight')]).toEqual([...mlxDequantizeRef(a.data, ROWS * 128, { bits: 4, groupSize: 64, scaleDtype: 'bf16' })]);
  });

  it('infers group size and bits from the shapes where only one pair fits, and asks for config.json otherwise', async () => {
    // 96 columns at 3 bits in groups of 32: 9 words and 3 groups per row, which nothing else fits
    const one = await mlxFile([mods[1]]);
    const ck = await openSafetensors(fromBuffer(one.bytes, 'mlx'));
    expect([...await ck.readF32('b.proj.weight')]).toEqual([...one.values['b.proj.weight']]);
    // 128 columns at 4 bits in groups of 64: 16 words and 2 groups a row, as 8 bits in groups of 32 or 2 bits in groups of 128
    const two = await mlxFile([mods[0]]);
    const e = await openSafetensors(fromBuffer(two.bytes, 'mlx')).catch((x: unknown) => x) as WebquantError;
    expect(e).toBeInstanceOf(WebquantError);
    expect(e.code).toBe(ErrorCodes.ST_SCALE);
    expect(e.message).toContain('4 bits in groups of 64');
    expect(e.details.tensor).toBe('a.proj.weight');
  });

  it('ST_SCALE when the scales do not fit the settings', async () => {
    const { bytes } = await mlxFile([mods[0]]);
    const e = await openSafetensors(fromBuffer(bytes, 'mlx'), { mlx: { groupSize: 32, bits: 4 } }).catch((x: unknown) => x) as WebquantError;
    expect(e.code).toBe(ErrorCodes.ST_SCALE);
    expect(e.details).toMatchObject({ tensor: 'a.proj.weight', value: { bits: 4, groupSize: 32 } });
  });

  it('across the shards of an index', async () => {
    const { bytes, values } = await mlxFile(mods);
    const index = new TextEncoder().encode(JSON.stringify({ weight_map: Object.fromEntries(['a.proj.weight', 'a.proj.scales', 'a.proj.biases', 'b.proj.weight', 'b.proj.scales', 'b.proj.biases', 'norm.weight'].map((n) => [n, 'model.safetensors'])) }));
    const ck = await openSafetensorsIndex(fromBuffer(index, 'index.json'), () => fromBuffer(bytes, 'model.safetensors'), { mlx: mlxQuantizationOf(config) });
    expect(ck.tensor('b.proj.weight').dtype).toBe('MLX_AFFINE');
    expect([...await ck.readF32('b.proj.weight')]).toEqual([...values['b.proj.weight']]);
  });
});
