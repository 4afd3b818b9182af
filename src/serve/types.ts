// The serving API's public types and tolerances (implemented in index.ts, compute.ts, entries.ts).
import type { Checkpoint } from '../io/checkpoint.js';
import type { WasmBuild } from '../kernels/loader.js';
import type { ResolvedOptions } from '../formats/types.js';
import type { PersistentCacheOptions, PersistentCacheStats } from './persist.js';

/**
 * Tolerances of the serving matvec (mirrors MATVEC_REL_TOL / SIMD_SCALAR_REL_TOL in
 * assembly/serve/common.ts, where the reasoning is): |y_i - f64 dot(dequantize() row i, x)| <=
 * MATVEC_REL_TOL * sum_j |w_ij x_j|, and SIMD vs scalar builds within SIMD_SCALAR_REL_TOL of the same
 * scale (they differ only in the order of f32 sums).
 */
export const MATVEC_REL_TOL = 1e-6;
export const SIMD_SCALAR_REL_TOL = 2e-6;

/** args flags bit of the serving kernels: int8 activations (SERVE_Q8_ACT in assembly/serve/common.ts). */
export const SERVE_Q8_ACT = 0x100;
/** Formats whose fused kernel honours activations: 'q8' (the others always keep x in f32). */
export const Q8_ACTIVATION_FORMATS: readonly string[] = ['q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'iq4_nl', 'iq4_xs', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k'];

export interface ServeComputeOptions {
  /**
   * 'f32' (default): x stays f32, y is within MATVEC_REL_TOL of the f64 dot with the dequantized rows.
   * 'q8': x is quantized to int8 per 32 values (llama.cpp's Q8_0 activation path, |x - x^| <= amax/254)
   * and dotted in i32, 1.1-1.7x as fast (npm run bench:matvec); y is then within MATVEC_REL_TOL of the f64 dot with x^.
   * Applies to Q8_ACTIVATION_FORMATS; other formats ignore it.
   */
  activations?: 'f32' | 'q8';
}

export interface OpenQuantizedOptions extends ServeComputeOptions {
  /** Byte cap of the in-memory cache of tensor bytes read from the source (default 512 MiB). */
  cacheBytes?: number;
  backend?: 'auto' | WasmBuild;
  /** Bytes of weights copied into wasm memory per kernel call (default 4 MiB). */
  chunkBytes?: number;
  /**
   * Keep the tensors read in browser storage (or a directory on Node) across sessions, keyed by
   * the source's identity and checked on read; `true` is `{ store: 'auto' }`. See ./persist.ts.
   */
  persistentCache?: PersistentCacheOptions | true;
}

export interface ServedTensorInfo {
  name: string;
  /** Row-major; the last dimension is the row length. */
  shape: number[];
  rows: number;
  rowLength: number;
  /** Registry format ('q4_k', 'nf4', ...) for quantized tensors, else the stored dtype ('F32', 'BF16', ...). */
  format: string;
  quantized: boolean;
  /** Resolved quantization options (quantized tensors). */
  options?: ResolvedOptions;
  /** Bytes this tensor occupies in the source (all sections). */
  byteLength: number;
  /**
   * A GGUF weight's `<m>.scale` (F32, one value, or one per expert of a stack): every result is the
   * stored weight's times it, as llama.cpp's graph multiplies the product (NVFP4 conversions of
   * ModelOpt checkpoints, BitNet).
   */
  scale?: string;
}

/** A tensor's bytes in memory, one array per layout section (one for unquantized tensors). */
export interface LoadedTensor {
  readonly info: ServedTensorInfo;
  readonly sections: readonly Uint8Array[];
  readonly bytes: number;
  /** y = W x, synchronous (the bytes are in memory). */
  matvec(x: Float32Array): Float32Array;
  /** Y[b] = W X[b] for `batch` vectors of rowLength values (row-major X), Y is [batch, rows]. */
  matmul(X: Float32Array, batch: number): Float32Array;
  dequantize(): Float32Array;
  /**
   * Rows [first, first + count) as a tensor of their own, over views of these bytes (one expert of
   * a GGUF MoE layer's stack); whole-tensor sections (a per-tensor scale, double quantization's
   * groups) are shared, and the kernels are told where the rows lie in the tensor.
   */
  rows(first: number, count: number): LoadedTensor;
}

export interface ServedTensor {
  readonly info: ServedTensorInfo;
  /** Reads the tensor (or takes it from the cache). */
  load(): Promise<LoadedTensor>;
  dequantize(): Promise<Float32Array>;
  /** Dequantized values rounded to IEEE half (round to nearest even). */
  dequantizeF16(): Promise<Uint16Array>;
  matvec(x: Float32Array): Promise<Float32Array>;
  matmul(X: Float32Array, batch: number): Promise<Float32Array>;
}

export interface CacheStats {
  bytes: number;
  capBytes: number;
  entries: number;
  hits: number;
  misses: number;
  evictions: number;
  /** The persistent cache, when `persistentCache` was given. */
  persistent?: PersistentCacheStats;
}

export interface QuantizedModel {
  readonly checkpoint: Checkpoint;
  /** The servable tensors (section tensors of a webquant safetensors are folded into their tensor). */
  readonly tensors: readonly ServedTensorInfo[];
  readonly build: WasmBuild;
  has(name: string): boolean;
  tensor(name: string): ServedTensor;
  cacheStats(): CacheStats;
  /** Drops every tensor cached in memory (the persistent cache keeps its entries). */
  clearCache(): void;
  /** Resolves once every tensor read so far is written to the persistent cache (if any). */
  flush(): Promise<void>;
}
