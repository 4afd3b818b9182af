// Loads the kernel wasm. The one place that decides which build runs: SIMD when the runtime
// validates a v128 probe, scalar otherwise; a forced build that the runtime lacks is an error.
import { ErrorCodes, fail } from '../errors.js';

export type WasmBuild = 'wasm-simd' | 'wasm';
export type WasmSource = WebAssembly.Module | ArrayBuffer | Uint8Array | URL | string;

const FILES: Record<WasmBuild, string> = {
  'wasm-simd': 'webquant-simd.wasm',
  wasm: 'webquant-scalar.wasm',
};

// A module whose only function returns v128.const 0: valid exactly when SIMD is supported.
const SIMD_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, //        type: () -> v128
  0x03, 0x02, 0x01, 0x00, //                          one function of type 0
  0x0a, 0x16, 0x01, 0x14, 0x00, 0xfd, 0x0c, //        code: v128.const
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0x0b, //                                            end
]);

let simdSupported: boolean | undefined;
export function hasSimd(): boolean {
  if (simdSupported === undefined) simdSupported = WebAssembly.validate(SIMD_PROBE);
  return simdSupported;
}

const sources: Partial<Record<WasmBuild, WasmSource>> = {};
const cache = new Map<string, Promise<Kernels>>();

/**
 * Overrides where a build's wasm comes from: needed in Cloudflare Workers (import the .wasm so it
 * is compiled at upload and pass the Module) and useful for bundlers that emit asset URLs.
 */
export function configureWasm(src: Partial<Record<WasmBuild, WasmSource>>): void {
  Object.assign(sources, src);
  for (const b of Object.keys(src) as WasmBuild[]) {
    modules.delete(b);
    for (const key of [...cache.keys()]) if (key.startsWith(`${b}/`)) cache.delete(key);
  }
}

export function resolveBuild(requested: 'auto' | WasmBuild = 'auto'): WasmBuild {
  if (requested === 'auto') return hasSimd() ? 'wasm-simd' : 'wasm';
  if (requested === 'wasm-simd' && !hasSimd()) {
    fail(ErrorCodes.BAD_BACKEND, '[kernels] backend "wasm-simd" was requested but this runtime has no WebAssembly SIMD', {
      option: 'backend', value: requested, expected: ['auto', 'wasm'],
    });
  }
  if (requested !== 'wasm-simd' && requested !== 'wasm') {
    fail(ErrorCodes.BAD_BACKEND, `[kernels] unknown backend "${String(requested)}"`, {
      option: 'backend', value: requested, expected: ['auto', 'wasm-simd', 'wasm'],
    });
  }
  return requested;
}

/**
 * The kernels of one build, instantiated once per thread and `instance` name. The default
 * instance belongs to quantize()/dequantize(), whose memory arena starts at heapBase; other users
 * that keep buffers in wasm memory between calls (the serving API) take a named instance of their
 * own. All instances of a build share one compiled module.
 */
export function loadKernels(requested: 'auto' | WasmBuild = 'auto', instance = 'default'): Promise<Kernels> {
  const build = resolveBuild(requested);
  const key = `${build}/${instance}`;
  let p = cache.get(key);
  if (!p) {
    p = instantiate(build);
    cache.set(key, p);
    p.catch(() => cache.delete(key));
  }
  return p;
}

const modules = new Map<WasmBuild, Promise<WebAssembly.Module>>();

/**
 * The compiled module of a build (from configureWasm's source or the default file), compiled once
 * per thread. A pool compiles it here and hands it to its workers, which then share the machine
 * code (V8 tiers a shared module up once, not once per worker) and skip their own compile.
 */
export async function compiledModule(requested: 'auto' | WasmBuild = 'auto'): Promise<{ build: WasmBuild; module: WebAssembly.Module }> {
  const build = resolveBuild(requested);
  return { build, module: await moduleOf(build) };
}

function moduleOf(build: WasmBuild): Promise<WebAssembly.Module> {
  let m = modules.get(build);
  if (!m) {
    m = compile(sources[build] ?? defaultUrl(build));
    modules.set(build, m);
    m.catch(() => modules.delete(build));
  }
  return m;
}

async function instantiate(build: WasmBuild): Promise<Kernels> {
  let mod: WebAssembly.Module;
  try {
    mod = await moduleOf(build);
  } catch (e) {
    fail(ErrorCodes.WASM_LOAD, `[kernels] could not load ${FILES[build]}: ${(e as Error).message}`, { file: FILES[build] });
  }
  const instance = await WebAssembly.instantiate(mod, {
    env: {
      abort(_m: number, _f: number, line: number, col: number) {
        throw new Error(`[kernels] wasm abort at ${line}:${col}`);
      },
    },
  });
  return new Kernels(build, instance.exports as Record<string, unknown>);
}

// Literal URLs, so that bundlers emit exactly the two kernel builds as assets.
function defaultUrl(build: WasmBuild): URL {
  return build === 'wasm-simd'
    ? new URL('../../build/webquant-simd.wasm', import.meta.url)
    : new URL('../../build/webquant-scalar.wasm', import.meta.url);
}

async function compile(src: WasmSource): Promise<WebAssembly.Module> {
  if (src instanceof WebAssembly.Module) return src;
  if (src instanceof ArrayBuffer || ArrayBuffer.isView(src)) return WebAssembly.compile(src as BufferSource);
  const url = typeof src === 'string' ? new URL(src, import.meta.url) : src;
  if (url.protocol === 'file:') {
    // A computed specifier keeps bundlers from pulling a Node module into browser builds.
    const fsModule = 'node:fs/promises';
    const { readFile } = (await import(/* @vite-ignore */ fsModule)) as typeof import('node:fs/promises');
    return WebAssembly.compile(await readFile(url));
  }
  const res = await fetch(url);
  if (!res.ok) throw new Error(`HTTP ${res.status} for ${url.href}`);
  return WebAssembly.compile(await res.arrayBuffer());
}

type KernelFn = (...args: number[]) => number | void;

export class Kernels {
  readonly memory: WebAssembly.Memory;
  readonly heapBase: number;

  constructor(readonly build: WasmBuild, readonly exports: Record<string, unknown>) {
    this.memory = exports.memory as WebAssembly.Memory;
    // The static data ends wherever the kernels' tables end; the host's views (Float64Array
    // included) need aligned offsets, so its region starts at the next 64-byte boundary.
    this.heapBase = (Number((exports.heapBase as () => number)()) + 63) & ~63;
  }

  has(name: string): boolean {
    return typeof this.exports[name] === 'function';
  }

  fn(name: string): KernelFn {
    const f = this.exports[name];
    if (typeof f !== 'function') {
      fail(ErrorCodes.WASM_LOAD, `[kernels] the ${this.build} build has no export "${name}"`, { value: name });
    }
    return f as KernelFn;
  }

  constant(name: string): number {
    const g = this.exports[name];
    if (!(g instanceof WebAssembly.Global)) fail(ErrorCodes.WASM_LOAD, `[kernels] no constant "${name}"`, { value: name });
    return Number(g.value);
  }

  /** Grows memory so that `bytes` bytes above heapBase are usable; returns heapBase. */
  reserve(bytes: number): number {
    const need = this.heapBase + bytes;
    const have = this.memory.buffer.byteLength;
    if (need > have) {
      if (need > 0xffff0000) fail(ErrorCodes.BAD_INPUT, `[kernels] a chunk of ${bytes} bytes does not fit in wasm memory`);
      this.memory.grow(Math.ceil((need - have) / 65536));
    }
    return this.heapBase;
  }

  get buffer(): ArrayBuffer {
    return this.memory.buffer;
  }
  u8(at: number, len: number): Uint8Array {
    return new Uint8Array(this.memory.buffer, at, len);
  }
  f32(at: number, len: number): Float32Array {
    return new Float32Array(this.memory.buffer, at, len);
  }
}
