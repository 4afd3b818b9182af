// Random-access byte sources: readers ask for the header, then for one tensor at a time, so a
// checkpoint never has to be held in memory (or downloaded) as a whole.
import { ErrorCodes, fail } from '../errors.js';

export interface ByteSource {
  /** File name or URL, used in error details. */
  readonly name: string;
  size(): Promise<number>;
  /** Exactly `length` bytes at `offset`; a read past the end is a WebquantError (E_IO). */
  read(offset: number, length: number): Promise<Uint8Array>;
  /** Releases what the source holds (file handles); optional. */
  close?(): Promise<void>;
  /**
   * True when every read() returns a newly allocated buffer of exactly `length` bytes that the
   * caller owns: readers can then hand it on (or transfer it to a worker) without a copy.
   */
  readonly freshReads?: boolean;
  /**
   * What identifies these bytes across sessions (a URL with its ETag / Last-Modified and size, a
   * File's name, size and modification time), or undefined when nothing does: persistent caches
   * (src/serve/persist.ts) key on it and store nothing for a source without one.
   */
  identity?(): Promise<string | undefined>;
  /** Optional: read() into the caller's buffer (`dst.byteLength` bytes at `offset`), sparing an allocation. */
  readInto?(dst: Uint8Array, offset: number): Promise<void>;
  /**
   * A structured-cloneable description from which another thread (a pool worker) can open the
   * same bytes itself (see openRef); absent where that is impossible (an in-memory buffer, a URL
   * read through a custom fetch function).
   */
  ref?(): Promise<SourceRef>;
}

/**
 * Where a source's bytes are, in a form that survives postMessage: a Blob or File (cloned by
 * reference, not copied), a URL read with Range requests (its size already known, so the other
 * side sends no probe), or a local file path (Node; opened with src/io/node.ts).
 */
export type SourceRef =
  | { kind: 'blob'; name: string; blob: Blob }
  | { kind: 'url'; name: string; url: string; headers?: Record<string, string>; size: number }
  | { kind: 'file'; name: string; path: string; size: number };

/** A relative URL resolved against the page: a worker would resolve it against its own script. */
function absoluteUrl(url: string): string {
  const base = (globalThis as { location?: { href: string } }).location?.href;
  return base ? new URL(url, base).href : url;
}

/** A source for a blob or URL reference (a file path is read with src/io/node.ts's openFileSync). */
export function openRef(ref: SourceRef): ByteSource {
  switch (ref.kind) {
    case 'blob': return fromBlob(ref.blob, ref.name);
    case 'url': return fromUrl(ref.url, { headers: ref.headers, size: ref.size });
    default:
      return fail(ErrorCodes.BAD_OPTION, `[io] a ${ref.kind} reference can only be opened where node:fs is available`, { file: ref.name, value: ref.kind, expected: ['blob', 'url'] });
  }
}

/** Throws E_IO unless [offset, offset + length) is a valid range of a source of `size` bytes. */
export function checkRange(name: string, offset: number, length: number, size: number): void {
  if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 || offset + length > size) {
    fail(ErrorCodes.IO, `[io] ${name}: cannot read ${length} bytes at offset ${offset} of a ${size}-byte source`, {
      file: name, value: { offset, length }, expected: `a range within [0, ${size})`,
    });
  }
}

export function fromBuffer(buf: Uint8Array | ArrayBuffer, name = 'buffer'): ByteSource {
  // A plain Uint8Array view even of a Node Buffer: readers copy with slice(), which on a Buffer
  // returns a view of the shared (possibly pooled) memory instead of a copy.
  const bytes = buf instanceof Uint8Array ? new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength) : new Uint8Array(buf);
  return {
    name,
    size: async () => bytes.byteLength,
    async read(offset, length) {
      checkRange(name, offset, length, bytes.byteLength);
      return bytes.subarray(offset, offset + length);
    },
  };
}

/** A Blob or a browser File; only the slices asked for are read. */
export function fromBlob(blob: Blob, name?: string): ByteSource {
  const file = blob as { name?: unknown; lastModified?: unknown };
  const n = name ?? (file.name as string | undefined) ?? 'blob';
  return {
    name: n,
    size: async () => blob.size,
    // A File names itself; a bare Blob (made in memory) has nothing that outlives it.
    identity: async () => (typeof file.name === 'string' && typeof file.lastModified === 'number'
      ? `file ${file.name} size ${blob.size} modified ${file.lastModified}` : undefined),
    ref: async () => ({ kind: 'blob', name: n, blob }),
    async read(offset, length) {
      checkRange(n, offset, length, blob.size);
      if (length === 0) return new Uint8Array(0);
      let ab: ArrayBuffer;
      try {
        ab = await blob.slice(offset, offset + length).arrayBuffer();
      } catch (e) {
        return fail(ErrorCodes.IO, `[io] ${n}: reading ${length} bytes at ${offset} failed: ${String(e)}`, { file: n, value: String(e) });
      }
      if (ab.byteLength !== length) {
        fail(ErrorCodes.IO, `[io] ${n}: short read (${ab.byteLength} of ${length} bytes at ${offset})`, { file: n, value: ab.byteLength, expected: length });
      }
      return new Uint8Array(ab);
    },
  };
}

export interface UrlSourceOptions {
  /** Defaults to globalThis.fetch. */
  fetch?: typeof fetch;
  headers?: Record<string, string>;
  /**
   * Bytes fetched by the first request (which also learns the file size) and kept to answer
   * later reads inside them: checkpoint headers are usually read with no further request.
   * Default 64 KiB; 0 fetches a single byte.
   */
  prefetch?: number;
  /** The file size when already known (a reference opened in a worker): no probe request is sent. */
  size?: number;
  /**
   * Aborts this source's requests (a page's Cancel while a server does not answer): they and
   * every later read reject with E_ABORTED. Not carried by `ref` (a worker stops with its pool).
   */
  signal?: AbortSignal;
}

const CONTENT_RANGE = /^bytes\s+(\d+)-(\d+)\/(\d+|\*)$/i;

interface Validators { etag: string | null; modified: string | null }

/** ETag and Last-Modified; cross-origin, ETag is visible only when exposed, Last-Modified always is. */
const validatorsOf = (res: Response): Validators => ({ etag: res.headers.get('etag'), modified: res.headers.get('last-modified') });

/** Whether two answers describe different files (a validator both carry and that differs). */
const changed = (a: Validators, b: Validators) =>
  (a.etag !== null && b.etag !== null && a.etag !== b.etag) || (a.modified !== null && b.modified !== null && a.modified !== b.modified);

const validatorText = (v: Validators) => [v.etag !== null ? `etag ${v.etag}` : '', v.modified !== null ? `last-modified ${v.modified}` : ''].filter(Boolean).join(' ');

/**
 * An HTTP(S) resource read with Range requests only. A server that answers a range request with
 * the whole body (200) is refused with E_HTTP_RANGE before that body is read; an answer whose
 * ETag or Last-Modified differs from the first one's (the file was replaced) with E_IO.
 */
export function fromUrl(url: string | URL, opts: UrlSourceOptions = {}): ByteSource {
  const name = String(url);
  const doFetch = opts.fetch ?? globalThis.fetch;
  const prefetch = Math.max(1, Math.floor(opts.prefetch ?? 64 << 10));
  let probe: Promise<{ total: number; prefix: Uint8Array; validators: Validators }> | undefined;
  let known: number | undefined;
  // ETag and Last-Modified of the first answer: a later answer with others is another file.
  let knownValidators: Validators | undefined;

  const cancel = (res: Response) => res.body?.cancel().catch(() => undefined);
  const signal = opts.signal;
  const aborted = (): never => fail(ErrorCodes.ABORTED, `[io] ${name}: reading was cancelled (${String(signal?.reason ?? 'aborted')})`, { file: name });

  async function rangeRequest(start: number, end: number): Promise<{ body: Uint8Array; total: number | undefined; validators: Validators }> {
    let res: Response;
    if (signal?.aborted) aborted();
    try {
      res = await doFetch.call(globalThis, name, { headers: { ...opts.headers, Range: `bytes=${start}-${end}` }, signal });
    } catch (e) {
      if (signal?.aborted) aborted();
      return fail(ErrorCodes.IO, `[io] ${name}: request failed: ${String(e)}`, { file: name, value: String(e) });
    }
    if (res.status === 200) {
      await cancel(res);
      return fail(ErrorCodes.HTTP_RANGE, `[io] ${name}: the server ignored the Range request (status 200 instead of 206)`, {
        file: name, value: 200, expected: 206,
      });
    }
    if (res.status === 416 && start === 0 && /^bytes\s+\*\/0$/i.test(res.headers.get('content-range') ?? '')) {
      await cancel(res);
      return { body: new Uint8Array(0), total: 0, validators: validatorsOf(res) }; // an empty file has no byte 0
    }
    if (res.status !== 206) {
      await cancel(res);
      return fail(ErrorCodes.IO, `[io] ${name}: HTTP ${res.status} for bytes ${start}-${end}`, { file: name, value: res.status, expected: 206 });
    }
    // Cross-origin, Content-Range is only visible when the server exposes it
    // (Access-Control-Expose-Headers); without it the body length has to vouch for the range.
    const cr = res.headers.get('content-range');
    const m = CONTENT_RANGE.exec(cr ?? '');
    const total = m && m[3] !== '*' ? Number(m[3]) : undefined;
    // A server may shorten a range that runs past the end of the file (RFC 9110 14.1.2).
    const gotEnd = m ? Number(m[2]) : end;
    if (cr !== null && (!m || Number(m[1]) !== start || !(gotEnd === end || (total !== undefined && gotEnd === total - 1 && gotEnd < end)))) {
      await cancel(res);
      return fail(ErrorCodes.HTTP_RANGE, `[io] ${name}: Content-Range "${cr}" does not match the requested bytes ${start}-${end}`, {
        file: name, value: cr, expected: `bytes ${start}-${end}/<size>`,
      });
    }
    if (known !== undefined && total !== undefined && total !== known) {
      await cancel(res);
      return fail(ErrorCodes.IO, `[io] ${name}: the file changed size (${known} -> ${total} bytes) while being read`, { file: name, value: total, expected: known });
    }
    const validators = validatorsOf(res);
    if (knownValidators && changed(knownValidators, validators)) {
      await cancel(res);
      return fail(ErrorCodes.IO, `[io] ${name}: the file changed (${validatorText(knownValidators)} -> ${validatorText(validators)}) while being read`, {
        file: name, value: validatorText(validators), expected: validatorText(knownValidators),
      });
    }
    let body: Uint8Array;
    try {
      body = new Uint8Array(await res.arrayBuffer());
    } catch (e) {
      if (signal?.aborted) aborted();
      return fail(ErrorCodes.IO, `[io] ${name}: reading the response failed: ${String(e)}`, { file: name, value: String(e) });
    }
    const short = cr === null && known === undefined && body.byteLength > 0 && body.byteLength < end - start + 1;
    if (body.byteLength !== gotEnd - start + 1 && !short) {
      fail(ErrorCodes.IO, `[io] ${name}: short body (${body.byteLength} of ${gotEnd - start + 1} bytes)`, { file: name, value: body.byteLength, expected: gotEnd - start + 1 });
    }
    return { body, total, validators };
  }

  /** File size from a HEAD request's Content-Length (safelisted for CORS), if any. */
  async function headLength(): Promise<number | undefined> {
    try {
      const res = await doFetch.call(globalThis, name, { method: 'HEAD', headers: { ...opts.headers }, signal });
      const n = Number(res.headers.get('content-length') ?? NaN);
      return res.ok && Number.isSafeInteger(n) && n >= 0 ? n : undefined;
    } catch {
      return undefined;
    }
  }

  if (opts.size !== undefined) {
    if (!Number.isSafeInteger(opts.size) || opts.size < 0) {
      fail(ErrorCodes.BAD_OPTION, `[io] ${name}: size must be a non-negative integer but got ${opts.size}`, { file: name, option: 'size', value: opts.size, expected: '>= 0' });
    }
    known = opts.size;
    // No response seen yet: no validators (no identity, no change check) for such a source.
    probe = Promise.resolve({ total: opts.size, prefix: new Uint8Array(0), validators: { etag: null, modified: null } });
  }

  const first = () => {
    if (!probe) {
      probe = rangeRequest(0, prefetch - 1).then(async (r) => {
        // Fewer bytes than asked for from offset 0: the range was cut at the end of the file.
        const total = r.total ?? (r.body.byteLength < prefetch ? r.body.byteLength : await headLength());
        if (total === undefined || total < r.body.byteLength) {
          fail(ErrorCodes.HTTP_RANGE, `[io] ${name}: the server tells the file size neither in Content-Range nor in a HEAD Content-Length`, { file: name, value: r.total ?? '*', expected: 'a complete length' });
        }
        known = total;
        knownValidators = r.validators;
        return { total, prefix: r.body, validators: r.validators };
      });
      // A failed probe is not kept: the next call tries again.
      probe.catch(() => { probe = undefined; });
    }
    return probe;
  };

  return {
    name,
    size: async () => (await first()).total,
    async identity() {
      const { total, validators } = await first();
      // Without a validator a changed file at the same URL would look the same: no identity.
      const v = validatorText(validators);
      return v ? `url ${name} size ${total} ${v}` : undefined;
    },
    // A custom fetch (a function) cannot cross to a worker: then there is no reference.
    ref: opts.fetch ? undefined : async () => ({ kind: 'url', name, url: absoluteUrl(name), headers: opts.headers && { ...opts.headers }, size: (await first()).total }),
    async read(offset, length) {
      const { total, prefix } = await first();
      checkRange(name, offset, length, total);
      if (length === 0) return new Uint8Array(0);
      if (offset + length <= prefix.byteLength) return prefix.slice(offset, offset + length);
      return (await rangeRequest(offset, offset + length - 1)).body;
    },
  };
}
