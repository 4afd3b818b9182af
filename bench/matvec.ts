// npm run bench:matvec — single-thread y = W x on quantized weights (assembly/serve), medians.
// GB/s = bytes of quantized weights streamed per second, GFLOP/s = 2 * rows * rowLength / s.
// Shapes are rows x rowLength (4096 x 11008 = a Llama-7B down_proj: 11008 inputs, 4096 outputs).
// Columns: kernel = <fmt>_matvec on weights already in wasm memory (what a server keeps resident);
// api = LoadedTensor.matvec (copies the row sections into wasm in 4 MiB chunks first); scalar = the
// non-SIMD build. In the same run, onnxruntime-web's com.microsoft MatMulNBits (4-bit, wasm backend,
// one thread) on the SAME dequantized weights (int4 group 128 -> block_size 128, q4_0 -> block_size
// 32), accuracy_level 0 (f32 activations, like webquant) and 4 (int8 activations), and
// @wllama/wllama if it can run in Node (it is reported when it cannot, with the reason).
// With workers (second table): the rows of W split into N contiguous slices across N worker_threads
// (bench/matvec-worker.ts, run through tsx's loader), each holding its slice resident in its own wasm
// instance (the same fused SIMD kernel as the kernel column), x broadcast and y gathered through
// SharedArrayBuffers, the workers woken with Atomics; the main thread times the whole call (writing
// x, waking the workers, waiting for all), median of repeated calls, alternating one call of the in-thread
// kernel and of each worker count per round (speedup = median of per-round ratios). Each (case, N) result is checked
// once against the single-thread kernel's y. Formats whose layout has tensor-level sections are skipped.
// With --baseline path/to/webquant-simd.wasm (another build of the kernels, e.g. copied from an
// earlier commit), a third table times that build's <fmt>_matvec against this one's, alternating.
// Options: --formats a,b --shapes 4096x4096,4096x11008 --budget ms --json path --workers 1,2 --baseline wasm
import { quantize, type QuantizeOptions, type QuantizedTensor } from '../src/quantize.js';
import { Kernels } from '../src/kernels/loader.js';
import { readFileSync } from 'node:fs';
import { MATVEC_REL_TOL, Q8_ACTIVATION_FORMATS, servedFromQuantized } from '../src/serve/index.js';
import { serveKernels } from '../src/serve/kernels.js';
import { matMulF32Model, matMulNBitsModel } from './onnx.js';
import { dequantize } from '../src/quantize.js';
import { arg, weightData, median, table, timeIt, writeJson } from './util.js';
import { Worker } from 'node:worker_threads';
import { availableParallelism, loadavg } from 'node:os';
import { hasTensorSections, residentKernel, rowSlice } from './matvec-resident.js';
import type { LoadMessage } from './matvec-worker.js';

const budget = Number(arg('budget', '2500'));
const jsonPath = arg('json', 'bench/results/matvec.json');
const only = arg('formats', '').split(',').filter(Boolean);
const workerCounts = arg('workers', '1,2').split(',').filter(Boolean).map(Number);
const baselinePath = arg('baseline', '');
const shapes = arg('shapes', '4096x4096,4096x11008').split(',').map((s) => s.split('x').map(Number) as [number, number]);

const CASES: { label: string; opts: Omit<QuantizeOptions, 'rowLength'> }[] = [
  { label: 'q8_0', opts: { format: 'q8_0' } },
  { label: 'q4_0', opts: { format: 'q4_0' } },
  { label: 'q4_k', opts: { format: 'q4_k' } },
  { label: 'q6_k', opts: { format: 'q6_k' } },
  { label: 'iq4_nl', opts: { format: 'iq4_nl' } },
  { label: 'nf4 g64', opts: { format: 'nf4' } },
  { label: 'int4 g128', opts: { format: 'int4', groupSize: 128 } },
].filter((c) => !only.length || only.includes(c.opts.format));

/**
 * The fused kernel on weights resident in the serving instance's memory. Every resident() and
 * every LoadedTensor call of the same instance writes from its heap base, so a resident kernel is
 * valid only until the next one (or an api call) in that instance: make it again before reuse.
 */
function resident(k: Kernels, qt: QuantizedTensor, x: Float32Array, q8 = false): () => Float32Array {
  const R = residentKernel(k, qt, q8);
  R.x.set(x);
  return () => {
    R.call();
    return R.y.slice();
  };
}

// ---- worker pool ----------------------------------------------------------------------------------
const pool: Worker[] = [];
async function startWorkers(n: number): Promise<void> {
  while (pool.length < n) {
    const w = new Worker(new URL('./matvec-worker-boot.mjs', import.meta.url), { workerData: { entry: new URL('./matvec-worker.ts', import.meta.url).href } });
    await new Promise<void>((res, rej) => { w.once('message', () => res()); w.once('error', rej); });
    pool.push(w);
  }
}

/** Loads row slices of qt into workers first..first+n-1; returns a synchronous y = W x call and a release. */
async function workerMatvec(qt: QuantizedTensor, n: number, first: number): Promise<{ call: (x: Float32Array) => Float32Array; release: () => void; last: () => { busyMs: number[]; spanMs: number } }> {
  await startWorkers(first + n);
  const [rows, rowLen] = qt.shape;
  const xSab = new SharedArrayBuffer(rowLen * 4);
  const ySab = new SharedArrayBuffer(rows * 4);
  const ctrlSab = new SharedArrayBuffer(16);
  const ctrl = new Int32Array(ctrlSab);
  const timesSab = new SharedArrayBuffer(16 * n);
  const times = new Float64Array(timesSab);
  const xs = new Float32Array(xSab);
  const ys = new Float32Array(ySab);
  await Promise.all(Array.from({ length: n }, (_, i) => {
    const r0 = Math.floor((i * rows) / n), r1 = Math.floor(((i + 1) * rows) / n);
    const slice = rowSlice(qt, r0, r1);
    const msg: LoadMessage = { qt: slice, r0, x: xSab, y: ySab, ctrl: ctrlSab, workers: n, times: timesSab, index: i };
    const w = pool[first + i];
    return new Promise<void>((res, rej) => {
      w.once('error', rej);
      w.once('message', () => { w.off('error', rej); res(); });
      w.postMessage(msg, [slice.data.buffer as ArrayBuffer]);
    });
  }));
  const kick = () => {
    Atomics.store(ctrl, 1, 0);
    Atomics.add(ctrl, 0, 1);
    Atomics.notify(ctrl, 0);
    for (let v = Atomics.load(ctrl, 1); v < n; v = Atomics.load(ctrl, 1)) {
      // a worker that died would otherwise leave the main thread blocked here for good
      if (Atomics.wait(ctrl, 1, v, 60_000) === 'timed-out') throw new Error(`matvec workers: ${n - Atomics.load(ctrl, 1)} of ${n} did not answer within 60 s`);
    }
  };
  return {
    call(x) {
      xs.set(x);
      kick();
      return ys;
    },
    /** The last call as the workers saw it: each one's busy time, and first start to last end. */
    last() {
      const busyMs = Array.from({ length: n }, (_, i) => times[2 * i + 1] - times[2 * i]);
      let s = Infinity, e = -Infinity;
      for (let i = 0; i < n; i++) { s = Math.min(s, times[2 * i]); e = Math.max(e, times[2 * i + 1]); }
      return { busyMs, spanMs: e - s };
    },
    release() {
      Atomics.store(ctrl, 2, 1);
      kick();
    },
  };
}

/** 4-bit codes (value (q - 8) * scale) of a q4_0 or int4 tensor in MatMulNBits order, with f32 scales. */
function toNBits(qt: QuantizedTensor): { packed: Uint8Array; scales: Float32Array; block: number } | undefined {
  const [rows, K] = qt.shape;
  if (qt.format === 'q4_0') {
    const nb = K / 32;
    const packed = new Uint8Array(rows * K / 2);
    const scales = new Float32Array(rows * nb);
    const dv = new DataView(qt.data.buffer, qt.data.byteOffset, qt.data.byteLength);
    const h = new Float32Array(1);
    for (let b = 0; b < rows * nb; b++) {
      const blk = b * 18;
      scales[b] = f16(dv.getUint16(blk, true), h);
      const q = new Uint8Array(32);
      for (let j = 0; j < 16; j++) { const v = qt.data[blk + 2 + j]; q[j] = v & 15; q[j + 16] = v >> 4; }
      for (let j = 0; j < 16; j++) packed[b * 16 + j] = q[2 * j] | (q[2 * j + 1] << 4);
    }
    return { packed, scales, block: 32 };
  }
  if (qt.format === 'int4' && qt.options.granularity === 'group') {
    const codes = qt.data.subarray(0, rows * K / 2);
    const packed = new Uint8Array(codes.length);
    // signed two's complement nibble c in [-7, 7] -> unsigned c + 8
    for (let i = 0; i < codes.length; i++) packed[i] = (((codes[i] & 15) ^ 8) | ((((codes[i] >> 4) & 15) ^ 8) << 4));
    const s = qt.layout.sections[1];
    const scales = new Float32Array(qt.data.slice(s.offset, s.offset + s.bytes).buffer);
    return { packed, scales, block: qt.options.groupSize };
  }
  return undefined;
}

function f16(h: number, tmp: Float32Array): number {
  const e = (h >> 10) & 31, m = h & 1023, s = h & 0x8000 ? -1 : 1;
  tmp[0] = e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
  return tmp[0];
}

// ---- onnxruntime-web and wllama availability ----------------------------------------------------
type Ort = typeof import('onnxruntime-web');
let ort: Ort | undefined;
let ortWhy = '';
try {
  ort = await import('onnxruntime-web');
  ort.env.wasm.numThreads = 1;
  ort.env.logLevel = 'error';
} catch (e) {
  ortWhy = `onnxruntime-web could not be loaded: ${(e as Error).message}`;
}

let wllamaWhy = '';
try {
  // A computed specifier: the package ships TypeScript sources that do not type-check under NodeNext.
  const wllamaPkg = '@wllama/wllama';
  const m = (await import(wllamaPkg)) as unknown as { Wllama: new (paths: Record<string, string>) => unknown };
  try {
    new m.Wllama({ 'single-thread/wllama.wasm': new URL('../node_modules/@wllama/wllama/esm/wasm/wllama.wasm', import.meta.url).href });
    wllamaWhy = 'constructed, but wllama only runs whole GGUF models (no single-matmul entry point) inside a Web Worker, '
      + `and Node has ${typeof (globalThis as { Worker?: unknown }).Worker === 'function' ? 'a' : 'no'} global Web Worker`;
  } catch (e) {
    wllamaWhy = `@wllama/wllama cannot run in Node ${process.version}: its constructor throws "${(e as Error).message}" `
      + '(it needs a browser storage backend: OPFS / Cache API), and it runs llama.cpp in a Web Worker, which Node does not provide '
      + `(globalThis.Worker is ${typeof (globalThis as { Worker?: unknown }).Worker}); it also exposes whole-model inference only, no single matmul`;
  }
} catch (e) {
  wllamaWhy = `@wllama/wllama is not installed / cannot be imported: ${(e as Error).message}`;
}

const simd = await serveKernels('wasm-simd');
let baseline: Kernels | undefined;
if (baselinePath) {
  const inst = await WebAssembly.instantiate(await WebAssembly.compile(readFileSync(baselinePath)), {
    env: { abort: () => { throw new Error(`${baselinePath}: wasm abort`); } },
  });
  baseline = new Kernels('wasm-simd', inst.exports as Record<string, unknown>);
}
const baselineRows: (string | number)[][] = [];
const scalar = await serveKernels('wasm');
const rowsOut: (string | number)[][] = [];
const workerRows: (string | number)[][] = [];
const workerNotes: string[] = [];
const results: Record<string, unknown>[] = [];

for (const [rows, rowLen] of shapes) {
  const w = weightData(rows * rowLen, 12345 + rows + rowLen);
  const x = weightData(rowLen, 777).map((v) => v * 50);
  const flop = 2 * rows * rowLen;
  for (const c of CASES) {
    const qt = await quantize(w, { ...c.opts, rowLength: rowLen });
    const bytes = qt.layout.bytes;
    const runS = resident(simd, qt, x);
    const tKernel = await timeIt(runS, 25, budget, 5);
    const yS = runS();
    // int8 activations (GGUF integer-code formats): speed, and error against the f32-activation result
    const hasQ8 = Q8_ACTIVATION_FORMATS.includes(qt.format);
    let tQ8 = NaN;
    let q8Err = NaN;
    if (hasQ8) {
      const runQ = resident(simd, qt, x, true);
      tQ8 = await timeIt(runQ, 25, budget, 5);
      const yq = runQ();
      let num = 0, den = 0;
      for (let i = 0; i < rows; i++) { num = Math.max(num, Math.abs(yq[i] - yS[i])); den = Math.max(den, Math.abs(yS[i])); }
      q8Err = num / den;
    }
    const runC = resident(scalar, qt, x);
    const tScalar = await timeIt(runC, 9, budget, 3);
    const api = await servedFromQuantized(qt, { backend: 'wasm-simd' });
    const tApi = await timeIt(() => api.matvec(x), 15, budget, 3);
    // the q8 kernel and the api call above overwrote runS's buffers in the same instance: reload
    // (the alternating rounds below time this one), and check that it still gives yS
    const runK = resident(simd, qt, x);
    if (!runK().every((v, i) => Object.is(v, yS[i]))) throw new Error(`${c.label}: the reloaded resident kernel does not reproduce its first result`);
    let baselineResult: Record<string, number> | undefined;
    if (baseline) {
      // the other build in its own instance, alternating with this one; y compared relative to max|y|
      const runB = resident(baseline, qt, x);
      const yB = runB();
      let num = 0, den = 0;
      for (let i = 0; i < rows; i++) { num = Math.max(num, Math.abs(yB[i] - yS[i])); den = Math.max(den, Math.abs(yS[i])); }
      const tb: number[] = [], tk: number[] = [];
      const t0 = performance.now();
      while (tb.length < 25 && (tb.length < 5 || performance.now() - t0 < 2 * budget)) {
        let a = performance.now(); runB(); tb.push(performance.now() - a);
        a = performance.now(); runK(); tk.push(performance.now() - a);
      }
      const sB = median(tb) / 1e3, sK = median(tk) / 1e3, ratio = median(tb.map((t, i) => t / tk[i]));
      baselineResult = { s: sB, gflops: flop / sB / 1e9, thisS: sK, speedup: ratio, maxRelDiff: num / den };
      baselineRows.push([`${rows}x${rowLen}`, c.label, sB * 1e3, bytes / sB / 1e9, flop / sB / 1e9, sK * 1e3, bytes / sK / 1e9, flop / sK / 1e9, ratio, (num / den).toExponential(1)]);
    }
    const r: Record<string, unknown> = {
      shape: `${rows}x${rowLen}`, format: c.label, weightBytes: bytes,
      kernelS: tKernel, scalarS: tScalar, apiS: tApi, q8ActS: tQ8, q8ActMaxRelErr: q8Err,
      kernelGBs: bytes / tKernel / 1e9, kernelGflops: flop / tKernel / 1e9,
      scalarGBs: bytes / tScalar / 1e9, apiGBs: bytes / tApi / 1e9, baseline: baselineResult,
    };
    let ortCells: (string | number)[] = ['-', '-', '-', '-'];
    const nb = toNBits(qt);
    if (ort) {
      // webquant and the ORT variants timed in alternation (one of each per round), so that the
      // ratios compare runs taken under the same machine load; ratio = median of per-round ratios.
      // The plain f32 MatMul of the dequantized matrix runs for every format, MatMulNBits only for
      // the formats with a 4-bit MatMulNBits equivalent (q4_0, int4 groups).
      const feeds = { A: new ort.Tensor('float32', x, [1, rowLen]) };
      const sessions: (import('onnxruntime-web').InferenceSession | undefined)[] = [];
      let maxRel = NaN;
      for (const level of [0, 4, -1]) {
        if (level >= 0 && !nb) { sessions.push(undefined); continue; }
        try {
          let model: Uint8Array;
          if (level >= 0 && nb) model = matMulNBitsModel(1, rowLen, rows, nb.block, nb.packed, nb.scales, level);
          else {
            // the same weights dequantized, transposed to [K, N] for a plain f32 MatMul
            const deq = await dequantize(qt);
            const bt = new Float32Array(deq.length);
            for (let n = 0; n < rows; n++) for (let kk = 0; kk < rowLen; kk++) bt[kk * rows + n] = deq[n * rowLen + kk];
            model = matMulF32Model(1, rowLen, rows, bt);
          }
          const sess = await ort.InferenceSession.create(model, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
          const out = (await sess.run(feeds)).Y.data as Float32Array;
          let num = 0, den = 0;
          for (let i = 0; i < rows; i++) { num = Math.max(num, Math.abs(out[i] - yS[i])); den = Math.max(den, Math.abs(yS[i])); }
          r[level >= 0 ? `ortLevel${level}MaxRelDiff` : 'ortF32MaxRelDiff'] = num / den;
          if (level === 0) maxRel = num / den;
          sessions.push(sess);
        } catch (e) {
          r[level >= 0 ? `ortLevel${level}Error` : 'ortF32Error'] = (e as Error).message;
          sessions.push(undefined);
        }
      }
      const times: number[][] = [[], [], [], []];
      const t0 = performance.now();
      while (times[0].length < 25 && (times[0].length < 5 || performance.now() - t0 < 3 * budget)) {
        let a = performance.now(); runK(); times[0].push(performance.now() - a);
        for (let j = 0; j < 3; j++) {
          const sess = sessions[j];
          if (!sess) { times[j + 1].push(NaN); continue; }
          a = performance.now(); await sess.run(feeds); times[j + 1].push(performance.now() - a);
        }
      }
      for (const sess of sessions) await sess?.release();
      const ratio = (j: number) => median(times[j].map((t, i) => t / times[0][i]));
      const ortS = [median(times[1]) / 1e3, median(times[2]) / 1e3, median(times[3]) / 1e3];
      r.ortLevel0S = ortS[0];
      r.ortLevel4S = ortS[1];
      r.ortF32MatMulS = ortS[2];
      r.kernelInterleavedS = median(times[0]) / 1e3;
      r.ortOverWebquant = { acc0: ratio(1), acc4: ratio(2), f32MatMul: ratio(3) };
      r.ortMaxRelDiff = maxRel;
      const fmt = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : '-');
      ortCells = [bytes / ortS[0] / 1e9, bytes / ortS[1] / 1e9, flop / ortS[2] / 1e9, `${fmt(ratio(1))} / ${fmt(ratio(2))} / ${fmt(ratio(3))}`];
    }
    // ---- with workers: rows split across N worker_threads, each slice resident in its own instance
    if (workerCounts.length && hasTensorSections(qt)) {
      workerNotes.push(`${rows}x${rowLen} ${c.label}: skipped (tensor-level sections: ${qt.layout.sections.filter((s) => s.perRow === 0).map((s) => s.name).join(', ')})`);
    } else if (workerCounts.length) {
      // check tolerance: two results of the fused kernel each within MATVEC_REL_TOL * sum_j |w_ij x_j| of the
      // f64 dot with the dequantized row, so within twice that of each other
      const deq = await dequantize(qt);
      const absDot = new Float64Array(rows);
      for (let i = 0; i < rows; i++) { let a = 0; for (let j = 0; j < rowLen; j++) a += Math.abs(deq[i * rowLen + j] * x[j]); absDot[i] = a; }
      const wr: Record<string, unknown>[] = [];
      // one set of workers per count (sum(workerCounts) threads, idle ones blocked in Atomics.wait), so
      // that the in-thread kernel and every count are timed in alternation, one call of each per round
      const wms: Awaited<ReturnType<typeof workerMatvec>>[] = [];
      let first = 0;
      for (const n of workerCounts) { wms.push(await workerMatvec(qt, n, first)); first += n; }
      const checks = wms.map((wm) => {
        const y = wm.call(x).slice();
        let maxAbs = 0, worst = 0, equal = 0;
        for (let i = 0; i < rows; i++) {
          const d = Math.abs(y[i] - yS[i]);
          maxAbs = Math.max(maxAbs, d);
          worst = Math.max(worst, d / (2 * MATVEC_REL_TOL * absDot[i]));
          if (y[i] === yS[i]) equal++;
        }
        for (let j = 0; j < 5; j++) wm.call(x); // warm-up: the workers' wasm tiers up
        return { maxAbs, worst, equal, ok: worst <= 1 };
      });
      // One measurement: the in-thread kernel and each worker count in alternation, one call of each
      // per round. Per call, as the workers saw it: the slowest worker's busy time and first start to
      // last end; and the process CPU time of the call (the main thread sleeps in Atomics.wait
      // meanwhile, so this is the workers' CPU time): about N x the call's time when the N workers
      // really ran on N cores, about 1 x when they shared one core (their busy times then stretch).
      const measure = () => {
        const m = { times: [[], ...wms.map(() => [])] as number[][], busy: wms.map(() => [] as number[]), span: wms.map(() => [] as number[]), cpu: wms.map(() => [] as number[]) };
        const t0 = performance.now();
        while (m.times[0].length < 25 && (m.times[0].length < 5 || performance.now() - t0 < budget * (1 + wms.length))) {
          let a = performance.now(); runK(); m.times[0].push(performance.now() - a);
          wms.forEach((wm, j) => {
            const c0 = process.cpuUsage();
            a = performance.now(); wm.call(x); m.times[j + 1].push(performance.now() - a);
            const c = process.cpuUsage(c0);
            m.cpu[j].push((c.user + c.system) / 1e3);
            const l = wm.last();
            m.busy[j].push(Math.max(...l.busyMs));
            m.span[j].push(l.spanMs);
          });
        }
        // cores used per count, relative to the count: 1 = every worker had a core of its own
        const share = Math.min(...workerCounts.map((n, j) => median(m.cpu[j].map((c, i) => c / m.times[j + 1][i])) / n));
        return { ...m, share };
      };
      // Other processes' load can leave the N workers fewer than N cores (they then take turns and
      // N workers run no faster than one): measure again, up to 3 times, 2 s apart, while some count
      // got under 75% of its cores; keep the attempt with the largest share, and say so.
      let best = measure();
      let attempts = 1;
      while (best.share < 0.75 && attempts < 3) {
        await new Promise((res) => setTimeout(res, 2000));
        const m = measure();
        attempts++;
        if (m.share > best.share) best = m;
      }
      const { times, busy, span, cpu } = best;
      for (const wm of wms) wm.release();
      const i1 = workerCounts.indexOf(1);
      const tIn = median(times[0]) / 1e3;
      workerCounts.forEach((n, j) => {
        const tW = median(times[j + 1]) / 1e3;
        const speedup = i1 >= 0 ? median(times[j + 1].map((t, i) => times[i1 + 1][i] / t)) : NaN;
        const { maxAbs, worst, equal, ok } = checks[j];
        const busyMs = median(busy[j]), spanMs = median(span[j]), cores = median(cpu[j].map((c, i) => c / times[j + 1][i]));
        wr.push({ workers: n, s: tW, busyMaxMs: busyMs, spanMs, coresUsed: cores, attempts, GBs: bytes / tW / 1e9, gflops: flop / tW / 1e9, speedupVs1: speedup, inThreadS: tIn, maxAbsDiffVsKernel: maxAbs, worstOverTol: worst, bitEqualRows: equal, withinTol: ok });
        workerRows.push([`${rows}x${rowLen}`, c.label, String(n), tW * 1e3, bytes / tW / 1e9, flop / tW / 1e9, Number.isFinite(speedup) ? speedup : '-', busyMs, spanMs, cores, tIn * 1e3, bytes / tIn / 1e9,
          (ok ? `ok (${equal}/${rows} bit-equal)` : `FAIL (worst ${worst.toExponential(1)} x tol)`)
          + (attempts > 1 ? `, ${attempts} attempts` : '') + (cores < 0.75 * n ? ', load-limited' : '')]);
        if (!ok) process.exitCode = 1;
      });
      r.workers = wr;
    }
    results.push(r);
    rowsOut.push([`${rows}x${rowLen}`, c.label, (bytes / 2 ** 20).toFixed(1), tKernel * 1e3, bytes / tKernel / 1e9, flop / tKernel / 1e9,
      hasQ8 ? bytes / tQ8 / 1e9 : '-', hasQ8 ? flop / tQ8 / 1e9 : '-', hasQ8 ? q8Err.toExponential(1) : '-',
      bytes / tScalar / 1e9, bytes / tApi / 1e9, ...ortCells]);
    console.error(`${rows}x${rowLen} ${c.label} done`);
  }
}

console.log(`\nwebquant serving matvec, single thread, Node ${process.version}, medians (budget ${budget} ms per cell).`);
console.log('GB/s = quantized weight bytes streamed per second; GFLOP/s = 2*rows*rowLength per second; kernel: x in f32;');
console.log("q8-act: activations: 'q8' (x quantized to int8 per 32), err = max|y_q8 - y_f32| / max|y_f32|.");
console.log('ORT = onnxruntime-web (wasm, 1 thread) on the same weights: MatMulNBits 4-bit at accuracy_level 0 / 4, and a plain f32 MatMul of the dequantized matrix;');
console.log('ratio = median over alternating rounds of ORT time / webquant kernel time (>1: webquant faster).\n');
console.log(table(['shape', 'format', 'MiB', 'kernel ms', 'kernel GB/s', 'GFLOP/s', 'q8-act GB/s', 'q8-act GFLOP/s', 'q8-act err', 'scalar GB/s', 'api GB/s', 'ORT acc0 GB/s', 'ORT acc4 GB/s', 'ORT f32 MatMul GFLOP/s', 'ORT/webquant acc0 / acc4 / f32'], rowsOut));
console.log(`\nwebquant serving matvec with workers: rows split across N worker_threads (SIMD build), each with its row slice resident in its own wasm instance;`);
console.log('x / y in SharedArrayBuffers, workers woken with Atomics; time = whole call on the main thread (write x, wake, wait for all), medians;');
console.log('the in-thread kernel (no worker) and each worker count are timed in alternation, one call of each per round; speedup = median over rounds');
console.log(`of 1-worker time / N-worker time; busy = the slowest worker's own time in the kernel call, span = first worker start
to last worker end, cores used = process CPU time / call time (about N: the N workers ran in parallel; about 1: they
shared one core, each one's busy time stretched; re-measured up to 3 times while under 0.75 N, 'load-limited' if still); check = y vs the single-thread kernel's y within 2*MATVEC_REL_TOL*sum|w x|. ${availableParallelism()} CPUs,\n`
  + `load average ${loadavg().map((l) => l.toFixed(2)).join(' ')} at the end (N workers only scale with N idle cores; other processes' load lowers the N > 1 speedups).\n`);
console.log(table(['shape', 'format', 'workers', 'ms', 'GB/s', 'GFLOP/s', 'speedup vs 1', 'busy ms', 'span ms', 'cores used', 'in-thread ms', 'in-thread GB/s', 'check'], workerRows));
for (const note of workerNotes) console.log(note);
if (baseline) {
  console.log(`\nbaseline ${baselinePath} vs this build, f32 activations, single thread, alternating rounds; speedup = median of per-round`);
  console.log('baseline time / this build time; diff = max|y_baseline - y| / max|y|.\n');
  console.log(table(['shape', 'format', 'baseline ms', 'GB/s', 'GFLOP/s', 'this build ms', 'GB/s', 'GFLOP/s', 'speedup', 'diff'], baselineRows));
}
console.log(`\nonnxruntime-web: ${ort ? `ran (version ${ort.env.versions?.common ?? '?'}), wasm backend, numThreads 1` : ortWhy}`);
console.log(`@wllama/wllama: ${wllamaWhy}`);
for (const w of pool) await w.terminate();
writeJson(jsonPath, { date: new Date().toISOString(), node: process.version, budgetMs: budget, cpus: availableParallelism(), loadavg: loadavg(), workerCounts, workerNotes, results, wllama: wllamaWhy, ort: ort ? 'ran' : ortWhy });
console.log(`\nwritten ${jsonPath}`);
