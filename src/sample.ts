// A small deterministic Llama-shaped checkpoint, generated (not a copied file): the embedded
// default that `npm start` / `webquant` with no arguments quantizes. Dimensions are multiples of
// 256 so that every format, K-quants included, applies without fallbacks.
import type { LlamaConfig } from './convert/arch/index.js';
import { f32ToBf16 } from './util/half.js';

export interface SampleTensor {
  name: string;
  shape: number[];
  /** BF16 bits. */
  data: Uint16Array;
}

export const SAMPLE_CONFIG: LlamaConfig & { torch_dtype: string; hidden_act: string } = {
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  hidden_size: 256,
  intermediate_size: 768,
  num_hidden_layers: 4,
  num_attention_heads: 8,
  num_key_value_heads: 4,
  vocab_size: 1024,
  max_position_embeddings: 512,
  rms_norm_eps: 1e-5,
  rope_theta: 10000,
  tie_word_embeddings: false,
  torch_dtype: 'bfloat16',
  hidden_act: 'silu',
};

/** Weights drawn from a seeded generator: Gaussian-like bulk with a few outlier columns, as real weights have. */
export function sampleCheckpoint(cfg = SAMPLE_CONFIG, seed = 20261122): SampleTensor[] {
  let s = seed >>> 0;
  const u = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s >>> 8) / 16777216;
  };
  const gauss = () => {
    const a = Math.max(u(), 1e-9), b = u();
    return Math.sqrt(-2 * Math.log(a)) * Math.cos(2 * Math.PI * b);
  };
  const matrix = (name: string, rows: number, cols: number, std: number): SampleTensor => {
    const data = new Uint16Array(rows * cols);
    const outlierCol = Math.floor(u() * cols);
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        const v = gauss() * std * (c === outlierCol ? 8 : 1);
        data[r * cols + c] = f32ToBf16(v);
      }
    }
    return { name, shape: [rows, cols], data };
  };
  const ones = (name: string, n: number): SampleTensor => {
    const data = new Uint16Array(n);
    for (let i = 0; i < n; i++) data[i] = f32ToBf16(1 + 0.05 * gauss());
    return { name, shape: [n], data };
  };
  const d = cfg.hidden_size, f = cfg.intermediate_size;
  const hd = d / cfg.num_attention_heads;
  const kv = (cfg.num_key_value_heads ?? cfg.num_attention_heads) * hd;
  const out: SampleTensor[] = [matrix('model.embed_tokens.weight', cfg.vocab_size, d, 0.02)];
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    out.push(
      ones(p + 'input_layernorm.weight', d),
      matrix(p + 'self_attn.q_proj.weight', d, d, 0.02),
      matrix(p + 'self_attn.k_proj.weight', kv, d, 0.02),
      matrix(p + 'self_attn.v_proj.weight', kv, d, 0.02),
      matrix(p + 'self_attn.o_proj.weight', d, d, 0.02),
      ones(p + 'post_attention_layernorm.weight', d),
      matrix(p + 'mlp.gate_proj.weight', f, d, 0.02),
      matrix(p + 'mlp.up_proj.weight', f, d, 0.02),
      matrix(p + 'mlp.down_proj.weight', d, f, 0.02),
    );
  }
  out.push(ones('model.norm.weight', d), matrix('lm_head.weight', cfg.vocab_size, d, 0.02));
  return out;
}
