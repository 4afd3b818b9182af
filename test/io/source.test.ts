import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createServer, type Server } from 'node:http';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { ErrorCodes } from '../../src/errors.js';
import { fromBlob, fromBuffer, fromUrl, openRef } from '../../src/io/source.js';
import { fromPath, writeFileAtomic } from '../../src/io/node.js';
import { openSafetensors } from '../../src/io/safetensors.js';
import { openGguf } from '../../src/io/gguf.js';
import { expectCode } from './helpers.js';
import { hasShared, sharedBytes } from '../helpers/shared.js';

const ST = 'models/stories260K/model.safetensors';
const GG = 'models/stories260K/tinyllamas-stories-260k-f32.gguf';

describe('fromBuffer / fromBlob', () => {
  test('ranges, and E_IO past the end', async () => {
    const b = new Uint8Array([1, 2, 3, 4, 5]);
    for (const src of [fromBuffer(b), fromBlob(new Blob([b]))]) {
      expect(await src.size()).toBe(5);
      expect(Array.from(await src.read(1, 3))).toEqual([2, 3, 4]);
      expect((await src.read(5, 0)).length).toBe(0);
      await expectCode(src.read(3, 3), ErrorCodes.IO);
      await expectCode(src.read(-1, 1), ErrorCodes.IO);
      await expectCode(src.read(0.5, 1), ErrorCodes.IO);
    }
  });
  test('a Node Buffer in shared (pooled) memory: every read path gives the tensor\'s own values', async () => {
    const { writeSafetensors } = await import('../../src/io/safetensors-writer.js');
    const { collect } = await import('../../src/io/stream.js');
    const file = await collect(writeSafetensors({ tensors: [
      { name: 'a', dtype: 'F32', shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) },
      { name: 'b', dtype: 'BF16', shape: [2], data: new Uint16Array([0x3f80, 0x4000]) },
    ] }));
    // Small Buffers share Node's pool: this one starts past byte 0 of a larger ArrayBuffer, and
    // Buffer#slice() is a view, not a copy.
    const pooled = Buffer.from(file);
    expect(pooled.buffer.byteLength).toBeGreaterThan(pooled.byteLength);
    const c = await openSafetensors(fromBuffer(pooled, 'pooled.safetensors'));
    expect(Array.from(await c.readF32('a'))).toEqual([1, 2, 3, 4, 5, 6]);
    expect(Array.from((await c.readValues('a')).values)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(Array.from((await c.readRows!('a', 1, 1)).values)).toEqual([4, 5, 6]);
    expect(Array.from(await c.readF32('b'))).toEqual([1, 2]);
    expect(Array.from((await c.readValues('b')).values)).toEqual([0x3f80, 0x4000]);
  });
  test.skipIf(!hasShared)('a Blob-backed checkpoint', async () => {
    const c = await openSafetensors(fromBlob(new Blob([sharedBytes(ST) as Uint8Array<ArrayBuffer>]), 'model.safetensors'));
    expect(c.tensors.length).toBe(47);
    expect((await c.readF32('model.norm.weight')).length).toBe(64);
  });
});

describe('fromUrl (HTTP Range requests against a local server)', () => {
  let server: Server;
  let base = '';
  const log: { url: string; range?: string; sent: number }[] = [];
  const files: Record<string, Uint8Array> = {};

  beforeAll(async () => {
    files['/empty.bin'] = new Uint8Array(0);
    files['/small.bin'] = Uint8Array.from({ length: 1000 }, (_, i) => i & 0xff);
    if (hasShared) { files['/model.safetensors'] = sharedBytes(ST); files['/model.gguf'] = sharedBytes(GG); }
    server = createServer((req, res) => {
      const [path, mode] = (req.url ?? '').split('?');
      if (path === '/hang') { log.push({ url: path, range: req.headers.range, sent: 0 }); return; } // never answers
      const body = files[path.replace(/^\/(norange|badrange|nocr)/, '')];
      const range = req.headers.range;
      const entry = { url: req.url ?? '', range, sent: 0 };
      log.push(entry);
      if (!body) { res.writeHead(404); res.end(); return; }
      if (req.method === 'HEAD') { res.writeHead(200, { 'Content-Length': mode === 'nosize' ? 'x' : body.length }); res.end(); return; }
      const m = /^bytes=(\d+)-(\d+)$/.exec(range ?? '');
      if (path.startsWith('/norange') || !m) {
        entry.sent = body.length;
        res.writeHead(200, { 'Content-Length': body.length });
        res.end(body);
        return;
      }
      const start = Number(m[1]);
      const end = Math.min(Number(m[2]), body.length - 1);
      if (start >= body.length) { res.writeHead(416, { 'Content-Range': `bytes */${body.length}` }); res.end(); return; }
      const part = body.subarray(start, end + 1);
      entry.sent = part.length;
      const cr = path.startsWith('/badrange') ? `bytes ${start + 1}-${end + 1}/${body.length}` : `bytes ${start}-${end}/${mode === 'nosize' ? '*' : body.length}`;
      res.writeHead(206, path.startsWith('/nocr') ? { 'Content-Length': part.length } : { 'Content-Range': cr, 'Content-Length': part.length });
      res.end(part);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));

  test('a signal aborts a request the server never answers, and later reads, with E_ABORTED', async () => {
    log.length = 0;
    const ctl = new AbortController();
    const src = fromUrl(`${base}/hang`, { signal: ctl.signal });
    const pending = expectCode(src.size(), ErrorCodes.ABORTED);
    await new Promise((r) => setTimeout(r, 50));
    expect(log.map((l) => l.url)).toEqual(['/hang']);
    ctl.abort(new Error('cancelled by the user'));
    const e = await pending;
    expect(e.message).toContain(`${base}/hang`);
    expect(e.message).toContain('cancelled by the user');
    await expectCode(src.read(0, 1), ErrorCodes.ABORTED);
    expect(log).toHaveLength(1); // an aborted source sends nothing more
    // Without the signal being used, the same options read normally.
    const ok = fromUrl(`${base}/small.bin`, { signal: new AbortController().signal });
    expect(Array.from(await ok.read(5, 2))).toEqual([5, 6]);
  });

  test('reads ranges; size from Content-Range', async () => {
    log.length = 0;
    const src = fromUrl(`${base}/small.bin`, { headers: { 'X-Test': '1' }, prefetch: 0 });
    expect(await src.size()).toBe(1000);
    expect(Array.from(await src.read(998, 2))).toEqual([230, 231]);
    expect(Array.from(await src.read(256, 3))).toEqual([0, 1, 2]);
    expect(log.map((l) => l.range)).toEqual(['bytes=0-0', 'bytes=998-999', 'bytes=256-258']);
    await expectCode(src.read(999, 2), ErrorCodes.IO);
  });
  test('ref(): a URL reference opens with its size known (no probe) and the same headers; blob and file references too', async () => {
    const src = fromUrl(`${base}/small.bin`, { headers: { 'X-Test': '1' } });
    const ref = await src.ref!();
    expect(ref).toEqual({ kind: 'url', name: `${base}/small.bin`, url: `${base}/small.bin`, headers: { 'X-Test': '1' }, size: 1000 });
    log.length = 0;
    const again = openRef(structuredClone(ref));
    expect(await again.size()).toBe(1000);
    expect(Array.from(await again.read(10, 3))).toEqual([10, 11, 12]);
    expect(log.map((l) => l.range)).toEqual(['bytes=10-12']);
    await expectCode(again.read(999, 2), ErrorCodes.IO);
    expect(fromUrl(`${base}/small.bin`, { fetch: globalThis.fetch }).ref).toBeUndefined();
    expect(() => fromUrl(`${base}/small.bin`, { size: -1 })).toThrow(expect.objectContaining({ code: ErrorCodes.BAD_OPTION }));

    const blob = fromBlob(new Blob([files['/small.bin']]), 'b');
    const fromClone = openRef(structuredClone(await blob.ref!()));
    expect(Array.from(await fromClone.read(5, 2))).toEqual([5, 6]);
    const tmp = mkdtempSync(join(tmpdir(), 'wq-ref-'));
    writeFileSync(join(tmp, 'f.bin'), new Uint8Array(7));
    const fsrc = fromPath(join(tmp, 'f.bin'));
    const file = await fsrc.ref!();
    await fsrc.close();
    rmSync(tmp, { recursive: true });
    expect(file).toEqual({ kind: 'file', name: join(tmp, 'f.bin'), path: join(tmp, 'f.bin'), size: 7 });
    // Files are opened by src/io/node.ts in the worker, never by the runtime-neutral openRef.
    expect(() => openRef(file)).toThrow(expect.objectContaining({ code: ErrorCodes.BAD_OPTION }));
    expect(fromBuffer(new Uint8Array(4)).ref).toBeUndefined();
  });
  test('the first request prefetches a prefix that answers later reads (server shortens the range)', async () => {
    log.length = 0;
    const src = fromUrl(`${base}/small.bin`, { prefetch: 4096 });
    expect(await src.size()).toBe(1000);
    expect(Array.from(await src.read(998, 2))).toEqual([230, 231]);
    const r = await src.read(0, 4);
    r[0] = 99; // callers own what they get
    expect(Array.from(await src.read(0, 2))).toEqual([0, 1]);
    expect(log.map((l) => l.range)).toEqual(['bytes=0-4095']);
    log.length = 0;
    const s2 = fromUrl(`${base}/small.bin`, { prefetch: 100 });
    expect(Array.from(await s2.read(500, 1))).toEqual([500 & 0xff]);
    expect(log.map((l) => l.range)).toEqual(['bytes=0-99', 'bytes=500-500']);
  });
  test.skipIf(!hasShared)('a remote safetensors and GGUF checkpoint fetch only ranges, never the whole file', async () => {
    for (const [path, open] of [['/model.safetensors', openSafetensors], ['/model.gguf', openGguf]] as const) {
      log.length = 0;
      const size = files[path].length;
      const c = await open(fromUrl(`${base}${path}`));
      const name = c.tensors[3].name;
      const local = await open(fromBuffer(files[path]));
      expect(await c.readF32(name)).toEqual(await local.readF32(name));
      expect(log.every((l) => l.range !== undefined && l.sent < size)).toBe(true);
      const total = log.reduce((a, l) => a + l.sent, 0);
      expect(total).toBeLessThan(size / 4);
    }
  });
  test('E_HTTP_RANGE when the server ignores Range (200) or answers another range; E_IO on 404', async () => {
    await expectCode(fromUrl(`${base}/norange/small.bin`).size(), ErrorCodes.HTTP_RANGE);
    await expectCode(fromUrl(`${base}/norange/small.bin`).read(10, 10), ErrorCodes.HTTP_RANGE);
    await expectCode(fromUrl(`${base}/badrange/small.bin`).read(10, 10), ErrorCodes.HTTP_RANGE);
    await expectCode(fromUrl(`${base}/small.bin?nosize`).size(), ErrorCodes.HTTP_RANGE);
    await expectCode(fromUrl(`${base}/missing.bin`).size(), ErrorCodes.IO);
    expect(await fromUrl(`${base}/empty.bin`).size()).toBe(0);
    await expectCode(openSafetensors(fromUrl(`${base}/empty.bin`)), ErrorCodes.ST_HEADER_TOO_SMALL);
    await expectCode(fromUrl('http://127.0.0.1:1/x').size(), ErrorCodes.IO);
  });
  test('without a visible Content-Range (CORS), sizes come from a short body or HEAD', async () => {
    log.length = 0;
    const a = fromUrl(`${base}/nocr/small.bin`);
    expect(await a.size()).toBe(1000);
    expect(log.length).toBe(1);
    log.length = 0;
    const b = fromUrl(`${base}/nocr/small.bin`, { prefetch: 10 });
    expect(await b.size()).toBe(1000);
    expect(Array.from(await b.read(600, 2))).toEqual([600 & 0xff, 601 & 0xff]);
    expect(log.map((l) => l.range)).toEqual(['bytes=0-9', undefined, 'bytes=600-601']);
    await expectCode(fromUrl(`${base}/nocr/small.bin?nosize`, { prefetch: 10 }).size(), ErrorCodes.HTTP_RANGE);
  });
  test('a custom fetch is used', async () => {
    const seen: string[] = [];
    const f: typeof fetch = (input, init) => { seen.push(new Headers(init?.headers).get('range') ?? ''); return fetch(input, init); };
    const src = fromUrl(`${base}/small.bin`, { fetch: f, prefetch: 0 });
    await src.read(1, 1);
    expect(seen).toEqual(['bytes=0-0', 'bytes=1-1']);
  });
});

describe('Node files', () => {
  let dir = '';
  beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'webquant-io-')); });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('fromPath reads ranges and closes; E_IO for a missing file', async () => {
    const p = join(dir, 'a.bin');
    writeFileSync(p, Uint8Array.from({ length: 100 }, (_, i) => i));
    const src = fromPath(p);
    expect(await src.size()).toBe(100);
    expect(Array.from(await src.read(97, 3))).toEqual([97, 98, 99]);
    await expectCode(src.read(99, 2), ErrorCodes.IO);
    await src.close();
    await src.close();
    expect(Array.from(await src.read(0, 2))).toEqual([0, 1]);
    await src.close();
    await expectCode(fromPath(join(dir, 'nope.bin')).size(), ErrorCodes.IO);
  });
  test('writeFileAtomic: renames when complete', async () => {
    const p = join(dir, 'out.bin');
    const r = await writeFileAtomic(p, (async function* () { yield new Uint8Array([1, 2]); yield new Uint8Array([3]); })());
    expect(r.bytes).toBe(3);
    expect(Array.from(readFileSync(p))).toEqual([1, 2, 3]);
    expect(readdirSync(dir).filter((f) => f.includes('.partial-'))).toEqual([]);
  });
  test('writeFileAtomic: flushing while writing (flushEvery) gives the same file', async () => {
    const p = join(dir, 'flushed.bin');
    const chunks = Array.from({ length: 20 }, (_, i) => new Uint8Array(1000).fill(i));
    const r = await writeFileAtomic(p, chunks, { flushEvery: 1500 });
    expect(r.bytes).toBe(20_000);
    const got = readFileSync(p);
    expect(got.byteLength).toBe(20_000);
    for (let i = 0; i < 20; i++) expect(got[i * 1000 + 999]).toBe(i);
    expect(readdirSync(dir).filter((f) => f.includes('.partial-'))).toEqual([]);
  });
  test('writeFileAtomic: an error mid-stream removes the partial and keeps the old file', async () => {
    const p = join(dir, 'keep.bin');
    writeFileSync(p, 'old');
    const boom = async function* () { yield new Uint8Array(10); throw new Error('producer failed'); };
    await expect(writeFileAtomic(p, boom())).rejects.toThrow('producer failed');
    expect(readFileSync(p, 'utf8')).toBe('old');
    expect(readdirSync(dir).filter((f) => f.includes('.partial-'))).toEqual([]);
  });
  test('writeFileAtomic: abort removes the partial', async () => {
    const p = join(dir, 'aborted.bin');
    const ac = new AbortController();
    const chunks = async function* () { yield new Uint8Array(10); ac.abort(); yield new Uint8Array(10); };
    await expectCode(writeFileAtomic(p, chunks(), { signal: ac.signal }), ErrorCodes.ABORTED);
    expect(existsSync(p)).toBe(false);
    expect(readdirSync(dir).filter((f) => f.includes('.partial-'))).toEqual([]);
    await expectCode(writeFileAtomic(p, [new Uint8Array(1)], { signal: ac.signal }), ErrorCodes.ABORTED);
    await expectCode(writeFileAtomic(join(dir, 'no/such/dir/x.bin'), [new Uint8Array(1)]), ErrorCodes.IO);
  });
});
