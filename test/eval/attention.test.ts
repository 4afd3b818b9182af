// The reference forward's attention: the wasm products (both builds) against the plain loops,
// bit for bit, across the shapes the kernels split differently (position runs of 8 and the
// rest, head dims of 8 and the rest), GQA, sliding windows, soft caps, sinks and MLA's value dims.
import { describe, expect, it } from 'vitest';
import { attention, attentionReference, type AttentionArgs } from '../../src/eval/attention.js';
import type { Dims } from '../../src/eval/config.js';
import { loadKernels } from '../../src/kernels/loader.js';
import { lcg } from './naive.js';

function dims(heads: number, kvHeads: number, headDim: number, vHeadDim = headDim): Dims {
  return {
    dim: 0, ffn: 0, layers: 1, vocab: 0, heads, kvHeads, headDim, vHeadDim,
    qDim: heads * headDim, kvDim: kvHeads * headDim, attDim: heads * vHeadDim,
  };
}

function args(n: number, d: Dims, seed: number, over: Partial<AttentionArgs> = {}): AttentionArgs {
  const r = lcg(seed);
  const f = (len: number, s: number) => Float32Array.from({ length: len }, () => r() * s);
  return {
    q: f(n * d.qDim, 2), k: f(n * d.kvDim, 2), v: f(n * d.kvHeads * d.vHeadDim, 1), n, d,
    scale: 1 / Math.sqrt(d.headDim), window: n, att: new Float32Array(n * d.attDim), ...over,
  };
}

const CASES: { name: string; n: number; d: Dims; over?: Partial<AttentionArgs> }[] = [
  { name: 'MHA, head dim 16, 21 positions', n: 21, d: dims(2, 2, 16) },
  { name: 'GQA 4:2, head dim 6 (no SIMD group), 9 positions', n: 9, d: dims(4, 2, 6) },
  { name: 'GQA 6:1, head dim 64, 40 positions', n: 40, d: dims(6, 1, 64) },
  { name: 'sliding window 5 of 19 positions', n: 19, d: dims(2, 1, 8), over: { window: 5 } },
  { name: 'soft cap 0.5 (scores saturate)', n: 12, d: dims(2, 2, 10), over: { cap: 0.5 } },
  { name: 'sinks, window 3', n: 11, d: dims(3, 1, 8), over: { sinks: Float32Array.from([0.5, -4, 9]), window: 3 } },
  { name: 'MLA: value dims 12 against key dims 24', n: 10, d: dims(2, 2, 24, 12) },
  { name: 'one position', n: 1, d: dims(2, 1, 8) },
];

describe('attention', () => {
  for (const c of CASES) {
    it(`${c.name}: the wasm products give the reference's bits, both builds`, async () => {
      const ref = args(c.n, c.d, 7, c.over);
      attentionReference(ref);
      expect(ref.att.every(Number.isFinite)).toBe(true);
      for (const build of ['wasm-simd', 'wasm'] as const) {
        const a = args(c.n, c.d, 7, c.over);
        attention(await loadKernels(build, 'attention-test'), a);
        expect(Buffer.from(a.att.buffer).equals(Buffer.from(ref.att.buffer)), build).toBe(true);
      }
    });
  }

  it('is attention: one position attends to itself only, later ones average what they see', async () => {
    const d = dims(1, 1, 2);
    const a = args(3, d, 1, {
      q: Float32Array.from([0, 0, 0, 0, 0, 0]), k: new Float32Array(6), v: Float32Array.from([1, 2, 3, 4, 5, 6]), scale: 1,
    });
    attention(await loadKernels('wasm-simd', 'attention-test'), a);
    // Equal scores: position t averages the values of 0..t.
    expect(Array.from(a.att)).toEqual([1, 2, 2, 3, 3, 4]);
  });

  it('a larger context after a smaller one (the wasm memory grows), same bits', async () => {
    const kern = await loadKernels('wasm-simd', 'attention-test');
    for (const n of [4, 300]) {
      const ref = args(n, dims(2, 1, 32), n);
      attentionReference(ref);
      const a = args(n, dims(2, 1, 32), n);
      attention(kern, a);
      expect(Buffer.from(a.att.buffer).equals(Buffer.from(ref.att.buffer)), `n ${n}`).toBe(true);
    }
  });
});
