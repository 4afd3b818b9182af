// Browser stores of the persistent tensor cache (./persist.ts): the origin private file system,
// whose files stream to disk and are committed on close, and the Cache API, for browsers whose
// windows cannot write OPFS files (Safari). Both are atomic per entry.
import type { StoredEntry, TensorStore } from './persist.js';

const KEY = /^[0-9a-f]{40}$/;
const isNotFound = (e: unknown) => (e as { name?: string })?.name === 'NotFoundError';

type IterableDir = FileSystemDirectoryHandle & { entries(): AsyncIterable<[string, FileSystemHandle]> };

/** <OPFS root>/<name>/<key>: the entry bytes. */
export async function opfsStore(name: string): Promise<TensorStore> {
  const dir = (await (await navigator.storage.getDirectory()).getDirectoryHandle(name, { create: true })) as IterableDir;
  return {
    kind: 'opfs',
    async get(key) {
      try {
        const h = await dir.getFileHandle(key);
        return new Uint8Array(await (await h.getFile()).arrayBuffer());
      } catch (e) {
        if (isNotFound(e)) return undefined; // never written, or deleted meanwhile (another tab)
        throw e;
      }
    },
    async put(key, parts) {
      const h = await dir.getFileHandle(key, { create: true });
      // Written to a swap file that replaces the entry on close(): never seen half written.
      const w = await h.createWritable();
      try {
        for (const p of parts) await w.write(p as Uint8Array<ArrayBuffer>);
      } catch (e) {
        await w.abort().catch(() => undefined);
        throw e;
      }
      await w.close();
    },
    async delete(key) {
      await dir.removeEntry(key).catch((e) => { if (!isNotFound(e)) throw e; });
    },
    async list() {
      const out: StoredEntry[] = [];
      for await (const [key, h] of dir.entries()) {
        if (h.kind !== 'file' || !KEY.test(key)) continue;
        try {
          const f = await (h as FileSystemFileHandle).getFile();
          out.push({ key, bytes: f.size, written: f.lastModified });
        } catch (e) {
          if (!isNotFound(e)) throw e; // deleted by another tab meanwhile
        }
      }
      return out;
    },
  };
}

// Cache API keys are http(s) requests; this origin is reserved (.invalid) and never fetched.
const urlOf = (key: string) => `https://webquant.invalid/tensors/${key}`;
const BYTES = 'x-webquant-bytes';
const WRITTEN = 'x-webquant-written';

/** The Cache API cache `name`, one response per entry. */
export async function cacheApiStore(name: string): Promise<TensorStore> {
  const cache = await caches.open(name);
  return {
    kind: 'cache-api',
    async get(key) {
      const res = await cache.match(urlOf(key));
      return res ? new Uint8Array(await res.arrayBuffer()) : undefined;
    },
    async put(key, parts) {
      const bytes = parts.reduce((a, p) => a + p.byteLength, 0);
      // put() stores the response once its whole body is read: atomic.
      await cache.put(urlOf(key), new Response(new Blob(parts as Uint8Array<ArrayBuffer>[]), {
        headers: { 'content-type': 'application/octet-stream', [BYTES]: String(bytes), [WRITTEN]: String(Date.now()) },
      }));
    },
    async delete(key) {
      await cache.delete(urlOf(key));
    },
    async list() {
      const out: StoredEntry[] = [];
      for (const req of await cache.keys()) {
        const key = req.url.slice(req.url.lastIndexOf('/') + 1);
        if (!KEY.test(key)) continue;
        const res = await cache.match(req);
        if (!res) continue;
        await res.body?.cancel();
        out.push({ key, bytes: Number(res.headers.get(BYTES)) || 0, written: Number(res.headers.get(WRITTEN)) || 0 });
      }
      return out;
    },
  };
}
