import { describe, expect, it } from 'vitest';
import { evalWindows, evaluate, logSoftmax } from '../../src/eval/evaluate.js';
import { llamaConfig, type LlamaConfig } from '../../src/eval/llama.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';
import { lcg, mapSource, naiveForward, naiveLogSoftmax, randomWeights } from './naive.js';

const config: LlamaConfig = llamaConfig({
  hidden_size: 8, intermediate_size: 12, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1,
  vocab_size: 16, rms_norm_eps: 1e-5, rope_theta: 10000, tie_word_embeddings: false,
});
const weights = randomWeights(config, 21);
const reference = { config, weights: mapSource(weights) };

// Documents of 2..14 tokens, each starting with BOS = 1.
function corpus(nDocs: number, seed = 4): Uint16Array {
  const rnd = lcg(seed);
  const out: number[] = [];
  for (let d = 0; d < nDocs; d++) {
    const n = 2 + Math.floor((rnd() + 1) * 6.5);
    out.push(1);
    for (let i = 1; i < n; i++) out.push(2 + Math.floor((rnd() + 1) * 7)); // 2..15
  }
  return Uint16Array.from(out);
}
const tokens = corpus(12);

/** Copy of the weights with one tensor scaled by (1 + noise). */
function perturbed(name: string, noise: number): Map<string, Float32Array> {
  const rnd = lcg(99);
  const m = new Map(weights);
  m.set(name, weights.get(name)!.map((v) => v * (1 + rnd(noise))));
  return m;
}

async function naiveStats(ref: Map<string, Float32Array>, cand: Map<string, Float32Array>, windows: number[][]) {
  let nllR = 0, nllC = 0, kl = 0, agree = 0, n = 0;
  for (const w of windows) {
    const a = await naiveForward(config, mapSource(ref), w.slice(0, -1));
    const b = await naiveForward(config, mapSource(cand), w.slice(0, -1));
    for (let p = 0; p + 1 < w.length; p++) {
      const la = naiveLogSoftmax(a.logits[p]), lb = naiveLogSoftmax(b.logits[p]);
      nllR -= la[w[p + 1]];
      nllC -= lb[w[p + 1]];
      kl += la.reduce((s, v, i) => s + Math.exp(v) * (v - lb[i]), 0);
      if (la.indexOf(Math.max(...la)) === lb.indexOf(Math.max(...lb))) agree++;
      n++;
    }
  }
  return { nllR: nllR / n, nllC: nllC / n, kl: kl / n, agree: agree / n, n };
}

function docsOf(t: Uint16Array): number[][] {
  const docs: number[][] = [];
  for (const v of t) { if (v === 1) docs.push([]); docs[docs.length - 1].push(v); }
  return docs;
}

describe('evaluate', () => {
  it('a model against itself: KL 0, top-1 agreement 1, no layer error', async () => {
    const r = await evaluate({ reference, candidate: mapSource(weights), tokens });
    const nPred = docsOf(tokens).reduce((a, d) => a + d.length - 1, 0);
    expect(r.documents).toBe(12);
    expect(r.reference.tokens).toBe(nPred);
    expect(r.klDivergence).toBe(0);
    expect(r.top1Agreement).toBe(1);
    expect(r.deltaNll).toBe(0);
    expect(r.candidate!.nll).toBe(r.reference.nll);
    expect(r.perLayer!.map((l) => [l.layer, l.rmse, l.maxAbsError])).toEqual([[0, 0, 0], [1, 0, 0]]);
    expect(r.perLayer![1].cosine).toBeCloseTo(1, 12);
  });

  it('NLL, KL and top-1 agree with a naive float64 computation; a perturbed copy has KL > 0', async () => {
    const cand = perturbed('model.layers.1.mlp.down_proj.weight', 0.5);
    const r = await evaluate({ reference, candidate: mapSource(cand), tokens });
    const want = await naiveStats(weights, cand, docsOf(tokens));
    expect(r.reference.nll).toBeCloseTo(want.nllR, 5);
    expect(r.reference.ppl).toBeCloseTo(Math.exp(want.nllR), 5);
    expect(r.candidate!.nll).toBeCloseTo(want.nllC, 5);
    expect(r.deltaNll).toBeCloseTo(want.nllC - want.nllR, 5);
    expect(r.klDivergence).toBeGreaterThan(1e-4);
    expect(r.klDivergence).toBeCloseTo(want.kl, 6);
    expect(r.top1Agreement).toBe(want.agree);
    // Only layer 1 was changed: the residual stream after layer 0 is untouched.
    expect(r.perLayer![0].rmse).toBe(0);
    expect(r.perLayer![1].rmse).toBeGreaterThan(0);
    expect(r.perLayer![1].cosine).toBeLessThan(1);
  });

  it('a perturbation in layer 0 shows in both layers, and more noise costs more', async () => {
    const small = await evaluate({ reference, candidate: mapSource(perturbed('model.layers.0.self_attn.v_proj.weight', 0.05)), tokens });
    const large = await evaluate({ reference, candidate: mapSource(perturbed('model.layers.0.self_attn.v_proj.weight', 0.5)), tokens });
    expect(small.perLayer!.every((l) => l.rmse > 0)).toBe(true);
    expect(large.klDivergence!).toBeGreaterThan(small.klDivergence!);
    expect(large.perLayer![0].rmse).toBeGreaterThan(small.perLayer![0].rmse);
  });

  it('cuts long documents into windows overlapping by one token, predicting every token once', async () => {
    const doc = Uint16Array.from([1, 3, 9, 4, 4, 12, 15, 2, 7, 8, 5, 11, 6]);
    const cand = perturbed('lm_head.weight', 0.3);
    const r = await evaluate({ reference, candidate: mapSource(cand), tokens: doc, contextLength: 5 });
    expect(r.reference.tokens).toBe(12);
    const wins = [[0, 5], [4, 9], [8, 13]].map(([a, b]) => Array.from(doc.subarray(a, b)));
    const want = await naiveStats(weights, cand, wins);
    expect(want.n).toBe(12);
    expect(r.reference.nll).toBeCloseTo(want.nllR, 5);
    expect(r.klDivergence).toBeCloseTo(want.kl, 6);
    // With the whole document in context the result differs.
    const whole = await evaluate({ reference, tokens: doc });
    expect(Math.abs(whole.reference.nll - r.reference.nll)).toBeGreaterThan(1e-6);
  });

  it('maxDocs, progress and no candidate', async () => {
    const seen: number[] = [];
    const r = await evaluate({ reference, tokens, maxDocs: 3, onProgress: (p) => { seen.push(p.documents); expect(p.totalDocuments).toBe(3); } });
    expect(seen).toEqual([1, 2, 3]);
    expect(r.documents).toBe(3);
    expect(r.candidate).toBeUndefined();
    expect(r.klDivergence).toBeUndefined();
    expect(r.perLayer).toBeUndefined();
    const want = await naiveStats(weights, weights, docsOf(tokens).slice(0, 3));
    expect(r.reference.nll).toBeCloseTo(want.nllR, 5);
  });

  it('perLayer: false leaves the layer comparison out', async () => {
    const r = await evaluate({ reference, candidate: mapSource(weights), tokens, perLayer: false });
    expect(r.perLayer).toBeUndefined();
    expect(r.klDivergence).toBe(0);
  });

  it('stops with E_ABORTED when the signal fires', async () => {
    const ac = new AbortController();
    const err = await evaluate({ reference, tokens, signal: ac.signal, onProgress: (p) => { if (p.documents === 2) ac.abort(); } }).catch((e) => e);
    expect(err).toBeInstanceOf(WebquantError);
    expect(err.code).toBe(ErrorCodes.ABORTED);
    expect(err.details.index).toBe(2);
    const before = await evaluate({ reference, tokens, signal: AbortSignal.abort() }).catch((e) => e);
    expect(before.code).toBe(ErrorCodes.ABORTED);
    expect(before.details.index).toBe(0);
  });

  it('validates its input', async () => {
    const code = (p: Promise<unknown>) => p.then(() => 'no error', (e) => (e as WebquantError).code);
    expect(await code(evaluate({ reference, tokens, contextLength: 1 }))).toBe(ErrorCodes.BAD_OPTION);
    expect(await code(evaluate({ reference, tokens, maxDocs: 0 }))).toBe(ErrorCodes.BAD_OPTION);
    expect(await code(evaluate({ reference, tokens: Uint16Array.from([1, 3, 16]) }))).toBe(ErrorCodes.BAD_INPUT);
    expect(await code(evaluate({ reference, tokens: Uint16Array.from([3, 1, 3]) }))).toBe(ErrorCodes.BAD_INPUT);
    expect(await code(evaluate({ reference, tokens: Uint16Array.from([1, 1]) }))).toBe(ErrorCodes.BAD_INPUT);
    expect(await code(evaluate({ reference, tokens: [1, 2] as unknown as Uint16Array }))).toBe(ErrorCodes.BAD_INPUT);
  });

  it('refuses a missing or malformed reference, candidate or bos with a WebquantError naming the option', async () => {
    const bad = (opts: Record<string, unknown>, code: string, option: string) =>
      expect(evaluate({ reference, tokens, ...opts } as Parameters<typeof evaluate>[0]), option).rejects.toMatchObject({ name: 'WebquantError', code, details: { option } });
    await bad({ reference: undefined }, ErrorCodes.BAD_INPUT, 'reference');
    await bad({ reference: { weights: reference.weights } }, ErrorCodes.BAD_INPUT, 'reference');
    await bad({ candidate: null }, ErrorCodes.BAD_INPUT, 'candidate');
    for (const bos of [NaN, 1.5, -1, '1', config.vocab_size]) await bad({ bos }, ErrorCodes.BAD_OPTION, 'bos');
  });

  it('logSoftmax is float64, normalised and returns the first argmax', () => {
    const out = new Float64Array(4);
    expect(logSoftmax(Float32Array.from([1, 3, 3, -1000]), out)).toBe(1);
    expect(out.reduce((a, v) => a + Math.exp(v), 0)).toBeCloseTo(1, 14);
    expect(out[3]).toBeLessThan(-1000);
  });
});

describe('evalWindows', () => {
  it('cuts each document into windows overlapping by one, so every token after the first is predicted once', () => {
    const docs = [1, 2, 4, 5, 10].map((n, d) => Uint16Array.from({ length: n }, (_, i) => 100 * d + i));
    const w = evalWindows(docs, 4);
    expect(w.map((x) => [x.doc, [...x.win]])).toEqual([
      [1, [100, 101]],
      [2, [200, 201, 202, 203]],
      [3, [300, 301, 302, 303]], [3, [303, 304]],
      [4, [400, 401, 402, 403]], [4, [403, 404, 405, 406]], [4, [406, 407, 408, 409]],
    ]);
    expect(w.reduce((a, x) => a + x.win.length - 1, 0)).toBe(docs.reduce((a, d) => a + Math.max(0, d.length - 1), 0));
    expect(() => evalWindows(docs, 1)).toThrow(/contextLength must be an integer >= 2/);
  });
});
