// llama-quantize's --prune-layers: blocks dropped from a GGUF (by its tensor names, blk.N.*), the
// blocks after them renumbered so that the rest stay consecutive, `<arch>.block_count` set to the
// blocks kept. A view of the checkpoint: the plan, the pipeline and the container see the pruned
// model, and each kept tensor is read from its old name.
import { ErrorCodes, fail } from '../errors.js';
import { renamedView, type Checkpoint, type TensorInfo } from '../io/checkpoint.js';
import type { GgufCheckpoint } from '../io/gguf.js';

const BLOCK = /^blk\.(\d+)\./;

/**
 * Old block index to new (undefined: pruned), as llama-quantize numbers them walking the blocks in
 * ascending order: blocks below the first pruned one keep their index, each later kept block takes
 * the next; `blockCount` is the index after the last one numbered.
 */
export function pruneMapping(blocks: Iterable<number>, prune: readonly number[]): { map: Map<number, number | undefined>; blockCount: number } {
  const pruned = new Set(prune);
  const first = Math.min(...prune);
  const map = new Map<number, number | undefined>();
  let next = 0;
  for (const b of [...new Set(blocks)].sort((x, y) => x - y)) {
    if (pruned.has(b)) map.set(b, undefined);
    else if (b < first) { map.set(b, b); next = b + 1; } else map.set(b, next++);
  }
  return { map, blockCount: next };
}

/** A tensor name with its block renumbered, or undefined for a pruned block's tensor. */
export function renameBlock(name: string, map: ReadonlyMap<number, number | undefined>): string | undefined {
  const m = BLOCK.exec(name);
  if (!m || !map.has(Number(m[1]))) return name;
  const to = map.get(Number(m[1]));
  return to === undefined ? undefined : `blk.${to}.${name.slice(m[0].length)}`;
}

export interface PrunedCheckpoint {
  checkpoint: Checkpoint;
  /** `<arch>.block_count` of the pruned model. */
  blockCount: number;
  map: ReadonlyMap<number, number | undefined>;
  /** Layers asked for that the checkpoint does not have. */
  missing: number[];
  /** The block count before pruning (largest block index + 1). */
  blocksBefore: number;
}

export function pruneLayers(input: Checkpoint, prune: readonly number[]): PrunedCheckpoint {
  if (!prune.length) fail(ErrorCodes.BAD_OPTION, '[prune] no layer to prune', { option: 'prune-layers' });
  const blocks = input.tensors.map((t) => BLOCK.exec(t.name)).filter((m): m is RegExpExecArray => !!m).map((m) => Number(m[1]));
  if (!blocks.length) {
    fail(ErrorCodes.BAD_OPTION, `[prune] ${input.source} has no blk.N tensors (GGUF names) to prune`, { file: input.source, option: 'prune-layers', value: prune });
  }
  const { map, blockCount } = pruneMapping(blocks, prune);
  const source = new Map<string, string>();
  const tensors: TensorInfo[] = [];
  for (const t of input.tensors) {
    const name = renameBlock(t.name, map);
    if (name === undefined) continue;
    source.set(name, t.name);
    tensors.push({ ...t, name });
  }
  const src = (name: string) => source.get(name) ?? fail(ErrorCodes.TENSOR_NOT_FOUND, `[prune] ${input.source}: no tensor named "${name}" after pruning`, { file: input.source, tensor: name });
  const view = renamedView(input, tensors, src);
  // A GGUF keeps what the container and --keep-split read from it (its keys, its files).
  const checkpoint = input.format === 'gguf'
    ? Object.assign(view, pickGguf(input as GgufCheckpoint))
    : view;
  return { checkpoint, blockCount, map, blocksBefore: blocks.reduce((a, b) => Math.max(a, b), 0) + 1, missing: [...new Set(prune)].filter((l) => !map.has(l)).sort((a, b) => a - b) };
}

function pickGguf(g: GgufCheckpoint): Partial<GgufCheckpoint> {
  return { version: g.version, alignment: g.alignment, dataOffset: g.dataOffset, kv: g.kv, ...(g.splits ? { splits: g.splits } : {}) };
}

/**
 * --prune-layers' value: comma-separated non-negative layer numbers, as llama-quantize parses it
 * (sorted, duplicates dropped).
 */
export function parsePruneLayers(v: string): number[] {
  const parts = v.split(',');
  const out = parts.map((p) => (/^\s*\d+\s*$/.test(p) ? Number(p) : NaN));
  const bad = parts.find((_p, i) => !Number.isSafeInteger(out[i]));
  if (bad !== undefined) {
    fail(ErrorCodes.BAD_OPTION, `[cli] --prune-layers "${v}": "${bad}" is not a layer number`, { option: 'prune-layers', value: v, expected: 'comma-separated layer numbers, e.g. 3,5,7' });
  }
  return [...new Set(out)].sort((a, b) => a - b);
}
