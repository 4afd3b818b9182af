// GGUF reader, versions 1-3 (shared/spec §17). The header is parsed from a prefix of the file
// that grows (4x per step) until it holds the whole header, so a remote file costs a few range
// requests however large its tokenizer is; tensor data is read on demand.
//
// Version 1 stores tensor/KV counts, string lengths, array lengths and ne[] as u32; later
// versions as u64/i64.
//
// Checks and their codes: magic GGUF_MAGIC; version GGUF_VERSION; counts that cannot fit in the
// file, a header over maxHeaderBytes or metadata arrays of more than maxHeaderBytes / 8 elements in
// all GGUF_COUNT; a string running past the end GGUF_STRING; invalid UTF-8 GGUF_UTF8; unknown or
// nested value types GGUF_VALUE_TYPE; duplicate keys or tensor names GGUF_DUPLICATE;
// general.alignment not a u32 power of two GGUF_ALIGNMENT; bad dimensions GGUF_TENSOR; unknown
// ggml type GGUF_TYPE; ne[0] not a multiple of the block GGUF_BLOCK; a tensor offset not aligned
// GGUF_OFFSET; header or tensor data past the end of the file GGUF_TRUNCATED; overlapping tensors
// GGUF_OVERLAP; a split file (llama.cpp's gguf-split) that is not the first, files missing, out of
// order, or tensors not adding up to split.tensors.count GGUF_SPLIT.
import { ErrorCodes, fail, type ErrorCode } from '../errors.js';
import { ggufFormatByType } from '../formats/registry.js';
import { layoutOf } from '../formats/types.js';
import { resolveOptions } from '../options.js';
import { dequantizeWith, type Backend, type QuantizedTensor } from '../quantize.js';
import { loadKernels } from '../kernels/loader.js';
import { BaseCheckpoint, type Checkpoint, type TensorInfo } from './checkpoint.js';
import { floatBytesToF32 } from './dtypes.js';
import { GGML_TYPES, ggmlBytes, type GgmlType } from './ggml-types.js';
import type { ByteSource } from './source.js';

export const GGUF_MAGIC = 0x46554747; // "GGUF" little-endian
export const GGUF_DEFAULT_ALIGNMENT = 32;
const MAX_DIMS = 4;

/** GGUF metadata value types, by id. */
export const GGUF_VALUE_TYPES = ['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'f32', 'bool', 'string', 'array', 'u64', 'i64', 'f64'] as const;
export type GgufValueTypeName = (typeof GGUF_VALUE_TYPES)[number];
export type GgufScalarType = Exclude<GgufValueTypeName, 'array'>;

/** One metadata pair with its stored type. 64-bit integers are bigint; arrays are plain arrays. */
export interface GgufKV {
  key: string;
  type: GgufValueTypeName;
  /** Element type when `type` is 'array'. */
  itemType?: GgufScalarType;
  value: unknown;
}

export interface GgufTensorInfo extends TensorInfo {
  ggmlType: number;
  /** ggml order: ne[0] is the row length. */
  ne: number[];
  /** Offset relative to the data section, as stored. */
  relOffset: number;
}

export interface GgufHeader {
  version: number;
  alignment: number;
  /** Absolute offset of the data section. */
  dataOffset: number;
  kv: GgufKV[];
  tensors: GgufTensorInfo[];
}

export interface GgufCheckpoint extends Checkpoint {
  readonly format: 'gguf';
  readonly version: number;
  readonly alignment: number;
  /** The first file's (a split GGUF's tensors lie in their own files: TensorInfo.file). */
  readonly dataOffset: number;
  /** A split GGUF's file names, in order (absent for a single file). */
  readonly splits?: string[];
  readonly kv: GgufKV[];
  readonly tensors: GgufTensorInfo[];
  tensor(name: string): GgufTensorInfo;
}

export interface GgufOptions {
  /** Kernel build for dequantizing quantized tensors. */
  backend?: Backend;
  /** First header read, grown 4x until the header fits (default 64 KiB). */
  initialRead?: number;
  /**
   * Largest header (metadata + tensor infos) accepted, so a crafted count cannot make the reader load
   * a whole large file (default 256 MiB). Metadata arrays may hold a total of 1/8 as many elements.
   */
  maxHeaderBytes?: number;
  /**
   * The other files of a split GGUF (llama.cpp's gguf-split: `<prefix>-00001-of-00003.gguf` with
   * `split.no`, `split.count` and `split.tensors.count`), by file name. Without it, opening a split
   * file is an E_GGUF_SPLIT error naming the files needed.
   */
  splits?: (fileName: string) => ByteSource | Promise<ByteSource>;
}

export const GGUF_MAX_HEADER = 256 << 20;

/** Thrown inside the parser when the prefix read so far ends before the header does. */
class NeedMore {
  constructor(readonly bytes: number) {}
}

const SCALAR_SIZE: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const FAST_ARRAY_MAX = 1 << 24;
/**
 * Header bytes per metadata array element allowed in all (so maxHeaderBytes / 8 elements). A parsed
 * element takes up to 8 bytes of JS heap while a u8 or bool takes 1 byte of file, so without this a
 * header of 1-byte arrays would cost 8x its size (2 GiB at the default cap) and past ~134M elements
 * fail with a RangeError. Real tokenizers hold well under 1% of it.
 */
export const GGUF_HEADER_BYTES_PER_ARRAY_ELEMENT = 8;

const label = (what: string, index: number) => (index < 0 ? what : `${what}[${index}]`);

class Parser {
  pos = 0;
  private readonly dv: DataView;
  private readonly utf8 = new TextDecoder('utf-8', { fatal: true });
  v1 = false;

  constructor(private readonly buf: Uint8Array, private readonly fileSize: number, private readonly file: string) {
    this.dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  bad(code: ErrorCode, msg: string, d: { tensor?: string; value?: unknown; expected?: unknown; index?: number } = {}): never {
    return fail(code, `[gguf] ${this.file}: ${msg}`, { file: this.file, ...d });
  }

  need(n: number, what: string): void {
    const end = this.pos + n;
    if (end <= this.buf.length) return;
    if (end > this.fileSize) this.bad(ErrorCodes.GGUF_TRUNCATED, `file ends inside the header (reading ${what} at ${this.pos})`, { value: this.fileSize, expected: `>= ${end} bytes` });
    throw new NeedMore(end);
  }

  remaining(): number {
    return this.fileSize - this.pos;
  }

  u8(w = 'u8') { this.need(1, w); return this.dv.getUint8(this.pos++); }
  i8(w = 'i8') { this.need(1, w); return this.dv.getInt8(this.pos++); }
  u16(w = 'u16') { this.need(2, w); const v = this.dv.getUint16(this.pos, true); this.pos += 2; return v; }
  i16(w = 'i16') { this.need(2, w); const v = this.dv.getInt16(this.pos, true); this.pos += 2; return v; }
  u32(w = 'u32') { this.need(4, w); const v = this.dv.getUint32(this.pos, true); this.pos += 4; return v; }
  i32(w = 'i32') { this.need(4, w); const v = this.dv.getInt32(this.pos, true); this.pos += 4; return v; }
  f32(w = 'f32') { this.need(4, w); const v = this.dv.getFloat32(this.pos, true); this.pos += 4; return v; }
  f64(w = 'f64') { this.need(8, w); const v = this.dv.getFloat64(this.pos, true); this.pos += 8; return v; }
  u64(w = 'u64') { this.need(8, w); const v = this.dv.getBigUint64(this.pos, true); this.pos += 8; return v; }
  i64(w = 'i64') { this.need(8, w); const v = this.dv.getBigInt64(this.pos, true); this.pos += 8; return v; }

  /** A count (u32 in v1, u64 later) that must not claim more than `minSize`-byte items the rest of the file can hold. */
  count(what: string, minSize: number): number {
    const c = this.v1 ? BigInt(this.u32(what)) : this.u64(what);
    const max = BigInt(Math.floor(this.remaining() / Math.max(1, minSize)));
    if (c > max) this.bad(ErrorCodes.GGUF_COUNT, `${what} ${c} cannot fit in the ${this.fileSize}-byte file`, { value: String(c), expected: `<= ${max}` });
    return Number(c);
  }

  /** `index` >= 0 names an array element, so arrays of strings build no label per element unless one fails. */
  string(what: string, index = -1): string {
    const lenSize = this.v1 ? 4 : 8;
    if (this.pos + lenSize > this.buf.length) this.need(lenSize, `${label(what, index)} length`);
    const n = this.v1 ? BigInt(this.dv.getUint32(this.pos, true)) : this.dv.getBigUint64(this.pos, true);
    this.pos += lenSize;
    if (n > BigInt(this.remaining())) this.bad(ErrorCodes.GGUF_STRING, `${label(what, index)} of length ${n} at ${this.pos} runs past the end of the file`, { value: String(n), expected: `<= ${this.remaining()}` });
    const len = Number(n);
    if (this.pos + len > this.buf.length) this.need(len, label(what, index));
    const bytes = this.buf.subarray(this.pos, this.pos + len);
    let s: string;
    try {
      s = this.utf8.decode(bytes);
    } catch {
      return this.bad(ErrorCodes.GGUF_UTF8, `${label(what, index)} at ${this.pos} is not valid UTF-8`);
    }
    this.pos += len;
    return s;
  }

  /**
   * The `n` elements of array `key`, as a plain array (the representation every consumer and the
   * writer take). Numeric arrays are checked against the prefix once and read straight from the
   * bytes, so a large one costs 8 bytes per element and no per-element label or bounds check.
   */
  array(it: number, n: number, key: string): unknown[] {
    // new Array(n) above this length is a slow dictionary in V8; appending keeps it packed.
    const arr: unknown[] = n <= FAST_ARRAY_MAX ? new Array(n) : [];
    if (it === 8) {
      const what = `metadata "${key}"`;
      for (let j = 0; j < n; j++) arr[j] = this.string(what, j);
      return arr;
    }
    const size = SCALAR_SIZE[it];
    this.need(n * size, `metadata "${key}"`);
    const dv = this.dv;
    const p = this.pos;
    switch (it) {
      case 0: for (let j = 0; j < n; j++) arr[j] = dv.getUint8(p + j); break;
      case 1: for (let j = 0; j < n; j++) arr[j] = dv.getInt8(p + j); break;
      case 2: for (let j = 0; j < n; j++) arr[j] = dv.getUint16(p + 2 * j, true); break;
      case 3: for (let j = 0; j < n; j++) arr[j] = dv.getInt16(p + 2 * j, true); break;
      case 4: for (let j = 0; j < n; j++) arr[j] = dv.getUint32(p + 4 * j, true); break;
      case 5: for (let j = 0; j < n; j++) arr[j] = dv.getInt32(p + 4 * j, true); break;
      case 6: for (let j = 0; j < n; j++) arr[j] = dv.getFloat32(p + 4 * j, true); break;
      case 7: for (let j = 0; j < n; j++) arr[j] = dv.getUint8(p + j) !== 0; break;
      case 10: for (let j = 0; j < n; j++) arr[j] = dv.getBigUint64(p + 8 * j, true); break;
      case 11: for (let j = 0; j < n; j++) arr[j] = dv.getBigInt64(p + 8 * j, true); break;
      case 12: for (let j = 0; j < n; j++) arr[j] = dv.getFloat64(p + 8 * j, true); break;
      default: this.bad(ErrorCodes.GGUF_VALUE_TYPE, `metadata "${key}" has element type ${it} where a scalar is needed`, { value: it });
    }
    this.pos += n * size;
    return arr;
  }

  valueType(what: string): number {
    const t = this.u32(what);
    if (t >= GGUF_VALUE_TYPES.length) this.bad(ErrorCodes.GGUF_VALUE_TYPE, `${what} has unknown value type ${t}`, { value: t, expected: '0..12' });
    return t;
  }

  scalar(t: number, what: string): unknown {
    switch (t) {
      case 0: return this.u8(what);
      case 1: return this.i8(what);
      case 2: return this.u16(what);
      case 3: return this.i16(what);
      case 4: return this.u32(what);
      case 5: return this.i32(what);
      case 6: return this.f32(what);
      case 7: return this.u8(what) !== 0;
      case 8: return this.string(what);
      case 10: return this.u64(what);
      case 11: return this.i64(what);
      case 12: return this.f64(what);
      default: return this.bad(ErrorCodes.GGUF_VALUE_TYPE, `${what} has value type ${t} where a scalar is needed`, { value: t });
    }
  }
}

function parseHeader(buf: Uint8Array, fileSize: number, file: string, maxHeaderBytes: number): GgufHeader {
  const p = new Parser(buf, fileSize, file);
  const maxElements = Math.floor(maxHeaderBytes / GGUF_HEADER_BYTES_PER_ARRAY_ELEMENT);
  let elements = 0;
  if (fileSize < 4) p.bad(ErrorCodes.GGUF_MAGIC, `${fileSize} bytes is too short for the GGUF magic`, { value: fileSize, expected: '"GGUF"' });
  const magic = p.u32('magic');
  if (magic !== GGUF_MAGIC) {
    p.bad(ErrorCodes.GGUF_MAGIC, 'not a GGUF file (bad magic)', { value: Array.from(buf.subarray(0, 4), (b) => b.toString(16).padStart(2, '0')).join(' '), expected: '47 47 55 46 ("GGUF")' });
  }
  const version = p.u32('version');
  if (version < 1 || version > 3) {
    const swapped = ((version & 0xff) << 24 | (version & 0xff00) << 8 | (version >>> 8) & 0xff00 | version >>> 24) >>> 0;
    p.bad(ErrorCodes.GGUF_VERSION, `unsupported GGUF version ${version}${swapped >= 1 && swapped <= 3 ? ' (a big-endian file?)' : ''}`, { value: version, expected: [1, 2, 3] });
  }
  p.v1 = version === 1;
  const strMin = p.v1 ? 4 : 8;
  // Smallest possible tensor info: empty name, n_dims, type, offset; smallest KV: empty key, type, u8.
  const nTensors = p.count('tensor count', strMin + 4 + 4 + 8);
  const nKv = p.count('metadata count', strMin + 4 + 1);

  const kv: GgufKV[] = [];
  const keys = new Set<string>();
  let alignment = GGUF_DEFAULT_ALIGNMENT;
  for (let i = 0; i < nKv; i++) {
    const key = p.string(`metadata key #${i}`);
    if (keys.has(key)) p.bad(ErrorCodes.GGUF_DUPLICATE, `duplicate metadata key "${key}"`, { value: key, index: i });
    keys.add(key);
    const t = p.valueType(`metadata "${key}"`);
    let entry: GgufKV;
    if (t === 9) {
      const it = p.valueType(`array "${key}" element`);
      if (it === 9) p.bad(ErrorCodes.GGUF_VALUE_TYPE, `metadata "${key}" is an array of arrays`, { value: it, expected: 'a scalar element type' });
      const n = p.count(`array "${key}" length`, it === 8 ? strMin : SCALAR_SIZE[it]);
      elements += n;
      if (elements > maxElements) {
        p.bad(ErrorCodes.GGUF_COUNT, `metadata arrays hold ${elements} elements in all by "${key}", more than the ${maxElements} that maxHeaderBytes ${maxHeaderBytes} allows (raise maxHeaderBytes if this file is genuine)`, {
          value: elements, expected: `<= ${maxElements}`,
        });
      }
      entry = { key, type: 'array', itemType: GGUF_VALUE_TYPES[it] as GgufScalarType, value: p.array(it, n, key) };
    } else {
      entry = { key, type: GGUF_VALUE_TYPES[t], value: p.scalar(t, `metadata "${key}"`) };
    }
    if (key === 'general.alignment') {
      const a = entry.value;
      if (entry.type !== 'u32' || typeof a !== 'number' || a === 0 || (a & (a - 1)) !== 0) {
        p.bad(ErrorCodes.GGUF_ALIGNMENT, `general.alignment must be a u32 power of two but is ${entry.type} ${String(a)}`, { value: String(a), expected: 'u32 power of two' });
      }
      alignment = a as number;
    }
    kv.push(entry);
  }

  const tensors: GgufTensorInfo[] = [];
  const names = new Set<string>();
  for (let i = 0; i < nTensors; i++) {
    const name = p.string(`tensor name #${i}`);
    if (names.has(name)) p.bad(ErrorCodes.GGUF_DUPLICATE, `duplicate tensor name "${name}"`, { tensor: name, index: i });
    names.add(name);
    const nd = p.u32(`n_dims of "${name}"`);
    if (nd > MAX_DIMS) p.bad(ErrorCodes.GGUF_TENSOR, `tensor "${name}" has ${nd} dimensions`, { tensor: name, value: nd, expected: `<= ${MAX_DIMS}` });
    const ne: number[] = [];
    let n = 1n;
    for (let d = 0; d < nd; d++) {
      const v = p.v1 ? BigInt(p.u32(`ne of "${name}"`)) : p.i64(`ne of "${name}"`);
      if (v < 0n) p.bad(ErrorCodes.GGUF_TENSOR, `tensor "${name}" has negative dimension ne[${d}] = ${v}`, { tensor: name, value: String(v), expected: '>= 0' });
      n *= v;
      if (n > BigInt(Number.MAX_SAFE_INTEGER)) p.bad(ErrorCodes.GGUF_TENSOR, `tensor "${name}" has too many elements`, { tensor: name, value: String(n), expected: `<= ${Number.MAX_SAFE_INTEGER}` });
      ne.push(Number(v));
    }
    const typeId = p.u32(`type of "${name}"`);
    const type = GGML_TYPES.get(typeId);
    if (!type) p.bad(ErrorCodes.GGUF_TYPE, `tensor "${name}" has unknown ggml type ${typeId}`, { tensor: name, value: typeId, expected: [...GGML_TYPES.keys()] });
    const t = type as GgmlType;
    const ne0 = nd > 0 ? ne[0] : 1;
    if (ne0 % t.blockSize !== 0) {
      p.bad(ErrorCodes.GGUF_BLOCK, `tensor "${name}": row length ne[0] = ${ne0} is not a multiple of the ${t.name} block size ${t.blockSize}`, { tensor: name, value: ne0, expected: `a multiple of ${t.blockSize}` });
    }
    const rel = p.u64(`offset of "${name}"`);
    if (rel % BigInt(alignment) !== 0n) p.bad(ErrorCodes.GGUF_OFFSET, `tensor "${name}" offset ${rel} is not a multiple of the alignment ${alignment}`, { tensor: name, value: String(rel), expected: `a multiple of ${alignment}` });
    if (rel > BigInt(fileSize)) p.bad(ErrorCodes.GGUF_TRUNCATED, `tensor "${name}" offset ${rel} is past the end of the ${fileSize}-byte file`, { tensor: name, value: String(rel), expected: `< ${fileSize}` });
    tensors.push({
      name, dtype: t.name, shape: ne.slice().reverse(), ne, ggmlType: typeId, relOffset: Number(rel),
      offset: 0, byteLength: ggmlBytes(t, Number(n)),
    });
  }
  const dataOffset = Math.ceil(p.pos / alignment) * alignment;
  for (const t of tensors) {
    t.offset = dataOffset + t.relOffset;
    if (t.offset + t.byteLength > fileSize) {
      p.bad(ErrorCodes.GGUF_TRUNCATED, `tensor "${t.name}" data [${t.offset}, ${t.offset + t.byteLength}) runs past the end of the ${fileSize}-byte file`, {
        tensor: t.name, value: t.offset + t.byteLength, expected: `<= ${fileSize}`,
      });
    }
  }
  const sorted = [...tensors].sort((a, b) => a.offset - b.offset || a.byteLength - b.byteLength);
  for (let i = 1; i < sorted.length; i++) {
    const a = sorted[i - 1];
    const b = sorted[i];
    if (b.offset < a.offset + a.byteLength) {
      p.bad(ErrorCodes.GGUF_OVERLAP, `tensors "${a.name}" and "${b.name}" overlap`, { tensor: b.name, value: b.relOffset, expected: `>= ${a.relOffset + a.byteLength}` });
    }
  }
  return { version, alignment, dataOffset, kv, tensors };
}

/** Reads and validates a GGUF header, reading only a prefix of the source. */
export async function readGgufHeader(src: ByteSource, initialRead = 64 << 10, maxHeaderBytes = GGUF_MAX_HEADER): Promise<GgufHeader> {
  const size = await src.size();
  let want = Math.min(size, Math.max(64, initialRead));
  let buf = await src.read(0, want);
  for (;;) {
    try {
      return parseHeader(buf, size, src.name, maxHeaderBytes);
    } catch (e) {
      if (!(e instanceof NeedMore)) throw e;
      if (e.bytes > maxHeaderBytes) {
        fail(ErrorCodes.GGUF_COUNT, `[gguf] ${src.name}: the header needs more than ${maxHeaderBytes} bytes (raise maxHeaderBytes if this file is genuine)`, {
          file: src.name, value: e.bytes, expected: `<= ${maxHeaderBytes}`,
        });
      }
      const next = Math.min(size, Math.max(want * 4, e.bytes));
      const more = await src.read(want, next - want);
      const grown = new Uint8Array(next);
      grown.set(buf);
      grown.set(more, want);
      buf = grown;
      want = next;
    }
  }
}

export async function openGguf(src: ByteSource, opts: GgufOptions = {}): Promise<GgufCheckpoint> {
  const h = await readGgufHeader(src, opts.initialRead, opts.maxHeaderBytes);
  const count = splitKey(h, 'split.count', src.name);
  if (count === undefined) return new GgufReader(src.name, h.tensors.map((info) => ({ info, src })), h, opts);
  // One file of one: llama-quantize drops the split keys from what it writes, and so does a copy.
  if (count <= 1) return new GgufReader(src.name, h.tensors.map((info) => ({ info, src })), withoutSplitKeys(h), opts);
  return openSplits(src, h, count, opts);
}

const SPLIT_KEYS = ['split.no', 'split.count', 'split.tensors.count'];
const withoutSplitKeys = (h: GgufHeader): GgufHeader => ({ ...h, kv: h.kv.filter((e) => !SPLIT_KEYS.includes(e.key)) });

/** An integer split.* key of a header (undefined when absent). */
function splitKey(h: GgufHeader, key: string, file: string): number | undefined {
  const kv = h.kv.find((e) => e.key === key);
  if (!kv) return undefined;
  const v = typeof kv.value === 'bigint' ? Number(kv.value) : kv.value;
  if (kv.type === 'array' || typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    fail(ErrorCodes.GGUF_SPLIT, `[gguf] ${file}: ${key} is ${kv.type} ${String(kv.value)}, not a count`, { file, value: String(kv.value), expected: 'an integer >= 0' });
  }
  return v;
}

/**
 * A file name that says it is a split GGUF's file but not its first (`-00002-of-00005.gguf`):
 * not a checkpoint of its own, only read through the first.
 */
export function isLaterGgufSplit(fileName: string): boolean {
  return /-(?!00001-)\d{5}-of-\d{5}\.gguf$/i.test(fileName);
}

/** llama_split_path: `<prefix>-00002-of-00005.gguf` for file index 1 of 5. */
export function ggufSplitName(prefix: string, index: number, count: number): string {
  const pad = (n: number) => String(n).padStart(5, '0');
  return `${prefix}-${pad(index + 1)}-of-${pad(count)}.gguf`;
}

/**
 * A split GGUF read as one checkpoint, as llama.cpp's loader reads it: the first file's key/value
 * pairs (less split.*), every file's tensors in file order, each read from its own file (its
 * TensorInfo.file names it; offsets are within that file).
 */
async function openSplits(first: ByteSource, h: GgufHeader, count: number, opts: GgufOptions): Promise<GgufCheckpoint> {
  const file = first.name;
  const bad = (msg: string, d: { tensor?: string; value?: unknown; expected?: unknown } = {}): never => fail(ErrorCodes.GGUF_SPLIT, `[gguf] ${file}: ${msg}`, { file, ...d });
  const base = file.split('?')[0].split(/[\\/]/).pop()!;
  const no = splitKey(h, 'split.no', file) ?? 0;
  const suffix = ggufSplitName('', no, count);
  // llama.cpp derives the other names from the file's own, so a renamed split cannot be opened either.
  if (!base.endsWith(suffix) || base.length === suffix.length) bad(`is split ${no + 1} of ${count} but its name does not end in "${suffix}"`, { value: base, expected: `<prefix>${suffix}` });
  const prefix = base.slice(0, -suffix.length);
  const names = Array.from({ length: count }, (_, i) => ggufSplitName(prefix, i, count));
  if (no !== 0) bad(`is split ${no + 1} of ${count}: open the first, ${names[0]}`, { value: no, expected: 0 });
  if (!opts.splits) bad(`is the first of ${count} split files (${names.slice(1).join(', ')}): open it with the others (GgufOptions.splits)`, { value: count, expected: names });
  const entries: { info: GgufTensorInfo; src: ByteSource }[] = h.tensors.map((info) => ({ info: { ...info, file: names[0] }, src: first }));
  for (let i = 1; i < count; i++) {
    const src = await opts.splits!(names[i]);
    const hi = await readGgufHeader(src, opts.initialRead, opts.maxHeaderBytes);
    const n = splitKey(hi, 'split.no', names[i]);
    if (n !== i) bad(`${names[i]} has split.no ${n ?? 'missing'}, expected ${i}`, { value: n, expected: i });
    for (const info of hi.tensors) entries.push({ info: { ...info, file: names[i] }, src });
  }
  const seen = new Set<string>();
  for (const { info } of entries) {
    if (seen.has(info.name)) bad(`tensor "${info.name}" is in more than one split file`, { tensor: info.name });
    seen.add(info.name);
  }
  const total = splitKey(h, 'split.tensors.count', file);
  if (total !== entries.length) bad(`the ${count} files hold ${entries.length} tensors but split.tensors.count is ${total}`, { value: entries.length, expected: total });
  return new GgufReader(file, entries, withoutSplitKeys(h), opts, names);
}

class GgufReader extends BaseCheckpoint implements GgufCheckpoint {
  readonly format = 'gguf' as const;
  declare readonly tensors: GgufTensorInfo[];
  readonly version: number;
  readonly alignment: number;
  readonly dataOffset: number;
  readonly kv: GgufKV[];

  constructor(name: string, entries: { info: GgufTensorInfo; src: ByteSource }[], h: GgufHeader, private readonly opts: GgufOptions, readonly splits?: string[]) {
    super(name, entries, Object.fromEntries(h.kv.map((e) => [e.key, e.value])));
    this.version = h.version;
    this.alignment = h.alignment;
    this.dataOffset = h.dataOffset;
    this.kv = h.kv;
  }

  tensor(name: string): GgufTensorInfo {
    return super.tensor(name) as GgufTensorInfo;
  }

  async readF32(name: string): Promise<Float32Array> {
    const info = this.tensor(name);
    if (info.dtype === 'F32' || info.dtype === 'F16' || info.dtype === 'BF16' || info.dtype === 'F64') {
      return floatBytesToF32(await this.readRaw(name), info.dtype, name);
    }
    const spec = ggufFormatByType(info.ggmlType);
    if (!spec) {
      return fail(ErrorCodes.UNSUPPORTED_DTYPE, `[gguf] ${this.source}: tensor "${name}" is ${info.dtype}, which webquant cannot dequantize (read it raw)`, {
        file: this.source, tensor: name, value: info.dtype,
      });
    }
    const rowLen = info.ne.length > 0 ? info.ne[0] : 1;
    const nrows = rowLen === 0 ? 0 : info.ne.reduce((a, b) => a * b, 1) / rowLen;
    const options = resolveOptions(spec, { format: spec.name });
    const k = await loadKernels(this.opts.backend ?? 'auto');
    const qt: QuantizedTensor = {
      format: spec.name, shape: [nrows, rowLen], data: await this.readRaw(name),
      layout: layoutOf(spec, nrows, rowLen, options), options, backend: k.build,
    };
    if (nrows === 0) return new Float32Array(0);
    return dequantizeWith(k, qt);
  }
}
