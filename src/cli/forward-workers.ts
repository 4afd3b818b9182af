// `webquant imatrix --workers N` and `webquant eval --workers N`: token spans (imatrix chunks,
// eval windows) spread over N worker_threads, each holding its own copy of the models (N times
// their memory; forward-worker.ts). A span goes to whichever worker is free; the results are
// handed to `merge` in span order (eval/in-order.ts).
import { Worker } from 'node:worker_threads';
import { totalmem } from 'node:os';
import nodeEndpoint from 'comlink/dist/esm/node-adapter.mjs';
import { Comlink } from '../pipeline/transfer.js';
import { ErrorCodes, WebquantError, fail } from '../errors.js';
import { inOrder } from '../eval/in-order.js';
import { workerExecArgv } from '../pipeline/spawn-node.js';
import type { ForwardInit, ForwardResult, ForwardWorkerApi } from './forward-worker.js';

export interface ForwardWorkersOptions {
  workers: number;
  init: ForwardInit;
  /** The token spans, in the order their results are merged. */
  spans: Uint16Array[];
  merge(index: number, result: ForwardResult): void;
  signal?: AbortSignal;
  /** The worker entry (forward-worker.js beside this file by default). */
  workerUrl?: URL;
}

/** The --workers option of `command` (1 when not given), a positive integer. */
export function workerCount(command: string, value: unknown): number {
  const workers = (value as number | undefined) ?? 1;
  if (!(Number.isInteger(workers) && workers >= 1)) fail(ErrorCodes.BAD_OPTION, `[cli] ${command}: --workers must be a positive integer but got ${workers}`, { option: 'workers', value: workers, expected: '>= 1' });
  return workers;
}

/**
 * Refuses a --workers count whose model copies (about `perWorker` bytes each) would not fit in
 * this machine's memory, before any is loaded: the OS would otherwise kill the process midway.
 */
export function checkWorkerMemory(command: string, workers: number, perWorker: number, memory = totalmem()): void {
  const need = workers * perWorker;
  if (workers > 1 && need > 0.8 * memory) {
    const gb = (b: number) => `${(b / 1e9).toFixed(1)} GB`;
    fail(ErrorCodes.BAD_OPTION, `[cli] ${command}: --workers ${workers} would hold ${workers} copies of the model, about ${gb(need)} (${gb(perWorker)} each), but this machine has ${gb(memory)}; use fewer workers`, {
      option: 'workers', value: workers, expected: `<= ${Math.max(1, Math.floor((0.8 * memory) / perWorker))}`,
    });
  }
}

export async function runOnWorkers(o: ForwardWorkersOptions): Promise<void> {
  const n = Math.min(o.workers, o.spans.length);
  const url = o.workerUrl ?? new URL('./forward-worker.js', import.meta.url);
  const threads = Array.from({ length: n }, () => new Worker(url, { execArgv: workerExecArgv() }));
  // A worker that dies leaves its call unsettled: each call races the thread's exit.
  const died = threads.map((w) => new Promise<never>((_, reject) => {
    let last: Error | undefined;
    w.on('error', (e) => { last = e; });
    w.on('exit', (code) => reject(new WebquantError(ErrorCodes.WORKER_CRASHED, `[cli] a ${o.init.kind} worker stopped (exit code ${code})${last ? `: ${last.message}` : ''}`, { value: last?.message ?? code })));
  }));
  died.forEach((p) => p.catch(() => undefined));
  const apis = threads.map((w) => Comlink.wrap<ForwardWorkerApi>(nodeEndpoint(w)));
  const call = <T>(i: number, p: Promise<T>) => Promise.race([p, died[i]]);
  let stop!: (e: unknown) => void;
  const stopped = new Promise<never>((_, reject) => { stop = reject; });
  stopped.catch(() => undefined);
  const onAbort = () => stop(new WebquantError(ErrorCodes.ABORTED, `[cli] ${o.init.kind} was aborted`, { value: String(o.signal?.reason ?? 'aborted') }));
  if (o.signal?.aborted) onAbort();
  o.signal?.addEventListener('abort', onAbort, { once: true });

  const put = inOrder(o.merge);
  let next = 0;
  const work = async (i: number) => {
    await call(i, apis[i].open(o.init));
    while (next < o.spans.length) {
      const s = next++;
      put(s, await call(i, apis[i].run(o.spans[s].slice()) as Promise<ForwardResult>));
    }
    await call(i, apis[i].close());
  };
  try {
    await Promise.race([Promise.all(threads.map((_, i) => work(i))), stopped]);
  } finally {
    o.signal?.removeEventListener('abort', onAbort);
    await Promise.all(threads.map((w) => w.terminate()));
  }
}
