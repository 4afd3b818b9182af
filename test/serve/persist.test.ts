// openQuantized's persistent cache on Node: the 'dir' store and a TensorStore of the test's own.
// A second opening of the same source reads no tensor bytes from it; entries are checked before
// use (a short, foreign or, with verify 'sha256', altered entry is dropped and the tensor re-read);
// the byte cap evicts least recently used entries; bad options are E_BAD_OPTION naming the field;
// 'auto' falls back to no persistence on Node. The browser stores: test/browser/serve-cache.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { collect, fromBuffer, openCheckpoint, writeGguf, type ByteSource } from '../../src/io/index.js';
import { quantize } from '../../src/quantize.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';
import { openQuantized, type OpenQuantizedOptions, type StoredEntry, type TensorStore } from '../../src/serve/index.js';
import { decodeEntry, encodeEntry, resolvePersistOptions } from '../../src/serve/persist.js';

const ROWS = 8, COLS = 256;
const PER = ROWS * (COLS / 32) * 34; // bytes of one Q8_0 tensor (2176)
const NAMES = ['t0', 't1', 't2', 't3'];

function rand(n: number, seed: number): Float32Array {
  const v = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    v[i] = (s >>> 8) / 8388608 - 1;
  }
  return v;
}

let file: Uint8Array;
let dataStart = 0;
let dir = '';
let n = 0;
const x = rand(COLS, 99);

beforeAll(async () => {
  const tensors = [];
  for (const [i, name] of NAMES.entries()) {
    const q = await quantize(rand(ROWS * COLS, 10 + i), { format: 'q8_0', rowLength: COLS });
    tensors.push({ name, ggmlType: 'Q8_0', shape: [ROWS, COLS], data: q.data });
  }
  tensors.push({ name: 'norm', ggmlType: 'F32', shape: [COLS], data: rand(COLS, 5) });
  file = await collect(writeGguf({ tensors }));
  const ck = await openCheckpoint(fromBuffer(file));
  dataStart = Math.min(...ck.tensors.map((t) => t.offset));
  dir = mkdtempSync(join(tmpdir(), 'webquant-persist-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The file as a source with an identity, counting the bytes read past the header. */
function source(identity: string | undefined = 'test-file v1') {
  const inner = fromBuffer(file, 'mem.gguf');
  const stats = { tensorBytes: 0 };
  const src: ByteSource = {
    name: 'mem.gguf',
    size: () => inner.size(),
    identity: async () => identity,
    async read(o, len) {
      if (o >= dataStart) stats.tensorBytes += len; // header reads start at 0 and may run past dataStart
      return inner.read(o, len);
    },
  };
  return { src, stats };
}

/** A fresh directory per test (the cap and the counts are per store). */
const newDir = () => join(dir, `s${n++}`);

async function readAll(q: Awaited<ReturnType<typeof openQuantized>>, names = NAMES) {
  const out: number[][] = [];
  for (const name of names) out.push(Array.from(await q.tensor(name).matvec(x)));
  out.push(Array.from(await q.tensor('norm').dequantize()));
  return out;
}

const dirOpts = (d: string, extra: Record<string, unknown> = {}): OpenQuantizedOptions => ({ persistentCache: { store: 'dir', dir: d, ...extra } });

describe('persistent cache, dir store', () => {
  it('a second opening reads no tensor bytes from the source and gives the same values', async () => {
    const d = newDir();
    const a = source();
    const q1 = await openQuantized(a.src, dirOpts(d));
    const want = await readAll(q1);
    await q1.flush();
    expect(a.stats.tensorBytes).toBe(4 * PER + COLS * 4);
    expect(q1.cacheStats().persistent).toMatchObject({ store: 'dir', writes: 5, hits: 0, misses: 5, errors: 0 });
    expect(readdirSync(d).filter((f) => f.endsWith('.wqt')).length).toBe(5);

    const b = source();
    const q2 = await openQuantized(b.src, dirOpts(d));
    expect(await readAll(q2)).toEqual(want);
    expect(b.stats.tensorBytes).toBe(0);
    expect(q2.cacheStats().persistent).toMatchObject({ hits: 5, misses: 0, writes: 0, dropped: 0 });
  });

  it('another identity (the file changed) is a miss', async () => {
    const d = newDir();
    const q1 = await openQuantized(source('v1').src, dirOpts(d));
    await readAll(q1);
    await q1.flush();
    const b = source('v2');
    await readAll(await openQuantized(b.src, dirOpts(d)));
    expect(b.stats.tensorBytes).toBe(4 * PER + COLS * 4);
  });

  it('a short, altered or foreign entry is dropped and the tensor read again, never returned', async () => {
    const d = newDir();
    const q1 = await openQuantized(source().src, dirOpts(d, { verify: 'sha256' }));
    const want = await readAll(q1, ['t0']);
    await q1.flush();
    const entries = () => readdirSync(d).filter((f) => f.endsWith('.wqt')).map((f) => join(d, f));
    const byTensor = (t: string) => entries().find((p) => readFileSync(p).includes(Buffer.from(`"tensor":"${t}"`)))!;
    const t0 = byTensor('t0');
    const good = readFileSync(t0);

    const damage = [
      ['short', good.subarray(0, good.length - 1)],
      ['long', Buffer.concat([good, Buffer.from([0])])],
      ['empty', Buffer.alloc(0)],
      ['bad magic', Buffer.concat([Buffer.from('XXXX'), good.subarray(4)])],
      ['foreign', readFileSync(byTensor('norm'))],
      ['one byte changed', Buffer.from(good.map((v, i) => (i === good.length - 7 ? v ^ 1 : v)))],
    ] as const;
    for (const [what, bytes] of damage) {
      writeFileSync(t0, bytes);
      const b = source();
      const q = await openQuantized(b.src, dirOpts(d, { verify: 'sha256' }));
      expect(await readAll(q, ['t0']), what).toEqual(want);
      expect(b.stats.tensorBytes, what).toBe(PER); // t0 again; norm from the store
      expect(q.cacheStats().persistent, what).toMatchObject({ dropped: 1, hits: 1 /* norm */, misses: 1 });
      await q.flush();
      // rewritten whole
      expect(readFileSync(t0).equals(good), what).toBe(true);
    }
  });

  it('the byte cap evicts least recently used entries first', async () => {
    const d = newDir();
    const entry = (await encodeEntry('test-file v1', 't0', [new Uint8Array(PER)])).reduce((a, p) => a + p.byteLength, 0);
    // room for two tensors; memory cache off so that every read asks the store
    const opts: OpenQuantizedOptions = { cacheBytes: 0, persistentCache: { store: 'dir', dir: d, maxBytes: 2 * entry + 10 } };
    const a = source();
    const q = await openQuantized(a.src, opts);
    const step = async (name: string) => { const before = a.stats.tensorBytes; await q.tensor(name).matvec(x); await q.flush(); return a.stats.tensorBytes - before; };
    expect(await step('t0')).toBe(PER);
    expect(await step('t1')).toBe(PER);
    expect(await step('t0')).toBe(0); // from the store; t0 is now the most recently used
    expect(await step('t2')).toBe(PER); // evicts t1
    expect(await step('t0')).toBe(0);
    expect(await step('t1')).toBe(PER); // evicts t2
    const s = q.cacheStats().persistent!;
    expect(s).toMatchObject({ evictions: 2, writes: 4 });
    expect(s.bytes).toBeLessThanOrEqual(2 * entry + 10);
    const onDisk = readdirSync(d).filter((f) => f.endsWith('.wqt')).reduce((acc, f) => acc + readFileSync(join(d, f)).length, 0);
    expect(onDisk).toBe(s.bytes);
    // a tensor larger than the whole cap is served, not stored
    const tiny = await openQuantized(source().src, { persistentCache: { store: 'dir', dir: newDir(), maxBytes: 100 } });
    await tiny.tensor('t3').matvec(x);
    await tiny.flush();
    expect(tiny.cacheStats().persistent).toMatchObject({ skipped: 1, writes: 0 });
  });

  it('entries written by another opening count against the cap', async () => {
    const d = newDir();
    const entry = (await encodeEntry('test-file v1', 't0', [new Uint8Array(PER)])).reduce((acc, p) => acc + p.byteLength, 0);
    const o: OpenQuantizedOptions = { persistentCache: { store: 'dir', dir: d, maxBytes: 3 * entry } };
    const q1 = await openQuantized(source('one').src, o);
    await readAll(q1, ['t0', 't1']);
    await q1.flush();
    const q2 = await openQuantized(source('two').src, o);
    await readAll(q2, ['t0', 't1']);
    await q2.flush();
    const onDisk = readdirSync(d).filter((f) => f.endsWith('.wqt')).reduce((acc, f) => acc + readFileSync(join(d, f)).length, 0);
    expect(onDisk).toBeLessThanOrEqual(3 * entry);
  });
});

describe('persistent cache, other stores and fallbacks', () => {
  /** A Map as a store, whose operations can be made to fail. */
  function mapStore(failing = { get: false, put: false }): TensorStore & { map: Map<string, Uint8Array> } {
    const map = new Map<string, Uint8Array>();
    const boom = () => { throw new Error('storage unavailable'); };
    return {
      kind: 'test-map',
      map,
      async get(k) { if (failing.get) boom(); return map.get(k); },
      async put(k, parts) { if (failing.put) boom(); map.set(k, new Uint8Array(Buffer.concat(parts))); },
      async delete(k) { map.delete(k); },
      async list(): Promise<StoredEntry[]> { return [...map].map(([key, v]) => ({ key, bytes: v.byteLength, written: 0 })); },
    };
  }

  it('a custom TensorStore', async () => {
    const store = mapStore();
    const q1 = await openQuantized(source().src, { persistentCache: { store } });
    const want = await readAll(q1);
    await q1.flush();
    expect(store.map.size).toBe(5);
    const b = source();
    const q = await openQuantized(b.src, { persistentCache: { store } });
    expect(await readAll(q)).toEqual(want);
    expect(b.stats.tensorBytes).toBe(0);
    expect(q.cacheStats().persistent!.store).toBe('test-map');
  });

  it('a failing store costs nothing but the cache: values from the source, errors counted', async () => {
    const q = await openQuantized(source().src, { persistentCache: { store: mapStore({ get: true, put: true }) } });
    const plain = await readAll(await openQuantized(source().src));
    const warn = console.warn;
    console.warn = () => undefined;
    try {
      expect(await readAll(q)).toEqual(plain);
      await q.flush();
    } finally {
      console.warn = warn;
    }
    expect(q.cacheStats().persistent).toMatchObject({ errors: 10, hits: 0, writes: 0 });
  });

  it("'auto' on Node (no OPFS, no Cache API): nothing stored, and says why", async () => {
    const q = await openQuantized(source().src, { persistentCache: true });
    const plain = await readAll(await openQuantized(source().src));
    expect(await readAll(q)).toEqual(plain);
    expect(q.cacheStats().persistent).toMatchObject({ store: 'none', reason: 'no opfs; no cache-api' });
  });

  it('a source without identity stores nothing unless given a key', async () => {
    const d = newDir();
    const q = await openQuantized(fromBuffer(file), dirOpts(d));
    await readAll(q);
    await q.flush();
    expect(q.cacheStats().persistent!.store).toBe('none');
    expect(q.cacheStats().persistent!.reason).toMatch(/persistentCache\.key/);
    const ck = await openCheckpoint(fromBuffer(file));
    const keyed = await openQuantized(ck, dirOpts(d, { key: 'sha256:abc' }));
    await readAll(keyed);
    await keyed.flush();
    expect(keyed.cacheStats().persistent).toMatchObject({ store: 'dir', writes: 5 });
  });

  it('bad options are E_BAD_OPTION naming the field', async () => {
    const bad: [unknown, string][] = [
      [5, 'persistentCache'],
      [{ store: 'indexeddb' }, 'persistentCache.store'],
      [{ store: { get: () => undefined } }, 'persistentCache.store'],
      [{ maxBytes: -1 }, 'persistentCache.maxBytes'],
      [{ maxBytes: 1.5 }, 'persistentCache.maxBytes'],
      [{ maxBytes: '1GB' }, 'persistentCache.maxBytes'],
      [{ name: '' }, 'persistentCache.name'],
      [{ name: 'a/b' }, 'persistentCache.name'],
      [{ name: '..' }, 'persistentCache.name'],
      [{ key: '' }, 'persistentCache.key'],
      [{ verify: 'md5' }, 'persistentCache.verify'],
      [{ store: 'dir' }, 'persistentCache.dir'],
      [{ store: 'opfs', dir: '/tmp' }, 'persistentCache.dir'],
      [{ maxbytes: 10 }, 'persistentCache.maxbytes'],
    ];
    for (const [o, option] of bad) {
      let err: unknown;
      try { resolvePersistOptions(o as never); } catch (e) { err = e; }
      expect(err, JSON.stringify(o)).toBeInstanceOf(WebquantError);
      expect((err as WebquantError).code).toBe(ErrorCodes.BAD_OPTION);
      expect((err as WebquantError).details.option).toBe(option);
    }
    // a store this runtime lacks, asked for by name
    for (const store of ['opfs', 'cache-api'] as const) {
      await expect(openQuantized(source().src, { persistentCache: { store } })).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'persistentCache.store', value: store } });
    }
  });

  it('decodeEntry says why an entry is refused', async () => {
    const parts = await encodeEntry('src', 'w', [new Uint8Array([1, 2, 3]), new Uint8Array([4])]);
    const all = new Uint8Array(Buffer.concat(parts));
    const ok = await decodeEntry(all, 'src', 'w', [3, 1], 'sha256');
    expect(Array.isArray(ok) && ok.map((s) => Array.from(s))).toEqual([[1, 2, 3], [4]]);
    expect(await decodeEntry(all, 'src', 'w', [2, 2], 'size')).toMatch(/sections/);
    expect(await decodeEntry(all, 'other', 'w', [3, 1], 'size')).toMatch(/another/);
    expect(await decodeEntry(all.subarray(0, 10), 'src', 'w', [3, 1], 'size')).toMatch(/runs past/);
  });
});
