// The pipeline's GPU lane (src/pipeline/gpu-lane.ts) on SwiftShader: a run with the lane writes
// the bytes of the wasm-only run, and so does a run whose device is lost mid-way.
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { openSafetensors } from '../../src/io/safetensors.js';
import { fromBuffer } from '../../src/io/source.js';
import { quantizeCheckpoint, type PlannedTensor, type ProgressEvent, type QuantizeCheckpointOptions } from '../../src/pipeline/pipeline.js';
import { createPool, type PoolTask, type WorkerPool } from '../../src/pipeline/pool.js';
import type { QuantizeOptions } from '../../src/quantize.js';
import type { GpuContext } from '../../src/webgpu/device.js';
import type { Sink } from '../../src/pipeline/sink.js';
import { resetGpu } from '../../src/webgpu/device.js';
import { noteDeviceLost, resetBackendState, setBackendPreference, webgpuEvents, type WebgpuWarning } from '../../src/webgpu/backend.js';
import { gpuHooks } from '../../src/webgpu/run.js';
import { WebquantError } from '../../src/errors.js';
import { buildSafetensors, compiledUrl, f32Bytes, randomValues, sameBytes, type SynthTensor } from '../pipeline/helpers.js';
import { lcg } from '../helpers/data.js';

const ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
const ROW = 256;

/** Small tensors (few rows: SwiftShader runs the soft-float searches slowly) in four layers. */
function model(): Uint8Array {
  const t: SynthTensor[] = [];
  let seed = 3;
  const f32 = (name: string, rows: number) => t.push({ name, dtype: 'F32', shape: [rows, ROW], data: f32Bytes(randomValues(rows * ROW, seed++)) });
  const f16 = (name: string, rows: number) => {
    const v = randomValues(rows * ROW, seed++);
    const h = new Uint16Array(v.length);
    const f = new Float32Array(1), u = new Uint32Array(f.buffer);
    for (let i = 0; i < v.length; i++) { f[0] = v[i]; h[i] = ((u[0] >>> 16) & 0x8000) | ((((u[0] >>> 23) & 0xff) - 112) << 10) | ((u[0] >>> 13) & 0x3ff); }
    t.push({ name, dtype: 'F16', shape: [rows, ROW], data: new Uint8Array(h.buffer) });
  };
  for (let l = 0; l < 4; l++) {
    const p = `model.layers.${l}`;
    t.push({ name: `${p}.input_layernorm.weight`, dtype: 'F32', shape: [ROW], data: f32Bytes(randomValues(ROW, seed++)) });
    f32(`${p}.self_attn.q_proj.weight`, 6);
    f16(`${p}.self_attn.k_proj.weight`, 8);
    f32(`${p}.self_attn.v_proj.weight`, 6);
    f32(`${p}.mlp.up_proj.weight`, 24);
    f32(`${p}.mlp.down_proj.weight`, 8);
  }
  t.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return buildSafetensors(t, { format: 'pt' });
}

// GPU kernels for q4_k, iq4_nl, q6_k (with importances), q8_0; none for fp4 (workers only).
function plan(names: string[]): PlannedTensor[] {
  const fmt: [string, string][] = [['q_proj', 'q4_k'], ['k_proj', 'iq4_nl'], ['v_proj', 'q6_k'], ['up_proj', 'q8_0'], ['down_proj', 'fp4']];
  return names.map((name) => {
    const f = fmt.find(([k]) => name.includes(k));
    return { name, scheme: f ? { format: f[1] } : ('keep' as const) };
  });
}

function importance(names: string[]): Record<string, Float32Array> {
  const u = lcg(17);
  const out: Record<string, Float32Array> = {};
  for (const n of names.filter((x) => /layers\.[13]\..*(q_proj|k_proj|v_proj|down_proj)/.test(x))) out[n] = Float32Array.from({ length: ROW }, () => 3 * u());
  return out;
}

function memorySink(): Sink & { bytes(): Uint8Array } {
  const parts: Uint8Array[] = [];
  return {
    async write(c: Uint8Array) { parts.push(c.slice()); },
    async close() {},
    async abort() { parts.length = 0; },
    bytes: () => Buffer.concat(parts),
  };
}

/** Holds the workers back until the GPU has run `n` dispatches (quantize and metrics chunks) or the lane failed. */
function gpuGate(n: number, onChunk?: (count: number, gpu: GpuContext) => void) {
  let release!: () => void;
  const open = new Promise<void>((r) => { release = r; });
  let count = 0;
  gpuHooks.afterChunk = (_rows, gpu) => {
    count++;
    onChunk?.(count, gpu);
    if (count >= n) release();
  };
  return { open, release, chunks: () => count };
}

/**
 * A run on 2 workers. With a gate the workers start no unit before it opens: on SwiftShader the
 * lane is far slower than wasm and would otherwise get only the first units.
 */
async function runWith(extra: Partial<QuantizeCheckpointOptions>, gate?: ReturnType<typeof gpuGate>) {
  const ck = await openSafetensors(fromBuffer(model(), 'lane.safetensors'));
  const names = ck.tensors.map((t) => t.name);
  const sink = memorySink();
  const events: ProgressEvent[] = [];
  const pool = await createPool({ size: 2, workerUrl: compiledUrl('src/pipeline/worker-node.js') });
  const gated = { size: pool.size, quantize: async (t: PoolTask, o: QuantizeOptions) => { await gate?.open; return pool.quantize(t, o); } };
  try {
    const result = await quantizeCheckpoint({
      input: ck, plan: plan(names), sink, pool: gated as unknown as WorkerPool, importance: importance(names),
      onProgress: (e) => { events.push(e); if (e.type === 'warning') gate?.release(); }, ...extra,
    });
    return { bytes: sink.bytes(), result, events };
  } finally {
    await pool.terminate();
  }
}

if (existsSync(ICD)) {
  describe('pipeline GPU lane on SwiftShader', () => {
    afterEach(() => {
      gpuHooks.afterChunk = undefined;
      resetGpu();
      resetBackendState();
    });

    it('the lane takes units beside the workers and the output is the wasm-only bytes', async () => {
      const wasm = await runWith({ backend: 'wasm-simd' });
      // 16 dispatches: at least 8 units on the GPU, so (in layer order, the workers holding at
      // most two of layer 0) every GPU format of layer 1, whose units carry importances.
      const gate = gpuGate(16);
      const forced = await runWith({ backend: 'webgpu' }, gate);
      expect(gate.chunks()).toBeGreaterThanOrEqual(16);
      expect(sameBytes(wasm.bytes, forced.bytes)).toBe(true);
      expect(forced.events.filter((e) => e.type === 'warning')).toEqual([]);
      // Metrics of lane units equal the workers' up to the order of f64 sums.
      for (const [i, t] of forced.result.tensors.entries()) {
        const w = wasm.result.tensors[i];
        expect(t.name).toBe(w.name);
        if (!w.metrics) continue;
        expect(t.metrics!.maxAbsError, t.name).toBe(w.metrics.maxAbsError);
        expect(t.metrics!.rmse, t.name).toBeCloseTo(w.metrics.rmse, 12);
      }
    });

    it("'auto' adds the lane only for an opted-in GPU (here: emulated adapters allowed); same bytes", async () => {
      const wasm = await runWith({ backend: 'wasm-simd' });
      const none = gpuGate(Infinity);
      none.release();
      expect(sameBytes(wasm.bytes, (await runWith({}, none)).bytes)).toBe(true);
      expect(none.chunks()).toBe(0);
      setBackendPreference('webgpu', { allowCpuEmulated: true });
      const gate = gpuGate(4);
      expect(sameBytes(wasm.bytes, (await runWith({}, gate)).bytes)).toBe(true);
      expect(gate.chunks()).toBeGreaterThanOrEqual(4);
    });

    it('a device lost mid-run: the lane drops out with a warning, its unit is redone on wasm, same bytes', async () => {
      const wasm = await runWith({ backend: 'wasm-simd' });
      // Lost after the 5th dispatch: between a unit's quantization and its metrics pass.
      const gate = gpuGate(Infinity, (count, gpu) => { if (count === 5) gpu.device.destroy(); });
      const lost = await runWith({ backend: 'webgpu' }, gate);
      expect(gate.chunks()).toBe(5);
      expect(sameBytes(wasm.bytes, lost.bytes)).toBe(true);
      const warnings = lost.events.filter((e) => e.type === 'warning');
      expect(warnings.length).toBe(1);
      expect(warnings[0]).toMatchObject({ type: 'warning', kind: 'gpu-lost' });
      expect(lost.result.tensors.map((t) => t.name)).toEqual(wasm.result.tensors.map((t) => t.name));
    });

    it("after a device loss a forced 'webgpu' run is wasm-only with a fallback warning; unknown backends are errors", async () => {
      const wasm = await runWith({ backend: 'wasm-simd' });
      noteDeviceLost('lost by the test');
      const warnings: WebgpuWarning[] = [];
      const on = (ev: Event) => warnings.push((ev as CustomEvent<WebgpuWarning>).detail);
      webgpuEvents.addEventListener('warning', on);
      try {
        const gate = gpuGate(Infinity);
        gate.release();
        expect(sameBytes(wasm.bytes, (await runWith({ backend: 'webgpu' }, gate)).bytes)).toBe(true);
        expect(gate.chunks()).toBe(0);
        expect(warnings.map((w) => w.kind)).toEqual(['fallback']);
      } finally {
        webgpuEvents.removeEventListener('warning', on);
      }
      const e = await runWith({ backend: 'gpu' as never }).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(WebquantError);
      expect((e as WebquantError).code).toBe('E_BAD_BACKEND');
    });
  });
}
