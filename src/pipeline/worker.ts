// What every pool worker runs, whatever the runtime: the kernels are loaded once per worker, then
// each call quantizes one tensor (or one chunk of rows) whose values arrive as a transferred
// ArrayBuffer, or are read by the worker itself from a range of a source it is told about
// (quantizeRange: a file, a Blob or a URL block by block), and whose output leaves as a
// transferred ArrayBuffer, or is written by the worker itself into the output file at offsets it
// is told (`out`, Node). The runtime entry points (worker-node.ts, worker-browser.ts) only
// connect this object to their message port.
import { Comlink } from './transfer.js';
import { configureWasm, loadKernels, type Kernels, type WasmBuild, type WasmSource } from '../kernels/loader.js';
import { quantizeFrom, type Backend, type ChunkSource, type QuantizeOptions, type QuantizedTensor } from '../quantize.js';
import { openRef, type SourceRef } from '../io/source.js';
import type { Layout, PreparedArgs, ResolvedOptions } from '../formats/types.js';
import type { ErrorMetrics } from '../metrics.js';

export interface WorkerInit {
  backend?: Backend;
  /** Where each wasm build comes from (see configureWasm); URLs must be strings to be cloneable. */
  wasm?: Partial<Record<WasmBuild, WasmSource>>;
}

export type WorkerDType = 'f32' | 'f16' | 'bf16';

/** quantize() options minus the ones the worker decides (backend) or receives separately. */
export type WorkerQuantizeOptions = Omit<QuantizeOptions, 'backend' | 'dtype'> & { dtype: WorkerDType };

export interface WorkerResult {
  format: string;
  shape: [number, number];
  /** Transferred. */
  data: ArrayBuffer;
  layout: Layout;
  options: ResolvedOptions;
  metrics?: ErrorMetrics;
  backend: WasmBuild;
  /** The tensor-level calibration (options.prepareOnly). */
  prepared?: PreparedArgs;
}

/** Stored values the worker reads itself: `length` bytes at `offset` of `source`. */
export interface WorkerRange {
  source: SourceRef;
  offset: number;
  length: number;
}

/**
 * The output written by the worker into a file (Node): `at[s]` is the file offset of this call's
 * first byte of row section s. The result's `data` is then empty.
 */
export interface WorkerOutput {
  path: string;
  at: number[];
}

export interface WorkerApi {
  init(init: WorkerInit): Promise<WasmBuild>;
  quantizeTensor(values: ArrayBuffer, options: WorkerQuantizeOptions, out?: WorkerOutput): Promise<WorkerResult>;
  quantizeRange(range: WorkerRange, options: WorkerQuantizeOptions, out?: WorkerOutput): Promise<WorkerResult>;
}

type NodeIo = typeof import('../io/node.js');
let nodeIo: Promise<NodeIo> | undefined;
/** src/io/node.js, loaded on the first file range (a computed specifier keeps bundlers out). */
function loadNodeIo(): Promise<NodeIo> {
  const m = '../io/node.js';
  return (nodeIo ??= import(/* @vite-ignore */ m) as Promise<NodeIo>);
}

function result(qt: QuantizedTensor & { backend: WasmBuild }): WorkerResult {
  // quantizeFrom allocates `data` on its own, so its buffer is exactly the output and can move.
  const data = qt.data.byteOffset === 0 && qt.data.byteLength === qt.data.buffer.byteLength ? qt.data.buffer as ArrayBuffer : qt.data.slice().buffer;
  const out: WorkerResult = { format: qt.format, shape: qt.shape, data, layout: qt.layout, options: qt.options, metrics: qt.metrics, backend: qt.backend, prepared: qt.prepared };
  return Comlink.transfer(out, [data]);
}

/** Quantizes `input`, handing the output to `out`'s file when given. */
async function quantizeTo(k: Kernels, input: ChunkSource, options: WorkerQuantizeOptions, out: WorkerOutput | undefined): Promise<WorkerResult> {
  if (!out) return result(await quantizeFrom(k, input, options));
  const file = (await loadNodeIo()).openFileWriteSync(out.path);
  try {
    return result(await quantizeFrom(k, input, options, undefined, (s, at, bytes) => file.writeAt(bytes, out.at[s] + at)));
  } finally {
    file.close();
  }
}

/**
 * Bytes a Blob or URL range is read in, two blocks at a time (the next is read while the kernels
 * run). A URL's block is one Range request: larger, so that a unit up to 8 MiB is still one.
 */
const BLOCK_BYTES = { blob: 4 << 20, url: 8 << 20 } as const;

/**
 * A Blob or URL range read block by block as the kernels ask for it, so that a whole tensor (the
 * calibration pass of a sliced one, or one that runs whole) is never held whole; each
 * calibration pass reads it again (for a URL: fetches it again).
 */
function blockInput(source: Extract<SourceRef, { kind: 'blob' | 'url' }>, range: WorkerRange, dtype: WorkerDType): ChunkSource {
  const src = openRef(source);
  const size = BLOCK_BYTES[source.kind];
  const blocks = new Map<number, Promise<Uint8Array>>();
  const block = (b: number) => {
    let p = blocks.get(b);
    if (!p) {
      const at = b * size;
      blocks.set(b, (p = src.read(range.offset + at, Math.min(size, range.length - at))));
      p.catch(() => undefined); // a read ahead that fails is reported when it is needed
    }
    return p;
  };
  return {
    length: range.length / (dtype === 'f32' ? 4 : 2),
    dtype,
    async copy(dst, at) {
      for (let done = 0; done < dst.byteLength;) {
        const b = Math.floor((at + done) / size);
        const bytes = await block(b);
        // Drop the blocks behind this one (a new pass starts over from its first block).
        for (const k of blocks.keys()) if (k < b) blocks.delete(k);
        if ((b + 1) * size < range.length) void block(b + 1);
        const from = at + done - b * size;
        const n = Math.min(dst.byteLength - done, bytes.byteLength - from);
        dst.set(bytes.subarray(from, from + n), done);
        done += n;
      }
    },
  };
}

function arrayInput(values: ArrayBuffer, dtype: WorkerDType): ChunkSource {
  const src = new Uint8Array(values);
  return { length: values.byteLength / (dtype === 'f32' ? 4 : 2), dtype, copy: (dst, at) => dst.set(src.subarray(at, at + dst.byteLength)) };
}

// Calls take turns on this thread's kernels (loadKernels shares one instance per thread, and
// in-thread workers, src/edge/inline-spawner.ts, share the thread): a Blob range's chunks arrive
// asynchronously, and another call must not reuse the kernels' memory in between (the pool may
// send a call before the last one has ended).
let turn: Promise<unknown> = Promise.resolve();
function exclusive<T>(f: () => Promise<T>): Promise<T> {
  const r = turn.then(f);
  turn = r.catch(() => undefined);
  return r;
}

export function createWorkerApi(): WorkerApi {
  let kernels: Promise<Kernels> | undefined;

  const api: WorkerApi = {
    async init(init) {
      if (init.wasm) configureWasm(init.wasm);
      kernels = loadKernels(init.backend ?? 'auto');
      return (await kernels).build;
    },
    quantizeTensor: (values, options, out) => exclusive(async () => {
      const k = await (kernels ??= loadKernels('auto'));
      return quantizeTo(k, arrayInput(values, options.dtype), options, out);
    }),
    quantizeRange: (range, options, out) => exclusive(async () => {
      const k = await (kernels ??= loadKernels('auto'));
      if (range.source.kind === 'file') {
        // Read chunk by chunk straight into wasm memory: no buffer of the whole range, and the
        // read's copy replaces the copy from a buffer into wasm memory.
        const file = (await loadNodeIo()).openFileSync(range.source);
        try {
          const input: ChunkSource = { length: range.length / (options.dtype === 'f32' ? 4 : 2), dtype: options.dtype, copy: (dst, at) => file.readInto(dst, range.offset + at) };
          return await quantizeTo(k, input, options, out);
        } finally {
          file.close();
        }
      }
      return quantizeTo(k, blockInput(range.source, range, options.dtype), options, out);
    }),
  };
  return api;
}
