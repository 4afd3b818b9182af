// An independent, deliberately naive float64 Llama forward for tests: whole sequence at once,
// number[][] matrices, explicit rotate_half, repeat_kv and a -Infinity causal mask, as the
// Hugging Face modeling code writes it. Shares nothing with src/eval/llama.ts.
import type { LlamaConfig, WeightSource } from '../../src/eval/llama.js';

type M = number[][];

const matT = (x: M, w: Float32Array, rows: number, cols: number): M =>
  x.map((v) => Array.from({ length: rows }, (_, r) => v.reduce((s, xi, c) => s + xi * w[r * cols + c], 0)));

const rmsNorm = (x: M, w: Float32Array, eps: number): M =>
  x.map((v) => {
    const ms = v.reduce((s, a) => s + a * a, 0) / v.length;
    return v.map((a, i) => (a / Math.sqrt(ms + eps)) * w[i]);
  });

function applyRope(x: number[], pos: number, headDim: number, theta: number): number[] {
  const half = headDim / 2;
  const freqs = Array.from({ length: half }, (_, i) => pos / theta ** ((2 * i) / headDim));
  const emb = [...freqs, ...freqs];
  const rotated = [...x.slice(half).map((a) => -a), ...x.slice(0, half)]; // rotate_half
  return x.map((a, i) => a * Math.cos(emb[i]) + rotated[i] * Math.sin(emb[i]));
}

/**
 * Logits [T][vocab] and the residual stream after every layer [L][T][hidden]; `observe` sees the
 * input [T][cols] of every weight matrix the layers multiply.
 */
export async function naiveForward(c: LlamaConfig, src: WeightSource, tokens: number[], observe?: (name: string, x: M) => void): Promise<{ logits: M; layers: M[] }> {
  const mm = async (x: M, name: string, rows: number, cols: number) => {
    observe?.(name, x);
    return matT(x, await src.get(name), rows, cols);
  };
  const hd = c.head_dim ?? c.hidden_size / c.num_attention_heads;
  const H = c.num_attention_heads, KV = c.num_key_value_heads, D = c.hidden_size, F = c.intermediate_size;
  const emb = await src.get('model.embed_tokens.weight');
  let x: M = tokens.map((t) => Array.from(emb.subarray(t * D, (t + 1) * D)));
  const T = tokens.length;
  const layers: M[] = [];
  for (let l = 0; l < c.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    const h = rmsNorm(x, await src.get(p + 'input_layernorm.weight'), c.rms_norm_eps);
    const q = await mm(h, p + 'self_attn.q_proj.weight', H * hd, D);
    const k = await mm(h, p + 'self_attn.k_proj.weight', KV * hd, D);
    const v = await mm(h, p + 'self_attn.v_proj.weight', KV * hd, D);
    const head = (m: M, t: number, i: number) => m[t].slice(i * hd, (i + 1) * hd);
    const attnOut: M = Array.from({ length: T }, () => new Array(H * hd).fill(0));
    for (let i = 0; i < H; i++) {
      const kvHead = Math.floor(i / (H / KV)); // repeat_kv
      const qs = Array.from({ length: T }, (_, t) => applyRope(head(q, t, i), t, hd, c.rope_theta));
      const ks = Array.from({ length: T }, (_, t) => applyRope(head(k, t, kvHead), t, hd, c.rope_theta));
      for (let t = 0; t < T; t++) {
        const scores = ks.map((kk, s) => (s > t ? -Infinity : kk.reduce((a, kv, j) => a + kv * qs[t][j], 0) / Math.sqrt(hd)));
        const m = Math.max(...scores);
        const e = scores.map((sc) => Math.exp(sc - m));
        const z = e.reduce((a, b) => a + b, 0);
        for (let j = 0; j < hd; j++) attnOut[t][i * hd + j] = e.reduce((a, w, s) => a + (w / z) * v[s][kvHead * hd + j], 0);
      }
    }
    const o = await mm(attnOut, p + 'self_attn.o_proj.weight', D, H * hd);
    x = x.map((row, t) => row.map((a, j) => a + o[t][j]));
    const h2 = rmsNorm(x, await src.get(p + 'post_attention_layernorm.weight'), c.rms_norm_eps);
    const g = await mm(h2, p + 'mlp.gate_proj.weight', F, D);
    const u = await mm(h2, p + 'mlp.up_proj.weight', F, D);
    const act = g.map((row, t) => row.map((a, j) => (a / (1 + Math.exp(-a))) * u[t][j]));
    const down = await mm(act, p + 'mlp.down_proj.weight', D, F);
    x = x.map((row, t) => row.map((a, j) => a + down[t][j]));
    layers.push(x.map((r) => r.slice()));
  }
  const xf = rmsNorm(x, await src.get('model.norm.weight'), c.rms_norm_eps);
  const headW = c.tie_word_embeddings ? emb : await src.get('lm_head.weight');
  return { logits: matT(xf, headW, c.vocab_size, D), layers };
}

/** log-softmax of one row in float64. */
export function naiveLogSoftmax(z: number[]): number[] {
  const m = Math.max(...z);
  const lse = m + Math.log(z.reduce((a, b) => a + Math.exp(b - m), 0));
  return z.map((a) => a - lse);
}

/** Seeded uniform numbers in [-scale, scale) (LCG, so tests need no dependency). */
export function lcg(seed: number): (scale?: number) => number {
  let s = seed >>> 0;
  return (scale = 1) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s / 2 ** 32 * 2 - 1) * scale;
  };
}

/** Random weights for a config, as a WeightSource over a Map (norm weights near 1). */
export function randomWeights(c: LlamaConfig, seed = 1): Map<string, Float32Array> {
  const rnd = lcg(seed);
  const hd = c.head_dim ?? c.hidden_size / c.num_attention_heads;
  const D = c.hidden_size, F = c.intermediate_size;
  const m = new Map<string, Float32Array>();
  const mat = (name: string, rows: number, cols: number) => m.set(name, Float32Array.from({ length: rows * cols }, () => rnd(1 / Math.sqrt(cols) * 1.5)));
  const norm = (name: string) => m.set(name, Float32Array.from({ length: D }, () => 1 + rnd(0.3)));
  mat('model.embed_tokens.weight', c.vocab_size, D);
  for (let l = 0; l < c.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    norm(p + 'input_layernorm.weight');
    mat(p + 'self_attn.q_proj.weight', c.num_attention_heads * hd, D);
    mat(p + 'self_attn.k_proj.weight', c.num_key_value_heads * hd, D);
    mat(p + 'self_attn.v_proj.weight', c.num_key_value_heads * hd, D);
    mat(p + 'self_attn.o_proj.weight', D, c.num_attention_heads * hd);
    norm(p + 'post_attention_layernorm.weight');
    mat(p + 'mlp.gate_proj.weight', F, D);
    mat(p + 'mlp.up_proj.weight', F, D);
    mat(p + 'mlp.down_proj.weight', D, F);
  }
  norm('model.norm.weight');
  if (!c.tie_word_embeddings) mat('lm_head.weight', c.vocab_size, D);
  return m;
}

export function mapSource(m: Map<string, Float32Array>): WeightSource & { reads: string[] } {
  const reads: string[] = [];
  return {
    reads,
    async get(name) {
      reads.push(name);
      const w = m.get(name);
      if (!w) throw new Error(`no tensor ${name}`);
      return w;
    },
  };
}
