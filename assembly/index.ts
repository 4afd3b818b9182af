// Entry point of both wasm builds (SIMD and scalar, see asconfig.json). Each family re-exports
// its kernels; the host mirrors the exported constants in src/formats/.
export { ARGS_BYTES, scratchBytes, findNonFinite, heapBase } from './common';
export { metrics_accumulate } from './metrics';
export * from './gguf/index';
export * from './bnb/index';
export * from './int/index';
export * from './serve/index';
