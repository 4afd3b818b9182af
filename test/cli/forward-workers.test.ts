// --workers of `webquant imatrix` and `webquant eval` (src/cli/forward-workers.ts): token spans
// spread over worker threads that open the models themselves, merged in span order into the
// one-thread run's bits; a worker's error keeps its code, a worker that exits and an abort end
// the run with typed errors.
import { describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { checkWorkerMemory, runOnWorkers } from '../../src/cli/forward-workers.js';
import type { ForwardInit } from '../../src/cli/forward-worker.js';
import { computeImatrix, mergeImatrixChunk, type ImatrixChunk, type ImatrixEntry } from '../../src/eval/imatrix.js';
import { emptyStats, evalDocuments, evalResult, evalWindows, evaluate, mergeWindow, type WindowStats } from '../../src/eval/evaluate.js';
import { checkpointWeights, llamaConfig } from '../../src/eval/llama.js';
import { quantizedWeights } from '../../src/eval/quantized.js';
import { openCheckpoint } from '../../src/io/open.js';
import { fromPath } from '../../src/io/node.js';
import { readTokens } from '../../src/eval/tokens.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';
import { compiledUrl } from '../pipeline/helpers.js';
import { SHARED, hasShared } from '../helpers/shared.js';
import { cliProcess, ensureBuilt, tempDir } from './helpers.js';

const DIR = join(SHARED, 'models/stories260K');
const MODEL = join(DIR, 'model.safetensors');
const tokens = (split: string) => readTokens(readFileSync(join(SHARED, `eval/tinystories_${split}.tokens.u16`)), split);
const workerUrl = () => compiledUrl('src/cli/forward-worker.js');
const config = () => llamaConfig(JSON.parse(readFileSync(join(DIR, 'config.json'), 'utf8')));

async function withModel<T>(f: (ck: Awaited<ReturnType<typeof openCheckpoint>>) => Promise<T>): Promise<T> {
  const src = fromPath(MODEL);
  try {
    return await f(await openCheckpoint(src));
  } finally {
    await src.close();
  }
}

describe.skipIf(!hasShared)('runOnWorkers', () => {
  // The commands' own weights: the checkpoint served as stored (imatrix), the original read as
  // float32 against the quantized file served (eval).
  it('imatrix: three workers over seven chunks give the bits of the one-thread run, merged in order', async () => {
    const toks = tokens('dev');
    const ctx = 64, chunks = 7;
    const order: number[] = [];
    const entries = new Map<string, ImatrixEntry>();
    await runOnWorkers({
      workers: 3, workerUrl: workerUrl(), init: { kind: 'imatrix', model: MODEL, cwd: DIR, processOutput: true },
      spans: Array.from({ length: chunks }, (_, i) => toks.subarray(i * ctx, (i + 1) * ctx)),
      merge(i, r) {
        order.push(i);
        mergeImatrixChunk(entries, r as ImatrixChunk);
      },
    });
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6]);
    const c = config();
    const one = await withModel(async (ck) => computeImatrix({ config: c, weights: await quantizedWeights(ck, c, { original: MODEL }), tokens: toks, contextLength: ctx, maxChunks: chunks, processOutput: true }));
    expect([...entries.keys()].sort()).toEqual([...one.entries.keys()].sort());
    for (const [name, e] of one.entries) {
      expect(entries.get(name)!.sums, name).toEqual(e.sums);
      expect(entries.get(name)!.counts, name).toEqual(e.counts);
    }
  }, 60_000);

  it("eval: two workers over the windows of 25 documents give evaluate()'s figures exactly", async () => {
    const tmp = tempDir('forward-eval');
    await ensureBuilt();
    const q = await cliProcess(['quantize', MODEL, '-o', 'q.gguf', '--preset', 'q4_0'], { cwd: tmp });
    expect(q.code, q.stderr).toBe(0);
    const c = config();
    const toks = tokens('test');
    const docs = await withModel(async (ck) => evalDocuments({ reference: { config: c, weights: checkpointWeights(ck, c) }, tokens: toks, maxDocs: 25, contextLength: 48 }));
    const total = emptyStats();
    await runOnWorkers({
      workers: 2, workerUrl: workerUrl(), spans: evalWindows(docs, 48).map((w) => w.win),
      init: { kind: 'eval', model: MODEL, quantized: join(tmp, 'q.gguf'), contextLength: 48, cwd: DIR },
      merge: (_i, r) => mergeWindow(total, r as WindowStats),
    });
    const par = evalResult(total, docs.length, true, 0);
    const { openInput } = await import('../../src/cli/input.js');
    const quiet = { write: () => true };
    const cand = await openInput(join(tmp, 'q.gguf'), { stdout: quiet, stderr: quiet });
    try {
      const one = await withModel(async (ck) => evaluate({
        reference: { config: c, weights: checkpointWeights(ck, c) }, candidate: await quantizedWeights(cand.checkpoint, c), tokens: toks, maxDocs: 25, contextLength: 48,
      }));
      expect({ ...par, seconds: 0 }).toEqual({ ...one, seconds: 0 });
      expect(par.klDivergence).toBeGreaterThan(0);
    } finally {
      await cand.close();
    }
  }, 120_000);

  it("a worker's error keeps its code; a worker that exits and an abort end the run with typed errors", async () => {
    const toks = tokens('dev');
    const init: ForwardInit = { kind: 'imatrix', model: MODEL, cwd: DIR, processOutput: false };
    const spans = Array.from({ length: 40 }, (_, i) => toks.subarray(i * 64, (i + 1) * 64));
    const base = { workers: 2, spans, merge: () => undefined };
    const missing = await runOnWorkers({ ...base, workerUrl: workerUrl(), init: { ...init, model: join(DIR, 'nope.safetensors') } }).catch((e) => e);
    expect(missing).toBeInstanceOf(WebquantError);
    expect((missing as WebquantError).code).toBe(ErrorCodes.IO);
    expect((missing as Error).message).toContain('nope.safetensors does not exist');
    const exits = join(tempDir('forward-workers'), 'exits.mjs');
    writeFileSync(exits, 'process.exit(3);\n');
    const crashed = await runOnWorkers({ ...base, init, workerUrl: pathToFileURL(exits) }).catch((e) => e);
    expect((crashed as WebquantError).code).toBe(ErrorCodes.WORKER_CRASHED);
    expect((crashed as Error).message).toContain('exit code 3');
    const ctl = new AbortController();
    const t = Date.now();
    let merged = 0;
    const aborted = await runOnWorkers({ ...base, init, workerUrl: workerUrl(), signal: ctl.signal, merge: () => { merged++; ctl.abort(); } }).catch((e) => e);
    expect((aborted as WebquantError).code).toBe(ErrorCodes.ABORTED);
    expect(merged).toBeLessThan(40);
    expect(Date.now() - t).toBeLessThan(30_000);
  }, 60_000);
});

describe('checkWorkerMemory', () => {
  it('refuses more model copies than the memory holds, naming the count that fits', () => {
    const err = (() => { try { checkWorkerMemory('eval', 4, 3e9, 8e9); } catch (e) { return e as WebquantError; } })();
    expect(err?.code).toBe(ErrorCodes.BAD_OPTION);
    expect(err?.message).toBe('[cli] eval: --workers 4 would hold 4 copies of the model, about 12.0 GB (3.0 GB each), but this machine has 8.0 GB; use fewer workers');
    expect(err?.details).toMatchObject({ option: 'workers', value: 4, expected: '<= 2' });
    expect(() => checkWorkerMemory('eval', 2, 3e9, 8e9)).not.toThrow();
    // One worker runs in the command's own thread, whatever the model's size.
    expect(() => checkWorkerMemory('imatrix', 1, 30e9, 8e9)).not.toThrow();
  });
});
