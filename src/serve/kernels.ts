// A private instance of the kernel wasm for serving. quantize()/dequantize() own the memory above
// heapBase of the shared instance (their Arena always starts there), so the serving API keeps its
// own instance: its x / y buffers and weight chunks can never be overwritten by a quantize call.
import { ErrorCodes, fail } from '../errors.js';
import { Kernels, resolveBuild, type WasmBuild } from '../kernels/loader.js';

const FILES: Record<WasmBuild, string> = { 'wasm-simd': 'webquant-simd.wasm', wasm: 'webquant-scalar.wasm' };
const cache = new Map<WasmBuild, Promise<Kernels>>();
const modules: Partial<Record<WasmBuild, WebAssembly.Module>> = {};

/** Uses an already compiled module (Workers, bundlers) instead of fetching build/<file>. */
export function configureServeWasm(src: Partial<Record<WasmBuild, WebAssembly.Module>>): void {
  Object.assign(modules, src);
  for (const k of Object.keys(src) as WasmBuild[]) cache.delete(k);
}

async function compile(build: WasmBuild): Promise<WebAssembly.Module> {
  const m = modules[build];
  if (m) return m;
  const url = new URL(`../../build/${FILES[build]}`, import.meta.url);
  if (url.protocol === 'file:') {
    const { readFile } = await import(/* @vite-ignore */ 'node:fs/promises');
    return WebAssembly.compile(await readFile(url));
  }
  const res = await fetch(url);
  if (!res.ok) throw new Error(`HTTP ${res.status} for ${url.href}`);
  return WebAssembly.compile(await res.arrayBuffer());
}

export function serveKernels(requested: 'auto' | WasmBuild = 'auto'): Promise<Kernels> {
  const build = resolveBuild(requested);
  let p = cache.get(build);
  if (!p) {
    p = (async () => {
      let mod: WebAssembly.Module;
      try {
        mod = await compile(build);
      } catch (e) {
        return fail(ErrorCodes.WASM_LOAD, `[serve] could not load ${FILES[build]}: ${(e as Error).message}`, { file: FILES[build] });
      }
      const inst = await WebAssembly.instantiate(mod, {
        env: { abort(_m: number, _f: number, line: number, col: number) { throw new Error(`[serve] wasm abort at ${line}:${col}`); } },
      });
      return new Kernels(build, inst.exports as Record<string, unknown>);
    })();
    cache.set(build, p);
    p.catch(() => cache.delete(build));
  }
  return p;
}
