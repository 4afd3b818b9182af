// bitsandbytes checkpoints (transformers' 4-bit and 8-bit serialization: the "-bnb-4bit" releases)
// read as their values. A 4-bit weight `<w>` is its packed codes (U8, or the bytes of another
// storage dtype, two codes per byte, the first in
// the high nibble, over the flattened tensor) with `<w>.absmax` (one per block), `<w>.quant_map`
// (the 16 values of NF4 or FP4) and `<w>.quant_state.bitsandbytes__nf4|fp4` (JSON: shape,
// blocksize, and with double quantization nested_blocksize and nested_offset, the absmax then
// being U8 codes of `<w>.nested_quant_map` times `<w>.nested_absmax` per nested block, plus the
// offset). An 8-bit weight (LLM.int8) is `<w>` I8 with `<w>.SCB`, one absmax per row. Each is
// presented under its own name with its real shape (dtype BNB_4BIT / BNB_INT8) and read as
// quant_map[code] * absmax (int8: (code * SCB) * f32(1/127), bitsandbytes' int8_vectorwise_dequant)
// in f32; the companions are folded into it.
import { ErrorCodes, fail } from '../errors.js';
import { isJsonObject, parseJson } from './json.js';
import { numel, type TensorEntry } from './checkpoint.js';
import { floatBytesToF32 } from './dtypes.js';
import { moduleName } from '../formats/types.js';

export const BNB4_DTYPE = 'BNB_4BIT';
export const BNB8_DTYPE = 'BNB_INT8';
const STATE = '.quant_state.bitsandbytes__';
/** bitsandbytes' int8 dequantization factor, 7.874015718698502e-3 = f32(1/127). */
const INV127 = Math.fround(1 / 127);

export interface Bnb4Weight {
  kind: 4;
  blocksize: number;
  absmax: TensorEntry;
  quantMap: TensorEntry;
  nested?: { absmax: TensorEntry; quantMap: TensorEntry; blocksize: number; offset: number };
  /** The decoded tables, read once. */
  tables?: Promise<{ map: Float32Array; absmax: (from: number, count: number) => Promise<Float32Array> }>;
}

export interface Bnb8Weight {
  kind: 8;
  scb: TensorEntry;
}

export type BnbWeight = Bnb4Weight | Bnb8Weight;


/** The bitsandbytes weights among the entries, presented as BNB_4BIT / BNB_INT8 with their companions folded in. */
export function presentBnb(source: string, entries: TensorEntry[], ours: ReadonlySet<string>, readAll: (e: TensorEntry) => Uint8Array | undefined): { entries: TensorEntry[]; weights: Map<string, BnbWeight> } {
  const byName = new Map(entries.map((e) => [e.info.name, e]));
  const weights = new Map<string, BnbWeight>();
  const folded = new Set<string>();
  const bad = (name: string, why: string, value?: unknown): never => fail(ErrorCodes.ST_SCALE, `[safetensors] ${source}: bitsandbytes weight "${name}": ${why}`, { file: byName.get(name)?.info.file ?? source, tensor: name, value });
  const out = entries.map((e) => {
    const t = e.info;
    if (ours.has(t.name)) return e;
    const stateName = [`${t.name}${STATE}nf4`, `${t.name}${STATE}fp4`].find((n) => byName.has(n));
    // The codes are bytes whatever dtype stores them (bnb_4bit_quant_storage: uint8, or bf16 / f32 for FSDP).
    if (stateName) {
      const state = byName.get(stateName)!;
      const bytes = readAll(state);
      if (!bytes) return e;
      let q: unknown;
      try {
        q = parseJson(new TextDecoder().decode(bytes));
      } catch {
        return bad(t.name, `${stateName} is not JSON`);
      }
      if (!isJsonObject(q) || !Array.isArray(q.shape) || !q.shape.every((d) => Number.isInteger(d) && (d as number) > 0) || !Number.isInteger(q.blocksize) || (q.blocksize as number) <= 0) {
        return bad(t.name, `${stateName} has no valid shape and blocksize`, q);
      }
      const shape = q.shape as number[], blocksize = q.blocksize as number;
      const n = numel(shape), blocks = Math.ceil(n / blocksize);
      const absmax = byName.get(`${t.name}.absmax`), quantMap = byName.get(`${t.name}.quant_map`);
      const elem = numel(t.shape) ? t.byteLength / numel(t.shape) : 1;
      if (t.byteLength < Math.ceil(n / 2) || t.byteLength >= Math.ceil(n / 2) + elem) bad(t.name, `${t.dtype}[${t.shape}] holds ${t.byteLength * 2} codes but its shape [${shape}] has ${n} values`, t.shape);
      if (!quantMap || quantMap.info.dtype !== 'F32' || numel(quantMap.info.shape) !== 16) bad(t.name, 'needs a quant_map of 16 F32 values', quantMap?.info.shape);
      const nested = q.nested_blocksize !== undefined;
      if (!absmax || numel(absmax.info.shape) !== blocks || absmax.info.dtype !== (nested ? 'U8' : 'F32')) {
        bad(t.name, `needs an absmax of ${blocks} ${nested ? 'U8 codes (double quantization)' : 'F32 values'}`, absmax && { dtype: absmax.info.dtype, shape: absmax.info.shape });
      }
      const w: Bnb4Weight = { kind: 4, blocksize, absmax: absmax!, quantMap: quantMap! };
      folded.add(stateName).add(absmax!.info.name).add(quantMap!.info.name);
      if (nested) {
        const nb = q.nested_blocksize as number, offset = q.nested_offset as number;
        const na = byName.get(`${t.name}.nested_absmax`), nm = byName.get(`${t.name}.nested_quant_map`);
        if (!Number.isInteger(nb) || nb <= 0 || typeof offset !== 'number' || !na || na.info.dtype !== 'F32' || numel(na.info.shape) !== Math.ceil(blocks / nb) || !nm || nm.info.dtype !== 'F32' || numel(nm.info.shape) !== 256) {
          bad(t.name, `double quantization needs nested_blocksize, nested_offset, a nested_absmax of ${Number.isInteger(nb) && nb > 0 ? Math.ceil(blocks / nb) : '?'} F32 values and a nested_quant_map of 256`, q);
        }
        w.nested = { absmax: na!, quantMap: nm!, blocksize: nb, offset };
        folded.add(na!.info.name).add(nm!.info.name);
      }
      weights.set(t.name, w);
      return { info: { ...t, dtype: BNB4_DTYPE, shape: shape.slice() }, src: e.src };
    }
    const mod = moduleName(t.name);
    const scb = byName.get(`${mod}.SCB`) ?? byName.get(`${t.name}.SCB`);
    if (t.dtype === 'I8' && t.shape.length === 2 && scb) {
      if (scb.info.dtype !== 'F32' || numel(scb.info.shape) !== t.shape[0]) bad(t.name, `its SCB ${scb.info.dtype}[${scb.info.shape}] is not one F32 absmax per row (${t.shape[0]})`, scb.info.shape);
      weights.set(t.name, { kind: 8, scb });
      folded.add(scb.info.name);
      const fmt = `${mod}.weight_format`;
      if (byName.has(fmt)) folded.add(fmt);
      return { info: { ...t, dtype: BNB8_DTYPE }, src: e.src };
    }
    return e;
  });
  return { entries: out.filter((e) => !folded.has(e.info.name)), weights };
}

async function readF32(e: TensorEntry, from = 0, count = numel(e.info.shape)): Promise<Float32Array> {
  const size = e.info.byteLength / numel(e.info.shape);
  return floatBytesToF32(await e.src.read(e.info.offset + from * size, count * size), e.info.dtype, e.info.name);
}

/** Values from element `first` on, `count` of them, given their stored bytes (4-bit: whole bytes from first/2). */
export async function decodeBnb(w: BnbWeight, bytes: Uint8Array, first: number, count: number, cols: number): Promise<Float32Array> {
  const out = new Float32Array(count);
  const f = Math.fround;
  if (w.kind === 8) {
    const r0 = first / cols, rows = count / cols;
    const scb = await readF32(w.scb, r0, rows);
    const codes = new Int8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let r = 0; r < rows; r++) {
      const s = scb[r];
      for (let i = r * cols; i < (r + 1) * cols; i++) out[i] = f(f(codes[i] * s) * INV127);
    }
    return out;
  }
  w.tables ??= (async () => {
    const map = await readF32(w.quantMap);
    const n = w.nested;
    if (!n) return { map, absmax: (from: number, c: number) => readF32(w.absmax, from, c) };
    const [nmap, nabs] = await Promise.all([readF32(n.quantMap), readF32(n.absmax)]);
    const off = f(n.offset);
    return {
      map,
      // dequantize_blockwise of the codes, then the offset added (bitsandbytes' dequantize_4bit)
      absmax: async (from: number, c: number) => {
        const codes = await w.absmax.src.read(w.absmax.info.offset + from, c);
        return Float32Array.from(codes, (q, i) => f(f(nmap[q] * nabs[Math.floor((from + i) / n.blocksize)]) + off));
      },
    };
  })();
  const t = await w.tables;
  const b0 = Math.floor(first / w.blocksize), b1 = Math.floor((first + count - 1) / w.blocksize);
  const absmax = await t.absmax(b0, b1 - b0 + 1);
  for (let i = 0; i < count; i++) {
    const e = first + i;
    const byte = bytes[(e >> 1) - (first >> 1)];
    out[i] = f(t.map[e & 1 ? byte & 15 : byte >> 4] * absmax[Math.floor(e / w.blocksize) - b0]);
  }
  return out;
}
