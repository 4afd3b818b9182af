// The Node store of the persistent tensor cache (./persist.ts): <dir>/<key>.wqt, each written to a
// temporary name beside it and renamed, so that an entry is whole or absent.
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { StoredEntry, TensorStore } from './persist.js';

const ENTRY = /^([0-9a-f]{40})\.wqt$/;
const missing = (e: unknown) => (e as { code?: string })?.code === 'ENOENT';

export function dirStore(dir: string): TensorStore {
  let made: Promise<unknown> | undefined;
  const ready = () => (made ??= mkdir(dir, { recursive: true }));
  const path = (key: string) => join(dir, `${key}.wqt`);
  return {
    kind: 'dir',
    async get(key) {
      try {
        const b = await readFile(path(key));
        return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
      } catch (e) {
        if (missing(e)) return undefined;
        throw e;
      }
    },
    async put(key, parts) {
      await ready();
      const tmp = `${path(key)}.${randomBytes(6).toString('hex')}.tmp`;
      try {
        await writeFile(tmp, parts);
        await rename(tmp, path(key));
      } catch (e) {
        await rm(tmp, { force: true });
        throw e;
      }
    },
    async delete(key) {
      await rm(path(key), { force: true });
    },
    async list() {
      let names: string[];
      try {
        names = await readdir(dir);
      } catch (e) {
        if (missing(e)) return [];
        throw e;
      }
      const out: StoredEntry[] = [];
      for (const n of names) {
        const m = ENTRY.exec(n);
        if (!m) continue;
        try {
          const s = await stat(join(dir, n));
          out.push({ key: m[1], bytes: s.size, written: s.mtimeMs });
        } catch (e) {
          if (!missing(e)) throw e;
        }
      }
      return out;
    },
  };
}
