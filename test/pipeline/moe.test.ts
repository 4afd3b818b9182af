// A synthetic DeepSeek-V3-shaped MoE checkpoint (dense layer 0, MoE layers with routed and shared
// experts, a router with its score-correction bias, MLA attention) generated here, quantized end
// to end: experts and projections quantized, router, biases, norms and embeddings kept as stored.
import { describe, expect, it } from 'vitest';
import { quantizeCheckpoint } from '../../src/pipeline/pipeline.js';
import { readableStreamSink } from '../../src/pipeline/sink.js';
import { resolvePlan } from '../../src/plan/plan.js';
import { getPreset } from '../../src/plan/presets.js';
import { detectRole } from '../../src/plan/roles.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { openQuantized } from '../../src/serve/index.js';
import { dequantize, quantize } from '../../src/quantize.js';
import { deepseekMoE } from '../plan/fixtures.js';
import { buildSafetensors, compiledUrl, randomValues, sameBytes, type SynthTensor } from './helpers.js';

function checkpointBytes(): Uint8Array {
  let seed = 3;
  const tensors: SynthTensor[] = deepseekMoE().map((d) => {
    const n = d.shape.reduce((a, b) => a * b, 1);
    const v = randomValues(n, seed++);
    // Stored as F32 (the helper writes F32/F16); the BF16 path is covered by the stories tests.
    return { name: d.name, dtype: 'F32', shape: [...d.shape], data: new Uint8Array(v.buffer) };
  });
  return buildSafetensors(tensors);
}

async function collect(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

describe('DeepSeek-shaped MoE checkpoint', () => {
  for (const preset of ['int4w', 'q4_0']) {
    // llama.cpp's presets quantize token embeddings too; webquant's own keep them.
    it(`${preset}: experts and projections quantized, router / biases / norms kept`, async () => {
      const input = await openCheckpoint(fromBuffer(checkpointBytes(), 'moe.safetensors'));
      const plan = resolvePlan(getPreset(preset).plan, input.tensors.map((t) => ({ name: t.name, shape: t.shape, dtype: t.dtype })));
      expect(plan.ok).toBe(true);
      const { sink, stream } = readableStreamSink();
      const [out] = await Promise.all([
        collect(stream),
        quantizeCheckpoint({ input, plan, sink, workers: 2, poolOptions: { workerUrl: compiledUrl('src/pipeline/worker-node.js') } }),
      ]);
      const q = await openQuantized(fromBuffer(out, `moe-${preset}.safetensors`));
      const seen = { expert: 0, shared_expert: 0, router: 0, norm: 0, quantizedAttention: 0 };
      for (const info of q.tensors) {
        const role = detectRole(info.name).role;
        if (role === 'expert' || role === 'shared_expert' || (role === 'attention' && info.shape.length === 2)) {
          expect(info.quantized, `${info.name} quantized`).toBe(true);
          if (role === 'attention') seen.quantizedAttention++;
          else seen[role]++;
          const ref = await quantize(await input.readF32(info.name), { ...info.options, format: info.format, rowLength: info.rowLength });
          expect(sameBytes(await q.tensor(info.name).dequantize().then((d) => new Uint8Array(d.buffer)), new Uint8Array((await dequantize(ref)).buffer)), info.name).toBe(true);
        } else if (role === 'router' || role === 'norm' || role === 'bias' || (role === 'embedding' && preset === 'int4w')) {
          expect(info.quantized, `${info.name} kept`).toBe(false);
          const raw = await (await openCheckpoint(fromBuffer(out, 'o'))).readRaw(info.name);
          expect(sameBytes(raw, await input.readRaw(info.name)), `${info.name} unchanged`).toBe(true);
          if (role === 'router') seen.router++;
          if (role === 'norm') seen.norm++;
        }
      }
      // 3 MoE layers x 4 routed experts x 3 matrices; 3 shared experts x 3; 2 router tensors each.
      expect(seen.expert).toBe(36);
      expect(seen.shared_expert).toBeGreaterThanOrEqual(9);
      expect(seen.router).toBe(6);
      expect(seen.norm).toBeGreaterThan(8);
      expect(seen.quantizedAttention).toBeGreaterThan(16);
    });
  }
});
