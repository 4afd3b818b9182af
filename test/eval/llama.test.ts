import { describe, expect, it } from 'vitest';
import { deepseekPick, LlamaModel, checkpointWeights, llamaConfig, llamaTensorNames, matmulF32, type LlamaConfig, type WeightSource } from '../../src/eval/llama.js';
import { matmulExact } from '../../src/eval/matmul.js';
import { loadKernels } from '../../src/kernels/loader.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';
import { llama3RopeFactors } from '../../src/convert/arch/index.js';
import { yarnAttentionFactor } from '../../src/eval/mla.js';
import { lcg, mapSource, naiveForward, randomWeights } from './naive.js';

const tiny = (over: Partial<LlamaConfig> = {}): LlamaConfig => llamaConfig({
  hidden_size: 8, intermediate_size: 12, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1,
  vocab_size: 16, rms_norm_eps: 1e-5, rope_theta: 10000, tie_word_embeddings: false, ...over,
});

// 13 tokens exercise the 8-, 4- and 1-position paths of matmulF32.
const seq = [1, 5, 9, 3, 15, 0, 7, 7, 2, 11, 4, 13, 6];

async function expectMatchesNaive(c: LlamaConfig, seed: number) {
  const w = randomWeights(c, seed);
  const model = await LlamaModel.load(c, mapSource(w));
  const layers: Float32Array[] = [];
  const got = model.forward(seq, { onLayer: (_l, h) => layers.push(h.slice()) }).slice();
  const want = await naiveForward(c, mapSource(w), seq);
  let maxErr = 0, maxAbs = 0;
  for (let t = 0; t < seq.length; t++) {
    for (let i = 0; i < c.vocab_size; i++) {
      maxErr = Math.max(maxErr, Math.abs(got[t * c.vocab_size + i] - want.logits[t][i]));
      maxAbs = Math.max(maxAbs, Math.abs(want.logits[t][i]));
    }
  }
  expect(maxAbs).toBeGreaterThan(0.5); // the comparison is not vacuous
  // float32 storage against a float64 forward: a few float32 ulps of values of order 1.
  expect(maxErr).toBeLessThan(2e-5);
  expect(layers.length).toBe(c.num_hidden_layers);
  for (let l = 0; l < c.num_hidden_layers; l++) {
    for (let t = 0; t < seq.length; t++) {
      for (let i = 0; i < c.hidden_size; i++) expect(Math.abs(layers[l][t * c.hidden_size + i] - want.layers[l][t][i])).toBeLessThan(2e-5);
    }
  }
}

describe('Llama forward against a naive float64 implementation', () => {
  it('GQA (2 heads, 1 KV head), separate lm_head', () => expectMatchesNaive(tiny(), 7));
  it('tied embeddings, 4 heads / 2 KV heads, rope_theta 500000, eps 1e-6', () =>
    expectMatchesNaive(tiny({ num_attention_heads: 4, num_key_value_heads: 2, tie_word_embeddings: true, rope_theta: 500000, rms_norm_eps: 1e-6 }), 11));
  it('explicit head_dim different from hidden_size / heads, plain multi-head attention', () =>
    expectMatchesNaive(tiny({ head_dim: 6, num_key_value_heads: 2, num_hidden_layers: 3 }), 3));
});

describe('Llama forward properties', () => {
  it('is causal: the logits of a prefix equal the first rows of the whole window, bit for bit', async () => {
    const c = tiny();
    const model = await LlamaModel.load(c, mapSource(randomWeights(c, 5)));
    const full = model.forward(seq).slice();
    for (const n of [1, 4, 8, 9, 12]) {
      const part = model.forward(seq.slice(0, n));
      expect(Buffer.from(part.buffer, part.byteOffset, part.byteLength).equals(Buffer.from(full.buffer, full.byteOffset, n * c.vocab_size * 4))).toBe(true);
    }
  });

  it('uses matvec instead of get() for projections and the head when the source has one', async () => {
    const c = tiny({ tie_word_embeddings: true });
    const w = randomWeights(c, 9);
    const plain = (await LlamaModel.load(c, mapSource(w))).forward(seq).slice();
    const gets: string[] = [];
    const mvNames = new Set<string>();
    const src: WeightSource = {
      async get(name) { gets.push(name); return w.get(name)!; },
      matvec(name, x) {
        mvNames.add(name);
        const m = w.get(name)!;
        const rows = m.length / x.length;
        const y = new Float32Array(rows);
        for (let r = 0; r < rows; r++) { let s = 0; for (let i = 0; i < x.length; i++) s += m[r * x.length + i] * x[i]; y[r] = s; }
        return y;
      },
    };
    const viaHook = (await LlamaModel.load(c, src)).forward(seq);
    // Same products summed in the same order: identical logits.
    expect(Array.from(viaHook)).toEqual(Array.from(plain));
    expect(gets.filter((n) => n.endsWith('_proj.weight'))).toEqual([]);
    expect(mvNames.has('model.embed_tokens.weight')).toBe(true); // tied head
    expect(mvNames.size).toBe(2 * 7 + 1);
  });

  it('prefers the batched matmul hook: one call per weight per window, same logits', async () => {
    const c = tiny();
    const w = randomWeights(c, 9);
    const plain = (await LlamaModel.load(c, mapSource(w))).forward(seq).slice();
    const calls: [string, number][] = [];
    const src: WeightSource = {
      get: async (name) => w.get(name)!,
      matvec() { throw new Error('matvec must not be called when matmul exists'); },
      matmul(name, x, n) {
        calls.push([name, n]);
        const m = w.get(name)!;
        const cols = x.length / n, rows = m.length / cols;
        const y = new Float32Array(n * rows);
        for (let t = 0; t < n; t++) for (let r = 0; r < rows; r++) {
          let s = 0;
          for (let i = 0; i < cols; i++) s += m[r * cols + i] * x[t * cols + i];
          y[t * rows + r] = s;
        }
        return y;
      },
    };
    const model = await LlamaModel.load(c, src);
    expect(Array.from(model.forward(seq))).toEqual(Array.from(plain));
    expect(calls.length).toBe(2 * 7 + 1);
    expect(calls.every(([, n]) => n === seq.length)).toBe(true);
    expect(calls[calls.length - 1][0]).toBe('lm_head.weight');
    const bad = await LlamaModel.load(c, { ...src, matmul: () => new Float32Array(3) });
    expect(() => bad.forward(seq)).toThrow(WebquantError);
  });

  it('matmulF32 computes X W^T for every batch size', () => {
    const rnd = lcg(3);
    const rows = 5, cols = 7;
    const w = Float32Array.from({ length: rows * cols }, () => rnd());
    for (const n of [1, 3, 4, 5, 8, 12, 13, 17]) {
      const x = Float32Array.from({ length: n * cols }, () => rnd());
      const y = new Float32Array(n * rows);
      matmulF32(w, rows, cols, x, n, y);
      for (let t = 0; t < n; t++) for (let r = 0; r < rows; r++) {
        let s = 0;
        for (let i = 0; i < cols; i++) s += w[r * cols + i] * x[t * cols + i];
        expect(y[t * rows + r]).toBe(Math.fround(s));
      }
    }
  });

  it("matmulExact (wasm, both builds) gives matmulF32's bits for every batch size and across row blocks", async () => {
    const rnd = lcg(4);
    // 5000 x 64 weights (2.5 MiB as float64) span five 512 KiB blocks of rows; 7 x 9 is one block.
    for (const [rows, cols] of [[7, 9], [5000, 64]]) {
      const w = Float32Array.from({ length: rows * cols }, () => rnd() * (1 + 1e-3 * rnd()));
      for (const build of ['wasm', 'wasm-simd'] as const) {
        const k = await loadKernels(build, 'matmul-test');
        for (const n of rows > 100 ? [1, 11] : [1, 2, 3, 8, 9, 13, 17]) {
          const x = Float32Array.from({ length: n * cols }, () => rnd());
          const want = new Float32Array(n * rows), got = new Float32Array(n * rows).fill(NaN);
          matmulF32(w, rows, cols, x, n, want);
          matmulExact(k, w, rows, cols, x, n, got);
          expect(new Uint32Array(got.buffer), `${build} ${rows}x${cols} n=${n}`).toEqual(new Uint32Array(want.buffer));
        }
      }
    }
  });

  it('names every tensor it reads', async () => {
    for (const tie of [true, false]) {
      const c = tiny({ tie_word_embeddings: tie });
      const src = mapSource(randomWeights(c, 1));
      await LlamaModel.load(c, src);
      expect(new Set(src.reads)).toEqual(new Set(llamaTensorNames(c)));
    }
  });
});

describe('Llama config and input validation', () => {
  const base = { hidden_size: 8, intermediate_size: 12, num_hidden_layers: 2, num_attention_heads: 2, vocab_size: 16 };
  const code = (f: () => unknown) => { try { f(); } catch (e) { return (e as WebquantError).code; } return 'no error'; };

  it('fills Hugging Face defaults', () => {
    const c = llamaConfig(base);
    expect(c).toMatchObject({ num_key_value_heads: 2, rms_norm_eps: 1e-6, rope_theta: 10000, tie_word_embeddings: false });
  });
  it('reads the raw keys of a ModelConfig from src/io', () => {
    expect(llamaConfig({ hiddenSize: 8, raw: { ...base, rope_theta: 123 } }).rope_theta).toBe(123);
  });
  it('rejects what it cannot run', () => {
    expect(code(() => llamaConfig({ ...base, hidden_size: 0 }))).toBe(ErrorCodes.MODEL);
    expect(code(() => llamaConfig({ ...base, num_key_value_heads: 3 }))).toBe(ErrorCodes.MODEL);
    expect(code(() => llamaConfig({ ...base, hidden_size: 6 }))).toBe(ErrorCodes.MODEL); // head_dim 3 is odd
    expect(code(() => llamaConfig({ ...base, rope_scaling: { type: 'dynamic', factor: 2 } }))).toBe(ErrorCodes.MODEL);
    expect(code(() => llamaConfig({ ...base, rope_scaling: { rope_type: 'yarn', factor: 4 } }))).toBe(ErrorCodes.MODEL);
    expect(code(() => llamaConfig({ ...base, rope_scaling: { type: 'linear' } }))).toBe(ErrorCodes.MODEL); // no factor
    expect(code(() => llamaConfig({ ...base, hidden_act: 'gelu' }))).toBe(ErrorCodes.MODEL);
    expect(code(() => llamaConfig({ ...base, attention_bias: true }))).toBe(ErrorCodes.MODEL);
    expect(code(() => llamaConfig(null))).toBe(ErrorCodes.MODEL);
    expect(code(() => llamaConfig({ ...base, tie_word_embeddings: 'true' }))).toBe(ErrorCodes.MODEL);
    expect(code(() => llamaConfig({ ...base, rope_scaling: null, attention_bias: false, hidden_act: 'silu' }))).toBe('no error');
    // StableLM: per-head q/k LayerNorms and parallel residuals are not run.
    const stablelm = { ...base, model_type: 'stablelm', partial_rotary_factor: 0.25, use_qkv_bias: true };
    expect(code(() => llamaConfig({ ...stablelm, qk_layernorm: true }))).toBe(ErrorCodes.MODEL);
    expect(code(() => llamaConfig({ ...stablelm, use_parallel_residual: true }))).toBe(ErrorCodes.MODEL);
    expect(llamaConfig(stablelm)).toMatchObject({ qkv_bias: true, stablelm: { eps: 1e-5 } });
    // OLMoE: whole-projection q/k norms, unnormalised top-k; clip_qkv is not run.
    const olmoe = { ...base, model_type: 'olmoe', num_experts: 8, num_experts_per_tok: 2, norm_topk_prob: false };
    expect(llamaConfig(olmoe)).toMatchObject({ qk_norm: true, qk_norm_whole: true, moe: { experts: 8, used: 2, names: 'qwen', unnormalized: true } });
    expect(code(() => llamaConfig({ ...olmoe, clip_qkv: 8 }))).toBe(ErrorCodes.MODEL);
  });
  it('reads a multimodal checkpoint\'s language model under its prefix', async () => {
    for (const prefix of ['language_model.model.', 'model.language_model.']) {
      const read: string[] = [];
      const ck = { tensors: [{ name: `${prefix}embed_tokens.weight` }, { name: 'vision_tower.x' }], readF32: async (n: string) => { read.push(n); return new Float32Array(1); } };
      await checkpointWeights(ck).get('model.layers.3.mlp.up_proj.weight');
      expect(read).toEqual([`${prefix}layers.3.mlp.up_proj.weight`]);
    }
    const read: string[] = [];
    await checkpointWeights({ tensors: [{ name: 'model.embed_tokens.weight' }], readF32: async (n: string) => { read.push(n); return new Float32Array(1); } }).get('model.norm.weight');
    expect(read).toEqual(['model.norm.weight']);
  });
  it('runs Qwen3-MoE\'s unnormalized top-k: the same as renormalised when every expert is used, different otherwise', async () => {
    const base3 = { model_type: 'qwen3_moe', hidden_size: 8, intermediate_size: 12, moe_intermediate_size: 6, num_hidden_layers: 1, num_attention_heads: 2, head_dim: 4, vocab_size: 16, num_experts: 3 };
    const logits = async (c: LlamaConfig) => {
      const w = new Map<string, Float32Array>();
      const shape = (n: string): number => {
        const hd = 4, D = 8;
        if (n.endsWith('embed_tokens.weight') || n === 'lm_head.weight') return 16 * D;
        if (/norm\.weight$/.test(n)) return n.includes('self_attn') ? hd : D;
        if (/_proj\.weight$/.test(n) && n.includes('self_attn')) return 2 * hd * D;
        if (n.endsWith('mlp.gate.weight')) return 3 * D;
        return 6 * D;
      };
      const r = lcg(5);
      for (const n of llamaTensorNames(c)) w.set(n, Float32Array.from({ length: shape(n) }, () => (n.includes('norm') ? 1 : 0) + r(0.5)));
      return (await LlamaModel.load(c, mapSource(w))).forward([1, 2, 3]).slice();
    };
    const norm = llamaConfig({ ...base3, num_experts_per_tok: 2, norm_topk_prob: true });
    const raw = llamaConfig({ ...base3, num_experts_per_tok: 2 });
    expect([norm.moe?.unnormalized, raw.moe?.unnormalized]).toEqual([undefined, true]);
    expect(await logits(raw)).not.toEqual(await logits(norm));
    const all = (n: boolean) => llamaConfig({ ...base3, num_experts_per_tok: 3, ...(n ? { norm_topk_prob: true } : {}) });
    const [a, b] = [await logits(all(false)), await logits(all(true))];
    for (let i = 0; i < a.length; i++) expect(a[i]).toBeCloseTo(b[i], 5);
  });
  it('applies YaRN\'s attention factor to cos and sin: rope_scaling.attention_factor, else transformers\' default', async () => {
    const y = (rs: Record<string, unknown>) => llamaConfig({ ...base, model_type: 'qwen2', num_key_value_heads: 1, rope_scaling: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 4, ...rs } });
    const m = (s: number, k: number) => 0.1 * k * Math.log(s) + 1;
    expect(yarnAttentionFactor(y({}).yarn!)).toBe(m(4, 1));
    expect(yarnAttentionFactor(y({ attention_factor: 0.75 }).yarn!)).toBe(0.75);
    expect(yarnAttentionFactor(y({ mscale: 2, mscale_all_dim: 3 }).yarn!)).toBe(m(4, 2) / m(4, 3));
    // mscale without mscale_all_dim is ignored (transformers, llama.cpp): the default factor
    expect(yarnAttentionFactor(y({ mscale: 2 }).yarn!)).toBe(m(4, 1));
    expect(code(() => y({ attention_factor: -1 }))).toBe(ErrorCodes.MODEL);
    const logits = async (c: LlamaConfig) => {
      const w = randomWeights(c, 9);
      const r = lcg(4);
      for (let l = 0; l < c.num_hidden_layers; l++) {
        for (const [p, n] of [['q', 8], ['k', 4], ['v', 4]] as const) w.set(`model.layers.${l}.self_attn.${p}_proj.bias`, Float32Array.from({ length: n }, () => r(0.3)));
      }
      return (await LlamaModel.load(c, mapSource(w))).forward(seq).slice();
    };
    const implicit = await logits(y({}));
    expect(await logits(y({ attention_factor: m(4, 1) }))).toEqual(implicit);
    const one = await logits(y({ attention_factor: 1 }));
    expect(one).not.toEqual(implicit);
    // An attention factor a on cos and sin scales every score by a^2, as mscale = mscale_all_dim = M
    // does through the scores (cos and sin times m(4, M) / m(4, M) = 1): the same logits up to rounding.
    const viaCos = await logits(y({ attention_factor: m(4, 3) }));
    const viaScores = await logits(y({ mscale: 3, mscale_all_dim: 3 }));
    let diff = 0;
    for (let i = 0; i < viaCos.length; i++) diff = Math.max(diff, Math.abs(viaCos[i] - viaScores[i]));
    expect(diff).toBeLessThan(1e-5);
    expect(viaCos).not.toEqual(implicit);
  });
  it('takes linear and llama3 rope scaling as per-frequency divisors', () => {
    const hd = base.hidden_size / base.num_attention_heads;
    expect([...llamaConfig({ ...base, rope_scaling: { type: 'linear', factor: 2 } }).rope_factors!]).toEqual(new Array(hd / 2).fill(2));
    const rs = { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 64 };
    expect(llamaConfig({ ...base, rope_scaling: rs }).rope_factors).toEqual(llama3RopeFactors(rs, 10000, hd));
    expect(llamaConfig(base).rope_factors).toBeUndefined();
  });
  it('rejects a weight of the wrong size, naming it', async () => {
    const c = tiny();
    const w = randomWeights(c, 1);
    w.set('model.layers.1.mlp.up_proj.weight', new Float32Array(5));
    const err = await LlamaModel.load(c, mapSource(w)).catch((e) => e);
    expect(err).toBeInstanceOf(WebquantError);
    expect(err.code).toBe(ErrorCodes.MODEL);
    expect(err.details).toMatchObject({ tensor: 'model.layers.1.mlp.up_proj.weight', value: 5, expected: 96 });
  });
  it('rejects token ids outside the vocabulary', async () => {
    const c = tiny();
    const model = await LlamaModel.load(c, mapSource(randomWeights(c, 1)));
    expect(code(() => model.forward([1, 16]))).toBe(ErrorCodes.BAD_INPUT);
    expect(code(() => model.forward([1, -1]))).toBe(ErrorCodes.BAD_INPUT);
  });
});

describe('DeepSeek routing (deepseekPick)', () => {
  const p = Float64Array.from([0.9, 0.1, 0.5, 0.5, 0.8, 0, 0.3, 0.3]);
  const moe = (groups?: { count: number; used: number; by: 'max' | 'top2' }) => ({
    experts: 8, used: 2, ffn: 4, names: 'deepseek' as const, deepseek: { gating: 'sigmoid' as const, bias: false, scale: 1, shared: 0, denseLayers: 0, ...(groups ? { groups } : {}) },
  });
  it('picks the best experts by score plus bias, lower index first on a tie', () => {
    expect(deepseekPick(p, moe(), undefined)).toEqual([0, 4]);
    expect(deepseekPick(p, moe(), Float32Array.from([0, 0, 0, 0, 0, 0, 1, 0]))).toEqual([6, 0]);
  });
  it('keeps only the best groups: by their two best summed (V3) or their best (V2)', () => {
    // Groups of 2: sums 1.0, 1.0, 0.8, 0.6 keep groups 0 and 1; maxima 0.9, 0.5, 0.8, 0.3 keep 0 and 2.
    expect(deepseekPick(p, moe({ count: 4, used: 2, by: 'top2' }), undefined)).toEqual([0, 2]);
    expect(deepseekPick(p, moe({ count: 4, used: 2, by: 'max' }), undefined)).toEqual([0, 4]);
  });
});

describe('llamaConfig of DeepSeek models', () => {
  const base = {
    model_type: 'deepseek_v3', hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, vocab_size: 300,
    q_lora_rank: 32, kv_lora_rank: 32, qk_nope_head_dim: 16, qk_rope_head_dim: 8, v_head_dim: 16, n_routed_experts: 8, num_experts_per_tok: 2, moe_intermediate_size: 32,
  };
  it('fills the config classes\' defaults (V3: sigmoid, bias, renormalised, grouped noaux_tc; V2: softmax, greedy)', () => {
    const v3 = llamaConfig({ ...base, n_group: 4, topk_group: 2 });
    expect([v3.head_dim, v3.num_key_value_heads, v3.moe?.unnormalized, v3.moe?.deepseek]).toEqual([24, 4, undefined,
      { gating: 'sigmoid', bias: true, scale: 1, shared: 0, denseLayers: 0, groups: { count: 4, used: 2, by: 'top2' } }]);
    const v2 = llamaConfig({ ...base, model_type: 'deepseek_v2', n_shared_experts: 2, routed_scaling_factor: 16 });
    expect([v2.moe?.unnormalized, v2.moe?.deepseek]).toEqual([true, { gating: 'softmax', bias: false, scale: 16, shared: 64, denseLayers: 0 }]);
    expect(llamaTensorNames(v2).filter((n) => n.includes('layers.0.') && !n.includes('.experts.'))).toEqual([
      'model.layers.0.input_layernorm.weight', 'model.layers.0.self_attn.q_a_proj.weight', 'model.layers.0.self_attn.q_a_layernorm.weight', 'model.layers.0.self_attn.q_b_proj.weight',
      'model.layers.0.self_attn.kv_a_proj_with_mqa.weight', 'model.layers.0.self_attn.kv_a_layernorm.weight', 'model.layers.0.self_attn.kv_b_proj.weight', 'model.layers.0.self_attn.o_proj.weight',
      'model.layers.0.post_attention_layernorm.weight', 'model.layers.0.mlp.gate.weight', 'model.layers.0.mlp.shared_experts.gate_proj.weight',
      'model.layers.0.mlp.shared_experts.up_proj.weight', 'model.layers.0.mlp.shared_experts.down_proj.weight',
    ]);
  });
  it('refuses what the forward does not implement, naming the key', () => {
    for (const [extra, key] of [[{ moe_layer_freq: 2 }, 'moe_layer_freq'], [{ topk_method: 'random' }, 'topk_method'], [{ rope_scaling: { type: 'linear', factor: 2 } }, 'rope_scaling'],
      [{ n_group: 3 }, 'n_group'], [{ kv_lora_rank: 0 }, 'kv_lora_rank'], [{ scoring_func: 'relu' }, 'scoring_func']] as const) {
      expect(() => llamaConfig({ ...base, ...extra }), key).toThrow(new RegExp(key));
    }
  });
});
