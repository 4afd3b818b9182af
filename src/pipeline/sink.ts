// Where the pipeline's output bytes go. Every sink receives the container bytes in order, then
// close() (the output becomes visible / complete) or abort() (nothing partial is left behind).
// Node's file sink is in sink-node.ts; the sinks here work in browsers, Workers and Node.

export interface Sink {
  /** The pipeline never modifies a chunk after passing it, so a sink may keep it without a copy. */
  write(chunk: Uint8Array): Promise<void>;
  close(): Promise<void>;
  abort(reason?: unknown): Promise<void>;
  /**
   * Optional: the output is a file that workers may write their results into themselves, at
   * offsets known in advance (Node's fileSink). A pipeline that uses it writes everything through
   * writeAt and the workers, never through write().
   */
  readonly positional?: PositionalTarget;
  /**
   * Optional: the output is several files back to back (ContainerPlan.files, a split GGUF), of
   * these byte lengths. Called once, before the first write.
   */
  files?(lengths: number[]): Promise<void>;
}

export interface PositionalTarget {
  /** The file a worker opens for its positional writes (cloneable). */
  readonly path: string;
  writeAt(bytes: Uint8Array, offset: number): Promise<void>;
  /** Bytes the workers wrote (a durable sink flushes to disk as they accumulate). */
  wrote(n: number): void;
}

/**
 * A sink read through a ReadableStream (e.g. to pipe into a Response or a download). write()
 * waits while the stream's queue is full, so a slow reader slows the pipeline instead of
 * buffering the model in memory. Aborting errors the stream.
 */
export function readableStreamSink(highWaterMark = 4 << 20): { sink: Sink; stream: ReadableStream<Uint8Array> } {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let wake: (() => void) | undefined;
  let cancelled: unknown;
  const stream = new ReadableStream<Uint8Array>({
    start(c) { controller = c; },
    pull() { wake?.(); wake = undefined; },
    cancel(reason) { cancelled = reason ?? new Error('stream cancelled'); wake?.(); wake = undefined; },
  }, { highWaterMark, size: (c) => c.byteLength });
  const sink: Sink = {
    async write(chunk) {
      if (cancelled) throw cancelled;
      controller.enqueue(chunk);
      while (!cancelled && (controller.desiredSize ?? 1) <= 0) await new Promise<void>((r) => { wake = r; });
      if (cancelled) throw cancelled;
    },
    async close() { controller.close(); },
    async abort(reason) { if (!cancelled) controller.error(reason ?? new Error('aborted')); },
  };
  return { sink, stream };
}

/** Collects the output as a Blob (browsers may keep large Blobs on disk). */
export function blobSink(type = 'application/octet-stream'): { sink: Sink; blob(): Promise<Blob> } {
  let parts: BlobPart[] | undefined = [];
  let done: ((b: Blob) => void) | undefined;
  let failed: ((e: unknown) => void) | undefined;
  const result = new Promise<Blob>((res, rej) => { done = res; failed = rej; });
  result.catch(() => undefined);
  const sink: Sink = {
    async write(chunk) {
      // Each chunk becomes a small Blob at once so the parts list never holds the raw arrays.
      parts!.push(new Blob([chunk as Uint8Array<ArrayBuffer>]));
    },
    async close() { done!(new Blob(parts!, { type })); parts = undefined; },
    async abort(reason) { parts = undefined; failed!(reason ?? new Error('aborted')); },
  };
  return { sink, blob: () => result };
}

/**
 * A file in the origin private file system (or any FileSystemFileHandle). The writable stream of
 * the File System Access API writes to a swap file that replaces the target only on close();
 * abort() discards it, so a cancelled run leaves the previous file (or none) untouched.
 */
export async function opfsSink(target: FileSystemFileHandle | string): Promise<Sink> {
  const handle = typeof target === 'string'
    ? await (await navigator.storage.getDirectory()).getFileHandle(target, { create: true })
    : target;
  const w = await (handle as FileSystemFileHandle & { createWritable(): Promise<FileSystemWritableFileStream> }).createWritable();
  return {
    async write(chunk) { await w.write(chunk as Uint8Array<ArrayBuffer>); },
    async close() { await w.close(); },
    async abort(reason) { await w.abort(reason); },
  };
}

/**
 * A split output (a GGUF in several files) through one sink per file: `open(index, count)` gives
 * file `index` of `count`, once the container has said how many there are. Bytes go to each file
 * in turn; close() closes them last file first, so that the first, which names the others, appears
 * last; abort() aborts every file opened.
 */
export function splitSink(open: (index: number, count: number) => Promise<Sink>): Sink {
  let sinks: Sink[] = [];
  let lengths: number[] | undefined;
  let file = 0, left = 0, written = 0;
  return {
    async files(l) {
      if (lengths) throw new Error('splitSink: files() called twice');
      lengths = [...l];
      for (let i = 0; i < l.length; i++) sinks.push(await open(i, l.length));
      left = lengths[0] ?? 0;
    },
    async write(chunk) {
      if (!lengths) throw new Error('splitSink: write() before files()');
      let at = 0;
      while (at < chunk.byteLength) {
        while (left === 0 && file + 1 < lengths.length) left = lengths[++file];
        const n = Math.min(left, chunk.byteLength - at);
        if (n === 0) throw new Error(`splitSink: ${chunk.byteLength - at} bytes past the end of the last file`);
        await sinks[file].write(at === 0 && n === chunk.byteLength ? chunk : chunk.subarray(at, at + n));
        at += n;
        left -= n;
        written += n;
      }
    },
    async close() {
      if (!lengths) throw new Error('splitSink: close() before files()');
      const total = lengths.reduce((a, b) => a + b, 0);
      if (written !== total) throw new Error(`splitSink: closed after ${written} of ${total} bytes`);
      for (let i = sinks.length - 1; i >= 0; i--) await sinks[i].close();
    },
    async abort(reason) {
      const all = sinks;
      sinks = [];
      await Promise.all(all.map((s) => s.abort(reason).catch(() => undefined)));
    },
  };
}
