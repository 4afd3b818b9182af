// safetensors reader: an 8-byte little-endian header length, a JSON header, then the data.
// Only the header is read on open; tensors are read one at a time on demand.
//
// Checks run in this order, over all entries, and the first failing check wins:
//   size < 8 or header length < 2       ST_HEADER_TOO_SMALL
//   header length > 100 MB              ST_HEADER_TOO_LARGE
//   8 + header length > file size       ST_HEADER_PAST_END
//   header not UTF-8                    ST_NOT_UTF8
//   header not JSON, or not an object   ST_NOT_JSON
//   a duplicate key in any object       ST_DUPLICATE
//   a bad tensor name                   ST_BAD_NAME
//   an entry not {dtype, shape, data_offsets} of the right types, or a bad __metadata__   ST_BAD_ENTRY
//   an unknown dtype                    ST_BAD_DTYPE
//   numel or byte size > 2^53 - 1       ST_SHAPE_OVERFLOW
//   end - begin != numel * dtype size   ST_BAD_SPAN
//   spans not starting at 0, overlapping or with gaps   ST_BAD_OFFSETS
//   data past the end of the file       ST_DATA_PAST_END
//   bytes after the data                ST_TRAILING
//   FP8 scales of the wrong dtype or shape              ST_SCALE
import { ErrorCodes, fail, type ErrorCode } from '../errors.js';
import { BaseCheckpoint, numel, type Checkpoint, type TensorEntry, type TensorInfo, type TensorValues } from './checkpoint.js';
import { E4M3_TO_F32, E5M2_TO_F32, FLOAT_DTYPES, ST_DTYPE_SIZE, floatBytesToF32, stDtypeSize } from './dtypes.js';
import { findDuplicateKey, isJsonObject, parseJson } from './json.js';
import type { ByteSource } from './source.js';
import { MLX_DTYPE, decodeMlx, presentMlx, type MlxQuantization, type MlxWeight } from './mlx.js';
import { BNB4_DTYPE, BNB8_DTYPE, decodeBnb, presentBnb, type BnbWeight } from './bnb.js';

export const ST_MAX_HEADER = 100_000_000;

export interface SafetensorsOptions {
  /** Block of the `<weight>_scale_inv` FP8 scales, [rows, cols]; DeepSeek-V3 uses [128, 128]. */
  fp8BlockSize?: [number, number];
  /** Group size and bits of an MLX checkpoint's weights (config.json "quantization", see mlx.ts). */
  mlx?: MlxQuantization;
}

const RESERVED_NAMES = new Set(['__proto__', 'constructor', 'prototype', '__metadata__']);

/** Why `name` cannot be a tensor name, or undefined if it can. Shared with the writer. */
export function badTensorName(name: string): string | undefined {
  if (name.length === 0) return 'an empty name';
  if (RESERVED_NAMES.has(name)) return `the reserved name "${name}"`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'a name with control characters';
  return undefined;
}


const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

export interface SafetensorsHeader {
  /** Bytes of the 8-byte prefix plus the JSON header: where the data starts. */
  dataStart: number;
  tensors: TensorInfo[];
  metadata: Record<string, string>;
}

/** Reads and validates the header of a safetensors source (file order of the tensors kept). */
export async function readSafetensorsHeader(src: ByteSource): Promise<SafetensorsHeader> {
  const file = src.name;
  const bad = (code: ErrorCode, msg: string, d: { tensor?: string; value?: unknown; expected?: unknown } = {}): never =>
    fail(code, `[safetensors] ${file}: ${msg}`, { file, ...d });

  const size = await src.size();
  if (size < 8) bad(ErrorCodes.ST_HEADER_TOO_SMALL, `${size} bytes is too short for the 8-byte header length`, { value: size, expected: '>= 8 bytes' });
  const prefix = await src.read(0, 8);
  const n64 = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true);
  if (n64 < 2n) bad(ErrorCodes.ST_HEADER_TOO_SMALL, `header length ${n64} is too small for a JSON object`, { value: String(n64), expected: '>= 2' });
  if (n64 > BigInt(ST_MAX_HEADER)) bad(ErrorCodes.ST_HEADER_TOO_LARGE, `header length ${n64} exceeds ${ST_MAX_HEADER} bytes`, { value: String(n64), expected: `<= ${ST_MAX_HEADER}` });
  const n = Number(n64);
  if (8 + n > size) bad(ErrorCodes.ST_HEADER_PAST_END, `header of ${n} bytes runs past the end of the ${size}-byte file`, { value: n, expected: `<= ${size - 8}` });

  const raw = await src.read(8, n);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(raw);
  } catch {
    return bad(ErrorCodes.ST_NOT_UTF8, 'header is not valid UTF-8');
  }
  let json: unknown;
  try {
    json = parseJson(text);
  } catch (e) {
    return bad(ErrorCodes.ST_NOT_JSON, `header is not JSON (${(e as Error).message})`, { value: text.slice(0, 64) });
  }
  if (!isJsonObject(json)) bad(ErrorCodes.ST_NOT_JSON, 'header is not a JSON object', { value: Array.isArray(json) ? 'array' : json === null ? 'null' : typeof json, expected: 'object' });
  const header = json as Record<string, unknown>;
  const dup = findDuplicateKey(text);
  if (dup) bad(ErrorCodes.ST_DUPLICATE, `duplicate key "${dup.key}"${dup.path.length ? ` in ${dup.path.join('.')}` : ''}`, { tensor: dup.path[0] ?? dup.key, value: dup.key });

  const names = Object.keys(header).filter((k) => k !== '__metadata__');
  for (const name of names) {
    const why = badTensorName(name);
    if (why) bad(ErrorCodes.ST_BAD_NAME, `tensor with ${why}`, { tensor: name, value: name, expected: 'a non-empty name, not __proto__/constructor/prototype, no control characters' });
  }

  let metadata: Record<string, string> = {};
  if ('__metadata__' in header) {
    const m = header.__metadata__;
    if (!isJsonObject(m) || !Object.values(m).every((v) => typeof v === 'string')) {
      bad(ErrorCodes.ST_BAD_ENTRY, '__metadata__ must be an object of strings', { tensor: '__metadata__', value: JSON.stringify(m)?.slice(0, 64), expected: '{ [key]: string }' });
    }
    metadata = Object.fromEntries(Object.entries(m as Record<string, string>));
  }

  interface Raw { name: string; dtype: string; shape: number[]; begin: number; end: number }
  const raws: Raw[] = [];
  for (const name of names) {
    const e = header[name];
    const expected = '{ dtype: string, shape: non-negative integer[], data_offsets: [begin, end] with 0 <= begin <= end }';
    if (!isJsonObject(e)) bad(ErrorCodes.ST_BAD_ENTRY, `entry of "${name}" is not an object`, { tensor: name, value: JSON.stringify(e)?.slice(0, 64), expected });
    const { dtype, shape, data_offsets: off } = e as Record<string, unknown>;
    const ok = typeof dtype === 'string'
      && Array.isArray(shape) && shape.every(isCount)
      && Array.isArray(off) && off.length === 2 && off.every((v) => isCount(v) && Number.isSafeInteger(v)) && (off[0] as number) <= (off[1] as number);
    if (!ok) bad(ErrorCodes.ST_BAD_ENTRY, `entry of "${name}" is malformed`, { tensor: name, value: JSON.stringify(e).slice(0, 128), expected });
    raws.push({ name, dtype: dtype as string, shape: shape as number[], begin: (off as number[])[0], end: (off as number[])[1] });
  }
  for (const r of raws) {
    if (stDtypeSize(r.dtype) === undefined) bad(ErrorCodes.ST_BAD_DTYPE, `tensor "${r.name}" has unsupported dtype "${r.dtype}"`, { tensor: r.name, value: r.dtype, expected: Object.keys(ST_DTYPE_SIZE) });
  }
  const spans = raws.map((r) => {
    let count = 1n;
    for (const d of r.shape) count *= BigInt(d);
    const bytes = count * BigInt(ST_DTYPE_SIZE[r.dtype]);
    if (bytes > BigInt(Number.MAX_SAFE_INTEGER)) {
      bad(ErrorCodes.ST_SHAPE_OVERFLOW, `tensor "${r.name}" of shape [${r.shape}] is too large`, { tensor: r.name, value: r.shape, expected: `at most ${Number.MAX_SAFE_INTEGER} bytes` });
    }
    return Number(bytes);
  });
  raws.forEach((r, i) => {
    if (r.end - r.begin !== spans[i]) {
      bad(ErrorCodes.ST_BAD_SPAN, `tensor "${r.name}" ${r.dtype}[${r.shape}] needs ${spans[i]} bytes but data_offsets [${r.begin}, ${r.end}] span ${r.end - r.begin}`, {
        tensor: r.name, value: [r.begin, r.end], expected: spans[i],
      });
    }
  });
  const sorted = [...raws].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let at = 0;
  for (const r of sorted) {
    if (r.begin !== at) {
      bad(ErrorCodes.ST_BAD_OFFSETS, `tensor "${r.name}" starts at ${r.begin} but ${at === 0 ? 'data must start at 0' : `the previous tensor ends at ${at}`} (${r.begin < at ? 'overlap' : 'gap'})`, {
        tensor: r.name, value: r.begin, expected: at,
      });
    }
    at = r.end;
  }
  const dataStart = 8 + n;
  if (dataStart + at > size) bad(ErrorCodes.ST_DATA_PAST_END, `tensor data ends at ${dataStart + at}, past the end of the ${size}-byte file`, { value: dataStart + at, expected: `<= ${size}` });
  if (dataStart + at < size) bad(ErrorCodes.ST_TRAILING, `${size - dataStart - at} bytes after the end of the tensor data`, { value: size, expected: dataStart + at });

  const tensors = raws.map((r) => ({ name: r.name, dtype: r.dtype, shape: r.shape.slice(), offset: dataStart + r.begin, byteLength: r.end - r.begin }));
  return { dataStart, tensors, metadata };
}

export async function openSafetensors(src: ByteSource, opts: SafetensorsOptions = {}): Promise<Checkpoint> {
  const h = await readSafetensorsHeader(src);
  return newCheckpoint(src.name, h.tensors.map((info) => ({ info, src })), h.metadata, opts);
}

/** The checkpoint, with the small JSON states of bitsandbytes weights read first (bnb.ts). */
async function newCheckpoint(source: string, entries: TensorEntry[], metadata: Record<string, unknown>, opts: SafetensorsOptions): Promise<Checkpoint> {
  // Read at once: from a URL each is a range request, one per 4-bit weight.
  const wanted = entries.filter((e) => e.info.dtype === 'U8' && /\.quant_state\.bitsandbytes__(?:nf4|fp4)$/.test(e.info.name) && e.info.byteLength <= 1 << 20);
  const states = new Map(await Promise.all(wanted.map(async (e) => [e.info.name, await e.src.read(e.info.offset, e.info.byteLength)] as const)));
  return new SafetensorsCheckpoint(source, entries, metadata, opts, (e) => states.get(e.info.name));
}

/** The presented dtype of an NVFP4 weight: E2M1 codes, two per byte, with scales beside them. */
export const NVFP4_DTYPE = 'F4_E2M1';
/** Companions of NVFP4 weights: ModelOpt's per-tensor `<weight>_scale_2` (a factor), compressed-tensors' `<weight>_global_scale` (a divisor). */
export const NVFP4_SCALE_2_SUFFIX = '_scale_2';
export const NVFP4_GLOBAL_SUFFIX = '_global_scale';
const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];

/** How an NVFP4 weight decodes: an F8_E4M3 scale per 16 values of a row, times or over one fp32 value. */
interface Nvfp4Scale {
  block: TensorEntry;
  global: TensorEntry;
  divide: boolean;
  /** The global value, read once (a row-chunked read would otherwise fetch it for every chunk). */
  value?: Promise<number>;
}

/**
 * NVFP4 weights among the entries, presented under their weight names with dtype F4_E2M1 and
 * their logical shape (two values per stored byte): ModelOpt's `<w>` (U8) with `<w>_scale`
 * (F8_E4M3, one per 16 values) and `<w>_scale_2`, and compressed-tensors' `<w>_packed` with
 * `<w>_scale` and `<w>_global_scale`. Anything else passes unchanged, as do the U8 tensors of a
 * webquant output (named in its `webquant.quantization` metadata), which keeps the scales of the
 * NVFP4 weights it quantized beside them.
 */
function presentNvfp4(source: string, entries: TensorEntry[], ours: ReadonlySet<string>): { entries: TensorEntry[]; scales: Map<string, Nvfp4Scale> } {
  const byName = new Map(entries.map((e) => [e.info.name, e]));
  const scales = new Map<string, Nvfp4Scale>();
  const out = entries.map((e) => {
    const t = e.info;
    if (t.dtype !== 'U8' || t.shape.length < 2 || ours.has(t.name)) return e;
    const packed = t.name.endsWith('_packed');
    const name = packed ? t.name.slice(0, -'_packed'.length) : t.name;
    const block = byName.get(name + WEIGHT_SCALE_SUFFIX);
    const global = byName.get(name + (packed ? NVFP4_GLOBAL_SUFFIX : NVFP4_SCALE_2_SUFFIX));
    if (!block || !global || block.info.dtype !== 'F8_E4M3') return e;
    const cols = 2 * t.shape[t.shape.length - 1];
    const shape = [...t.shape.slice(0, -1), cols];
    const bs = block.info.shape, gs = global.info;
    const blockOk = bs.length === t.shape.length && bs.slice(0, -1).every((d, i) => d === t.shape[i]) && cols % 16 === 0 && bs[bs.length - 1] === cols / 16;
    if (!blockOk || numel(gs.shape) !== 1 || !['F32', 'BF16', 'F16'].includes(gs.dtype) || (packed && byName.has(name))) {
      fail(ErrorCodes.ST_SCALE, `[safetensors] ${source}: NVFP4 weight "${t.name}" U8[${t.shape}] does not fit its scales "${block.info.name}" ${block.info.dtype}[${bs}] and "${gs.name}" ${gs.dtype}[${gs.shape}]`, {
        file: t.file ?? source, tensor: t.name, value: { scale: bs, global: gs.shape },
        expected: `F8_E4M3 [${[...t.shape.slice(0, -1), cols / 16]}] (one per 16 values) and one F32, BF16 or F16 value${packed && byName.has(name) ? `, and no tensor "${name}" beside "${t.name}"` : ''}`,
      });
    }
    scales.set(name, { block, global, divide: packed });
    return { info: { ...t, name, dtype: NVFP4_DTYPE, shape }, src: e.src };
  });
  return { entries: out, scales };
}

/** The tensors a webquant output's metadata describes (its own quantized sections). */
function webquantTensors(metadata: Record<string, unknown>): Set<string> {
  const ours = new Set<string>();
  try {
    const q: unknown = parseJson(String(metadata['webquant.quantization'] ?? '{}'));
    if (isJsonObject(q)) for (const k of Object.keys(q)) ours.add(k);
  } catch {
    // not a webquant output (the serving API reports a malformed entry)
  }
  return ours;
}

/** The FP8 block-scale companion of a weight, DeepSeek-V3 style. */
export const SCALE_SUFFIX = '_scale_inv';
/** The FP8 scale companion of a weight in compressed-tensors checkpoints (the "-FP8" releases of llm-compressor). */
export const WEIGHT_SCALE_SUFFIX = '_scale';

/**
 * How an FP8 weight's scales apply (values are codes times scale): one for the tensor, one per
 * row (output channel), or one per block of the `block` tile.
 */
interface Fp8Scale {
  entry: TensorEntry;
  kind: 'tensor' | 'channel' | 'block';
}

class SafetensorsCheckpoint extends BaseCheckpoint {
  readonly format = 'safetensors' as const;
  private readonly block: [number, number];
  private readonly scales = new Map<string, Fp8Scale>();
  private readonly nvfp4: Map<string, Nvfp4Scale>;
  private readonly mlx: Map<string, MlxWeight>;
  private readonly bnb: Map<string, BnbWeight>;

  constructor(source: string, stored: TensorEntry[], metadata: Record<string, unknown>, opts: SafetensorsOptions, states: (e: TensorEntry) => Uint8Array | undefined) {
    const ours = webquantTensors(metadata);
    const fp4 = presentNvfp4(source, stored, ours);
    const mlx = presentMlx(source, fp4.entries, ours, opts.mlx);
    const bnb = presentBnb(source, mlx.entries, ours, states);
    super(source, bnb.entries, metadata);
    this.nvfp4 = fp4.scales;
    this.mlx = mlx.weights;
    this.bnb = bnb.weights;
    this.block = opts.fp8BlockSize ?? [128, 128];
    const [br, bc] = this.block;
    if (!(Number.isInteger(br) && br > 0 && Number.isInteger(bc) && bc > 0)) {
      fail(ErrorCodes.BAD_OPTION, `[safetensors] fp8BlockSize must be two positive integers but got ${JSON.stringify(this.block)}`, { option: 'fp8BlockSize', value: this.block });
    }
    for (const t of this.tensors) {
      if (!t.dtype.startsWith('F8_')) continue;
      // DeepSeek-V3's weight_scale_inv (block scales), or compressed-tensors' weight_scale (one,
      // one per output channel, or block scales).
      const inv = this.entries.get(t.name + SCALE_SUFFIX);
      const entry = inv ?? this.entries.get(t.name + WEIGHT_SCALE_SUFFIX);
      if (!entry) continue;
      const s = entry.info;
      const n = s.shape.reduce((a, b) => a * b, 1);
      const rows = t.shape.length === 2 ? t.shape[0] : undefined;
      const tile = t.shape.length === 2 ? [Math.ceil(t.shape[0] / br), Math.ceil(t.shape[1] / bc)] : undefined;
      const isBlock = tile !== undefined && s.shape.length === 2 && s.shape[0] === tile[0] && s.shape[1] === tile[1];
      // _scale_inv is always per block; weight_scale may also be one value or one per output row.
      const kind = !['F32', 'BF16', 'F16'].includes(s.dtype) ? undefined
        : inv ? (isBlock ? 'block' : undefined)
        : n === 1 ? 'tensor'
        : rows !== undefined && n === rows && (s.shape.length === 1 || (s.shape.length === 2 && s.shape[1] === 1)) ? 'channel'
        : isBlock ? 'block'
        : undefined;
      if (!kind) {
        fail(ErrorCodes.ST_SCALE, `[safetensors] ${source}: scales "${s.name}" ${s.dtype}[${s.shape}] do not fit the ${t.dtype}[${t.shape}] weight "${t.name}"`, {
          file: t.file ?? source, tensor: s.name, value: { dtype: s.dtype, shape: s.shape },
          expected: inv ? (tile ? `F32, BF16 or F16 [${tile}] (one per ${br} x ${bc} block)` : 'a 2-D weight')
            : `F32, BF16 or F16 of one value, [${rows ?? 'rows'}, 1] per output row${tile ? ` or [${tile}] per ${br} x ${bc} block` : ''}`,
        });
      }
      this.scales.set(t.name, { entry, kind });
    }
  }

  async readF32(name: string): Promise<Float32Array> {
    const info = this.tensor(name);
    if (info.dtype === NVFP4_DTYPE) return this.fp4(info, await this.readRaw(name), 0);
    if (info.dtype === MLX_DTYPE) return decodeMlx(this.mlx.get(name)!, info.shape[info.shape.length - 1], await this.readRaw(name), 0);
    if (info.dtype === BNB4_DTYPE || info.dtype === BNB8_DTYPE) return decodeBnb(this.bnb.get(name)!, await this.readRaw(name), 0, numel(info.shape), info.shape[info.shape.length - 1]);
    if (!FLOAT_DTYPES.has(info.dtype)) {
      fail(ErrorCodes.UNSUPPORTED_DTYPE, `[safetensors] ${this.source}: tensor "${name}" is ${info.dtype}, not a float type (use readRaw)`, {
        file: info.file ?? this.source, tensor: name, value: info.dtype, expected: [...FLOAT_DTYPES],
      });
    }
    const raw = await this.readRaw(name);
    return info.dtype.startsWith('F8_') ? this.fp8(info, raw, 0) : floatBytesToF32(raw, info.dtype, name);
  }

  /**
   * F32 / F16 / BF16 rows as stored; FP8 rows as f32 with their block scales applied (what
   * readF32 gives for those rows), reading only those rows and their rows of scales.
   */
  override async readRows(name: string, firstRow: number, rows: number): Promise<TensorValues> {
    const { info, src } = this.entry(name);
    if (info.dtype === NVFP4_DTYPE) {
      const cols = this.rowLength(name, firstRow, rows);
      return { values: await this.fp4(info, await src.read(info.offset + firstRow * cols / 2, rows * cols / 2), firstRow), dtype: 'f32' };
    }
    if (info.dtype === BNB4_DTYPE || info.dtype === BNB8_DTYPE) {
      const cols = this.rowLength(name, firstRow, rows);
      const first = firstRow * cols, count = rows * cols;
      // 4-bit: the bytes holding those codes (a row of odd length starts or ends mid-byte)
      const bytes = info.dtype === BNB8_DTYPE ? await src.read(info.offset + first, count) : await src.read(info.offset + (first >> 1), ((first + count + 1) >> 1) - (first >> 1));
      return { values: await decodeBnb(this.bnb.get(name)!, bytes, first, count, cols), dtype: 'f32' };
    }
    if (info.dtype === MLX_DTYPE) {
      const cols = this.rowLength(name, firstRow, rows);
      const w = this.mlx.get(name)!;
      const bytes = (cols * w.bits) / 8;
      return { values: await decodeMlx(w, cols, await src.read(info.offset + firstRow * bytes, rows * bytes), firstRow), dtype: 'f32' };
    }
    if (!info.dtype.startsWith('F8_')) return super.readRows(name, firstRow, rows);
    const cols = this.rowLength(name, firstRow, rows);
    return { values: await this.fp8(info, await src.read(info.offset + firstRow * cols, rows * cols), firstRow), dtype: 'f32' };
  }

  /**
   * NVFP4 codes (rows from `firstRow` on) as f32: code * (scale op global) per 16 values, in fp32
   * as the reference dequantizers compute it (the block factor first, then the product).
   */
  private async fp4(info: TensorInfo, codes: Uint8Array, firstRow: number): Promise<Float32Array> {
    const sc = this.nvfp4.get(info.name)!;
    const cols = info.shape[info.shape.length - 1];
    const rows = (codes.length * 2) / cols;
    const g = sc.global.info;
    sc.value ??= sc.global.src.read(g.offset, g.byteLength).then((b) => floatBytesToF32(b, g.dtype, g.name)[0]);
    const gv = await sc.value;
    const blocks = cols / 16;
    const b = sc.block.info;
    const bytes = await sc.block.src.read(b.offset + firstRow * blocks, rows * blocks);
    const f = new Float32Array(bytes.length);
    for (let i = 0; i < bytes.length; i++) f[i] = sc.divide ? E4M3_TO_F32[bytes[i]] / gv : E4M3_TO_F32[bytes[i]] * gv;
    const out = new Float32Array(codes.length * 2);
    for (let k = 0; k < f.length; k++) {
      const s = f[k];
      for (let i = k * 8; i < k * 8 + 8; i++) {
        const c = codes[i];
        out[2 * i] = E2M1[c & 15] * s;
        out[2 * i + 1] = E2M1[c >> 4] * s;
      }
    }
    return out;
  }

  /** FP8 codes (rows from `firstRow` on) as f32, times their scales if the weight has any. */
  private async fp8(info: TensorInfo, codes: Uint8Array, firstRow: number): Promise<Float32Array> {
    const table = info.dtype === 'F8_E4M3' ? E4M3_TO_F32 : E5M2_TO_F32;
    const out = new Float32Array(codes.length);
    const sc = this.scales.get(info.name);
    if (!sc || codes.length === 0) {
      for (let i = 0; i < codes.length; i++) out[i] = table[codes[i]];
      return out;
    }
    const s = sc.entry.info;
    const read = (from: number, count: number) => sc.entry.src.read(s.offset + from * (s.byteLength / numel(s.shape)), count * (s.byteLength / numel(s.shape)));
    const cols = info.shape[info.shape.length - 1];
    const rows = codes.length / cols;
    if (sc.kind !== 'block') {
      // One scale, or one per row: only those of these rows are read.
      const scale = floatBytesToF32(sc.kind === 'tensor' ? await read(0, 1) : await read(firstRow, rows), s.dtype, s.name);
      for (let r = 0; r < rows; r++) {
        const f = scale[sc.kind === 'tensor' ? 0 : r];
        for (let i = r * cols; i < (r + 1) * cols; i++) out[i] = table[codes[i]] * f;
      }
      return out;
    }
    const [br, bc] = this.block;
    const tiles = Math.ceil(cols / bc);
    // Only the scale rows these rows use.
    const s0 = Math.floor(firstRow / br), s1 = Math.floor((firstRow + rows - 1) / br) + 1;
    const scale = floatBytesToF32(await read(s0 * tiles, (s1 - s0) * tiles), s.dtype, s.name);
    // One pass, tile by tile, no division per value: a DeepSeek-V3 conversion decodes ~671G of them.
    for (let r = 0; r < rows; r++) {
      const srow = (Math.floor((firstRow + r) / br) - s0) * tiles;
      const base = r * cols;
      for (let t = 0, c0 = 0; t < tiles; t++, c0 += bc) {
        const f = scale[srow + t];
        const end = base + Math.min(c0 + bc, cols);
        for (let i = base + c0; i < end; i++) out[i] = table[codes[i]] * f;
      }
    }
    return out;
  }
}

/** A shard resolver: file name from weight_map -> its source (e.g. `(f) => fromUrl(base + f)`). */
export type ShardResolver = (file: string) => ByteSource | Promise<ByteSource>;

/**
 * A sharded checkpoint from `model.safetensors.index.json`. Every shard header is read (and
 * validated); tensors come in shard order, each in its shard's file order. Tensors a shard holds
 * but weight_map does not assign to it are left out.
 */
export async function openSafetensorsIndex(index: ByteSource, resolve: ShardResolver, opts: SafetensorsOptions = {}): Promise<Checkpoint> {
  const file = index.name;
  const bad = (msg: string, d: { tensor?: string; value?: unknown; expected?: unknown } = {}): never =>
    fail(ErrorCodes.ST_INDEX, `[safetensors] ${file}: ${msg}`, { file, ...d });
  const size = await index.size();
  if (size > ST_MAX_HEADER) bad(`index of ${size} bytes is larger than ${ST_MAX_HEADER}`, { value: size, expected: `<= ${ST_MAX_HEADER}` });
  const bytes = await index.read(0, size);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return bad('index is not valid UTF-8');
  }
  let json: unknown;
  try {
    json = parseJson(text);
  } catch (e) {
    return bad(`index is not JSON (${(e as Error).message})`);
  }
  const dup = findDuplicateKey(text);
  if (dup) fail(ErrorCodes.ST_DUPLICATE, `[safetensors] ${file}: duplicate key "${dup.key}"`, { file, tensor: dup.key, value: dup.key });
  if (!isJsonObject(json) || !isJsonObject(json.weight_map)) return bad('index has no weight_map object', { expected: '{ weight_map: { [tensor]: file } }' });
  const map = json.weight_map as Record<string, unknown>;
  const byShard = new Map<string, Set<string>>();
  for (const [tensor, shard] of Object.entries(map)) {
    if (typeof shard !== 'string' || shard === '' || shard.startsWith('/') || shard.split(/[\\/]/).some((p) => p === '..' || p === '')) {
      bad(`weight_map["${tensor}"] is not a relative file name`, { tensor, value: shard, expected: 'a shard file name such as model-00001-of-00002.safetensors' });
    }
    const why = badTensorName(tensor);
    if (why) fail(ErrorCodes.ST_BAD_NAME, `[safetensors] ${file}: weight_map has ${why}`, { file, tensor, value: tensor });
    let set = byShard.get(shard as string);
    if (!set) byShard.set(shard as string, (set = new Set()));
    set.add(tensor);
  }
  const shards = [...byShard.keys()];
  const headers = await Promise.all(shards.map(async (s) => {
    const src = await resolve(s);
    return { shard: s, src, header: await readSafetensorsHeader(src) };
  }));
  const entries: TensorEntry[] = [];
  const meta: [string, unknown][] = [];
  for (const { shard, src, header } of headers) {
    const want = byShard.get(shard)!;
    const have = new Set(header.tensors.map((t) => t.name));
    for (const t of want) {
      if (!have.has(t)) bad(`weight_map puts "${t}" in ${shard}, which has no such tensor`, { tensor: t, value: shard });
    }
    for (const t of header.tensors) if (want.has(t.name)) entries.push({ info: { ...t, file: shard }, src });
    meta.push(...Object.entries(header.metadata));
  }
  if (isJsonObject(json.metadata)) meta.push(...Object.entries(json.metadata));
  return newCheckpoint(file, entries, Object.fromEntries(meta), opts);
}
