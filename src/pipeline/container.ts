// The output file layout, planned before any tensor is quantized: every output size follows from
// the registry layout, so the io writers (src/io/*-writer.ts) can build the header up front. The
// pipeline then writes the data itself, entry by entry with the padding the writer planned, which
// lets it stream a row-chunked tensor without assembling it.
import { ErrorCodes, WebquantError } from '../errors.js';
import type { Layout, ResolvedOptions } from '../formats/types.js';
import { getFormat, ggufTwinHint } from '../formats/registry.js';
import type { Checkpoint } from '../io/checkpoint.js';
import { GGUF_DEFAULT_ALIGNMENT, type GgufCheckpoint } from '../io/gguf.js';
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
  /** Bytes written before this entry's data: the headers of the output files that start here (split GGUF). */
  before?: Uint8Array;
}

export interface ContainerPlan {
  header: Uint8Array;
  /**
   * Per output tensor (in order), its entries in order: one for a kept tensor, one per layout
   * section for a quantized one (sections are consecutive in the quantized data).
   */
  entries: ContainerEntry[][];
  totalBytes: number;
  /**
   * A split output: the byte length of each file, in order (they add up to totalBytes). The
   * output stream is then these files back to back; a sink writes it with Sink.files.
   */
  files?: number[];
}

export interface Container {
  /** Names the container and its settings; part of the resume key. */
  readonly id: string;
  plan(tensors: readonly OutputTensor[], input: Checkpoint): ContainerPlan;
  /** Names other than its own that a tensor quantized to `format` writes (they replace input tensors of those names). */
  claims?(name: string, format: string): string[];
  /**
   * The order of the output's tensors, when the container has one: a key per tensor name,
   * compared element by element (ties keep the pipeline's order). The pipeline processes the
   * tensors in that order.
   */
  order?(input: Checkpoint): ((name: string) => OrderKey) | undefined;
}

export type OrderKey = readonly (number | string)[];

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
  const header = first > w.header.byteLength ? concat([w.header, new Uint8Array(first - w.header.byteLength)]) : w.header;
  return { header, entries, totalBytes: w.totalBytes };
}

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0];
  const o = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) { o.set(p, at); at += p.byteLength; }
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

/**
 * A GGUF output in several files, as llama.cpp's gguf-split writes them (`<prefix>-00001-of-0000N.gguf`):
 * the first file holds every key/value pair, each file `split.no` (u16), `split.count` (u16) and
 * `split.tensors.count` (i32). 'input' is llama-quantize's --keep-split: each tensor in the file
 * its input tensor came from (a single-file input gives one file without split keys). 'limit'
 * starts a new file, in output order, before a tensor that would pass `maxTensors` tensors or
 * `maxBytes` bytes of tensor data (padded; the header is not counted) in the current one, as
 * gguf-split does; a tensor larger than `maxBytes` gets a file of its own.
 * `firstWithoutTensors` leaves the first file with the key/value pairs only.
 */
export type GgufSplit =
  | { by: 'input' }
  | { by: 'limit'; maxTensors?: number; maxBytes?: number; firstWithoutTensors?: boolean };

export interface GgufContainerOptions {
  /** Key/value pairs to add (or replace) after those carried over from a GGUF input. */
  metadata?: GgufWriteKV[];
  alignment?: number;
  split?: GgufSplit;
}

/** The output file of each tensor (in output order, non-decreasing), or undefined for one file. */
function splitFiles(split: GgufSplit | undefined, tensors: readonly OutputTensor[], fileOf: ((name: string) => number) | undefined, align: number): number[] | undefined {
  if (!split) return undefined;
  if (split.by === 'input') {
    if (!fileOf) return undefined;
    const files = tensors.map((t) => fileOf(t.name));
    for (let i = 1; i < files.length; i++) {
      if (files[i] < files[i - 1]) {
        throw new WebquantError(ErrorCodes.PLAN, `[pipeline] tensor "${tensors[i].name}" of input file ${files[i] + 1} comes after a tensor of file ${files[i - 1] + 1}`, { tensor: tensors[i].name });
      }
    }
    return files;
  }
  const { maxTensors, maxBytes } = split;
  let file = split.firstWithoutTensors ? 1 : 0, count = 0, bytes = 0;
  return tensors.map((t) => {
    const n = Math.ceil(t.byteLength / align) * align;
    if (count > 0 && ((maxTensors !== undefined && count >= maxTensors) || (maxBytes !== undefined && bytes + n > maxBytes))) {
      file++;
      count = bytes = 0;
    }
    count++;
    bytes += n;
    return file;
  });
}

/**
 * A GGUF from a GGUF in llama-quantize's order, so that the file is the one it writes: tensors
 * outside the blocks by name, then block by block (blk.N), by name within each; split like its
 * input (--keep-split), each file's tensors in their input order.
 */
function ggufOrder(input: Checkpoint, fileOf: ((name: string) => number) | undefined): ((name: string) => OrderKey) | undefined {
  if (input.format !== 'gguf') return undefined;
  if (fileOf) {
    const index = new Map(input.tensors.map((t, i) => [t.name, i]));
    return (name) => [fileOf(name), index.get(name) ?? 0];
  }
  return (name) => {
    const m = /^blk\.(\d+)/.exec(name);
    return [m ? Number(m[1]) : -1, name];
  };
}

/** Whether a GGUF output with `split` is several files (GgufSplit: 'input' only for a split input). */
export function writesSplit(split: GgufSplit | undefined, input: Checkpoint): boolean {
  return split?.by === 'limit' || (split?.by === 'input' && inputFiles(input) !== undefined);
}

function inputFiles(input: Checkpoint): ((name: string) => number) | undefined {
  const splits = input.format === 'gguf' ? (input as GgufCheckpoint).splits : undefined;
  if (!splits || splits.length < 2) return undefined;
  const at = new Map(input.tensors.map((t) => [t.name, Math.max(0, splits.indexOf(t.file ?? splits[0]))]));
  return (name) => at.get(name) ?? 0;
}

/**
 * GGUF v3 output. Quantized tensors must use a format with a GGUF type; kept tensors keep their
 * type (F32, F16, BF16, I32, or a GGUF block type). A GGUF input's key/value pairs are carried
 * over; `metadata` adds or replaces pairs. `split` writes several files (GgufSplit).
 */
export function ggufContainer(opts: GgufContainerOptions = {}): Container {
  const fileOf = (input: Checkpoint) => (opts.split?.by === 'input' ? inputFiles(input) : undefined);
  return {
    id: `gguf/1/${JSON.stringify(opts, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v))}`,
    order: (input) => ggufOrder(input, fileOf(input)),
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
      const files = splitFiles(opts.split, tensors, fileOf(input), opts.alignment ?? GGUF_DEFAULT_ALIGNMENT);
      const plan = files ? splitPlan(kv, gt, files, opts.alignment, opts.split?.by === 'limit') : fromWriter(new GgufWriter({ metadata: kv, tensors: gt, alignment: opts.alignment }), tensors.map(() => 1));
      plan.entries.forEach((e, i) => {
        if (e[0].byteLength !== tensors[i].byteLength) {
          throw new WebquantError(ErrorCodes.PLAN, `[pipeline] tensor "${tensors[i].name}": GGUF expects ${e[0].byteLength} bytes but the format gives ${tensors[i].byteLength}`, { tensor: tensors[i].name, value: tensors[i].byteLength, expected: e[0].byteLength });
        }
      });
      return plan;
    },
  };
}

/**
 * Files back to back: each its own GGUF (header, then its tensors from offset 0); a later file's
 * header goes before its first tensor (with the headers of any files before it that hold none).
 */
function splitPlan(kv: GgufWriteKV[], gt: GgufWriteTensor[], files: number[], alignment: number | undefined, countLast: boolean): ContainerPlan {
  const count = files.length ? files[files.length - 1] + 1 : 1;
  // In the order each llama.cpp tool leaves them: gguf-split sets split.count last (over a placeholder).
  const splitKeys = (no: number): GgufWriteKV[] => {
    const keys: GgufWriteKV[] = [
      { key: 'split.no', type: 'u16', value: no },
      { key: 'split.count', type: 'u16', value: count },
      { key: 'split.tensors.count', type: 'i32', value: gt.length },
    ];
    return countLast ? [keys[0], keys[2], keys[1]] : keys;
  };
  if (count > 0xffff) {
    throw new WebquantError(ErrorCodes.PLAN, `[pipeline] the output would need ${count} split files; GGUF's split.count holds at most 65535`, { option: 'split', value: count, expected: '<= 65535' });
  }
  // One writer per file; the first alone carries the key/value pairs (and their alignment).
  const byFile: GgufWriteTensor[][] = Array.from({ length: count }, () => []);
  gt.forEach((t, i) => byFile[files[i]].push(t));
  const plans = byFile.map((mine, f) => {
    const w = new GgufWriter({ metadata: f === 0 ? [...kv, ...splitKeys(0)] : splitKeys(f), tensors: mine, alignment: f === 0 ? alignment : undefined });
    return fromWriter(w, mine.map(() => 1));
  });
  const entries: ContainerEntry[][] = [];
  let next = 1;
  for (let f = 0; f < count; f++) {
    for (const [i, e] of plans[f].entries.entries()) {
      if (i === 0 && f >= next) {
        e[0].before = concat(plans.slice(next, f + 1).map((p) => p.header));
        next = f + 1;
      }
      entries.push(e);
    }
  }
  if (next < count) throw new WebquantError(ErrorCodes.PLAN, `[pipeline] split file ${next + 1} of ${count} holds no tensor and none follows it`, { value: count });
  return { header: plans[0].header, entries, totalBytes: plans.reduce((a, p) => a + p.totalBytes, 0), files: plans.map((p) => p.totalBytes) };
}
