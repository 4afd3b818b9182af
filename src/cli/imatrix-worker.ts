// worker_threads entry of `webquant imatrix --workers N` (see imatrix-workers.ts): opens the model
// itself, as the command does, and runs the chunks it is sent, returning each chunk's own sums.
import { parentPort } from 'node:worker_threads';
import nodeEndpoint from 'comlink/dist/esm/node-adapter.mjs';
import { Comlink } from '../pipeline/transfer.js';
import { imatrixCollector, type ImatrixCollector } from '../eval/imatrix.js';
import { quantizedWeights } from '../eval/quantized.js';
import { openOriginal } from './eval.js';
import type { CliIO } from './io.js';

export interface ImatrixWorkerInit {
  model: string;
  cwd: string;
  env?: Record<string, string | undefined>;
  processOutput: boolean;
}

/** One entry of a chunk's sums: name, columns, per-matrix sums (transferred) and counts. */
export type WireEntry = [string, number, Float64Array[], number[]];

export interface ImatrixWorkerApi {
  open(init: ImatrixWorkerInit): Promise<void>;
  chunk(tokens: Uint16Array): Promise<WireEntry[]>;
  close(): Promise<void>;
}

if (!parentPort) throw new Error('[imatrix] imatrix-worker.js must run in a worker thread');

let collector: ImatrixCollector | undefined;
const opened: { close(): Promise<void> }[] = [];
const quiet = { write: () => true };
const api: ImatrixWorkerApi = {
  async open(init) {
    const io: CliIO = { stdout: quiet, stderr: quiet, cwd: init.cwd, env: init.env };
    const { input: ref, config } = await openOriginal(init.model, io, 'imatrix', opened);
    collector = await imatrixCollector({ config, weights: await quantizedWeights(ref.checkpoint, config, { original: ref.file }), processOutput: init.processOutput });
  },
  async chunk(tokens) {
    if (!collector) throw new Error('[imatrix] chunk() before open()');
    const entries: WireEntry[] = [...collector.chunk(tokens)].map(([name, e]) => [name, e.cols, e.sums, e.counts]);
    return Comlink.transfer(entries, entries.flatMap((e) => e[2].map((s) => s.buffer as ArrayBuffer)));
  },
  async close() {
    collector = undefined;
    await Promise.all(opened.splice(0).map((x) => x.close()));
  },
};
Comlink.expose(api, nodeEndpoint(parentPort));
