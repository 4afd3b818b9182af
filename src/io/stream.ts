// The streaming shape both writers share: the header is computed from the tensor infos and sizes
// alone, then each tensor's bytes are appended in order. Tensor data can be given lazily (a
// function called when its turn comes), so a pipeline never holds more than one tensor.
import { ErrorCodes, fail } from '../errors.js';

/** Bytes of one tensor, or a function producing them when the writer gets to that tensor. */
export type TensorData = ArrayBufferView | (() => ArrayBufferView | Promise<ArrayBufferView>);

/** A writer whose header is known up front and whose tensors are appended in declaration order. */
export interface StreamingWriter {
  /** Header bytes (everything before the first tensor's data). */
  readonly header: Uint8Array;
  /** Size of the complete file. */
  readonly totalBytes: number;
  /** Tensor names in the order their data must be written. */
  readonly order: readonly string[];
  /** Validates `data` as the next tensor's bytes and returns the chunks to append (data, padding). */
  tensor(name: string, data: ArrayBufferView): Uint8Array[];
  /** Throws unless every tensor was written. */
  finish(): void;
}

export function asBytes(v: ArrayBufferView): Uint8Array {
  return v instanceof Uint8Array ? v : new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

/** Header, then every tensor's data in order, resolving lazy data one tensor at a time. */
export async function* streamTensors(
  writer: StreamingWriter,
  data: ReadonlyMap<string, TensorData | undefined> | ((name: string) => TensorData | undefined),
  what: string,
): AsyncGenerator<Uint8Array> {
  yield writer.header;
  const get = typeof data === 'function' ? data : (n: string) => data.get(n);
  for (const name of writer.order) {
    const d = get(name);
    if (d === undefined) fail(ErrorCodes.WRITER, `[${what}] no data for tensor "${name}"`, { tensor: name });
    const bytes = typeof d === 'function' ? await d() : d;
    for (const c of writer.tensor(name, bytes)) yield c;
  }
  writer.finish();
}

/** Collects a stream of chunks into one buffer (for small files and tests). */
export async function collect(chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const c of chunks) { parts.push(c); n += c.byteLength; }
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.byteLength; }
  return out;
}

/** A web ReadableStream over the chunks (browsers, Workers, Node 20), pulling one chunk at a time. */
export function toReadableStream(chunks: AsyncIterable<Uint8Array>): ReadableStream<Uint8Array> {
  const it = chunks[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      const r = await it.next();
      if (r.done) ctrl.close();
      else ctrl.enqueue(r.value);
    },
    async cancel(reason) {
      await it.return?.(reason);
    },
  });
}

export function wellFormed(s: string): boolean {
  const f = (s as { isWellFormed?: () => boolean }).isWellFormed;
  if (f) return f.call(s);
  return !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);
}
