// The output file layout, planned before any tensor is quantized: every output size follows from
// the registry layout, so the io writers (src/io/*-writer.ts) can build the header up front. The
// pipeline then writes the data itself, entry by entry with the padding the writer planned, which
// lets it stream a row-chunked tensor without assembling it.
import { ErrorCodes, WebquantError } from '../errors.js';
import type { Layout, ResolvedOptions } from '../formats/types.js';
import { getFormat, ggufTwinHint } from '../formats/registry.js';
import type { Checkpoint } from '../io/checkpoint.js';
import type { GgufCheckpoint } from '../io/gguf.js';
import { ggmlType } from '../io/ggml-types.js';
import { stDtypeSize } from '../io/dtypes.js';
import { GgufWriter, type GgufWriteKV, type GgufWriteTensor } from '../io/gguf-writer.js';
import { SafetensorsWriter, type SafetensorsWriteTensor } from '../io/safetensors-writer.js';
import type { StreamingWriter } from '../io/stream.js';
import { isEmptyTensor } from './jobs.js';

export interface OutputTensor {
  name: string;
  kind: 'keep' | 'quantized';
  /** The input tensor's dtype. */
  inputDtype: string;
  /** The input tensor's shape (row-major, last = row length). */
  shape: number[];
  byteLength: number;
  /** For kind 'quantized'. */
  format?: string;
  options?: ResolvedOptions;
  layout?: Layout;
}

export interface ContainerEntry {
  name: string;
  byteLength: number;
  /** Zero bytes the container wants after this entry's data. */
  padAfter: number;
}

export interface ContainerPlan {
  header: Uint8Array;
  /**
   * Per output tensor (in order), its entries in order: one for a kept tensor, one per layout
   * section for a quantized one (sections are consecutive in the quantized data).
   */
  entries: ContainerEntry[][];
  totalBytes: number;
}

export interface Container {
  /** Names the container and its settings; part of the resume key. */
  readonly id: string;
  plan(tensors: readonly OutputTensor[], input: Checkpoint): ContainerPlan;
  /** Names other than its own that a tensor quantized to `format` writes (they replace input tensors of those names). */
  claims?(name: string, format: string): string[];
}

/** Entries and padding from a writer's planned offsets (data follows the header back to back). */
function fromWriter(w: StreamingWriter & { tensors: readonly { name: string; offset: number; byteLength: number }[] }, groups: number[]): ContainerPlan {
  const flat = w.tensors.map((t, i) => {
    const end = i + 1 < w.tensors.length ? w.tensors[i + 1].offset : w.totalBytes;
    return { name: t.name, byteLength: t.byteLength, padAfter: end - t.offset - t.byteLength };
  });
  const entries: ContainerEntry[][] = [];
  let at = 0;
  for (const n of groups) { entries.push(flat.slice(at, at + n)); at += n; }
  // Padding the header to the first tensor is part of the header here.
  const first = w.tensors.length ? w.tensors[0].offset : w.totalBytes;
  const header = first > w.header.byteLength ? concat(w.header, new Uint8Array(first - w.header.byteLength)) : w.header;
  return { header, entries, totalBytes: w.totalBytes };
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const o = new Uint8Array(a.byteLength + b.byteLength);
  o.set(a);
  o.set(b, a.byteLength);
  return o;
}

/**
 * safetensors output. A kept tensor keeps its dtype and shape (a dtype safetensors lacks, such as
 * a GGUF block type, is stored as U8 bytes). A quantized tensor becomes one U8 entry per layout
 * section: the first section under the tensor's name ([rows, bytes per row]), the others as
 * `<name>.<section>` (or as the format's safetensorsEntries name them);
 * `__metadata__["webquant.quantization"]` maps each such tensor to {format,
 * shape, options, sections}. String metadata of a safetensors input is carried over.
 */
export function safetensorsContainer(extraMetadata: Record<string, string> = {}): Container {
  return {
    id: `safetensors/1/${JSON.stringify(extraMetadata)}`,
    claims: (name, format) => Object.values(getFormat(format).safetensorsEntries ?? {}).map((e) => e.name(name)).filter((n) => n !== name),
    plan(tensors, input) {
      const st: SafetensorsWriteTensor[] = [];
      const groups: number[] = [];
      const quant: Record<string, unknown> = {};
      for (const t of tensors) {
        if (t.kind === 'keep') {
          const ok = stDtypeSize(t.inputDtype) !== undefined;
          st.push({ name: t.name, dtype: ok ? t.inputDtype : 'U8', shape: ok ? t.shape : [t.byteLength] });
          if (!ok) quant[t.name] = { storedAs: t.inputDtype, shape: t.shape };
          groups.push(1);
          continue;
        }
        const rowLen = t.shape.length ? t.shape[t.shape.length - 1] : 1;
        const rows = t.shape.reduce((a, b) => a * b, 1) / rowLen;
        const custom = getFormat(t.format!).safetensorsEntries;
        const names = t.layout!.sections.map((s, i) => (custom ? custom[s.name].name(t.name) : i === 0 ? t.name : `${t.name}.${s.name}`));
        t.layout!.sections.forEach((s, i) => st.push(custom
          ? { name: names[i], dtype: custom[s.name].dtype(t.options!), shape: custom[s.name].shape(t.shape, t.options!) }
          : { name: names[i], dtype: 'U8', shape: s.perRow > 0 ? [rows, s.perRow] : [s.bytes] }));
        groups.push(names.length);
        quant[t.name] = { format: t.format, shape: t.shape, options: t.options, sections: names };
      }
      const metadata: Record<string, string> = {};
      if (input.format === 'safetensors') {
        for (const [k, v] of Object.entries(input.metadata)) if (typeof v === 'string') metadata[k] = v;
      }
      Object.assign(metadata, extraMetadata, { 'webquant.quantization': JSON.stringify(quant) });
      return fromWriter(new SafetensorsWriter({ tensors: st, metadata }), groups);
    },
  };
}

export interface GgufContainerOptions {
  /** Key/value pairs to add (or replace) after those carried over from a GGUF input. */
  metadata?: GgufWriteKV[];
  alignment?: number;
}

/**
 * GGUF v3 output. Quantized tensors must use a format with a GGUF type; kept tensors keep their
 * type (F32, F16, BF16, I32, or a GGUF block type). A GGUF input's key/value pairs are carried
 * over; `metadata` adds or replaces pairs.
 */
export function ggufContainer(opts: GgufContainerOptions = {}): Container {
  return {
    id: `gguf/1/${JSON.stringify(opts, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v))}`,
    plan(tensors, input) {
      const extra = new Map((opts.metadata ?? []).map((kv) => [kv.key, kv]));
      const kv: GgufWriteKV[] = [];
      if (input.format === 'gguf') {
        for (const p of (input as GgufCheckpoint).kv ?? []) {
          if (!extra.has(p.key)) kv.push({ key: p.key, type: p.type, itemType: p.itemType, value: p.value });
        }
      }
      kv.push(...extra.values());
      const gt: GgufWriteTensor[] = tensors.map((t) => {
        if (t.kind === 'keep') {
          // An empty tensor (kept whatever the plan said, see isEmptyTensor) has no values to
          // convert: F32 holds its zero bytes as well as the type GGUF lacks.
          const ty = ggmlType(t.inputDtype) ?? (isEmptyTensor(t) ? ggmlType('F32') : undefined);
          if (!ty) {
            throw new WebquantError(ErrorCodes.PLAN, `[pipeline] tensor "${t.name}" is ${t.inputDtype}, which GGUF cannot store; quantize it or convert it`, { tensor: t.name, value: t.inputDtype, expected: 'a ggml type' });
          }
          return { name: t.name, ggmlType: ty.id, shape: t.shape };
        }
        const g = getFormat(t.format!).ggml;
        if (!g) {
          throw new WebquantError(ErrorCodes.PLAN, `[pipeline] tensor "${t.name}": format ${t.format} has no GGUF type; write safetensors or pick a GGUF format${ggufTwinHint(t.format ?? '')}`, { tensor: t.name, value: t.format, expected: 'a format with a ggml type' });
        }
        return { name: t.name, ggmlType: g.type, shape: t.shape };
      });
      const plan = fromWriter(new GgufWriter({ metadata: kv, tensors: gt, alignment: opts.alignment }), tensors.map(() => 1));
      plan.entries.forEach((e, i) => {
        if (e[0].byteLength !== tensors[i].byteLength) {
          throw new WebquantError(ErrorCodes.PLAN, `[pipeline] tensor "${tensors[i].name}": GGUF expects ${e[0].byteLength} bytes but the format gives ${tensors[i].byteLength}`, { tensor: tensors[i].name, value: tensors[i].byteLength, expected: e[0].byteLength });
        }
      });
      return plan;
    },
  };
}
