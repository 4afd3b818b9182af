// The llama-quantize options of `webquant quantize` that need more than a plan rule: metadata
// overrides, imatrix entry selection, split output, tensor-type files, requantization, and the
// imatrix names after --prune-layers.
import { readFile } from 'node:fs/promises';
import { ErrorCodes, fail } from '../errors.js';
import type { GgufWriteKV } from '../io/gguf-writer.js';
import { ggmlType } from '../io/ggml-types.js';
import type { Imatrix } from '../io/imatrix.js';
import type { GgufSplit } from '../pipeline/container.js';
import type { PlannedTensor } from '../plan/types.js';
import { renameBlock } from '../convert/prune-layers.js';
import { absPath } from './input.js';
import type { CliIO } from './io.js';
import type { QuantizeArgs } from './quantize.js';

/**
 * llama-quantize's --override-kv KEY=TYPE:VALUE: `int` is written as u32 of its magnitude, `float`
 * as f32, `bool` (true / false) and `str` as themselves, as that tool writes them.
 */
export function parseKvOverride(spec: string): GgufWriteKV {
  const eq = spec.indexOf('=');
  const m = eq > 0 ? /^(int|float|bool|str):([\s\S]*)$/.exec(spec.slice(eq + 1)) : null;
  const bad = (why: string): never => fail(ErrorCodes.BAD_OPTION, `[cli] --override-kv "${spec}": ${why}`, { option: 'override-kv', value: spec, expected: 'KEY=int:N, KEY=float:X, KEY=bool:true|false or KEY=str:TEXT' });
  if (!m) return bad('expected KEY=TYPE:VALUE with TYPE int, float, bool or str');
  const key = spec.slice(0, eq), [, type, v] = m;
  if (type === 'str') return { key, type: 'string', value: v };
  if (type === 'bool') return v === 'true' || v === 'false' ? { key, type: 'bool', value: v === 'true' } : bad(`"${v}" is not true or false`);
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n)) return bad(`"${v}" is not a number`);
  if (type === 'float') return { key, type: 'f32', value: n };
  if (!Number.isInteger(n) || Math.abs(n) > 0xffffffff) return bad(`"${v}" is not an integer that fits 32 bits`);
  return { key, type: 'u32', value: Math.abs(n) };
}

/**
 * llama-quantize's --include-weights / --exclude-weights: the imatrix entries whose names contain
 * one of the given strings are the only ones used / are not used (not both at once).
 */
export function selectWeights(m: Imatrix, include: readonly string[] = [], exclude: readonly string[] = []): Imatrix {
  if (include.length && exclude.length) {
    fail(ErrorCodes.BAD_OPTION, '[cli] quantize: --include-weights and --exclude-weights cannot be used together', { option: 'include-weights', value: { include, exclude } });
  }
  const hit = (name: string, list: readonly string[]) => list.some((s) => name.includes(s));
  for (const name of [...m.keys()]) if (include.length ? !hit(name, include) : hit(name, exclude)) m.delete(name);
  return m;
}

/** --keep-split, --split-max-tensors, --split-max-size and --no-tensor-first-split as a GgufSplit. */
export function splitOption(a: Pick<QuantizeArgs, 'keepSplit' | 'splitMaxTensors' | 'splitMaxSize' | 'noTensorFirstSplit'>, kind: 'gguf' | 'safetensors'): GgufSplit | undefined {
  const given = [a.keepSplit && 'keep-split', a.splitMaxTensors !== undefined && 'split-max-tensors', a.splitMaxSize !== undefined && 'split-max-size', a.noTensorFirstSplit && 'no-tensor-first-split'].filter((x): x is string => !!x);
  if (!given.length) return undefined;
  if (kind !== 'gguf') fail(ErrorCodes.BAD_OPTION, `[cli] quantize: --${given[0]} splits a GGUF output; -o names ${kind}`, { option: given[0], expected: '-o <file>.gguf' });
  if (a.keepSplit) {
    if (given.length > 1) fail(ErrorCodes.BAD_OPTION, `[cli] quantize: --keep-split splits the output as the input is split; it cannot go with --${given[1]}`, { option: given[1] });
    return { by: 'input' };
  }
  let maxBytes: number | undefined;
  if (a.splitMaxSize !== undefined) {
    const m = /^\s*(\d+(?:\.\d+)?)\s*([MG])\s*$/i.exec(a.splitMaxSize);
    maxBytes = m ? Math.floor(Number(m[1]) * (m[2].toUpperCase() === 'G' ? 1e9 : 1e6)) : 0;
    if (!(maxBytes >= 1)) {
      fail(ErrorCodes.BAD_OPTION, `[cli] quantize: --split-max-size must be a positive size in M or G (decimal megabytes or gigabytes, as llama-gguf-split) but is "${a.splitMaxSize}"`, { option: 'split-max-size', value: a.splitMaxSize, expected: 'N(M|G), e.g. 4G' });
    }
  }
  return { by: 'limit', ...(a.splitMaxTensors !== undefined ? { maxTensors: a.splitMaxTensors } : {}), ...(maxBytes !== undefined ? { maxBytes } : {}), ...(a.noTensorFirstSplit ? { firstWithoutTensors: true } : {}) };
}

/** --tensor-type-file: its whitespace-separated values where the file stands among the --tensor-type values, as llama-quantize reads it. */
export async function expandTensorTypes(list: QuantizeArgs['tensorTypes'], io: CliIO): Promise<string[] | undefined> {
  if (!list) return undefined;
  const out: string[] = [];
  for (const x of list) {
    if (typeof x === 'string') { out.push(x); continue; }
    const p = absPath(x.file, io);
    const text = await readFile(p, 'utf8').catch((e) => fail(ErrorCodes.IO, `[cli] cannot read the --tensor-type-file ${x.file}: ${(e as Error).message}`, { file: p, option: 'tensor-type-file' }));
    out.push(...text.split(/\s+/).filter(Boolean));
  }
  return out;
}

/**
 * A warning for tensors stored in a GGUF block type that the plan quantizes again: they are
 * dequantized first, and the errors add up (llama-quantize refuses this without --allow-requantize).
 */
export function requantized(tensors: readonly PlannedTensor[]): string | undefined {
  const hit = tensors.filter((t) => t.scheme !== 'keep' && (ggmlType(t.dtype)?.blockSize ?? 1) > 1);
  if (!hit.length) return undefined;
  const types = [...new Set(hit.map((t) => t.dtype))].join(', ');
  return `${hit.length} tensor${hit.length > 1 ? 's are' : ' is'} stored quantized (${types}) and quantized again from their dequantized values: the errors add up; quantize from the 16- or 32-bit original where you can (--allow-requantize says you know; llama-quantize refuses without it)`;
}

/** Imatrix entries under their blocks' numbers after --prune-layers (a pruned block's dropped). */
export function renameEntries(m: ReadonlyMap<string, Float32Array>, map: ReadonlyMap<number, number | undefined>): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  for (const [name, v] of m) {
    const to = renameBlock(name, map);
    if (to !== undefined) out.set(to, v);
  }
  return out;
}
