// Resume stores for browsers: the origin private file system where it exists (files are large
// and OPFS streams them to disk), IndexedDB otherwise. Both store a unit's bytes and details in
// one step, so a unit is either there whole or not at all.
import { ErrorCodes, WebquantError } from '../errors.js';
import type { CachedUnit, ResumeStore } from './cache.js';

const cacheError = (what: string, e: unknown) => new WebquantError(ErrorCodes.CACHE, `[pipeline] resume cache: ${what}: ${(e as Error)?.message ?? String(e)}`, { value: String(e) });

/** OPFS: <root>/<key>/<id> holds [u32 meta length][meta JSON][bytes]. */
export function opfsStore(rootName = 'webquant-resume'): ResumeStore {
  const dir = async (key: string, create: boolean) => {
    const root = await (await navigator.storage.getDirectory()).getDirectoryHandle(rootName, { create });
    return root.getDirectoryHandle(key, { create });
  };
  return {
    async get(key, id) {
      try {
        const f = await (await (await dir(key, false)).getFileHandle(id)).getFile();
        const all = new Uint8Array(await f.arrayBuffer());
        if (all.byteLength < 4) return undefined;
        const n = new DataView(all.buffer).getUint32(0, true);
        const meta = JSON.parse(new TextDecoder().decode(all.subarray(4, 4 + n))) as { bytes: number; meta: unknown };
        const data = all.subarray(4 + n);
        return data.byteLength === meta.bytes ? { data, meta: meta.meta } : undefined;
      } catch {
        return undefined;
      }
    },
    async put(key, id, unit: CachedUnit) {
      try {
        const h = await (await dir(key, true)).getFileHandle(id, { create: true });
        // The writable commits on close() only: the unit is never seen half written.
        const w = await (h as FileSystemFileHandle & { createWritable(): Promise<FileSystemWritableFileStream> }).createWritable();
        const json = new TextEncoder().encode(JSON.stringify({ bytes: unit.data.byteLength, meta: unit.meta }));
        const len = new Uint8Array(4);
        new DataView(len.buffer).setUint32(0, json.byteLength, true);
        await w.write(len);
        await w.write(json);
        await w.write(unit.data as Uint8Array<ArrayBuffer>);
        await w.close();
      } catch (e) {
        throw cacheError(`storing ${id}`, e);
      }
    },
    async clear(key) {
      try {
        const root = await (await navigator.storage.getDirectory()).getDirectoryHandle(rootName, { create: true });
        await root.removeEntry(key, { recursive: true });
      } catch {
        // nothing stored
      }
    },
  };
}

/** IndexedDB: one object store, records keyed by [runKey, unitId]. */
export function indexedDbStore(dbName = 'webquant-resume'): ResumeStore {
  let db: Promise<IDBDatabase> | undefined;
  const open = () => (db ??= new Promise<IDBDatabase>((resolve, reject) => {
    const r = indexedDB.open(dbName, 1);
    r.onupgradeneeded = () => r.result.createObjectStore('units');
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  }));
  const tx = async <T>(mode: IDBTransactionMode, f: (s: IDBObjectStore) => IDBRequest<T>): Promise<T> => {
    const d = await open();
    return new Promise<T>((resolve, reject) => {
      const t = d.transaction('units', mode);
      const req = f(t.objectStore('units'));
      t.oncomplete = () => resolve(req.result);
      t.onerror = () => reject(t.error);
      t.onabort = () => reject(t.error);
    });
  };
  return {
    async get(key, id) {
      try {
        const v = await tx('readonly', (s) => s.get([key, id]) as IDBRequest<{ data: ArrayBuffer; meta: unknown } | undefined>);
        return v ? { data: new Uint8Array(v.data), meta: v.meta } : undefined;
      } catch {
        return undefined;
      }
    },
    async put(key, id, unit) {
      try {
        await tx('readwrite', (s) => s.put({ data: unit.data.slice().buffer, meta: unit.meta }, [key, id]));
      } catch (e) {
        throw cacheError(`storing ${id}`, e);
      }
    },
    async clear(key) {
      await tx('readwrite', (s) => s.delete(IDBKeyRange.bound([key, ''], [key, '\uffff'])));
    },
  };
}

/** OPFS when the browser has it, IndexedDB otherwise. */
export function browserStore(name = 'webquant-resume'): ResumeStore {
  const hasOpfs = typeof navigator !== 'undefined' && typeof navigator.storage?.getDirectory === 'function';
  return hasOpfs ? opfsStore(name) : indexedDbStore(name);
}
