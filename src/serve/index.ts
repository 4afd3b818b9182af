// Serving API: open a webquant safetensors output or a GGUF file lazily and compute with its
// quantized weights without dequantizing whole matrices.
//
//   const q = await openQuantized(fromUrl(url), { cacheBytes: 512 << 20 });
//   const y = await q.tensor('model.layers.0.mlp.down_proj.weight').matvec(x);
//
// Nothing but the header is read at open (entries.ts resolves what each tensor is); a tensor's
// bytes (each of its sections) are read the first time it is used, through the ByteSource (Range
// requests for URLs), and kept in an LRU cache capped at `cacheBytes` (lru.ts); with
// `persistentCache` also in OPFS, the Cache API or a directory (persist.ts), so that a reload
// reads them from there instead of the source. Compute runs in a private wasm instance
// (kernels.ts, compute.ts): the row sections are copied in chunks of rows and `<kernel>_matvec`
// (assembly/serve) runs on them; formats without a fused kernel dequantize a chunk of rows with
// their own `<kernel>_dequantize` and dot it (`serve_dot_rows`), so every registry format works.
import { ErrorCodes, fail } from '../errors.js';
import type { WasmBuild } from '../kernels/loader.js';
import { formats, getFormat } from '../formats/registry.js';
import { layoutOf } from '../formats/types.js';
import type { Checkpoint } from '../io/checkpoint.js';
import type { ByteSource } from '../io/source.js';
import { openCheckpoint } from '../io/open.js';
import { f16ToF32, f32ToF16, bf16ToF32 } from '../util/half.js';
import type { QuantizedTensor } from '../quantize.js';
import { computeOptions, loadedTensor } from './compute.js';
import { isShape, resolveEntries, sectionBytes, type Entry } from './entries.js';
import { serveKernels } from './kernels.js';
import { Lru } from './lru.js';
import { openPersistentCache, type PersistentCache } from './persist.js';
import type { LoadedTensor, OpenQuantizedOptions, QuantizedModel, ServeComputeOptions, ServedTensor } from './types.js';

export * from './types.js';
export {
  DEFAULT_PERSISTENT_BYTES, PERSISTENT_STORES, hasOpfs, hasCacheApi,
  type PersistentCacheOptions, type PersistentCacheStats, type PersistentStoreKind, type TensorStore, type StoredEntry,
} from './persist.js';

function isCheckpoint(s: ByteSource | Checkpoint): s is Checkpoint {
  return typeof (s as Checkpoint | null)?.readRaw === 'function' && Array.isArray((s as Checkpoint).tensors);
}

/** Opens a webquant safetensors output or a GGUF file (a ByteSource or an opened Checkpoint). */
export async function openQuantized(source: ByteSource | Checkpoint, opts: OpenQuantizedOptions = {}): Promise<QuantizedModel> {
  if (!isCheckpoint(source) && typeof (source as ByteSource)?.read !== 'function') {
    fail(ErrorCodes.BAD_INPUT, `[serve] openQuantized needs a ByteSource or an opened Checkpoint but got ${source === null ? 'null' : typeof source}`, {
      option: 'source', value: source === null ? 'null' : typeof source, expected: ['ByteSource', 'Checkpoint'],
    });
  }
  const cap = opts.cacheBytes ?? 512 << 20;
  if (!(cap >= 0)) fail(ErrorCodes.BAD_OPTION, `[serve] cacheBytes must be >= 0 but got ${cap}`, { option: 'cacheBytes', value: cap });
  const { chunkBytes, q8 } = computeOptions(opts);
  const ckpt = isCheckpoint(source) ? source : await openCheckpoint(source);
  const k = await serveKernels(opts.backend ?? 'auto');
  const entries = resolveEntries(ckpt);
  const cache = new Lru(cap);
  const persist: PersistentCache | undefined = opts.persistentCache === undefined
    ? undefined
    : await openPersistentCache(opts.persistentCache, isCheckpoint(source) ? undefined : await source.identity?.(), ckpt.source);
  // Concurrent first reads of one tensor share a promise, so a tensor is read once.
  const pending = new Map<string, Promise<Uint8Array[]>>();

  const entry = (name: string): Entry => {
    const e = entries.get(name);
    if (!e) {
      fail(ErrorCodes.TENSOR_NOT_FOUND, `[serve] ${ckpt.source}: no tensor named "${String(name)}"`, {
        file: ckpt.source, tensor: String(name), expected: `one of the ${entries.size} tensors`,
      });
    }
    return e;
  };

  async function read(e: Entry): Promise<Uint8Array[]> {
    const hit = cache.get(e.info.name);
    if (hit) return hit;
    let p = pending.get(e.info.name);
    if (!p) {
      p = (async () => {
        let secs = await persist?.get(e.info.name, sectionBytes(ckpt, e));
        if (!secs) {
          if (e.kind.type === 'quant') secs = await Promise.all(e.kind.sectionNames.map((s) => ckpt.readRaw(s)));
          else if (e.kind.type === 'float') secs = [await ckpt.readRaw(e.info.name)];
          else { const f = await ckpt.readF32(e.info.name); secs = [new Uint8Array(f.buffer, f.byteOffset, f.byteLength)]; }
          persist?.put(e.info.name, secs);
        }
        cache.set(e.info.name, secs);
        return secs;
      })();
      pending.set(e.info.name, p);
      p.finally(() => pending.delete(e.info.name)).catch(() => {});
    }
    return p;
  }

  // The `.scale` tensors' values (a few bytes each), read once.
  const scales = new Map<string, Promise<Float32Array>>();
  const scaleOf = (e: Entry): Promise<Float32Array> | undefined => {
    const n = e.info.scale;
    if (n === undefined) return undefined;
    let p = scales.get(n);
    if (!p) {
      p = ckpt.readF32(n);
      scales.set(n, p);
      p.catch(() => scales.delete(n));
    }
    return p;
  };
  const loaded = async (e: Entry) => {
    const [sections, scale] = await Promise.all([read(e), scaleOf(e)]);
    return loadedTensor(k, e, sections, chunkBytes, q8, scale);
  };

  const served = (e: Entry): ServedTensor => ({
    info: e.info,
    load: () => loaded(e),
    dequantize: async () => (await loaded(e)).dequantize(),
    async dequantizeF16() {
      const f = (await loaded(e)).dequantize();
      const h = new Uint16Array(f.length);
      for (let i = 0; i < f.length; i++) h[i] = f32ToF16(f[i]);
      return h;
    },
    matvec: async (x) => (await loaded(e)).matvec(x),
    matmul: async (X, batch) => (await loaded(e)).matmul(X, batch),
  });

  return {
    checkpoint: ckpt,
    tensors: [...entries.values()].map((e) => e.info),
    build: k.build,
    has: (name) => entries.has(name),
    tensor: (name) => served(entry(name)),
    cacheStats: () => ({
      bytes: cache.bytes, capBytes: cap, entries: cache.entries, hits: cache.hits, misses: cache.misses, evictions: cache.evictions,
      ...(persist ? { persistent: persist.stats() } : {}),
    }),
    clearCache: () => cache.clear(),
    flush: async () => { await persist?.flush(); },
  };
}

/** Eval adapter (src/eval/weights.ts WeightSource) over a quantized model. */
export interface QuantizedWeightSource {
  get(name: string): Promise<Float32Array>;
  matvec(name: string, x: Float32Array): Float32Array;
  /** Y = W X for `n` vectors (row-major), one batched kernel call: what the forward prefers. */
  matmul(name: string, x: Float32Array, n: number): Float32Array;
  /** A tensor the adapter holds (one of `names`). */
  held(name: string): LoadedTensor;
}

/**
 * The reference Llama forward's WeightSource on quantized weights: `get` dequantizes (norms,
 * embeddings), `matvec` runs the serving kernels. The hook is synchronous, so the 2-D tensors it
 * may be asked for (`names`, default every 2-D tensor) are read up front and held by the adapter
 * for its lifetime, in addition to (not counted by) the model's cache.
 */
export async function weightSource(q: QuantizedModel, opts: { names?: string[] } = {}): Promise<QuantizedWeightSource> {
  const names = opts.names ?? q.tensors.filter((t) => t.shape.length === 2).map((t) => t.name);
  const held = new Map<string, LoadedTensor>();
  for (const n of names) held.set(n, await q.tensor(n).load());
  return {
    get: (name) => q.tensor(name).dequantize(),
    matvec(name, x) {
      return heldTensor(name).matvec(x);
    },
    matmul(name, x, n) {
      return heldTensor(name).matmul(x, n);
    },
    held: (name) => heldTensor(name),
  };
  function heldTensor(name: string): LoadedTensor {
    const t = held.get(name);
    if (!t) fail(ErrorCodes.TENSOR_NOT_FOUND, `[serve] "${name}" was not loaded by weightSource (pass it in names)`, { tensor: name });
    return t;
  }
}

/**
 * A quantize() result as a LoadedTensor (no file involved): matvec / matmul / dequantize through the
 * serving kernels of the requested build.
 */
export async function servedFromQuantized(qt: QuantizedTensor, opts: ServeComputeOptions & { backend?: 'auto' | WasmBuild; chunkBytes?: number; name?: string } = {}): Promise<LoadedTensor> {
  const { chunkBytes, q8 } = computeOptions(opts);
  const k = await serveKernels(opts.backend ?? 'auto');
  const spec = getFormat(qt.format);
  const name = opts.name ?? 'tensor';
  if (!isShape(qt.shape) || qt.shape.length !== 2) {
    fail(ErrorCodes.BAD_INPUT, `[serve] ${name}: shape [${qt.shape}] is not [rows, rowLength]`, { tensor: name, option: 'shape', value: qt.shape, expected: '[rows, rowLength]' });
  }
  const [rows, rowLength] = qt.shape;
  const layout = layoutOf(spec, rows, rowLength, qt.options);
  if (!(qt.data instanceof Uint8Array) || qt.data.byteLength < layout.bytes) {
    fail(ErrorCodes.BAD_INPUT, `[serve] ${name}: ${spec.name} [${rows}, ${rowLength}] takes ${layout.bytes} bytes but data has ${(qt.data as Uint8Array)?.byteLength}`, {
      tensor: name, option: 'data', value: (qt.data as Uint8Array)?.byteLength, expected: layout.bytes,
    });
  }
  const e: Entry = {
    info: { name, shape: [rows, rowLength], rows, rowLength, format: spec.name, quantized: true, options: qt.options, byteLength: layout.bytes },
    kind: { type: 'quant', spec, options: qt.options, layout, sectionNames: layout.sections.map((s) => s.name) },
  };
  const sections = layout.sections.map((s) => qt.data.subarray(s.offset, s.offset + s.bytes));
  return loadedTensor(k, e, sections, chunkBytes, q8);
}

/** Whether the build has a fused kernel for a registry format (otherwise the generic path runs). */
export async function hasFusedMatvec(format: string, backend: 'auto' | WasmBuild = 'auto'): Promise<boolean> {
  return (await serveKernels(backend)).has(`${getFormat(format).kernel}_matvec`);
}

/** Every registry format name (tests iterate it). */
export const servedFormats = (): string[] => [...formats.keys()];
// Re-exported for callers converting dequantizeF16 output.
export { f16ToF32, bf16ToF32 };
