// What every pool worker runs, whatever the runtime: the kernels are loaded once per worker, then
// each call quantizes one tensor (or one chunk of rows) whose values arrive as a transferred
// ArrayBuffer and whose output leaves the same way. The runtime entry points (worker-node.ts,
// worker-browser.ts) only connect this object to their message port.
import { Comlink } from './transfer.js';
import { configureWasm, loadKernels, type Kernels, type WasmBuild, type WasmSource } from '../kernels/loader.js';
import { quantizeWith, type Backend, type QuantizeOptions } from '../quantize.js';
import type { Layout, ResolvedOptions } from '../formats/types.js';
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
}

export interface WorkerApi {
  init(init: WorkerInit): Promise<WasmBuild>;
  quantizeTensor(values: ArrayBuffer, options: WorkerQuantizeOptions): Promise<WorkerResult>;
}

export function createWorkerApi(): WorkerApi {
  let kernels: Promise<Kernels> | undefined;
  const api: WorkerApi = {
    async init(init) {
      if (init.wasm) configureWasm(init.wasm);
      kernels = loadKernels(init.backend ?? 'auto');
      return (await kernels).build;
    },
    async quantizeTensor(values, options) {
      const k = await (kernels ??= loadKernels('auto'));
      const view = options.dtype === 'f32' ? new Float32Array(values) : new Uint16Array(values);
      const qt = await quantizeWith(k, view, options);
      // quantizeWith allocates `data` on its own, so its buffer is exactly the output and can move.
      const data = qt.data.byteOffset === 0 && qt.data.byteLength === qt.data.buffer.byteLength ? qt.data.buffer as ArrayBuffer : qt.data.slice().buffer;
      const out: WorkerResult = { format: qt.format, shape: qt.shape, data, layout: qt.layout, options: qt.options, metrics: qt.metrics, backend: qt.backend };
      return Comlink.transfer(out, [data]);
    },
  };
  return api;
}
