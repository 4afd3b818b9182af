import { describe, expect, it } from 'vitest';
import { llamaHparams } from '../../src/plan/llama-hparams.js';
import { resolvePlan } from '../../src/plan/plan.js';
import { getPreset } from '../../src/plan/presets.js';
import type { TensorDesc } from '../../src/plan/types.js';

const keys = (arch: string, o: Record<string, unknown>) => {
  const kv: Record<string, unknown> = { 'general.architecture': arch };
  for (const [k, v] of Object.entries(o)) kv[`${arch}.${k}`] = v;
  return (key: string) => kv[key];
};

describe("llamaHparams: what llama-quantize's rules read from the model's keys", () => {
  it('n_gqa of layer 0 by integer division, the head count repeated when head_count_kv is absent; n_expert 0 when absent', () => {
    expect(llamaHparams(keys('phi3', { 'attention.head_count': 40, 'attention.head_count_kv': 10, block_count: 40 }))).toEqual({ gqa: 4, nExperts: 0, modelType: null });
    expect(llamaHparams(keys('llama', { 'attention.head_count': [32, 32], 'attention.head_count_kv': [6, 8], block_count: 2 })).gqa).toBe(5);
    expect(llamaHparams(keys('gpt2', { 'attention.head_count': 12, block_count: 12 })).gqa).toBe(1);
    expect(llamaHparams(keys('qwen3moe', { 'attention.head_count': 32, 'attention.head_count_kv': 4, expert_count: 128 })).nExperts).toBe(128);
    expect(llamaHparams(() => undefined)).toEqual({});
  });

  it("70B as each loader decides: llama with 80 grouped-query layers and not 8 experts; qwen2, deci, olmo with 80 layers; jais2 with 68", () => {
    const t = (arch: string, o: Record<string, unknown>) => llamaHparams(keys(arch, { 'attention.head_count': 64, 'attention.head_count_kv': 8, block_count: 80, ...o })).modelType;
    expect(t('llama', {})).toBe('70B');
    expect(t('llama', { 'attention.head_count_kv': 64 })).toBe(null); // LLaMA-65B
    expect(t('llama', { expert_count: 8 })).toBe(null);
    expect(t('llama', { block_count: 81 })).toBe(null);
    expect(t('qwen2', { 'attention.head_count_kv': 64 })).toBe('70B'); // Qwen1.5-72B: no GQA, still 70B
    expect(t('deci', {})).toBe('70B');
    expect(t('olmo', {})).toBe('70B');
    expect(t('jais2', { block_count: 68 })).toBe('70B');
    expect(t('qwen3', {})).toBe(null);
    expect(t('mistral3', {})).toBe(null);
  });

  it('resolvePlan takes them over what the tensors suggest: a fused attn_qkv with gqa 4 gets Q2_K\'s n_gqa >= 4 bump; null modelType is no 70B', () => {
    const t: TensorDesc[] = [{ name: 'token_embd.weight', shape: [64, 256], dtype: 'F16' }, { name: 'output.weight', shape: [64, 256], dtype: 'F16' }];
    for (let i = 0; i < 80; i++) {
      t.push({ name: `blk.${i}.attn_q.weight`, shape: [256, 256], dtype: 'F16' }, { name: `blk.${i}.attn_k.weight`, shape: [64, 256], dtype: 'F16' }, { name: `blk.${i}.attn_v.weight`, shape: [64, 256], dtype: 'F16' });
    }
    const v = (o = {}) => resolvePlan(getPreset('q3_k_s').plan, t, o).tensors.find((x) => x.name === 'blk.3.attn_v.weight')!.scheme;
    // 80 layers of gqa 4: what the tensors suggest is 70B (attn_v Q5_K); a qwen3 loader says otherwise.
    expect(v()).toMatchObject({ format: 'q5_k' });
    expect(v(llamaHparams(keys('qwen3', { 'attention.head_count': 4, 'attention.head_count_kv': 1, block_count: 80 })))).toMatchObject({ format: 'q3_k' });
    const fused: TensorDesc[] = [{ name: 'blk.0.attn_qkv.weight', shape: [384, 256], dtype: 'F16' }, { name: 'output.weight', shape: [64, 256], dtype: 'F16' }];
    const qkv = (o = {}) => resolvePlan(getPreset('q2_k').plan, fused, o).tensors.find((x) => x.name === 'blk.0.attn_qkv.weight')!.scheme;
    expect(qkv()).toMatchObject({ format: 'q3_k' });
    expect(qkv(llamaHparams(keys('phi3', { 'attention.head_count': 4, 'attention.head_count_kv': 1, block_count: 1 })))).toMatchObject({ format: 'q4_k' });
  });
});
