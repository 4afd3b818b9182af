// `webquant eval --model <original> --quantized <quantized> --tokens <file.u16>`: what quantization
// cost, measured with the reference Llama forward (src/eval) on the quantized weights served by
// src/serve (matvec on the quantized bytes), as src/eval/quantized.ts opens them.
import { readFile } from 'node:fs/promises';
import { ErrorCodes, fail } from '../errors.js';
import { evalDocuments, evalResult, evalWindows, evaluate, windowTotals, type EvaluateResult, type WindowStats } from '../eval/evaluate.js';
import { checkWorkerMemory, runOnWorkers, workerCount } from './forward-workers.js';
import { numel } from '../io/checkpoint.js';
import { checkpointWeights, llamaConfig, type LlamaConfig, type WeightSource } from '../eval/llama.js';
import { checkTensors } from '../eval/config.js';
import { familyView } from '../convert/arch/index.js';
import { quantizedWeights } from '../eval/quantized.js';
import { readTokens } from '../eval/tokens.js';
import type { OptionSpecs, Parsed } from './args.js';
import { absPath, openInput } from './input.js';
import { fmtNum, fmtSci, table, toJSON, type CliIO } from './io.js';

export const EVAL_OPTIONS: OptionSpecs = {
  model: { type: 'string', short: 'm', value: 'checkpoint', help: 'the original (Hugging Face Llama-family safetensors with config.json beside it)' },
  quantized: { type: 'string', short: 'q', value: 'checkpoint', help: 'the quantized checkpoint (a webquant .safetensors output or a .gguf)' },
  tokens: { type: 'string', short: 't', value: 'file.u16', help: 'little-endian uint16 token ids, every document starting with BOS' },
  'max-docs': { type: 'int', value: 'n', help: 'evaluate the first n documents only' },
  context: { type: 'int', value: 'n', help: 'context window in tokens (default 512)' },
  workers: { type: 'int', value: 'n', help: 'run the context windows on n threads, each holding both models (default 1; same figures)' },
  json: { type: 'boolean', help: 'JSON report on stdout' },
  help: { type: 'boolean', short: 'h', help: 'show this help' },
};

export interface EvalCandidate {
  /** The resolved file (or URL) read. */
  file: string;
  /** Hugging Face tensor names, quantized matrices multiplied by the serving kernels. */
  weights: WeightSource;
  close(): Promise<void>;
}

/**
 * Opens a quantized checkpoint (webquant safetensors or GGUF) as the forward's WeightSource, as
 * `webquant eval` does: served weights, a GGUF read through its llama.cpp names with q/k rows put
 * back into Hugging Face order. `original` only names the reference in error messages.
 */
export async function evalCandidate(spec: string, config: LlamaConfig, io: CliIO = { stdout: { write: () => true }, stderr: { write: () => true } }, original = 'the original'): Promise<EvalCandidate> {
  const cand = await openInput(spec, io);
  try {
    return { file: cand.file, weights: await quantizedWeights(cand.checkpoint, config, { original }), close: () => cand.close() };
  } catch (e) {
    await cand.close();
    throw e;
  }
}

/** The --tokens file as token ids (E_IO naming it when it cannot be read). */
export async function readTokenFile(spec: string, io: CliIO): Promise<{ file: string; tokens: Uint16Array }> {
  const file = absPath(spec, io);
  const bytes = await readFile(file).catch((e) => fail(ErrorCodes.IO, `[cli] cannot read the token file ${spec}: ${(e as Error).message}`, { file, option: 'tokens' }));
  return { file, tokens: readTokens(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), file) };
}

/**
 * The --model of `eval` and `imatrix`: a Hugging Face safetensors checkpoint with its config.json,
 * and its forward config. The caller closes `input`, also when this throws after opening it.
 */
export async function openOriginal(spec: string, io: CliIO, command: string, opened: { close(): Promise<void> }[]): Promise<{ input: Awaited<ReturnType<typeof openInput>>; config: LlamaConfig }> {
  const ref = await openInput(spec, io);
  opened.push(ref);
  if (ref.configError) throw ref.configError;
  if (!ref.config) {
    fail(ErrorCodes.CONFIG, `[cli] ${command}: the model needs its config.json beside ${ref.file}`, { file: ref.file, option: 'model', expected: 'config.json' });
  }
  if (ref.checkpoint.format !== 'safetensors') {
    fail(ErrorCodes.BAD_INPUT, `[cli] ${command}: --model must be the Hugging Face safetensors original; ${ref.file} is ${ref.checkpoint.format}`, { file: ref.file, option: 'model', value: ref.checkpoint.format, expected: 'safetensors' });
  }
  const config = llamaConfig(ref.config);
  // Before anything enumerates or allocates by the config's counts (quantizedWeights, the forward).
  checkTensors(config, familyView(ref.checkpoint, config).tensors, ref.file);
  return { input: ref, config };
}

export async function evalCommand(o: Parsed['options'], io: CliIO): Promise<EvaluateResult & { model: string; quantized: string; tokensFile: string }> {
  for (const k of ['model', 'quantized', 'tokens'] as const) {
    if (o[k] === undefined) fail(ErrorCodes.BAD_OPTION, `[cli] eval: --${k} is required`, { option: k });
  }
  const { file: tokensFile, tokens } = await readTokenFile(String(o.tokens), io);
  const opened: { close(): Promise<void> }[] = [];
  try {
    const { input: ref, config } = await openOriginal(String(o.model), io, 'eval', opened);
    const cand = await evalCandidate(String(o.quantized), config, io, ref.file);
    opened.push(cand);
    const candidate = cand.weights;
    const json = !!o.json;
    let last = 0;
    const onProgress = (p: { documents: number; totalDocuments: number; tokens: number }) => {
      if (json || !io.stdout.isTTY || Date.now() - last < 200) return;
      last = Date.now();
      io.stdout.write(`\r\x1b[K${p.documents}/${p.totalDocuments} documents, ${p.tokens} tokens`);
    };
    const workers = workerCount('eval', o.workers);
    const reference = { config, weights: checkpointWeights(ref.checkpoint, config) };
    const maxDocs = o['max-docs'] as number | undefined, contextLength = o.context as number | undefined;
    // The windows are the workers' units; one thread leaves the splitting to evaluate().
    const docs = workers > 1 ? evalDocuments({ reference, tokens, maxDocs, contextLength }) : [];
    const windows = evalWindows(docs, contextLength);
    let result: EvaluateResult;
    if (windows.length > 1) {
      // Each worker holds the original as float32 and the quantized weights (at most the original's stored bytes, as a rule).
      const tensors = ref.checkpoint.tensors;
      checkWorkerMemory('eval', Math.min(workers, windows.length), tensors.reduce((a, t) => a + 4 * numel(t.shape) + t.byteLength, 0));
      const t0 = Date.now();
      const totals = windowTotals(windows, docs.length, onProgress);
      await runOnWorkers({
        workers, signal: io.signal, workerUrl: io.forwardWorkerUrl, spans: windows.map((w) => w.win),
        init: { kind: 'eval', model: String(o.model), quantized: String(o.quantized), contextLength, cwd: io.cwd ?? process.cwd(), env: io.env ? { ...io.env } : undefined },
        merge: (i, r) => totals.add(i, r as WindowStats),
      });
      result = evalResult(totals.total, docs.length, true, (Date.now() - t0) / 1000);
    } else {
      result = await evaluate({ reference, candidate, tokens, maxDocs, contextLength, signal: io.signal, onProgress });
    }
    if (!json && io.stdout.isTTY) io.stdout.write('\r\x1b[K');
    const report = { model: ref.file, quantized: cand.file, tokensFile, ...result };
    if (json) {
      io.stdout.write(toJSON(report) + '\n');
      return report;
    }
    const w = (s: string) => io.stdout.write(s);
    w(`${result.documents} documents, ${result.reference.tokens} predicted tokens, ${result.seconds.toFixed(1)} s\n\n`);
    w(table(['model', 'NLL (nats/token)', 'perplexity'], [
      ['original', fmtNum(result.reference.nll, 5), fmtNum(result.reference.ppl, 3)],
      ['quantized', fmtNum(result.candidate!.nll, 5), fmtNum(result.candidate!.ppl, 3)],
    ], [1, 2]));
    w(`\ndelta NLL ${fmtNum(result.deltaNll, 5)}   KL(original || quantized) ${fmtSci(result.klDivergence)} nats/token   top-1 agreement ${fmtNum(100 * result.top1Agreement!, 2)} %\n`);
    if (result.perLayer) {
      w('\nresidual stream after each layer:\n');
      w(table(['layer', 'RMSE', 'SQNR dB', 'cosine'], result.perLayer.map((l) => [String(l.layer), fmtSci(l.rmse), fmtNum(l.sqnrDb, 1), fmtNum(l.cosine, 5)]), [0, 1, 2, 3]));
    }
    return report;
  } finally {
    await Promise.all(opened.map((x) => x.close()));
  }
}
