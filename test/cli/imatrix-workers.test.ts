// `webquant imatrix --workers N` (src/cli/imatrix-workers.ts): chunks spread over worker threads
// that open the model themselves, merged in chunk order into the one-thread result's bits; a
// worker's error keeps its code, a worker that dies or an abort ends the run with a typed error.
import { describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { imatrixOnWorkers } from '../../src/cli/imatrix-workers.js';
import { computeImatrix } from '../../src/eval/imatrix.js';
import { llamaConfig } from '../../src/eval/llama.js';
import { quantizedWeights } from '../../src/eval/quantized.js';
import { openCheckpoint } from '../../src/io/open.js';
import { fromPath } from '../../src/io/node.js';
import { readTokens } from '../../src/eval/tokens.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';
import { compiledUrl } from '../pipeline/helpers.js';
import { SHARED, hasShared } from '../helpers/shared.js';
import { tempDir } from './helpers.js';

const DIR = join(SHARED, 'models/stories260K');
const MODEL = join(DIR, 'model.safetensors');
const tokens = () => readTokens(readFileSync(join(SHARED, 'eval/tinystories_dev.tokens.u16')), 'dev');
const workerUrl = () => compiledUrl('src/cli/imatrix-worker.js');

describe.skipIf(!hasShared)('imatrixOnWorkers', () => {
  // The command's own weights: the checkpoint served as stored (what `webquant imatrix` runs).
  it('three workers over seven chunks give the bits of the one-thread run', async () => {
    const toks = tokens();
    const ctx = 64, chunks = 7;
    const progress: number[] = [];
    const par = await imatrixOnWorkers({ model: MODEL, cwd: DIR, processOutput: true, workers: 3, tokens: toks, ctx, chunks, workerUrl: workerUrl(), onProgress: (p) => progress.push(p.chunks) });
    const src = fromPath(MODEL);
    try {
      const ck = await openCheckpoint(src);
      const config = llamaConfig(JSON.parse(readFileSync(join(DIR, 'config.json'), 'utf8')));
      const one = await computeImatrix({ config, weights: await quantizedWeights(ck, config, { original: MODEL }), tokens: toks, contextLength: ctx, maxChunks: chunks, processOutput: true });
      expect([par.chunks, par.chunkSize]).toEqual([chunks, ctx]);
      expect([...par.entries.keys()].sort()).toEqual([...one.entries.keys()].sort());
      for (const [name, e] of one.entries) {
        expect(par.entries.get(name)!.sums, name).toEqual(e.sums);
        expect(par.entries.get(name)!.counts, name).toEqual(e.counts);
      }
    } finally {
      await src.close();
    }
    expect(progress).toEqual([1, 2, 3, 4, 5, 6, 7]);
  }, 60_000);

  it("a worker's error keeps its code; a worker that exits and an abort end the run with typed errors", async () => {
    const base = { cwd: DIR, processOutput: false, workers: 2, tokens: tokens(), ctx: 64, chunks: 4 };
    const missing = await imatrixOnWorkers({ ...base, model: join(DIR, 'nope.safetensors'), workerUrl: workerUrl() }).catch((e) => e);
    expect(missing).toBeInstanceOf(WebquantError);
    expect((missing as WebquantError).code).toBe(ErrorCodes.IO);
    expect((missing as Error).message).toContain("nope.safetensors does not exist");
    const dir = tempDir('imatrix-workers');
    const exits = join(dir, 'exits.mjs');
    writeFileSync(exits, 'process.exit(3);\n');
    const crashed = await imatrixOnWorkers({ ...base, model: MODEL, workerUrl: pathToFileURL(exits) }).catch((e) => e);
    expect((crashed as WebquantError).code).toBe(ErrorCodes.WORKER_CRASHED);
    expect((crashed as Error).message).toContain('exit code 3');
    const ctl = new AbortController();
    const t = Date.now();
    const run = imatrixOnWorkers({ ...base, chunks: 40, model: MODEL, workerUrl: workerUrl(), signal: ctl.signal, onProgress: () => ctl.abort() });
    const aborted = await run.catch((e) => e);
    expect((aborted as WebquantError).code).toBe(ErrorCodes.ABORTED);
    expect(Date.now() - t).toBeLessThan(30_000);
  }, 60_000);
});
