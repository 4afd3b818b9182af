// Resume store in a directory (Node): <dir>/<key>/<id>.bin and <id>.json, each written to a
// temporary name and renamed, the .json last, so a unit counts only once both are complete.
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ErrorCodes, WebquantError } from '../errors.js';
import type { CachedUnit, ResumeStore } from './cache.js';

export function dirStore(dir: string): ResumeStore {
  const fail = (what: string, e: unknown) => new WebquantError(ErrorCodes.CACHE, `[pipeline] resume cache ${dir}: ${what}: ${(e as Error).message}`, { file: dir, value: (e as Error).message });
  const atomic = async (path: string, data: Uint8Array | string) => {
    const tmp = `${path}.${process.pid}.tmp`;
    await writeFile(tmp, data);
    await rename(tmp, path);
  };
  return {
    async get(key, id) {
      const base = join(dir, key, id);
      let meta: { bytes: number; meta: unknown };
      try {
        meta = JSON.parse(await readFile(`${base}.json`, 'utf8'));
      } catch {
        return undefined;
      }
      try {
        const b = await readFile(`${base}.bin`);
        if (b.byteLength !== meta.bytes) return undefined;
        return { data: new Uint8Array(b.buffer, b.byteOffset, b.byteLength), meta: meta.meta };
      } catch {
        return undefined;
      }
    },
    async put(key, id, unit: CachedUnit) {
      try {
        await mkdir(join(dir, key), { recursive: true });
        const base = join(dir, key, id);
        await atomic(`${base}.bin`, unit.data);
        await atomic(`${base}.json`, JSON.stringify({ bytes: unit.data.byteLength, meta: unit.meta }));
      } catch (e) {
        throw fail(`storing ${id}`, e);
      }
    },
    async clear(key) {
      await rm(join(dir, key), { recursive: true, force: true });
    },
  };
}
