import { describe, expect, it } from 'vitest';
import { openGguf, type GgufCheckpoint } from '../../src/io/gguf.js';
import { writeGguf } from '../../src/io/gguf-writer.js';
import { fromBuffer } from '../../src/io/source.js';
import { collect } from '../../src/io/stream.js';
import { parsePruneLayers, pruneLayers, pruneMapping, renameBlock } from '../../src/convert/prune-layers.js';
import { resolvePlan } from '../../src/plan/plan.js';
import { getPreset } from '../../src/plan/presets.js';

// llama-quantize's --prune-layers (test/cli/llama-quantize-files.test.ts checks whole files
// against that tool's); here the numbering, the view and the option's parsing.

describe('--prune-layers', () => {
  it('numbers the kept blocks as llama-quantize does: below the first pruned unchanged, then consecutive', () => {
    const { map, blockCount } = pruneMapping([0, 1, 2, 3, 4, 5], [2, 4]);
    expect([...map]).toEqual([[0, 0], [1, 1], [2, undefined], [3, 2], [4, undefined], [5, 3]]);
    expect(blockCount).toBe(4);
    // A gap below the first pruned block stays; the count is the index after the last numbered.
    expect(pruneMapping([0, 3, 5, 6], [5]).blockCount).toBe(5);
    expect(pruneMapping([0, 1], [0, 1]).blockCount).toBe(0);
    expect([renameBlock('blk.5.ffn_up.weight', map), renameBlock('blk.4.attn_q.weight', map), renameBlock('output.weight', map), renameBlock('blk.9.x', map)])
      .toEqual(['blk.3.ffn_up.weight', undefined, 'output.weight', 'blk.9.x']);
  });

  it('a view without the blocks that reads each kept tensor from its old name and keeps the GGUF keys', async () => {
    const t = (name: string, v: number) => ({ name, ggmlType: 'F32' as const, shape: [2, 32], data: new Float32Array(64).fill(v) });
    const bytes = await collect(writeGguf({
      metadata: [{ key: 'general.architecture', type: 'string', value: 'llama' }],
      tensors: [t('token_embd.weight', 9), t('blk.0.attn_q.weight', 0), t('blk.1.attn_q.weight', 1), t('blk.2.attn_q.weight', 2), t('blk.10.attn_q.weight', 10)],
    }));
    const g = await openGguf(fromBuffer(bytes, 'in.gguf'));
    const p = pruneLayers(g, [1, 7]);
    expect(p.checkpoint.tensors.map((x) => x.name)).toEqual(['token_embd.weight', 'blk.0.attn_q.weight', 'blk.1.attn_q.weight', 'blk.2.attn_q.weight']);
    expect([...(await p.checkpoint.readF32('blk.2.attn_q.weight')).slice(0, 1), ...(await p.checkpoint.readF32('blk.1.attn_q.weight')).slice(0, 1)]).toEqual([10, 2]);
    expect([p.blockCount, p.blocksBefore, p.missing]).toEqual([3, 11, [7]]);
    expect((p.checkpoint as GgufCheckpoint).kv).toBe(g.kv);
    expect(p.checkpoint.tensor('blk.1.attn_q.weight').name).toBe('blk.1.attn_q.weight');
    expect(() => p.checkpoint.tensor('blk.3.attn_q.weight')).toThrow(/no tensor named "blk\.3\.attn_q\.weight" after pruning/);
  });

  it('FFN layer selectors divide the block count before pruning (ffnLayers), attn_v ones the count after', () => {
    const tensors = Array.from({ length: 7 }, (_, l) => [
      { name: `blk.${l}.attn_v.weight`, dtype: 'F32', shape: [256, 256] },
      { name: `blk.${l}.ffn_down.weight`, dtype: 'F32', shape: [256, 256] },
    ]).flat();
    const q6 = (r: ReturnType<typeof resolvePlan>, kind: string) => r.tensors.filter((x) => x.name.includes(kind) && x.scheme !== 'keep' && x.scheme.format === 'q6_k').map((x) => x.layer);
    const after = resolvePlan(getPreset('q4_k_m').plan, tensors);
    const before = resolvePlan(getPreset('q4_k_m').plan, tensors, { ffnLayers: 8 });
    // use_more_bits over 7 layers: 2, 5, 6; over 8: 0, 3, 6, 7 (layer 7 is gone).
    expect([q6(after, 'ffn_down'), q6(before, 'ffn_down'), q6(before, 'attn_v')]).toEqual([[2, 5, 6], [0, 3, 6], [2, 5, 6]]);
  });

  it('the option: comma-separated layer numbers, sorted and deduplicated; anything else named', () => {
    expect(parsePruneLayers('5,1, 3,5')).toEqual([1, 3, 5]);
    for (const v of ['', '1,,2', '-1', 'a', '1.5']) expect(() => parsePruneLayers(v), v).toThrow(/--prune-layers .* is not a layer number/);
  });
});
