import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Checkpoint } from '../../src/io/checkpoint.js';
import { openGguf } from '../../src/io/gguf.js';
import { writeGguf } from '../../src/io/gguf-writer.js';
import { fromPath } from '../../src/io/node.js';
import { openSafetensors } from '../../src/io/safetensors.js';
import { fromBuffer } from '../../src/io/source.js';
import { collect } from '../../src/io/stream.js';
import { ggufContainer, type Container } from '../../src/pipeline/container.js';
import { buildJobs } from '../../src/pipeline/jobs.js';
import { quantizeCheckpoint, type PlannedTensor } from '../../src/pipeline/pipeline.js';
import type { Sink } from '../../src/pipeline/sink.js';
import { fileSink } from '../../src/pipeline/sink-node.js';
import { liveWorkerThreads } from '../../src/pipeline/spawn-node.js';
import { buildSafetensors, compiledUrl, f32Bytes, randomValues, sameBytes } from './helpers.js';

// safetensors allows a zero dimension (data_offsets [a, a]) and GGUF a zero ne[]: such a tensor has
// no row to read, cut or quantize, and is kept as stored, zero bytes, whatever the plan says.

const workerUrl = () => compiledUrl('src/pipeline/worker-node.js');
const EMPTY = new Uint8Array(0);

function memorySink(): Sink & { bytes(): Uint8Array } {
  const parts: Uint8Array[] = [];
  return {
    async write(c: Uint8Array) { parts.push(c.slice()); },
    async close() {},
    async abort() {},
    bytes: () => Buffer.concat(parts),
  };
}

const dir = mkdtempSync(join(tmpdir(), 'wq-empty-'));
const stPath = join(dir, 'in.safetensors');
writeFileSync(stPath, buildSafetensors([
  { name: 'model.layers.0.mlp.down_proj.weight', dtype: 'F32', shape: [4, 256], data: f32Bytes(randomValues(1024, 1)) },
  { name: 'model.layers.0.mlp.up_proj.weight', dtype: 'F32', shape: [0, 256], data: EMPTY },
  { name: 'model.layers.0.self_attn.q_proj.weight', dtype: 'BF16', shape: [2 ** 50, 0], data: EMPTY },
  { name: 'model.layers.0.self_attn.k_proj.weight', dtype: 'F8_E4M3', shape: [0, 256], data: EMPTY },
  { name: 'model.layers.0.input_layernorm.weight', dtype: 'F32', shape: [0], data: EMPTY },
]));
const EMPTY_NAMES = ['model.layers.0.mlp.up_proj.weight', 'model.layers.0.self_attn.q_proj.weight', 'model.layers.0.self_attn.k_proj.weight', 'model.layers.0.input_layernorm.weight'];

const planAll = (ck: Checkpoint, format: string): PlannedTensor[] => ck.tensors.map((t) => ({ name: t.name, scheme: { format } }));

/** The output of one run, through a memory sink or a file sink, from a file (workers read it themselves) or a buffer. */
async function run(input: 'file' | 'buffer', sinkKind: 'memory' | 'file', workers: number, format: string, container?: Container): Promise<Uint8Array> {
  const ck = input === 'file' ? await openSafetensors(fromPath(stPath)) : await openSafetensors(fromBuffer(new Uint8Array(readFileSync(stPath)), 'in.safetensors'));
  const out = join(dir, `out-${input}-${sinkKind}-${workers}-${format}`);
  const mem = memorySink();
  await quantizeCheckpoint({
    input: ck, plan: planAll(ck, format), sink: sinkKind === 'memory' ? mem : await fileSink(out), workers, container,
    poolOptions: { workerUrl: workerUrl() },
  });
  return sinkKind === 'memory' ? mem.bytes() : new Uint8Array(readFileSync(out));
}

async function runs(format: string, container?: Container): Promise<Uint8Array> {
  const outs: Uint8Array[] = [];
  for (const input of ['file', 'buffer'] as const) {
    for (const sink of ['memory', 'file'] as const) for (const workers of [1, 2]) outs.push(await run(input, sink, workers, format, container));
  }
  for (const o of outs.slice(1)) expect(sameBytes(o, outs[0])).toBe(true);
  return outs[0];
}

afterEach(() => {
  expect(liveWorkerThreads()).toBe(0);
});

describe('empty tensors', () => {
  it('buildJobs keeps them whatever the plan, and they claim no input tensor', () => {
    const infos = [
      { name: 'w', dtype: 'F32', shape: [0, 64], offset: 0, byteLength: 0 },
      { name: 'w.scales', dtype: 'F32', shape: [4], offset: 0, byteLength: 16 },
    ];
    const ck = { tensors: infos, tensor: (n: string) => infos.find((t) => t.name === n)! } as unknown as Checkpoint;
    const dropped: string[] = [];
    const jobs = buildJobs(ck, [{ name: 'w', scheme: { format: 'nf4' } }, { name: 'w.scales', scheme: 'keep' }], 1 << 30, 1, new Set(), () => ['w.scales'], (d) => dropped.push(...d));
    expect(jobs.map((j) => [j.info.name, j.out.kind, j.out.byteLength, j.units.length])).toEqual([['w', 'keep', 0, 1], ['w.scales', 'keep', 16, 1]]);
    expect(dropped).toEqual([]);
    expect(() => buildJobs(ck, [{ name: 'w', scheme: { format: 'nf5' } }], 1 << 30, 1)).toThrow(/tensor "w": .*unknown format "nf5"/);
  });

  for (const format of ['nf4', 'int8', 'fp8_e4m3', 'nvfp4', 'q4_0']) {
    it(`safetensors output, planned ${format}: kept as stored, the same bytes with 1 and 2 workers and either sink`, async () => {
      const bytes = await runs(format);
      const g = await openSafetensors(fromBuffer(bytes, 'out.safetensors'));
      for (const name of EMPTY_NAMES) {
        const src = (await openSafetensors(fromPath(stPath))).tensor(name);
        expect(g.tensor(name)).toMatchObject({ dtype: src.dtype, shape: src.shape, byteLength: 0 });
        expect((await g.readRaw(name)).byteLength).toBe(0);
      }
      const quant = JSON.parse(g.metadata['webquant.quantization'] as string);
      expect(Object.keys(quant)).toEqual(['model.layers.0.mlp.down_proj.weight']);
    });
  }

  it('GGUF output, planned q4_k: kept, a type GGUF lacks as F32, and reopened', async () => {
    const bytes = await runs('q4_k', ggufContainer());
    const g = await openGguf(fromBuffer(bytes, 'out.gguf'));
    expect(g.tensor('model.layers.0.mlp.down_proj.weight').dtype).toBe('Q4_K');
    expect(EMPTY_NAMES.map((n) => [g.tensor(n).dtype, g.tensor(n).shape, g.tensor(n).byteLength])).toEqual([
      ['F32', [0, 256], 0], ['BF16', [2 ** 50, 0], 0], ['F32', [0, 256], 0], ['F32', [0], 0],
    ]);
    for (const n of EMPTY_NAMES) expect((await g.readF32(n)).length).toBe(0);
  });

  it('a GGUF input with ne = [0, 1, 1, 1] and an empty Q4_0 tensor, to GGUF', async () => {
    const file = await collect(writeGguf({
      metadata: [{ key: 'general.architecture', type: 'string', value: 'llama' }, { key: 'tokenizer.ggml.scores', type: 'array', itemType: 'f32', value: [0.5, -1] }],
      tensors: [
        { name: 'blk.0.ffn_down.weight', ggmlType: 'F32', shape: [4, 256], data: randomValues(1024, 2) },
        { name: 'blk.0.ffn_up.weight', ggmlType: 'F32', shape: [1, 1, 1, 0], data: EMPTY },
        { name: 'blk.0.attn_k.weight', ggmlType: 'Q4_0', shape: [0, 64], data: EMPTY },
      ],
    }));
    const ck = await openGguf(fromBuffer(file, 'in.gguf'));
    const outs: Uint8Array[] = [];
    for (const workers of [1, 2]) {
      const sink = memorySink();
      await quantizeCheckpoint({ input: ck, plan: planAll(ck, 'q8_0'), sink, workers, container: ggufContainer(), poolOptions: { workerUrl: workerUrl() } });
      outs.push(sink.bytes());
    }
    expect(sameBytes(outs[0], outs[1])).toBe(true);
    const g = await openGguf(fromBuffer(outs[0], 'out.gguf'));
    // In llama-quantize's order: by name within the block.
    expect(g.tensors.map((t) => [t.name, t.dtype, t.ne, t.byteLength])).toEqual([
      ['blk.0.attn_k.weight', 'Q4_0', [64, 0], 0], ['blk.0.ffn_down.weight', 'Q8_0', [256, 4], 4 * 8 * 34], ['blk.0.ffn_up.weight', 'F32', [0, 1, 1, 1], 0],
    ]);
    expect(g.kv).toEqual(ck.kv);
  });
});
