// A webquant safetensors output as a checkpoint of values, so that it can be quantized again (to
// GGUF, or to another format): each quantized tensor (its sections folded into one, as the serving
// API sees it) is presented as F32 with its shape and read by its format's dequantizer; every
// other tensor is the input's. Any other checkpoint is returned as it is.
import { ErrorCodes, fail } from '../errors.js';
import type { Checkpoint, StoredRows, TensorInfo, TensorValues } from '../io/checkpoint.js';
import { openQuantized, type QuantizedModel } from './index.js';

const bytesOf = (v: Float32Array) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);

export async function asValues(ck: Checkpoint): Promise<Checkpoint> {
  if (ck.format !== 'safetensors' || typeof ck.metadata['webquant.quantization'] !== 'string') return ck;
  // A small cache: each tensor is read once, in order, by the pipeline.
  const q: QuantizedModel = await openQuantized(ck, { cacheBytes: 64 << 20 });
  const presented = new Map<string, TensorInfo>();
  for (const s of q.tensors) {
    if (!s.quantized) continue;
    const n = s.shape.reduce((a, b) => a * b, 1);
    presented.set(s.name, { name: s.name, dtype: 'F32', shape: s.shape.slice(), offset: 0, byteLength: n * 4 });
  }
  if (!presented.size) return ck;
  const served = new Set(q.tensors.map((s) => s.name));
  // In file order: each quantized tensor where its first section was; section tensors left out.
  const tensors = ck.tensors.filter((t) => served.has(t.name)).map((t) => presented.get(t.name) ?? t);
  const values = async (name: string) => q.tensor(name).dequantize();
  const rawValues = async (name: string) => bytesOf(await values(name));
  return {
    format: ck.format,
    source: ck.source,
    tensors,
    metadata: ck.metadata,
    tensor(name: string): TensorInfo {
      const t = presented.get(name) ?? (served.has(name) ? ck.tensor(name) : undefined);
      if (!t) return fail(ErrorCodes.TENSOR_NOT_FOUND, `[safetensors] ${ck.source}: no tensor "${name}"`, { file: ck.source, tensor: name });
      return t;
    },
    async readRaw(name) {
      return presented.has(name) ? rawValues(name) : ck.readRaw(name);
    },
    async readF32(name) {
      return presented.has(name) ? values(name) : ck.readF32(name);
    },
    async readValues(name): Promise<TensorValues> {
      return presented.has(name) ? { values: await values(name), dtype: 'f32' } : ck.readValues(name);
    },
    async readRows(name, firstRow, rows): Promise<TensorValues> {
      const t = presented.get(name);
      if (!t) {
        if (!ck.readRows) return fail(ErrorCodes.UNSUPPORTED_DTYPE, `[safetensors] ${ck.source}: no ranged reads`, { file: ck.source, tensor: name });
        return ck.readRows(name, firstRow, rows);
      }
      return { values: (await q.tensor(name).load()).rows(firstRow, rows).dequantize(), dtype: 'f32' };
    },
    readBytes: ck.readBytes && (async (name, at, length) => {
      if (presented.has(name)) return (await rawValues(name)).subarray(at, at + length);
      return ck.readBytes!(name, at, length);
    }),
    locate(name, firstRow, rows): StoredRows | undefined {
      return presented.has(name) ? undefined : ck.locate?.(name, firstRow, rows);
    },
  };
}
