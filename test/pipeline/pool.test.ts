import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { quantize, WebquantError, f32ToF16 } from '../../src/index.js';
import { createPool, type WorkerPool } from '../../src/pipeline/pool.js';
import { compiledModule } from '../../src/kernels/loader.js';
import { liveWorkerThreads } from '../../src/pipeline/spawn-node.js';
import { compiledUrl, randomValues, sameBytes } from './helpers.js';

const workerUrl = () => compiledUrl('src/pipeline/worker-node.js');
const pools: WorkerPool[] = [];
async function pool(size: number, url = workerUrl()) {
  const p = await createPool({ size, workerUrl: url });
  pools.push(p);
  return p;
}
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.terminate()));
});

const cases = [
  { name: 'a', format: 'q8_0', rows: 48, rowLength: 256, seed: 1 },
  { name: 'b', format: 'q4_0', rows: 33, rowLength: 128, seed: 2 },
  { name: 'c', format: 'q4_0', rows: 7, rowLength: 4096, seed: 3 },
  { name: 'd', format: 'q8_0', rows: 1, rowLength: 32, seed: 4 },
];

describe('worker pool', () => {
  for (const size of [1, 2, 4]) {
    it(`gives the bytes of quantize() with ${size} worker(s), f32 and f16 input`, async () => {
      const p = await pool(size);
      const jobs = cases.flatMap((c) => {
        const v = randomValues(c.rows * c.rowLength, c.seed);
        const h = Uint16Array.from(v, f32ToF16);
        return [
          { c, values: v, dtype: 'f32' as const },
          { c, values: h, dtype: 'f16' as const },
        ];
      });
      const want = await Promise.all(jobs.map((j) => quantize(j.values, { format: j.c.format, rowLength: j.c.rowLength, dtype: j.dtype, metrics: true })));
      const got = await Promise.all(jobs.map((j) => p.quantize({ values: j.values.slice() }, { format: j.c.format, rowLength: j.c.rowLength, dtype: j.dtype, metrics: true, name: j.c.name })));
      for (let i = 0; i < jobs.length; i++) {
        expect(sameBytes(got[i].data, want[i].data), `${jobs[i].c.name} ${jobs[i].dtype}`).toBe(true);
        expect(got[i].layout).toEqual(want[i].layout);
        expect(got[i].options).toEqual(want[i].options);
        expect(got[i].metrics).toEqual(want[i].metrics);
        expect(got[i].shape).toEqual([jobs[i].c.rows, jobs[i].c.rowLength]);
      }
      expect(p.workers).toBeLessThanOrEqual(size);
    });
  }

  it('compiles the kernels once on this thread and hands the module to every worker', async () => {
    const a = await compiledModule('auto');
    expect(a.module).toBeInstanceOf(WebAssembly.Module);
    expect((await compiledModule('auto')).module).toBe(a.module);
    // A source given for the build still wins: a bad one fails the worker's init, naming the file.
    const p = await createPool({ size: 1, workerUrl: workerUrl(), wasm: { [a.build]: 'file:///nonexistent/webquant.wasm' } });
    pools.push(p);
    const err = await p.quantize({ values: randomValues(64, 1) }, { format: 'q8_0', rowLength: 64 }).catch((e) => e);
    expect(err.code).toBe('E_WASM_LOAD');
  });

  it('defaults to one worker per core and refuses a size below 1', async () => {
    const p = await createPool({ workerUrl: workerUrl() });
    pools.push(p);
    expect(p.size).toBe(availableParallelism());
    expect(p.workers).toBe(0); // workers start on demand
    await expect(createPool({ size: 0, workerUrl: workerUrl() })).rejects.toMatchObject({ code: 'E_BAD_OPTION' });
  });

  it('transfers a buffer it owns whole and copies a view of a larger buffer', async () => {
    const p = await pool(1);
    const own = randomValues(64 * 32, 9);
    await p.quantize({ values: own }, { format: 'q8_0', rowLength: 32 });
    expect(own.byteLength).toBe(0); // detached: moved, not copied
    const big = randomValues(128 * 32, 10);
    const view = big.subarray(64 * 32);
    const q = await p.quantize({ values: view }, { format: 'q8_0', rowLength: 32 });
    expect(big.byteLength).toBe(128 * 32 * 4);
    expect(sameBytes(q.data, (await quantize(big.subarray(64 * 32), { format: 'q8_0', rowLength: 32 })).data)).toBe(true);
  });

  it('rejects with the WebquantError thrown in the worker, code and details intact', async () => {
    const p = await pool(2);
    const v = randomValues(4 * 64, 5);
    v[70] = NaN;
    const err = await p.quantize({ values: v }, { format: 'q4_0', rowLength: 64, name: 'blk.0.attn_q.weight' }).catch((e) => e);
    expect(err).toBeInstanceOf(WebquantError);
    expect(err.code).toBe('E_NON_FINITE');
    expect(err.details).toMatchObject({ tensor: 'blk.0.attn_q.weight', index: 70 });
    expect(err.message).toMatch(/^\[quantize\] blk\.0\.attn_q\.weight: value at index 70/);
    const bad = await p.quantize({ values: randomValues(64, 1) }, { format: 'q9_9', rowLength: 64 }).catch((e) => e);
    expect(bad).toBeInstanceOf(WebquantError);
    expect(bad.code).toBe('E_UNKNOWN_FORMAT');
    expect(bad.details.expected).toContain('q8_0');
    // The pool still works after errors.
    const ok = await p.quantize({ values: randomValues(64, 1) }, { format: 'q8_0', rowLength: 64 });
    expect(ok.data.byteLength).toBe(68);
  });

  it('replaces a crashed worker and retries the task once', async () => {
    process.env.WEBQUANT_CRASH_DIR = mkdtempSync(join(tmpdir(), 'wq-crash-'));
    const p = await pool(2, compiledUrl('test/pipeline/fixtures/crash-worker.js'));
    const v = randomValues(16 * 64, 11);
    const want = await quantize(v, { format: 'q4_0', rowLength: 64 });
    let reloads = 0;
    const got = await p.quantize({ values: v.slice(), reload: () => { reloads++; return v.slice(); } }, { format: 'q4_0', rowLength: 64, name: 'crash-once-x' });
    expect(reloads).toBe(1);
    expect(sameBytes(got.data, want.data)).toBe(true);
    // Other work proceeds on the replacement workers.
    const again = await p.quantize({ values: v.slice() }, { format: 'q4_0', rowLength: 64, name: 'fine' });
    expect(sameBytes(again.data, want.data)).toBe(true);
  });

  it('rejects naming the tensor when the retry crashes too', async () => {
    const p = await pool(1, compiledUrl('test/pipeline/fixtures/crash-worker.js'));
    const v = randomValues(16 * 64, 12);
    const err = await p.quantize({ values: v.slice(), reload: () => v.slice() }, { format: 'q4_0', rowLength: 64, name: 'crash-always-blk.3.ffn_up.weight' }).catch((e) => e);
    expect(err).toBeInstanceOf(WebquantError);
    expect(err.code).toBe('E_WORKER_CRASHED');
    expect(err.details.tensor).toBe('crash-always-blk.3.ffn_up.weight');
    expect(err.message).toContain('"crash-always-blk.3.ffn_up.weight"');
    expect(err.message).toContain('twice');
  });

  it('sends a worker its next task ahead while more wait, and retries only the one that ran when it crashes', async () => {
    process.env.WEBQUANT_CRASH_DIR = mkdtempSync(join(tmpdir(), 'wq-crash-'));
    const p = await pool(1, compiledUrl('test/pipeline/fixtures/crash-worker.js'));
    const names = ['crash-once-first', 'second', 'third', 'fourth'];
    const values = names.map((_, i) => randomValues(16 * 64, 20 + i));
    const reloads = names.map(() => 0);
    // Four tasks for one worker: the second is sent before the first (which kills the worker)
    // ends, so it dies with it unstarted and goes back to the queue as it was: it reloads its
    // transferred values, but it is not a second attempt (crash-always would fail on that).
    const got = await Promise.all(names.map((name, i) => p.quantize(
      { values: values[i].slice(), reload: () => { reloads[i]++; return values[i].slice(); } },
      { format: 'q4_0', rowLength: 64, name },
    )));
    for (let i = 0; i < names.length; i++) {
      expect(sameBytes(got[i].data, (await quantize(values[i], { format: 'q4_0', rowLength: 64 })).data), names[i]).toBe(true);
    }
    expect(reloads[0]).toBe(1);
    expect(reloads[1]).toBe(1);
    expect(reloads[3]).toBe(0);
    // A task sent ahead that crashes its worker on its own gets its one retry, and no more.
    const v = randomValues(16 * 64, 30);
    const both = await Promise.allSettled(['fine-a', 'crash-always-b', 'fine-c'].map((name) => p.quantize(
      { values: v.slice(), reload: () => v.slice() }, { format: 'q4_0', rowLength: 64, name },
    )));
    expect(both.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((both[1] as PromiseRejectedResult).reason.code).toBe('E_WORKER_CRASHED');
    expect((both[1] as PromiseRejectedResult).reason.message).toContain('twice');
  });

  it('does not send ahead a task that could not be read again after a crash', async () => {
    process.env.WEBQUANT_CRASH_DIR = mkdtempSync(join(tmpdir(), 'wq-crash-'));
    const p = await pool(1, compiledUrl('test/pipeline/fixtures/crash-worker.js'));
    const v = randomValues(16 * 64, 31);
    const [first, second, third] = await Promise.allSettled(['crash-once-a', 'b', 'c'].map((name, i) => p.quantize(
      { values: v.slice(), reload: i === 0 ? () => v.slice() : undefined }, { format: 'q4_0', rowLength: 64, name },
    )));
    // Without `reload`, b and c wait here until the worker is free: the crash costs them nothing.
    expect([first.status, second.status, third.status]).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
  });

  it('aborts a running task through its signal and terminates everything', async () => {
    const p = await pool(2);
    const ac = new AbortController();
    // Slow enough (Q4_K, ~0.2 s) that the abort lands mid-task even on a loaded machine.
    const big = randomValues(4096 * 1024, 13);
    await p.quantize({ values: randomValues(64, 2) }, { format: 'q8_0', rowLength: 32 });
    expect(liveWorkerThreads()).toBe(1); // the counter sees this pool's threads
    const run = p.quantize({ values: big, signal: ac.signal }, { format: 'q4_k', rowLength: 1024, metrics: true, name: 'big' });
    setTimeout(() => ac.abort(), 5);
    const err = await run.catch((e) => e);
    expect(err).toBeInstanceOf(WebquantError);
    expect(err.code).toBe('E_ABORTED');
    await p.terminate();
    expect(liveWorkerThreads()).toBe(0);
    const after = await p.quantize({ values: randomValues(32, 1) }, { format: 'q8_0', rowLength: 32 }).catch((e) => e);
    expect(after.code).toBe('E_ABORTED');
  });
});
