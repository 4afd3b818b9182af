// Backend selection: the one function that turns the `backend` option into what runs.
//   'wasm-simd' | 'wasm'  the wasm build (src/kernels/loader.ts resolves and checks it)
//   'webgpu'              the WebGPU kernels; an error when there is no device or the format /
//                         options have no WebGPU kernel (never a silent fallback)
//   'auto'                webgpu only when the caller opted in (preferGpu, or
//                         setBackendPreference('webgpu')), the format is supported and the adapter
//                         is a real GPU (a CPU emulation such as SwiftShader is slower than wasm);
//                         otherwise wasm-simd, then wasm.
// After a device loss the rest of the run uses wasm; a later forced 'webgpu' request then also
// runs on wasm and says so with a 'warning' event (see events below) instead of failing.
import { ErrorCodes, fail } from '../errors.js';
import { resolveBuild, type WasmBuild } from '../kernels/loader.js';
import { gpuState, type GpuContext } from './device.js';

export type BackendName = 'auto' | 'webgpu' | WasmBuild;

let preference: 'webgpu' | 'wasm' = 'wasm';
let allowEmulated = false;
let lostReason: string | undefined;

/**
 * Process-wide default for 'auto': 'webgpu' makes 'auto' use a (non-emulated) GPU when there is one.
 * `allowCpuEmulated` lets 'auto' take a CPU-emulated adapter too (testing the GPU path on CI).
 */
export function setBackendPreference(p: 'webgpu' | 'wasm', opts: { allowCpuEmulated?: boolean } = {}): void {
  preference = p;
  allowEmulated = !!opts.allowCpuEmulated;
}

export interface WebgpuWarning {
  kind: 'device-lost' | 'fallback';
  message: string;
  /** Rows the GPU finished before falling back (they are kept). */
  rowsDone?: number;
}

/** Emits 'warning' events (CustomEvent<WebgpuWarning>) when WebGPU work falls back to wasm. */
export const webgpuEvents = new EventTarget();

export function warn(w: WebgpuWarning): void {
  webgpuEvents.dispatchEvent(new CustomEvent<WebgpuWarning>('warning', { detail: w }));
}

export function noteDeviceLost(reason: string): void {
  lostReason = reason;
}

export type Selection = { kind: 'webgpu'; gpu: GpuContext } | { kind: 'wasm'; build: 'auto' | WasmBuild };

/**
 * `unsupported` is why the format/options have no WebGPU kernel (undefined when they have one).
 */
export async function selectBackend(requested: BackendName | undefined, preferGpu: boolean | undefined, unsupported: string | undefined, op: string): Promise<Selection> {
  const req = requested ?? 'auto';
  if (req === 'wasm-simd' || req === 'wasm') return { kind: 'wasm', build: resolveBuild(req) };
  if (req !== 'auto' && req !== 'webgpu') {
    fail(ErrorCodes.BAD_BACKEND, `[${op}] unknown backend "${String(req)}"`, { option: 'backend', value: req, expected: ['auto', 'webgpu', 'wasm-simd', 'wasm'] });
  }
  if (req === 'auto') {
    const opted = preferGpu ?? preference === 'webgpu';
    if (!opted || unsupported || lostReason) return { kind: 'wasm', build: 'auto' };
    const s = await gpuState();
    if (!s.ok || (s.gpu.info.cpuEmulated && !allowEmulated)) return { kind: 'wasm', build: 'auto' };
    return { kind: 'webgpu', gpu: s.gpu };
  }
  if (unsupported) {
    fail(ErrorCodes.BAD_BACKEND, `[${op}] backend "webgpu" was requested but ${unsupported}`, { option: 'backend', value: req, expected: ['auto', 'wasm-simd', 'wasm'] });
  }
  if (lostReason) {
    warn({ kind: 'fallback', message: `[${op}] the WebGPU device was lost earlier in this run (${lostReason}); running on wasm` });
    return { kind: 'wasm', build: 'auto' };
  }
  const s = await gpuState();
  if (!s.ok) {
    fail(ErrorCodes.BAD_BACKEND, `[${op}] backend "webgpu" was requested but is unavailable: ${s.reason}`, { option: 'backend', value: req, expected: ['auto', 'wasm-simd', 'wasm'] });
  }
  return { kind: 'webgpu', gpu: s.gpu };
}

/** Forgets an earlier device loss (tests). */
export function resetBackendState(): void {
  lostReason = undefined;
  preference = 'wasm';
  allowEmulated = false;
}

/**
 * The device of the pipeline's GPU lane (src/pipeline/gpu-lane.ts): the rules above for a whole
 * run instead of one format. Undefined for the wasm builds, for 'auto' without an opted-in,
 * non-emulated GPU, and after a device loss; a forced 'webgpu' without a device is an error.
 */
export async function selectLaneDevice(requested: BackendName | undefined, preferGpu: boolean | undefined): Promise<GpuContext | undefined> {
  const s = await selectBackend(requested, preferGpu, undefined, 'pipeline');
  return s.kind === 'webgpu' ? s.gpu : undefined;
}
