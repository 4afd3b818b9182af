// GGUF block types: byte-identical with llama.cpp's reference quantizer (shared/spec §0.5).
// One entry per type; the wasm exports <name>_quantize/_dequantize and <NAME>_BLOCK/_BYTES.
import type { FormatSpec } from './types.js';

function gguf(name: string, type: number, blockSize: number, typeSize: number, importance: boolean, description: string): FormatSpec {
  return {
    name,
    family: 'gguf',
    description,
    kernel: name,
    ggml: { type, blockSize, typeSize },
    blockSize: () => blockSize,
    calibrations: ['default'],
    importance,
    rowSections: (rowLen) => [{ name: 'data', bytes: (rowLen / blockSize) * typeSize }],
  };
}

export const ggufFormats: FormatSpec[] = [
  gguf('q8_0', 8, 32, 34, false, '8-bit, fp16 scale per 32 (8.5 bpw)'),
  gguf('q4_0', 2, 32, 18, true, '4-bit symmetric, fp16 scale per 32 (4.5 bpw)'),
];
