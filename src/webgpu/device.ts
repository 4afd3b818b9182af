// The one place that acquires a WebGPU device: navigator.gpu in browsers and workers, the optional
// `webgpu` npm package (Dawn) in Node, loaded lazily so that nothing else needs it. The adapter's
// own limits are requested (the defaults cap storage bindings at 128 MiB), and a lost device is
// remembered so that callers fall back to wasm for the rest of the run.

/// <reference types="@webgpu/types" />

export interface GpuInfo {
  vendor: string;
  architecture: string;
  description: string;
  /** A CPU implementation (SwiftShader, llvmpipe, WARP) or an adapter the browser marks as fallback. */
  cpuEmulated: boolean;
}

export interface GpuContext {
  device: GPUDevice;
  info: GpuInfo;
  limits: { maxStorageBufferBindingSize: number; maxBufferSize: number; maxComputeWorkgroupsPerDimension: number };
  /** Set once the device is lost or destroyed; the context is never used again. */
  lost: boolean;
}

export type GpuState = { ok: true; gpu: GpuContext } | { ok: false; reason: string };

let pending: Promise<GpuState> | undefined;
// Dawn's Node binding tears its instance down when the object `create()` returned is collected,
// even while a device made from it is in use (crashes and hung mapAsync otherwise): keep it.
let instance: GPU | undefined;
let current: GpuState | undefined;

const CPU_ADAPTERS = /swiftshader|llvmpipe|lavapipe|softpipe|warp|microsoft basic render|cpu/i;

async function navigatorGpu(): Promise<GPU | undefined> {
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
  if (nav?.gpu) return nav.gpu;
  const isNode = typeof process !== 'undefined' && !!process.versions?.node;
  if (!isNode) return undefined;
  try {
    // A computed specifier keeps bundlers from resolving the optional Node-only package.
    const name = 'webgpu';
    const mod = (await import(/* @vite-ignore */ name)) as { create(flags: string[]): GPU; globals: Record<string, unknown> };
    // The WebGPU classes (GPUBufferUsage, ...) as globals, without replacing any that exist.
    for (const [k, v] of Object.entries(mod.globals)) if (!(k in globalThis)) (globalThis as Record<string, unknown>)[k] = v;
    return mod.create([]);
  } catch {
    return undefined;
  }
}

async function acquire(): Promise<GpuState> {
  const gpu = await navigatorGpu();
  instance = gpu;
  if (!gpu) return { ok: false, reason: 'no WebGPU implementation (navigator.gpu, or the optional `webgpu` package in Node)' };
  let adapter: GPUAdapter | null = null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  } catch (e) {
    return { ok: false, reason: `requestAdapter failed: ${(e as Error).message}` };
  }
  if (!adapter) return { ok: false, reason: 'no WebGPU adapter (in Node on Linux, Dawn needs libvulkan.so.1 and a Vulkan driver, e.g. VK_ICD_FILENAMES)' };
  const ai = adapter.info as GPUAdapterInfo & { isFallbackAdapter?: boolean };
  const legacyFallback = (adapter as GPUAdapter & { isFallbackAdapter?: boolean }).isFallbackAdapter;
  const text = `${ai?.vendor ?? ''} ${ai?.architecture ?? ''} ${ai?.device ?? ''} ${ai?.description ?? ''}`;
  const info: GpuInfo = {
    vendor: ai?.vendor ?? '',
    architecture: ai?.architecture ?? '',
    description: ai?.description ?? '',
    cpuEmulated: !!ai?.isFallbackAdapter || !!legacyFallback || CPU_ADAPTERS.test(text),
  };
  const want = {
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
    maxBufferSize: adapter.limits.maxBufferSize,
    maxComputeWorkgroupsPerDimension: adapter.limits.maxComputeWorkgroupsPerDimension,
  };
  let device: GPUDevice;
  try {
    device = await adapter.requestDevice({ requiredLimits: want });
  } catch (e) {
    return { ok: false, reason: `requestDevice failed: ${(e as Error).message}` };
  }
  const ctx: GpuContext = {
    device,
    info,
    limits: {
      maxStorageBufferBindingSize: device.limits.maxStorageBufferBindingSize,
      maxBufferSize: device.limits.maxBufferSize,
      maxComputeWorkgroupsPerDimension: device.limits.maxComputeWorkgroupsPerDimension,
    },
    lost: false,
  };
  void device.lost.then((l) => {
    ctx.lost = true;
    if (current?.ok && current.gpu === ctx) current = { ok: false, reason: `device lost (${l.reason}): ${l.message}` };
  });
  return { ok: true, gpu: ctx };
}

/** The device (acquired once per thread); `{ ok: false, reason }` when there is none. */
export function gpuState(): Promise<GpuState> {
  if (current) return Promise.resolve(current);
  pending ??= acquire().then((s) => (current = s));
  return pending;
}

/** Marks the device unusable for the rest of the run (after a loss, OOM or internal error). */
export function markGpuLost(reason: string): void {
  if (current?.ok) {
    current.gpu.lost = true;
    current = { ok: false, reason };
  }
}

/** Forgets the device so the next call acquires a new one (tests; after a deliberate reset). */
export function resetGpu(): void {
  if (current?.ok) current.gpu.device.destroy();
  current = undefined;
  pending = undefined;
  instance = undefined;
}
