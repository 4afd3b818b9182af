import { describe, expect, it } from 'vitest';
import type { Checkpoint, TensorInfo } from '../../src/io/checkpoint.js';
import { buildJobs } from '../../src/pipeline/jobs.js';

// buildJobs only looks at the tensor list: a checkpoint without data is enough.
function headerOnly(infos: TensorInfo[]): Checkpoint {
  return { tensors: infos, tensor: (n: string) => infos.find((t) => t.name === n)! } as unknown as Checkpoint;
}

describe('buildJobs', () => {
  it('cuts a large tensor into units of at most 32 MiB whatever the budget, rows in order and complete', () => {
    // A vocabulary matrix of 32000 x 2304 BF16: 147 MB in, 78 MB of Q8_0 out.
    const info: TensorInfo = { name: 'lm_head.weight', dtype: 'BF16', shape: [32000, 2304], offset: 0, byteLength: 32000 * 2304 * 2 };
    const small: TensorInfo = { name: 'model.norm.weight', dtype: 'BF16', shape: [2304], offset: info.byteLength, byteLength: 4608 };
    const plan = [{ name: info.name, scheme: { format: 'q8_0' } }, { name: small.name, scheme: 'keep' as const }];
    for (const [budget, workers] of [[1 << 30, 1], [256 << 20, 2], [8 << 20, 2]]) {
      const [job] = buildJobs(headerOnly([info, small]), plan, budget, workers);
      const cap = Math.min(32 << 20, budget / workers);
      expect(job.units.length, `budget ${budget}, ${workers} workers`).toBeGreaterThanOrEqual(Math.ceil((32000 * (4608 + 2448)) / cap));
      let next = 0;
      for (const u of job.units) {
        expect(u.cost).toBeLessThanOrEqual(cap);
        expect(u.r0).toBe(next);
        next += u.rows;
      }
      expect(next).toBe(32000);
    }
    // A tensor under the cap stays one unit.
    const mid: TensorInfo = { ...info, name: 'model.layers.0.self_attn.q_proj.weight', shape: [2304, 2304], byteLength: 2304 * 2304 * 2 };
    const [one] = buildJobs(headerOnly([mid]), [{ name: mid.name, scheme: { format: 'q8_0' } }], 1 << 30, 1);
    expect(one.units.length).toBe(1);
  });
});
