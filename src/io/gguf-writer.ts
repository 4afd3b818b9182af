// GGUF v3 writer (shared/spec §17). The header needs every tensor's info and size, not its data:
// `new GgufWriter(spec)` computes it, then tensors are appended in order, each padded to the
// alignment, so a pipeline can quantize and write one layer at a time.
import { ErrorCodes, fail } from '../errors.js';
import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VALUE_TYPES, type GgufScalarType, type GgufValueTypeName } from './gguf.js';
import { ggmlBytes, ggmlType, type GgmlType } from './ggml-types.js';
import { asBytes, streamTensors, wellFormed, type StreamingWriter, type TensorData } from './stream.js';

export interface GgufWriteKV {
  key: string;
  type: GgufValueTypeName;
  /** Element type when `type` is 'array' (arrays of arrays are not written). */
  itemType?: GgufScalarType;
  /** number / bigint (64-bit types accept both) / boolean / string, or an array of them. */
  value: unknown;
}

export interface GgufWriteTensor {
  name: string;
  /** 'Q4_K', 'F32', ... or the numeric ggml type id. */
  ggmlType: string | number;
  /** Row-major; the last dimension is the row length (stored reversed as ne[]). */
  shape: number[];
  /** Needed by writeGguf; not by GgufWriter, which takes data in tensor(). */
  data?: TensorData;
}

export interface GgufWriteSpec {
  metadata?: GgufWriteKV[];
  tensors: GgufWriteTensor[];
  /** Data alignment (power of two). Written as general.alignment when not 32. Default: general.alignment from metadata, else 32. */
  alignment?: number;
}

export interface GgufPlannedTensor {
  name: string;
  type: GgmlType;
  shape: number[];
  /** Absolute offset in the file. */
  offset: number;
  byteLength: number;
  padding: number;
}

const bad = (msg: string, d: { tensor?: string; option?: string; value?: unknown; expected?: unknown; index?: number } = {}): never =>
  fail(ErrorCodes.WRITER, `[gguf-writer] ${msg}`, d);

const INT_RANGE: Partial<Record<GgufScalarType, [number, number]>> = {
  u8: [0, 0xff], i8: [-0x80, 0x7f], u16: [0, 0xffff], i16: [-0x8000, 0x7fff], u32: [0, 0xffffffff], i32: [-0x80000000, 0x7fffffff],
};
const BIG_RANGE: Partial<Record<GgufScalarType, [bigint, bigint]>> = {
  u64: [0n, 0xffffffffffffffffn], i64: [-0x8000000000000000n, 0x7fffffffffffffffn],
};
const SIZE: Record<GgufScalarType, number> = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, f32: 4, bool: 1, string: 0, u64: 8, i64: 8, f64: 8 };

/** Little-endian byte builder for the header (sized first, then filled). */
class Out {
  private parts: Uint8Array[] = [];
  private cur = new Uint8Array(4096);
  private dv = new DataView(this.cur.buffer);
  private at = 0;
  length = 0;
  private room(n: number) {
    if (this.at + n <= this.cur.length) return;
    this.parts.push(this.cur.subarray(0, this.at));
    this.cur = new Uint8Array(Math.max(4096, n, this.cur.length * 2));
    this.dv = new DataView(this.cur.buffer);
    this.at = 0;
  }
  u8(v: number) { this.room(1); this.dv.setUint8(this.at, v); this.at += 1; this.length += 1; }
  i8(v: number) { this.room(1); this.dv.setInt8(this.at, v); this.at += 1; this.length += 1; }
  u16(v: number) { this.room(2); this.dv.setUint16(this.at, v, true); this.at += 2; this.length += 2; }
  i16(v: number) { this.room(2); this.dv.setInt16(this.at, v, true); this.at += 2; this.length += 2; }
  u32(v: number) { this.room(4); this.dv.setUint32(this.at, v, true); this.at += 4; this.length += 4; }
  i32(v: number) { this.room(4); this.dv.setInt32(this.at, v, true); this.at += 4; this.length += 4; }
  f32(v: number) { this.room(4); this.dv.setFloat32(this.at, v, true); this.at += 4; this.length += 4; }
  f64(v: number) { this.room(8); this.dv.setFloat64(this.at, v, true); this.at += 8; this.length += 8; }
  u64(v: bigint) { this.room(8); this.dv.setBigUint64(this.at, v, true); this.at += 8; this.length += 8; }
  i64(v: bigint) { this.room(8); this.dv.setBigInt64(this.at, v, true); this.at += 8; this.length += 8; }
  bytes(b: Uint8Array) { this.room(b.length); this.cur.set(b, this.at); this.at += b.length; this.length += b.length; }
  zeros(n: number) { this.room(n); this.cur.fill(0, this.at, this.at + n); this.at += n; this.length += n; }
  done(): Uint8Array {
    const out = new Uint8Array(this.length);
    let p = 0;
    for (const x of [...this.parts, this.cur.subarray(0, this.at)]) { out.set(x, p); p += x.length; }
    return out;
  }
}

const enc = new TextEncoder();

/** `index` >= 0 names an array element: the label is built only when that element is bad. */
const label = (what: string, index: number) => (index < 0 ? what : `${what}[${index}]`);

function writeString(o: Out, s: unknown, what: string, index = -1): void {
  if (typeof s !== 'string' || !wellFormed(s)) bad(`${label(what, index)} must be a well-formed string`, { value: typeof s === 'string' ? s : typeof s, expected: 'string' });
  const b = enc.encode(s as string);
  o.u64(BigInt(b.length));
  o.bytes(b);
}

function writeScalar(o: Out, t: GgufScalarType, v: unknown, what: string, index = -1): void {
  const range = INT_RANGE[t];
  if (range) {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < range[0] || v > range[1]) bad(`${label(what, index)}: ${String(v)} is not a ${t}`, { value: String(v), expected: `an integer in [${range[0]}, ${range[1]}]` });
    (o[t as 'u8'] as (x: number) => void).call(o, v as number);
    return;
  }
  const big = BIG_RANGE[t];
  if (big) {
    const x = typeof v === 'bigint' ? v : typeof v === 'number' && Number.isSafeInteger(v) ? BigInt(v) : undefined;
    if (x === undefined || x < big[0] || x > big[1]) bad(`${label(what, index)}: ${String(v)} is not a ${t}`, { value: String(v), expected: `a bigint or safe integer in [${big[0]}, ${big[1]}]` });
    if (t === 'u64') o.u64(x as bigint); else o.i64(x as bigint);
    return;
  }
  switch (t) {
    case 'f32': case 'f64':
      if (typeof v !== 'number') bad(`${label(what, index)}: ${String(v)} is not a number`, { value: String(v), expected: t });
      if (t === 'f32') o.f32(v as number); else o.f64(v as number);
      return;
    case 'bool':
      if (typeof v !== 'boolean') bad(`${label(what, index)}: ${String(v)} is not a boolean`, { value: String(v), expected: 'boolean' });
      o.u8(v ? 1 : 0);
      return;
    case 'string':
      writeString(o, v, what, index);
      return;
    default:
      bad(`${label(what, index)}: unknown value type "${String(t)}"`, { value: t, expected: GGUF_VALUE_TYPES });
  }
}

const isScalarType = (t: unknown): t is GgufScalarType => typeof t === 'string' && t !== 'array' && (GGUF_VALUE_TYPES as readonly string[]).includes(t);

export class GgufWriter implements StreamingWriter {
  readonly header: Uint8Array;
  readonly totalBytes: number;
  readonly alignment: number;
  readonly tensors: readonly GgufPlannedTensor[];
  readonly order: readonly string[];
  private next = 0;

  constructor(spec: GgufWriteSpec) {
    const meta = [...(spec.metadata ?? [])];
    const keys = new Set<string>();
    let alignment = spec.alignment;
    for (const [i, kv] of meta.entries()) {
      if (keys.has(kv.key)) bad(`duplicate metadata key "${kv.key}"`, { value: kv.key, index: i });
      keys.add(kv.key);
      if (kv.key === 'general.alignment') {
        if (kv.type !== 'u32') bad('general.alignment must have type u32', { value: kv.type, expected: 'u32' });
        if (alignment !== undefined && alignment !== kv.value) bad(`alignment ${alignment} disagrees with general.alignment ${String(kv.value)}`, { option: 'alignment', value: alignment, expected: kv.value });
        alignment = kv.value as number;
      }
    }
    alignment ??= GGUF_DEFAULT_ALIGNMENT;
    if (!Number.isInteger(alignment) || alignment <= 0 || alignment > 0xffffffff || (alignment & (alignment - 1)) !== 0) {
      bad(`alignment must be a power of two but is ${String(alignment)}`, { option: 'alignment', value: alignment, expected: 'a power of two' });
    }
    if (!keys.has('general.alignment') && alignment !== GGUF_DEFAULT_ALIGNMENT) meta.push({ key: 'general.alignment', type: 'u32', value: alignment });
    this.alignment = alignment;

    const o = new Out();
    o.u32(GGUF_MAGIC);
    o.u32(3);
    o.u64(BigInt(spec.tensors.length));
    o.u64(BigInt(meta.length));
    for (const kv of meta) {
      writeString(o, kv.key, 'metadata key');
      if (kv.type === 'array') {
        if (!isScalarType(kv.itemType)) bad(`metadata "${kv.key}": arrays need a scalar itemType`, { value: kv.itemType, expected: GGUF_VALUE_TYPES.filter((t) => t !== 'array') });
        if (!Array.isArray(kv.value)) bad(`metadata "${kv.key}" of type array needs an array value`, { value: typeof kv.value, expected: 'array' });
        o.u32(9);
        o.u32(GGUF_VALUE_TYPES.indexOf(kv.itemType as GgufScalarType));
        const arr = kv.value as unknown[];
        o.u64(BigInt(arr.length));
        const what = `metadata "${kv.key}"`;
        for (let j = 0; j < arr.length; j++) writeScalar(o, kv.itemType as GgufScalarType, arr[j], what, j);
      } else {
        if (!isScalarType(kv.type)) bad(`metadata "${kv.key}": unknown value type "${String(kv.type)}"`, { value: kv.type, expected: GGUF_VALUE_TYPES });
        o.u32(GGUF_VALUE_TYPES.indexOf(kv.type));
        writeScalar(o, kv.type, kv.value, `metadata "${kv.key}"`);
      }
    }

    const planned: GgufPlannedTensor[] = [];
    const names = new Set<string>();
    let rel = 0;
    for (const [i, t] of spec.tensors.entries()) {
      if (typeof t.name !== 'string' || t.name === '') bad(`tensor #${i} needs a name`, { index: i, value: t.name });
      if (names.has(t.name)) bad(`duplicate tensor name "${t.name}"`, { tensor: t.name, index: i });
      names.add(t.name);
      const type = ggmlType(t.ggmlType);
      if (!type) bad(`tensor "${t.name}": unknown ggml type ${String(t.ggmlType)}`, { tensor: t.name, value: t.ggmlType });
      const ty = type as GgmlType;
      if (!Array.isArray(t.shape) || t.shape.length > 4 || !t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
        bad(`tensor "${t.name}": shape must be at most 4 non-negative integers`, { tensor: t.name, value: t.shape });
      }
      let n = 1;
      for (const d of t.shape) n *= d;
      if (!Number.isSafeInteger(n)) bad(`tensor "${t.name}": too many elements`, { tensor: t.name, value: t.shape });
      const rowLen = t.shape.length ? t.shape[t.shape.length - 1] : 1;
      if (rowLen % ty.blockSize !== 0) bad(`tensor "${t.name}": row length ${rowLen} is not a multiple of the ${ty.name} block size ${ty.blockSize}`, { tensor: t.name, value: rowLen, expected: `a multiple of ${ty.blockSize}` });
      const byteLength = ggmlBytes(ty, n);
      const padded = Math.ceil(byteLength / alignment) * alignment;
      writeString(o, t.name, 'tensor name');
      o.u32(t.shape.length);
      for (let d = t.shape.length - 1; d >= 0; d--) o.i64(BigInt(t.shape[d]));
      o.u32(ty.id);
      o.u64(BigInt(rel));
      planned.push({ name: t.name, type: ty, shape: t.shape.slice(), offset: rel, byteLength, padding: padded - byteLength });
      rel += padded;
    }
    const dataOffset = Math.ceil(o.length / alignment) * alignment;
    o.zeros(dataOffset - o.length);
    this.header = o.done();
    for (const p of planned) p.offset += dataOffset;
    this.tensors = planned;
    this.order = planned.map((p) => p.name);
    this.totalBytes = dataOffset + rel;
  }

  tensor(name: string, data: ArrayBufferView): Uint8Array[] {
    const p = this.tensors[this.next];
    if (!p) bad(`tensor "${name}" written after all ${this.tensors.length} tensors`, { tensor: name });
    if (p.name !== name) bad(`tensor "${name}" written out of order; "${p.name}" comes next`, { tensor: name, expected: p.name });
    const bytes = asBytes(data);
    if (bytes.byteLength !== p.byteLength) {
      bad(`tensor "${name}" ${p.type.name}[${p.shape}] needs ${p.byteLength} bytes but got ${bytes.byteLength}`, { tensor: name, value: bytes.byteLength, expected: p.byteLength });
    }
    this.next++;
    return p.padding ? [bytes, new Uint8Array(p.padding)] : [bytes];
  }

  finish(): void {
    if (this.next !== this.tensors.length) {
      bad(`only ${this.next} of ${this.tensors.length} tensors were written; next is "${this.tensors[this.next].name}"`, { tensor: this.tensors[this.next].name });
    }
  }
}

/** The whole file as a stream of chunks: header, then each tensor's data and padding. */
export function writeGguf(spec: GgufWriteSpec): AsyncGenerator<Uint8Array> {
  const w = new GgufWriter(spec);
  const data = new Map(spec.tensors.map((t) => [t.name, t.data]));
  return streamTensors(w, data, 'gguf-writer');
}
