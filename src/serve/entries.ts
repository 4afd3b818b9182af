// What each tensor of an opened checkpoint is, for serving: a quantized tensor (its registry
// format, options, layout and section tensors, from a webquant safetensors' metadata or a GGUF
// type), a float tensor, or anything else (read as F32), and the per-tensor scale llama.cpp
// multiplies some GGUF weights by. Everything a later read relies on is checked here, at open.
import { ErrorCodes, fail } from '../errors.js';
import { isJsonObject, parseJson } from '../io/json.js';
import { getFormat, ggufFormatByType } from '../formats/registry.js';
import { layoutOf, type FormatSpec, type Layout, type ResolvedOptions } from '../formats/types.js';
import { resolveOptions } from '../options.js';
import type { Checkpoint, TensorInfo } from '../io/checkpoint.js';
import { ggmlType } from '../io/ggml-types.js';
import type { ServedTensorInfo } from './types.js';

export type Kind =
  | { type: 'quant'; spec: FormatSpec; options: ResolvedOptions; layout: Layout; sectionNames: string[] }
  | { type: 'float'; dtype: 'F32' | 'F16' | 'BF16' }
  | { type: 'other' };

export interface Entry {
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

export const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

function geometry(shape: number[]): { rows: number; rowLength: number } {
  const rowLength = shape.length ? shape[shape.length - 1] : 1;
  return { rowLength, rows: rowLength === 0 ? 0 : numel(shape) / rowLength };
}

export function resolveEntries(ckpt: Checkpoint): Map<string, Entry> {
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
export function applyScale(e: Entry, scale: Float32Array, out: Float32Array, mode: 'matvec' | 'dequantize', batch: number): Float32Array {
  const { rows, rowLength } = e.info;
  const per = e.scaleRows!, row0 = e.row0 ?? 0;
  for (let r = 0; r < rows; r++) {
    const f = scale[Math.floor((row0 + r) / per)];
    if (mode === 'dequantize') for (let j = r * rowLength, end = j + rowLength; j < end; j++) out[j] *= f;
    else for (let b = 0; b < batch; b++) out[b * rows + r] *= f;
  }
  return out;
}

export const isShape = (v: unknown): v is number[] => Array.isArray(v) && v.every((d) => Number.isSafeInteger(d) && d >= 0);

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

/** The byte length of each section a read of `e` returns (what a persisted entry must match). */
export function sectionBytes(ckpt: Checkpoint, e: Entry): number[] {
  if (e.kind.type === 'quant') return e.kind.sectionNames.map((s) => ckpt.tensor(s).byteLength);
  if (e.kind.type === 'float') return [ckpt.tensor(e.info.name).byteLength];
  return [numel(e.info.shape) * 4];
}
