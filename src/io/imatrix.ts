// Importance matrices as llama.cpp's llama-imatrix writes them, by GGUF tensor name:
// - the legacy binary file (imatrix.dat): i32 n_entries, then per entry i32 name length, name,
//   i32 ncall, i32 nval, f32 values[nval] (sums of squared activations over ncall chunks), and an
//   optional trailer (i32 chunk count, i32 length and the dataset's name);
// - the GGUF file (imatrix.gguf): per weight `<name>.in_sum2` (sums, [matrices, cols]) and
//   `<name>.counts` ([matrices, 1]); a MoE tensor has one matrix per expert; `imatrix.datasets`
//   and `imatrix.chunk_count` say what it was computed on.
// Both become per-column means, the values llama-quantize passes to the quantizers; a MoE
// tensor's are the experts' means back to back. An expert no position reached (count 0) has no
// means: it gets ones (every column alike) rather than zeros, which would leave its quantizer
// nothing to weigh.
import { ErrorCodes, fail } from '../errors.js';
import { GGUF_MAGIC, openGguf } from './gguf.js';
import type { GgufWriteKV } from './gguf-writer.js';
import type { ByteSource } from './source.js';

/** An importance matrix: per-column means by tensor name, and what it was computed on. */
export class Imatrix extends Map<string, Float32Array> {
  /** Calibration datasets named in the file (llama-imatrix records its input file's name). */
  datasets: string[] = [];
  /** Chunks of calibration text it was computed on; 0 where the file does not say. */
  chunks = 0;
}

/**
 * The four keys llama-quantize adds to a GGUF it quantizes with an imatrix: the imatrix file, its
 * first dataset, its entry count and its chunk count (both u32, the last only when known), strings
 * cut to 127 bytes as its overrides hold them. llama-quantize writes the path as given; here it is
 * the file's name alone (`file` may be a path or a URL), which a page, a Worker and the CLI all
 * know alike, so their outputs stay identical, and which leaks no local directory.
 */
export function imatrixMetadata(file: string, m: ReadonlyMap<string, Float32Array> & Partial<Pick<Imatrix, 'datasets' | 'chunks'>>): GgufWriteKV[] {
  const str = (v: string) => {
    const b = new TextEncoder().encode(v);
    return b.length <= 127 ? v : new TextDecoder().decode(b.subarray(0, 127)).replace(/\uFFFD$/, '');
  };
  const name = file.replace(/[?#].*$/, '').split(/[\\/]/).pop() || file;
  const kv: GgufWriteKV[] = [{ key: 'quantize.imatrix.file', type: 'string', value: str(name) }];
  if (m.datasets?.length) kv.push({ key: 'quantize.imatrix.dataset', type: 'string', value: str(m.datasets[0]) });
  kv.push({ key: 'quantize.imatrix.entries_count', type: 'u32', value: m.size });
  if (m.chunks) kv.push({ key: 'quantize.imatrix.chunks_count', type: 'u32', value: m.chunks });
  return kv;
}

export async function readImatrix(src: ByteSource): Promise<Imatrix> {
  const size = await src.size();
  if (size >= 4) {
    const m = await src.read(0, 4);
    if ((m[0] | (m[1] << 8) | (m[2] << 16) | (m[3] << 24)) >>> 0 === GGUF_MAGIC) return readGgufImatrix(src);
  }
  return readLegacy(src, size);
}

function readLegacy(src: ByteSource, size: number): Promise<Imatrix> {
  const file = src.name;
  const bad = (msg: string, at: number): never => fail(ErrorCodes.BAD_INPUT, `[imatrix] ${file}: ${msg} (at byte ${at})`, { file, index: at });
  return src.read(0, size).then((bytes) => {
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let at = 0;
    const i32 = () => {
      if (at + 4 > size) bad('unexpected end of file', at);
      const v = dv.getInt32(at, true);
      at += 4;
      return v;
    };
    const out = new Imatrix();
    const n = i32();
    if (n < 0 || n * 12 > size) bad(`${n} entries cannot fit in ${size} bytes; not an imatrix file`, 0);
    for (let e = 0; e < n; e++) {
      const len = i32();
      if (len <= 0 || at + len > size) bad(`entry ${e}: bad name length ${len}`, at - 4);
      let name: string;
      try {
        name = new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(at, at + len));
      } catch {
        return bad(`entry ${e}: name is not UTF-8`, at);
      }
      at += len;
      const ncall = i32();
      const nval = i32();
      if (nval <= 0 || at + nval * 4 > size) bad(`entry "${name}": bad value count ${nval}`, at - 4);
      const v = new Float32Array(nval);
      for (let i = 0; i < nval; i++) v[i] = dv.getFloat32(at + 4 * i, true) / (ncall > 0 ? ncall : 1);
      at += nval * 4;
      if (out.has(name)) bad(`entry "${name}" appears twice`, at);
      out.set(name, checkSums(file, name, v));
    }
    // The trailer, where present: older files end after the entries.
    if (at + 4 <= size) out.chunks = Math.max(0, i32());
    if (at + 4 <= size) {
      const len = i32();
      if (len > 0 && at + len <= size) out.datasets = [new TextDecoder().decode(bytes.subarray(at, at + len))];
    }
    return out;
  });
}

async function readGgufImatrix(src: ByteSource): Promise<Imatrix> {
  const g = await openGguf(src);
  const out = new Imatrix();
  const datasets = g.metadata['imatrix.datasets'];
  if (Array.isArray(datasets)) out.datasets = datasets.filter((d): d is string => typeof d === 'string');
  const chunks = Number(g.metadata['imatrix.chunk_count'] ?? 0);
  if (Number.isInteger(chunks) && chunks > 0) out.chunks = chunks;
  const entries = g.tensors.filter((t) => t.name.endsWith('.in_sum2'));
  if (!entries.length && g.metadata['general.type'] !== 'imatrix') {
    fail(ErrorCodes.BAD_INPUT, `[imatrix] ${src.name}: not an importance matrix (a GGUF of ${g.tensors.length} tensors, none named <tensor>.in_sum2, general.type ${JSON.stringify(g.metadata['general.type'] ?? null)})`, {
      file: src.name, value: g.metadata['general.type'], expected: 'general.type "imatrix" with <tensor>.in_sum2 / .counts tensors',
    });
  }
  for (const t of entries) {
    const name = t.name.slice(0, -'.in_sum2'.length);
    if (t.shape.length < 1) fail(ErrorCodes.BAD_INPUT, `[imatrix] ${src.name}: "${t.name}" is a scalar; expected [matrices, columns]`, { file: src.name, tensor: t.name, value: t.shape, expected: '[matrices, columns]' });
    const sums = await g.readF32(t.name);
    const counts = await g.readF32(`${name}.counts`);
    const cols = t.shape[t.shape.length - 1];
    checkSums(src.name, `${name}.counts`, counts);
    if (counts.length < 1 || sums.length !== cols * counts.length) {
      fail(ErrorCodes.BAD_INPUT, `[imatrix] ${src.name}: "${name}" has ${sums.length} sums for ${counts.length} matrices of ${cols} columns`, { file: src.name, tensor: name, value: sums.length, expected: cols * counts.length });
    }
    out.set(name, checkSums(src.name, t.name, sums).map((v, i) => {
      const c = counts[Math.floor(i / cols)];
      return c > 0 ? v / c : 1;
    }));
  }
  return out;
}

/** Sums of squares (and counts) are finite and >= 0: anything else is a damaged file, named here. */
function checkSums(file: string, entry: string, v: Float32Array): Float32Array {
  for (let i = 0; i < v.length; i++) {
    if (!(v[i] >= 0 && v[i] < Infinity)) {
      fail(ErrorCodes.NON_FINITE, `[imatrix] ${file}: "${entry}" value ${i} is ${v[i]}; sums of squares must be finite and >= 0`, { file, tensor: entry, index: i, value: v[i], expected: 'finite, >= 0' });
    }
  }
  return v;
}

/** The tensors of a plan, as importanceFor needs them. */
export interface ImportanceTarget {
  name: string;
  shape: readonly number[];
  rowLength: number;
  /** 'keep' for tensors the plan does not quantize. */
  scheme: 'keep' | { format: string };
}

/**
 * Columns per unit over which an importance vector that is all zero makes llama.cpp b4747's search
 * divide 0 by 0 (spec §16.2), by format: IQ4_NL's blocks get d = NaN, Q2_K / Q4_K / Q5_K's
 * super-blocks d = dmin = NaN. webquant writes those bytes too (they are what the spec and b4747
 * define; newer llama.cpp releases write zeros instead), so such blocks dequantize to NaN.
 */
const NAN_UNITS: Readonly<Record<string, number>> = { iq4_nl: 32, q2_k: 256, q4_k: 256, q5_k: 256 };

/** A warning when `v` is all zero over a whole unit of a format in NAN_UNITS. */
function zeroUnitWarning(t: ImportanceTarget, v: Float32Array, file: string): string | undefined {
  if (t.scheme === 'keep') return undefined;
  const format = t.scheme.format;
  const unit = NAN_UNITS[format];
  if (!unit || t.rowLength % unit) return undefined;
  let count = 0;
  let first = -1;
  for (let at = 0; at < v.length; at += unit) {
    let zero = true;
    for (let i = at; i < at + unit && zero; i++) zero = v[i] === 0;
    if (zero) {
      count++;
      if (first < 0) first = at;
    }
  }
  if (!count) return undefined;
  const col = first % t.rowLength;
  const where = v.length > t.rowLength ? ` of expert ${Math.floor(first / t.rowLength)}` : '';
  return `imatrix ${file}: "${t.name}" has zero importance over ${count} whole ${unit}-column block${count > 1 ? 's' : ''} (first: columns ${col}-${col + unit - 1}${where}); ` +
    `${format} then stores a NaN scale there, as llama.cpp b4747 does (newer releases store zeros), and those weights dequantize to NaN: quantize this tensor without the imatrix or in another format`;
}

/**
 * An importance matrix's vectors for the tensors a plan quantizes, by name: one of the row length,
 * or for a [matrices, rows, cols] tensor (MoE experts) one per matrix. A vector of another length
 * is E_IMPORTANCE_LENGTH naming the file and the tensor; entries naming no tensor, and quantized
 * tensors without an entry, are counted in `warnings`, which also names each tensor whose format
 * would store NaN scales for blocks of all-zero importance (NAN_UNITS).
 */
export function importanceFor(matrix: ReadonlyMap<string, Float32Array>, tensors: readonly ImportanceTarget[], file: string, checkpoint: string): { importance: Record<string, Float32Array>; warnings: string[] } {
  const importance: Record<string, Float32Array> = {};
  const byName = new Map(tensors.map((t) => [t.name, t]));
  let unused = 0;
  for (const [name, v] of matrix) {
    const t = byName.get(name);
    if (!t) { unused++; continue; }
    if (t.scheme === 'keep') continue;
    const mats = t.shape.length === 3 ? t.shape[0] : 1;
    if (v.length !== t.rowLength && v.length !== mats * t.rowLength) {
      fail(ErrorCodes.IMPORTANCE_LENGTH, `[imatrix] ${file}: "${name}" has ${v.length} values but its rows have ${t.rowLength}${mats > 1 ? ` (or ${mats * t.rowLength}: one vector for each of its ${mats} experts)` : ''}`, { file, tensor: name, value: v.length, expected: mats > 1 ? [t.rowLength, mats * t.rowLength] : t.rowLength });
    }
    importance[name] = v;
  }
  const missing = tensors.filter((t) => t.scheme !== 'keep' && !importance[t.name]).length;
  const warnings: string[] = [];
  for (const t of tensors) {
    const v = importance[t.name];
    const w = v && zeroUnitWarning(t, v, file);
    if (w) warnings.push(w);
  }
  if (unused) warnings.push(`imatrix ${file}: ${unused} entries name no tensor of ${checkpoint}`);
  if (missing) warnings.push(`imatrix ${file}: no importance for ${missing} quantized tensors`);
  return { importance, warnings };
}
