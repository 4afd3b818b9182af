// Serving API: open a webquant safetensors output or a GGUF file lazily and compute with its
// quantized weights without dequantizing whole matrices.
//
//   const q = await openQuantized(fromUrl(url), { cacheBytes: 512 << 20 });
//   const y = await q.tensor('model.layers.0.mlp.down_proj.weight').matvec(x);
//
// Nothing but the header is read at open; a tensor's bytes (each of its sections) are read the
// first time it is used, through the ByteSource (Range requests for URLs), and kept in an LRU
// cache capped at `cacheBytes`; with `persistentCache` also in OPFS, the Cache API or a directory
// (./persist.ts), so that a reload reads them from there instead of the source. Compute runs in a private wasm instance (./kernels.ts): the row
// sections are copied in chunks of rows and `<kernel>_matvec` (assembly/serve) runs on them;
// formats without a fused kernel dequantize a chunk of rows with their own `<kernel>_dequantize`
// and dot it (`serve_dot_rows`), so every registry format works.
import { ErrorCodes, fail } from '../errors.js';
import { isJsonObject, parseJson } from '../io/json.js';
import { setRow0, writeArgs, type KernelArgs, ARGS_BYTES } from '../kernels/args.js';
import type { Kernels, WasmBuild } from '../kernels/loader.js';
import { formats, getFormat, ggufFormatByType } from '../formats/registry.js';
import { layoutOf, type FormatSpec, type Layout, type ResolvedOptions } from '../formats/types.js';
import { resolveOptions } from '../options.js';
import type { Checkpoint, TensorInfo } from '../io/checkpoint.js';
import type { ByteSource } from '../io/source.js';
import { openCheckpoint } from '../io/open.js';
import { ggmlType } from '../io/ggml-types.js';
import { f16ToF32, f32ToF16, bf16ToF32 } from '../util/half.js';
import { serveKernels } from './kernels.js';
import { checkChunkBytes, optionFlags, type QuantizedTensor } from '../quantize.js';
import { openPersistentCache, type PersistentCache, type PersistentCacheOptions, type PersistentCacheStats } from './persist.js';

export {
  DEFAULT_PERSISTENT_BYTES, PERSISTENT_STORES, hasOpfs, hasCacheApi,
  type PersistentCacheOptions, type PersistentCacheStats, type PersistentStoreKind, type TensorStore, type StoredEntry,
} from './persist.js';


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

// ---- resolution of what each tensor is -------------------------------------------------------

type Kind =
  | { type: 'quant'; spec: FormatSpec; options: ResolvedOptions; layout: Layout; sectionNames: string[] }
  | { type: 'float'; dtype: 'F32' | 'F16' | 'BF16' }
  | { type: 'other' };

interface Entry {
  info: ServedTensorInfo;
  kind: Kind;
  /** The tensor's row that row 0 of this entry is (a rows() view): kernels that number rows across the tensor (double quantization) take it. */
  row0?: number;
  /** The whole tensor's rows (a rows() view), whose tensor sections the view shares. */
  tensorRows?: number;
  /** Rows per value of the tensor's `.scale` (info.scale): all rows, or one expert's. */
  scaleRows?: number;
}

interface WebquantMeta {
  format?: string;
  shape?: number[];
  options?: ResolvedOptions;
  sections?: string[];
  storedAs?: string;
}

function isCheckpoint(s: ByteSource | Checkpoint): s is Checkpoint {
  return typeof (s as Checkpoint | null)?.readRaw === 'function' && Array.isArray((s as Checkpoint).tensors);
}

const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

function geometry(shape: number[]): { rows: number; rowLength: number } {
  const rowLength = shape.length ? shape[shape.length - 1] : 1;
  return { rowLength, rows: rowLength === 0 ? 0 : numel(shape) / rowLength };
}

function resolveEntries(ckpt: Checkpoint): Map<string, Entry> {
  const out = new Map<string, Entry>();
  const byName = new Map(ckpt.tensors.map((t) => [t.name, t]));
  if (ckpt.format === 'safetensors') {
    const meta = webquantMeta(ckpt);
    const hidden = new Set<string>();
    for (const [name, m] of Object.entries(meta)) {
      if (!m.format || !m.sections || !m.shape || !m.options) continue;
      const spec = getFormat(m.format);
      const { rows, rowLength } = geometry(m.shape);
      const layout = layoutOf(spec, rows, rowLength, m.options);
      if (m.sections.length !== layout.sections.length) {
        fail(ErrorCodes.BAD_INPUT, `[serve] ${ckpt.source}: "${name}" lists ${m.sections.length} sections but ${spec.name} has ${layout.sections.length}`, { file: ckpt.source, tensor: name });
      }
      let byteLength = 0;
      m.sections.forEach((s, i) => {
        const t = byName.get(s);
        if (!t || t.byteLength !== layout.sections[i].bytes) {
          fail(ErrorCodes.BAD_INPUT, `[serve] ${ckpt.source}: section "${s}" of "${name}" is missing or not ${layout.sections[i].bytes} bytes`, {
            file: ckpt.source, tensor: s, value: t?.byteLength, expected: layout.sections[i].bytes,
          });
        }
        byteLength += t.byteLength;
        if (i > 0) hidden.add(s);
      });
      out.set(name, {
        info: { name, shape: m.shape, rows, rowLength, format: spec.name, quantized: true, options: m.options, byteLength },
        kind: { type: 'quant', spec, options: m.options, layout, sectionNames: m.sections },
      });
    }
    for (const t of ckpt.tensors) {
      if (out.has(t.name) || hidden.has(t.name)) continue;
      const m = Object.hasOwn(meta, t.name) ? meta[t.name] : undefined;
      // A GGUF block-type tensor kept as is (stored as U8 bytes): served like a GGUF tensor.
      const g = m?.storedAs ? ggmlType(m.storedAs) : undefined;
      const spec = g ? ggufFormatByType(g.id) : undefined;
      const shape = m?.storedAs && m.shape ? m.shape : t.shape;
      const gguf = spec && m?.shape && spec.name !== 'f16' && spec.name !== 'bf16';
      const e = gguf ? ggufEntry(t, shape, spec) : plainEntry(t, shape, m?.storedAs ?? t.dtype);
      // A shape the metadata claims must describe the stored bytes: the kernels read whole rows.
      if (shape !== t.shape) {
        const [need, have] = e.kind.type === 'quant' ? [e.kind.layout.bytes, t.byteLength] : [numel(shape), numel(t.shape)];
        const unit = e.kind.type === 'quant' ? 'bytes' : 'values';
        if (need !== have) {
          fail(ErrorCodes.BAD_INPUT, `[serve] ${ckpt.source}: "${t.name}" is stored as ${m!.storedAs} of shape [${shape}], which is ${need} ${unit}, but the tensor holds ${have}`, {
            file: ckpt.source, tensor: t.name, value: shape, expected: `${have} ${unit}`,
          });
        }
      }
      out.set(t.name, e);
    }
    return out;
  }
  for (const t of ckpt.tensors) {
    const g = ggmlType(t.dtype);
    const spec = g && t.dtype !== 'F16' && t.dtype !== 'BF16' && t.dtype !== 'F32' ? ggufFormatByType(g.id) : undefined;
    if (spec) {
      out.set(t.name, ggufEntry(t, t.shape, spec));
    } else {
      out.set(t.name, plainEntry(t, t.shape, t.dtype));
    }
  }
  for (const e of out.values()) attachScale(ckpt, e, byName);
  return out;
}

/**
 * llama.cpp multiplies the product of a weight `<m>.weight` by an F32 `<m>.scale` when the file has
 * one ({1}, or {n_expert} for a stack of experts): the graph's `*_s` tensors (NVFP4's weight_scale_2,
 * BitNet's per-tensor scales). The served weight is the stored one times that scale.
 */
function attachScale(ckpt: Checkpoint, e: Entry, byName: Map<string, TensorInfo>): void {
  const { name, shape, rows } = e.info;
  if (!name.endsWith('.weight') || shape.length < 2 || e.kind.type === 'other') return;
  const s = byName.get(`${name.slice(0, -'.weight'.length)}.scale`);
  if (!s || s.shape.length > 1) return;
  const n = numel(s.shape);
  const stacks = shape.length === 3 ? shape[0] : 1;
  if (s.dtype !== 'F32' || (n !== 1 && n !== stacks)) {
    fail(ErrorCodes.BAD_INPUT, `[serve] ${ckpt.source}: "${s.name}" (${s.dtype} [${s.shape}]), the scale llama.cpp multiplies "${name}" by, must be F32 with 1${stacks > 1 ? ` or ${stacks}` : ''} value${stacks > 1 ? 's' : ''}`, {
      file: ckpt.source, tensor: s.name, value: `${s.dtype} [${s.shape}]`, expected: stacks > 1 ? `F32 [1] or [${stacks}]` : 'F32 [1]',
    });
  }
  e.info.scale = s.name;
  e.scaleRows = n === 1 ? rows : rows / stacks;
}

/** Multiplies the rows of `out` (`batch` blocks of `rows` results, or rows of `rowLen` values) by their scale. */
function applyScale(e: Entry, scale: Float32Array, out: Float32Array, mode: 'matvec' | 'dequantize', batch: number): Float32Array {
  const { rows, rowLength } = e.info;
  const per = e.scaleRows!, row0 = e.row0 ?? 0;
  for (let r = 0; r < rows; r++) {
    const f = scale[Math.floor((row0 + r) / per)];
    if (mode === 'dequantize') for (let j = r * rowLength, end = j + rowLength; j < end; j++) out[j] *= f;
    else for (let b = 0; b < batch; b++) out[b * rows + r] *= f;
  }
  return out;
}

const isShape = (v: unknown): v is number[] => Array.isArray(v) && v.every((d) => Number.isSafeInteger(d) && d >= 0);

/**
 * __metadata__["webquant.quantization"] checked for what resolveEntries relies on: an object of
 * objects whose shape is a list of sizes, sections a list of names and options an object.
 */
function webquantMeta(ckpt: Checkpoint): Record<string, WebquantMeta> {
  const raw = ckpt.metadata['webquant.quantization'];
  if (typeof raw !== 'string') return {};
  const where = `[serve] ${ckpt.source}: __metadata__["webquant.quantization"]`;
  let meta: unknown;
  try {
    meta = parseJson(raw);
  } catch {
    fail(ErrorCodes.BAD_INPUT, `${where} is not JSON`, { file: ckpt.source });
  }
  if (!isJsonObject(meta)) fail(ErrorCodes.BAD_INPUT, `${where} is not a JSON object`, { file: ckpt.source, value: meta === null ? 'null' : typeof meta, expected: 'an object of tensor names' });
  for (const [name, m] of Object.entries(meta)) {
    function bad(field: string, expected: string): never {
      return fail(ErrorCodes.BAD_INPUT, `${where}: "${name}"${field ? `.${field}` : ''} is not ${expected}`, {
        file: ckpt.source, tensor: name, option: field || undefined, value: JSON.stringify(field ? (m as Record<string, unknown>)[field] : m)?.slice(0, 64), expected,
      });
    }
    if (!isJsonObject(m)) bad('', 'an object');
    if (m.shape !== undefined && !isShape(m.shape)) bad('shape', 'a list of sizes (integers >= 0)');
    if (m.sections !== undefined && !(Array.isArray(m.sections) && m.sections.every((x) => typeof x === 'string'))) bad('sections', 'a list of tensor names');
    if (m.options !== undefined && !isJsonObject(m.options)) bad('options', 'an object');
    for (const f of ['format', 'storedAs']) if (m[f] !== undefined && typeof m[f] !== 'string') bad(f, 'a string');
  }
  return meta as Record<string, WebquantMeta>;
}

function ggufEntry(t: TensorInfo, shape: number[], spec: FormatSpec): Entry {
  const options = resolveOptions(spec, { format: spec.name });
  const { rows, rowLength } = geometry(shape);
  return {
    info: { name: t.name, shape, rows, rowLength, format: spec.name, quantized: true, options, byteLength: t.byteLength },
    kind: { type: 'quant', spec, options, layout: layoutOf(spec, rows, rowLength, options), sectionNames: [t.name] },
  };
}

function plainEntry(t: TensorInfo, shape: number[], dtype: string): Entry {
  const { rows, rowLength } = geometry(shape);
  const float = dtype === 'F32' || dtype === 'F16' || dtype === 'BF16';
  return {
    info: { name: t.name, shape, rows, rowLength, format: dtype, quantized: false, byteLength: t.byteLength },
    kind: float && t.dtype === dtype ? { type: 'float', dtype } : { type: 'other' },
  };
}

// ---- the byte cache -----------------------------------------------------------------------

class Lru {
  private map = new Map<string, Uint8Array[]>();
  bytes = 0;
  hits = 0;
  misses = 0;
  evictions = 0;
  constructor(readonly cap: number) {}

  get(name: string): Uint8Array[] | undefined {
    const v = this.map.get(name);
    if (v) {
      this.map.delete(name);
      this.map.set(name, v);
      this.hits++;
    } else {
      this.misses++;
    }
    return v;
  }

  /** Keeps v unless it alone exceeds the cap; evicts least recently used entries to fit. */
  set(name: string, v: Uint8Array[]): void {
    const size = v.reduce((a, b) => a + b.byteLength, 0);
    if (size > this.cap) return;
    const old = this.map.get(name);
    if (old) {
      this.map.delete(name);
      this.bytes -= old.reduce((a, b) => a + b.byteLength, 0);
    }
    for (const [k, e] of this.map) {
      if (this.bytes + size <= this.cap) break;
      this.map.delete(k);
      this.bytes -= e.reduce((a, b) => a + b.byteLength, 0);
      this.evictions++;
    }
    this.map.set(name, v);
    this.bytes += size;
  }

  get entries(): number {
    return this.map.size;
  }
  clear(): void {
    this.map.clear();
    this.bytes = 0;
  }
}

// ---- compute --------------------------------------------------------------------------------

const align = (n: number) => (n + 15) & ~15;

function kernelArgs(o: ResolvedOptions | undefined, spec: FormatSpec, layout: Layout, tensorSecs: readonly Uint8Array[]): KernelArgs {
  if (!o) return {};
  const names = layout.sections.filter((x) => x.perRow === 0).map((x) => x.name);
  return { group: o.groupSize, bits: o.bits, flags: optionFlags(o), ...spec.storedArgs?.((name) => tensorSecs[names.indexOf(name)], o) };
}

/** Bytes per row of each row section (a float tensor is one section of plain rows). */
function rowSectionBytes(e: Entry): number[] {
  const kind = e.kind;
  if (kind.type === 'quant') return kind.layout.sections.filter((s) => s.perRow > 0).map((s) => s.perRow);
  return [e.info.rowLength * (kind.type === 'float' && kind.dtype !== 'F32' ? 2 : 4)];
}

/**
 * Scratch of a batched kernel beyond matvec's (the GGUF formats, assembly/serve/gguf-matmul.ts matmul32
 * and matmul256): the positions transposed and their x sums per 16 and per 32 (4.375 bytes a
 * value), a 256 KiB block of rows' codes as f32 (or one row's, 4 bytes a value, if larger), and
 * their scales and min factors (at most 0.5625 bytes a value of the block: 36 KiB, or one row's).
 */
function matmulScratch(batch: number, rowLen: number): number {
  return 64 + Math.ceil(batch * rowLen * 4.375) + Math.max(256 << 10, 4 * rowLen) + Math.max(40 << 10, rowLen);
}

/**
 * The chunked driver behind matvec / matmul / dequantize. Row sections are copied into the private
 * wasm instance `rows` at a time; `mode` 'dequantize' writes f32 rows into `out` ([rows, rowLen]),
 * 'matvec' computes out[b*nrows + r] = row r . X[b].
 */
function run(k: Kernels, e: Entry, sections: readonly Uint8Array[], chunkBytes: number, mode: 'matvec' | 'dequantize', X?: Float32Array, batch = 1, q8 = false): Float32Array {
  const { rows: nrows, rowLength: rowLen } = e.info;
  const kind = e.kind;
  let kernel: string;
  const perRow = rowSectionBytes(e);
  let tensorSecs: Uint8Array[] = [];
  let args: KernelArgs = {};
  if (kind.type === 'quant') {
    kernel = kind.spec.kernel;
    tensorSecs = sections.slice(perRow.length) as Uint8Array[];
    args = kernelArgs(kind.options, kind.spec, kind.layout, tensorSecs);
    if (q8 && mode === 'matvec' && Q8_ACTIVATION_FORMATS.includes(kind.spec.name)) args.flags = (args.flags ?? 0) | SERVE_Q8_ACT;
  } else {
    kernel = (kind.type === 'float' ? kind.dtype : 'F32').toLowerCase();
  }
  const out = new Float32Array(mode === 'dequantize' ? nrows * rowLen : batch * nrows);
  if (nrows === 0 || rowLen === 0) return out;
  const fused = mode === 'matvec' && k.has(`${kernel}_matvec`);
  const rowBytes = perRow.reduce((a, b) => a + b, 0);
  const needDeq = !fused;
  let rows = Math.max(1, Math.min(nrows, Math.floor(chunkBytes / rowBytes)));
  if (needDeq) rows = Math.max(1, Math.min(rows, Math.floor(chunkBytes / (rowLen * 4))));
  const auxBytes = tensorSecs.reduce((a, s) => a + s.byteLength, 0);

  // Several positions in one call where the format has a batched kernel (the same bits as matvec).
  const batched = mode === 'matvec' && batch > 1 && k.has(`${kernel}_matmul`);
  let at = 0;
  const pArgs = at; at += ARGS_BYTES;
  const pScratch = at; at = align(at + 16 * rowLen + 65536 + (batched ? matmulScratch(batch, rowLen) : 0));
  const pX = at; at = align(at + (mode === 'matvec' ? batch * rowLen * 4 : 0));
  const pY = at; at = align(at + (mode === 'matvec' ? batch * rows * 4 : 0));
  const pAux = at; at = align(at + auxBytes + 64);
  // 8 readable bytes after each row section: the int kernels' 8-byte group loads (assembly/serve/int.ts)
  const pSec = perRow.map((b) => { const p = at; at = align(at + b * rows + 8); return p; });
  const pDeq = at; at = align(at + (needDeq ? rows * rowLen * 4 : 0));
  const base = k.reserve(at);
  const A = (p: number) => p + base;

  let auxAt = A(pAux);
  for (const s of tensorSecs) { k.u8(auxAt, s.byteLength).set(s); auxAt += s.byteLength; }
  const a: KernelArgs = { ...args, scratch: A(pScratch), aux: A(pAux) };
  if (pSec.length > 1) a.scales = A(pSec[1]);
  if (pSec.length > 2) a.biases = A(pSec[2]);
  writeArgs(k.buffer, A(pArgs), a);
  if (mode === 'matvec') k.f32(A(pX), batch * rowLen).set(X!.subarray(0, batch * rowLen));

  const mv = fused ? k.fn(`${kernel}_matvec`) : undefined;
  const mm = batched ? k.fn(`${kernel}_matmul`) : undefined;
  const dq = needDeq && k.has(`${kernel}_dequantize`) ? k.fn(`${kernel}_dequantize`) : undefined;
  const dot = k.fn('serve_dot_rows');
  for (let r0 = 0; r0 < nrows; r0 += rows) {
    const n = Math.min(rows, nrows - r0);
    perRow.forEach((b, i) => k.u8(A(pSec[i]), b * n).set(sections[i].subarray(b * r0, b * (r0 + n))));
    setRow0(k.buffer, A(pArgs), (e.row0 ?? 0) + r0);
    let deq = A(pSec[0]);
    if (needDeq) {
      if (dq) dq(A(pSec[0]), n, rowLen, A(pDeq), A(pArgs));
      else k.u8(A(pDeq), n * rowLen * 4).set(sections[0].subarray(r0 * rowLen * 4, (r0 + n) * rowLen * 4));
      deq = A(pDeq);
      if (mode === 'dequantize') {
        out.set(k.f32(deq, n * rowLen), r0 * rowLen);
        continue;
      }
    }
    if (mm) {
      mm(A(pSec[0]), n, rowLen, A(pX), A(pY), A(pArgs), batch, rows);
      for (let b = 0; b < batch; b++) out.set(k.f32(A(pY) + b * rows * 4, n), b * nrows + r0);
      continue;
    }
    for (let b = 0; b < batch; b++) {
      const x = A(pX) + b * rowLen * 4;
      const y = A(pY) + b * rows * 4;
      if (mv) mv(A(pSec[0]), n, rowLen, x, y, A(pArgs));
      else dot(deq, n, rowLen, x, y);
      out.set(k.f32(y, n), b * nrows + r0);
    }
  }
  return out;
}

// ---- public API ----------------------------------------------------------------------------

/** Opens a webquant safetensors output or a GGUF file (a ByteSource or an opened Checkpoint). */
export async function openQuantized(source: ByteSource | Checkpoint, opts: OpenQuantizedOptions = {}): Promise<QuantizedModel> {
  if (!isCheckpoint(source) && typeof (source as ByteSource)?.read !== 'function') {
    fail(ErrorCodes.BAD_INPUT, `[serve] openQuantized needs a ByteSource or an opened Checkpoint but got ${source === null ? 'null' : typeof source}`, {
      option: 'source', value: source === null ? 'null' : typeof source, expected: ['ByteSource', 'Checkpoint'],
    });
  }
  const cap = opts.cacheBytes ?? 512 << 20;
  if (!(cap >= 0)) fail(ErrorCodes.BAD_OPTION, `[serve] cacheBytes must be >= 0 but got ${cap}`, { option: 'cacheBytes', value: cap });
  const { chunkBytes, q8 } = computeOptions(opts);
  const ckpt = isCheckpoint(source) ? source : await openCheckpoint(source);
  const k = await serveKernels(opts.backend ?? 'auto');
  const entries = resolveEntries(ckpt);
  const cache = new Lru(cap);
  const persist: PersistentCache | undefined = opts.persistentCache === undefined
    ? undefined
    : await openPersistentCache(opts.persistentCache, isCheckpoint(source) ? undefined : await source.identity?.(), ckpt.source);
  // Concurrent first reads of one tensor share a promise, so a tensor is read once.
  const pending = new Map<string, Promise<Uint8Array[]>>();

  const entry = (name: string): Entry => {
    const e = entries.get(name);
    if (!e) {
      fail(ErrorCodes.TENSOR_NOT_FOUND, `[serve] ${ckpt.source}: no tensor named "${String(name)}"`, {
        file: ckpt.source, tensor: String(name), expected: `one of the ${entries.size} tensors`,
      });
    }
    return e;
  };

  async function read(e: Entry): Promise<Uint8Array[]> {
    const hit = cache.get(e.info.name);
    if (hit) return hit;
    let p = pending.get(e.info.name);
    if (!p) {
      p = (async () => {
        let secs = await persist?.get(e.info.name, sectionBytes(ckpt, e));
        if (!secs) {
          if (e.kind.type === 'quant') secs = await Promise.all(e.kind.sectionNames.map((s) => ckpt.readRaw(s)));
          else if (e.kind.type === 'float') secs = [await ckpt.readRaw(e.info.name)];
          else { const f = await ckpt.readF32(e.info.name); secs = [new Uint8Array(f.buffer, f.byteOffset, f.byteLength)]; }
          persist?.put(e.info.name, secs);
        }
        cache.set(e.info.name, secs);
        return secs;
      })();
      pending.set(e.info.name, p);
      p.finally(() => pending.delete(e.info.name)).catch(() => {});
    }
    return p;
  }

  // The `.scale` tensors' values (a few bytes each), read once.
  const scales = new Map<string, Promise<Float32Array>>();
  const scaleOf = (e: Entry): Promise<Float32Array> | undefined => {
    const n = e.info.scale;
    if (n === undefined) return undefined;
    let p = scales.get(n);
    if (!p) {
      p = ckpt.readF32(n);
      scales.set(n, p);
      p.catch(() => scales.delete(n));
    }
    return p;
  };
  const loaded = async (e: Entry) => {
    const [sections, scale] = await Promise.all([read(e), scaleOf(e)]);
    return loadedTensor(k, e, sections, chunkBytes, q8, scale);
  };

  const served = (e: Entry): ServedTensor => ({
    info: e.info,
    load: () => loaded(e),
    dequantize: async () => (await loaded(e)).dequantize(),
    async dequantizeF16() {
      const f = (await loaded(e)).dequantize();
      const h = new Uint16Array(f.length);
      for (let i = 0; i < f.length; i++) h[i] = f32ToF16(f[i]);
      return h;
    },
    matvec: async (x) => (await loaded(e)).matvec(x),
    matmul: async (X, batch) => (await loaded(e)).matmul(X, batch),
  });

  return {
    checkpoint: ckpt,
    tensors: [...entries.values()].map((e) => e.info),
    build: k.build,
    has: (name) => entries.has(name),
    tensor: (name) => served(entry(name)),
    cacheStats: () => ({
      bytes: cache.bytes, capBytes: cap, entries: cache.entries, hits: cache.hits, misses: cache.misses, evictions: cache.evictions,
      ...(persist ? { persistent: persist.stats() } : {}),
    }),
    clearCache: () => cache.clear(),
    flush: async () => { await persist?.flush(); },
  };
}

/** A tensor in memory: the chunked kernels over its sections. */
function loadedTensor(k: Kernels, e: Entry, sections: readonly Uint8Array[], chunkBytes: number, q8: boolean, scale?: Float32Array): LoadedTensor {
  const scaled = (out: Float32Array, mode: 'matvec' | 'dequantize', batch = 1) => (scale ? applyScale(e, scale, out, mode, batch) : out);
  return {
    info: e.info,
    sections,
    bytes: sections.reduce((a, b) => a + b.byteLength, 0),
    matvec: (x) => (checkX(e, x, 1), scaled(run(k, e, sections, chunkBytes, 'matvec', x, 1, q8), 'matvec')),
    matmul: (X, batch) => (checkX(e, X, batch), scaled(run(k, e, sections, chunkBytes, 'matvec', X, batch, q8), 'matvec', batch)),
    dequantize: () => scaled(run(k, e, sections, chunkBytes, 'dequantize'), 'dequantize'),
    rows(first, count) {
      const { rows, rowLength } = e.info;
      if (!Number.isSafeInteger(first) || !Number.isSafeInteger(count) || first < 0 || count < 0 || first + count > rows) {
        fail(ErrorCodes.BAD_INPUT, `[serve] ${e.info.name}: rows [${first}, ${first + count}) are outside its ${rows} rows`, {
          tensor: e.info.name, value: [first, count], expected: `0 <= first <= first + count <= ${rows}`,
        });
      }
      let kind = e.kind;
      // The view's rows, then the whole tensor's sections.
      const tensorRows = e.tensorRows ?? e.info.rows;
      if (kind.type === 'quant') kind = { ...kind, layout: layoutOf(kind.spec, count, rowLength, kind.options, tensorRows) };
      const perRow = rowSectionBytes(e);
      const info = { ...e.info, name: `${e.info.name}[${first}:${first + count}]`, shape: [count, rowLength], rows: count, byteLength: perRow.reduce((a, b) => a + b, 0) * count };
      // Row sections cut to the rows; whole-tensor sections (after them) as they are.
      const cut = sections.map((sec, i) => (i < perRow.length ? sec.subarray(perRow[i] * first, perRow[i] * (first + count)) : sec));
      return loadedTensor(k, { info, kind, row0: (e.row0 ?? 0) + first, tensorRows, scaleRows: e.scaleRows }, cut, chunkBytes, q8, scale);
    },
  };
}

/** The byte length of each section a read of `e` returns (what a persisted entry must match). */
function sectionBytes(ckpt: Checkpoint, e: Entry): number[] {
  if (e.kind.type === 'quant') return e.kind.sectionNames.map((s) => ckpt.tensor(s).byteLength);
  if (e.kind.type === 'float') return [ckpt.tensor(e.info.name).byteLength];
  return [numel(e.info.shape) * 4];
}

/** chunkBytes (an integer >= 1, default 4 MiB) and activations ('f32' or 'q8'), checked. */
function computeOptions(o: ServeComputeOptions & { chunkBytes?: number }): { chunkBytes: number; q8: boolean } {
  checkChunkBytes(o.chunkBytes, 'serve');
  const chunkBytes = o.chunkBytes ?? 4 << 20;
  if (o.activations !== undefined && o.activations !== 'f32' && o.activations !== 'q8') {
    fail(ErrorCodes.BAD_OPTION, `[serve] activations must be "f32" or "q8" but got ${JSON.stringify(o.activations)}`, { option: 'activations', value: String(o.activations), expected: ['f32', 'q8'] });
  }
  return { chunkBytes, q8: o.activations === 'q8' };
}

function checkX(e: Entry, X: Float32Array, batch: number): void {
  const n = e.info.rowLength;
  if (!(X instanceof Float32Array) || !Number.isInteger(batch) || batch < 1 || X.length < batch * n) {
    fail(ErrorCodes.BAD_INPUT, `[serve] ${e.info.name}: expected a Float32Array of ${batch} x ${n} values but got ${(X as Float32Array)?.length}`, {
      tensor: e.info.name, option: 'x', value: (X as Float32Array)?.length, expected: batch * n,
    });
  }
}

/** Eval adapter (src/eval/llama.ts WeightSource) over a quantized model. */
export interface QuantizedWeightSource {
  get(name: string): Promise<Float32Array>;
  matvec(name: string, x: Float32Array): Float32Array;
  /** Y = W X for `n` vectors (row-major), one batched kernel call: what the forward prefers. */
  matmul(name: string, x: Float32Array, n: number): Float32Array;
  /** A tensor the adapter holds (one of `names`). */
  held(name: string): LoadedTensor;
}

/**
 * The reference Llama forward's WeightSource on quantized weights: `get` dequantizes (norms,
 * embeddings), `matvec` runs the serving kernels. The hook is synchronous, so the 2-D tensors it
 * may be asked for (`names`, default every 2-D tensor) are read up front and held by the adapter
 * for its lifetime, in addition to (not counted by) the model's cache.
 */
export async function weightSource(q: QuantizedModel, opts: { names?: string[] } = {}): Promise<QuantizedWeightSource> {
  const names = opts.names ?? q.tensors.filter((t) => t.shape.length === 2).map((t) => t.name);
  const held = new Map<string, LoadedTensor>();
  for (const n of names) held.set(n, await q.tensor(n).load());
  return {
    get: (name) => q.tensor(name).dequantize(),
    matvec(name, x) {
      return heldTensor(name).matvec(x);
    },
    matmul(name, x, n) {
      return heldTensor(name).matmul(x, n);
    },
    held: (name) => heldTensor(name),
  };
  function heldTensor(name: string): LoadedTensor {
    const t = held.get(name);
    if (!t) fail(ErrorCodes.TENSOR_NOT_FOUND, `[serve] "${name}" was not loaded by weightSource (pass it in names)`, { tensor: name });
    return t;
  }
}

/**
 * A quantize() result as a LoadedTensor (no file involved): matvec / matmul / dequantize through the
 * serving kernels of the requested build.
 */
export async function servedFromQuantized(qt: QuantizedTensor, opts: ServeComputeOptions & { backend?: 'auto' | WasmBuild; chunkBytes?: number; name?: string } = {}): Promise<LoadedTensor> {
  const { chunkBytes, q8 } = computeOptions(opts);
  const k = await serveKernels(opts.backend ?? 'auto');
  const spec = getFormat(qt.format);
  const name = opts.name ?? 'tensor';
  if (!isShape(qt.shape) || qt.shape.length !== 2) {
    fail(ErrorCodes.BAD_INPUT, `[serve] ${name}: shape [${qt.shape}] is not [rows, rowLength]`, { tensor: name, option: 'shape', value: qt.shape, expected: '[rows, rowLength]' });
  }
  const [rows, rowLength] = qt.shape;
  const layout = layoutOf(spec, rows, rowLength, qt.options);
  if (!(qt.data instanceof Uint8Array) || qt.data.byteLength < layout.bytes) {
    fail(ErrorCodes.BAD_INPUT, `[serve] ${name}: ${spec.name} [${rows}, ${rowLength}] takes ${layout.bytes} bytes but data has ${(qt.data as Uint8Array)?.byteLength}`, {
      tensor: name, option: 'data', value: (qt.data as Uint8Array)?.byteLength, expected: layout.bytes,
    });
  }
  const e: Entry = {
    info: { name, shape: [rows, rowLength], rows, rowLength, format: spec.name, quantized: true, options: qt.options, byteLength: layout.bytes },
    kind: { type: 'quant', spec, options: qt.options, layout, sectionNames: layout.sections.map((s) => s.name) },
  };
  const sections = layout.sections.map((s) => qt.data.subarray(s.offset, s.offset + s.bytes));
  return loadedTensor(k, e, sections, chunkBytes, q8);
}

/** Whether the build has a fused kernel for a registry format (otherwise the generic path runs). */
export async function hasFusedMatvec(format: string, backend: 'auto' | WasmBuild = 'auto'): Promise<boolean> {
  return (await serveKernels(backend)).has(`${getFormat(format).kernel}_matvec`);
}

/** Every registry format name (tests iterate it). */
export const servedFormats = (): string[] => [...formats.keys()];
// Re-exported for callers converting dequantizeF16 output.
export { f16ToF32, bf16ToF32 };
