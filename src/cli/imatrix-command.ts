// `webquant imatrix --model <original> --tokens <file.u16> -o imatrix.gguf`: an importance matrix
// computed from calibration tokens by the reference forward (src/eval/imatrix.ts) on the served
// original weights, written in llama.cpp's GGUF imatrix format for `webquant quantize --imatrix`
// and llama-quantize. The file appears whole or not at all.
import { basename } from 'node:path';
import { ErrorCodes, fail } from '../errors.js';
import { computeImatrix, imatrixChunks, imatrixGguf, mergeImatrixChunk, type ImatrixChunk, type ImatrixEntry, type ImatrixResult } from '../eval/imatrix.js';
import { quantizedWeights } from '../eval/quantized.js';
import { writeGguf } from '../io/gguf-writer.js';
import { fileSink } from '../pipeline/sink-node.js';
import type { OptionSpecs, Parsed } from './args.js';
import { absPath } from './input.js';
import { openOriginal, readTokenFile } from './eval.js';
import { toJSON, type CliIO } from './io.js';
import { checkWorkerMemory, runOnWorkers, workerCount } from './forward-workers.js';

export const IMATRIX_OPTIONS: OptionSpecs = {
  model: { type: 'string', short: 'm', value: 'checkpoint', help: 'the model (Hugging Face safetensors with config.json beside it)' },
  tokens: { type: 'string', short: 't', value: 'file.u16', help: 'calibration text as little-endian uint16 token ids' },
  output: { type: 'string', short: 'o', value: 'file.gguf', help: 'where to write the importance matrix (GGUF imatrix format)' },
  chunks: { type: 'int', value: 'n', help: 'use the first n chunks only' },
  context: { type: 'int', value: 'n', help: 'tokens per chunk (default 512, as llama-imatrix)' },
  'process-output': { type: 'boolean', help: 'also collect the output head (llama-imatrix --process-output)' },
  workers: { type: 'int', value: 'n', help: 'run the chunks on n threads, each holding the whole model (default 1; same output)' },
  json: { type: 'boolean', help: 'JSON report on stdout' },
  help: { type: 'boolean', short: 'h', help: 'show this help' },
};

export interface ImatrixReport {
  model: string;
  output: string;
  chunks: number;
  chunkSize: number;
  tensors: number;
  seconds: number;
}

export async function imatrixCommand(o: Parsed['options'], io: CliIO): Promise<ImatrixReport> {
  for (const k of ['model', 'tokens', 'output'] as const) {
    if (o[k] === undefined || String(o[k]).trim() === '') fail(ErrorCodes.BAD_OPTION, `[cli] imatrix: --${k} is required`, { option: k });
  }
  const out = absPath(String(o.output), io);
  if (!out.endsWith('.gguf')) {
    fail(ErrorCodes.BAD_OPTION, `[cli] imatrix: -o ${basename(out)} must end in .gguf (llama.cpp's GGUF imatrix format)`, { option: 'output', value: o.output, expected: '.gguf' });
  }
  const { file: tokensFile, tokens } = await readTokenFile(String(o.tokens), io);
  const t0 = Date.now();
  const opened: { close(): Promise<void> }[] = [];
  try {
    const { input: ref, config } = await openOriginal(String(o.model), io, 'imatrix', opened);
    let last = 0;
    const onProgress = (p: { chunks: number; totalChunks: number }) => {
      if (o.json || !io.stdout.isTTY || Date.now() - last < 200) return;
      last = Date.now();
      io.stdout.write(`\r\x1b[K${p.chunks}/${p.totalChunks} chunks`);
    };
    const workers = workerCount('imatrix', o.workers);
    const contextLength = o.context as number | undefined, maxChunks = o.chunks as number | undefined, processOutput = !!o['process-output'];
    const { ctx, chunks } = imatrixChunks({ tokens, contextLength, maxChunks });
    let result: ImatrixResult;
    if (workers > 1 && chunks > 1) {
      // Each worker serves the weights as stored.
      checkWorkerMemory('imatrix', Math.min(workers, chunks), ref.checkpoint.tensors.reduce((a, t) => a + t.byteLength, 0));
      const entries = new Map<string, ImatrixEntry>();
      await runOnWorkers({
        workers, signal: io.signal, workerUrl: io.forwardWorkerUrl,
        init: { kind: 'imatrix', model: String(o.model), cwd: io.cwd ?? process.cwd(), env: io.env ? { ...io.env } : undefined, processOutput },
        spans: Array.from({ length: chunks }, (_, i) => tokens.subarray(i * ctx, (i + 1) * ctx)),
        merge(i, r) {
          mergeImatrixChunk(entries, r as ImatrixChunk);
          onProgress({ chunks: i + 1, totalChunks: chunks });
        },
      });
      result = { entries, chunks, chunkSize: ctx };
    } else {
      result = await computeImatrix({
        config, tokens, weights: await quantizedWeights(ref.checkpoint, config, { original: ref.file }),
        contextLength, maxChunks, processOutput, signal: io.signal, onProgress,
      });
    }
    if (!o.json && io.stdout.isTTY) io.stdout.write('\r\x1b[K');
    const sink = await fileSink(out);
    try {
      for await (const c of writeGguf(imatrixGguf(result, basename(tokensFile)))) await sink.write(c);
      await sink.close();
    } catch (e) {
      await sink.abort(e).catch(() => undefined);
      throw e;
    }
    const report: ImatrixReport = { model: ref.file, output: out, chunks: result.chunks, chunkSize: result.chunkSize, tensors: result.entries.size, seconds: (Date.now() - t0) / 1000 };
    if (o.json) io.stdout.write(toJSON(report) + '\n');
    else io.stdout.write(`wrote ${out}: importance of ${report.tensors} tensors from ${report.chunks} chunks of ${report.chunkSize} tokens in ${report.seconds.toFixed(1)} s\n`);
    return report;
  } finally {
    await Promise.all(opened.map((x) => x.close()));
  }
}
