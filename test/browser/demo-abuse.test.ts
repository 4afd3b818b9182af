// The demo page as a user abuses it, in Debian's Chromium (Vite's dev server: the page's code is the
// same in the bundle): files that are not checkpoints, two checkpoints at once, URLs that are not
// URLs, 404, HTML or on another origin without CORS, options out of range, Cancel while the server
// does not answer, a file dropped beside the drop zone. Every failure must be a message naming
// the input and what was expected, and the page must stay usable: Quantize enabled again, no
// progress of the dead run, no download, no worker left, no uncaught error.
// CI installs chromium; without it this test fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { SHARED } from '../helpers/shared.js';
import { splitGguf } from '../helpers/gguf-split.js';
import { openGguf } from '../../src/io/gguf.js';
import { fromBuffer } from '../../src/io/source.js';
import { STORIES_BF16 as MODEL } from '../helpers/quantize-ref.js';
import { buildSafetensors, f32Bytes, randomValues } from '../pipeline/helpers.js';
import { bytesRoute, dirRoute, startDemoServer, startRouteServer, type DemoServer, type Route } from './server.js';
import type { DemoState } from '../../web/src/main.js';
import { CHROMIUM, closeChromium, launchChromium, MISSING } from './chromium.js';


/** One 64 x 64 F32 weight: quantizes in no time. */
const tiny = () => buildSafetensors([{ name: 'model.layers.0.mlp.up_proj.weight', dtype: 'F32', shape: [64, 64], data: f32Bytes(randomValues(64 * 64, 3)) }]);

/** A safetensors header that puts a 4 GB tensor in a file of a few bytes. */
function pastEnd(): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify({ w: { dtype: 'F32', shape: [1000000, 1000], data_offsets: [0, 4e9] } }));
  const hlen = (json.byteLength + 7) & ~7;
  const out = new Uint8Array(8 + hlen + 64).fill(0x20, 8, 8 + hlen);
  new DataView(out.buffer).setBigUint64(0, BigInt(hlen), true);
  out.set(json, 8);
  return out;
}

/** GGUF magic and version, then tensor and key counts no file of 256 bytes can hold. */
function corruptGguf(): Uint8Array {
  const u = new Uint8Array(256);
  u.set([0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0]);
  new DataView(u.buffer).setBigUint64(8, 0xffffffffffn, true);
  new DataView(u.buffer).setBigUint64(16, 0xffffffffffn, true);
  return u;
}

/** A URL whose server never answers (until `release`); counts the requests the client gave up. */
function hangingRoute(path: string): { route: Route; release(): void; asked(): number; dropped(): number } {
  const held: ServerResponse[] = [];
  let asked = 0;
  let dropped = 0;
  return {
    route: async (req, res) => {
      if (req.url?.split('?')[0] !== path) return false;
      asked++;
      res.on('close', () => { if (!res.writableEnded) dropped++; });
      held.push(res);
      return true;
    },
    asked: () => asked,
    dropped: () => dropped,
    release: () => { for (const r of held.splice(0)) r.destroy(); },
  };
}

const demoState = (page: Page) => page.evaluate(() => {
  const d = (globalThis as unknown as { webquantDemo: DemoState }).webquantDemo;
  return { state: d.state, error: d.error, result: d.result && { ...d.result, blob: undefined } };
});

/** What a user sees once a run ended: the status line, the buttons, the progress and the result. */
const pageView = (page: Page) => page.evaluate(() => ({
  status: document.getElementById('status')!.textContent ?? '',
  run: (document.getElementById('run') as HTMLButtonElement).disabled,
  cancel: (document.getElementById('cancel') as HTMLButtonElement).disabled,
  rate: document.getElementById('rate')!.textContent ?? '',
  bar: (document.getElementById('bar') as HTMLProgressElement).value,
  download: document.getElementById('download') !== null,
}));

const ended = (page: Page, timeout = 60_000) =>
  page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('status')?.dataset.state ?? ''), undefined, { timeout });

let browser: Browser | undefined;
let tmp = '';

beforeAll(async () => {
  ({ browser, tmp } = await launchChromium('webquant-abuse-'));
});

afterAll(() => closeChromium(browser, tmp));

it('finds Chromium', () => {
  expect(existsSync(CHROMIUM), MISSING).toBe(true);
});

describe('demo page in Chromium, abused', () => {
  let server: DemoServer | undefined;
  let other: DemoServer | undefined;
  let page: Page;
  let origin = '';
  const hang = hangingRoute('/hang/model.safetensors');
  const pageErrors: string[] = [];

  beforeAll(async () => {
    if (!browser) throw new Error(MISSING);
    // Another origin (localhost against 127.0.0.1) that sends no CORS headers.
    other = await startRouteServer([dirRoute('/m/', join(SHARED, 'models'))]);
    server = await startDemoServer('dev', [
      dirRoute('/models/', join(SHARED, 'models')),
      dirRoute('/slow/', join(SHARED, 'models'), 150),
      bytesRoute('/bad/page.html', () => new TextEncoder().encode('<!doctype html><html><body>Sign in</body></html>')),
      hang.route,
    ], join(tmp, 'dist'));
    origin = server.origin;
    page = await browser!.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    // Failed requests (404, CORS) are logged by the browser itself, not by the page.
    page.on('console', (m) => {
      if (m.type() === 'error' && !/^Failed to load resource|blocked by CORS policy/.test(m.text())) pageErrors.push(m.text());
    });
    await page.goto(`${origin}/`);
    await page.waitForFunction(() => (globalThis as { webquantDemo?: unknown }).webquantDemo !== undefined);
  });

  afterAll(async () => {
    hang.release();
    await page?.close();
    await server?.close();
    await other?.close();
  });

  async function runFiles(files: { name: string; buffer: Uint8Array }[], scheme = 'preset:nf4') {
    await page.fill('#url', '');
    await page.setInputFiles('#files', files.map((f) => ({ name: f.name, mimeType: 'application/octet-stream', buffer: Buffer.from(f.buffer) })));
    await page.selectOption('#scheme', scheme);
    await page.click('#run');
    await ended(page);
    return demoState(page);
  }

  async function runUrl(url: string, scheme = 'preset:nf4') {
    await page.setInputFiles('#files', []);
    await page.fill('#url', url);
    await page.selectOption('#scheme', scheme);
    await page.click('#run');
    await ended(page);
    return demoState(page);
  }

  /** The page after a failure: the message in the status line, usable again, nothing to download. */
  async function expectRefused(code: string, ...named: string[]) {
    const s = await demoState(page);
    expect(s.state).toBe('error');
    expect(s.error).toMatchObject({ isWebquantError: true, code });
    expect(s.result).toBeUndefined();
    const v = await pageView(page);
    expect(v.status).toContain(code);
    for (const n of named) expect(v.status).toContain(n);
    expect(v).toMatchObject({ run: false, cancel: true, download: false });
    expect(page.workers()).toEqual([]);
  }

  it.each([
    ['a text file', 'notes.txt', 'E_BAD_INPUT', () => new TextEncoder().encode('hello')],
    ['an image', 'cat.png', 'E_BAD_INPUT', () => new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])],
    ['an empty file', 'empty.safetensors', 'E_ST_HEADER_TOO_SMALL', () => new Uint8Array(0)],
    ['a truncated file', 'cut.safetensors', 'E_ST_HEADER_PAST_END', () => readFileSync(MODEL).subarray(0, 4096)],
    ['an image named .safetensors', 'cat.safetensors', 'E_ST_NOT_JSON', () => new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4])],
    ['a GGUF with a corrupt header', 'bad.gguf', 'E_GGUF_COUNT', corruptGguf],
    ['a tensor past the end of the file', 'far.safetensors', 'E_ST_DATA_PAST_END', pastEnd],
  ])('%s (%s) is refused with %s, naming the file', async (_what, name, code, bytes) => {
    await runFiles([{ name, buffer: bytes() }]);
    await expectRefused(code, name);
  });

  it('two checkpoints chosen together are refused, naming both, rather than one quantized silently', async () => {
    await runFiles([{ name: 'a.safetensors', buffer: tiny() }, { name: 'b.safetensors', buffer: tiny() }]);
    await expectRefused('E_BAD_INPUT', 'a.safetensors', 'b.safetensors');
    // One of them alone is fine: the page was not left in a bad state.
    expect((await runFiles([{ name: 'a.safetensors', buffer: tiny() }])).state).toBe('done');
  });

  it('a split GGUF chosen whole is one checkpoint, read across its files; without its first file it is refused', async () => {
    const gguf = join(SHARED, 'models/stories260K/tinyllamas-stories-260k-f32.gguf');
    const whole = await openGguf(fromBuffer(new Uint8Array(readFileSync(gguf)), gguf));
    const files = [...(await splitGguf(whole, 'stories', [9, 30]))].map(([name, buffer]) => ({ name, buffer }));
    const s = await runFiles(files, 'preset:q8_0');
    expect(s.state, s.error?.message).toBe('done');
    expect(s.result).toMatchObject({ kind: 'gguf', tensors: whole.tensors.length });
    await runFiles(files.slice(1), 'preset:q8_0');
    await expectRefused('E_BAD_INPUT', 'without its first file');
    await runFiles(files.slice(0, 2), 'preset:q8_0');
    await expectRefused('E_BAD_INPUT', 'stories-00003-of-00003.gguf', 'choose every file of the checkpoint together');
  });

  it.each(['http://', 'ftp://example.com/model.safetensors', 'data:application/octet-stream;base64,AAAA', 'not a url'])(
    'a URL field holding %s is refused as not an http(s) URL, naming it', async (url) => {
      await runUrl(url);
      await expectRefused('E_BAD_INPUT', `"${url}"`, 'http(s) URL');
    },
  );

  it('a URL that 404s, or serves an HTML page, is refused naming the URL', async () => {
    await runUrl(`${origin}/models/nope.safetensors`);
    await expectRefused('E_IO', `${origin}/models/nope.safetensors`, '404');
    await runUrl(`${origin}/bad/page.html`);
    await expectRefused('E_ST_NOT_JSON', `${origin}/bad/page.html`, 'an HTML page?');
  });

  it('a URL on another origin without CORS says that the server must allow the page', async () => {
    const url = `${other!.origin.replace('127.0.0.1', 'localhost')}/m/stories260K/model.bf16.safetensors`;
    await runUrl(url);
    await expectRefused('E_IO', url, 'Access-Control-Allow-Origin');
  });

  it('a format the preset container cannot hold is refused naming both', async () => {
    await page.selectOption('#container', 'gguf');
    try {
      await runFiles([{ name: 'a.safetensors', buffer: tiny() }], 'format:nf4');
      await expectRefused('E_BAD_OPTION', 'nf4', 'gguf');
    } finally {
      await page.selectOption('#container', '');
    }
  });

  it.each([
    ['#budget', '-1', 'Memory budget (MiB)'],
    ['#budget', '0', 'Memory budget (MiB)'],
    ['#workers', '0', 'Workers'],
    ['#workers', '1.5', 'Workers'],
    ['#workers', '1000', 'Workers'],
  ])('%s = %s is refused naming the field, not clamped', async (field, value, label) => {
    const before = await page.inputValue(field);
    await page.fill(field, value);
    try {
      await runFiles([{ name: 'a.safetensors', buffer: tiny() }]);
      await expectRefused('E_BAD_OPTION', label, `"${value}"`);
    } finally {
      await page.fill(field, before);
    }
  });

  it('Cancel while the server does not answer ends the run with E_ABORTED, and the next run works', async () => {
    await page.setInputFiles('#files', []);
    await page.fill('#url', `${origin}/hang/model.safetensors`);
    await page.click('#run');
    await page.waitForFunction(() => document.getElementById('status')?.textContent?.startsWith('Opening'));
    // A second run cannot start while one is running.
    expect((await pageView(page)).run).toBe(true);
    await page.click('#cancel');
    // No answer to wait for: Cancel alone must end it.
    await ended(page, 10_000);
    await expectRefused('E_ABORTED', `${origin}/hang/model.safetensors`);
    // The request itself was aborted, not left open to a server that may never answer.
    expect(hang.asked()).toBeGreaterThan(0);
    await expect.poll(() => hang.dropped(), { timeout: 5000 }).toBe(hang.asked());
    expect((await runFiles([{ name: 'a.safetensors', buffer: tiny() }])).state).toBe('done');
  });

  it('a run cancelled mid-way leaves no progress, no download and no worker, and says it was cancelled', async () => {
    await page.setInputFiles('#files', []);
    await page.fill('#url', `${origin}/slow/stories260K/model.bf16.safetensors`);
    await page.selectOption('#scheme', 'preset:q8_0');
    await page.click('#run');
    await page.waitForFunction(() => document.querySelectorAll('#tensors tbody tr').length >= 3);
    expect((await pageView(page)).run).toBe(true);
    await page.click('#cancel');
    await ended(page);
    await expectRefused('E_ABORTED', 'Cancel button');
    expect(await pageView(page)).toMatchObject({ rate: '', bar: 0 });
  });

  it('a file dropped beside the drop zone is taken by the page, not opened by the browser in its place', async () => {
    await page.fill('#url', '');
    const r = await page.evaluate(() => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(8)], 'dropped.safetensors'));
      const over = new DragEvent('dragover', { bubbles: true, cancelable: true, dataTransfer: dt });
      const drop = new DragEvent('drop', { bubbles: true, cancelable: true, dataTransfer: dt });
      const target = document.getElementById('status')!;
      target.dispatchEvent(over);
      target.dispatchEvent(drop);
      return { over: over.defaultPrevented, drop: drop.defaultPrevented, text: document.getElementById('drop-text')!.textContent };
    });
    expect(r).toMatchObject({ over: true, drop: true, text: expect.stringContaining('dropped.safetensors') });
  });

  it('logged no page errors', () => {
    expect(pageErrors).toEqual([]);
  });
});
