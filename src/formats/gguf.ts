// GGUF block types: byte-identical with llama.cpp's reference quantizer (shared/spec §0.5).
// One entry per type; the wasm exports <name>_quantize/_dequantize and <NAME>_BLOCK/_BYTES.
import type { FormatSpec } from './types.js';

/** `typeName`: the ggml type's name when it is not the format's. */
function gguf(name: string, type: number, blockSize: number, typeSize: number, importance: boolean, description: string, typeName?: string, extra: Partial<FormatSpec> = {}): FormatSpec {
  return {
    ...extra,
    name,
    family: 'gguf',
    description,
    kernel: name,
    ggml: { type, blockSize, typeSize, ...(typeName ? { name: typeName } : {}) },
    blockSize: () => blockSize,
    calibrations: ['default'],
    importance,
    rowSections: (rowLen) => [{ name: 'data', bytes: (rowLen / blockSize) * typeSize }],
  };
}

/**
 * The IQ2 / IQ3 searches weigh squared errors by x^2 (or by importance * sqrt(sigma2 + x^2)) in
 * fp32: from about |x| = 2^45 (2^52 with an imatrix) every candidate's score overflows and
 * llama.cpp aborts (GGML_ASSERT(grid_index >= 0), measured on the release build). Values at or
 * above 2^40 are refused instead. IQ1's search survives any finite value.
 */
const IQ_MAX_ABS = 2 ** 40;

export const ggufFormats: FormatSpec[] = [
  gguf('q8_0', 8, 32, 34, false, '8-bit, fp16 scale per 32 (8.5 bpw)'),
  gguf('q4_0', 2, 32, 18, true, '4-bit symmetric, fp16 scale per 32 (4.5 bpw)'),
  gguf('q2_k', 10, 256, 84, true, '2-bit K-quant, 16 x 16 sub-blocks with 4-bit scale and min (2.625 bpw)'),
  gguf('q3_k', 11, 256, 110, true, '3-bit K-quant, 16 x 16 sub-blocks with 6-bit scales (3.4375 bpw)'),
  gguf('q4_k', 12, 256, 144, true, '4-bit K-quant, 8 x 32 sub-blocks with 6-bit scale and min (4.5 bpw)'),
  gguf('q5_k', 13, 256, 176, true, '5-bit K-quant, 8 x 32 sub-blocks with 6-bit scale and min (5.5 bpw)'),
  gguf('q6_k', 14, 256, 210, true, '6-bit K-quant, 16 x 16 sub-blocks with 8-bit scales (6.5625 bpw)'),
  gguf('q4_1', 3, 32, 20, true, '4-bit asymmetric, fp16 scale and min per 32 (5.0 bpw)'),
  gguf('q5_0', 6, 32, 22, true, '5-bit symmetric, fp16 scale per 32 (5.5 bpw)'),
  gguf('q5_1', 7, 32, 24, true, '5-bit asymmetric, fp16 scale and min per 32 (6.0 bpw)'),
  gguf('iq4_nl', 20, 32, 18, true, '4-bit non-linear grid, fp16 scale per 32 (4.5 bpw)'),
  gguf('iq4_xs', 23, 256, 136, true, '4-bit non-linear grid, 8 x 32 sub-blocks with 6-bit scales (4.25 bpw)'),
  gguf('iq3_xxs', 18, 256, 98, true, '3-bit grid of 4-value vectors (256 entries) (3.0625 bpw)', undefined, { maxAbs: IQ_MAX_ABS, planRequiresImportance: true }),
  gguf('iq3_s', 21, 256, 110, true, '3-bit grid of 4-value vectors (512 entries), explicit signs (3.4375 bpw)', undefined, { maxAbs: IQ_MAX_ABS }),
  gguf('iq2_xxs', 16, 256, 66, true, '2-bit grid of 8-value vectors (256 entries), sign bits with even parity (2.0625 bpw)', undefined, { requiresImportance: true, maxAbs: IQ_MAX_ABS }),
  gguf('iq2_xs', 17, 256, 74, true, '2-bit grid of 8-value vectors (512 entries), 4-bit scale per 16 (2.3125 bpw)', undefined, { requiresImportance: true, maxAbs: IQ_MAX_ABS }),
  gguf('iq2_s', 22, 256, 82, true, '2-bit grid of 8-value vectors (1024 entries), explicit signs (2.5625 bpw)', undefined, { maxAbs: IQ_MAX_ABS, planRequiresImportance: true }),
  gguf('iq1_s', 19, 256, 50, true, '1.5-bit grid of 8-value vectors (2048 entries) with a +-1/8 offset per 32 (1.5625 bpw)', undefined, { requiresImportance: true }),
  gguf('iq1_m', 29, 256, 56, true, '1.75-bit grid of 8-value vectors (2048 entries), 3-bit scale per 16 (1.75 bpw)', undefined, { planRequiresImportance: true }),
  // Ternary (BitNet b1.58, TriLMs): codes -1, 0, 1 times the block's absmax.
  gguf('tq1_0', 34, 256, 54, false, 'ternary, five values per byte in base 3, fp16 scale per 256 (1.6875 bpw)'),
  gguf('tq2_0', 35, 256, 66, false, 'ternary, 2 bits per value, fp16 scale per 256 (2.0625 bpw)'),
  // Sign-only and 4-level blocks of a September 2026 llama.cpp (ids 41, 42; ftypes Q1_0 = 40, Q2_0 = 41).
  gguf('q1_0', 41, 128, 18, false, '1-bit signs, fp16 scale (mean |x|) per 128 (1.125 bpw)'),
  gguf('q2_0', 42, 64, 18, false, '2-bit codes -1, 0, 1, 2 times an fp16 scale (absmax) per 64 (2.25 bpw)'),
  gguf('f16', 1, 1, 2, false, 'IEEE half precision, round to nearest even (16 bpw)'),
  gguf('bf16', 30, 1, 2, false, 'bfloat16, round to nearest even (16 bpw)'),
  // GGUF's MXFP4 has the layout of OCP MXFP4 (the `mxfp4` format) but llama.cpp's rounding, hence its own name.
  gguf('mxfp4_gguf', 39, 32, 17, false, 'MXFP4 as GGUF type 39 (llama.cpp rounding): E2M1 values, E8M0 scale per 32 (4.25 bpw)', 'mxfp4'),
  // ggml's NVFP4 block: no per-tensor fp32 scale (ggml applies one outside the block, if any).
  gguf('nvfp4_gguf', 40, 64, 36, false, 'NVFP4 as GGUF type 40 (ggml reference rounding): E2M1 values, UE4M3 scale per 16 (4.5 bpw)', 'nvfp4'),
];
