// WebGPU backend: the entry points src/quantize.ts calls first. Each returns undefined when the
// selection (backend.ts) says wasm, so the caller goes on with the wasm build it names.
import type { WasmBuild } from '../kernels/loader.js';
import type { TensorDequantizeOptions as DequantizeOptions, QuantizedTensor, QuantizeOptions, TensorValues, planTensor } from '../quantize.js';
import { getFormat } from '../formats/registry.js';
import { selectBackend } from './backend.js';
import { gpuUnsupported } from './kernels.js';
import { gpuDequantize, gpuMatvec, gpuQuantize } from './run.js';
import { gpuState } from './device.js';
import { ErrorCodes, fail } from '../errors.js';

export { MATVEC_TOLERANCE, gpuHooks } from './run.js';

/** y = W x with the WebGPU matvec kernels (an error when there is no device or no kernel). */
export async function webgpuMatvec(qt: QuantizedTensor, x: Float32Array, opts: { chunkBytes?: number } = {}): Promise<Float32Array> {
  const s = await gpuState();
  if (!s.ok) fail(ErrorCodes.BAD_BACKEND, `[matvec] WebGPU is unavailable: ${s.reason}`, { option: 'backend', value: 'webgpu' });
  return gpuMatvec(s.gpu, qt, x, opts.chunkBytes);
}

export { setBackendPreference, webgpuEvents, type WebgpuWarning, type BackendName } from './backend.js';
export { gpuState, resetGpu, type GpuContext, type GpuInfo } from './device.js';
export { gpuUnsupported, GPU_FORMATS } from './kernels.js';

export type GpuResult<T> = { ran: true; value: T } | { ran: false; build: 'auto' | WasmBuild };

export async function maybeGpuQuantize(values: TensorValues, opts: QuantizeOptions & { preferGpu?: boolean }, p: ReturnType<typeof planTensor>): Promise<GpuResult<QuantizedTensor>> {
  const why = opts.slice || opts.prepareOnly ? 'slices and prepareOnly run on wasm' : gpuUnsupported(p.spec.name, p.o, 'quantize', !!opts.importance && p.spec.importance);
  const sel = await selectBackend(opts.backend, opts.preferGpu, why, 'quantize');
  if (sel.kind === 'wasm') return { ran: false, build: sel.build };
  return { ran: true, value: await gpuQuantize(sel.gpu, values, opts, p) };
}

export async function maybeGpuDequantize(qt: QuantizedTensor, opts: DequantizeOptions & { preferGpu?: boolean }): Promise<GpuResult<Float32Array>> {
  const sel = await selectBackend(opts.backend, opts.preferGpu, gpuUnsupported(getFormat(qt.format).name, qt.options, 'dequantize'), 'dequantize');
  if (sel.kind === 'wasm') return { ran: false, build: sel.build };
  return { ran: true, value: await gpuDequantize(sel.gpu, qt, opts) };
}
