import { describe, expect, it, vi } from 'vitest';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { blobSink, readableStreamSink } from '../../src/pipeline/sink.js';
import { fileSink } from '../../src/pipeline/sink-node.js';
import { dirStore } from '../../src/pipeline/cache-node.js';
import { runKey } from '../../src/pipeline/cache.js';

describe('sinks', () => {
  it('readableStreamSink applies backpressure and delivers bytes in order', async () => {
    const { sink, stream } = readableStreamSink(8);
    let resolved = 0;
    const w1 = sink.write(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8])).then(() => resolved++);
    await new Promise((r) => setTimeout(r, 20));
    expect(resolved).toBe(0); // the queue is full until someone reads
    const reader = stream.getReader();
    expect(Array.from((await reader.read()).value!)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    await w1;
    await sink.write(new Uint8Array([9]));
    await sink.close();
    expect(Array.from((await reader.read()).value!)).toEqual([9]);
    expect((await reader.read()).done).toBe(true);
  });

  it('readableStreamSink: a cancelled stream fails the next write; abort errors the stream', async () => {
    const a = readableStreamSink(1);
    await a.stream.cancel('no thanks');
    await expect(a.sink.write(new Uint8Array(4))).rejects.toBe('no thanks');
    const b = readableStreamSink(1 << 20);
    await b.sink.write(new Uint8Array(4));
    await b.sink.abort(new Error('stop'));
    await expect(new Response(b.stream).arrayBuffer()).rejects.toThrow('stop');
  });

  it('blobSink collects a Blob, or rejects after abort', async () => {
    const a = blobSink();
    await a.sink.write(new Uint8Array([1, 2]));
    await a.sink.write(new Uint8Array([3]));
    await a.sink.close();
    expect(Array.from(new Uint8Array(await (await a.blob()).arrayBuffer()))).toEqual([1, 2, 3]);
    const b = blobSink();
    await b.sink.write(new Uint8Array([1]));
    await b.sink.abort(new Error('gone'));
    await expect(b.blob()).rejects.toThrow('gone');
  });

  it('fileSink replaces the target only on close and leaves it untouched on abort', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wq-sink-'));
    const path = join(dir, 'o.bin');
    writeFileSync(path, 'old');
    const s = await fileSink(path);
    await s.write(new Uint8Array([1, 2, 3]));
    await s.abort();
    expect(readdirSync(dir)).toEqual(['o.bin']);
    expect(new Uint8Array(readFileSync(path))).toEqual(new Uint8Array(Buffer.from('old')));
    const t = await fileSink(path);
    for (let i = 0; i < 100; i++) await t.write(new Uint8Array(1000).fill(i));
    await t.close();
    const got = readFileSync(path);
    expect(got.byteLength).toBe(100_000);
    expect(got[99_999]).toBe(99);
    expect(readdirSync(dir)).toEqual(['o.bin']);
    rmSync(dir, { recursive: true });
  });

  it('fileSink flushes to disk before the rename only when durable, with the same file either way', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wq-sink-durable-'));
    const probe = await open(join(dir, 'probe'), 'w');
    const FileHandle = Object.getPrototypeOf(probe) as { sync(): Promise<void>; datasync(): Promise<void> };
    await probe.close();
    const sync = vi.spyOn(FileHandle, 'sync');
    const datasync = vi.spyOn(FileHandle, 'datasync');
    try {
      for (const durable of [false, true]) {
        sync.mockClear();
        datasync.mockClear();
        const path = join(dir, `o-${durable}.bin`);
        const s = await fileSink(path, durable ? { durable } : undefined);
        // More than the 64 MiB after which a durable file starts flushing while it is written.
        const chunk = new Uint8Array(8 << 20);
        for (let i = 0; i < 9; i++) await s.positional.writeAt(chunk.fill(i), i * chunk.byteLength);
        await s.close();
        const got = readFileSync(path);
        expect(got.byteLength).toBe(72 << 20);
        expect(got[(72 << 20) - 1]).toBe(8);
        expect(sync).toHaveBeenCalledTimes(durable ? 1 : 0);
        expect(datasync.mock.calls.length > 0).toBe(durable);
      }
    } finally {
      sync.mockRestore();
      datasync.mockRestore();
      rmSync(dir, { recursive: true });
    }
  });

  it('fileSink: positional writes here and through the partial file (as workers do) make the file on close', async () => {
    const { openFileWriteSync } = await import('../../src/io/node.js');
    const dir = mkdtempSync(join(tmpdir(), 'wq-sink-pos-'));
    const path = join(dir, 'o.bin');
    const s = await fileSink(path);
    // Out of order: the tail first, then a part written by "another thread", then the head.
    await s.positional.writeAt(new Uint8Array([7, 8, 9]), 6);
    const w = openFileWriteSync(s.positional.path);
    w.writeAt(new Uint8Array([4, 5, 6]), 3);
    w.close();
    s.positional.wrote(3);
    await s.positional.writeAt(new Uint8Array([1, 2, 3]), 0);
    expect(existsSync(path)).toBe(false);
    await s.close();
    expect(Array.from(readFileSync(path))).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(readdirSync(dir)).toEqual(['o.bin']);
    await expect(s.positional.writeAt(new Uint8Array(1), 0)).rejects.toMatchObject({ code: 'E_IO' });
    const t = await fileSink(path);
    await t.positional.writeAt(new Uint8Array(5), 0);
    await t.abort();
    expect(readdirSync(dir)).toEqual(['o.bin']);
    expect(() => openFileWriteSync(t.positional.path)).toThrow(expect.objectContaining({ code: 'E_IO' }));
    rmSync(dir, { recursive: true });
  });
});

describe('resume store (directory)', () => {
  it('round-trips units, ignores incomplete ones and clears a run', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wq-store-'));
    const store = dirStore(dir);
    const key = await runKey({ source: 'm.safetensors', size: 10, header: { a: 1 }, plan: [{ name: 'w', format: 'q8_0' }], container: 'safetensors/1' });
    expect(key).toMatch(/^[0-9a-f]{32}$/);
    expect(await runKey({ source: 'm.safetensors', size: 10, header: { a: 1 }, plan: [{ name: 'w', format: 'q4_0' }], container: 'safetensors/1' })).not.toBe(key);
    expect(await store.get(key, '0')).toBeUndefined();
    await store.put(key, '0', { data: new Uint8Array([5, 6, 7]), meta: { metrics: { rmse: '0.5' } } });
    const got = await store.get(key, '0');
    expect(Array.from(got!.data)).toEqual([5, 6, 7]);
    expect(got!.meta).toEqual({ metrics: { rmse: '0.5' } });
    // Bytes without their .json (a kill between the two renames) do not count.
    writeFileSync(join(dir, key, '1.bin'), new Uint8Array(3));
    expect(await store.get(key, '1')).toBeUndefined();
    // A truncated .bin does not count either.
    writeFileSync(join(dir, key, '0.bin'), new Uint8Array(2));
    expect(await store.get(key, '0')).toBeUndefined();
    await store.clear(key);
    expect(existsSync(join(dir, key))).toBe(false);
  });
});
