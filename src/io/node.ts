// Node-only I/O: file sources and atomic file output. The only module of src/io that imports
// node:*; everything else runs in browsers and Workers.
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { basename, resolve } from 'node:path';
import { ErrorCodes, fail, WebquantError } from '../errors.js';
import { checkRange, type ByteSource } from './source.js';

export interface FileSource extends ByteSource {
  close(): Promise<void>;
}

function ioError(path: string, what: string, e: unknown): never {
  if (e instanceof WebquantError) throw e;
  return fail(ErrorCodes.IO, `[io] ${path}: ${what} failed: ${(e as Error)?.message ?? String(e)}`, { file: path, value: (e as { code?: string })?.code ?? String(e) });
}

/**
 * A file read with positional reads through one FileHandle, opened on first use. Call close()
 * when done; reads after close reopen the file.
 */
export function fromPath(path: string): FileSource {
  let handle: Promise<FileHandle> | undefined;
  let size: number | undefined;
  const get = (): Promise<FileHandle> => {
    if (!handle) {
      handle = open(path, 'r').catch((e) => { handle = undefined; return ioError(path, 'open', e); });
    }
    return handle;
  };
  const getSize = async (): Promise<number> => {
    if (size === undefined) {
      const fh = await get();
      size = (await fh.stat().catch((e) => ioError(path, 'stat', e))).size;
    }
    return size;
  };
  return {
    freshReads: true,
    name: path,
    size: getSize,
    async identity() {
      const st = await (await get()).stat().catch((e) => ioError(path, 'stat', e));
      return `path ${resolve(path)} size ${st.size} modified ${st.mtimeMs} inode ${st.ino}`;
    },
    async read(offset, length) {
      checkRange(path, offset, length, await getSize());
      const fh = await get();
      const out = new Uint8Array(length);
      let done = 0;
      while (done < length) {
        const { bytesRead } = await fh.read(out, done, length - done, offset + done).catch((e) => ioError(path, 'read', e));
        if (bytesRead === 0) fail(ErrorCodes.IO, `[io] ${path}: unexpected end of file at ${offset + done}`, { file: path, value: offset + done, expected: offset + length });
        done += bytesRead;
      }
      return out;
    },
    async close() {
      const h = handle;
      handle = undefined;
      size = undefined;
      if (h) await (await h.catch(() => undefined))?.close();
    },
  };
}

export interface AtomicWriteOptions {
  signal?: AbortSignal;
}

/**
 * Writes the chunks to `<path>.partial-<random>` beside the destination and renames it to `path`
 * once everything is written and flushed. On an error or abort the partial file is removed and
 * `path` is left as it was.
 */
export async function writeFileAtomic(
  path: string,
  chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  opts: AtomicWriteOptions = {},
): Promise<{ path: string; bytes: number }> {
  const { signal } = opts;
  const aborted = () => fail(ErrorCodes.ABORTED, `[io] writing ${basename(path)} was aborted`, { file: path, value: String(signal?.reason ?? 'aborted') });
  if (signal?.aborted) aborted();
  const partial = `${path}.partial-${randomBytes(6).toString('hex')}`;
  let fh: FileHandle | undefined;
  let bytes = 0;
  try {
    fh = await open(partial, 'wx').catch((e) => ioError(partial, 'create', e));
    for await (const c of chunks) {
      if (signal?.aborted) aborted();
      let off = 0;
      while (off < c.byteLength) {
        const { bytesWritten } = await fh.write(c, off, c.byteLength - off).catch((e) => ioError(partial, 'write', e));
        off += bytesWritten;
      }
      bytes += c.byteLength;
    }
    if (signal?.aborted) aborted();
    await fh.sync().catch((e) => ioError(partial, 'fsync', e));
    await fh.close().catch((e) => ioError(partial, 'close', e));
    fh = undefined;
    await rename(partial, path).catch((e) => ioError(path, 'rename', e));
    return { path, bytes };
  } catch (e) {
    await fh?.close().catch(() => undefined);
    await rm(partial, { force: true }).catch(() => undefined);
    throw e;
  }
}
