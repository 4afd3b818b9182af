// MLX checkpoints (mlx_lm convert -q, the mlx-community releases) read as their values: a module's
// `<m>.weight` (U32 words of codes), `<m>.scales` and `<m>.biases` (one per group) become one
// float weight `<m>.weight` with dtype MLX_AFFINE, whose reads (readF32, readRows) give
// scale * q + bias per value in f32, as MLX's kernels compute it. Group size and bits come from
// config.json's "quantization" (a default and per-module entries); without it they are inferred
// from the shapes where only one pair fits.
import { ErrorCodes, fail } from '../errors.js';
import { numel, type TensorEntry } from './checkpoint.js';
import { floatBytesToF32 } from './dtypes.js';

/** The presented dtype of an MLX affine weight. */
export const MLX_DTYPE = 'MLX_AFFINE';

export interface MlxSettings { groupSize: number; bits: number }

/** config.json's "quantization" of an MLX checkpoint: the default, and modules that differ (false: not quantized). */
export interface MlxQuantization extends MlxSettings {
  modules?: Record<string, MlxSettings | false>;
}

export interface MlxWeight extends MlxSettings {
  scales: TensorEntry;
  biases: TensorEntry;
}

const BITS = [2, 3, 4, 5, 6, 8];
const GROUPS = [32, 64, 128];
const SCALE_DTYPES = ['F16', 'BF16', 'F32'];

/** MLX's "quantization" entry of a config.json, or undefined when it is absent or not affine. */
export function mlxQuantizationOf(raw: Record<string, unknown>): MlxQuantization | undefined {
  const q = raw.quantization;
  if (typeof q !== 'object' || q === null || Array.isArray(q)) return undefined;
  const o = q as Record<string, unknown>;
  if (o.mode !== undefined && o.mode !== 'affine') return undefined;
  const settings = (v: unknown): MlxSettings | undefined => {
    const s = v as Record<string, unknown>;
    return typeof s === 'object' && s !== null && GROUPS.includes(s.group_size as number) && BITS.includes(s.bits as number)
      ? { groupSize: s.group_size as number, bits: s.bits as number } : undefined;
  };
  const def = settings(o);
  if (!def) return undefined;
  const modules: Record<string, MlxSettings | false> = {};
  for (const [k, v] of Object.entries(o)) {
    if (k === 'group_size' || k === 'bits' || k === 'mode') continue;
    const s = v === false ? false : settings(v);
    if (s !== undefined) modules[k] = s;
  }
  return { ...def, modules };
}

/**
 * The MLX weights among the entries, presented as MLX_AFFINE with their logical shape; their
 * .scales and .biases are folded into them. `ours` are the tensors of a webquant output, which
 * its own metadata describes (left as stored).
 */
export function presentMlx(source: string, entries: TensorEntry[], ours: ReadonlySet<string>, q: MlxQuantization | undefined): { entries: TensorEntry[]; weights: Map<string, MlxWeight> } {
  const byName = new Map(entries.map((e) => [e.info.name, e]));
  const weights = new Map<string, MlxWeight>();
  const folded = new Set<string>();
  const out: TensorEntry[] = [];
  for (const e of entries) {
    const t = e.info;
    const mod = t.name.endsWith('.weight') ? t.name.slice(0, -'.weight'.length) : undefined;
    const scales = mod && byName.get(`${mod}.scales`);
    const biases = mod && byName.get(`${mod}.biases`);
    if (t.dtype !== 'U32' || t.shape.length < 2 || ours.has(t.name) || !scales || !biases) {
      out.push(e);
      continue;
    }
    const s = scales.info, b = biases.info;
    const words = t.shape[t.shape.length - 1], groups = s.shape[s.shape.length - 1];
    const lead = t.shape.slice(0, -1);
    const fits = (x: MlxSettings) => groups * x.groupSize * x.bits === words * 32;
    const given = q?.modules?.[mod] ?? q;
    let set: MlxSettings | undefined;
    if (given) set = given;
    else {
      const all = GROUPS.flatMap((groupSize) => BITS.map((bits) => ({ groupSize, bits }))).filter(fits);
      if (all.length !== 1) {
        fail(ErrorCodes.ST_SCALE, `[safetensors] ${source}: MLX weight "${t.name}" U32[${t.shape}] with ${groups} groups per row fits ${all.length ? all.map((x) => `${x.bits} bits in groups of ${x.groupSize}`).join(' or ') : 'no group size and bit width MLX has'}; config.json's "quantization" says which`, {
          file: t.file ?? source, tensor: t.name, value: { weight: t.shape, scales: s.shape }, expected: 'config.json with "quantization": {"group_size", "bits"}',
        });
      }
      set = all[0];
    }
    const sameLead = (x: number[]) => x.length === t.shape.length && x.slice(0, -1).every((d, i) => d === lead[i]);
    if (!fits(set) || !sameLead(s.shape) || !sameLead(b.shape) || b.shape[b.shape.length - 1] !== groups || !SCALE_DTYPES.includes(s.dtype) || b.dtype !== s.dtype) {
      fail(ErrorCodes.ST_SCALE, `[safetensors] ${source}: MLX weight "${t.name}" U32[${t.shape}] does not fit its scales "${s.name}" ${s.dtype}[${s.shape}] and biases "${b.name}" ${b.dtype}[${b.shape}] at ${set.bits} bits in groups of ${set.groupSize}`, {
        file: t.file ?? source, tensor: t.name, value: { weight: t.shape, scales: s.shape, biases: b.shape, bits: set.bits, groupSize: set.groupSize },
        expected: `F16, BF16 or F32 scales and biases [${[...lead, (words * 32) / set.bits / set.groupSize]}]`,
      });
    }
    weights.set(t.name, { ...set, scales, biases });
    folded.add(s.name).add(b.name);
    out.push({ info: { ...t, dtype: MLX_DTYPE, shape: [...lead, (words * 32) / set.bits] }, src: e.src });
  }
  return { entries: out.filter((e) => !folded.has(e.info.name)), weights };
}

/** Values of `rows` rows from `firstRow` on, from their code bytes: scale * q + bias in f32. */
export async function decodeMlx(w: MlxWeight, cols: number, codes: Uint8Array, firstRow: number): Promise<Float32Array> {
  const rows = codes.length / ((cols * w.bits) / 8);
  const perRow = cols / w.groupSize;
  const read = async (x: TensorEntry) => {
    const size = x.info.byteLength / numel(x.info.shape);
    return floatBytesToF32(await x.src.read(x.info.offset + firstRow * perRow * size, rows * perRow * size), x.info.dtype, x.info.name);
  };
  const [scales, biases] = await Promise.all([read(w.scales), read(w.biases)]);
  const out = new Float32Array(rows * cols);
  const mask = (1 << w.bits) - 1;
  const f = Math.fround;
  // Codes are one little-endian bit stream (u32 words for 2/4/8 bits, 3- and 5-byte packs for 3,
  // 5 and 6 bits: the same stream); every group starts on a byte.
  for (let g = 0, i = 0, bit = 0; g < scales.length; g++) {
    const s = scales[g], b = biases[g];
    for (const end = i + w.groupSize; i < end; i++, bit += w.bits) {
      const at = bit >> 3;
      out[i] = f(f(s * (((codes[at] | (codes[at + 1] << 8)) >> (bit & 7)) & mask)) + b);
    }
  }
  return out;
}
