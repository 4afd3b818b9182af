// Role detection on the tensor names each architecture really uses.
import { describe, expect, it } from 'vitest';
import { detectRole, useMoreBits, type TensorRole } from '../../src/plan/index.js';

type Want = [name: string, role: TensorRole['role'], kind?: string, layer?: number, expert?: number];

function check(list: Want[]) {
  for (const [name, role, kind, layer, expert] of list) {
    const r = detectRole(name);
    expect({ name, role: r.role, kind: r.kind, layer: r.layer, expert: r.expert }).toEqual({ name, role, kind, layer, expert });
  }
}

describe('detectRole', () => {
  it('Llama / Mistral / Qwen2 (Hugging Face names)', () => {
    check([
      ['model.embed_tokens.weight', 'embedding', 'token'],
      ['model.layers.0.self_attn.q_proj.weight', 'attention', 'q', 0],
      ['model.layers.0.self_attn.k_proj.weight', 'attention', 'k', 0],
      ['model.layers.0.self_attn.v_proj.weight', 'attention', 'v', 0],
      ['model.layers.0.self_attn.o_proj.weight', 'attention', 'o', 0],
      ['model.layers.11.mlp.gate_proj.weight', 'ffn', 'gate', 11],
      ['model.layers.11.mlp.up_proj.weight', 'ffn', 'up', 11],
      ['model.layers.11.mlp.down_proj.weight', 'ffn', 'down', 11],
      ['model.layers.3.input_layernorm.weight', 'norm', 'input_layernorm', 3],
      ['model.layers.3.post_attention_layernorm.weight', 'norm', 'post_attention_layernorm', 3],
      ['model.norm.weight', 'norm', 'norm'],
      ['lm_head.weight', 'output'],
      ['model.rotary_emb.inv_freq', 'other'],
    ]);
    // Qwen2 has q/k/v biases.
    const b = detectRole('model.layers.2.self_attn.q_proj.bias');
    expect(b).toEqual({ role: 'bias', kind: 'q', parent: 'attention', layer: 2 });
  });

  it('Mixtral and Qwen2-MoE', () => {
    check([
      ['model.layers.1.block_sparse_moe.gate.weight', 'router', 'gate', 1],
      ['model.layers.1.block_sparse_moe.experts.7.w1.weight', 'expert', 'gate', 1, 7],
      ['model.layers.1.block_sparse_moe.experts.7.w2.weight', 'expert', 'down', 1, 7],
      ['model.layers.1.block_sparse_moe.experts.7.w3.weight', 'expert', 'up', 1, 7],
      ['model.layers.4.mlp.shared_expert.down_proj.weight', 'shared_expert', 'down', 4],
      ['model.layers.4.mlp.shared_expert_gate.weight', 'router', 'shared_gate', 4],
      ['model.layers.4.mlp.experts.59.up_proj.weight', 'expert', 'up', 4, 59],
    ]);
  });

  it('Gemma (2/3) with its extra norms', () => {
    check([
      ['model.embed_tokens.weight', 'embedding', 'token'],
      ['model.layers.5.pre_feedforward_layernorm.weight', 'norm', 'pre_feedforward_layernorm', 5],
      ['model.layers.5.post_feedforward_layernorm.weight', 'norm', 'post_feedforward_layernorm', 5],
      ['model.layers.5.self_attn.q_norm.weight', 'norm', 'q_norm', 5],
      ['model.layers.5.self_attn.k_norm.weight', 'norm', 'k_norm', 5],
      ['model.layers.5.self_attn.q_proj.weight', 'attention', 'q', 5],
      ['model.layers.5.mlp.down_proj.weight', 'ffn', 'down', 5],
    ]);
  });

  it('Phi-3 (fused) and Phi-2', () => {
    check([
      ['model.layers.0.self_attn.qkv_proj.weight', 'attention', 'qkv', 0],
      ['model.layers.0.self_attn.o_proj.weight', 'attention', 'o', 0],
      ['model.layers.0.mlp.gate_up_proj.weight', 'ffn', 'gate_up', 0],
      ['model.layers.0.mlp.down_proj.weight', 'ffn', 'down', 0],
      ['model.layers.9.self_attn.dense.weight', 'attention', 'o', 9],
      ['model.layers.9.mlp.fc1.weight', 'ffn', 'up', 9],
      ['model.layers.9.mlp.fc2.weight', 'ffn', 'down', 9],
      ['model.final_layernorm.weight', 'norm', 'final_layernorm'],
    ]);
    expect(detectRole('model.layers.9.mlp.fc1.bias')).toEqual({ role: 'bias', kind: 'up', parent: 'ffn', layer: 9 });
    expect(detectRole('model.final_layernorm.bias').role).toBe('norm');
  });

  it('GPT-2 (c_proj is attention or FFN by its container)', () => {
    check([
      ['transformer.wte.weight', 'embedding', 'token'],
      ['transformer.wpe.weight', 'embedding', 'position'],
      ['transformer.h.0.ln_1.weight', 'norm', 'ln_1', 0],
      ['transformer.h.0.attn.c_attn.weight', 'attention', 'qkv', 0],
      ['transformer.h.0.attn.c_proj.weight', 'attention', 'o', 0],
      ['transformer.h.0.ln_2.weight', 'norm', 'ln_2', 0],
      ['transformer.h.10.mlp.c_fc.weight', 'ffn', 'up', 10],
      ['transformer.h.10.mlp.c_proj.weight', 'ffn', 'down', 10],
      ['transformer.ln_f.weight', 'norm', 'ln_f'],
    ]);
    expect(detectRole('transformer.h.0.attn.c_attn.bias')).toEqual({ role: 'bias', kind: 'qkv', parent: 'attention', layer: 0 });
    expect(detectRole('transformer.h.0.mlp.c_proj.bias')).toEqual({ role: 'bias', kind: 'down', parent: 'ffn', layer: 0 });
    // The causal-mask buffers some GPT-2 checkpoints carry.
    expect(detectRole('transformer.h.0.attn.bias').role).toBe('bias');
    expect(detectRole('transformer.h.0.attn.masked_bias').role).toBe('bias');
  });

  it('DeepSeek dense layers, MoE and MLA attention', () => {
    check([
      ['model.layers.0.mlp.gate_proj.weight', 'ffn', 'gate', 0],
      ['model.layers.0.mlp.down_proj.weight', 'ffn', 'down', 0],
      ['model.layers.3.mlp.gate.weight', 'router', 'gate', 3],
      ['model.layers.3.mlp.gate.e_score_correction_bias', 'router', 'bias', 3],
      ['model.layers.3.mlp.experts.0.gate_proj.weight', 'expert', 'gate', 3, 0],
      ['model.layers.3.mlp.experts.255.up_proj.weight', 'expert', 'up', 3, 255],
      ['model.layers.3.mlp.experts.17.down_proj.weight', 'expert', 'down', 3, 17],
      ['model.layers.3.mlp.shared_experts.gate_proj.weight', 'shared_expert', 'gate', 3],
      ['model.layers.3.mlp.shared_experts.up_proj.weight', 'shared_expert', 'up', 3],
      ['model.layers.3.mlp.shared_experts.down_proj.weight', 'shared_expert', 'down', 3],
      ['model.layers.3.self_attn.q_a_proj.weight', 'attention', 'q_a', 3],
      ['model.layers.3.self_attn.q_a_layernorm.weight', 'norm', 'q_a_layernorm', 3],
      ['model.layers.3.self_attn.q_b_proj.weight', 'attention', 'q_b', 3],
      ['model.layers.3.self_attn.kv_a_proj_with_mqa.weight', 'attention', 'kv_a', 3],
      ['model.layers.3.self_attn.kv_a_layernorm.weight', 'norm', 'kv_a_layernorm', 3],
      ['model.layers.3.self_attn.kv_b_proj.weight', 'attention', 'kv_b', 3],
      ['model.layers.3.self_attn.q_proj.weight', 'attention', 'q', 3],
      ['model.layers.3.self_attn.o_proj.weight', 'attention', 'o', 3],
      // FP8 checkpoints: block scales are side data, never quantized.
      ['model.layers.3.mlp.experts.5.down_proj.weight_scale_inv', 'other', 'quant_aux', 3, 5],
    ]);
  });

  it('GGUF names (llama.cpp)', () => {
    check([
      ['token_embd.weight', 'embedding', 'token'],
      ['blk.0.attn_norm.weight', 'norm', 'attn_norm', 0],
      ['blk.0.attn_q.weight', 'attention', 'q', 0],
      ['blk.0.attn_k.weight', 'attention', 'k', 0],
      ['blk.0.attn_v.weight', 'attention', 'v', 0],
      ['blk.0.attn_output.weight', 'attention', 'o', 0],
      ['blk.0.attn_qkv.weight', 'attention', 'qkv', 0],
      ['blk.0.ffn_norm.weight', 'norm', 'ffn_norm', 0],
      ['blk.0.ffn_gate.weight', 'ffn', 'gate', 0],
      ['blk.0.ffn_up.weight', 'ffn', 'up', 0],
      ['blk.0.ffn_down.weight', 'ffn', 'down', 0],
      ['blk.7.ffn_gate_inp.weight', 'router', 'gate', 7],
      ['blk.7.ffn_gate_exps.weight', 'expert', 'gate', 7],
      ['blk.7.ffn_up_exps.weight', 'expert', 'up', 7],
      ['blk.7.ffn_down_exps.weight', 'expert', 'down', 7],
      ['blk.7.ffn_gate_shexp.weight', 'shared_expert', 'gate', 7],
      ['blk.7.ffn_down_shexp.weight', 'shared_expert', 'down', 7],
      ['blk.7.exp_probs_b.bias', 'router', 'bias', 7],
      ['blk.7.attn_q_a.weight', 'attention', 'q_a', 7],
      ['blk.7.attn_q_a_norm.weight', 'norm', 'attn_q_a_norm', 7],
      ['blk.7.attn_kv_a_mqa.weight', 'attention', 'kv_a', 7],
      ['blk.7.attn_kv_b.weight', 'attention', 'kv_b', 7],
      ['output_norm.weight', 'norm', 'output_norm'],
      ['output.weight', 'output'],
    ]);
  });

  it("Meta's original Llama names", () => {
    check([
      ['tok_embeddings.weight', 'embedding', 'token'],
      ['layers.2.attention.wq.weight', 'attention', 'q', 2],
      ['layers.2.attention.wo.weight', 'attention', 'o', 2],
      ['layers.2.feed_forward.w1.weight', 'ffn', 'gate', 2],
      ['layers.2.feed_forward.w2.weight', 'ffn', 'down', 2],
      ['layers.2.feed_forward.w3.weight', 'ffn', 'up', 2],
      ['layers.2.attention_norm.weight', 'norm', 'attention_norm', 2],
      ['output.weight', 'output'],
    ]);
  });

  it("use_more_bits picks llama.cpp's layers", () => {
    const pick = (n: number) => Array.from({ length: n }, (_, i) => i).filter((i) => useMoreBits(i, n));
    // n = 32: first 4, last 4, and (i - 4) % 3 == 2 in between.
    expect(pick(32)).toEqual([0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]);
    // n = 5 (stories260K): n/8 = 0, 7n/8 = 4.
    expect(pick(5)).toEqual([2, 4]);
  });
});
