// The demo page's evaluation panel in Debian's Chromium, from Vite's dev server and from the
// `vite build` bundle: stories260K (BF16, by URL) against its quantization (the page's own result,
// or a chosen file), on the TinyStories dev tokens fetched by URL, in a Web Worker. The numbers must
// be those evaluate() gives on Node for the same inputs; cancel ends a run with E_ABORTED.
// CI installs chromium; without it this test fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { evaluate, type EvaluateResult } from '../../src/eval/evaluate.js';
import { checkpointWeights, llamaConfig } from '../../src/eval/llama.js';
import { quantizedWeights } from '../../src/eval/quantized.js';
import { readTokens } from '../../src/eval/tokens.js';
import { readConfig } from '../../src/io/config.js';
import { fromBuffer, openCheckpoint } from '../../src/io/index.js';
import { fromPath } from '../../src/io/node.js';
import { hasSimd } from '../../src/kernels/loader.js';
import { SHARED, sharedBytes } from '../helpers/shared.js';
import { cliReference, STORIES_BF16, STORIES_CONFIG } from '../helpers/quantize-ref.js';
import { dirRoute, startDemoServer, type DemoServer } from './server.js';
import type { DemoState } from '../../web/src/main.js';
import { CHROMIUM, closeChromium, launchChromium, MISSING } from './chromium.js';


/**
 * Page against Node, relative to each figure. Both run the same TypeScript forward on the same
 * SIMD wasm kernels in V8, so the forward's logits are the same; what may differ is the last bit
 * of Math.exp between the two V8 versions. Measured: NLL, perplexity and delta NLL identical, KL
 * within 4e-14 relative (it sums exp(lp) over the whole vocabulary at every position). 1e-12
 * leaves room for that and is far below any difference a quantization format makes (> 1e-4).
 */
const EVAL_REL_TOL = 1e-12;

const DOCS = 20;
type Evaluation = NonNullable<DemoState['evaluation']>;

let browser: Browser | undefined;
let tmp = '';
const dev = sharedBytes('eval/tinystories_dev.tokens.u16');

/** evaluate() on Node: the BF16 original against a quantized file, as the page's Worker runs it. */
async function nodeEvaluation(quantized: Uint8Array, maxDocs: number): Promise<EvaluateResult> {
  const cfgSrc = fromPath(STORIES_CONFIG);
  const orig = fromPath(STORIES_BF16);
  try {
    const config = llamaConfig(await readConfig(cfgSrc));
    const candidate = await quantizedWeights(await openCheckpoint(fromBuffer(quantized)), config);
    return await evaluate({ reference: { config, weights: checkpointWeights(await openCheckpoint(orig)) }, candidate, tokens: readTokens(dev), maxDocs });
  } finally {
    await cfgSrc.close();
    await orig.close();
  }
}

function close(got: number, want: number, what: string): void {
  expect(Math.abs(got - want), `${what}: ${got} vs ${want}`).toBeLessThanOrEqual(EVAL_REL_TOL * Math.abs(want));
}

function sameNumbers(got: EvaluateResult, want: EvaluateResult): void {
  expect(got.documents).toBe(want.documents);
  expect(got.reference.tokens).toBe(want.reference.tokens);
  close(got.reference.nll, want.reference.nll, 'reference NLL');
  close(got.reference.ppl, want.reference.ppl, 'reference PPL');
  close(got.candidate!.nll, want.candidate!.nll, 'quantized NLL');
  close(got.candidate!.ppl, want.candidate!.ppl, 'quantized PPL');
  close(got.deltaNll!, want.deltaNll!, 'delta NLL');
  close(got.klDivergence!, want.klDivergence!, 'KL');
  expect(got.top1Agreement).toBe(want.top1Agreement);
  expect(got.perLayer!.length).toBe(want.perLayer!.length);
  got.perLayer!.forEach((l, i) => {
    expect(l.count).toBe(want.perLayer![i].count);
    for (const k of ['rmse', 'maxAbsError', 'sqnrDb', 'cosine'] as const) close(l[k], want.perLayer![i][k], `layer ${i} ${k}`);
  });
}

const evaluation = (page: Page) => page.evaluate(() => {
  const e = (globalThis as unknown as { webquantDemo: DemoState }).webquantDemo.evaluation;
  return e && { ...e };
}) as Promise<Evaluation | undefined>;

/** Clicks Evaluate and waits for the outcome. */
async function evaluateInPage(page: Page): Promise<Evaluation> {
  await page.click('#eval-run');
  await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('eval-status')?.dataset.state ?? ''));
  return (await evaluation(page))!;
}

beforeAll(async () => {
  ({ browser, tmp } = await launchChromium('webquant-demo-eval-'));
});

afterAll(() => closeChromium(browser, tmp));

it('finds Chromium', () => {
  expect(existsSync(CHROMIUM), MISSING).toBe(true);
});

describe.each([
  ['dev', 'Vite dev server (sources)'],
  ['build', 'vite build bundle'],
] as const)('demo evaluation panel in Chromium, %s: %s', (mode) => {
  let server: DemoServer | undefined;
  let page: Page;
  let origin = '';
  const pageErrors: string[] = [];
  let q8: Promise<Buffer>;
  let nf4: Promise<Buffer>;
  let oneWorker: EvaluateResult | undefined;

  beforeAll(async () => {
    if (!browser) throw new Error(MISSING);
    q8 = cliReference(tmp, 'q8_0', 'gguf');
    nf4 = cliReference(tmp, 'nf4', 'safetensors');
    server = await startDemoServer(mode, [
      dirRoute('/models/', join(SHARED, 'models')),
      dirRoute('/eval/', join(SHARED, 'eval')),
    ], join(tmp, `dist-${mode}`));
    origin = server.origin;
    page = await browser!.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) pageErrors.push(m.text()); });
    await page.goto(`${origin}/`);
    await page.waitForFunction(() => (globalThis as { webquantDemo?: unknown }).webquantDemo !== undefined);
    await page.fill('#url', `${origin}/models/stories260K/model.bf16.safetensors`);
    await page.fill('#eval-tokens-url', `${origin}/eval/tinystories_dev.tokens.u16`);
    await page.fill('#eval-docs', String(DOCS));
  }, 120_000);

  afterAll(async () => {
    await page?.close();
    await server?.close();
  });

  it('the result of the page (q8_0 GGUF): the numbers evaluate() gives on Node', async () => {
    await page.selectOption('#scheme', 'preset:q8_0');
    await page.click('#run');
    await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('status')?.dataset.state ?? ''));
    expect(await page.getAttribute('#status', 'data-state')).toBe('done');

    const ev = await evaluateInPage(page);
    expect(ev.error).toBeUndefined();
    expect(ev).toMatchObject({ state: 'done', quantized: 'stories260K-q8_0.gguf' });
    expect(ev.result!.build).toBe('wasm-simd');
    expect(hasSimd()).toBe(true);
    const want = await nodeEvaluation(new Uint8Array(await q8), DOCS);
    sameNumbers(ev.result!, want);
    expect(ev.progress).toEqual({ documents: DOCS, totalDocuments: DOCS, tokens: want.reference.tokens });

    // What the panel shows.
    const rows = await page.$$eval('#eval-summary tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(rows).toEqual([
      ['original', want.reference.nll.toFixed(5), want.reference.ppl.toFixed(3)],
      ['quantized', want.candidate!.nll.toFixed(5), want.candidate!.ppl.toFixed(3)],
    ]);
    const cost = await page.textContent('#eval-cost');
    expect(cost).toContain(`ΔNLL ${want.deltaNll!.toFixed(5)}`);
    expect(cost).toContain(`KL(original ‖ quantized) ${want.klDivergence!.toExponential(3)}`);
    expect(cost).toContain(`top-1 agreement ${(100 * want.top1Agreement!).toFixed(2)} %`);
    const layers = await page.$$eval('#eval-layers tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(layers.map((r) => r[0])).toEqual(['0', '1', '2', '3', '4']);
    layers.forEach((r, i) => expect(r[1]).toBe(want.perLayer![i].rmse.toExponential(3)));
    // q8_0 costs something, but little
    expect(want.klDivergence!).toBeGreaterThan(0);
    expect(want.top1Agreement!).toBeGreaterThan(0.9);
    oneWorker = ev.result!;
  });

  it('Threads 2 and 3 (each Worker its own models, the windows added in order): the numbers of one Worker, exactly', async () => {
    // short windows, so that documents span several and the Workers finish out of order
    await page.fill('#eval-context', '64');
    await page.fill('#eval-threads', '1');
    try {
      const one = await evaluateInPage(page);
      expect(one.state).toBe('done');
      const figures = (r: EvaluateResult) => JSON.stringify({ ...r, seconds: 0, build: undefined });
      for (const threads of ['2', '3']) {
        await page.fill('#eval-threads', threads);
        const ev = await evaluateInPage(page);
        expect(ev.error).toBeUndefined();
        expect(figures(ev.result!)).toBe(figures(one.result!));
        expect(ev.progress).toEqual({ documents: DOCS, totalDocuments: DOCS, tokens: one.result!.reference.tokens });
        expect(await page.textContent('#eval-status')).toContain(`${threads} Web Workers`);
      }
      // with the default context too, against the first test's run
      await page.fill('#eval-context', '512');
      await page.fill('#eval-threads', '2');
      const ev = await evaluateInPage(page);
      expect(figures(ev.result!)).toBe(figures(oneWorker!));
      // Cancel ends a run on several Workers with E_ABORTED as well
      await page.fill('#eval-docs', '');
      await page.click('#eval-run');
      await page.waitForFunction(() => ((globalThis as unknown as { webquantDemo: DemoState }).webquantDemo.evaluation?.progress?.documents ?? 0) >= 3);
      await page.click('#eval-cancel');
      await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('eval-status')?.dataset.state ?? ''));
      expect((await evaluation(page))!.error).toMatchObject({ isWebquantError: true, code: 'E_ABORTED' });
    } finally {
      await page.fill('#eval-context', '512');
      await page.fill('#eval-threads', '1');
      await page.fill('#eval-docs', String(DOCS));
    }
  });

  it('a chosen quantized file (nf4 safetensors): the numbers evaluate() gives on Node', async () => {
    const file = join(tmp, `chosen-${mode}-nf4.safetensors`);
    const bytes = await nf4;
    writeFileSync(file, bytes);
    await page.setInputFiles('#eval-quantized-file', file);
    await page.fill('#eval-docs', '8');
    try {
      const ev = await evaluateInPage(page);
      expect(ev.error).toBeUndefined();
      expect(ev.quantized).toBe(`chosen-${mode}-nf4.safetensors`);
      sameNumbers(ev.result!, await nodeEvaluation(new Uint8Array(bytes), 8));
    } finally {
      await page.setInputFiles('#eval-quantized-file', []);
      await page.fill('#eval-docs', String(DOCS));
    }
  });

  it('Cancel ends a run with E_ABORTED, and the next run works', async () => {
    await page.fill('#eval-docs', ''); // every document: minutes, unless cancelled
    try {
      await page.click('#eval-run');
      await page.waitForFunction(() => ((globalThis as unknown as { webquantDemo: DemoState }).webquantDemo.evaluation?.progress?.documents ?? 0) >= 3);
      await page.click('#eval-cancel');
      await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('eval-status')?.dataset.state ?? ''));
      const ev = (await evaluation(page))!;
      expect(ev.state).toBe('error');
      expect(ev.error).toMatchObject({ name: 'WebquantError', isWebquantError: true, code: 'E_ABORTED' });
      expect(ev.progress!.documents).toBeLessThan(ev.progress!.totalDocuments);
      expect(await page.textContent('#eval-status')).toContain('E_ABORTED');
    } finally {
      await page.fill('#eval-docs', String(DOCS));
    }
    expect((await evaluateInPage(page)).state).toBe('done');
  });

  it('a token file that is not there is an E_IO WebquantError from the Worker', async () => {
    await page.fill('#eval-tokens-url', `${origin}/eval/missing.u16`);
    try {
      const ev = await evaluateInPage(page);
      expect(ev.state).toBe('error');
      expect(ev.error).toMatchObject({ isWebquantError: true, code: 'E_IO' });
    } finally {
      await page.fill('#eval-tokens-url', `${origin}/eval/tinystories_dev.tokens.u16`);
    }
  });

  it('logged no page errors', () => {
    expect(pageErrors).toEqual([]);
  });
});
