// The evaluation Worker: opens the original and the quantized checkpoint, reads the tokens and runs
// evaluate() (src/eval) on them, off the page's thread ('run'); or, one of several, opens them and
// runs the context windows the page sends ('open', 'window'; evaluation.ts adds the sums up). One
// evaluation per Worker; the page ends it after the answer. Cancel aborts evaluate() between
// documents (E_ABORTED, like any other error).
import {
  checkpointWeights, evaluate, fromBlob, fromUrl, hasSimd, llamaConfig, openCheckpoint, quantizedWeights, readTokens,
  ErrorCodes, WebquantError, type Checkpoint, type ModelInput,
} from '../../src/index.js';
import { evalCollector, evalDocuments, evalWindows, type EvalCollector } from '../../src/eval/evaluate.js';
import './wasm.js';
import { openInput } from './job.js';
import type { Bytes, EvalRequest, FromWorker, OpenRequest, ToWorker } from './eval-protocol.js';

const post = (m: FromWorker) => (self as unknown as Worker).postMessage(m);
let running: AbortController | undefined;

let collector: EvalCollector | undefined;

self.onmessage = (ev: MessageEvent<ToWorker>) => {
  const m = ev.data;
  if (m.type === 'cancel') running?.abort();
  else if (m.type === 'run') void run(m);
  else if (m.type === 'open') void open(m);
  else void runWindow(m.index, m.tokens);
};

const fault = (e: unknown) => post({ type: 'error', error: e instanceof WebquantError ? e.toJSON() : { name: (e as Error)?.name ?? 'Error', message: (e as Error)?.message ?? String(e) } });

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
  if (!('url' in b)) return openCheckpoint(fromBlob(b.blob, b.name));
  const url = new URL(b.url, location.href);
  return openCheckpoint(fromUrl(url.toString()), { splits: (f) => fromUrl(new URL(f, url).toString()) });
}

interface Opened { reference: ModelInput; candidate: Awaited<ReturnType<typeof quantizedWeights>>; tokens?: Uint16Array }

// The models, and the tokens when `withTokens` (a Worker that is only sent windows needs none).
async function openAll(req: Omit<EvalRequest, 'type'>, check: () => void, withTokens = true): Promise<Opened> {
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
  let tokens: Uint16Array | undefined;
  if (withTokens) {
    post({ type: 'stage', text: `Reading the tokens (${nameOf(req.tokens)})…` });
    tokens = readTokens(await bytesOf(req.tokens, 'token file'), nameOf(req.tokens));
    check();
  }
  post({ type: 'stage', text: `Loading the quantized weights (${nameOf(req.quantized)})…` });
  const candidate = await quantizedWeights(await openBytes(req.quantized), config, { original: original.checkpoint.source });
  check();
  return { reference: { config, weights: checkpointWeights(original.checkpoint, config) }, candidate, tokens };
}

async function run(req: EvalRequest): Promise<void> {
  running = new AbortController();
  const signal = running.signal;
  const check = () => {
    if (signal.aborted) throw new WebquantError(ErrorCodes.ABORTED, '[demo] the evaluation was cancelled', {});
  };
  try {
    const o = await openAll(req, check);
    post({ type: 'stage', text: 'Evaluating…' });
    const result = await evaluate({
      reference: o.reference, candidate: o.candidate, tokens: o.tokens!, maxDocs: req.maxDocs, contextLength: req.contextLength, signal,
      onProgress: (p) => post({ type: 'progress', ...p }),
    });
    post({ type: 'done', result, build: hasSimd() ? 'wasm-simd' : 'wasm' });
  } catch (e) {
    fault(e);
  } finally {
    running = undefined;
  }
}

async function open(req: OpenRequest): Promise<void> {
  try {
    const o = await openAll(req, () => undefined, req.plan);
    collector = await evalCollector({ reference: o.reference, candidate: o.candidate, contextLength: req.contextLength });
    let plan;
    if (req.plan) {
      const docs = evalDocuments({ reference: o.reference, tokens: o.tokens!, maxDocs: req.maxDocs, contextLength: req.contextLength });
      // copies: a view would carry the whole token file with every window
      plan = { windows: evalWindows(docs, req.contextLength).map((w) => ({ win: w.win.slice(), doc: w.doc })), documents: docs.length };
    }
    post({ type: 'opened', plan, build: hasSimd() ? 'wasm-simd' : 'wasm' });
  } catch (e) {
    fault(e);
  }
}

async function runWindow(index: number, tokens: Uint16Array): Promise<void> {
  try {
    if (!collector) throw new WebquantError(ErrorCodes.WORKER, '[demo] a window before the models were opened', {});
    const stats = collector.window(tokens);
    (self as unknown as Worker).postMessage({ type: 'window-done', index, stats } satisfies FromWorker, stats.layers.map((l) => l.buffer as ArrayBuffer));
  } catch (e) {
    fault(e);
  }
}
