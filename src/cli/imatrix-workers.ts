// `webquant imatrix --workers N`: the calibration chunks spread over N worker_threads, each with
// its own copy of the model (N times the memory of one). Chunks go to whichever worker is free;
// their sums are merged in chunk order as they become contiguous, which gives the bits of the
// one-thread run (mergeImatrixChunk), whatever finished first.
import { Worker } from 'node:worker_threads';
import nodeEndpoint from 'comlink/dist/esm/node-adapter.mjs';
import { Comlink } from '../pipeline/transfer.js';
import { ErrorCodes, WebquantError, fail } from '../errors.js';
import { mergeImatrixChunk, type ImatrixChunk, type ImatrixEntry, type ImatrixResult } from '../eval/imatrix.js';
import type { ImatrixWorkerApi, ImatrixWorkerInit, WireEntry } from './imatrix-worker.js';

export interface ImatrixWorkersOptions extends ImatrixWorkerInit {
  workers: number;
  tokens: Uint16Array;
  ctx: number;
  chunks: number;
  signal?: AbortSignal;
  onProgress?: (p: { chunks: number; totalChunks: number }) => void;
  /** The worker entry (imatrix-worker.js beside this file by default). */
  workerUrl?: URL;
}

function fromWire(w: WireEntry[]): ImatrixChunk {
  return new Map(w.map(([name, cols, sums, counts]): [string, ImatrixEntry] => [name, { cols, sums, counts }]));
}

export async function imatrixOnWorkers(o: ImatrixWorkersOptions): Promise<ImatrixResult> {
  const n = Math.min(o.workers, o.chunks);
  const url = o.workerUrl ?? new URL('./imatrix-worker.js', import.meta.url);
  const threads = Array.from({ length: n }, () => new Worker(url));
  // A worker that dies leaves its call unsettled: each call races the thread's exit.
  const died = threads.map((w) => new Promise<never>((_, reject) => {
    let last: Error | undefined;
    w.on('error', (e) => { last = e; });
    w.on('exit', (code) => reject(last instanceof WebquantError ? last : new WebquantError(ErrorCodes.WORKER_CRASHED, `[imatrix] a worker stopped (exit code ${code})${last ? `: ${last.message}` : ''}`, { value: last?.message ?? code })));
  }));
  died.forEach((p) => p.catch(() => undefined));
  const apis = threads.map((w) => Comlink.wrap<ImatrixWorkerApi>(nodeEndpoint(w)));
  const call = <T>(i: number, p: Promise<T>) => Promise.race([p, died[i]]);
  let stop: ((e: unknown) => void) | undefined;
  const stopped = new Promise<never>((_, reject) => { stop = reject; });
  stopped.catch(() => undefined);
  const onAbort = () => stop!(new WebquantError(ErrorCodes.ABORTED, '[imatrix] aborted', { value: String(o.signal?.reason ?? 'aborted') }));
  if (o.signal?.aborted) onAbort();
  o.signal?.addEventListener('abort', onAbort, { once: true });

  const totals = new Map<string, ImatrixEntry>();
  const done = new Map<number, ImatrixChunk>();
  let next = 0, merged = 0;
  const init: ImatrixWorkerInit = { model: o.model, cwd: o.cwd, env: o.env, processOutput: o.processOutput };
  const run = async (i: number) => {
    await call(i, apis[i].open(init));
    while (next < o.chunks) {
      const c = next++;
      const wire = await call(i, apis[i].chunk(o.tokens.slice(c * o.ctx, (c + 1) * o.ctx)));
      done.set(c, fromWire(wire));
      for (let m = done.get(merged); m; m = done.get(merged)) {
        mergeImatrixChunk(totals, m);
        done.delete(merged++);
        o.onProgress?.({ chunks: merged, totalChunks: o.chunks });
      }
    }
    await call(i, apis[i].close());
  };
  try {
    await Promise.race([Promise.all(threads.map((_, i) => run(i))), stopped]);
    if (merged !== o.chunks) fail(ErrorCodes.MODEL, `[imatrix] merged ${merged} of ${o.chunks} chunks`, { value: merged, expected: o.chunks });
    return { entries: totals, chunks: o.chunks, chunkSize: o.ctx };
  } finally {
    o.signal?.removeEventListener('abort', onAbort);
    await Promise.all(threads.map((w) => w.terminate()));
  }
}
