// openQuantized's persistent cache in Debian's Chromium, for each browser store (OPFS, Cache API):
// a quantized stories260K is opened by URL from a local server that answers Range requests with an
// ETag and logs them; the page reads every tensor, is reloaded, and reads them again. The second
// session asks the server for no tensor byte and gets the same values (and the same dequantized
// bytes as Node). An entry damaged in storage is dropped and only its tensor downloaded again; a
// small byte cap keeps the store under it by evicting.
// CI installs chromium; without it this test fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { fromBuffer, openCheckpoint } from '../../src/io/index.js';
import { openQuantized } from '../../src/serve/index.js';
import { cliReference } from '../helpers/quantize-ref.js';
import { ROOT } from '../pipeline/helpers.js';
import { bytesRoute, startDemoServer, type DemoServer, type Route } from './server.js';

const CHROMIUM = '/usr/bin/chromium';
const MISSING = `${CHROMIUM} is missing: the browser tests need Debian's chromium (apt-get install -y chromium); they are never skipped`;
const FLAGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];

interface Logged { path: string; start: number; end: number }

/** `bytes` at `path` with Range support, an ETag, no HTTP caching, every request logged. */
function countingRoute(path: string, bytes: () => Uint8Array, log: Logged[]): Route {
  return async (req, res) => {
    if (req.url?.split('?')[0] !== path) return false;
    const body = bytes();
    const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('ETag', `"${createHash('sha256').update(body).digest('hex').slice(0, 16)}"`);
    res.setHeader('Accept-Ranges', 'bytes');
    if (!m || req.method !== 'GET') {
      res.statusCode = 400; // fromUrl sends nothing else
      res.end();
      return true;
    }
    const start = Number(m[1]), end = Math.min(Number(m[2]), body.length - 1);
    log.push({ path, start, end });
    res.statusCode = 206;
    res.setHeader('Content-Range', `bytes ${start}-${end}/${body.length}`);
    res.setHeader('Content-Length', String(end - start + 1));
    res.end(body.subarray(start, end + 1));
    return true;
  };
}

const blank: Route = async (req, res) => {
  if (req.url !== '/blank.html') return false;
  res.setHeader('Content-Type', 'text/html');
  res.end('<!doctype html><title>serve cache</title>');
  return true;
};

/** What a page session reports: per tensor the SHA-256 of dequantize() and a matvec, and the stats. */
interface Session {
  tensors: Record<string, { deq: string; y: number[] }>;
  stats: { hits: number; misses: number; writes: number; dropped: number; evictions: number; bytes: number; store: string; reason?: string };
}

type Lib = typeof import('../../src/index.js');

/** The library from its sources, through Vite, as `globalThis.webquant` (after each load). */
async function loadLibrary(page: Page): Promise<void> {
  await page.addScriptTag({ type: 'module', content: `import * as m from '/@fs${ROOT}src/index.ts'; globalThis.webquant = m;` });
  await page.waitForFunction(() => (globalThis as { webquant?: unknown }).webquant !== undefined);
}

/** In the page: open by URL with the persistent cache, read every tensor, wait for the writes. */
async function session(page: Page, url: string, store: string, maxBytes?: number): Promise<Session> {
  await loadLibrary(page);
  return page.evaluate(async ({ url, store, maxBytes }) => {
    const m = (globalThis as unknown as { webquant: Lib }).webquant;
    const q = await m.openQuantized(m.fromUrl(url), { persistentCache: { store: store as 'opfs', name: 'test-tensors', maxBytes } });
    const hex = async (b: ArrayBuffer) => [...new Uint8Array(await crypto.subtle.digest('SHA-256', b))].map((x) => x.toString(16).padStart(2, '0')).join('');
    const tensors: Record<string, { deq: string; y: number[] }> = {};
    for (const t of q.tensors) {
      const deq = await q.tensor(t.name).dequantize();
      const x = new Float32Array(t.rowLength).map((_, i) => Math.sin(i + 1));
      const y = t.shape.length === 2 ? Array.from(await q.tensor(t.name).matvec(x)) : [];
      tensors[t.name] = { deq: await hex(deq.buffer as ArrayBuffer), y };
    }
    await q.flush();
    return { tensors, stats: q.cacheStats().persistent! };
  }, { url, store, maxBytes });
}

/** In the page: the entries of the store ({ tensor, bytes }), read back from OPFS or the Cache API. */
async function storedEntries(page: Page, store: string): Promise<{ key: string; tensor: string; bytes: number }[]> {
  return page.evaluate(async (store) => {
    const parse = (b: Uint8Array) => {
      const n = new DataView(b.buffer, b.byteOffset).getUint32(4, true);
      return (JSON.parse(new TextDecoder().decode(b.subarray(8, 8 + n))) as { tensor: string }).tensor;
    };
    const out: { key: string; tensor: string; bytes: number }[] = [];
    if (store === 'opfs') {
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('test-tensors');
      for await (const [key, h] of (dir as unknown as { entries(): AsyncIterable<[string, FileSystemFileHandle]> }).entries()) {
        const b = new Uint8Array(await (await h.getFile()).arrayBuffer());
        out.push({ key, tensor: parse(b), bytes: b.byteLength });
      }
    } else {
      const cache = await caches.open('test-tensors');
      for (const req of await cache.keys()) {
        const b = new Uint8Array(await (await cache.match(req))!.arrayBuffer());
        out.push({ key: req.url.split('/').pop()!, tensor: parse(b), bytes: b.byteLength });
      }
    }
    return out.sort((a, b) => a.tensor.localeCompare(b.tensor));
  }, store);
}

/** In the page: replaces an entry's bytes with its first `keep` bytes (a torn or tampered write). */
async function truncateEntry(page: Page, store: string, key: string, keep: number): Promise<void> {
  await page.evaluate(async ({ store, key, keep }) => {
    if (store === 'opfs') {
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('test-tensors');
      const h = await dir.getFileHandle(key);
      const w = await h.createWritable({ keepExistingData: true });
      await w.truncate(keep);
      await w.close();
    } else {
      const cache = await caches.open('test-tensors');
      const url = `https://webquant.invalid/tensors/${key}`;
      const res = (await cache.match(url))!;
      const b = new Uint8Array(await res.arrayBuffer()).slice(0, keep);
      await cache.put(url, new Response(b, { headers: res.headers }));
    }
  }, { store, key, keep });
}

let browser: Browser | undefined;
let server: DemoServer | undefined;
let tmp = '';
const log: Logged[] = [];
const files = new Map<string, Uint8Array>();

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'webquant-serve-cache-'));
  files.set('q8_0.gguf', new Uint8Array(await cliReference(tmp, 'q8_0', 'gguf')));
  files.set('nf4.safetensors', new Uint8Array(await cliReference(tmp, 'nf4', 'safetensors')));
  if (existsSync(CHROMIUM)) browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  server = await startDemoServer('dev', [
    blank,
    ...[...files.keys()].map((f) => countingRoute(`/q/${f}`, () => files.get(f)!, log)),
    bytesRoute('/plain/q8_0.gguf', () => files.get('q8_0.gguf')!), // no validators
  ], join(tmp, 'dist'));
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

it('finds Chromium', () => {
  expect(existsSync(CHROMIUM), MISSING).toBe(true);
});

describe.each([
  ['opfs', 'q8_0.gguf'],
  ['cache-api', 'nf4.safetensors'],
] as const)('persistent cache in Chromium, %s, %s', (store, file) => {
  let context: BrowserContext;
  let page: Page;
  let url = '';
  /** Data span [start, end] of each tensor (safetensors: of each section tensor). */
  let spans: { name: string; start: number; end: number }[] = [];
  let dataStart = 0;
  const pageErrors: string[] = [];
  const requests = (from: number) => log.slice(from).filter((r) => r.path === `/q/${file}`);
  // The first read (64 KiB, header and all) starts at 0; a tensor's read starts at its data.
  const tensorRequests = (from: number) => requests(from).filter((r) => r.start >= dataStart);

  beforeAll(async () => {
    if (!browser) throw new Error(MISSING);
    // A context of its own: empty storage, as on a first visit.
    context = await browser.newContext();
    page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    // The browser's own 404 log of /favicon.ico aside.
    page.on('console', (m) => { if ((m.type() === 'error' || m.type() === 'warning') && !m.text().startsWith('Failed to load resource')) pageErrors.push(m.text()); });
    url = `${server!.origin}/q/${file}`;
    await page.goto(`${server!.origin}/blank.html`);
    const ck = await openCheckpoint(fromBuffer(files.get(file)!));
    spans = ck.tensors.map((t) => ({ name: t.name, start: t.offset, end: t.offset + t.byteLength - 1 }));
    dataStart = Math.min(...spans.map((s) => s.start));
  });
  afterAll(() => context?.close());

  let first: Session;

  it('first visit: every tensor downloaded once and stored', async () => {
    const at = log.length;
    first = await session(page, url, store);
    const names = Object.keys(first.tensors);
    expect(names.length).toBeGreaterThan(10);
    expect(first.stats).toMatchObject({ store, hits: 0, misses: names.length, writes: names.length, dropped: 0 });
    // every data span past the first read was requested, each exactly once
    const got = tensorRequests(at);
    const prefix = requests(at)[0];
    expect(prefix.start).toBe(0);
    for (const s of spans.filter((x) => x.end > prefix.end)) expect(got.filter((r) => r.start <= s.end && r.end >= s.start).length, s.name).toBe(1);
    const stored = await storedEntries(page, store);
    expect(stored.map((e) => e.tensor).sort()).toEqual([...names].sort());
    expect(first.stats.bytes).toBe(stored.reduce((a, e) => a + e.bytes, 0));

    // Dequantized bytes as Node's openQuantized gives them for the same file.
    const q = await openQuantized(fromBuffer(files.get(file)!));
    for (const n of names) {
      const deq = await q.tensor(n).dequantize();
      expect(first.tensors[n].deq, n).toBe(createHash('sha256').update(new Uint8Array(deq.buffer, deq.byteOffset, deq.byteLength)).digest('hex'));
    }
  });

  it('after a reload: no tensor byte downloaded again, the same values', async () => {
    await page.reload();
    const at = log.length;
    const again = await session(page, url, store);
    // the first read (the header) again, and nothing else
    expect(requests(at).length).toBeGreaterThan(0);
    expect(tensorRequests(at)).toEqual([]);
    expect(again.tensors).toEqual(first.tensors);
    const n = Object.keys(first.tensors).length;
    expect(again.stats).toMatchObject({ hits: n, misses: 0, writes: 0, dropped: 0 });
  });

  it('a damaged entry is dropped: only its tensor is downloaded again, values unchanged', async () => {
    const stored = await storedEntries(page, store);
    const victim = stored.find((e) => e.bytes > 1000)!;
    await truncateEntry(page, store, victim.key, victim.bytes - 100);
    await page.reload();
    const at = log.length;
    const again = await session(page, url, store);
    expect(again.tensors).toEqual(first.tensors);
    expect(again.stats).toMatchObject({ dropped: 1, writes: 1, hits: stored.length - 1 });
    // the requests cover the victim's data (all its sections), and nothing else
    const victimSpans = spans.filter((s) => s.name === victim.tensor || s.name.startsWith(`${victim.tensor}.`)); // with its sections
    const hit = tensorRequests(at);
    expect(hit.length).toBeGreaterThan(0);
    for (const r of hit) expect(victimSpans.some((s) => r.start <= s.end && r.end >= s.start), `${r.start}-${r.end}`).toBe(true);
    expect((await storedEntries(page, store)).find((e) => e.key === victim.key)!.bytes).toBe(victim.bytes);
  });

  it('a byte cap smaller than the model: the store stays under it by evicting', async () => {
    const stored = await storedEntries(page, store);
    const total = stored.reduce((a, e) => a + e.bytes, 0);
    const cap = Math.floor(total / 2);
    await page.reload();
    const s = await session(page, url, store, cap);
    expect(s.tensors).toEqual(first.tensors);
    expect(s.stats.evictions).toBeGreaterThan(0);
    const after = await storedEntries(page, store);
    expect(after.reduce((a, e) => a + e.bytes, 0)).toBeLessThanOrEqual(cap);
    expect(s.stats.bytes).toBe(after.reduce((a, e) => a + e.bytes, 0));
  });

  it('logged no page errors or warnings', () => {
    expect(pageErrors).toEqual([]);
  });
});

it("'auto' picks OPFS in Chromium, and a URL without ETag or Last-Modified is not stored", async () => {
  if (!browser) throw new Error(MISSING);
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(`${server!.origin}/blank.html`);
    await loadLibrary(page);
    const [withId, without] = await page.evaluate(async (urls) => {
      const m = (globalThis as unknown as { webquant: Lib }).webquant;
      const out = [];
      for (const url of urls) {
        const q = await m.openQuantized(m.fromUrl(url), { persistentCache: true });
        await q.tensor(q.tensors[0].name).dequantize();
        await q.flush();
        out.push(q.cacheStats().persistent!);
      }
      return out;
    }, [`${server!.origin}/q/q8_0.gguf`, `${server!.origin}/plain/q8_0.gguf`]);
    expect(withId).toMatchObject({ store: 'opfs', writes: 1 });
    expect(without.store).toBe('none');
    expect(without.reason).toMatch(/persistentCache\.key/);
  } finally {
    await context.close();
  }
});
