// Public tensor API: quantize / dequantize through the wasm kernels, in chunks of whole rows so
// that tensors larger than one wasm memory work and memory stays bounded.
import { CALIBRATIONS, FLAGS, SrcType, setRow0, writeArgs, ARGS_BYTES, type DType, type KernelArgs } from './kernels/args.js';
import { loadKernels, type Kernels, type WasmBuild } from './kernels/loader.js';
import { ErrorCodes, fail } from './errors.js';
import { formats, getFormat } from './formats/registry.js';
import { constantSections, cutsByRows, layoutOf, tensorSectionsOf, type FormatSpec, type Layout, type PreparedArgs, type ResolvedOptions, type TensorContext } from './formats/types.js';
import { resolveOptions, type FormatOptions } from './options.js';
import { finishMetrics, newMetricsAccumulator, type ErrorMetrics } from './metrics.js';
import type { GpuResult } from './webgpu/index.js';
import { bf16ToF32 } from './util/half.js';

// The WebGPU backend (its shaders and runner) is loaded when quantize() or dequantize() first asks
// for it: pool workers call quantizeFrom only, and loading it cost each worker ~13 ms of start-up.
let webgpu: Promise<typeof import('./webgpu/index.js')> | undefined;
const gpuModule = () => (webgpu ??= import('./webgpu/index.js'));

export type Backend = 'auto' | WasmBuild;
/** Backends of quantize / dequantize: the wasm builds, or the WebGPU kernels (src/webgpu). */
export type TensorBackend = Backend | 'webgpu';
export type TensorValues = Float32Array | Uint16Array;

export interface QuantizeOptions extends FormatOptions {
  rowLength: number;
  /** Element type of `values`: 'f32' for a Float32Array (default), 'f16' or 'bf16' for a Uint16Array. */
  dtype?: DType;
  /** Per-column importance weights (rowLength values), as llama-quantize's --imatrix uses. */
  importance?: Float32Array;
  /** Compute RMSE / max error / SQNR / cosine against the input (one extra in-cache pass). */
  metrics?: boolean;
  backend?: TensorBackend;
  /** Let 'auto' pick WebGPU when a real (not CPU-emulated) GPU is present (src/webgpu/backend.ts). */
  preferGpu?: boolean;
  /** Tensor name, used in error messages. */
  name?: string;
  /** Rows per kernel call are chosen so that one chunk of input is at most this many bytes. */
  chunkBytes?: number;
  /**
   * The per-tensor scale, given instead of computed from this tensor (formats with `sharedScale`:
   * nvfp4's scale_2), so that tensors a runtime fuses into one matrix can share it.
   */
  tensorScale?: number;
  /**
   * Runs only the tensor-level calibration (the format's prepare step: per-tensor scales, double
   * quantization's groups) and returns it as `prepared`, with empty data: the `slice.prepared` of
   * every slice of this tensor.
   */
  prepareOnly?: boolean;
  /**
   * The values are rows `row0`.. of a tensor of `rows` rows, quantized as that tensor's rows are:
   * its calibration comes from `prepared` (a prepareOnly call over the whole tensor; required
   * where the layout has tensor sections computed from the values), double quantization's groups
   * follow the whole tensor's rows, and errors name its rows. The result holds this slice's row
   * sections, then the whole tensor's tensor sections (the same in every slice).
   */
  slice?: TensorSlice;
}

export interface TensorSlice {
  row0: number;
  rows: number;
  prepared?: PreparedArgs;
}

export interface QuantizedTensor {
  format: string;
  /** [rows, rowLength]. */
  shape: [number, number];
  /** For GGUF formats exactly the GGUF tensor bytes; otherwise the sections of `layout`. */
  data: Uint8Array;
  layout: Layout;
  options: ResolvedOptions;
  metrics?: ErrorMetrics;
  backend: WasmBuild | 'webgpu';
  /** The tensor-level calibration (QuantizeOptions.prepareOnly). */
  prepared?: PreparedArgs;
}

const DEFAULT_CHUNK = 1 << 20;

function srcTypeOf(values: TensorValues, dtype: DType | undefined, name: string): DType {
  if (values instanceof Float32Array) {
    if (dtype !== undefined && dtype !== 'f32') {
      fail(ErrorCodes.BAD_INPUT, `[quantize] ${name}: a Float32Array needs dtype "f32" but got "${dtype}"`, { tensor: name, option: 'dtype', value: dtype, expected: ['f32'] });
    }
    return 'f32';
  }
  if (values instanceof Uint16Array) {
    if (dtype !== 'f16' && dtype !== 'bf16') {
      fail(ErrorCodes.BAD_INPUT, `[quantize] ${name}: a Uint16Array needs dtype "f16" or "bf16" but got "${String(dtype)}"`, { tensor: name, option: 'dtype', value: dtype, expected: ['f16', 'bf16'] });
    }
    return dtype;
  }
  return fail(ErrorCodes.BAD_INPUT, `[quantize] ${name}: values must be a Float32Array or a Uint16Array`, { tensor: name, option: 'values', expected: ['Float32Array', 'Uint16Array'] });
}

/**
 * A slice's `prepared` as a prepareOnly call gives it: the tensor scale (and bias), and the
 * bytes that start the tensor sections. Anything else would reach the kernels' argument block
 * (pointers included) or write past the tensor sections.
 */
function checkPrepared(name: string, p: unknown, auxBytes: number): void {
  const bad = (why: string, value?: unknown) => fail(ErrorCodes.BAD_OPTION, `[quantize] ${name}: slice.prepared ${why}; pass the prepared of a prepareOnly call over the whole tensor`, {
    tensor: name, option: 'slice.prepared', value: typeof value === 'number' || typeof value === 'string' ? value : undefined, expected: '{ tscale, tbias?, auxInit? }',
  });
  if (typeof p !== 'object' || p === null) return bad(`must be an object but is ${p === null ? 'null' : typeof p}`);
  for (const k of Object.keys(p)) if (!['tscale', 'tbias', 'auxInit'].includes(k)) bad(`has an unknown field "${k}"`, k);
  const { tscale, tbias, auxInit } = p as PreparedArgs;
  if (typeof tscale !== 'number' || !Number.isFinite(tscale)) bad('needs tscale, a finite number', tscale);
  if (tbias !== undefined && (typeof tbias !== 'number' || !Number.isFinite(tbias))) bad('has a tbias that is not a finite number', tbias);
  if (auxInit !== undefined && (!(auxInit instanceof Uint8Array) || auxInit.byteLength > auxBytes)) bad(`has an auxInit that is not a Uint8Array of at most ${auxBytes} bytes`);
}

/** Validates shape and options; returns everything the kernels need. */
export function planTensor(values: TensorValues, opts: QuantizeOptions) {
  if (typeof opts !== 'object' || opts === null) {
    fail(ErrorCodes.BAD_OPTION, `[quantize] options must be an object ({ format, rowLength, ... }) but got ${opts === null ? 'null' : typeof opts}`, { option: 'options', expected: '{ format, rowLength }' });
  }
  const dtype = srcTypeOf(values, opts.dtype, opts.name ?? 'tensor');
  return planInput(values.length, dtype, opts);
}

/** planTensor for `length` elements of `dtype` that are not in a JS array (see ChunkSource). */
export function planInput(length: number, dtype: DType, opts: QuantizeOptions) {
  const name = opts.name ?? 'tensor';
  const spec = getFormat(opts.format);
  if (!Object.prototype.hasOwnProperty.call(SrcType, dtype)) {
    fail(ErrorCodes.BAD_INPUT, `[quantize] ${name}: dtype must be "f32", "f16" or "bf16" but got "${String(dtype)}"`, { tensor: name, option: 'dtype', value: dtype, expected: Object.keys(SrcType) });
  }
  const rowLen = opts.rowLength;
  if (!Number.isInteger(rowLen) || rowLen <= 0) {
    fail(ErrorCodes.ROW_LENGTH, `[quantize] ${name}: rowLength must be a positive integer but got ${rowLen}`, { tensor: name, option: 'rowLength', value: rowLen });
  }
  if (length % rowLen !== 0) {
    fail(ErrorCodes.ROW_LENGTH, `[quantize] ${name}: ${length} values are not a whole number of rows of ${rowLen}`, { tensor: name, option: 'rowLength', value: rowLen, expected: `a divisor of ${length}` });
  }
  const o = resolveOptions(spec, opts);
  const block = spec.blockSize(o);
  if (rowLen % block !== 0) {
    fail(ErrorCodes.ROW_LENGTH, `[quantize] ${name}: row length ${rowLen} is not a multiple of the ${spec.name} block size ${block}`, { tensor: name, option: 'rowLength', value: rowLen, expected: `a multiple of ${block}` });
  }
  if (opts.importance !== undefined) {
    const imp = opts.importance;
    if (!(imp instanceof Float32Array) || imp.length !== rowLen) {
      fail(ErrorCodes.IMPORTANCE_LENGTH, `[quantize] ${name}: importance must be a Float32Array of ${rowLen} values (one per column) but has ${(imp as Float32Array)?.length}`, {
        tensor: name, option: 'importance', value: (imp as Float32Array)?.length, expected: rowLen,
      });
    }
    for (let i = 0; i < imp.length; i++) {
      if (!Number.isFinite(imp[i]) || imp[i] < 0) {
        fail(ErrorCodes.NON_FINITE, `[quantize] ${name}: importance[${i}] is ${imp[i]}; importance values must be finite and >= 0`, { tensor: name, option: 'importance', index: i, value: imp[i] });
      }
    }
  }
  if (spec.requiresImportance && opts.importance === undefined) {
    fail(ErrorCodes.BAD_OPTION, `[quantize] ${name}: ${spec.name} needs importance weights (an importance matrix: \`webquant imatrix\`, or llama.cpp's imatrix file), as llama.cpp's quantizer does`, {
      tensor: name, option: 'importance', expected: `a Float32Array of ${rowLen} values`,
    });
  }
  if (opts.tensorScale !== undefined) {
    if (!spec.sharedScale) {
      fail(ErrorCodes.BAD_OPTION, `[quantize] ${name}: ${spec.name} takes no tensorScale (formats with a per-tensor scale to share: ${[...formats.values()].filter((f) => f.sharedScale).map((f) => f.name).join(', ')})`, { tensor: name, option: 'tensorScale', value: opts.tensorScale });
    }
    if (typeof opts.tensorScale !== 'number' || !Number.isFinite(opts.tensorScale) || opts.tensorScale < 0) {
      fail(ErrorCodes.BAD_OPTION, `[quantize] ${name}: tensorScale must be a finite number >= 0 but got ${opts.tensorScale}`, { tensor: name, option: 'tensorScale', value: opts.tensorScale, expected: '>= 0' });
    }
  }
  const nrows = length / rowLen;
  const slice = opts.slice;
  if (slice !== undefined) {
    if (!Number.isInteger(slice.rows) || !Number.isInteger(slice.row0) || slice.row0 < 0 || slice.row0 + nrows > slice.rows) {
      fail(ErrorCodes.BAD_OPTION, `[quantize] ${name}: slice rows ${slice.row0}..${slice.row0 + nrows} do not lie within a tensor of ${slice.rows} rows`, { tensor: name, option: 'slice', value: `${slice.row0}+${nrows}`, expected: `rows within 0..${slice.rows}` });
    }
    if (opts.prepareOnly) fail(ErrorCodes.BAD_OPTION, `[quantize] ${name}: prepareOnly runs over the whole tensor, not a slice`, { tensor: name, option: 'prepareOnly' });
  }
  const layout = layoutOf(spec, nrows, rowLen, o, slice?.rows);
  if (slice && !cutsByRows(layout)) {
    if (!slice.prepared) {
      fail(ErrorCodes.BAD_OPTION, `[quantize] ${name}: a slice of a ${spec.name} tensor with these options needs slice.prepared (its tensor-level calibration, from a prepareOnly call over the whole tensor)`, { tensor: name, option: 'slice.prepared', value: spec.name });
    }
    checkPrepared(name, slice.prepared, tensorSectionsOf(layout).bytes);
  }
  return { name, spec, dtype, rowLen, nrows, o, layout };
}

/**
 * The input of a kernel call when it is not a JS array: `copy` fills `dst` with the stored bytes
 * that start `byteOffset` bytes into the input (little-endian f32/f16/bf16, as in a file). The
 * pipeline's workers read file ranges this way straight into wasm memory, sparing a buffer, and
 * Blob ranges chunk by chunk (an asynchronous copy: the caller must keep other calls off the
 * same kernels until the promise settles, as `dst` is a view of their memory).
 */
export interface ChunkSource {
  /** Number of elements. */
  readonly length: number;
  readonly dtype: DType;
  copy(dst: Uint8Array, byteOffset: number): void | Promise<void>;
}

/** The kernels' FLAG_* bits of resolved options (quantize and dequantize alike). */
export function optionFlags(o: ResolvedOptions): number {
  let flags = 0;
  if (o.doubleQuant) flags |= FLAGS.doubleQuant;
  if (o.granularity === 'tensor') flags |= FLAGS.perTensor;
  if (o.granularity === 'channel') flags |= FLAGS.perChannel;
  if (o.scaleDtype === 'bf16') flags |= FLAGS.scaleBf16;
  if (o.scaleDtype === 'f32') flags |= FLAGS.scaleF32;
  return flags;
}

export function baseArgs(o: ResolvedOptions): KernelArgs {
  const c = o.calibration;
  return {
    group: o.groupSize,
    bits: o.bits,
    calib: CALIBRATIONS[c.method],
    p0: c.method === 'fixed' ? c.scale : c.method === 'clip' ? c.ratio : c.method === 'percentile' ? c.percentile : 0,
    p1: c.method === 'fixed' ? c.max : 0,
    iters: c.iterations ?? 0,
    flags: optionFlags(o),
  };
}

/** Memory map of one kernel call: [args][imatrix][scratch][input][sections...][dequant]. */
class Arena {
  args: number;
  imatrix: number;
  scratch: number;
  input: number;
  out: number[];
  deq: number;
  aux: number;
  /** The kernel args naming the 2nd and 3rd row sections (scales, biases; 0 when absent). */
  sectionArgs(): Pick<KernelArgs, 'scales' | 'biases'> {
    return { scales: this.out[1] ?? 0, biases: this.out[2] ?? 0 };
  }

  /** First byte after the arena, relative to heapBase (scratch for reductions goes here). */
  end: number;

  constructor(readonly k: Kernels, rowLen: number, rowsPerChunk: number, elemBytes: number, perRow: number[], auxBytes: number) {
    const align = (n: number) => (n + 15) & ~15;
    let at = 0;
    this.args = at; at += ARGS_BYTES;
    this.imatrix = at; at = align(at + rowLen * 4);
    this.scratch = at; at = align(at + 16 * rowLen + 65536);
    this.input = at; at = align(at + rowsPerChunk * rowLen * elemBytes);
    this.out = perRow.map((b) => { const p = at; at = align(at + b * rowsPerChunk); return p; });
    this.aux = at; at = align(at + auxBytes);
    this.deq = at; at = align(at + rowsPerChunk * rowLen * 4);
    this.end = at;
    const base = k.reserve(at);
    for (const key of ['args', 'imatrix', 'scratch', 'input', 'aux', 'deq'] as const) this[key] += base;
    this.out = this.out.map((p) => p + base);
  }
}

/** Refuses a chunkBytes option that is not an integer >= 1: NaN makes a row loop take no rows, and the output zeros. */
export function checkChunkBytes(chunkBytes: number | undefined, op: string): void {
  if (chunkBytes !== undefined && !(Number.isSafeInteger(chunkBytes) && chunkBytes >= 1)) {
    fail(ErrorCodes.BAD_OPTION, `[${op}] chunkBytes must be an integer >= 1 but got ${String(chunkBytes)}`, { option: 'chunkBytes', value: String(chunkBytes), expected: 'an integer >= 1' });
  }
}

function rowsPerChunk(rowLen: number, nrows: number, chunkBytes: number | undefined, op: 'quantize' | 'dequantize'): number {
  checkChunkBytes(chunkBytes, op);
  return Math.max(1, Math.min(nrows, Math.floor((chunkBytes ?? DEFAULT_CHUNK) / (rowLen * 4))));
}

function bytesOf(values: TensorValues): Uint8Array {
  return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
}

export async function quantize(values: TensorValues, opts: QuantizeOptions): Promise<QuantizedTensor> {
  const p = planTensor(values, opts);
  const gpu: GpuResult<QuantizedTensor> = await (await gpuModule()).maybeGpuQuantize(values, opts, p);
  if (gpu.ran) return gpu.value;
  const k = await loadKernels(gpu.build);
  return quantizeWith(k, values, opts, p);
}

/** Synchronous core once kernels are loaded (used by workers and the pipeline). */
export async function quantizeWith(k: Kernels, values: TensorValues, opts: QuantizeOptions, p = planTensor(values, opts)): Promise<QuantizedTensor & { backend: WasmBuild }> {
  const src = bytesOf(values);
  return quantizeFrom(k, { length: values.length, dtype: p.dtype, copy: (dst, at) => dst.set(src.subarray(at, at + dst.byteLength)) }, opts, p);
}

/**
 * Where row-section bytes go instead of the result's `data`, which then holds the tensor
 * sections only (laid out as tensorSectionsOf(layout) says; empty for rows-only layouts): `at` is
 * the byte offset within row section `section` (layout.sections[section]). The bytes are a view
 * of wasm memory, valid only during the call. Layouts with tensor sections computed from the
 * values take it only in slices (QuantizeOptions.slice with `prepared`).
 */
export type RowOutput = (section: number, at: number, bytes: Uint8Array) => void;

/** First of n f32 / bf16 values at `at` in kernel memory with |x| >= limit, or -1 (f16 never reaches the limits used). */
function firstAbove(k: Kernels, at: number, dtype: DType, n: number, limit: number): number {
  if (dtype === 'f32') {
    const v = new Float32Array(k.buffer, at, n);
    for (let i = 0; i < n; i++) if (Math.abs(v[i]) >= limit) return i;
    return -1;
  }
  const h = new Uint16Array(k.buffer, at, n);
  for (let i = 0; i < n; i++) if (Math.abs(bf16ToF32(h[i])) >= limit) return i;
  return -1;
}

/**
 * quantizeWith for input that is copied into wasm memory chunk by chunk (see ChunkSource),
 * optionally handing the output over chunk by chunk too (see RowOutput).
 */
export async function quantizeFrom(k: Kernels, input: ChunkSource, opts: QuantizeOptions, p = planInput(input.length, input.dtype, opts), out?: RowOutput): Promise<QuantizedTensor & { backend: WasmBuild }> {
  const { spec, dtype, rowLen, nrows, o, layout, name } = p;
  if (out && !cutsByRows(layout) && !opts.slice?.prepared) {
    fail(ErrorCodes.BAD_OPTION, `[quantize] ${name}: ${spec.name} output cannot be handed over row by row (it has tensor-level sections that depend on the values: quantize it in slices)`, { tensor: name, option: 'out', value: spec.name });
  }
  const eb = dtype === 'f32' ? 4 : 2;
  // A slice's rows are numbered as the whole tensor's (kernels, errors), whose rows the tensor
  // sections and finish() describe.
  const row0 = opts.slice?.row0 ?? 0;
  const tensorRows = opts.slice?.rows ?? nrows;
  const rows = rowsPerChunk(rowLen, nrows, opts.chunkBytes, 'quantize');
  const rowSecs = layout.sections.filter((s) => s.perRow > 0);
  const auxBytes = layout.sections.filter((s) => s.perRow === 0).reduce((a, s) => a + s.bytes, 0);
  const arena = new Arena(k, rowLen, rows, eb, rowSecs.map((s) => s.perRow), auxBytes + 64);
  const findNonFinite = k.fn('findNonFinite');
  const args: KernelArgs = { ...baseArgs(o), scratch: arena.scratch };
  if (opts.importance && spec.importance) {
    k.f32(arena.imatrix, rowLen).set(opts.importance);
    args.imatrix = arena.imatrix;
  }
  const st = SrcType[dtype];

  // The input is scanned for NaN/inf once, on the first pass over it; later passes (calibration
  // reductions, then the quantize pass) only copy. A pass over synchronous copies runs without a
  // single await, so that calls sharing these kernels on one thread never interleave in a pass.
  let scanned = false;
  const chunk = (r0: number, n: number, cb: (r0: number, n: number) => void) => {
    const bad = scanned ? -1 : (findNonFinite(arena.input, st, n * rowLen) as number);
    if (bad >= 0) {
      const index = (row0 + r0) * rowLen + bad;
      // The element as the caller's array holds it (the raw bits for f16/bf16).
      const at = arena.input + bad * eb;
      const value = eb === 4 ? new Float32Array(k.buffer.slice(at, at + 4))[0] : new Uint16Array(k.buffer.slice(at, at + 2))[0];
      fail(ErrorCodes.NON_FINITE, `[quantize] ${name}: value at index ${index} (row ${Math.floor(index / rowLen)}, column ${index % rowLen}) is not finite`, { tensor: name, index, value: String(value) });
    }
    if (!scanned && spec.maxAbs !== undefined && dtype !== 'f16') {
      const big = firstAbove(k, arena.input, dtype, n * rowLen, spec.maxAbs);
      if (big >= 0) {
        const index = (row0 + r0) * rowLen + big;
        fail(ErrorCodes.BAD_INPUT, `[quantize] ${name}: value at index ${index} (row ${Math.floor(index / rowLen)}, column ${index % rowLen}) has magnitude >= ${spec.maxAbs}, beyond what the ${spec.name} search handles (its fp32 squared errors overflow; llama.cpp aborts on such rows): rescale the tensor or choose another format`, {
          tensor: name, index, expected: `|x| < ${spec.maxAbs}`,
        });
      }
    }
    cb(r0, n);
  };
  const forEachChunk = (cb: (r0: number, n: number) => void, from = 0): void | Promise<void> => {
    for (let r0 = from; r0 < nrows; r0 += rows) {
      const n = Math.min(rows, nrows - r0);
      const copying = input.copy(k.u8(arena.input, n * rowLen * eb), r0 * rowLen * eb);
      if (copying) return copying.then(() => { chunk(r0, n, cb); return forEachChunk(cb, r0 + rows); });
      chunk(r0, n, cb);
    }
    scanned = true;
  };

  const ctx: TensorContext = {
    kernels: k, nrows: tensorRows, rowLen, opts: o, tensorScale: opts.tensorScale, dtype,
    async reduce(kernel, outBytes, init) {
      // The reduction buffer lives after the arena, sized by the caller.
      const at = k.reserve(arena.end + outBytes) + arena.end;
      const fn = k.fn(kernel);
      new Uint8Array(k.buffer, at, outBytes).fill(0);
      init?.(new DataView(k.buffer, at, outBytes));
      writeArgs(k.buffer, arena.args, args);
      const pass = forEachChunk((r0, n) => {
        setRow0(k.buffer, arena.args, row0 + r0);
        fn(arena.input, st, n, rowLen, at, arena.args);
      });
      if (pass) await pass;
      return new DataView(k.buffer.slice(at, at + outBytes));
    },
  };
  // A slice takes the whole tensor's calibration (none where the tensor sections are constant).
  const prepared = opts.slice ? (opts.slice.prepared ?? {}) : spec.prepare ? await spec.prepare(ctx) : {};
  if (opts.prepareOnly) return { format: spec.name, shape: [nrows, rowLen], data: new Uint8Array(0), layout, options: o, backend: k.build, prepared };
  const { auxInit, ...tensorArgs } = prepared;
  Object.assign(args, tensorArgs);
  args.aux = arena.aux;
  if (auxInit) k.u8(arena.aux, auxInit.byteLength).set(auxInit);
  Object.assign(args, arena.sectionArgs());
  writeArgs(k.buffer, arena.args, args);

  // Handed over by rows, the output keeps its tensor sections only.
  const tensorLayout = out ? tensorSectionsOf(layout) : layout;
  const data = new Uint8Array(tensorLayout.bytes);
  const q = k.fn(`${spec.kernel}_quantize`);
  const dq = opts.metrics ? k.fn(`${spec.kernel}_dequantize`) : undefined;
  const acc = opts.metrics ? newMetricsAccumulator() : undefined;
  const metricsFn = k.fn('metrics_accumulate');
  const macc = arena.aux + auxBytes;
  if (acc) new Uint8Array(k.buffer, macc, 48).fill(0);
  const pass = forEachChunk((r0, n) => {
    setRow0(k.buffer, arena.args, row0 + r0);
    q(arena.input, st, n, rowLen, arena.out[0], arena.args);
    if (out) rowSecs.forEach((s, i) => out(i, s.perRow * r0, k.u8(arena.out[i], s.perRow * n)));
    else rowSecs.forEach((s, i) => data.set(k.u8(arena.out[i], s.perRow * n), s.offset + s.perRow * r0));
    if (dq) {
      dq(arena.out[0], n, rowLen, arena.deq, arena.args);
      metricsFn(arena.input, st, arena.deq, n * rowLen, macc);
    }
  });
  if (pass) await pass;
  // Tensor-level sections the kernels wrote into aux (per-tensor scales and the like), and the
  // constant ones.
  let auxAt = arena.aux;
  for (const s of tensorLayout.sections.filter((x) => x.perRow === 0)) {
    data.set(k.u8(auxAt, s.bytes), s.offset);
    auxAt += s.bytes;
  }
  for (const [i, bytes] of constantSections(spec, tensorLayout, { nrows: tensorRows, rowLen, opts: o, dtype })) data.set(bytes, tensorLayout.sections[i].offset);
  spec.finish?.(ctx, data, tensorLayout, tensorArgs);
  const metrics = acc ? finishMetrics(new Float64Array(k.buffer.slice(macc, macc + 48))) : undefined;
  return { format: spec.name, shape: [nrows, rowLen], data, layout, options: o, metrics, backend: k.build };
}

export interface DequantizeOptions {
  backend?: Backend;
  chunkBytes?: number;
}

export interface TensorDequantizeOptions extends Omit<DequantizeOptions, 'backend'> {
  backend?: TensorBackend;
  preferGpu?: boolean;
}

export async function dequantize(qt: QuantizedTensor, opts: TensorDequantizeOptions = {}): Promise<Float32Array> {
  const { o } = storedOptions(qt); // before the GPU path: it reads the same fields
  if (qt.options === undefined) qt = { ...qt, options: o };
  const gpu: GpuResult<Float32Array> = await (await gpuModule()).maybeGpuDequantize(qt, opts);
  if (gpu.ran) return gpu.value;
  const k = await loadKernels(gpu.build);
  return dequantizeWith(k, qt, { ...opts, backend: gpu.build });
}

/**
 * Dequantizes into a caller-owned array (reused between calls, it spares the page faults of a
 * fresh allocation, which cost more than the kernel on large tensors).
 */
export async function dequantizeInto(qt: QuantizedTensor, out: Float32Array, opts: DequantizeOptions = {}): Promise<Float32Array> {
  const k = await loadKernels(opts.backend ?? 'auto');
  return dequantizeWith(k, qt, opts, out);
}

/**
 * The format and options of a tensor to dequantize. A GGUF type's bytes need no options (its
 * geometry is fixed), so `{ format: 'q4_k', shape, data }` made from a file's bytes is enough.
 */
function storedOptions(qt: QuantizedTensor): { spec: FormatSpec; o: ResolvedOptions } {
  if (typeof qt !== 'object' || qt === null) fail(ErrorCodes.BAD_INPUT, '[dequantize] expected a quantized tensor { format, shape, data, options }', { value: qt === null ? 'null' : typeof qt });
  const spec = getFormat(qt.format);
  const shape = qt.shape as unknown;
  if (!Array.isArray(shape) || shape.length !== 2 || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    fail(ErrorCodes.BAD_INPUT, `[dequantize] ${spec.name}: shape must be [rows, rowLength] (integers >= 0)`, { option: 'shape', value: JSON.stringify(shape)?.slice(0, 64), expected: '[rows, rowLength]' });
  }
  if (!(qt.data instanceof Uint8Array)) fail(ErrorCodes.BAD_INPUT, `[dequantize] ${spec.name}: data must be a Uint8Array`, { option: 'data', expected: 'Uint8Array' });
  if (qt.options !== undefined && (typeof qt.options !== 'object' || qt.options === null)) {
    fail(ErrorCodes.BAD_INPUT, `[dequantize] ${spec.name}: options must be the object quantize() returned`, { option: 'options' });
  }
  if (qt.options === undefined && spec.family !== 'gguf') {
    fail(ErrorCodes.BAD_INPUT, `[dequantize] ${spec.name}: options are missing (they say how the bytes were written: pass the tensor quantize() returned)`, { option: 'options', expected: 'ResolvedOptions' });
  }
  const o = qt.options ?? resolveOptions(spec, { format: spec.name });
  const block = spec.blockSize(o);
  if (shape[1] % block !== 0) {
    fail(ErrorCodes.ROW_LENGTH, `[dequantize] ${spec.name}: row length ${shape[1]} is not a multiple of its block of ${block}`, { option: 'shape', value: shape[1], expected: `a multiple of ${block}` });
  }
  return { spec, o };
}

export function dequantizeWith(k: Kernels, qt: QuantizedTensor, opts: DequantizeOptions = {}, into?: Float32Array): Float32Array {
  const { spec, o } = storedOptions(qt);
  const [nrows, rowLen] = qt.shape;
  const layout = layoutOf(spec, nrows, rowLen, o);
  if (qt.data.byteLength !== layout.bytes) {
    fail(ErrorCodes.BAD_INPUT, `[dequantize] ${qt.format} data of shape [${nrows}, ${rowLen}] must be ${layout.bytes} bytes but is ${qt.data.byteLength}`, {
      option: 'data', value: qt.data.byteLength, expected: layout.bytes,
    });
  }
  const rows = rowsPerChunk(rowLen, nrows, opts.chunkBytes, 'dequantize');
  const rowSecs = layout.sections.filter((s) => s.perRow > 0);
  const tensorSecs = layout.sections.filter((s) => s.perRow === 0);
  const auxBytes = tensorSecs.reduce((a, s) => a + s.bytes, 0);
  const arena = new Arena(k, rowLen, rows, 0, rowSecs.map((s) => s.perRow), auxBytes + 64);
  const section = (name: string) => {
    const s = tensorSecs.find((x) => x.name === name)!;
    return qt.data.subarray(s.offset, s.offset + s.bytes);
  };
  const args: KernelArgs = { ...baseArgs(o), ...spec.storedArgs?.(section, o), scratch: arena.scratch, aux: arena.aux };
  Object.assign(args, arena.sectionArgs());
  let auxAt = arena.aux;
  for (const s of tensorSecs) { k.u8(auxAt, s.bytes).set(qt.data.subarray(s.offset, s.offset + s.bytes)); auxAt += s.bytes; }
  writeArgs(k.buffer, arena.args, args);
  const fn = k.fn(`${spec.kernel}_dequantize`);
  if (into !== undefined && (!(into instanceof Float32Array) || into.length !== nrows * rowLen)) {
    fail(ErrorCodes.BAD_INPUT, `[dequantize] the output array must be a Float32Array of ${nrows * rowLen} values`, { option: 'out', value: (into as Float32Array)?.length, expected: nrows * rowLen });
  }
  const out = into ?? new Float32Array(nrows * rowLen);
  for (let r0 = 0; r0 < nrows; r0 += rows) {
    const n = Math.min(rows, nrows - r0);
    rowSecs.forEach((s, i) => k.u8(arena.out[i], s.perRow * n).set(qt.data.subarray(s.offset + s.perRow * r0, s.offset + s.perRow * (r0 + n))));
    setRow0(k.buffer, arena.args, r0);
    fn(arena.out[0], n, rowLen, arena.deq, arena.args);
    out.set(k.f32(arena.deq, n * rowLen), r0 * rowLen);
  }
  return out;
}
