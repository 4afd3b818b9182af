// The serving API keeps its x / y buffers and weight chunks in wasm memory between calls, while
// quantize()/dequantize() own the memory above heapBase of the default instance; so serving uses
// its own named instance of the same compiled kernels.
import { loadKernels, type Kernels, type WasmBuild } from '../kernels/loader.js';

export function serveKernels(requested: 'auto' | WasmBuild = 'auto'): Promise<Kernels> {
  return loadKernels(requested, 'serve');
}
