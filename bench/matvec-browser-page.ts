// The page of bench/matvec-browser.ts (bundled by esbuild, run in Chromium): in one browser
// session, webquant's serving matvec (SIMD build, main thread) on the tensors of layer 0 of a
// synthetic GGUF model, and llama.cpp-wasm (@wllama/wllama, one thread, CPU) decoding with that
// model and with the same model with more layers. It only measures; bench/matvec-browser.ts derives
// and prints. Rounds alternate everything (one streamed completion of each model, then every
// webquant matvec), so that the two sides are timed under the same load.
import { configureWasm, loadKernels } from '../src/kernels/loader.js';
import { fromBlob } from '../src/io/source.js';
import { openQuantized, type LoadedTensor } from '../src/serve/index.js';
import { getFormat } from '../src/formats/registry.js';
import { layoutOf } from '../src/formats/types.js';
import type { QuantizedTensor } from '../src/quantize.js';
import { residentKernel, type Resident } from './matvec-resident.js';
import { median, weightData } from './stats.js';

/** What the driver asks for one (format, shape) case. */
export interface CaseRequest {
  /** URLs of the small and the large model (same matrices, `layers[0]` and `layers[1]` layers). */
  models: [string, string];
  /** Layer 0's matrix names; the first is the target shape. */
  tensors: string[];
  /** Tokens generated per completion. */
  tokens: number;
  minRounds: number;
  maxRounds: number;
  /** Stop adding rounds after this long (ms), once minRounds are done. */
  budgetMs: number;
  /** webquant calls of each kernel per round (their median is the round's figure). */
  reps: number;
}

/** Raw timings of one case, per round; milliseconds. */
export interface CaseResult {
  /** llama.cpp's decode step per token (median of the per-token deltas of its own timings), per model. */
  llamaTokenMs: [number[], number[]];
  /** Its prompt processing time (the 2-token prompt), per model, for the record. */
  llamaPromptMs: [number[], number[]];
  /** webquant resident kernel, per tensor of `tensors`, per round: f32 and q8 activations. */
  residentF32Ms: number[][];
  residentQ8Ms: number[][];
  /** openQuantized(...).tensor(target).load() then LoadedTensor.matvec, per round: f32 and q8. */
  apiF32Ms: number[];
  apiQ8Ms: number[];
  /** max |y_api - y_resident| / max |y_resident| for the target, f32 and q8 activations. */
  apiVsResident: [number, number];
  weightBytes: number[];
  userAgent: string;
  crossOriginIsolated: boolean;
  hardwareConcurrency: number;
  loadMs: number;
}

interface Timings { predicted_n: number; predicted_ms: number; prompt_ms: number }
interface WllamaLike {
  loadModel(blobs: Blob[], params: Record<string, unknown>): Promise<void>;
  createCompletion(opts: Record<string, unknown>): Promise<unknown>;
  exit(): Promise<void>;
}
type WllamaCtor = new (paths: Record<string, string>, cfg: Record<string, unknown>) => WllamaLike;

const quiet = { debug() {}, log() {}, info() {}, warn() {}, error: console.error };

configureWasm({ 'wasm-simd': new URL('/build/webquant-simd.wasm', location.href), wasm: new URL('/build/webquant-scalar.wasm', location.href) });

/** One streamed completion; per-token time from llama.cpp's own cumulative timings. */
async function decodeMs(w: WllamaLike, tokens: number): Promise<{ token: number; prompt: number }> {
  const seen = new Map<number, Timings>();
  await w.createCompletion({
    prompt: 'a', max_tokens: tokens, temperature: 0, ignore_eos: true, cache_prompt: false, timings_per_token: true, stream: true,
    onData: (c: { timings?: Timings }) => { if (c.timings) seen.set(c.timings.predicted_n, c.timings); },
  });
  // predicted_ms at n is the time from the first sampled token to the n-th: each difference is one
  // decode step (the graph of one token) plus sampling and the server's loop.
  const deltas: number[] = [];
  for (let n = 2; n <= tokens; n++) {
    const a = seen.get(n - 1), b = seen.get(n);
    if (a && b) deltas.push(b.predicted_ms - a.predicted_ms);
  }
  if (deltas.length < Math.max(1, tokens - 2)) throw new Error(`llama.cpp streamed timings for ${seen.size} of ${tokens} tokens`);
  return { token: median(deltas), prompt: seen.get(1)?.prompt_ms ?? NaN };
}

function asQuantized(t: LoadedTensor): QuantizedTensor {
  const spec = getFormat(t.info.format);
  const options = t.info.options!;
  return {
    format: spec.name, shape: [t.info.rows, t.info.rowLength], data: t.sections[0],
    layout: layoutOf(spec, t.info.rows, t.info.rowLength, options), options, backend: 'wasm-simd',
  };
}

function maxRel(a: Float32Array, b: Float32Array): number {
  let num = 0, den = 0;
  for (let i = 0; i < a.length; i++) { num = Math.max(num, Math.abs(a[i] - b[i])); den = Math.max(den, Math.abs(b[i])); }
  return num / den;
}

function timed(fn: () => unknown): number {
  const t = performance.now();
  fn();
  return performance.now() - t;
}

async function runCase(req: CaseRequest): Promise<CaseResult> {
  const t0 = performance.now();
  const { Wllama } = (await import(/* @vite-ignore */ '/wllama/index.js' as string)) as { Wllama: WllamaCtor };
  const blobs = await Promise.all(req.models.map(async (u) => (await fetch(u)).blob()));
  const llamas: WllamaLike[] = [];
  try {
    for (const b of blobs) {
      const w = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { logger: quiet });
      llamas.push(w);
      // n_threads 1 and no cross-origin isolation: wllama runs llama.cpp without pthreads, CPU only.
      // Flash attention off (wllama's default is llama.cpp's 'auto', which enables it on the CPU): the
      // plain path attends over the KV cells in use only, the least non-matvec work per layer.
      await w.loadModel([b], {
        n_threads: 1, n_gpu_layers: 0, n_ctx: Number(new URL(location.href).searchParams.get('ctx') ?? 128),
        n_batch: 16, n_ubatch: 16, n_parallel: 1, flash_attn: false,
      });
    }
    // webquant: the same GGUF bytes (the small model), read through the public serving API.
    const [f32Model, q8Model] = await Promise.all([
      openQuantized(fromBlob(blobs[0], 'small.gguf'), { backend: 'wasm-simd' }),
      openQuantized(fromBlob(blobs[0], 'small.gguf'), { backend: 'wasm-simd', activations: 'q8' }),
    ]);
    const loaded = await Promise.all(req.tensors.map((n) => f32Model.tensor(n).load()));
    const apiQ8 = await q8Model.tensor(req.tensors[0]).load();
    // One wasm instance per tensor: each resident kernel owns its instance's memory above heapBase.
    const residents: Resident[] = [];
    const xs: Float32Array[] = [];
    for (const [i, t] of loaded.entries()) {
      const x = weightData(t.info.rowLength, 777).map((v) => v * 50);
      const r = residentKernel(await loadKernels('wasm-simd', `bench-resident-${i}`), asQuantized(t), false);
      r.x.set(x);
      residents.push(r);
      xs.push(x);
    }
    const yRes = (q8: boolean) => { residents[0].call(q8); return residents[0].y.slice(); };
    const apiVsResident: [number, number] = [maxRel(loaded[0].matvec(xs[0]), yRes(false)), maxRel(apiQ8.matvec(xs[0]), yRes(true))];
    // warm-up: llama.cpp's first completion and the kernels' first calls (wasm tier-up)
    for (const w of llamas) await decodeMs(w, 4);
    for (let j = 0; j < 3; j++) for (const r of residents) { r.call(false); r.call(true); }
    for (let j = 0; j < 2; j++) { loaded[0].matvec(xs[0]); apiQ8.matvec(xs[0]); }
    const loadMs = performance.now() - t0;

    const out: CaseResult = {
      llamaTokenMs: [[], []], llamaPromptMs: [[], []], residentF32Ms: residents.map(() => []), residentQ8Ms: residents.map(() => []),
      apiF32Ms: [], apiQ8Ms: [], apiVsResident, weightBytes: loaded.map((t) => t.bytes),
      userAgent: navigator.userAgent, crossOriginIsolated: globalThis.crossOriginIsolated === true,
      hardwareConcurrency: navigator.hardwareConcurrency, loadMs,
    };
    const start = performance.now();
    for (let round = 0; round < req.maxRounds && (round < req.minRounds || performance.now() - start < req.budgetMs); round++) {
      for (let m = 0; m < 2; m++) {
        const d = await decodeMs(llamas[m], req.tokens);
        out.llamaTokenMs[m].push(d.token);
        out.llamaPromptMs[m].push(d.prompt);
      }
      residents.forEach((r, i) => {
        out.residentF32Ms[i].push(median(Array.from({ length: req.reps }, () => timed(() => r.call(false)))));
        out.residentQ8Ms[i].push(median(Array.from({ length: req.reps }, () => timed(() => r.call(true)))));
      });
      out.apiF32Ms.push(median(Array.from({ length: req.reps }, () => timed(() => loaded[0].matvec(xs[0])))));
      out.apiQ8Ms.push(median(Array.from({ length: req.reps }, () => timed(() => apiQ8.matvec(xs[0])))));
    }
    return out;
  } finally {
    for (const w of llamas) await w.exit();
  }
}

(globalThis as unknown as { runCase: typeof runCase; ready: boolean }).runCase = runCase;
(globalThis as unknown as { ready: boolean }).ready = true;
