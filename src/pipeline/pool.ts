// A pool of quantization workers driven through comlink. Runtime-specific spawning lives in
// spawn-node.ts / spawn-browser.ts; scheduling, crash recovery and cancellation live here.
//
// Buffers: a tensor's values are transferred to the worker (the caller's view is detached
// afterwards) unless the view covers only part of its buffer, in which case only that span is
// copied out, since transferring would detach memory the caller still uses (e.g. a whole file).
// A task given as a `range` of a source instead of values is read by the worker itself.
// Crashes: a worker that dies mid-task is replaced and the task retried once, with values from
// `reload` (a transferred buffer is gone with the worker; a range is simply read again); a second
// death rejects with E_WORKER_CRASHED naming the tensor.
// Sending ahead: while more tasks wait than there are workers, a busy worker is sent its next task
// before it finishes the current one (tasks that can be read again only, see ahead()), so that it
// starts it at once instead of idling for the round trip through this thread: with a fast kernel
// (Q8_0, a unit in ~20 ms) that round trip, on a thread that shares the cores with the workers,
// took ~5% of each worker's time. The last `size` tasks go only to idle workers, so that one
// worker does not hold a task another could start.
import { Comlink } from './transfer.js';
import type { Endpoint } from 'comlink';
import { ErrorCodes, WebquantError } from '../errors.js';
import type { QuantizedTensor, QuantizeOptions, Backend, TensorValues } from '../quantize.js';
import { compiledModule, type WasmBuild, type WasmSource } from '../kernels/loader.js';
import type { WorkerApi, WorkerDType, WorkerOutput, WorkerRange, WorkerResult } from './worker.js';

export interface WorkerHandle {
  endpoint: Endpoint;
  /** Called once if the worker dies by itself (not after terminate()). */
  onExit(cb: (reason: Error) => void): void;
  setBusy?(busy: boolean): void;
  terminate(): Promise<void>;
}

export interface Spawner {
  defaultSize(): number;
  spawn(): WorkerHandle;
}

export interface PoolOptions {
  /** Number of workers; defaults to the number of cores. */
  size?: number;
  backend?: Backend;
  /** Passed to configureWasm in every worker (string URLs, bytes or compiled Modules). */
  wasm?: Partial<Record<WasmBuild, WasmSource>>;
  /** The worker entry module (worker-node.js / worker-browser.js next to this file by default). */
  workerUrl?: string | URL;
  /** Overrides the runtime's spawner entirely (tests, custom runtimes). */
  spawner?: Spawner;
}

export interface PoolTask {
  /** The values, or (instead) a `range` of stored values the worker reads itself. */
  values?: TensorValues;
  /** Stored values of dtype `opts.dtype` ('f32', 'f16' or 'bf16'). */
  range?: WorkerRange;
  /** The worker writes the output into this file itself; the result's data is then empty. */
  out?: WorkerOutput;
  /** Reads the values again for the retry after a crash; without it a crash is final. */
  reload?: () => Promise<TensorValues> | TensorValues;
  signal?: AbortSignal;
}

interface Slot {
  handle: WorkerHandle;
  api: Comlink.Remote<WorkerApi>;
  ready: Promise<unknown>;
  died: Promise<Error>;
  /** Called once if the worker dies, for every run() waiting on it. */
  readonly onDied: Set<() => void>;
  /** Set once the worker has died. */
  dead?: Error;
  /** Tasks sent and not settled, in the order the worker runs them: the first one runs. */
  jobs: Job[];
}

/** Tasks a busy worker may hold besides the one it runs. */
const AHEAD = 1;

interface Job {
  task: PoolTask;
  opts: QuantizeOptions;
  attempt: number;
  resolve(q: QuantizedTensor): void;
  reject(e: unknown): void;
  slot?: Slot;
  /** The values were transferred to a worker: a rerun needs `reload`. */
  sent?: boolean;
  onAbort?: () => void;
}

export function abortedError(what: string, reason?: unknown): WebquantError {
  const why = reason instanceof Error ? `: ${reason.message}` : '';
  return new WebquantError(ErrorCodes.ABORTED, `[pipeline] ${what} was aborted${why}`, {});
}

async function runtimeSpawner(url: string | URL | undefined): Promise<Spawner> {
  const isNode = typeof process !== 'undefined' && !!process.versions?.node && typeof (globalThis as { window?: unknown }).window === 'undefined';
  if (isNode) {
    // A computed specifier keeps bundlers from pulling worker_threads into browser builds.
    const nodeModule = './spawn-node.js';
    return ((await import(/* @vite-ignore */ nodeModule)) as typeof import('./spawn-node.js')).nodeSpawner(url);
  }
  return (await import('./spawn-browser.js')).browserSpawner(url);
}

/**
 * Workers one pool may have: each holds its own wasm memory (tens of MiB), and the budget is
 * shared out per worker, so a count far past the cores only cuts tensors into slivers.
 */
export const MAX_POOL_SIZE = 256;

/** A worker count, 1..MAX_POOL_SIZE; `what` starts the error message ("[cli] quantize: --workers"). */
export function checkPoolSize(size: number, what: string): number {
  if (!Number.isInteger(size) || size < 1 || size > MAX_POOL_SIZE) {
    throw new WebquantError(ErrorCodes.BAD_OPTION, `${what} must be an integer from 1 to ${MAX_POOL_SIZE} but got ${size}`, { option: 'workers', value: size, expected: `1..${MAX_POOL_SIZE}` });
  }
  return size;
}

export async function createPool(opts: PoolOptions = {}): Promise<WorkerPool> {
  const spawner = opts.spawner ?? (await runtimeSpawner(opts.workerUrl));
  return new WorkerPool(spawner, opts);
}

export class WorkerPool {
  readonly size: number;
  private readonly slots = new Set<Slot>();
  private readonly idle: Slot[] = [];
  private readonly queue: Job[] = [];
  /** Terminations started by cancellation, awaited by terminate(). */
  private readonly ending = new Set<Promise<void>>();
  private closed = false;
  /** What every worker's init gets as `wasm` (see shared()). */
  private wasm?: Promise<PoolOptions['wasm']>;

  constructor(private readonly spawner: Spawner, private readonly opts: PoolOptions = {}) {
    this.size = checkPoolSize(opts.size ?? spawner.defaultSize(), '[pipeline] pool size');
  }

  /** Workers started and not yet terminated. */
  get workers(): number {
    return this.slots.size;
  }

  quantize(task: PoolTask, opts: QuantizeOptions): Promise<QuantizedTensor> {
    return new Promise<QuantizedTensor>((resolve, reject) => {
      const name = opts.name ?? 'tensor';
      if (this.closed) return reject(new WebquantError(ErrorCodes.ABORTED, `[pipeline] cannot quantize ${name}: the worker pool was terminated`, { tensor: name }));
      if (task.signal?.aborted) return reject(abortedError(`quantizing ${name}`, task.signal.reason));
      const job: Job = { task, opts, attempt: 1, resolve, reject };
      if (task.signal) {
        job.onAbort = () => this.cancel(job, abortedError(`quantizing ${name}`, task.signal?.reason));
        this.watch(task.signal, job);
      }
      this.queue.push(job);
      this.pump();
    });
  }

  /** Terminates every worker; queued and running tasks reject with E_ABORTED. */
  async terminate(): Promise<void> {
    this.closed = true;
    const err = abortedError('the worker pool');
    for (const j of this.queue.splice(0)) this.settle(j, () => j.reject(err));
    const all = [...this.slots];
    this.slots.clear();
    this.idle.length = 0;
    for (const s of all) for (const j of s.jobs.splice(0)) this.settle(j, () => j.reject(err));
    await Promise.all([...all.map((s) => s.handle.terminate()), ...this.ending]);
  }

  /**
   * One abort listener per signal, however many jobs share it: a run queues a job per tensor on
   * one signal, and a listener each would trip Node's listener-leak warning past ten.
   */
  private readonly watched = new Map<AbortSignal, { jobs: Set<Job>; listener: () => void }>();
  private watch(signal: AbortSignal, job: Job): void {
    let w = this.watched.get(signal);
    if (!w) {
      const jobs = new Set<Job>();
      const listener = () => {
        this.watched.delete(signal);
        for (const j of [...jobs]) j.onAbort?.();
      };
      w = { jobs, listener };
      this.watched.set(signal, w);
      signal.addEventListener('abort', listener, { once: true });
    }
    w.jobs.add(job);
  }

  private unwatch(job: Job): void {
    const signal = job.task.signal;
    const w = signal && this.watched.get(signal);
    if (!w) return;
    w.jobs.delete(job);
    if (w.jobs.size === 0) {
      signal.removeEventListener('abort', w.listener);
      this.watched.delete(signal);
    }
  }

  private settle(job: Job, f: () => void): void {
    this.unwatch(job);
    job.slot = undefined;
    f();
  }

  private cancel(job: Job, err: WebquantError): void {
    const q = this.queue.indexOf(job);
    if (q >= 0) this.queue.splice(q, 1);
    const slot = job.slot;
    if (slot && slot.jobs[0] === job) {
      // The kernels cannot be interrupted: the worker goes, a fresh one replaces it on demand.
      // Tasks sent ahead to it go back to the front of the queue (not an attempt: they never ran).
      const behind = slot.jobs.splice(0).slice(1);
      for (const j of behind) j.slot = undefined;
      this.queue.unshift(...behind);
      this.slots.delete(slot);
      const end = slot.handle.terminate().finally(() => this.ending.delete(end));
      this.ending.add(end);
    } else if (slot) {
      // Sent ahead and not started: the worker will run it (after the one it runs, which stays
      // first), and its result is dropped.
      slot.jobs.splice(slot.jobs.indexOf(job), 1);
    }
    this.settle(job, () => job.reject(err));
    this.pump();
  }

  private spawn(): Slot {
    const handle = this.spawner.spawn();
    const api = Comlink.wrap<WorkerApi>(handle.endpoint);
    const died = new Promise<Error>((resolve) => handle.onExit(resolve));
    const slot: Slot = { handle, api, died, ready: Promise.resolve(), onDied: new Set(), jobs: [] };
    slot.ready = this.shared().then((wasm) => api.init({ backend: this.opts.backend, wasm }));
    // init failures surface through the first task; keep them from being reported as unhandled.
    slot.ready.catch(() => undefined);
    died.then((e) => this.onDeath(slot, e));
    this.slots.add(slot);
    return slot;
  }

  /**
   * The kernels compiled once on this thread, for every worker: a worker then starts without
   * compiling (~5-10 ms each, more on a busy machine) and all share one tier-up. The compile runs
   * while the first workers boot. Where it fails, or a source for the build was given, each worker
   * loads its own as before.
   */
  private shared(): Promise<PoolOptions['wasm']> {
    const given = this.opts.wasm;
    return (this.wasm ??= compiledModule(this.opts.backend ?? 'auto').then(
      ({ build, module }) => (given?.[build] !== undefined ? given : { ...given, [build]: module }),
      () => given,
    ));
  }

  /**
   * A worker died by itself: the task it ran is retried once where its input can be read again,
   * tasks sent ahead to it go back to the queue as they were, the rest reject naming the tensor.
   */
  private onDeath(slot: Slot, e: Error): void {
    slot.dead = e;
    for (const f of slot.onDied) f();
    if (!this.slots.delete(slot)) return; // terminated or cancelled: its tasks are settled
    const i = this.idle.indexOf(slot);
    if (i >= 0) this.idle.splice(i, 1);
    const retry: Job[] = [];
    slot.jobs.splice(0).forEach((job, k) => {
      job.slot = undefined;
      const again = !!(job.task.reload || job.task.range);
      if (k > 0 && again) return retry.push(job);
      if (again && job.attempt === 1) {
        job.attempt = 2;
        return retry.push(job);
      }
      const name = job.opts.name ?? 'tensor';
      const retried = job.attempt > 1 ? 'twice' : 'and the input could not be read again for a retry';
      this.settle(job, () => job.reject(new WebquantError(ErrorCodes.WORKER_CRASHED, `[pipeline] a worker crashed ${retried} while quantizing tensor "${name}": ${e.message}`, { tensor: name, value: e.message })));
    });
    this.queue.unshift(...retry);
    this.pump();
  }

  private pump(): void {
    while (!this.closed && this.queue.length > 0) {
      let slot = this.idle.pop();
      if (!slot && this.slots.size < this.size) slot = this.spawn();
      slot ??= this.ahead();
      if (!slot) return;
      void this.run(slot, this.queue.shift()!);
    }
  }

  /** The busy worker with the fewest tasks, when the next task may be sent ahead (see top). */
  private ahead(): Slot | undefined {
    const next = this.queue[0];
    if (this.queue.length <= this.size || !(next.task.range || next.task.reload)) return undefined;
    let best: Slot | undefined;
    for (const s of this.slots) if (!s.dead && s.jobs.length <= AHEAD && (!best || s.jobs.length < best.jobs.length)) best = s;
    return best;
  }

  private async run(slot: Slot, job: Job): Promise<void> {
    slot.jobs.push(job);
    job.slot = slot;
    slot.handle.setBusy?.(true);
    let outcome: { ok: WorkerResult } | { err: unknown } | { died: true };
    let onDied: (() => void) | undefined;
    try {
      const { backend: _b, dtype: _d, ...rest } = job.opts;
      let call: Promise<WorkerResult>;
      const range = job.task.range;
      if (range) {
        const dtype = rangeDtype(job.opts);
        call = slot.ready.then(() => slot.api.quantizeRange(range, { ...rest, dtype }, job.task.out));
      } else {
        const values = job.sent ? await job.task.reload!() : job.task.values;
        const { buffer, dtype } = movable(values, job.opts.dtype);
        job.sent = true;
        call = slot.ready.then(() => slot.api.quantizeTensor(Comlink.transfer(buffer, [buffer]), { ...rest, dtype }, job.task.out));
      }
      // Not Promise.race with slot.died: every race would leave a reaction on that promise, which
      // stays pending for the worker's life and would keep every result reachable through it.
      outcome = await new Promise<typeof outcome>((resolve) => {
        onDied = () => resolve({ died: true });
        slot.onDied.add(onDied);
        if (slot.dead) resolve({ died: true });
        call.then((ok) => resolve({ ok }), (err) => resolve({ err }));
      });
    } catch (err) {
      outcome = { err };
    } finally {
      if (onDied) slot.onDied.delete(onDied);
    }
    // Died (onDeath() requeued or rejected it), cancelled or terminated meanwhile.
    const at = slot.jobs.indexOf(job);
    if ('died' in outcome || at < 0 || job.slot !== slot) return;
    slot.jobs.splice(at, 1);
    if (slot.jobs.length === 0) {
      slot.handle.setBusy?.(false);
      this.idle.push(slot);
    }
    if ('ok' in outcome) {
      const r = outcome.ok;
      this.settle(job, () => job.resolve({ format: r.format, shape: r.shape, data: new Uint8Array(r.data), layout: r.layout, options: r.options, metrics: r.metrics, backend: r.backend, prepared: r.prepared }));
    } else {
      const e = outcome.err;
      this.settle(job, () => job.reject(e));
    }
    this.pump();
  }
}

function rangeDtype(opts: QuantizeOptions): WorkerDType {
  const d = opts.dtype;
  if (d !== 'f32' && d !== 'f16' && d !== 'bf16') {
    throw new WebquantError(ErrorCodes.BAD_OPTION, `[pipeline] a range task needs dtype "f32", "f16" or "bf16" but got "${String(d)}"`, { tensor: opts.name, option: 'dtype', value: d, expected: ['f32', 'f16', 'bf16'] });
  }
  return d;
}

function movable(values: TensorValues | undefined, dtype: QuantizeOptions['dtype']): { buffer: ArrayBuffer; dtype: WorkerDType } {
  if (!(values instanceof Float32Array) && !(values instanceof Uint16Array)) {
    throw new WebquantError(ErrorCodes.BAD_INPUT, '[pipeline] values must be a Float32Array or a Uint16Array (or the task a range)', { option: 'values', expected: ['Float32Array', 'Uint16Array'] });
  }
  const d: WorkerDType = values instanceof Float32Array ? 'f32' : (dtype === 'f16' || dtype === 'bf16' ? dtype : (dtype as WorkerDType));
  const whole = values.byteOffset === 0 && values.byteLength === values.buffer.byteLength && values.buffer instanceof ArrayBuffer;
  const buffer = whole ? (values.buffer as ArrayBuffer) : (values.slice().buffer as ArrayBuffer);
  return { buffer, dtype: d };
}
