// worker_threads entry of `webquant imatrix --workers N` and `webquant eval --workers N` (see
// forward-workers.ts): opens the models itself, as the command does, and runs the token spans it
// is sent (imatrix chunks, eval windows), returning each span's own sums.
import { parentPort } from 'node:worker_threads';
import nodeEndpoint from 'comlink/dist/esm/node-adapter.mjs';
import { Comlink } from '../pipeline/transfer.js';
import { imatrixCollector, type ImatrixChunk } from '../eval/imatrix.js';
import { evalCollector, type WindowStats } from '../eval/evaluate.js';
import { checkpointWeights } from '../eval/llama.js';
import { quantizedWeights } from '../eval/quantized.js';
import { evalCandidate, openOriginal } from './eval.js';
import type { CliIO } from './io.js';

export type ForwardInit = { cwd: string; env?: Record<string, string | undefined>; model: string } & (
  | { kind: 'imatrix'; processOutput: boolean }
  | { kind: 'eval'; quantized: string; contextLength?: number });

/** A span's own sums; their Float64Arrays are transferred, not copied. */
export type ForwardResult = ImatrixChunk | WindowStats;

export interface ForwardWorkerApi {
  open(init: ForwardInit): Promise<void>;
  run(tokens: Uint16Array): Promise<ForwardResult>;
  close(): Promise<void>;
}

if (!parentPort) throw new Error('[cli] forward-worker.js must run in a worker thread');

let run: ((tokens: Uint16Array) => ForwardResult) | undefined;
const opened: { close(): Promise<void> }[] = [];
const quiet = { write: () => true };

const api: ForwardWorkerApi = {
  async open(init) {
    const io: CliIO = { stdout: quiet, stderr: quiet, cwd: init.cwd, env: init.env };
    const { input: ref, config } = await openOriginal(init.model, io, init.kind, opened);
    if (init.kind === 'imatrix') {
      const c = await imatrixCollector({ config, weights: await quantizedWeights(ref.checkpoint, config, { original: ref.file }), processOutput: init.processOutput });
      run = (tokens) => c.chunk(tokens);
    } else {
      const cand = await evalCandidate(init.quantized, config, io, ref.file);
      opened.push(cand);
      const c = await evalCollector({ reference: { config, weights: checkpointWeights(ref.checkpoint, config) }, candidate: cand.weights, contextLength: init.contextLength });
      run = (tokens) => c.window(tokens);
    }
  },
  async run(tokens) {
    if (!run) throw new Error('[cli] run() before open()');
    const r = run(tokens);
    const sums = r instanceof Map ? [...r.values()].flatMap((e) => e.sums) : r.layers;
    return Comlink.transfer(r, sums.map((s) => s.buffer as ArrayBuffer));
  },
  async close() {
    run = undefined;
    await Promise.all(opened.splice(0).map((x) => x.close()));
  },
};
Comlink.expose(api, nodeEndpoint(parentPort));
