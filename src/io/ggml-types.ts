// ggml tensor types as GGUF files store them (shared/spec §17): id, name, block geometry.
// The registry (src/formats) knows the types webquant can quantize; this table knows every type
// a file may hold, so that tensors of types without a kernel can still be listed and copied raw.
// (Q1_0 and Q2_0, types 41 and 42, are in the geometry a September 2026 llama.cpp release reports
// through ggml_blck_size / ggml_type_size: listed and copied, not decoded.)

export interface GgmlType {
  id: number;
  name: string;
  blockSize: number;
  typeSize: number;
}

const TYPES: [number, string, number, number][] = [
  [0, 'F32', 1, 4], [1, 'F16', 1, 2], [2, 'Q4_0', 32, 18], [3, 'Q4_1', 32, 20],
  [6, 'Q5_0', 32, 22], [7, 'Q5_1', 32, 24], [8, 'Q8_0', 32, 34], [9, 'Q8_1', 32, 36],
  [10, 'Q2_K', 256, 84], [11, 'Q3_K', 256, 110], [12, 'Q4_K', 256, 144], [13, 'Q5_K', 256, 176],
  [14, 'Q6_K', 256, 210], [15, 'Q8_K', 256, 292], [16, 'IQ2_XXS', 256, 66], [17, 'IQ2_XS', 256, 74],
  [18, 'IQ3_XXS', 256, 98], [19, 'IQ1_S', 256, 50], [20, 'IQ4_NL', 32, 18], [21, 'IQ3_S', 256, 110],
  [22, 'IQ2_S', 256, 82], [23, 'IQ4_XS', 256, 136], [24, 'I8', 1, 1], [25, 'I16', 1, 2],
  [26, 'I32', 1, 4], [27, 'I64', 1, 8], [28, 'F64', 1, 8], [29, 'IQ1_M', 256, 56],
  [30, 'BF16', 1, 2], [34, 'TQ1_0', 256, 54], [35, 'TQ2_0', 256, 66], [39, 'MXFP4', 32, 17],
  [40, 'NVFP4', 64, 36], [41, 'Q1_0', 128, 18], [42, 'Q2_0', 64, 18],
];

export const GGML_TYPES: ReadonlyMap<number, GgmlType> = new Map(
  TYPES.map(([id, name, blockSize, typeSize]) => [id, Object.freeze({ id, name, blockSize, typeSize })]),
);

const BY_NAME = new Map([...GGML_TYPES.values()].map((t) => [t.name, t]));

/** By name ('Q4_K', case-insensitive) or id; undefined if unknown. */
export function ggmlType(t: string | number): GgmlType | undefined {
  return typeof t === 'number' ? GGML_TYPES.get(t) : BY_NAME.get(String(t).toUpperCase());
}

/** A ggml block type (Q4_K, IQ4_NL, MXFP4, ...): stored values a quantizer wrote, by name, any case. */
export function isGgmlBlockType(dtype: string): boolean {
  return (ggmlType(dtype)?.blockSize ?? 1) > 1;
}

/** Bytes of a tensor of `numel` elements with rows of `rowLen` (a multiple of the block). */
export function ggmlBytes(t: GgmlType, numel: number): number {
  return (numel / t.blockSize) * t.typeSize;
}
