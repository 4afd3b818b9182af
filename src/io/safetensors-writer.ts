// safetensors writer with the same streaming shape as the GGUF writer: the JSON header is built
// from names, dtypes and shapes (data_offsets follow from the sizes), then the tensors' bytes are
// appended in order without padding. The header is padded with spaces to a multiple of 8 so that
// the data starts aligned, as the reference implementation does.
import { ErrorCodes, fail } from '../errors.js';
import { ST_DTYPE_SIZE, stDtypeSize } from './dtypes.js';
import { ST_MAX_HEADER, badTensorName } from './safetensors.js';
import { asBytes, streamTensors, wellFormed, type StreamingWriter, type TensorData } from './stream.js';

export interface SafetensorsWriteTensor {
  name: string;
  /** 'F32', 'F16', 'BF16', 'F8_E4M3', 'F8_E5M2', 'F64', 'I8' ... 'U64', 'BOOL'. */
  dtype: string;
  shape: number[];
  /** Needed by writeSafetensors; not by SafetensorsWriter, which takes data in tensor(). */
  data?: TensorData;
}

export interface SafetensorsWriteSpec {
  tensors: SafetensorsWriteTensor[];
  /** The `__metadata__` string map (webquant stores each tensor's quantization scheme there as JSON). */
  metadata?: Record<string, string>;
}

const bad = (msg: string, d: { tensor?: string; option?: string; value?: unknown; expected?: unknown; index?: number } = {}): never =>
  fail(ErrorCodes.WRITER, `[safetensors-writer] ${msg}`, d);

export class SafetensorsWriter implements StreamingWriter {
  readonly header: Uint8Array;
  readonly totalBytes: number;
  readonly order: readonly string[];
  readonly tensors: readonly { name: string; dtype: string; shape: number[]; offset: number; byteLength: number }[];
  private next = 0;

  constructor(spec: SafetensorsWriteSpec) {
    const json: [string, unknown][] = [];
    if (spec.metadata !== undefined) {
      const m = spec.metadata;
      if (typeof m !== 'object' || m === null || Array.isArray(m)) bad('metadata must be an object of strings', { option: 'metadata', value: typeof m });
      for (const [k, v] of Object.entries(m)) {
        if (typeof v !== 'string' || !wellFormed(v) || !wellFormed(k)) bad(`metadata "${k}" must be a well-formed string`, { option: 'metadata', value: k, expected: 'string' });
      }
      json.push(['__metadata__', m]);
    }
    const names = new Set<string>();
    const planned: { name: string; dtype: string; shape: number[]; offset: number; byteLength: number }[] = [];
    let at = 0;
    for (const [i, t] of spec.tensors.entries()) {
      const why = typeof t.name === 'string' ? (wellFormed(t.name) ? badTensorName(t.name) : 'a name that is not well-formed UTF-16') : 'no name';
      if (why) bad(`tensor #${i} has ${why}`, { tensor: String(t.name), index: i });
      if (names.has(t.name)) bad(`duplicate tensor name "${t.name}"`, { tensor: t.name, index: i });
      names.add(t.name);
      const size = stDtypeSize(t.dtype);
      if (size === undefined) bad(`tensor "${t.name}": unknown dtype "${String(t.dtype)}"`, { tensor: t.name, value: t.dtype, expected: Object.keys(ST_DTYPE_SIZE) });
      if (!Array.isArray(t.shape) || !t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) bad(`tensor "${t.name}": shape must be non-negative integers`, { tensor: t.name, value: t.shape });
      let n = size as number;
      for (const d of t.shape) n *= d;
      if (!Number.isSafeInteger(n)) bad(`tensor "${t.name}": too large`, { tensor: t.name, value: t.shape });
      planned.push({ name: t.name, dtype: t.dtype, shape: t.shape.slice(), offset: at, byteLength: n });
      json.push([t.name, { dtype: t.dtype, shape: t.shape, data_offsets: [at, at + n] }]);
      at += n;
    }
    // Object.fromEntries would turn a "__proto__" key into a prototype; names were checked, but
    // build the text directly so key order is exactly the tensor order.
    const text = `{${json.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',')}}`;
    const body = new TextEncoder().encode(text);
    const padded = Math.ceil(body.length / 8) * 8;
    if (padded > ST_MAX_HEADER) bad(`header of ${padded} bytes exceeds ${ST_MAX_HEADER}`, { value: padded, expected: `<= ${ST_MAX_HEADER}` });
    const header = new Uint8Array(8 + padded);
    new DataView(header.buffer).setBigUint64(0, BigInt(padded), true);
    header.set(body, 8);
    header.fill(0x20, 8 + body.length);
    this.header = header;
    this.tensors = planned.map((p) => ({ ...p, offset: p.offset + header.length }));
    this.order = planned.map((p) => p.name);
    this.totalBytes = header.length + at;
  }

  tensor(name: string, data: ArrayBufferView): Uint8Array[] {
    const p = this.tensors[this.next];
    if (!p) bad(`tensor "${name}" written after all ${this.tensors.length} tensors`, { tensor: name });
    if (p.name !== name) bad(`tensor "${name}" written out of order; "${p.name}" comes next`, { tensor: name, expected: p.name });
    const bytes = asBytes(data);
    if (bytes.byteLength !== p.byteLength) {
      bad(`tensor "${name}" ${p.dtype}[${p.shape}] needs ${p.byteLength} bytes but got ${bytes.byteLength}`, { tensor: name, value: bytes.byteLength, expected: p.byteLength });
    }
    this.next++;
    return [bytes];
  }

  finish(): void {
    if (this.next !== this.tensors.length) {
      bad(`only ${this.next} of ${this.tensors.length} tensors were written; next is "${this.tensors[this.next].name}"`, { tensor: this.tensors[this.next].name });
    }
  }
}

/** The whole file as a stream of chunks: header, then each tensor's data. */
export function writeSafetensors(spec: SafetensorsWriteSpec): AsyncGenerator<Uint8Array> {
  const w = new SafetensorsWriter(spec);
  const data = new Map(spec.tensors.map((t) => [t.name, t.data]));
  return streamTensors(w, data, 'safetensors-writer');
}
