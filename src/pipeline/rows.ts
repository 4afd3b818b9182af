// Ranged reads of whole rows, for tensors the pipeline cuts into row chunks. Checkpoint has no
// ranged read (yet), but a tensor's `offset` is absolute in its source, so the source that opened
// the checkpoint (or, for sharded safetensors, each shard's source) is enough.
import { ErrorCodes, WebquantError } from '../errors.js';
import type { ByteSource } from '../io/source.js';
import type { TensorInfo, TensorValues } from '../io/checkpoint.js';
import type { RowReader } from './jobs.js';

const ELEM: Record<string, { bytes: number; dtype: TensorValues['dtype'] }> = {
  F32: { bytes: 4, dtype: 'f32' }, F16: { bytes: 2, dtype: 'f16' }, BF16: { bytes: 2, dtype: 'bf16' },
};

/** `source`: the checkpoint's ByteSource, or a function from a shard file name (TensorInfo.file) to its source. */
export function rowReader(source: ByteSource | ((file: string | undefined) => ByteSource)): RowReader {
  return async (info: TensorInfo, firstRow: number, rows: number) => {
    const e = ELEM[info.dtype];
    if (!e) {
      throw new WebquantError(ErrorCodes.UNSUPPORTED_DTYPE, `[pipeline] row reads need an F32, F16 or BF16 tensor but "${info.name}" is ${info.dtype}`, { tensor: info.name, value: info.dtype, expected: Object.keys(ELEM) });
    }
    const rowLen = info.shape.length ? info.shape[info.shape.length - 1] : 1;
    const rowBytes = rowLen * e.bytes;
    const src = typeof source === 'function' ? source(info.file) : source;
    const raw = await src.read(info.offset + firstRow * rowBytes, rows * rowBytes);
    // A fresh, aligned buffer of exactly these rows: the pool can transfer it without a copy.
    const own = raw.byteOffset === 0 && raw.byteLength === raw.buffer.byteLength && raw.buffer instanceof ArrayBuffer ? raw.buffer : raw.slice().buffer;
    return { values: e.bytes === 4 ? new Float32Array(own) : new Uint16Array(own), dtype: e.dtype };
  };
}
