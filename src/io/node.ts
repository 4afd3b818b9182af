// Node-only I/O: file sources and atomic file output. The only module of src/io that imports
// node:*; everything else runs in browsers and Workers.
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import { closeSync, openSync, readSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename, resolve } from 'node:path';
import { ErrorCodes, fail, WebquantError } from '../errors.js';
import { checkRange, type ByteSource, type SourceRef } from './source.js';

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
  const readInto = async (out: Uint8Array, offset: number): Promise<void> => {
    const length = out.byteLength;
    checkRange(path, offset, length, await getSize());
    const fh = await get();
    let done = 0;
    while (done < length) {
      const { bytesRead } = await fh.read(out, done, length - done, offset + done).catch((e) => ioError(path, 'read', e));
      if (bytesRead === 0) fail(ErrorCodes.IO, `[io] ${path}: unexpected end of file at ${offset + done}`, { file: path, value: offset + done, expected: offset + length });
      done += bytesRead;
    }
  };
  return {
    freshReads: true,
    name: path,
    size: getSize,
    async identity() {
      const st = await (await get()).stat().catch((e) => ioError(path, 'stat', e));
      return `path ${resolve(path)} size ${st.size} modified ${st.mtimeMs} inode ${st.ino}`;
    },
    ref: async () => ({ kind: 'file', name: path, path, size: await getSize() }),
    async read(offset, length) {
      const out = new Uint8Array(length);
      await readInto(out, offset);
      return out;
    },
    readInto,
    async close() {
      const h = handle;
      handle = undefined;
      size = undefined;
      if (h) await (await h.catch(() => undefined))?.close();
    },
  };
}

/**
 * Synchronous positional reads of one file, for a worker thread that copies a range straight into
 * wasm memory (blocking is what a worker is for; the read's own copy is then the only one).
 */
export interface SyncFileReader {
  /** Fills `dst` with the bytes at `position`; a short file is E_IO. */
  readInto(dst: Uint8Array, position: number): void;
  close(): void;
}

export function openFileSync(ref: Extract<SourceRef, { kind: 'file' }>): SyncFileReader {
  const { path } = ref;
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    ioError(path, 'open', e);
  }
  return {
    readInto(dst, position) {
      checkRange(path, position, dst.byteLength, ref.size);
      let done = 0;
      while (done < dst.byteLength) {
        let n: number;
        try {
          n = readSync(fd!, dst, done, dst.byteLength - done, position + done);
        } catch (e) {
          return ioError(path, 'read', e);
        }
        if (n === 0) fail(ErrorCodes.IO, `[io] ${path}: unexpected end of file at ${position + done}`, { file: path, value: position + done, expected: position + dst.byteLength });
        done += n;
      }
    },
    close() {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
  };
}

export interface AtomicWriteOptions {
  signal?: AbortSignal;
  /**
   * Start flushing to disk after every this many bytes, while writing goes on (default 64 MiB;
   * 0: only at the end). The final flush before the rename then waits for the last stretch only,
   * instead of the whole file sitting in the page cache until then.
   */
  flushEvery?: number;
  /**
   * Flush the file to disk before the rename (default true). Without it the rename still makes the
   * file appear whole or not at all to every reader, and a killed process leaves no partial file
   * under the target name; only a power loss or OS crash shortly after could then leave the target
   * short or empty. No flushing also means no periodic flushes (flushEvery is ignored).
   */
  durable?: boolean;
}

const FLUSH_EVERY = 64 << 20;

/**
 * A file written at any offsets, by this thread (writeAt) or by others that open `partial`
 * themselves (pipeline workers; they report their bytes through wrote()). It lives at
 * `<path>.partial-<random>` until commit() flushes it (unless not `durable`) and renames it to
 * `path`; discard() removes it and leaves `path` as it was.
 */
export interface AtomicFile {
  readonly partial: string;
  writeAt(bytes: Uint8Array, offset: number): Promise<void>;
  /** Counts bytes other threads wrote, for the periodic flush. */
  wrote(n: number): void;
  commit(): Promise<void>;
  discard(): Promise<void>;
}

export async function createAtomicFile(path: string, opts: Pick<AtomicWriteOptions, 'flushEvery' | 'durable'> = {}): Promise<AtomicFile> {
  const partial = `${path}.partial-${randomBytes(6).toString('hex')}`;
  const fh = await open(partial, 'wx').catch((e) => ioError(partial, 'create', e));
  const durable = opts.durable ?? true;
  const flushEvery = durable ? (opts.flushEvery ?? FLUSH_EVERY) : 0;
  // At most one flush in flight; a failure is reported by the next write or by commit().
  let flushing: Promise<void> | undefined;
  let flushFailed: unknown;
  let unflushed = 0;
  let state: 'open' | 'committed' | 'discarded' = 'open';
  const count = (n: number) => {
    unflushed += n;
    if (flushEvery > 0 && unflushed >= flushEvery && !flushing && state === 'open') {
      unflushed = 0;
      flushing = fh.datasync().then(
        () => { flushing = undefined; },
        (e) => { flushing = undefined; try { ioError(partial, 'fdatasync', e); } catch (err) { flushFailed ??= err; } },
      );
    }
  };
  const ensureOpen = () => {
    if (flushFailed) throw flushFailed;
    if (state !== 'open') fail(ErrorCodes.IO, `[io] ${partial}: the file was already ${state}`, { file: partial, value: state, expected: 'open' });
  };
  return {
    partial,
    async writeAt(bytes, offset) {
      ensureOpen();
      let off = 0;
      while (off < bytes.byteLength) {
        const { bytesWritten } = await fh.write(bytes, off, bytes.byteLength - off, offset + off).catch((e) => ioError(partial, 'write', e));
        off += bytesWritten;
      }
      count(bytes.byteLength);
    },
    wrote: count,
    async commit() {
      ensureOpen();
      state = 'committed';
      try {
        await flushing;
        if (flushFailed) throw flushFailed;
        if (durable) await fh.sync().catch((e) => ioError(partial, 'fsync', e));
        await fh.close().catch((e) => ioError(partial, 'close', e));
        await rename(partial, path).catch((e) => ioError(path, 'rename', e));
      } catch (e) {
        await fh.close().catch(() => undefined);
        await rm(partial, { force: true }).catch(() => undefined);
        throw e;
      }
    },
    async discard() {
      if (state !== 'open') return;
      state = 'discarded';
      await flushing;
      await fh.close().catch(() => undefined);
      await rm(partial, { force: true }).catch(() => undefined);
    },
  };
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
  const file = await createAtomicFile(path, opts);
  let bytes = 0;
  try {
    for await (const c of chunks) {
      if (signal?.aborted) aborted();
      await file.writeAt(c, bytes);
      bytes += c.byteLength;
    }
    if (signal?.aborted) aborted();
    await file.commit();
    return { path, bytes };
  } catch (e) {
    await file.discard();
    throw e;
  }
}

/** Synchronous positional writes to a file another thread created (a pipeline worker's output). */
export interface SyncFileWriter {
  writeAt(bytes: Uint8Array, position: number): void;
  close(): void;
}

export function openFileWriteSync(path: string): SyncFileWriter {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r+');
  } catch (e) {
    ioError(path, 'open', e);
  }
  return {
    writeAt(bytes, position) {
      let done = 0;
      while (done < bytes.byteLength) {
        try {
          done += writeSync(fd!, bytes, done, bytes.byteLength - done, position + done);
        } catch (e) {
          ioError(path, 'write', e);
        }
      }
    },
    close() {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
  };
}
