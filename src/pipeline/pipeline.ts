// The streaming pipeline: reads a checkpoint tensor by tensor in layer order, quantizes on a pool
// of workers and writes the output container in order as results arrive.
//
// Memory: every unit of work reserves the bytes it holds on its way, its input plus its output
// (less what a worker reads from a file into wasm memory or writes itself, see worker-io.ts),
// before it is read and releases them once written; reading waits while the reservation would
// exceed maxInFlightBytes (a unit larger than the budget runs alone). A tensor larger than the
// budget is cut into chunks of whole rows, each quantized by its own call: row sections are rows
// back to back, so the chunks' parts concatenated per section give the bytes of one call over the
// whole tensor; constant tensor sections (bitsandbytes' quant state) are written here once. A
// layout with tensor-level sections computed from the values (a per-tensor scale, double
// quantization: what `prepare` and `finish` compute) needs the whole tensor's calibration: where
// the workers read the tensor themselves chunk by chunk, one worker computes it first
// (prepareOnly) and the chunks are slices that share it, the first slice bringing the tensor
// sections; elsewhere such a tensor runs whole, alone. With several row sections, the first section
// streams out chunk by chunk and the others (block scales: a small fraction) are held until the
// last chunk. Row chunks need ranged reads (see RowReader); without one the whole tensor is read
// and only the quantization is chunked.
//
// Worker I/O (worker-io.ts): where the input allows, workers read their units' values themselves;
// otherwise this thread reads them (one read after another) and transfers them. Where the sink is
// a file that workers can write, they also write their results at their offsets, and this thread
// writes the rest (header, kept tensors, padding) at theirs instead of appending.
//
// Metrics of a chunked tensor are combined from its chunks: rmse, maxAbsError, count and sqnrDb
// exactly, cosine as the element-weighted mean of the chunks' cosines (an approximation).
import { ErrorCodes, WebquantError } from '../errors.js';
import type { ErrorMetrics } from '../metrics.js';
import type { QuantizedTensor, QuantizeOptions, TensorBackend } from '../quantize.js';
import { constantSections } from '../formats/types.js';
import type { Checkpoint, TensorValues } from '../io/checkpoint.js';
import { sourceRefs, streamedTensors, workerIo, type Route } from './worker-io.js';
import { bringsTensorSections, buildJobs, combineMetrics, decodeMetrics, encodeMetrics, rowBytes, valuesDtype, type PlanInput, type RowReader, type Unit, type UnitResult } from './jobs.js';
import { abortedError, createPool, type PoolOptions, type WorkerPool } from './pool.js';
import { runKey, type ResumeStore } from './cache.js';
import { safetensorsContainer, type Container, type ContainerPlan, type OutputTensor } from './container.js';
import { ProgressLog, type ProgressEvent, type TensorProgress } from './progress.js';
import type { Sink } from './sink.js';
import { withGpuLane } from './gpu-lane.js';
import { sharedScales } from './shared-scales.js';

export type { ProgressEvent, TensorProgress, LayerProgress } from './progress.js';
export type { PlannedTensor, PlanInput, RowReader } from './jobs.js';

export interface QuantizeCheckpointOptions {
  input: Checkpoint;
  /** Tensors the plan does not name are copied unchanged. A plan with errors is refused. */
  plan: PlanInput;
  sink: Sink;
  /** Output layout; safetensors by default. */
  container?: Container;
  /** A pool to use (left running afterwards); otherwise one is created and terminated. */
  pool?: WorkerPool;
  /** Size of the pool created when `pool` is not given (default: number of cores). */
  workers?: number;
  poolOptions?: Omit<PoolOptions, 'size'>;
  /** Input plus output bytes of the work between reading and writing (default 256 MiB). */
  maxInFlightBytes?: number;
  signal?: AbortSignal;
  onProgress?: (e: ProgressEvent) => void;
  /** Compute error metrics per tensor (default true). */
  metrics?: boolean;
  /**
   * Per-column importance (imatrix) by tensor name: one vector of the row length, or for a
   * [matrices, rows, cols] tensor (stacked MoE experts) one per matrix, back to back.
   */
  importance?: Record<string, Float32Array>;
  /** Stores finished units so that a restarted run resumes (see cache-node.ts, cache-browser.ts). */
  resume?: ResumeStore;
  /** Keep the resume data after a successful run (default: cleared). */
  keepResumeData?: boolean;
  /** Input file size for the resume key (default: the end of the last tensor). */
  inputSize?: number;
  /** Ranged reads for row chunks; defaults to the checkpoint's readRows when it has one. */
  readRows?: RowReader;
  /**
   * A GPU lane beside the workers (gpu-lane.ts): 'auto' (default) adds one when quantize() would
   * pick the GPU (see preferGpu), 'webgpu' always (an error without a device), a wasm build never.
   * The output bytes are the same either way.
   */
  backend?: TensorBackend;
  /** Let 'auto' use a real (not CPU-emulated) GPU (as quantize()'s preferGpu). */
  preferGpu?: boolean;
  /**
   * Let workers read their input and write their output themselves where the input and the sink
   * allow (default true; see the top of pipeline.ts). An explicit `readRows` or a GPU lane (which
   * quantizes on this thread) keeps reads and writes here.
   */
  workerIo?: boolean;
}

export interface TensorReport {
  name: string;
  format: string;
  bytes: number;
  outputBytes: number;
  cached: boolean;
  chunks: number;
  metrics?: ErrorMetrics;
}

export interface PipelineResult {
  tensors: TensorReport[];
  bytesWritten: number;
  elapsedMs: number;
  /** Units taken from the resume cache. */
  resumedUnits: number;
  /** Most input + output bytes held between reading and writing at any time. */
  peakInFlightBytes: number;
}

export interface PipelineRun extends PromiseLike<PipelineResult>, AsyncIterable<ProgressEvent> {
  readonly done: Promise<PipelineResult>;
}

export const DEFAULT_MAX_IN_FLIGHT = 256 << 20;

function now(): number {
  return typeof performance !== 'undefined' ? performance.now() : Date.now();
}

/** Bytes reserved between reading and writing; waiters resume in order. */
class Budget {
  private used = 0;
  /** Most bytes ever reserved at once (reported, and checked by the tests). */
  peak = 0;
  private waiters: (() => void)[] = [];
  constructor(private readonly max: number) {}

  async acquire(n: number, signal: AbortSignal): Promise<void> {
    while (!(this.used === 0 || this.used + n <= this.max)) {
      if (signal.aborted) throw signal.reason;
      await new Promise<void>((resolve) => {
        const done = () => { signal.removeEventListener('abort', done); resolve(); };
        this.waiters.push(done);
        signal.addEventListener('abort', done, { once: true });
      });
    }
    if (signal.aborted) throw signal.reason;
    this.used += n;
    this.peak = Math.max(this.peak, this.used);
  }

  release(n: number): void {
    this.used -= n;
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
}

function deferred<T>() {
  let resolve!: (v: T) => void, reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => { resolve = res; reject = rej; });
  promise.catch(() => undefined); // rejections are observed by the writer, or are moot after a failure
  return { promise, resolve, reject };
}


function defaultRowReader(input: Checkpoint): RowReader | undefined {
  const r = (input as { readRows?: (name: string, firstRow: number, rows: number) => Promise<TensorValues> }).readRows;
  return r ? (info, r0, n) => r.call(input, info.name, r0, n) : undefined;
}

/**
 * What quantizeCheckpoint would write, without reading or quantizing a tensor: the output tensors
 * in the order they are written and the container's layout (sizes, a split output's files).
 */
export function planOutput(input: Checkpoint, plan: PlanInput, container: Container = safetensorsContainer()): { tensors: OutputTensor[]; layout: ContainerPlan } {
  const jobs = buildJobs(input, plan, Number.MAX_SAFE_INTEGER, 1, new Set(), container.claims, undefined, undefined, container.order?.(input));
  const tensors = jobs.map((j) => j.out);
  return { tensors, layout: container.plan(tensors, input) };
}

export function quantizeCheckpoint(opts: QuantizeCheckpointOptions): PipelineRun {
  const log = new ProgressLog();
  const done = run(opts, (e) => {
    log.push(e);
    opts.onProgress?.(e);
  }).then(
    (r) => { log.finish(); return r; },
    (e) => { log.finish(e); throw e; },
  );
  done.catch(() => undefined); // a caller that only iterates must not see an unhandled rejection
  return {
    done,
    then: (a, b) => done.then(a, b),
    [Symbol.asyncIterator]: () => log[Symbol.asyncIterator](),
  };
}

async function run(opts: QuantizeCheckpointOptions, emit: (e: ProgressEvent) => void): Promise<PipelineResult> {
  const t0 = now();
  const { input, sink } = opts;
  const ctl = new AbortController();
  const onUserAbort = () => ctl.abort(abortedError(`quantizing ${input.source}`, opts.signal?.reason));
  if (opts.signal?.aborted) onUserAbort();
  opts.signal?.addEventListener('abort', onUserAbort, { once: true });
  let pool = opts.pool;
  const ownPool = !pool;
  try {
    if (ctl.signal.aborted) throw ctl.signal.reason;
    const budgetBytes = opts.maxInFlightBytes ?? DEFAULT_MAX_IN_FLIGHT;
    if (!(budgetBytes > 0)) {
      throw new WebquantError(ErrorCodes.BAD_OPTION, `[pipeline] maxInFlightBytes must be positive but got ${budgetBytes}`, { option: 'maxInFlightBytes', value: budgetBytes, expected: '> 0' });
    }
    // Creating a pool starts no worker yet: plan errors below still cost nothing.
    pool ??= await createPool({ ...opts.poolOptions, size: opts.workers });
    const shapes = new Map(input.tensors.map((t) => [t.name, t.shape]));
    const perMatrix = new Set(Object.entries(opts.importance ?? {}).filter(([name, v]) => {
      const shape = shapes.get(name);
      return shape?.length === 3 && shape[0] > 1 && v.length === shape[0] * shape[2];
    }).map(([name]) => name));
    const container = opts.container ?? safetensorsContainer();
    const lanes = await withGpuLane(pool, { backend: opts.backend, preferGpu: opts.preferGpu, emit });
    // The GPU lane quantizes on this thread: it needs the values here and gives its bytes here.
    const ownIo = (opts.workerIo ?? true) && lanes === pool;
    const reads = ownIo && !opts.readRows;
    const refOf = sourceRefs();
    const jobs = buildJobs(input, opts.plan, budgetBytes, pool.size, perMatrix, container.claims, (replaced) => emit({
      type: 'warning', kind: 'replaced',
      message: `${replaced.length} input tensors are replaced by the new scales of the weights they belonged to (${replaced.slice(0, 2).join(', ')}${replaced.length > 2 ? ', ...' : ''})`,
    }), await streamedTensors(input, reads, refOf), container.order?.(input));
    const outputs = jobs.map((j) => j.out);
    const key = opts.resume
      ? await runKey({
        source: input.source,
        size: opts.inputSize ?? input.tensors.reduce((a, t) => Math.max(a, t.offset + t.byteLength), 0),
        header: { format: input.format, tensors: input.tensors, metadata: input.metadata },
        plan: outputs.map((o) => ({ name: o.name, kind: o.kind, format: o.format, options: o.options })),
        container: container.id,
        importance: opts.importance,
      })
      : undefined;
    const readRows = opts.readRows ?? defaultRowReader(input);
    // NVFP4's scale_2, one per group of tensors a runtime fuses (shared-scales.ts).
    const tensorScaleOf = sharedScales(input, jobs, readRows, Math.min(budgetBytes, 16 << 20), ctl.signal);
    // A unit's importance: the tensor's vector, or its matrix's (units stay within one, see buildJobs).
    const importanceOf = (u: Unit) => {
      const v = opts.importance?.[u.job.info.name];
      if (!v || !perMatrix.has(u.job.info.name)) return v;
      const m = Math.floor(u.r0 / u.job.info.shape[1]);
      // A copy: a view would send the whole tensor's vectors to the worker.
      return v.slice(m * u.job.rowLen, (m + 1) * u.job.rowLen);
    };
    const wantMetrics = opts.metrics ?? true;
    if (ctl.signal.aborted) throw ctl.signal.reason;

    const units = jobs.flatMap((j) => j.units);
    const results: (ReturnType<typeof deferred<UnitResult>> | undefined)[] = units.map(() => deferred<UnitResult>());
    const budget = new Budget(budgetBytes);
    let resumedUnits = 0;

    const read = async (u: Unit): Promise<TensorValues> => {
      const { job } = u;
      // readF32 inputs: whole, or cut where the input reads their rows as f32 (see jobs.ts).
      if (job.readAs === 'f32') {
        if (job.units.length === 1) return { values: await input.readF32(job.info.name), dtype: 'f32' };
        // The checkpoint's own rows (they decode), not a caller's raw row reader.
        return input.readRows!(job.info.name, u.r0, u.rows);
      }
      if (job.units.length === 1) return input.readValues(job.info.name);
      if (readRows) return readRows(job.info, u.r0, u.rows);
      job.whole ??= input.readValues(job.info.name);
      const all = await job.whole;
      if ((job.chunksRead = (job.chunksRead ?? 0) + 1) >= job.units.length) job.whole = undefined;
      const v = all.values;
      return { values: v.subarray(u.r0 * job.rowLen, (u.r0 + u.rows) * job.rowLen) as typeof v, dtype: all.dtype };
    };

    const layoutPlan = container.plan(outputs, input);
    if (layoutPlan.files && !sink.files) {
      throw new WebquantError(ErrorCodes.BAD_OPTION, `[pipeline] the output is ${layoutPlan.files.length} files (a split GGUF) but the sink writes one; give a splitSink`, { option: 'sink', value: layoutPlan.files.length, expected: 'a sink with files()' });
    }
    const io = workerIo({
      input, layoutPlan, signal: ctl.signal, refOf,
      reads,
      // The resume store needs the results' bytes: then they come back here.
      target: ownIo && !key ? sink.positional : undefined,
    });
    const target = io.target;

    // Reads a unit (or takes it from the resume cache) and hands it to the pool; the returned
    // result is delivered by the pool later.
    const start = async (u: Unit, route: Route): Promise<{ result: Promise<UnitResult> }> => {
      const { job } = u;
      if (job.out.kind === 'keep') {
        // Raw copies cost no worker: read in turn like everything else. A chunked one is read by
        // rows: F32/F16/BF16 values as stored are the raw bytes.
        if (route.copy) return { result: io.copyKept(u) };
        // One unit: the stored bytes, or a folded weight's F32 values; a chunk: its rows' values.
        if (job.units.length === 1 && job.readAs !== 'f32') return { result: Promise.resolve({ data: await input.readRaw(job.info.name), cached: false }) };
        const v = (await read(u)).values;
        return { result: Promise.resolve({ data: new Uint8Array(v.buffer, v.byteOffset, v.byteLength), cached: false }) };
      }
      const cached = key ? await opts.resume!.get(key, u.id) : undefined;
      if (cached) {
        resumedUnits++;
        return { result: Promise.resolve({ data: cached.data, metrics: decodeMetrics((cached.meta as { metrics?: unknown })?.metrics), cached: true }) };
      }
      const { range, out } = route;
      const tensorScale = await tensorScaleOf(job);
      const first = range ? undefined : await read(u);
      if (ctl.signal.aborted) throw ctl.signal.reason;
      const s = job.scheme!;
      const task = range
        ? { range, out, signal: ctl.signal }
        : { values: first!.values, reload: async () => (await read(u)).values, out, signal: ctl.signal };
      const qopts: QuantizeOptions = {
        format: s.format, groupSize: s.groupSize, bits: s.bits, calibration: s.calibration, granularity: s.granularity, doubleQuant: s.doubleQuant, scaleDtype: s.scaleDtype, inputScale: s.inputScale,
        rowLength: job.rowLen, dtype: range ? route.dtype : first!.dtype, name: job.info.name, metrics: wantMetrics, importance: importanceOf(u),
        tensorScale,
      };
      // A slice waits for the calibration of the whole tensor, which a worker computes once,
      // reading the tensor itself (streamedTensors); the pipeline goes on meanwhile.
      if (job.sliced) {
        job.prepared ??= io.wholeRange(job).then(({ range: whole, dtype }) => lanes.quantize({ range: whole, signal: ctl.signal }, { ...qopts, dtype, metrics: false, prepareOnly: true }))
          .then((q) => q.prepared ?? {});
      }
      // Wrapped: an async function returning a promise would wait for it.
      const quantized = job.sliced
        ? job.prepared!.then((prepared) => lanes.quantize(task, { ...qopts, slice: { row0: u.r0, rows: job.nrows, prepared } }))
        : lanes.quantize(task, qopts);
      const result = quantized.then(async (q: QuantizedTensor) => {
        // A chunk keeps its rows only (none where the worker wrote them): the tensor sections
        // come once, from a sliced tensor's first slice or (constant ones) from consume().
        const data = bringsTensorSections(job, u.chunk) ? q.data : q.data.subarray(0, out ? 0 : rowBytes(job) * u.rows);
        if (key) await opts.resume!.put(key, u.id, { data, meta: { metrics: encodeMetrics(q.metrics) } });
        return { data, metrics: q.metrics, cached: false, written: !!out };
      });
      return { result };
    };

    // One read after another on this thread (HTTP range reads and disks prefer that), quantization
    // in parallel; units the workers read themselves are only scheduled here.
    // The budget counts what each unit holds in memory on its way (see worker-io.ts).
    const heldBytes: number[] = [];
    const produce = async () => {
      for (let i = 0; i < units.length; i++) {
        const route = await io.route(units[i]);
        heldBytes[i] = route.held;
        await budget.acquire(route.held, ctl.signal);
        const d = results[i]!;
        try {
          (await start(units[i], route)).result.then(d.resolve, d.reject);
        } catch (e) {
          d.reject(e);
          throw e;
        }
      }
    };

    // The output in order: `written` is also the file offset of the next byte.
    let written = 0;
    const put = async (bytes: Uint8Array) => {
      if (ctl.signal.aborted) throw ctl.signal.reason;
      if (bytes.byteLength) await (target ? target.writeAt(bytes, written) : sink.write(bytes));
      written += bytes.byteLength;
    };
    // Bytes already written at this place: by a worker (counted for the sink's flushing) or here.
    const skip = (n: number, byWorker: boolean) => {
      if (byWorker) target!.wrote(n);
      written += n;
    };
    const reports: TensorReport[] = [];
    const bytesTotal = jobs.reduce((a, j) => a + j.info.byteLength, 0);
    let bytesDone = 0, bytesComputed = 0, computeMs = 0;
    const rate = () => {
      const elapsedMs = now() - t0;
      const throughput = computeMs > 0 ? bytesComputed / (computeMs / 1000) : 0;
      const etaMs = throughput > 0 ? ((bytesTotal - bytesDone) / throughput) * 1000 : undefined;
      return { elapsedMs, throughput, etaMs };
    };

    const zeros = (n: number) => (n > 0 ? put(new Uint8Array(n)) : Promise.resolve());

    const consume = async () => {
      if (layoutPlan.files) await sink.files!(layoutPlan.files);
      await put(layoutPlan.header);
      let u = 0;
      let groupStart = 0;
      for (const job of jobs) {
        const entries = layoutPlan.entries[job.index];
        // What the container calls entries are the layout's sections (one for a kept tensor).
        const secs = job.out.layout?.sections ?? [{ name: 'data', offset: 0, bytes: job.out.byteLength, perRow: job.rowLen * job.elemBytes }];
        const held: (Uint8Array | number)[][] = secs.map(() => []);
        const parts: (ErrorMetrics | undefined)[] = [];
        let cachedAll = true;
        if (entries[0].before) await put(entries[0].before);
        for (const unit of job.units) {
          const r = await results[u]!.promise;
          let at = 0;
          for (let s = 0; s < secs.length; s++) {
            // Tensor sections come in a whole tensor's result and in a sliced one's first slice
            // (also where the worker wrote the rows); where the tensor was cut by rows, they are
            // constant and added below.
            const tensorSec = secs[s].perRow === 0;
            if (tensorSec && !bringsTensorSections(job, unit.chunk)) continue;
            const len = job.units.length === 1 || tensorSec ? secs[s].bytes : secs[s].perRow * unit.rows;
            // Rows the worker wrote itself are only skipped over (a number in `held`).
            const inData = !r.written || tensorSec;
            const part = inData ? r.data.subarray(at, at + len) : len;
            if (inData) at += len;
            // The first section streams out as chunks arrive; later ones wait for the last chunk.
            if (s > 0) held[s].push(part);
            else if (typeof part === 'number') skip(part, job.out.kind === 'quantized');
            else await put(part);
          }
          if (at !== r.data.byteLength) {
            throw new WebquantError(ErrorCodes.BAD_INPUT, `[pipeline] tensor "${job.info.name}": got ${r.data.byteLength} bytes for rows ${unit.r0}..${unit.r0 + unit.rows} but the layout needs ${at}`, { tensor: job.info.name, value: r.data.byteLength, expected: at });
          }
          parts.push(r.metrics);
          cachedAll &&= r.cached;
          budget.release(heldBytes[u]);
          // Written: drop the result, or every output of the run would stay reachable to the end.
          results[u] = undefined;
          u++;
        }
        if (job.out.kind === 'quantized') {
          const t = { nrows: job.nrows, rowLen: job.rowLen, opts: job.out.options!, dtype: valuesDtype(job) };
          for (const [s, bytes] of constantSections(job.spec!, job.out.layout!, t)) if (!held[s].length) held[s].push(bytes);
        }
        await zeros(entries[0].padAfter);
        for (let s = 1; s < secs.length; s++) {
          if (entries[s].before) await put(entries[s].before!);
          for (const p of held[s]) if (typeof p === 'number') skip(p, true); else await put(p);
          await zeros(entries[s].padAfter);
        }
        bytesDone += job.info.byteLength;
        if (!cachedAll) { bytesComputed += job.info.byteLength; computeMs = now() - t0; }
        const metrics = job.out.kind === 'quantized' && wantMetrics ? combineMetrics(parts) : undefined;
        const report: TensorReport = { name: job.info.name, format: job.out.format ?? 'keep', bytes: job.info.byteLength, outputBytes: job.out.byteLength, cached: cachedAll && job.out.kind === 'quantized', chunks: job.units.length, metrics };
        reports.push(report);
        const ev: TensorProgress = {
          type: 'tensor', name: report.name, role: job.role, layer: job.layer, index: job.index, count: jobs.length,
          format: report.format, cached: report.cached, bytes: report.bytes, outputBytes: report.outputBytes,
          bytesDone, bytesTotal, ...rate(), metrics,
        };
        emit(ev);
        const next = jobs[job.index + 1];
        if (!next || next.group !== job.group) {
          emit({ type: 'layer', layer: job.layer, group: job.group, tensors: job.index + 1 - groupStart, bytesDone, bytesTotal, ...rate() });
          groupStart = job.index + 1;
        }
      }
      if (written !== layoutPlan.totalBytes) {
        throw new WebquantError(ErrorCodes.BAD_INPUT, `[pipeline] wrote ${written} bytes but the container planned ${layoutPlan.totalBytes}`, { value: written, expected: layoutPlan.totalBytes });
      }
    };

    const fail = (e: unknown) => { if (!ctl.signal.aborted) ctl.abort(e); throw e; };
    await Promise.all([produce().catch(fail), consume().catch(fail)]);
    await sink.close();
    if (key && !opts.keepResumeData) await opts.resume!.clear(key);
    return { tensors: reports, bytesWritten: written, elapsedMs: now() - t0, resumedUnits, peakInFlightBytes: budget.peak };
  } catch (e) {
    // The first failure decides the error; an abort reports E_ABORTED whatever it interrupted.
    const err = opts.signal?.aborted ? (ctl.signal.reason ?? e) : e;
    if (!ctl.signal.aborted) ctl.abort(err);
    await sink.abort(err).catch(() => undefined);
    throw err;
  } finally {
    opts.signal?.removeEventListener('abort', onUserAbort);
    if (ownPool && pool) await pool.terminate();
  }
}
