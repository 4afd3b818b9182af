// Messages between the page and the evaluation Workers (eval-worker.ts). Progress is its own kind;
// errors cross as WebquantError.toJSON() so that the page gets the class and code back.
// One Worker runs a whole evaluation ('run'); several ('open', then 'window's) each run the
// context windows the page sends and return their own sums, which the page adds in order.
import type { EvaluateProgress, EvaluateResult, SerializedError, WasmBuild } from '../../src/index.js';
import type { WindowStats } from '../../src/eval/evaluate.js';
import type { InputSpec } from './job.js';

/** A checkpoint or token file: fetched by URL, or a Blob / File the page holds. */
export type Bytes = { url: string } | { blob: Blob; name: string };

export interface EvalRequest {
  type: 'run';
  /** The original (Hugging Face safetensors with its config.json), as the quantize form names it. */
  original: InputSpec;
  /** The quantized checkpoint: a webquant safetensors output or a GGUF. */
  quantized: Bytes;
  /** Little-endian uint16 token ids, every document starting with BOS. */
  tokens: Bytes;
  maxDocs?: number;
  contextLength?: number;
}

/** Opens the models for 'window's; with `plan`, also answers the windows to run. */
export type OpenRequest = Omit<EvalRequest, 'type'> & { type: 'open'; plan: boolean };

/** The windows of an evaluation in order (evalWindows), each a copy of its tokens. */
export interface EvalPlan { windows: { win: Uint16Array; doc: number }[]; documents: number }

export type ToWorker = EvalRequest | OpenRequest | { type: 'window'; index: number; tokens: Uint16Array } | { type: 'cancel' };

export type FromWorker =
  | { type: 'stage'; text: string }
  | ({ type: 'progress' } & EvaluateProgress)
  | { type: 'done'; result: EvaluateResult; build: WasmBuild }
  | { type: 'opened'; plan?: EvalPlan; build: WasmBuild }
  | { type: 'window-done'; index: number; stats: WindowStats }
  | { type: 'error'; error: SerializedError | { name: string; message: string } };
