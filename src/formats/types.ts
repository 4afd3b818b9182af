// What the registry knows about a format. The wasm kernels are the implementation; this is the
// policy around them (which options and calibrations exist, how the output is laid out).
import type { CalibrationName, KernelArgs } from '../kernels/args.js';
import type { Kernels } from '../kernels/loader.js';

export type FormatFamily = 'gguf' | 'float' | 'bnb' | 'fp8' | 'mx' | 'int';

/** Options after defaults were applied and validation passed. */
export interface ResolvedOptions {
  groupSize: number;
  bits: number;
  calibration: { method: CalibrationName; ratio?: number; percentile?: number; scale?: number; max?: number; iterations?: number };
  /** Scale granularity for the integer and FP8 formats. */
  granularity: 'tensor' | 'channel' | 'group';
  doubleQuant: boolean;
  /** Storage dtype of the scales and biases of formats that offer a choice (mlx). */
  scaleDtype?: ScaleDtype;
  /** Static input activation scale, stored as a tensor section (formats with FormatSpec.inputScale). */
  inputScale?: number;
}

export type ScaleDtype = 'f16' | 'bf16' | 'f32';

/** A named part of the output. Row sections are stored rows back to back, sections one after another. */
export interface Section {
  name: string;
  /** Bytes per row (row sections) or in all (tensor sections). */
  bytes: number;
  /**
   * Tensor sections only: the bytes depend on no value, only on the tensor's shape, the input's
   * dtype and the options (bitsandbytes' code book and quant state); FormatSpec.constantBytes
   * gives them. A layout whose tensor sections are all constant can still be cut into row chunks.
   */
  constant?: boolean;
}

/** What a constant tensor section's bytes may depend on. */
export interface ConstantContext {
  nrows: number;
  rowLen: number;
  opts: ResolvedOptions;
  dtype: 'f32' | 'f16' | 'bf16';
}

export interface TensorContext {
  kernels: Kernels;
  nrows: number;
  rowLen: number;
  opts: ResolvedOptions;
  /**
   * Runs the reduction kernel `name(src, srcType, nrows, rowLen, out, args)` over every chunk of
   * the input; `out` (outBytes, zeroed unless init says otherwise) persists between chunks.
   */
  reduce(name: string, outBytes: number, init?: (out: DataView) => void): Promise<DataView>;
  /** The per-tensor scale the caller gives (formats with sharedScale), instead of this tensor's own. */
  tensorScale?: number;
  /** The input's element type. */
  dtype?: 'f32' | 'f16' | 'bf16';
}

export interface FormatSpec {
  readonly name: string;
  readonly family: FormatFamily;
  readonly description: string;
  /** Prefix of the wasm exports `<kernel>_quantize` and `<kernel>_dequantize`. */
  readonly kernel: string;
  /** Row lengths must be a multiple of this (after options). */
  blockSize(o: ResolvedOptions): number;
  /** GGUF type id and block geometry, for formats a GGUF file can hold. */
  /** The ggml type it writes; `name` when the GGUF type name is not the format name (mxfp4_gguf). */
  readonly ggml?: { type: number; blockSize: number; typeSize: number; name?: string };
  /** The GGUF format a refusal of this one for GGUF names (mxfp4 -> mxfp4_gguf, nvfp4 -> nvfp4_gguf). */
  readonly ggufTwin?: string;
  /** Accepted calibrations; the first is the default. */
  readonly calibrations: readonly CalibrationName[];
  /** Whether per-column importance weights change the result. */
  readonly importance: boolean;
  /** Importance weights are required (llama.cpp's quantizer asserts an importance matrix). */
  readonly requiresImportance?: boolean;
  /**
   * A plan needs an importance matrix for tensors in this format other than token_embd / output,
   * as llama-quantize refuses them without one (tensor_requires_imatrix), though the quantizer
   * itself works without: IQ3_XXS, IQ2_S, IQ1_M. (Plans need one for requiresImportance formats
   * on every tensor.)
   */
  readonly planRequiresImportance?: boolean;
  /**
   * Largest input magnitude accepted (exclusive): the IQ2 / IQ3 searches square values and their
   * weights in fp32, and llama.cpp aborts where those overflow. Larger values are refused.
   */
  readonly maxAbs?: number;
  readonly bits?: readonly number[];
  readonly groupSizes?: readonly number[];
  readonly granularities?: readonly ResolvedOptions['granularity'][];
  readonly doubleQuant?: boolean;
  /** Whether it stores an input activation scale when given one (FormatOptions.inputScale). */
  readonly inputScale?: boolean;
  /** Scale dtypes it can store; the first is the default. */
  readonly scaleDtypes?: readonly ScaleDtype[];
  /** Defaults for the options above. */
  readonly defaults?: Partial<Pick<ResolvedOptions, 'bits' | 'groupSize' | 'granularity'>>;
  /**
   * How a safetensors output stores each section (by section name) when not as a U8 entry
   * `<name>.<section>`: a name from the tensor's name, a dtype of the same width and a shape from
   * the tensor's shape (NVFP4, MLX and bitsandbytes use the names and dtypes their runtimes load).
   * The first section keeps the tensor's name.
   */
  readonly safetensorsEntries?: Readonly<Record<string, SafetensorsEntry>>;
  /** Sections written per row, in storage order. */
  rowSections(rowLen: number, o: ResolvedOptions): Section[];
  /** Sections written once per tensor after the row sections (filled by prepare/finish, or constant). */
  tensorSections?(nrows: number, rowLen: number, o: ResolvedOptions): Section[];
  /** The bytes of a tensor section marked constant (see Section.constant). */
  constantBytes?(section: string, t: ConstantContext): Uint8Array;
  /**
   * A per-tensor scale that tensors can share (QuantizeOptions.tensorScale): its value for a
   * tensor of absolute maximum `amax`, monotone in amax, so that a group's scale is the scale of
   * its largest amax. prepare() takes TensorContext.tensorScale when given.
   */
  readonly sharedScale?: { of(amax: number): number };
  /**
   * Tensor-level calibration before the row kernels run; returns extra kernel args. It (and
   * finish) may only change the bytes where the layout has tensor sections that are not constant:
   * a layout without such sections is cut into row chunks, each quantized by its own call (the
   * pipeline, quantizeFrom's output by rows), and the registry test checks that such chunks give
   * the bytes of the whole. Its result must be structured-cloneable: the pipeline computes it
   * once in a worker (QuantizeOptions.prepareOnly) and hands it to every slice of the tensor.
   */
  prepare?(ctx: TensorContext): Promise<PreparedArgs>;
  /**
   * Kernel args that stored bytes keep in their tensor sections, for dequantize and matvec (the
   * double-quantization offset of nf4 / fp4, in bnb_nf4 / bnb_fp4 written in the JSON quant
   * state), given a reader of those sections by name.
   */
  storedArgs?(section: (name: string) => Uint8Array, o: ResolvedOptions): Partial<KernelArgs>;
  /** Sections that record the input's dtype (bitsandbytes' quant state): the only bytes two dtypes of the same values change. */
  readonly dtypeSections?: readonly string[];
  /** Post-processing over the whole output (e.g. double quantization of block scales). */
  finish?(ctx: TensorContext, data: Uint8Array, layout: Layout, tensorArgs: Partial<KernelArgs>): void;
}

/**
 * The module of a weight name (`a.b.weight` -> `a.b`): runtimes hang a quantized weight's
 * companions off it (MLX's .scales and .biases, bitsandbytes' SCB and weight_format).
 */
export function moduleName(name: string): string {
  return name.endsWith('.weight') ? name.slice(0, -'.weight'.length) : name;
}

export interface SafetensorsEntry {
  name(tensor: string): string;
  dtype(o: ResolvedOptions): string;
  shape(shape: number[], o: ResolvedOptions): number[];
}

/** What prepare() gives the kernels: args, and bytes they read at the start of aux. */
export type PreparedArgs = Partial<KernelArgs> & {
  /** Copied to aux (where the tensor sections are assembled) before the row kernels run. */
  auxInit?: Uint8Array;
};

export interface Layout {
  bytes: number;
  sections: { name: string; offset: number; bytes: number; perRow: number; constant?: boolean }[];
}

/**
 * Whether rows quantized in separate calls give the whole tensor's bytes: every tensor section
 * is constant (written once by whoever assembles the rows, from FormatSpec.constantBytes).
 */
export function cutsByRows(layout: Layout): boolean {
  return layout.sections.every((s) => s.perRow > 0 || s.constant);
}

/** The tensor sections of a layout alone, from offset 0 (what a result handed over by rows keeps). */
export function tensorSectionsOf(layout: Layout): Layout {
  const secs = layout.sections.filter((s) => s.perRow === 0);
  const start = secs.length ? secs[0].offset : layout.bytes;
  return { bytes: layout.bytes - start, sections: secs.map((s) => ({ ...s, offset: s.offset - start })) };
}

/** The constant tensor sections' bytes, by section index. */
export function constantSections(spec: FormatSpec, layout: Layout, t: ConstantContext): Map<number, Uint8Array> {
  const out = new Map<number, Uint8Array>();
  // The registry test checks that each has its section's length.
  layout.sections.forEach((s, i) => { if (s.constant) out.set(i, spec.constantBytes!(s.name, t)); });
  return out;
}

/**
 * The row sections of `nrows` rows, then the tensor sections of a tensor of `tensorRows` rows (a
 * slice of a larger tensor, QuantizeOptions.slice, carries the whole tensor's).
 */
export function layoutOf(spec: FormatSpec, nrows: number, rowLen: number, o: ResolvedOptions, tensorRows = nrows): Layout {
  const sections: Layout['sections'] = [];
  let offset = 0;
  for (const s of spec.rowSections(rowLen, o)) {
    sections.push({ name: s.name, offset, bytes: s.bytes * nrows, perRow: s.bytes });
    offset += s.bytes * nrows;
  }
  for (const s of spec.tensorSections?.(tensorRows, rowLen, o) ?? []) {
    sections.push({ name: s.name, offset, bytes: s.bytes, perRow: 0, ...(s.constant ? { constant: true } : {}) });
    offset += s.bytes;
  }
  return { bytes: offset, sections };
}
