// The demo page in Debian's Chromium, from Vite's dev server and from the `vite build` bundle: it
// fetches stories260K by URL (Range reads), quantizes it on Web Workers through the pipeline and
// must produce the very bytes `webquant quantize` writes on Node for the same input and preset.
// CI installs chromium; without it this test fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { SHARED } from '../helpers/shared.js';
import { buildSafetensors, f32Bytes, randomValues } from '../pipeline/helpers.js';
import { cliImatrix, cliReference, firstDifference, STORIES_BF16 as MODEL, STORIES_CONFIG } from '../helpers/quantize-ref.js';
import { bytesRoute, dirRoute, startDemoServer, type DemoServer, type RequestRecord } from './server.js';
import type { DemoState } from '../../web/src/main.js';

const CHROMIUM = '/usr/bin/chromium';
// /work/shared/README.md, "Platform facts".
const FLAGS = [
  '--no-sandbox', '--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-vulkan=swiftshader', '--use-webgpu-adapter=swiftshader',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run',
];

/** A small checkpoint whose up_proj holds a NaN: only a worker's kernel call finds it. */
function nanCheckpoint(): Uint8Array {
  const v = randomValues(64 * 64, 7);
  v[5 * 64 + 3] = NaN;
  return buildSafetensors([{ name: 'model.layers.0.mlp.up_proj.weight', dtype: 'F32', shape: [64, 64], data: f32Bytes(v) }]);
}

let browser: Browser | undefined;
let tmp = '';
const references = new Map<string, Promise<Buffer>>();
const reference = (preset: string, ext: 'gguf' | 'safetensors') => {
  let r = references.get(preset);
  if (!r) references.set(preset, (r = cliReference(tmp, preset, ext)));
  return r;
};

const MISSING = `${CHROMIUM} is missing: the browser tests need Debian's chromium (apt-get install -y chromium); they are never skipped`;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'webquant-browser-'));
  if (existsSync(CHROMIUM)) browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
});

afterAll(async () => {
  await Promise.allSettled(references.values());
  await browser?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** Runs the page's form as a user would and waits for the outcome. */
async function runInPage(page: Page, url: string, scheme: string): Promise<DemoState> {
  await page.fill('#url', url);
  await page.selectOption('#scheme', scheme);
  await page.click('#run');
  await page.waitForFunction(() => {
    const s = document.getElementById('status')?.dataset.state;
    return s === 'done' || s === 'error';
  });
  return page.evaluate(() => {
    const d = (globalThis as unknown as { webquantDemo: DemoState }).webquantDemo;
    return { state: d.state, build: d.build, error: d.error, result: d.result && { ...d.result, blob: undefined } };
  });
}

/** The Blob the page offers for download: its bytes, and the SHA-256 the page computed itself. */
async function outputOfPage(page: Page): Promise<{ bytes: Buffer; sha256: string }> {
  const r = await page.evaluate(async () => {
    const blob = (globalThis as unknown as { webquantDemo: DemoState }).webquantDemo.result!.blob!;
    const buf = await blob.arrayBuffer();
    const hash = new Uint8Array(await crypto.subtle.digest('SHA-256', buf));
    const u8 = new Uint8Array(buf);
    let bin = '';
    for (let i = 0; i < u8.length; i += 0x8000) bin += String.fromCharCode(...u8.subarray(i, i + 0x8000));
    return { b64: btoa(bin), sha256: [...hash].map((b) => b.toString(16).padStart(2, '0')).join('') };
  });
  return { bytes: Buffer.from(r.b64, 'base64'), sha256: r.sha256 };
}

it('finds Chromium', () => {
  expect(existsSync(CHROMIUM), MISSING).toBe(true);
});

describe.each([
  ['dev', 'Vite dev server (sources)'],
  ['build', 'vite build bundle'],
] as const)('demo page in Chromium, %s: %s', (mode) => {
  let server: DemoServer | undefined;
  let page: Page;
  let origin = '';
  const pageErrors: string[] = [];
  const requests: RequestRecord[] = [];

  beforeAll(async () => {
    if (!browser) throw new Error(MISSING);
    server = await startDemoServer(mode, [
      dirRoute('/models/', join(SHARED, 'models'), 0, requests),
      dirRoute('/slow/', join(SHARED, 'models'), 150),
      dirRoute('/lag/', join(SHARED, 'models'), 40),
      bytesRoute('/bad/truncated.safetensors', () => readFileSync(MODEL).subarray(0, 4096)),
      bytesRoute('/bad/nan/model.safetensors', nanCheckpoint),
    ], join(tmp, `dist-${mode}`));
    origin = server.origin;
    page = await browser!.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    // 404s of the optional config.json / tokenizer.json probes are logged by the browser itself.
    page.on('console', (m) => { if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) pageErrors.push(m.text()); });
    await page.goto(`${origin}/`);
    await page.waitForFunction(() => (globalThis as { webquantDemo?: unknown }).webquantDemo !== undefined);
  });

  afterAll(async () => {
    await page?.close();
    await server?.close();
  });

  it.each([
    ['q8_0', 'gguf'],
    ['nf4', 'safetensors'],
    ['mlx4', 'safetensors'],
    ['bnb-nf4', 'safetensors'],
    ['bnb-nf4-dq', 'safetensors'],
    ['bnb-int8', 'safetensors'],
  ] as const)('preset %s: Web Workers write the same %s bytes as the Node pipeline', async (preset, ext) => {
    const ref = reference(preset, ext);
    requests.length = 0;
    const state = await runInPage(page, `${origin}/models/stories260K/model.bf16.safetensors`, `preset:${preset}`);
    // The Web Workers fetched tensors themselves (their requests name the worker script as the
    // referrer); tensors the GGUF view permutes are fetched by the page.
    const model = requests.filter((r) => r.url.endsWith('model.bf16.safetensors') && r.range);
    expect(model.filter((r) => /worker/.test(r.referer ?? '')).length, JSON.stringify(model.slice(0, 3))).toBeGreaterThan(0);
    expect(state.error).toBeUndefined();
    expect(state.state).toBe('done');
    expect(state.build).toBe('wasm-simd');
    expect(state.result).toMatchObject({ kind: ext, fileName: `stories260K-${preset}.${ext}` });

    const want = await ref;
    const got = await outputOfPage(page);
    expect(got.sha256).toBe(createHash('sha256').update(want).digest('hex'));
    expect(firstDifference(got.bytes, want)).toBe(-1);
    expect(state.result!.bytes).toBe(want.length);
    expect(state.result!.chunked).toBe(0);

    // One table row per tensor, with metrics for the quantized ones, and the layers 0..4 listed.
    const rows = await page.$$eval('#tensors tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')));
    expect(rows.length).toBe(state.result!.tensors);
    const quantized = rows.filter((r) => !r[3].startsWith('keep'));
    expect(quantized.length).toBeGreaterThan(0);
    for (const r of quantized) {
      // RMSE is 0 where a row length forces the F16 fallback: BF16 values are exact in F16.
      expect(Number(r[6]), r[1]).toBeGreaterThanOrEqual(0);
      expect(Number(r[8]), r[1]).toBeGreaterThan(0.99); // cosine
    }
    expect(quantized.filter((r) => Number(r[6]) > 0).length).toBeGreaterThan(0);
    const layers = await page.$$eval('#layers li', (lis) => lis.map((li) => li.textContent ?? ''));
    for (let l = 0; l < 5; l++) expect(layers.some((t) => t.startsWith(`layer ${l} `))).toBe(true);
    expect(await page.getAttribute('#download', 'download')).toBe(`stories260K-${preset}.${ext}`);
    // An MLX output comes with the config.json mlx_lm needs beside it: the input's, plus "quantization".
    const config = await page.evaluate(() => (globalThis as unknown as { webquantDemo: DemoState }).webquantDemo.result?.config);
    if (preset !== 'q8_0' && preset !== 'nf4') {
      const c = JSON.parse(config!);
      if (preset === 'mlx4') expect(c.quantization).toEqual({ group_size: 64, bits: 4 });
      else if (preset === 'bnb-int8') expect(c.quantization_config).toMatchObject({ quant_method: 'bitsandbytes', load_in_8bit: true, load_in_4bit: false });
      else expect(c.quantization_config).toMatchObject({ quant_method: 'bitsandbytes', load_in_4bit: true, bnb_4bit_quant_type: 'nf4', bnb_4bit_use_double_quant: preset === 'bnb-nf4-dq' });
      expect(c.hidden_size).toBe(JSON.parse(readFileSync(STORIES_CONFIG, 'utf8')).hidden_size);
      expect(await page.getAttribute('#download-config', 'download')).toBe('config.json');
    } else {
      expect(config).toBeUndefined();
      expect(await page.$('#download-config')).toBeNull();
    }
  });

  it('a 16 KiB memory budget cuts tensors into row chunks read by Range: still the same GGUF bytes', async () => {
    await page.fill('#budget', String(16 / 1024));
    try {
      const state = await runInPage(page, `${origin}/models/stories260K/model.bf16.safetensors`, 'preset:q8_0');
      expect(state.error).toBeUndefined();
      expect(state.result!.chunked).toBeGreaterThan(10);
      expect(firstDifference((await outputOfPage(page)).bytes, await reference('q8_0', 'gguf'))).toBe(-1);
    } finally {
      await page.fill('#budget', '256');
    }
  });

  it('an importance matrix chosen beside the URL: the bytes of webquant quantize --imatrix (and not those without it)', async () => {
    const im = join(tmp, 'stories.imatrix.gguf');
    await cliImatrix(join(SHARED, 'eval/tinystories_dev.tokens.u16'), im, 8);
    const want = await cliReference(tmp, 'iq4_nl', 'gguf', im);
    expect(firstDifference(want, await reference('iq4_nl', 'gguf'))).not.toBe(-1);
    await page.setInputFiles('#imatrix-file', im);
    try {
      const state = await runInPage(page, `${origin}/models/stories260K/model.bf16.safetensors`, 'preset:iq4_nl');
      expect(state.error).toBeUndefined();
      expect(firstDifference((await outputOfPage(page)).bytes, want)).toBe(-1);
    } finally {
      await page.setInputFiles('#imatrix-file', []);
    }
  });

  it('a chosen file (read as Blob slices) with config.json gives the same bytes as by URL', async () => {
    await page.fill('#url', '');
    await page.setInputFiles('#files', [MODEL, STORIES_CONFIG]);
    await page.selectOption('#scheme', 'preset:nf4');
    await page.click('#run');
    await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('status')?.dataset.state ?? ''));
    const error = await page.evaluate(() => (globalThis as unknown as { webquantDemo: DemoState }).webquantDemo.error);
    expect(error).toBeUndefined();
    // safetensors output does not carry the model's name, which differs from the URL case.
    const got = await outputOfPage(page);
    expect(firstDifference(got.bytes, await reference('nf4', 'safetensors'))).toBe(-1);
    await page.setInputFiles('#files', []);
  });

  it.each(['bnb-nf4-dq', 'bnb-int8'] as const)('a chosen file under a 16 KiB budget, preset %s: tensors cut into slices the Web Workers read as Blob slices (double quantization calibrated once over the whole): the same bytes', async (preset) => {
    await page.fill('#url', '');
    await page.setInputFiles('#files', [MODEL, STORIES_CONFIG]);
    await page.fill('#budget', String(16 / 1024));
    try {
      await page.selectOption('#scheme', `preset:${preset}`);
      await page.click('#run');
      await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('status')?.dataset.state ?? ''));
      const state = await page.evaluate(() => (globalThis as unknown as { webquantDemo: DemoState }).webquantDemo);
      expect(state.error).toBeUndefined();
      expect(state.result!.chunked).toBeGreaterThan(10);
      expect(firstDifference((await outputOfPage(page)).bytes, await reference(preset, 'safetensors'))).toBe(-1);
    } finally {
      await page.fill('#budget', '256');
      await page.setInputFiles('#files', []);
    }
  });

  it('a sharded checkpoint (index, shards and config.json chosen together) gives the bytes of the single file; a missing shard is named', async () => {
    const { openSafetensors } = await import('../../src/io/safetensors.js');
    const { writeSafetensors } = await import('../../src/io/safetensors-writer.js');
    const { collect } = await import('../../src/io/stream.js');
    const { fromBuffer } = await import('../../src/io/source.js');
    const { writeFileSync } = await import('node:fs');
    // The single file's tensors, in its order, cut in two shards.
    const src = await openSafetensors(fromBuffer(new Uint8Array(readFileSync(MODEL)), 'model.bf16.safetensors'));
    const names = src.tensors.map((t) => t.name);
    const weightMap: Record<string, string> = {};
    const paths: string[] = [];
    for (const [i, part] of [names.slice(0, 20), names.slice(20)].entries()) {
      const file = `model-0000${i + 1}-of-00002.safetensors`;
      const tensors = await Promise.all(part.map(async (n) => ({ name: n, dtype: src.tensor(n).dtype, shape: src.tensor(n).shape, data: await src.readRaw(n) })));
      // Each shard keeps the file's __metadata__ ({format: pt}), as Hugging Face's shards do.
      writeFileSync(join(tmp, file), await collect(writeSafetensors({ tensors, metadata: src.metadata as Record<string, string> })));
      for (const n of part) weightMap[n] = file;
      paths.push(join(tmp, file));
    }
    const index = join(tmp, 'model.safetensors.index.json');
    writeFileSync(index, JSON.stringify({ metadata: {}, weight_map: weightMap }));
    const run = async (files: string[]) => {
      await page.fill('#url', '');
      await page.setInputFiles('#files', files);
      await page.selectOption('#scheme', 'preset:nf4');
      await page.click('#run');
      await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('status')?.dataset.state ?? ''));
      return page.evaluate(() => (globalThis as unknown as { webquantDemo: DemoState }).webquantDemo.error);
    };
    expect(await run([index, ...paths, STORIES_CONFIG])).toBeUndefined();
    expect(firstDifference((await outputOfPage(page)).bytes, await reference('nf4', 'safetensors'))).toBe(-1);
    const missing = await run([index, paths[0], STORIES_CONFIG]);
    expect(missing).toMatchObject({ code: 'E_BAD_INPUT', message: expect.stringContaining('model-00002-of-00002.safetensors') });
    await page.setInputFiles('#files', []);
  });

  it('Cancel aborts a run with E_ABORTED, and the next run works', async () => {
    await page.fill('#url', `${origin}/slow/stories260K/model.bf16.safetensors`);
    await page.selectOption('#scheme', 'preset:q8_0');
    await page.click('#run');
    await page.waitForSelector('#tensors tbody tr');
    await page.click('#cancel');
    await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('status')?.dataset.state ?? ''));
    const s = await page.evaluate(() => (globalThis as unknown as { webquantDemo: DemoState }).webquantDemo);
    expect(s.state).toBe('error');
    expect(s.error).toMatchObject({ isWebquantError: true, code: 'E_ABORTED' });
  });

  it('a resumable run that was cancelled picks up from browser storage and writes the same bytes', async () => {
    const url = `${origin}/lag/stories260K/model.bf16.safetensors`;
    await page.check('#resume');
    try {
      await page.fill('#url', url);
      await page.selectOption('#scheme', 'preset:q8_0');
      await page.click('#run');
      await page.waitForFunction(() => document.querySelectorAll('#tensors tbody tr').length >= 12);
      await page.click('#cancel');
      await page.waitForFunction(() => document.getElementById('status')?.dataset.state !== 'running');
      const state = await runInPage(page, url, 'preset:q8_0');
      expect(state.error).toBeUndefined();
      expect(state.result!.resumedUnits).toBeGreaterThan(5);
      expect(firstDifference((await outputOfPage(page)).bytes, await reference('q8_0', 'gguf'))).toBe(-1);
    } finally {
      await page.uncheck('#resume');
    }
  });

  it('a truncated file is refused with a WebquantError and its code', async () => {
    const state = await runInPage(page, `${origin}/bad/truncated.safetensors`, 'preset:nf4');
    expect(state.state).toBe('error');
    expect(state.error).toMatchObject({ name: 'WebquantError', isWebquantError: true, code: 'E_ST_HEADER_PAST_END' });
    expect(await page.textContent('#status')).toContain('E_ST_HEADER_PAST_END');
  });

  it('an error inside a worker arrives in the page as a WebquantError with its code', async () => {
    const state = await runInPage(page, `${origin}/bad/nan/model.safetensors`, 'preset:nf4');
    expect(state.state).toBe('error');
    expect(state.error).toMatchObject({ name: 'WebquantError', isWebquantError: true, code: 'E_NON_FINITE', tensor: 'model.layers.0.mlp.up_proj.weight' });
  });

  it('logged no page errors', () => {
    expect(pageErrors).toEqual([]);
  });
});
