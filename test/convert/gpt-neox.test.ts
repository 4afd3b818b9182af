// GPT-NeoX checkpoints through convert/gpt-neox.ts: query_key_value's rows, stored per head as
// q, k, v (transformers views them as [heads, 3 * head_size]), regrouped into all q rows, all k,
// all v (as llama.cpp's converter does), weight and bias alike, in F32 and BF16, whole and by row
// ranges; names; buffers dropped; config.json's NeoX keys; typed errors.
import { describe, expect, it } from 'vitest';
import { gptNeoxView, isGptNeoxCheckpoint } from '../../src/convert/gpt-neox.js';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect } from '../../src/io/stream.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { ErrorCodes } from '../../src/errors.js';
import { llamaConfig } from '../../src/eval/llama.js';

type T = { name: string; dtype: string; shape: number[]; data: Float32Array | Uint8Array };
const open = async (tensors: T[]) => openCheckpoint(fromBuffer(await collect(writeSafetensors({ tensors })), 'neox.safetensors'));
const bf16 = (f: Float32Array) => new Uint8Array(Uint16Array.from(f, (v) => new Uint32Array(new Float32Array([v]).buffer)[0] >>> 16).buffer);

describe('GPT-NeoX view', () => {
  it('regroups q, k and v rows from per head to per projection', async () => {
    const heads = 2, hd = 3, H = 4;
    // Row r of query_key_value = (head, part, i) in storage order; value = 100 * head + 10 * part + i.
    const w = new Float32Array(3 * heads * hd * H), b = new Float32Array(3 * heads * hd);
    for (let h = 0; h < heads; h++) for (let p = 0; p < 3; p++) for (let i = 0; i < hd; i++) {
      const r = (h * 3 + p) * hd + i;
      b[r] = 100 * h + 10 * p + i;
      w.fill(b[r], r * H, (r + 1) * H);
    }
    const ck = await open([
      { name: 'gpt_neox.embed_in.weight', dtype: 'F32', shape: [8, H], data: new Float32Array(32) },
      { name: 'gpt_neox.layers.0.attention.query_key_value.weight', dtype: 'BF16', shape: [3 * heads * hd, H], data: bf16(w) },
      { name: 'gpt_neox.layers.0.attention.query_key_value.bias', dtype: 'F32', shape: [3 * heads * hd], data: b },
      { name: 'gpt_neox.layers.0.attention.rotary_emb.inv_freq', dtype: 'F32', shape: [2], data: new Float32Array(2) },
      { name: 'embed_out.weight', dtype: 'F32', shape: [8, H], data: new Float32Array(32) },
    ]);
    expect(isGptNeoxCheckpoint(ck)).toBe(true);
    const v = gptNeoxView(ck, heads);
    expect(v.tensors.map((t) => t.name)).toEqual(['model.embed_tokens.weight', 'model.layers.0.self_attn.qkv_proj.weight', 'model.layers.0.self_attn.qkv_proj.bias', 'lm_head.weight']);
    // Presented row (part, head, i) holds the stored (head, part, i).
    const want = Float32Array.from({ length: 3 * heads * hd }, (_, r) => { const p = Math.floor(r / (heads * hd)), h = Math.floor(r / hd) % heads, i = r % hd; return 100 * h + 10 * p + i; });
    expect(await v.readF32('model.layers.0.self_attn.qkv_proj.bias')).toEqual(want);
    const wf = await v.readF32('model.layers.0.self_attn.qkv_proj.weight');
    expect(Float32Array.from({ length: want.length }, (_, r) => wf[r * H])).toEqual(want);
    const rows = await v.readRows!('model.layers.0.self_attn.qkv_proj.weight', 7, 4);
    expect(rows.dtype).toBe('bf16');
    expect(rows.values).toEqual((await v.readValues('model.layers.0.self_attn.qkv_proj.weight')).values.subarray(7 * H, 11 * H));
  });

  it('a query_key_value that does not split into 3 x heads fails naming it', async () => {
    const ck = await open([{ name: 'gpt_neox.layers.0.attention.query_key_value.weight', dtype: 'F32', shape: [10, 4], data: new Float32Array(40) }]);
    expect(() => gptNeoxView(ck, 2)).toThrow(expect.objectContaining({ code: ErrorCodes.MODEL, details: expect.objectContaining({ tensor: 'gpt_neox.layers.0.attention.query_key_value.weight' }) }));
  });

  it("reads GPTNeoXConfig's keys: rotary_pct, rotary_emb_base, use_parallel_residual, hidden_act", () => {
    const base = { architectures: ['GPTNeoXForCausalLM'], model_type: 'gpt_neox', hidden_size: 64, intermediate_size: 256, num_hidden_layers: 2, num_attention_heads: 4, vocab_size: 100, rotary_pct: 0.25, rotary_emb_base: 10000, use_parallel_residual: true, hidden_act: 'gelu' };
    const c = llamaConfig(base);
    expect([c.neox, c.rope_theta]).toEqual([{ eps: 1e-5, rotaryDims: 4, parallel: true, exactGelu: true }, 10000]);
    expect(llamaConfig({ ...base, use_parallel_residual: false, hidden_act: 'gelu_new' }).neox).toMatchObject({ parallel: false, exactGelu: false });
    expect(() => llamaConfig({ ...base, hidden_act: 'relu' })).toThrow(/hidden_act/);
  });
});
