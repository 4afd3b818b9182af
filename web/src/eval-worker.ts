// The evaluation Worker: opens the original and the quantized checkpoint, reads the tokens and runs
// evaluate() (src/eval) on them, off the page's thread. One run per Worker; the page ends it after
// the answer. Cancel aborts evaluate() between documents (E_ABORTED, like any other error).
import {
  checkpointWeights, evaluate, fromBlob, fromUrl, hasSimd, llamaConfig, openCheckpoint, quantizedWeights, readTokens,
  ErrorCodes, WebquantError, type Checkpoint,
} from '../../src/index.js';
import './wasm.js';
import { openInput } from './job.js';
import type { Bytes, EvalRequest, FromWorker, ToWorker } from './eval-protocol.js';

const post = (m: FromWorker) => (self as unknown as Worker).postMessage(m);
let running: AbortController | undefined;

self.onmessage = (ev: MessageEvent<ToWorker>) => {
  if (ev.data.type === 'cancel') running?.abort();
  else void run(ev.data);
};

const nameOf = (b: Bytes) => ('url' in b ? b.url : b.name);

async function bytesOf(b: Bytes, what: string): Promise<Uint8Array> {
  if (!('url' in b)) return new Uint8Array(await b.blob.arrayBuffer());
  let res: Response;
  try {
    res = await fetch(new URL(b.url, location.href));
  } catch (e) {
    throw new WebquantError(ErrorCodes.IO, `[demo] ${what} ${b.url}: ${(e as Error).message}`, { file: b.url });
  }
  if (!res.ok) throw new WebquantError(ErrorCodes.IO, `[demo] ${what} ${b.url}: HTTP ${res.status}`, { file: b.url, value: res.status, expected: 200 });
  return new Uint8Array(await res.arrayBuffer());
}

function openBytes(b: Bytes): Promise<Checkpoint> {
  return openCheckpoint('url' in b ? fromUrl(new URL(b.url, location.href).toString()) : fromBlob(b.blob, b.name));
}

async function run(req: EvalRequest): Promise<void> {
  running = new AbortController();
  const signal = running.signal;
  const check = () => {
    if (signal.aborted) throw new WebquantError(ErrorCodes.ABORTED, '[demo] the evaluation was cancelled', {});
  };
  try {
    post({ type: 'stage', text: 'Opening the original…' });
    const original = await openInput(req.original);
    if (original.checkpoint.format !== 'safetensors') {
      throw new WebquantError(ErrorCodes.BAD_INPUT, `[demo] the original must be the Hugging Face safetensors checkpoint; ${original.checkpoint.source} is ${original.checkpoint.format}`, {
        file: original.checkpoint.source, value: original.checkpoint.format, expected: 'safetensors',
      });
    }
    if (!original.config) {
      throw new WebquantError(ErrorCodes.CONFIG, `[demo] the original needs its config.json (beside the URL, or chosen with the file)`, { file: original.checkpoint.source, expected: 'config.json' });
    }
    const config = llamaConfig(original.config);
    check();
    post({ type: 'stage', text: `Reading the tokens (${nameOf(req.tokens)})…` });
    const tokens = readTokens(await bytesOf(req.tokens, 'token file'), nameOf(req.tokens));
    check();
    post({ type: 'stage', text: `Loading the quantized weights (${nameOf(req.quantized)})…` });
    const candidate = await quantizedWeights(await openBytes(req.quantized), config, { original: original.checkpoint.source });
    check();
    post({ type: 'stage', text: 'Evaluating…' });
    const result = await evaluate({
      reference: { config, weights: checkpointWeights(original.checkpoint, config) },
      candidate, tokens, maxDocs: req.maxDocs, contextLength: req.contextLength, signal,
      onProgress: (p) => post({ type: 'progress', ...p }),
    });
    post({ type: 'done', result, build: hasSimd() ? 'wasm-simd' : 'wasm' });
  } catch (e) {
    post({ type: 'error', error: e instanceof WebquantError ? e.toJSON() : { name: (e as Error)?.name ?? 'Error', message: (e as Error)?.message ?? String(e) } });
  } finally {
    running = undefined;
  }
}
