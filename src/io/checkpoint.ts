// The one view of a checkpoint that the rest of webquant builds on, whatever the container:
// tensor infos up front (from the header alone), tensor bytes on demand from a ByteSource.
import { ErrorCodes, fail } from '../errors.js';
import type { ByteSource } from './source.js';

export type CheckpointFormat = 'safetensors' | 'gguf';

export interface TensorInfo {
  name: string;
  /** 'F32', 'F16', 'BF16', 'F8_E4M3', 'F8_E5M2', 'F64', 'I8'...'BOOL', or a GGUF type name ('Q4_K', 'Q8_0', ...). */
  dtype: string;
  /** Row-major; the last dimension is the row length (GGUF ne[] reversed). */
  shape: number[];
  /** Absolute byte offset of the tensor data in the source. */
  offset: number;
  byteLength: number;
  /** Shard file name (sharded safetensors only): `offset` is within that shard. */
  file?: string;
}

/** Float tensor values without conversion: what `quantize()` accepts as input. */
export interface TensorValues {
  values: Float32Array | Uint16Array;
  dtype: 'f32' | 'f16' | 'bf16';
}

export interface Checkpoint {
  readonly format: CheckpointFormat;
  /** Name of the source (file name, URL), used in error details. */
  readonly source: string;
  /** In file order. */
  readonly tensors: TensorInfo[];
  /** safetensors: the `__metadata__` string map; GGUF: every key/value pair. */
  readonly metadata: Record<string, unknown>;
  /** Throws WebquantError(E_TENSOR_NOT_FOUND) when there is no such tensor. */
  tensor(name: string): TensorInfo;
  /** The stored bytes, untouched (for an in-memory source possibly a view of its buffer: do not mutate). */
  readRaw(name: string): Promise<Uint8Array>;
  /** Any float dtype widened to f32; FP8 with block scales applied; GGUF quantized types dequantized. */
  readF32(name: string): Promise<Float32Array>;
  /** F32 / F16 / BF16 tensors as stored (little-endian host assumed); other dtypes are an error. */
  readValues(name: string): Promise<TensorValues>;
  /**
   * Rows [firstRow, firstRow + rows) of an F32 / F16 / BF16 tensor, as readValues would return
   * them, reading only those bytes (a row is the last dimension). safetensors also gives FP8 rows,
   * as f32 with their block scales applied. Optional for other implementations.
   */
  readRows?(name: string, firstRow: number, rows: number): Promise<TensorValues>;
  /**
   * `length` stored bytes of a tensor from byte `at` of it, untouched (any dtype): what a view that
   * decodes a packed format (gpt-oss's MXFP4 experts) reads part of a tensor with. Optional.
   */
  readBytes?(name: string, at: number, length: number): Promise<Uint8Array>;
  /**
   * Where the bytes readRows would return for these rows are stored, untouched, so that another
   * thread can read them itself (see ByteSource.ref); undefined when they are not stored that way
   * (a converted or permuted tensor, a dtype other than F32 / F16 / BF16). Optional.
   */
  locate?(name: string, firstRow: number, rows: number): StoredRows | undefined;
}

/** A range of stored F32 / F16 / BF16 rows. */
export interface StoredRows {
  source: ByteSource;
  offset: number;
  length: number;
  dtype: TensorValues['dtype'];
}

/** Where a tensor's bytes live: sharded checkpoints read each tensor from its own file. */
export interface TensorEntry {
  info: TensorInfo;
  src: ByteSource;
}

/** Name lookup and raw reads shared by the safetensors and GGUF readers. */
export abstract class BaseCheckpoint implements Checkpoint {
  abstract readonly format: CheckpointFormat;
  readonly tensors: TensorInfo[];
  protected readonly entries: Map<string, TensorEntry>;

  constructor(readonly source: string, entries: TensorEntry[], readonly metadata: Record<string, unknown>) {
    this.entries = new Map(entries.map((e) => [e.info.name, e]));
    this.tensors = entries.map((e) => e.info);
  }

  tensor(name: string): TensorInfo {
    return this.entry(name).info;
  }

  protected entry(name: string): TensorEntry {
    const e = this.entries.get(name);
    if (!e) {
      fail(ErrorCodes.TENSOR_NOT_FOUND, `[${this.format}] ${this.source}: no tensor named "${String(name)}"`, {
        file: this.source, tensor: String(name), expected: `one of the ${this.entries.size} tensors of the checkpoint`,
      });
    }
    return e;
  }

  /** The stored bytes; for an in-memory source this may be a view of its buffer (do not mutate). */
  async readRaw(name: string): Promise<Uint8Array> {
    const { info, src } = this.entry(name);
    return src.read(info.offset, info.byteLength);
  }

  async readBytes(name: string, at: number, length: number): Promise<Uint8Array> {
    const { info, src } = this.entry(name);
    if (!Number.isSafeInteger(at) || !Number.isSafeInteger(length) || at < 0 || length < 0 || at + length > info.byteLength) {
      fail(ErrorCodes.BAD_INPUT, `[${this.format}] ${this.source}: bytes [${at}, ${at + length}) are outside the ${info.byteLength} bytes of "${name}"`, {
        file: info.file ?? this.source, tensor: name, value: [at, length], expected: `0 <= at <= at + length <= ${info.byteLength}`,
      });
    }
    return src.read(info.offset + at, length);
  }

  abstract readF32(name: string): Promise<Float32Array>;

  async readValues(name: string): Promise<TensorValues> {
    const info = this.tensor(name);
    return storedValues(info, await this.readRaw(name), this.format, this.source, this.entry(name).src.freshReads);
  }

  /** The row length of `name`, after checking that rows [firstRow, firstRow + rows) exist (E_BAD_INPUT). */
  protected rowLength(name: string, firstRow: number, rows: number): number {
    const { info } = this.entry(name);
    const rowLen = info.shape.length ? info.shape[info.shape.length - 1] : 1;
    const nrows = rowLen === 0 ? 0 : numel(info.shape) / rowLen;
    if (!Number.isSafeInteger(firstRow) || !Number.isSafeInteger(rows) || firstRow < 0 || rows < 0 || firstRow + rows > nrows) {
      fail(ErrorCodes.BAD_INPUT, `[${this.format}] ${this.source}: rows [${firstRow}, ${firstRow + rows}) are outside the ${nrows} rows of "${name}"`, {
        file: info.file ?? this.source, tensor: name, value: [firstRow, rows], expected: `0 <= firstRow <= firstRow + rows <= ${nrows}`,
      });
    }
    return rowLen;
  }

  async readRows(name: string, firstRow: number, rows: number): Promise<TensorValues> {
    const { info, src } = this.entry(name);
    const at = this.locate(name, firstRow, rows);
    if (!at) return storedValues(info, new Uint8Array(0), this.format, this.source);
    return storedValues(info, await src.read(at.offset, at.length), this.format, this.source, src.freshReads);
  }

  locate(name: string, firstRow: number, rows: number): StoredRows | undefined {
    const { info, src } = this.entry(name);
    const rowLen = this.rowLength(name, firstRow, rows);
    const dtype = STORED[info.dtype];
    if (!dtype) return undefined;
    const es = dtype === 'f32' ? 4 : 2;
    return { source: src, offset: info.offset + firstRow * rowLen * es, length: rows * rowLen * es, dtype };
  }
}

const STORED: Record<string, TensorValues['dtype'] | undefined> = { F32: 'f32', F16: 'f16', BF16: 'bf16' };

/** The TensorValues dtype readValues gives a tensor stored as `dtype` (F32 / F16 / BF16), else undefined. */
export function valuesDtypeOf(dtype: string): TensorValues['dtype'] | undefined {
  return STORED[dtype];
}

/**
 * Stored F32 / F16 / BF16 bytes as a typed array the caller owns (copied unless the source's reads
 * are already fresh, whole buffers); other dtypes are E_UNSUPPORTED_DTYPE.
 */
function storedValues(info: TensorInfo, raw: Uint8Array, format: string, source: string, fresh = false): TensorValues {
  const owned = fresh && raw.byteOffset === 0 && raw.byteLength === raw.buffer.byteLength;
  if (STORED[info.dtype]) return ownedValues(info.dtype, owned ? raw : raw.slice());
  return fail(ErrorCodes.UNSUPPORTED_DTYPE, `[${format}] ${source}: readValues needs an F32, F16 or BF16 tensor but "${info.name}" is ${info.dtype} (use readF32)`, {
    file: info.file ?? source, tensor: info.name, value: info.dtype, expected: ['F32', 'F16', 'BF16'],
  });
}

/**
 * F32 / F16 / BF16 bytes that start their own buffer (a fresh read, a copy) as values, without
 * another copy.
 */
export function ownedValues(dtype: string, bytes: Uint8Array): TensorValues {
  const d = STORED[dtype];
  if (!d || bytes.byteOffset !== 0) fail(ErrorCodes.UNSUPPORTED_DTYPE, `[checkpoint] ${dtype} bytes at offset ${bytes.byteOffset} are not F32, F16 or BF16 values of their own buffer`, { value: dtype, expected: ['F32', 'F16', 'BF16'] });
  const n = bytes.byteLength >> (d === 'f32' ? 2 : 1);
  return d === 'f32' ? { values: new Float32Array(bytes.buffer, 0, n), dtype: d } : { values: new Uint16Array(bytes.buffer, 0, n), dtype: d! };
}

/**
 * What a view of `input` (a family view, a renamed or decoded presentation of its tensors) shares
 * with it: format, source and metadata, with its own tensor list and lookup.
 */
export function viewBase(input: Checkpoint, tensors: TensorInfo[], tensor: (name: string) => TensorInfo): Pick<Checkpoint, 'format' | 'source' | 'tensors' | 'metadata' | 'tensor'> {
  return { format: input.format, source: input.source, tensors, metadata: input.metadata, tensor };
}

/**
 * A view of `input` that only renames: its tensors are `tensors`, each read from the input tensor
 * `src(name)` names, with every optional reader the input has.
 */
export function renamedView(input: Checkpoint, tensors: TensorInfo[], src: (name: string) => string): Checkpoint {
  return {
    ...viewBase(input, tensors, (name) => ({ ...input.tensor(src(name)), name })),
    readRaw: (name) => input.readRaw(src(name)),
    readF32: (name) => input.readF32(src(name)),
    readValues: (name) => input.readValues(src(name)),
    ...(input.readRows ? { readRows: (name: string, r0: number, n: number) => input.readRows!(src(name), r0, n) } : {}),
    ...(input.locate ? { locate: (name: string, r0: number, n: number) => input.locate!(src(name), r0, n) } : {}),
    ...(input.readBytes ? { readBytes: (name: string, at: number, n: number) => input.readBytes!(src(name), at, n) } : {}),
  };
}

/**
 * `length` stored bytes of a tensor from byte `at` of it: readBytes where the checkpoint has it
 * (reading only those bytes), else a cut of readRaw.
 */
export function tensorBytes(ck: Checkpoint, name: string, at: number, length: number): Promise<Uint8Array> {
  return ck.readBytes ? ck.readBytes(name, at, length) : ck.readRaw(name).then((b) => b.subarray(at, at + length));
}

/** Number of elements of a shape (product of the dimensions; 1 for a scalar). */
export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}
