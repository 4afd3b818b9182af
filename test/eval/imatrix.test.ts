// Importance matrices from the reference forward (src/eval/imatrix.ts): what each entry sums,
// checked against quantities computed here without the forward; the GGUF file it writes, read
// back by the reader that `quantize --imatrix` uses; per-expert matrices of a MoE model; and
// stories260K against the file llama.cpp's llama-imatrix writes for the same tokens.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { computeImatrix, imatrixCollector, imatrixGguf, mergeImatrixChunk, type ImatrixEntry } from '../../src/eval/imatrix.js';
import { checkpointWeights, llamaConfig, type LlamaConfig, type WeightSource } from '../../src/eval/llama.js';
import { writeGguf } from '../../src/io/gguf-writer.js';
import { openGguf } from '../../src/io/gguf.js';
import { fromBuffer } from '../../src/io/source.js';
import { collect } from '../../src/io/stream.js';
import { readImatrix } from '../../src/io/imatrix.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';
import { readTokens } from '../../src/eval/tokens.js';
import { readConfig } from '../../src/io/config.js';
import { fromPath } from '../../src/io/node.js';
import { openSafetensors } from '../../src/io/safetensors.js';
import { SHARED } from '../helpers/shared.js';
import { lcg, mapSource, randomWeights } from './naive.js';

const fixture = (name: string) => new Uint8Array(readFileSync(new URL(`./fixtures/${name}`, import.meta.url)));

const tiny = (over: Record<string, unknown> = {}): LlamaConfig => llamaConfig({
  hidden_size: 8, intermediate_size: 12, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1,
  vocab_size: 16, rms_norm_eps: 1e-5, rope_theta: 10000, tie_word_embeddings: false, ...over,
});

/** A token stream of `n` ids from 2..15 (no BOS: the chunks' first tokens become BOS). */
const stream = (n: number, seed: number) => {
  const r = lcg(seed);
  return Uint16Array.from({ length: n }, () => 2 + Math.floor((r() + 1) * 7));
};

describe('computeImatrix', () => {
  it("sums the squares of each projection's input per column: layer 0's attention input is the normed embedding", async () => {
    const c = tiny();
    const w = randomWeights(c, 3);
    const tokens = stream(3 * 10 + 4, 5); // three chunks of 10, four tokens left over
    const r = await computeImatrix({ config: c, weights: mapSource(w), tokens, contextLength: 10 });
    expect([r.chunks, r.chunkSize]).toEqual([3, 10]);
    // Everything the forward multiplies but the head, under GGUF names.
    expect([...r.entries.keys()].sort()).toEqual(['attn_k', 'attn_output', 'attn_q', 'attn_v', 'ffn_down', 'ffn_gate', 'ffn_up']
      .flatMap((t) => [0, 1].map((l) => `blk.${l}.${t}.weight`)).sort());
    for (const e of r.entries.values()) expect(e.counts).toEqual([30]);
    // q, k and v see the same input, as do gate and up.
    const s = (n: string) => r.entries.get(n)!.sums[0];
    for (const l of [0, 1]) {
      expect(s(`blk.${l}.attn_k.weight`)).toEqual(s(`blk.${l}.attn_q.weight`));
      expect(s(`blk.${l}.attn_v.weight`)).toEqual(s(`blk.${l}.attn_q.weight`));
      expect(s(`blk.${l}.ffn_up.weight`)).toEqual(s(`blk.${l}.ffn_gate.weight`));
    }
    // Layer 0's attention input: RMSNorm(embedding of the token) times input_layernorm, with
    // every chunk's first token read as BOS (1).
    const emb = w.get('model.embed_tokens.weight')!, g = w.get('model.layers.0.input_layernorm.weight')!;
    const want = new Float64Array(8);
    for (let i = 0; i < 30; i++) {
      const tok = i % 10 === 0 ? 1 : tokens[i];
      const x = emb.subarray(tok * 8, tok * 8 + 8);
      const rms = 1 / Math.sqrt(x.reduce((a, v) => a + v * v, 0) / 8 + 1e-5);
      for (let j = 0; j < 8; j++) want[j] += (x[j] * rms * g[j]) ** 2;
    }
    const got = s('blk.0.attn_q.weight');
    for (let j = 0; j < 8; j++) expect(Math.abs(got[j] - want[j]) / want[j], `column ${j}`).toBeLessThan(1e-5);
  });

  it('collects the output head only when asked; refuses a stream shorter than one chunk', async () => {
    const c = tiny({ tie_word_embeddings: true });
    const w = mapSource(randomWeights(c, 4));
    const tokens = stream(24, 6);
    const plain = await computeImatrix({ config: c, weights: w, tokens, contextLength: 12 });
    expect(plain.entries.has('output.weight')).toBe(false);
    const out = await computeImatrix({ config: c, weights: w, tokens, contextLength: 12, processOutput: true, maxChunks: 1 });
    expect(out.entries.get('output.weight')!.counts).toEqual([12]);
    // The head reads the final normed hidden state: not the input of any other matrix.
    expect(out.entries.get('output.weight')!.sums[0]).not.toEqual(out.entries.get('blk.1.attn_q.weight')!.sums[0]);
    const err = await computeImatrix({ config: c, weights: w, tokens: tokens.subarray(0, 11), contextLength: 12 }).catch((e) => e);
    expect(err).toBeInstanceOf(WebquantError);
    expect((err as WebquantError).code).toBe(ErrorCodes.BAD_INPUT);
    for (const bad of [{ maxChunks: 0 }, { maxChunks: 1.5 }, { contextLength: 1 }]) {
      const e = await computeImatrix({ config: c, weights: w, tokens, ...bad }).catch((x) => x);
      expect((e as WebquantError).code, JSON.stringify(bad)).toBe(ErrorCodes.BAD_OPTION);
    }
  });

  it("each chunk's sums start from zero and are merged in order: the totals are computeImatrix's bits", async () => {
    const c = tiny();
    const w = mapSource(randomWeights(c, 7));
    const tokens = stream(4 * 9, 8);
    const whole = await computeImatrix({ config: c, weights: w, tokens, contextLength: 9 });
    const col = await imatrixCollector({ config: c, weights: w });
    const parts = [0, 1, 2, 3].map((i) => col.chunk(tokens.subarray(i * 9, (i + 1) * 9)));
    const totals = new Map<string, ImatrixEntry>();
    for (const p of parts) mergeImatrixChunk(totals, p);
    expect([...totals.keys()].sort()).toEqual([...whole.entries.keys()].sort());
    for (const [name, e] of whole.entries) {
      expect(totals.get(name)!.sums, name).toEqual(e.sums);
      expect(totals.get(name)!.counts, name).toEqual(e.counts);
    }
    for (const e of parts[2].values()) expect(e.counts).toEqual([9]);
    // A fresh collector gives chunk 2 the same sums: nothing carries over from earlier chunks.
    const again = (await imatrixCollector({ config: c, weights: w })).chunk(tokens.subarray(18, 27));
    for (const [name, e] of parts[2]) expect(again.get(name)!.sums, name).toEqual(e.sums);
    // Totals of another shape are refused, naming the tensor.
    const other = new Map([['blk.0.attn_q.weight', { cols: 3, sums: [new Float64Array(3)], counts: [1] }]]);
    const err = (() => { try { mergeImatrixChunk(totals, other); } catch (e) { return e; } })();
    expect((err as WebquantError).code).toBe(ErrorCodes.MODEL);
    expect((err as Error).message).toContain('blk.0.attn_q.weight');
  });

  it('MoE: one matrix per expert, each summed over the positions routed to it; the file reads back as per-expert means', async () => {
    const c = llamaConfig({ model_type: 'mixtral', hidden_size: 8, intermediate_size: 6, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, vocab_size: 16, rms_norm_eps: 1e-5, rope_theta: 10000, num_local_experts: 4, num_experts_per_tok: 2, tie_word_embeddings: false });
    const r = lcg(9);
    const rand = (n: number, s: number) => Float32Array.from({ length: n }, () => r(s));
    const weights = new Map<string, Float32Array>();
    const src: WeightSource = {
      async get(name) {
        if (!weights.has(name)) {
          const size = name.endsWith('layernorm.weight') || name === 'model.norm.weight' ? 8
            : name.includes('block_sparse_moe.gate.') ? 4 * 8
            : name.includes('.w2.') ? 8 * 6 : name.includes('.w1.') || name.includes('.w3.') ? 6 * 8
            : name.includes('embed_tokens') || name === 'lm_head.weight' ? 16 * 8
            : name.includes('q_proj') || name.includes('o_proj') ? 8 * 8 : 4 * 8;
          weights.set(name, name.endsWith('norm.weight') ? rand(size, 0.2).map((v) => 1 + v) : rand(size, 0.7));
        }
        return weights.get(name)!;
      },
    };
    const tokens = stream(2 * 16, 11);
    const res = await computeImatrix({ config: c, weights: src, tokens, contextLength: 16 });
    const gate = res.entries.get('blk.0.ffn_gate_exps.weight')!, down = res.entries.get('blk.0.ffn_down_exps.weight')!;
    const router = res.entries.get('blk.0.ffn_gate_inp.weight')!;
    expect(gate.sums).toHaveLength(4);
    expect(router.counts).toEqual([32]);
    // Every position goes to two experts: the experts' counts add up to twice the positions, and
    // their sums to twice the router's (which sees every position's same input).
    expect(gate.counts.reduce((a, b) => a + b, 0)).toBe(64);
    expect(gate.counts.filter((n) => n > 0).length).toBeGreaterThan(1);
    for (let j = 0; j < 8; j++) {
      const total = gate.sums.reduce((a, s) => a + s[j], 0);
      expect(Math.abs(total - 2 * router.sums[0][j]) / total).toBeLessThan(1e-12);
    }
    expect(down.cols).toBe(6);
    // Written as llama.cpp's imatrix GGUF, read back as the quantizers' per-column means.
    const file = await collect(writeGguf(imatrixGguf(res, 'calib.u16')));
    const g = await openGguf(fromBuffer(file, 'im.gguf'));
    expect(g.metadata['general.type']).toBe('imatrix');
    expect(g.metadata['imatrix.chunk_count']).toBe(2);
    expect(g.tensor('blk.0.ffn_gate_exps.weight.in_sum2').shape).toEqual([4, 8]);
    expect(g.tensor('blk.0.ffn_gate_exps.weight.counts').shape).toEqual([4, 1]);
    const means = (await readImatrix(fromBuffer(file, 'im.gguf'))).get('blk.0.ffn_gate_exps.weight')!;
    expect(means).toHaveLength(32);
    for (let e = 0; e < 4; e++) {
      for (let j = 0; j < 8; j++) {
        const want = gate.counts[e] > 0 ? Math.fround(gate.sums[e][j]) / gate.counts[e] : 1;
        expect(means[e * 8 + j]).toBeCloseTo(want, 6);
      }
    }
  });
});

describe('computeImatrix against llama.cpp', () => {
  it("gives llama-imatrix's importance for stories260K (float32 forward there, float64 here: within 5e-5)", async () => {
    const MODEL = join(SHARED, 'models/stories260K');
    const cfg = fromPath(join(MODEL, 'config.json'));
    const model = fromPath(join(MODEL, 'model.safetensors'));
    try {
      const config = llamaConfig(await readConfig(cfg));
      const tokens = readTokens(fixture('llama-imatrix-calib.u16'));
      const res = await computeImatrix({ config, weights: checkpointWeights(await openSafetensors(model)), tokens, contextLength: 256 });
      const ours = await readImatrix(fromBuffer(await collect(writeGguf(imatrixGguf(res, 'calib.u16'))), 'ours.gguf'));
      const theirs = await readImatrix(fromBuffer(fixture('llama-imatrix-stories260k.gguf'), 'llama-imatrix-stories260k.gguf'));
      expect([ours.chunks, theirs.chunks]).toEqual([20, 20]);
      expect([...ours.keys()].sort()).toEqual([...theirs.keys()].sort());
      expect(ours.size).toBe(35);
      for (const [name, want] of theirs) {
        const got = ours.get(name)!;
        expect(got.length, name).toBe(want.length);
        let worst = 0;
        for (let j = 0; j < want.length; j++) worst = Math.max(worst, Math.abs(got[j] - want[j]) / want[j]);
        expect(worst, name).toBeLessThan(5e-5);
      }
    } finally {
      await Promise.all([cfg.close(), model.close()]);
    }
  });
});
