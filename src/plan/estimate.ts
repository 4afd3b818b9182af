// Output size of a resolved plan, from the registry's own layout (layoutOf), so the byte count of
// every quantized tensor equals what quantize() returns for it.
import { getFormat as registryGetFormat } from '../formats/registry.js';
import { layoutOf, type FormatSpec } from '../formats/types.js';
import { ggmlType } from '../io/ggml-types.js';
import { FOLDED_DTYPES } from '../io/dtypes.js';
import type { Role } from './roles.js';
import type { ResolvedPlan } from './types.js';

/** Bytes per element of stored (kept) dtypes. */
const ELEM_BYTES: Record<string, number> = {
  f64: 8, float64: 8, f32: 4, float32: 4, f16: 2, float16: 2, bf16: 2, bfloat16: 2,
  f8_e4m3: 1, f8_e5m2: 1, f8_e4m3fn: 1, float8_e4m3fn: 1, float8_e5m2: 1, f4_e2m1: 0.5,
  i64: 8, u64: 8, int64: 8, uint64: 8, i32: 4, u32: 4, int32: 4, uint32: 4,
  i16: 2, u16: 2, int16: 2, uint16: 2, i8: 1, u8: 1, int8: 1, uint8: 1, bool: 1,
};

export interface SizeBucket {
  tensors: number;
  params: number;
  bytes: number;
  /** bits per weight = 8 * bytes / params */
  bpw: number;
}

export interface SizeEstimate {
  /** Tensor data bytes of the output (GGUF alignment padding and headers not included). */
  bytes: number;
  /** Bytes of the source tensors as stored. */
  inputBytes: number;
  params: number;
  bpw: number;
  /** Only the tensors the plan quantizes. */
  quantized: SizeBucket;
  kept: SizeBucket;
  byRole: Partial<Record<Role, SizeBucket>>;
  /** By output format ('keep:F32' for kept tensors). */
  byFormat: Record<string, SizeBucket>;
  /** Per tensor, in input order. */
  perTensor: { name: string; bytes: number; format: string }[];
  /** Tensors whose size is unknown (unknown dtype, or an error entry); counted as 0 bytes. */
  unknown: string[];
  /** False when `unknown` is not empty. */
  exact: boolean;
}

/** Stored size of a tensor kept as it is. GGUF-quantized dtypes use the registry's block geometry. */
export function storedBytes(dtype: string, params: number, rowLength: number, lookup: (name: string) => FormatSpec = registryGetFormat): number | undefined {
  const d = dtype.toLowerCase();
  if (d in ELEM_BYTES) return params * ELEM_BYTES[d];
  try {
    const g = lookup(d).ggml;
    if (g && rowLength % g.blockSize === 0) return (params / g.blockSize) * g.typeSize;
  } catch {
    // not a format the registry knows
  }
  // A GGUF type webquant has no kernel for (IQ2_XXS, NVFP4, ...) still has a known block geometry.
  const t = ggmlType(d);
  if (t && t.blockSize > 1 && rowLength % t.blockSize === 0) return (params / t.blockSize) * t.typeSize;
  return undefined;
}

function bucket(): SizeBucket {
  return { tensors: 0, params: 0, bytes: 0, bpw: 0 };
}

function add(b: SizeBucket, params: number, bytes: number): void {
  b.tensors++;
  b.params += params;
  b.bytes += bytes;
}

function finish(b: SizeBucket): SizeBucket {
  b.bpw = b.params ? (8 * b.bytes) / b.params : 0;
  return b;
}

export function estimatePlan(r: ResolvedPlan, opts: { getFormat?: (name: string) => FormatSpec } = {}): SizeEstimate {
  const lookup = opts.getFormat ?? registryGetFormat;
  const est: SizeEstimate = {
    bytes: 0, inputBytes: 0, params: 0, bpw: 0, quantized: bucket(), kept: bucket(), byRole: {}, byFormat: {}, perTensor: [], unknown: [], exact: true,
  };
  for (const t of r.tensors) {
    const input = storedBytes(t.dtype, t.params, t.rowLength, lookup);
    let bytes: number | undefined;
    let format: string;
    if (t.scheme === 'keep') {
      // A folded MLX / bitsandbytes weight is kept as its F32 values (pipeline/jobs.ts).
      bytes = FOLDED_DTYPES.has(t.dtype) ? t.params * 4 : input;
      format = `keep:${t.dtype}`;
    } else {
      format = t.scheme.format;
      if (t.options && !t.error) {
        try {
          bytes = layoutOf(lookup(t.scheme.format), t.rows, t.rowLength, t.options).bytes;
        } catch {
          bytes = undefined;
        }
      }
    }
    if (input !== undefined) est.inputBytes += input;
    if (bytes === undefined) {
      est.unknown.push(t.name);
      bytes = 0;
    }
    est.perTensor.push({ name: t.name, bytes, format });
    est.bytes += bytes;
    est.params += t.params;
    add(t.scheme === 'keep' ? est.kept : est.quantized, t.params, bytes);
    add((est.byRole[t.role] ??= bucket()), t.params, bytes);
    add((est.byFormat[format] ??= bucket()), t.params, bytes);
  }
  est.bpw = est.params ? (8 * est.bytes) / est.params : 0;
  finish(est.quantized);
  finish(est.kept);
  for (const b of Object.values(est.byRole)) finish(b!);
  for (const b of Object.values(est.byFormat)) finish(b);
  est.exact = est.unknown.length === 0;
  return est;
}
