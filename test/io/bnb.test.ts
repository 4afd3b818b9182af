// bitsandbytes checkpoints read as their values (src/io/bnb.ts): transformers' 4-bit serialization
// (packed codes over the flattened tensor, absmax per block, quant_map, the JSON quant_state; with
// double quantization U8 absmax codes of a nested map) and LLM.int8 (I8 with SCB per row).
import { describe, expect, it } from 'vitest';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { openSafetensors, openSafetensorsIndex } from '../../src/io/safetensors.js';
import { collect } from '../../src/io/stream.js';
import { fromBuffer } from '../../src/io/source.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';

const f = Math.fround;
// The NF4 code book (bitsandbytes' published table).
const NF4 = [-1, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0,
  0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1];

interface Made { bytes: Uint8Array; want: Float32Array }

/**
 * A 4-bit weight of shape [rows, cols] with blocks of 64 over the flattened tensor (a row of 90
 * values ends inside a block and, being even, on a byte boundary; 45 would end mid-byte).
 */
async function bnb4(rows: number, cols: number, nested: boolean, extra: { name: string; dtype: string; shape: number[]; data: ArrayBufferView }[] = [], storage: 'U8' | 'BF16' = 'U8'): Promise<Made> {
  const n = rows * cols, blocks = Math.ceil(n / 64);
  const codes = Uint8Array.from({ length: n }, (_v, i) => (i * 7 + (i >> 3)) % 16);
  const packed = new Uint8Array(Math.ceil(n / 2));
  for (let i = 0; i < n; i++) packed[i >> 1] |= i & 1 ? codes[i] : codes[i] << 4;
  const want = new Float32Array(n);
  const state: Record<string, unknown> = { quant_type: 'nf4', blocksize: 64, dtype: 'bfloat16', shape: [rows, cols] };
  const tensors: { name: string; dtype: string; shape: number[]; data: ArrayBufferView }[] = [
    { name: 'm.weight', dtype: storage, shape: [storage === 'U8' ? packed.length : packed.length / 2, 1], data: packed },
    { name: 'm.weight.quant_map', dtype: 'F32', shape: [16], data: new Float32Array(NF4) },
  ];
  let absmax: Float32Array;
  if (nested) {
    const nmap = Float32Array.from({ length: 256 }, (_v, i) => f((i - 128) / 128));
    const nabs = Float32Array.from({ length: Math.ceil(blocks / 256) }, (_v, i) => f(0.5 + i));
    const acodes = Uint8Array.from({ length: blocks }, (_v, i) => (i * 37) % 256);
    const offset = 0.03125;
    absmax = Float32Array.from(acodes, (q, i) => f(f(nmap[q] * nabs[Math.floor(i / 256)]) + offset));
    Object.assign(state, { nested_blocksize: 256, nested_dtype: 'float32', nested_offset: offset });
    tensors.push(
      { name: 'm.weight.absmax', dtype: 'U8', shape: [blocks], data: acodes },
      { name: 'm.weight.nested_absmax', dtype: 'F32', shape: [nabs.length], data: nabs },
      { name: 'm.weight.nested_quant_map', dtype: 'F32', shape: [256], data: nmap },
    );
  } else {
    absmax = Float32Array.from({ length: blocks }, (_v, i) => f(0.01 * (i + 1)));
    tensors.push({ name: 'm.weight.absmax', dtype: 'F32', shape: [blocks], data: absmax });
  }
  for (let i = 0; i < n; i++) want[i] = f(NF4[codes[i]] * absmax[Math.floor(i / 64)]);
  const json = new TextEncoder().encode(JSON.stringify(state));
  tensors.push({ name: 'm.weight.quant_state.bitsandbytes__nf4', dtype: 'U8', shape: [json.length], data: json }, ...extra);
  return { bytes: await collect(writeSafetensors({ tensors })), want };
}

describe('bitsandbytes checkpoints', () => {
  for (const nested of [false, true]) {
    it(`4-bit${nested ? ' with double quantization' : ''}: quant_map[code] * absmax, rows read alone`, async () => {
      // 300 x 90: blocks cross rows; 2 nested blocks when nested (422 blocks)
      const { bytes, want } = await bnb4(300, 90, nested, [{ name: 'norm.weight', dtype: 'F32', shape: [2], data: new Float32Array([1, 2]) }]);
      const ck = await openSafetensors(fromBuffer(bytes, 'bnb'));
      expect(ck.tensors.map((t) => [t.name, t.dtype, t.shape])).toEqual([['m.weight', 'BNB_4BIT', [300, 90]], ['norm.weight', 'F32', [2]]]);
      expect([...await ck.readF32('m.weight')]).toEqual([...want]);
      for (const [r0, rows] of [[0, 1], [1, 2], [7, 1], [299, 1], [100, 150]]) {
        expect([...(await ck.readRows!('m.weight', r0, rows)).values], `rows ${r0}..${r0 + rows}`).toEqual([...want.subarray(r0 * 90, (r0 + rows) * 90)]);
      }
      expect(ck.locate!('m.weight', 0, 1)).toBeUndefined();
    });
  }

  it('4-bit rows of odd length start and end inside a byte', async () => {
    const { bytes, want } = await bnb4(5, 45, false);
    const ck = await openSafetensors(fromBuffer(bytes, 'bnb'));
    for (let r = 0; r < 5; r++) expect([...(await ck.readRows!('m.weight', r, 1)).values], `row ${r}`).toEqual([...want.subarray(r * 45, (r + 1) * 45)]);
  });

  it('LLM.int8: (code * SCB) * f32(1/127) per row, as int8_vectorwise_dequant, weight_format folded in', async () => {
    const codes = Int8Array.from({ length: 4 * 6 }, (_v, i) => ((i * 29) % 255) - 127);
    const scb = new Float32Array([1.5, 0.25, 3, 127]);
    const bytes = await collect(writeSafetensors({
      tensors: [
        { name: 'l.weight', dtype: 'I8', shape: [4, 6], data: codes },
        { name: 'l.SCB', dtype: 'F32', shape: [4], data: scb },
        { name: 'l.weight_format', dtype: 'U8', shape: [], data: new Uint8Array([0]) },
      ],
    }));
    const ck = await openSafetensors(fromBuffer(bytes, 'int8'));
    expect(ck.tensors.map((t) => [t.name, t.dtype])).toEqual([['l.weight', 'BNB_INT8']]);
    // bitsandbytes multiplies by the literal 7.874015718698502e-3, f32(1/127)
    expect(f(7.874015718698502e-3)).toBe(f(1 / 127));
    const want = Float32Array.from(codes, (q, i) => f(f(q * scb[Math.floor(i / 6)]) * f(7.874015718698502e-3)));
    expect([...await ck.readF32('l.weight')]).toEqual([...want]);
    expect([...(await ck.readRows!('l.weight', 3, 1)).values]).toEqual([...want.subarray(18)]);
  });

  it('across the shards of an index', async () => {
    const { bytes, want } = await bnb4(8, 64, true);
    const names = ['m.weight', 'm.weight.quant_map', 'm.weight.absmax', 'm.weight.nested_absmax', 'm.weight.nested_quant_map', 'm.weight.quant_state.bitsandbytes__nf4'];
    const index = new TextEncoder().encode(JSON.stringify({ weight_map: Object.fromEntries(names.map((n) => [n, 'model.safetensors'])) }));
    const ck = await openSafetensorsIndex(fromBuffer(index, 'index.json'), () => fromBuffer(bytes, 'model.safetensors'));
    expect([...await ck.readF32('m.weight')]).toEqual([...want]);
  });

  it('ST_SCALE naming the weight when the companions do not fit', async () => {
    const state = (s: unknown) => new TextEncoder().encode(JSON.stringify(s));
    const cases: [string, { name: string; dtype: string; shape: number[]; data: ArrayBufferView }[]][] = [
      ['shape does not match the codes', [{ name: 'm.weight.quant_state.bitsandbytes__nf4', dtype: 'U8', shape: [0], data: state({ blocksize: 64, shape: [4, 64] }) }]],
      ['no quant_map', [{ name: 'm.weight.quant_state.bitsandbytes__nf4', dtype: 'U8', shape: [0], data: state({ blocksize: 64, shape: [2, 64] }) }, { name: 'm.weight.absmax', dtype: 'F32', shape: [2], data: new Float32Array(2) }]],
      ['not JSON', [{ name: 'm.weight.quant_state.bitsandbytes__nf4', dtype: 'U8', shape: [0], data: new Uint8Array([1, 2]) }]],
    ];
    for (const [why, extra] of cases) {
      for (const e of extra) e.shape = e.name.endsWith('nf4') ? [(e.data as Uint8Array).length] : e.shape;
      const bytes = await collect(writeSafetensors({ tensors: [{ name: 'm.weight', dtype: 'U8', shape: [64, 1], data: new Uint8Array(64) }, ...extra] }));
      const e = await openSafetensors(fromBuffer(bytes, 'bad')).catch((x: unknown) => x) as WebquantError;
      expect(e, why).toBeInstanceOf(WebquantError);
      expect(e.code, why).toBe(ErrorCodes.ST_SCALE);
      expect(e.details.tensor, why).toBe('m.weight');
    }
  });
});

describe('bitsandbytes 4-bit codes stored as another dtype (bnb_4bit_quant_storage)', () => {
  it('reads the bytes of a BF16 codes tensor as codes', async () => {
    const { want } = await bnb4(4, 64, false);
    const { bytes } = await bnb4(4, 64, false, [], 'BF16');
    const ck = await openSafetensors(fromBuffer(bytes, 'bf16-storage'));
    expect(ck.tensor('m.weight')).toMatchObject({ dtype: 'BNB_4BIT', shape: [4, 64] });
    expect([...await ck.readF32('m.weight')]).toEqual([...want]);
  });
});
