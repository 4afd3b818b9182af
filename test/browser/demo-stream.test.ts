// The demo page's "stream to a file" path, in Debian's Chromium. Headless Chromium cannot show the
// save dialog, so the page gets a showSaveFilePicker that hands out a file of the origin private
// file system (the same FileSystemFileHandle API), and each writable opened on it is logged. The
// streamed file must hold the bytes the Blob path gives, and a run failing at any stage (opening
// the input, starting the Workers, inside the pipeline) must abort the writable, leaving the file
// as it was instead of half written: a file the dialog created (empty) is removed, one that held
// bytes keeps them.
// CI installs chromium; without it this test fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { buildSafetensors, f32Bytes, randomValues } from '../pipeline/helpers.js';
import { startDemoServer, type DemoServer } from './server.js';
import type { DemoState } from '../../web/src/main.js';
import { CHROMIUM, closeChromium, launchChromium, MISSING } from './chromium.js';

const model = (poison = false) => {
  const v = randomValues(64 * 256, 5);
  if (poison) v[3000] = NaN;
  return buildSafetensors([
    { name: 'model.layers.0.mlp.up_proj.weight', dtype: 'F32', shape: [64, 256], data: f32Bytes(v) },
    { name: 'model.layers.1.mlp.up_proj.weight', dtype: 'F32', shape: [64, 256], data: f32Bytes(randomValues(64 * 256, 6)) },
  ]);
};

// Before the page's own code: the picker, the writable log, and a switch that makes Worker fail.
const INIT = () => {
  const w = globalThis as unknown as Record<string, unknown>;
  w.writableLog = [] as string[];
  w.showSaveFilePicker = async (o: { suggestedName: string }) => (await navigator.storage.getDirectory()).getFileHandle(o.suggestedName, { create: true });
  const proto = FileSystemFileHandle.prototype as unknown as { createWritable(...a: unknown[]): Promise<FileSystemWritableFileStream> };
  const open = proto.createWritable;
  proto.createWritable = async function (this: FileSystemFileHandle, ...a: unknown[]) {
    const s = await open.apply(this, a);
    const log = (what: string) => (w.writableLog as string[]).push(`${what} ${this.name}`);
    log('open');
    const close = s.close.bind(s);
    const abort = s.abort.bind(s);
    s.close = async () => { log('close'); return close(); };
    s.abort = async (r?: unknown) => { log('abort'); return abort(r); };
    return s;
  };
  const RealWorker = globalThis.Worker;
  w.Worker = function (this: unknown, ...a: ConstructorParameters<typeof Worker>) {
    if (w.failWorkers) throw new DOMException('Workers are switched off by the test', 'SecurityError');
    return new RealWorker(...a);
  } as unknown as typeof Worker;
};

let browser: Browser | undefined;
let tmp = '';
beforeAll(async () => {
  ({ browser, tmp } = await launchChromium('webquant-stream-'));
});
afterAll(() => closeChromium(browser, tmp));

it('finds Chromium', () => {
  expect(existsSync(CHROMIUM), MISSING).toBe(true);
});

describe('demo page: stream to a file', () => {
  let server: DemoServer | undefined;
  let page: Page;

  beforeAll(async () => {
    if (!browser) throw new Error(MISSING);
    server = await startDemoServer('dev', [], join(tmp, 'dist'));
    page = await browser!.newPage();
    await page.addInitScript(INIT);
    await page.goto(`${server.origin}/`);
    await page.waitForFunction(() => (globalThis as { webquantDemo?: unknown }).webquantDemo !== undefined);
  });
  afterAll(async () => {
    await page?.close();
    await server?.close();
  });

  /** `existing`: bytes the file the dialog picks already holds. */
  async function run(bytes: Uint8Array, stream: boolean, existing?: number[]) {
    await page.evaluate(async (existing) => {
      const dir = await navigator.storage.getDirectory();
      for await (const name of (dir as unknown as { keys(): AsyncIterable<string> }).keys()) await dir.removeEntry(name);
      if (existing) {
        const w = await (await dir.getFileHandle('model-nf4.safetensors', { create: true })).createWritable();
        await w.write(new Uint8Array(existing));
        await w.close();
      }
      (globalThis as unknown as { writableLog: string[] }).writableLog.length = 0;
      document.getElementById('status')!.dataset.state = ''; // the last run's end is not this one's
    }, existing);
    await page.setInputFiles('#files', [{ name: 'm.safetensors', mimeType: 'application/octet-stream', buffer: Buffer.from(bytes) }]);
    await page.selectOption('#scheme', 'preset:nf4');
    await page.setChecked('#stream', stream);
    await page.click('#run');
    await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('status')?.dataset.state ?? ''), undefined, { timeout: 60_000 });
    return page.evaluate(async () => {
      const d = (globalThis as unknown as { webquantDemo: DemoState }).webquantDemo;
      const dir = await navigator.storage.getDirectory();
      const files: Record<string, number[]> = {};
      for await (const name of (dir as unknown as { keys(): AsyncIterable<string> }).keys()) {
        // A writable's swap file may be listed and gone a moment later.
        const bytes = await dir.getFileHandle(name).then(async (h) => new Uint8Array(await (await h.getFile()).arrayBuffer()), () => undefined);
        if (bytes) files[name] = [...bytes];
      }
      const blob = d.result?.blob ? [...new Uint8Array(await d.result.blob.arrayBuffer())] : undefined;
      return { state: d.state, error: d.error, blob, files, log: [...(globalThis as unknown as { writableLog: string[] }).writableLog] };
    });
  }

  it('writes the bytes the Blob path gives, and closes the file', async () => {
    const viaBlob = await run(model(), false);
    expect(viaBlob.state).toBe('done');
    const streamed = await run(model(), true);
    expect(streamed.state).toBe('done');
    expect(streamed.blob).toBeUndefined();
    expect(streamed.log).toEqual(['open model-nf4.safetensors', 'close model-nf4.safetensors']);
    expect(Object.keys(streamed.files)).toEqual(['model-nf4.safetensors']);
    expect(streamed.files['model-nf4.safetensors']).toEqual(viaBlob.blob);
  });

  it('a failure inside the pipeline (a NaN weight) aborts the file', async () => {
    const r = await run(model(true), true);
    expect(r.state).toBe('error');
    expect(r.error).toMatchObject({ code: 'E_NON_FINITE', tensor: 'model.layers.0.mlp.up_proj.weight' });
    expect(r.log[0]).toBe('open model-nf4.safetensors');
    expect(r.log).toContain('abort model-nf4.safetensors');
    expect(r.log).not.toContain('close model-nf4.safetensors');
    expect(r.files['model-nf4.safetensors']).toBeUndefined(); // the empty file the dialog made is removed
  });

  it('a failed run over a file that held bytes leaves them as they were', async () => {
    const r = await run(model(true), true, [1, 2, 3]);
    expect(r.state).toBe('error');
    expect(r.log).toContain('abort model-nf4.safetensors');
    expect(r.files['model-nf4.safetensors']).toEqual([1, 2, 3]);
  });

  it('a failure before the pipeline starts (no Workers) aborts the file too', async () => {
    await page.evaluate(() => { (globalThis as unknown as { failWorkers: boolean }).failWorkers = true; });
    try {
      const r = await run(model(), true);
      expect(r.state).toBe('error');
      expect(r.error?.message).toContain('switched off by the test');
      expect(r.log).toEqual(['open model-nf4.safetensors', 'abort model-nf4.safetensors']);
      expect(r.files['model-nf4.safetensors']).toBeUndefined(); // the empty file the dialog made is removed
    } finally {
      await page.evaluate(() => { (globalThis as unknown as { failWorkers: boolean }).failWorkers = false; });
    }
  });

  it('a checkpoint that cannot be opened aborts the file before anything is read', async () => {
    const r = await run(new TextEncoder().encode('not a checkpoint'), true);
    expect(r.state).toBe('error');
    expect(r.log).toEqual(['open model-nf4.safetensors', 'abort model-nf4.safetensors']);
    expect(r.files['model-nf4.safetensors']).toBeUndefined(); // the empty file the dialog made is removed
  });
});
