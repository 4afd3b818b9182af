// Which formats and options have WebGPU kernels, and how a chunk of rows maps onto them.
import type { ResolvedOptions } from '../formats/types.js';
import { BYTE_OUT_WGSL, COMMON_WGSL, F32_OUT_WGSL } from './shaders/common.js';
import { Q8_0_DEQUANT, Q8_0_QUANT } from './shaders/q8_0.js';
import { Q4_0_DEQUANT, Q4_0_QUANT } from './shaders/q4_0.js';
import { Q4_1_DEQUANT, Q4_1_QUANT } from './shaders/q4_1.js';
import { Q5_0_DEQUANT, Q5_0_QUANT } from './shaders/q5_0.js';
import { Q5_1_DEQUANT, Q5_1_QUANT } from './shaders/q5_1.js';
import { Q2_K_DEQUANT, Q2_K_QUANT } from './shaders/q2_k.js';
import { Q3_K_DEQUANT, Q3_K_QUANT } from './shaders/q3_k.js';
import { Q4_K_DEQUANT, Q4_K_QUANT } from './shaders/q4_k.js';
import { Q5_K_DEQUANT, Q5_K_QUANT } from './shaders/q5_k.js';
import { Q6_K_DEQUANT, Q6_K_QUANT } from './shaders/q6_k.js';
import { IQ4_NL_DEQUANT, IQ4_NL_QUANT } from './shaders/iq4_nl.js';
import { IQ4_XS_DEQUANT, IQ4_XS_QUANT } from './shaders/iq4_xs.js';
import { NF4_DEQUANT, NF4_QUANT } from './shaders/nf4.js';
import { INT8_DEQUANT, INT8_QUANT } from './shaders/int8.js';
import { AFFINE4_DEQUANT, AFFINE4_QUANT } from './shaders/affine4.js';
import { FP8_E4M3_DEQUANT, FP8_E4M3_QUANT } from './shaders/fp8_e4m3.js';
import { NVFP4_GGUF_DEQUANT, NVFP4_GGUF_QUANT } from './shaders/nvfp4_gguf.js';
import { MXFP4_DEQUANT, MXFP4_QUANT } from './shaders/mxfp4.js';
import { MXFP4_GGUF_DEQUANT, MXFP4_GGUF_QUANT } from './shaders/mxfp4_gguf.js';

/**
 * How work is split: 'block' = one invocation per block of `elems` values, 'elem' = one per
 * value, 'row' = one workgroup of 64 per row.
 */
export type Grid = { by: 'block'; elems: (o: ResolvedOptions) => number } | { by: 'elem' } | { by: 'row' };

export interface GpuKernel {
  /** WGSL body (without the common part). */
  body: string;
  grid: Grid;
  /** Pipeline-overridable constants of the WGSL (`override` declarations). */
  constants?: Record<string, number>;
  /**
   * Every quantizer here gives the wasm bytes (test/webgpu/parity.test.ts); one that does not must
   * say so here, which keeps it out of the pipeline's GPU lane (src/pipeline/gpu-lane.ts).
   */
  inexact?: boolean;
  /** With importances: each chunk row's sum(x^2)/rowLen follows them in src (Q4_0..Q5_1's searches). */
  rowSigma2?: boolean;
}

export interface GpuFormat {
  dequant?: GpuKernel;
  quant?: GpuKernel;
  /** The quantizer given per-column importances (at src word P.aux); without one, `quant` ignores them. */
  quantImportance?: GpuKernel;
  /** Why these options have no dequantize kernel (undefined: they have one). */
  dequantUnsupported?(o: ResolvedOptions): string | undefined;
  quantUnsupported?(o: ResolvedOptions, importance: boolean): string | undefined;
}

const block = (n: number): Grid => ({ by: 'block', elems: () => n });
const searches = (body: string, n: number, rowSigma2 = false): Pick<GpuFormat, 'quant' | 'quantImportance'> => ({
  quant: { body, grid: block(n), constants: { IMP: 0 } },
  quantImportance: { body, grid: block(n), constants: { IMP: 1 }, ...(rowSigma2 ? { rowSigma2 } : {}) },
});
const group: Grid = { by: 'block', elems: (o) => o.groupSize };

const int8: GpuFormat = {
  dequant: { body: INT8_DEQUANT, grid: { by: 'elem' } },
  quant: { body: INT8_QUANT, grid: { by: 'row' } },
  dequantUnsupported: (o) => (o.bits !== 8 ? `its WebGPU dequantizer handles 8-bit codes only (bits ${o.bits})` : undefined),
  quantUnsupported: (o) =>
    o.bits !== 8 || o.granularity !== 'channel' || o.calibration.method !== 'absmax'
      ? `its WebGPU quantizer handles bits 8, granularity 'channel', calibration 'absmax' only (got bits ${o.bits}, ${o.granularity}, ${o.calibration.method})`
      : undefined,
};

export const GPU_FORMATS: Record<string, GpuFormat> = {
  q8_0: { dequant: { body: Q8_0_DEQUANT, grid: block(32) }, quant: { body: Q8_0_QUANT, grid: block(32) } },
  // The legacy types: the reference path, or with importances the QX (Q4_0, Q5_0) or QKX (Q4_1,
  // Q5_1) search per block, whose weights need the row's sum of squares.
  q4_0: { dequant: { body: Q4_0_DEQUANT, grid: block(32) }, ...searches(Q4_0_QUANT, 32, true) },
  q4_1: { dequant: { body: Q4_1_DEQUANT, grid: block(32) }, ...searches(Q4_1_QUANT, 32, true) },
  q5_0: { dequant: { body: Q5_0_DEQUANT, grid: block(32) }, ...searches(Q5_0_QUANT, 32, true) },
  q5_1: { dequant: { body: Q5_1_DEQUANT, grid: block(32) }, ...searches(Q5_1_QUANT, 32, true) },
  // The K-quant and IQ4 searches: one pipeline without importances, one with (IMP).
  q2_k: { dequant: { body: Q2_K_DEQUANT, grid: block(256) }, ...searches(Q2_K_QUANT, 256) },
  q3_k: { dequant: { body: Q3_K_DEQUANT, grid: block(256) }, ...searches(Q3_K_QUANT, 256) },
  q4_k: { dequant: { body: Q4_K_DEQUANT, grid: block(256) }, ...searches(Q4_K_QUANT, 256) },
  q5_k: { dequant: { body: Q5_K_DEQUANT, grid: block(256) }, ...searches(Q5_K_QUANT, 256) },
  q6_k: { dequant: { body: Q6_K_DEQUANT, grid: block(256) }, ...searches(Q6_K_QUANT, 256) },
  iq4_nl: { dequant: { body: IQ4_NL_DEQUANT, grid: block(32) }, ...searches(IQ4_NL_QUANT, 32) },
  iq4_xs: { dequant: { body: IQ4_XS_DEQUANT, grid: block(256) }, ...searches(IQ4_XS_QUANT, 256) },
  nvfp4_gguf: { dequant: { body: NVFP4_GGUF_DEQUANT, grid: block(64) }, quant: { body: NVFP4_GGUF_QUANT, grid: block(64) } },
  mxfp4: { dequant: { body: MXFP4_DEQUANT, grid: block(32) }, quant: { body: MXFP4_QUANT, grid: block(32) } },
  mxfp4_gguf: { dequant: { body: MXFP4_GGUF_DEQUANT, grid: block(32) }, quant: { body: MXFP4_GGUF_QUANT, grid: block(32) } },
  nf4: {
    dequant: { body: NF4_DEQUANT, grid: group },
    quant: { body: NF4_QUANT, grid: group },
    dequantUnsupported: (o) => (o.doubleQuant ? 'its WebGPU kernels do not handle double quantization' : undefined),
    quantUnsupported: (o) => (o.doubleQuant ? 'its WebGPU kernels do not handle double quantization' : undefined),
  },
  int8,
  intsym: int8,
  affine: {
    dequant: { body: AFFINE4_DEQUANT, grid: group },
    quant: { body: AFFINE4_QUANT, grid: group },
    dequantUnsupported: (o) => (o.bits !== 4 ? `its WebGPU kernels handle 4-bit codes only (bits ${o.bits})` : undefined),
    quantUnsupported: (o) =>
      o.bits !== 4 || o.calibration.method !== 'minmax'
        ? `its WebGPU quantizer handles bits 4 with calibration 'minmax' only (got bits ${o.bits}, ${o.calibration.method})`
        : undefined,
  },
  fp8_e4m3: {
    dequant: { body: FP8_E4M3_DEQUANT, grid: { by: 'elem' } },
    quant: { body: FP8_E4M3_QUANT, grid: { by: 'row' } },
    quantUnsupported: (o) => (o.granularity !== 'channel' ? "its WebGPU quantizer handles granularity 'channel' only" : undefined),
  },
};

/** Why `format` with these options cannot be dequantized / quantized on WebGPU, or undefined. */
export function gpuUnsupported(format: string, o: ResolvedOptions, op: 'quantize' | 'dequantize', importance = false): string | undefined {
  const f = GPU_FORMATS[format];
  const k = f && (op === 'quantize' ? f.quant : f.dequant);
  if (!f || !k) return `format ${format} has no WebGPU ${op} kernel`;
  const why = op === 'quantize' ? f.quantUnsupported?.(o, importance) : f.dequantUnsupported?.(o);
  return why ? `format ${format}: ${why}` : undefined;
}

/** The quantizer that runs: the importance variant when importances are given and it exists. */
export function quantKernel(f: GpuFormat, importance: boolean): GpuKernel | undefined {
  return (importance && f.quantImportance) || f.quant;
}

/** Full WGSL source of a kernel. */
export function shaderSource(k: GpuKernel, op: 'quantize' | 'dequantize'): string {
  return COMMON_WGSL + (op === 'quantize' ? BYTE_OUT_WGSL : F32_OUT_WGSL) + k.body;
}

/** Every shader, for compile checks and the benchmark. */
export function allShaders(): { name: string; op: 'quantize' | 'dequantize'; source: string; constants?: Record<string, number> }[] {
  const out: ReturnType<typeof allShaders> = [];
  for (const [name, f] of Object.entries(GPU_FORMATS)) {
    if (name === 'intsym') continue;
    if (f.dequant) out.push({ name, op: 'dequantize', source: shaderSource(f.dequant, 'dequantize') });
    if (f.quant) out.push({ name, op: 'quantize', source: shaderSource(f.quant, 'quantize'), constants: f.quant.constants });
    if (f.quantImportance) out.push({ name: `${name} importance`, op: 'quantize', source: shaderSource(f.quantImportance, 'quantize'), constants: f.quantImportance.constants });
  }
  return out;
}
