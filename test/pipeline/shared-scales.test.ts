// NVFP4's scale_2 shared by the tensors runtimes fuse (src/pipeline/shared-scales.ts): q/k/v and
// gate/up get the scale of their largest member, o/down keep their own, and every tensor's bytes
// are quantize() of its values with that scale; row-chunked reads give the same file.
import { describe, expect, it } from 'vitest';
import { quantizeCheckpoint } from '../../src/pipeline/pipeline.js';
import { readableStreamSink } from '../../src/pipeline/sink.js';
import { fusedGroup } from '../../src/pipeline/shared-scales.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { dequantize, quantize } from '../../src/quantize.js';
import { WebquantError } from '../../src/errors.js';
import { buildSafetensors, compiledUrl, f32Bytes, randomValues, sameBytes, type SynthTensor } from './helpers.js';

const DIM = 64;

/** Two layers; each projection scaled differently so that its own scale_2 would differ. */
function checkpoint(): Uint8Array {
  const t: SynthTensor[] = [];
  let seed = 9;
  const add = (name: string, rows: number, scale: number) => {
    const v = randomValues(rows * DIM, seed++).map((x) => x * scale);
    t.push({ name, dtype: 'F32', shape: [rows, DIM], data: f32Bytes(v) });
  };
  for (let l = 0; l < 2; l++) {
    const p = `model.layers.${l}`;
    add(`${p}.self_attn.q_proj.weight`, DIM, 1 + l);
    add(`${p}.self_attn.k_proj.weight`, 32, 5);
    add(`${p}.self_attn.v_proj.weight`, 32, 0.5);
    add(`${p}.self_attn.o_proj.weight`, DIM, 0.25);
    add(`${p}.mlp.gate_proj.weight`, 128, 0.3);
    add(`${p}.mlp.up_proj.weight`, 128, 3);
    t.push({ name: `${p}.input_layernorm.weight`, dtype: 'F32', shape: [DIM], data: f32Bytes(new Float32Array(DIM).fill(1)) });
  }
  t.sort((a, b) => (a.name < b.name ? -1 : 1));
  return buildSafetensors(t);
}

async function run(bytes: Uint8Array, maxInFlightBytes?: number, inputScale?: (name: string) => number): Promise<Uint8Array> {
  const input = await openCheckpoint(fromBuffer(bytes, 'fused.safetensors'));
  const plan = input.tensors.filter((t) => t.shape.length === 2).map((t) => ({ name: t.name, scheme: { format: 'nvfp4', ...(inputScale ? { inputScale: inputScale(t.name) } : {}) } }));
  const { sink, stream } = readableStreamSink();
  const [out] = await Promise.all([
    new Response(stream).arrayBuffer().then((b) => new Uint8Array(b)),
    quantizeCheckpoint({ input, plan, sink, workers: 2, maxInFlightBytes, poolOptions: { workerUrl: compiledUrl('src/pipeline/worker-node.js') } }),
  ]);
  return out;
}

describe('shared NVFP4 scale_2', () => {
  it('names the fused groups of Llama- and Mixtral-style weights', () => {
    expect(fusedGroup('model.layers.3.self_attn.k_proj.weight')).toBe('model.layers.3.self_attn.qkv');
    expect(fusedGroup('model.layers.3.mlp.up_proj.weight')).toBe('model.layers.3.mlp.gate_up');
    expect(fusedGroup('model.layers.1.mlp.experts.7.gate_proj.weight')).toBe('model.layers.1.mlp.experts.7.gate_up');
    expect(fusedGroup('model.layers.1.block_sparse_moe.experts.2.w3.weight')).toBe('model.layers.1.block_sparse_moe.experts.2.w13');
    for (const n of ['model.layers.3.self_attn.o_proj.weight', 'model.layers.3.mlp.down_proj.weight', 'model.layers.3.self_attn.q_proj.bias']) expect(fusedGroup(n)).toBeUndefined();
  });

  it('q/k/v and gate/up share their largest scale_2, o keeps its own; bytes are quantize() with it; row chunks give the same file', async () => {
    const bytes = checkpoint();
    const out = await run(bytes);
    const input = await openCheckpoint(fromBuffer(bytes, 'in'));
    const q = await openCheckpoint(fromBuffer(out, 'out'));
    const scale2 = async (n: string) => new DataView((await q.readRaw(`${n}_scale_2`)).slice().buffer).getFloat32(0, true);
    const amax = async (n: string) => (await input.readF32(n)).reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    for (let l = 0; l < 2; l++) {
      const p = `model.layers.${l}`;
      const groups = [['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj'], ['mlp.gate_proj', 'mlp.up_proj'], ['self_attn.o_proj']];
      for (const g of groups) {
        const names = g.map((s) => `${p}.${s}.weight`);
        const want = Math.fround(Math.max(...(await Promise.all(names.map(amax)))) / 2688);
        for (const n of names) {
          expect(await scale2(n), n).toBe(want);
          const own = await quantize(await input.readF32(n), { format: 'nvfp4', rowLength: DIM });
          const shared = await quantize(await input.readF32(n), { format: 'nvfp4', rowLength: DIM, tensorScale: want });
          const stored = [...await q.readRaw(n), ...await q.readRaw(`${n}_scale`), ...await q.readRaw(`${n}_scale_2`)];
          expect(sameBytes(Uint8Array.from(stored), shared.data), n).toBe(true);
          // Only the largest member of a group keeps the bytes it would have alone.
          if (g.length > 1) expect(sameBytes(own.data, shared.data), n).toBe(want === Math.fround((await amax(n)) / 2688));
        }
      }
    }
    expect(sameBytes(await run(bytes, 8 << 10), out)).toBe(true);
  });

  it('tensorScale: only for formats with a shared scale, finite and >= 0', async () => {
    const x = randomValues(4 * DIM, 1);
    for (const [o, re] of [
      [{ format: 'q8_0', tensorScale: 1 }, /q8_0 takes no tensorScale.*nvfp4/],
      [{ format: 'nvfp4', tensorScale: -1 }, /tensorScale must be a finite number >= 0/],
      [{ format: 'nvfp4', tensorScale: NaN }, /tensorScale must be a finite number >= 0/],
    ] as const) {
      const e = await quantize(x, { ...o, rowLength: DIM }).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(WebquantError);
      expect((e as WebquantError).code).toBe('E_BAD_OPTION');
      expect((e as Error).message).toMatch(re);
    }
  });

  it('inputScale: a constant F32 section <module>.input_scale after the weight\'s own, which stay the same; whole or in row chunks', async () => {
    const bytes = checkpoint();
    const scaleOf = (n: string) => 0.001 * (1 + n.length);
    const plain = await openCheckpoint(fromBuffer(await run(bytes), 'plain'));
    const out = await run(bytes, undefined, scaleOf);
    expect(sameBytes(await run(bytes, 8 << 10, scaleOf), out)).toBe(true);
    const q = await openCheckpoint(fromBuffer(out, 'scaled'));
    const names = plain.tensors.filter((t) => t.dtype === 'U8' && t.name.endsWith('.weight')).map((t) => t.name);
    expect(names.length).toBe(12);
    for (const n of names) {
      const m = n.slice(0, -'.weight'.length);
      expect(q.tensor(`${m}.input_scale`)).toMatchObject({ dtype: 'F32', shape: [] });
      expect(new DataView((await q.readRaw(`${m}.input_scale`)).slice().buffer).getFloat32(0, true)).toBe(Math.fround(scaleOf(n)));
      for (const part of [n, `${n}_scale`, `${n}_scale_2`]) expect(sameBytes(await q.readRaw(part), await plain.readRaw(part)), part).toBe(true);
    }
    // quantize() puts it last, after scale_2, and dequantizes to the same values
    const x = randomValues(4 * DIM, 3);
    const a = await quantize(x, { format: 'nvfp4', rowLength: DIM });
    const b = await quantize(x, { format: 'nvfp4', rowLength: DIM, inputScale: 0.25 });
    expect(sameBytes(b.data, Uint8Array.from([...a.data, ...new Uint8Array(Float32Array.of(0.25).buffer)]))).toBe(true);
    expect([...await dequantize(b)]).toEqual([...await dequantize(a)]);
    for (const [o, re] of [
      [{ format: 'q8_0', inputScale: 1 }, /format q8_0 stores no activation scale/],
      [{ format: 'nvfp4', inputScale: 0 }, /inputScale must be a finite number > 0/],
      [{ format: 'nvfp4', inputScale: Infinity }, /inputScale must be a finite number > 0/],
    ] as const) {
      const e = await quantize(x, { ...o, rowLength: DIM }).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(WebquantError);
      expect((e as WebquantError).code).toBe('E_BAD_OPTION');
      expect((e as Error).message).toMatch(re);
    }
  });
});
