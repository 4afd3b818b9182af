// Messages between the page and the evaluation Worker (eval-worker.ts). Progress is its own kind;
// errors cross as WebquantError.toJSON() so that the page gets the class and code back.
import type { EvaluateProgress, EvaluateResult, SerializedError, WasmBuild } from '../../src/index.js';
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

export type ToWorker = EvalRequest | { type: 'cancel' };

export type FromWorker =
  | { type: 'stage'; text: string }
  | ({ type: 'progress' } & EvaluateProgress)
  | { type: 'done'; result: EvaluateResult; build: WasmBuild }
  | { type: 'error'; error: SerializedError | { name: string; message: string } };
