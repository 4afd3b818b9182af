// ByteSource.identity(): what persistent caches key on. A URL is identified by its validators
// (ETag, Last-Modified) and size, a File by name, size and mtime, a path by path, size, mtime and
// inode; a source with nothing that outlives it (a Blob, a buffer, a URL without validators) has
// none. A URL whose validators change between two answers is another file: E_IO.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { ErrorCodes } from '../../src/errors.js';
import { fromBlob, fromBuffer, fromUrl } from '../../src/io/source.js';
import { fromPath } from '../../src/io/node.js';
import { expectCode } from './helpers.js';

describe('identity of URL sources', () => {
  let server: Server;
  let base = '';
  const body = Uint8Array.from({ length: 300 }, (_, i) => i & 0xff);
  let etag = '"v1"';

  beforeAll(async () => {
    server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0];
      const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
      if (!m) { res.writeHead(400); res.end(); return; }
      const start = Number(m[1]), end = Math.min(Number(m[2]), body.length - 1);
      const headers: Record<string, string | number> = { 'Content-Range': `bytes ${start}-${end}/${body.length}`, 'Content-Length': end - start + 1 };
      if (path === '/etag.bin') headers.ETag = etag;
      if (path === '/modified.bin') headers['Last-Modified'] = 'Tue, 01 Jul 2025 10:00:00 GMT';
      res.writeHead(206, headers);
      res.end(body.subarray(start, end + 1));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  test('ETag, Last-Modified, or none', async () => {
    etag = '"v1"';
    expect(await fromUrl(`${base}/etag.bin`).identity!()).toBe(`url ${base}/etag.bin size 300 etag "v1"`);
    expect(await fromUrl(`${base}/modified.bin`).identity!()).toBe(`url ${base}/modified.bin size 300 last-modified Tue, 01 Jul 2025 10:00:00 GMT`);
    expect(await fromUrl(`${base}/plain.bin`).identity!()).toBeUndefined();
  });

  test('a new ETag gives a new identity, and mid-read it is E_IO (the file was replaced)', async () => {
    etag = '"v1"';
    const src = fromUrl(`${base}/etag.bin`, { prefetch: 16 });
    const id1 = await src.identity!();
    expect(Array.from(await src.read(20, 4))).toEqual([20, 21, 22, 23]);
    etag = '"v2"';
    await expectCode(src.read(40, 4), ErrorCodes.IO);
    expect(await fromUrl(`${base}/etag.bin`).identity!()).not.toBe(id1);
    etag = '"v1"';
  });
});

describe('identity of local sources', () => {
  let dir = '';
  beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'webquant-identity-')); });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('a File by name, size and mtime; a Blob and a buffer have none', async () => {
    const f = new File([new Uint8Array(5)], 'w.gguf', { lastModified: 1234 });
    expect(await fromBlob(f).identity!()).toBe('file w.gguf size 5 modified 1234');
    expect(await fromBlob(new File([new Uint8Array(5)], 'w.gguf', { lastModified: 1235 })).identity!()).not.toBe(await fromBlob(f).identity!());
    expect(await fromBlob(new Blob([new Uint8Array(5)])).identity!()).toBeUndefined();
    expect(fromBuffer(new Uint8Array(5)).identity).toBeUndefined();
  });

  test('a path changes identity when the file is rewritten', async () => {
    const p = join(dir, 'a.bin');
    writeFileSync(p, new Uint8Array(10));
    utimesSync(p, 1000, 1000);
    const a = fromPath(p);
    const id1 = await a.identity!();
    expect(id1).toMatch(/^path .*a\.bin size 10 modified 1000000 inode \d+$/);
    await a.close();
    writeFileSync(p, new Uint8Array(10));
    utimesSync(p, 2000, 2000);
    const b = fromPath(p);
    expect(await b.identity!()).not.toBe(id1);
    await b.close();
  });
});
