// Where the kernels come from, for the page and its Workers alike: both builds as asset URLs (Vite
// emits the files and rewrites the URLs). Strings, so that they can be handed to workers (a URL
// object does not cross postMessage). Importing this module configures the loader.
import { configureWasm, type WasmBuild } from '../../src/index.js';

export const WASM: Record<WasmBuild, string> = {
  'wasm-simd': new URL('../../build/webquant-simd.wasm', import.meta.url).href,
  wasm: new URL('../../build/webquant-scalar.wasm', import.meta.url).href,
};
configureWasm(WASM);
