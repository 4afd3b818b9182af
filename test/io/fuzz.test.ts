// Property-based robustness: whatever bytes the readers get, they either succeed or throw a
// WebquantError, never a TypeError / RangeError / SyntaxError, and they terminate.
import { beforeAll, describe, expect, test } from 'vitest';
import fc from 'fast-check';
import { WebquantError } from '../../src/errors.js';
import { fromBuffer } from '../../src/io/source.js';
import { openSafetensors, openSafetensorsIndex } from '../../src/io/safetensors.js';
import { openGguf } from '../../src/io/gguf.js';
import { readConfig } from '../../src/io/config.js';
import { writeGguf } from '../../src/io/gguf-writer.js';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect } from '../../src/io/stream.js';
import { quantize } from '../../src/quantize.js';
import type { Checkpoint } from '../../src/io/checkpoint.js';
import { randomF32 } from './helpers.js';

async function onlyWebquantErrors(run: () => Promise<unknown>): Promise<void> {
  try {
    await run();
  } catch (e) {
    if (!(e instanceof WebquantError)) throw new Error(`non-WebquantError: ${(e as Error)?.name}: ${(e as Error)?.message}\n${(e as Error)?.stack}`);
  }
}

async function readAll(c: Checkpoint): Promise<void> {
  for (const t of c.tensors) {
    await onlyWebquantErrors(() => c.readRaw(t.name));
    await onlyWebquantErrors(() => c.readF32(t.name));
    await onlyWebquantErrors(() => c.readValues(t.name));
    await onlyWebquantErrors(() => c.readRows!(t.name, 0, 1));
  }
}

/** Every reader on the same bytes. */
async function feed(bytes: Uint8Array): Promise<void> {
  const src = () => fromBuffer(bytes, 'fuzz');
  await onlyWebquantErrors(async () => readAll(await openSafetensors(src())));
  await onlyWebquantErrors(async () => readAll(await openGguf(src(), { initialRead: 64 })));
  await onlyWebquantErrors(() => readConfig(src()));
  await onlyWebquantErrors(async () => readAll(await openSafetensorsIndex(src(), () => src())));
}

let seeds: Uint8Array[] = [];

beforeAll(async () => {
  const v = randomF32(2 * 64, 4);
  const q8 = await quantize(v, { format: 'q8_0', rowLength: 64 });
  const gguf = await collect(writeGguf({
    metadata: [
      { key: 'general.architecture', type: 'string', value: 'llama' },
      { key: 'a', type: 'array', itemType: 'string', value: ['x', 'yz'] },
      { key: 'n', type: 'u64', value: 5n },
      { key: 'f', type: 'array', itemType: 'f32', value: [1, 2] },
    ],
    tensors: [
      { name: 'q', ggmlType: 'Q8_0', shape: [2, 64], data: q8.data },
      { name: 'f', ggmlType: 'F16', shape: [4], data: new Uint16Array([0x3c00, 0, 0x7c00, 0xfe00]) },
      { name: 'b', ggmlType: 'BF16', shape: [2], data: new Uint16Array([0x3f80, 1]) },
    ],
  }));
  const st = await collect(writeSafetensors({
    metadata: { format: 'pt' },
    tensors: [
      { name: 'w.weight', dtype: 'F8_E4M3', shape: [3, 4], data: new Uint8Array(12).fill(0x38) },
      { name: 'w.weight_scale_inv', dtype: 'F32', shape: [1, 1], data: new Float32Array([2]) },
      { name: 'h', dtype: 'F16', shape: [2], data: new Uint16Array([0x3c00, 0x4000]) },
      { name: 'i', dtype: 'I64', shape: [1], data: new BigInt64Array([5n]) },
    ],
  }));
  const index = new TextEncoder().encode(JSON.stringify({ metadata: {}, weight_map: { 'w.weight': 'x.safetensors', h: 'x.safetensors' } }));
  const config = new TextEncoder().encode(JSON.stringify({ architectures: ['LlamaForCausalLM'], hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 8, vocab_size: 16 }));
  // An MLX module (3 bits in groups of 32: the only pair its shapes fit) and bitsandbytes weights
  // (4-bit with double quantization, and LLM.int8).
  const mlxQ = await quantize(randomF32(2 * 96, 5), { format: 'mlx', rowLength: 96, bits: 3, groupSize: 32 });
  const mlx = await collect(writeSafetensors({
    tensors: [
      { name: 'm.weight', dtype: 'U32', shape: [2, 9], data: mlxQ.data.subarray(0, 72) },
      { name: 'm.scales', dtype: 'BF16', shape: [2, 3], data: mlxQ.data.subarray(72, 84) },
      { name: 'm.biases', dtype: 'BF16', shape: [2, 3], data: mlxQ.data.subarray(84, 96) },
    ],
  }));
  const state = new TextEncoder().encode(JSON.stringify({ quant_type: 'nf4', blocksize: 64, dtype: 'bfloat16', shape: [2, 64], nested_blocksize: 256, nested_offset: 0.5 }));
  const bnb = await collect(writeSafetensors({
    tensors: [
      { name: 'b.weight', dtype: 'U8', shape: [64, 1], data: Uint8Array.from({ length: 64 }, (_v, i) => i * 5) },
      { name: 'b.weight.absmax', dtype: 'U8', shape: [2], data: new Uint8Array([3, 200]) },
      { name: 'b.weight.quant_map', dtype: 'F32', shape: [16], data: new Float32Array(16).map((_v, i) => i / 8 - 1) },
      { name: 'b.weight.nested_absmax', dtype: 'F32', shape: [1], data: new Float32Array([0.25]) },
      { name: 'b.weight.nested_quant_map', dtype: 'F32', shape: [256], data: new Float32Array(256).map((_v, i) => i / 128 - 1) },
      { name: 'b.weight.quant_state.bitsandbytes__nf4', dtype: 'U8', shape: [state.length], data: state },
      { name: 'c.weight', dtype: 'I8', shape: [2, 4], data: new Int8Array([1, -2, 3, -127, 127, 0, 5, 6]) },
      { name: 'c.SCB', dtype: 'F32', shape: [2], data: new Float32Array([1.5, 2]) },
    ],
  }));
  seeds = [gguf, st, index, config, mlx, bnb];
});

const u64le = (v: bigint) => { const b = new Uint8Array(8); new DataView(b.buffer).setBigUint64(0, v & 0xffffffffffffffffn, true); return b; };

/** A mutation of a seed file: byte flips, a planted extreme integer, a cut, an insertion. */
const mutation = fc.record({
  seed: fc.nat(5),
  flips: fc.array(fc.record({ at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }), { maxLength: 6 }),
  plant: fc.option(fc.record({ at: fc.nat(), value: fc.constantFrom(0n, 1n, 0x7fffffffn, 0xffffffffn, 2n ** 53n, 2n ** 63n, 2n ** 64n - 1n, 1n << 32n) })),
  cut: fc.option(fc.nat()),
  insert: fc.option(fc.record({ at: fc.nat(), bytes: fc.uint8Array({ maxLength: 16 }) })),
});

function mutate(m: typeof mutation extends fc.Arbitrary<infer T> ? T : never): Uint8Array {
  let b = seeds[m.seed].slice();
  // Aim most changes at the header: that is where the parsing is.
  const span = Math.min(b.length, 400);
  for (const f of m.flips) b[f.at % span] = f.value;
  if (m.plant) b.set(u64le(m.plant.value).subarray(0, Math.min(8, b.length - (m.plant.at % span))), m.plant.at % span);
  if (m.insert) { const at = m.insert.at % (b.length + 1); b = new Uint8Array([...b.subarray(0, at), ...m.insert.bytes, ...b.subarray(at)]); }
  if (m.cut !== null) b = b.subarray(0, m.cut % (b.length + 1));
  return b;
}

describe('fuzz: readers throw only WebquantError', () => {
  test('random bytes', async () => {
    await fc.assert(fc.asyncProperty(fc.uint8Array({ maxLength: 600 }), feed), { numRuns: Number(process.env.WEBQUANT_FUZZ_RUNS ?? 300), seed: process.env.WEBQUANT_FUZZ_RUNS ? undefined : 42 });
  });
  test('random bytes behind a GGUF / safetensors prefix', async () => {
    const prefixed = fc.tuple(fc.constantFrom('gguf', 'st'), fc.integer({ min: 1, max: 3 }), fc.uint8Array({ maxLength: 400 })).map(([kind, v, rest]) => {
      if (kind === 'gguf') return new Uint8Array([0x47, 0x47, 0x55, 0x46, v, 0, 0, 0, ...rest]);
      return new Uint8Array([...u64le(BigInt(rest.length)), ...rest]);
    });
    await fc.assert(fc.asyncProperty(prefixed, feed), { numRuns: Number(process.env.WEBQUANT_FUZZ_RUNS ?? 300), seed: process.env.WEBQUANT_FUZZ_RUNS ? undefined : 7 });
  });
  test('mutated valid files', async () => {
    await fc.assert(fc.asyncProperty(mutation, (m) => feed(mutate(m))), { numRuns: Number(process.env.WEBQUANT_FUZZ_RUNS ?? 1500), seed: process.env.WEBQUANT_FUZZ_RUNS ? undefined : 1234 });
  });
  test('random JSON headers and indexes', async () => {
    const dim = fc.oneof(fc.nat(8), fc.constantFrom(-1, 1.5, 2 ** 53, 1e300, '3', null));
    const entry = fc.oneof(
      fc.record({ dtype: fc.constantFrom('F32', 'F16', 'BF16', 'F8_E4M3', 'I8', 'U8', 'U32', 'BOOL', 'F4', '', '__proto__'), shape: fc.array(dim, { maxLength: 3 }), data_offsets: fc.tuple(fc.nat(64), fc.nat(64)) }),
      fc.jsonValue({ maxDepth: 2 }),
    );
    const header = fc.dictionary(fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('__proto__', 'constructor', '__metadata__', 'w.weight', 'w.weight_scale_inv', 'w.scales', 'w.biases', 'w.SCB', 'w.weight.absmax', 'w.weight.quant_map', 'w.weight.quant_state.bitsandbytes__nf4')), entry, { maxKeys: 4 });
    await fc.assert(fc.asyncProperty(header, fc.nat(80), async (h, dataLen) => {
      const text = new TextEncoder().encode(JSON.stringify(h));
      const file = new Uint8Array([...u64le(BigInt(text.length)), ...text, ...new Uint8Array(dataLen).fill(0x3c)]);
      await feed(file);
      await feed(new TextEncoder().encode(JSON.stringify({ weight_map: h })));
      await feed(text);
    }), { numRuns: Number(process.env.WEBQUANT_FUZZ_RUNS ?? 400), seed: process.env.WEBQUANT_FUZZ_RUNS ? undefined : 99 });
  });
  test('the seeds themselves are read completely', async () => {
    expect(seeds.length).toBe(6);
    for (const s of seeds) await feed(s);
    // the mutation seeds are valid files, so mutations start from the deep paths of the readers
    const g = await openGguf(fromBuffer(seeds[0]));
    expect(await g.readF32('f')).toEqual(new Float32Array([1, 0, Infinity, NaN]));
    const st = await openSafetensors(fromBuffer(seeds[1]));
    expect(Array.from(await st.readF32('w.weight'))).toEqual(new Array(12).fill(2));
    expect((await readConfig(fromBuffer(seeds[3]))).numLayers).toBe(2);
    const mlx = await openSafetensors(fromBuffer(seeds[4]));
    expect(mlx.tensors.map((t) => [t.name, t.dtype])).toEqual([['m.weight', 'MLX_AFFINE']]);
    const bnb = await openSafetensors(fromBuffer(seeds[5]));
    expect(bnb.tensors.map((t) => [t.name, t.dtype])).toEqual([['b.weight', 'BNB_4BIT'], ['c.weight', 'BNB_INT8']]);
  });
});
