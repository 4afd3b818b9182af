import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { SHARED, hasShared } from '../helpers/shared.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { readConfig } from '../../src/io/config.js';
import { ggufView, hfGgufMetadata, llamaConfigFrom } from '../../src/convert/hf-view.js';
import type { Checkpoint } from '../../src/io/checkpoint.js';

const DIR = join(SHARED, 'models/stories260K');
const buf = (f: string) => fromBuffer(new Uint8Array(readFileSync(join(DIR, f))), f);
const open = (f: string) => openCheckpoint(buf(f));
const config = async () => llamaConfigFrom(await readConfig(buf('config.json')));
const bytes = (v: ArrayBufferView) => Buffer.from(v.buffer, v.byteOffset, v.byteLength);

describe.skipIf(!hasShared)('ggufView on stories260K', () => {
  it('equals the GGUF file tensor by tensor (names, shapes, values of every read path)', async () => {
    const gguf = await open('tinyllamas-stories-260k-f32.gguf');
    const view = ggufView(await open('model.safetensors'), await config());
    expect(view.tensors).toHaveLength(47);
    const names = new Set(view.tensors.map((t) => t.name));
    // The GGUF file stores the tied output head explicitly; the HF checkpoint does not.
    expect(gguf.tensors.map((t) => t.name).filter((n) => !names.has(n))).toEqual(['output.weight']);
    expect(bytes(await gguf.readRaw('output.weight')).equals(bytes(await gguf.readRaw('token_embd.weight')))).toBe(true);
    let permuted = 0;
    for (const t of view.tensors) {
      const g = gguf.tensor(t.name);
      expect(t.shape, t.name).toEqual(g.shape);
      expect(t.dtype).toBe('F32');
      const want = bytes(await gguf.readRaw(t.name));
      expect(bytes(await view.readRaw(t.name)).equals(want), t.name).toBe(true);
      expect(bytes(await view.readF32(t.name)).equals(want), t.name).toBe(true);
      expect(bytes((await view.readValues(t.name)).values).equals(want), t.name).toBe(true);
      const src = bytes(await view.input.readRaw(view.sourceName(t.name)));
      if (!src.equals(want)) permuted++;
      // Every row range, including ones that cut heads, equals the same rows of the file.
      const rowLen = t.shape.length > 1 ? t.shape[t.shape.length - 1] : t.shape[0];
      const nrows = t.shape.length > 1 ? want.byteLength / 4 / rowLen : 1;
      for (const [r0, n] of [[0, nrows], [1, Math.max(0, nrows - 3)], [3, Math.min(5, nrows - 3)], [nrows - 1, 1]] as [number, number][]) {
        if (r0 < 0 || n < 0 || r0 + n > nrows) continue;
        const got = await view.readRows!(t.name, r0, n);
        expect(bytes(got.values).equals(want.subarray(r0 * rowLen * 4, (r0 + n) * rowLen * 4)), `${t.name} rows ${r0}+${n}`).toBe(true);
      }
    }
    // q and k of 5 layers differ from the HF storage: the test would not see a missing permutation.
    expect(permuted).toBe(10);
  });

  it('permutes BF16 storage the same way and widens BF16 vectors to F32', async () => {
    const bf = ggufView(await open('model.bf16.safetensors'), await config());
    const f32 = ggufView(await open('model.safetensors'), await config());
    const q = 'blk.2.attn_k.weight';
    expect(bf.tensor(q).dtype).toBe('BF16');
    const raw = await bf.readRaw(q);
    const vals = await bf.readValues(q);
    expect(vals.dtype).toBe('bf16');
    expect(bytes(vals.values).equals(bytes(raw))).toBe(true);
    const rows = await bf.readRows!(q, 5, 9);
    expect(bytes(rows.values).equals(bytes(raw).subarray(5 * 64 * 2, 14 * 64 * 2))).toBe(true);
    // BF16 -> f32 of the view equals the f32 view rounded to BF16 (the file is the F32 weights rounded).
    const a = await bf.readF32(q), b = await f32.readF32(q);
    for (let i = 0; i < a.length; i++) expect(Math.abs(a[i] - b[i])).toBeLessThanOrEqual(Math.abs(b[i]) / 128);
    const n = bf.tensor('blk.0.attn_norm.weight');
    expect(n.dtype).toBe('F32');
    expect(n.byteLength).toBe(256);
    expect((await bf.readRaw(n.name)).byteLength).toBe(256);
    expect((await bf.readValues(n.name)).dtype).toBe('f32');
  });

  it('has no readRows when the input has none, and refuses unknown names', async () => {
    const buf = readFileSync(join(DIR, 'model.safetensors'));
    const ck = await openCheckpoint(fromBuffer(new Uint8Array(buf)));
    const bare: Checkpoint = { ...ck, tensors: ck.tensors, tensor: ck.tensor.bind(ck), readRaw: ck.readRaw.bind(ck), readF32: ck.readF32.bind(ck), readValues: ck.readValues.bind(ck), readRows: undefined };
    const v = ggufView(bare, await config());
    expect(v.readRows).toBeUndefined();
    expect(() => v.tensor('model.norm.weight')).toThrow(/no tensor named/);
    const odd: Checkpoint = { ...bare, tensors: [...bare.tensors, { ...bare.tensors[0], name: 'vision_tower.weight' }] };
    expect(() => ggufView(odd, { hidden_size: 64, intermediate_size: 172, num_hidden_layers: 5, num_attention_heads: 8, num_key_value_heads: 4, vocab_size: 512 })).toThrow(/no GGUF name/);
  });

  it('writes llamaMetadata plus file type, quantization version and no_vocab', async () => {
    const kv = hfGgufMetadata(await config(), 15, { kind: 'none' }, 'stories');
    const get = (k: string) => kv.find((e) => e.key === k);
    expect(get('general.architecture')?.value).toBe('llama');
    expect(get('general.name')?.value).toBe('stories');
    expect(get('llama.rope.dimension_count')?.value).toBe(8);
    expect(get('llama.attention.head_count_kv')?.value).toBe(4);
    expect(get('general.file_type')).toEqual({ key: 'general.file_type', type: 'u32', value: 15 });
    expect(get('general.quantization_version')).toEqual({ key: 'general.quantization_version', type: 'u32', value: 2 });
    expect(get('tokenizer.ggml.model')?.value).toBe('no_vocab');
    const vocab = { model: 'llama' as const, tokens: ['<unk>', '<s>', '</s>'], tokenTypes: [2, 3, 3], special: { bos: 1 }, add: {}, source: 't', warnings: [] };
    const withVocab = hfGgufMetadata(await config(), 15, { kind: 'vocab', vocab }).filter((e) => e.key.startsWith('tokenizer.'));
    expect(withVocab.map((e) => e.key)).toEqual(['tokenizer.ggml.model', 'tokenizer.ggml.tokens', 'tokenizer.ggml.token_type', 'tokenizer.ggml.bos_token_id']);
  });
});

describe('ggufView of an FP8 Llama checkpoint', () => {
  it('permutes FP8 q/k projections as their F32 values', async () => {
    const cfg = { model_type: 'llama', hidden_size: 4, intermediate_size: 8, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, vocab_size: 8 };
    const names = await fp8Equivalence([['model.layers.0.self_attn.q_proj.weight', [4, 4]], ['model.layers.0.self_attn.k_proj.weight', [2, 4]], ['model.layers.0.mlp.up_proj.weight', [8, 4]]], [], cfg);
    expect(names).toEqual(['blk.0.attn_q.weight', 'blk.0.attn_k.weight', 'blk.0.ffn_up.weight']);
  });
  it('reads compressed-tensors FP8 (weight_scale per output row) the same way, leaving out the activation and KV-cache scales', async () => {
    const cfg = { model_type: 'llama', hidden_size: 4, intermediate_size: 8, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, vocab_size: 8 };
    const names = await fp8Equivalence([['model.layers.0.self_attn.q_proj.weight', [4, 4]], ['model.layers.0.mlp.down_proj.weight', [4, 8]]], [], cfg, 'compressed-tensors');
    expect(names).toEqual(['blk.0.attn_q.weight', 'blk.0.ffn_down.weight']);
  });
  it('reads NVFP4 weights (ModelOpt and compressed-tensors) as F32 with their scales applied, leaving out every scale', async () => {
    const cfg = { model_type: 'llama', hidden_size: 16, intermediate_size: 32, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, vocab_size: 8 };
    const shapes: [string, number[]][] = [['model.layers.0.self_attn.q_proj.weight', [16, 16]], ['model.layers.0.self_attn.k_proj.weight', [8, 16]], ['model.layers.0.mlp.down_proj.weight', [16, 32]]];
    for (const scheme of ['nvfp4', 'nvfp4-ct'] as const) {
      expect(await fp8Equivalence(shapes, [], cfg, scheme), scheme).toEqual(['blk.0.attn_q.weight', 'blk.0.attn_k.weight', 'blk.0.ffn_down.weight']);
    }
    // MoE experts in NVFP4 (ModelOpt quantizes each expert): stacked as their F32 values.
    const moe = { ...cfg, model_type: 'mixtral', num_local_experts: 2, num_experts_per_tok: 1 };
    const experts: [string, number[]][] = [0, 1].flatMap((e) => [[`model.layers.0.block_sparse_moe.experts.${e}.w1.weight`, [32, 16]], [`model.layers.0.block_sparse_moe.experts.${e}.w2.weight`, [16, 32]]] as [string, number[]][]);
    expect(await fp8Equivalence(experts, [], moe, 'nvfp4')).toEqual(['blk.0.ffn_gate_exps.weight', 'blk.0.ffn_down_exps.weight']);
  });
});

describe('ggufView of a checkpoint with an FP8 KV cache', () => {
  it('leaves out the KV-cache scales (a runtime setting llama.cpp has no tensor for), with BF16 weights too', async () => {
    const { writeSafetensors } = await import('../../src/io/safetensors-writer.js');
    const { collect } = await import('../../src/io/stream.js');
    const cfg = { model_type: 'llama', hidden_size: 4, intermediate_size: 8, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, vocab_size: 8 };
    const ck = await openCheckpoint(fromBuffer(await collect(writeSafetensors({ tensors: [
      { name: 'model.layers.0.self_attn.k_proj.weight', dtype: 'BF16', shape: [2, 4], data: new Uint16Array(8) },
      { name: 'model.layers.0.self_attn.k_scale', dtype: 'F32', shape: [], data: new Float32Array([1]) },
      { name: 'model.layers.0.self_attn.v_scale', dtype: 'F32', shape: [], data: new Float32Array([1]) },
    ] })), 'kv.safetensors'));
    expect(ggufView(ck, cfg).tensors.map((t) => t.name)).toEqual(['blk.0.attn_k.weight']);
    // Other unknown tensors are still an error naming them.
    const other = await openCheckpoint(fromBuffer(await collect(writeSafetensors({ tensors: [
      { name: 'model.layers.0.self_attn.q_scale', dtype: 'F32', shape: [], data: new Float32Array([1]) },
    ] })), 'q.safetensors'));
    expect(() => ggufView(other, cfg)).toThrow(/q_scale/);
  });
});

describe('ggufView of a MoE checkpoint', () => {
  it('stacks each layer\'s experts into one [experts, rows, cols] tensor, on every read path', async () => {
    const { writeSafetensors } = await import('../../src/io/safetensors-writer.js');
    const { collect } = await import('../../src/io/stream.js');
    const E = 3, FF = 8, H = 4;
    // Exact in bf16: the expert, the matrix and the element show in the value.
    const val = (e: number, w: string, i: number) => e * 16 + (w === 'w1' ? 0 : w === 'w3' ? 4 : 8) + (i % 4) * 0.25;
    const tensors = [];
    for (let e = 0; e < E; e++) {
      for (const w of ['w1', 'w3', 'w2']) {
        const shape = w === 'w2' ? [H, FF] : [FF, H];
        tensors.push({ name: `model.layers.0.block_sparse_moe.experts.${e}.${w}.weight`, dtype: 'BF16', shape, data: Uint16Array.from({ length: FF * H }, (_, i) => new Uint32Array(new Float32Array([val(e, w, i)]).buffer)[0] >>> 16) });
      }
    }
    tensors.push({ name: 'model.layers.0.block_sparse_moe.gate.weight', dtype: 'F32', shape: [E, H], data: new Float32Array(E * H).fill(0.5) });
    const ck = await openCheckpoint(fromBuffer(await collect(writeSafetensors({ tensors })), 'moe.safetensors'));
    const cfg = { model_type: 'mixtral', hidden_size: H, intermediate_size: FF, num_hidden_layers: 1, num_attention_heads: 1, vocab_size: 8, num_local_experts: E, num_experts_per_tok: 2 };
    const view = ggufView(ck, cfg);
    expect(view.tensors.map((t) => [t.name, t.shape, t.dtype])).toEqual([
      ['blk.0.ffn_gate_exps.weight', [E, FF, H], 'BF16'], ['blk.0.ffn_up_exps.weight', [E, FF, H], 'BF16'], ['blk.0.ffn_down_exps.weight', [E, H, FF], 'BF16'],
      ['blk.0.ffn_gate_inp.weight', [E, H], 'F32'],
    ]);
    const all = await view.readF32('blk.0.ffn_up_exps.weight');
    for (let e = 0; e < E; e++) expect(all[e * FF * H + 5]).toBe(val(e, 'w3', 5));
    expect((await view.readValues('blk.0.ffn_up_exps.weight')).values).toHaveLength(E * FF * H);
    expect(await view.readRaw('blk.0.ffn_up_exps.weight')).toHaveLength(E * FF * H * 2);
    // Row ranges within one expert and across two: the same values as the whole.
    const whole = (await view.readValues('blk.0.ffn_up_exps.weight')).values;
    for (const [r0, n] of [[0, 3], [6, 5], [7, 10], [0, E * FF]]) {
      expect((await view.readRows!('blk.0.ffn_up_exps.weight', r0, n)).values, `${r0}+${n}`).toEqual(whole.subarray(r0 * H, (r0 + n) * H));
    }
    expect(view.locate?.('blk.0.ffn_up_exps.weight', 0, 1)).toBeUndefined();
    // Experts of different shapes are refused, naming the tensor.
    const bad = await openCheckpoint(fromBuffer(await collect(writeSafetensors({ tensors: [tensors[0], { ...tensors[3], shape: [H, FF] }] })), 'bad.safetensors'));
    expect(() => ggufView(bad, cfg)).toThrow(/experts of "blk.0.ffn_gate_exps.weight"/);
  });
});

/**
 * Writes `fp8` weights (E4M3 codes, one `_scale_inv` per 2 x 2 block) plus `other` tensors, and the
 * same checkpoint with each FP8 weight replaced by its F32 values (readF32: codes times scales);
 * their GGUF views must present the same tensors (FP8 as F32, scales gone) with the same bytes on
 * every read path and row range. Returns the view's tensor names.
 */
async function fp8Equivalence(fp8: [string, number[]][], other: { name: string; dtype: string; shape: number[]; data: ArrayBufferView }[], cfg: Parameters<typeof ggufView>[1],
  scheme: 'blocks' | 'compressed-tensors' | 'nvfp4' | 'nvfp4-ct' = 'blocks'): Promise<string[]> {
  const { writeSafetensors } = await import('../../src/io/safetensors-writer.js');
  const { collect } = await import('../../src/io/stream.js');
  const { openSafetensors } = await import('../../src/io/safetensors.js');
  let seed = 7;
  const code = () => { seed = (seed * 1103515245 + 12345) >>> 0; const c = seed >>> 24; return (c & 0x7f) === 0x7f ? 0x38 : c; };
  // DeepSeek's 2 x 2 blocks of _scale_inv, or compressed-tensors' weight_scale per output row
  // beside an activation input_scale (and the layer's FP8 KV-cache scales).
  // NVFP4: ModelOpt's codes under the weight's name with an F8_E4M3 scale per 16 values and a
  // factor, or compressed-tensors' `_packed` codes with a divisor; activation scales beside.
  const nvfp4 = (name: string, rows: number, cols: number) => [
    { name: scheme === 'nvfp4' ? name : `${name}_packed`, dtype: 'U8', shape: [rows, cols / 2], data: Uint8Array.from({ length: rows * cols / 2 }, code) },
    { name: `${name}_scale`, dtype: 'F8_E4M3', shape: [rows, cols / 16], data: Uint8Array.from({ length: rows * cols / 16 }, () => code() & 0x7e) },
    { name: scheme === 'nvfp4' ? `${name}_scale_2` : `${name}_global_scale`, dtype: 'F32', shape: scheme === 'nvfp4' ? [] : [1], data: new Float32Array([scheme === 'nvfp4' ? 0.003 : 1792]) },
    { name: name.replace(/weight$/, scheme === 'nvfp4' ? 'input_scale' : 'input_global_scale'), dtype: 'F32', shape: [1], data: new Float32Array([3]) },
  ];
  const tensors = fp8.flatMap(([name, [rows, cols]]) => scheme.startsWith('nvfp4') ? nvfp4(name, rows, cols) : [
    { name, dtype: 'F8_E4M3', shape: [rows, cols], data: Uint8Array.from({ length: rows * cols }, code) },
    ...(scheme === 'blocks'
      ? [{ name: `${name}_scale_inv`, dtype: 'F32', shape: [Math.ceil(rows / 2), Math.ceil(cols / 2)], data: Float32Array.from({ length: Math.ceil(rows / 2) * Math.ceil(cols / 2) }, (_, i) => 2 ** (i % 5 - 2) * 1.5) }]
      : [{ name: `${name}_scale`, dtype: 'F32', shape: [rows, 1], data: Float32Array.from({ length: rows }, (_, i) => 2 ** (i % 5 - 2) * 1.5) },
        { name: name.replace(/weight$/, 'input_scale'), dtype: 'F32', shape: [1], data: new Float32Array([3]) }]),
  ]);
  if (scheme === 'compressed-tensors') tensors.push({ name: 'model.layers.0.self_attn.k_scale', dtype: 'F32', shape: [], data: new Float32Array([1]) });
  const q = await openSafetensors(fromBuffer(await collect(writeSafetensors({ tensors: [...tensors, ...other] })), 'fp8.safetensors'), { fp8BlockSize: [2, 2] });
  const plain = await Promise.all(fp8.map(async ([name, shape]) => ({ name, dtype: 'F32', shape, data: await q.readF32(name) })));
  const f = await openCheckpoint(fromBuffer(await collect(writeSafetensors({ tensors: [...plain, ...other] })), 'f32.safetensors'));
  const a = ggufView(q, cfg), b = ggufView(f, cfg);
  expect(a.tensors.map((t) => [t.name, t.shape, t.dtype, t.byteLength])).toEqual(b.tensors.map((t) => [t.name, t.shape, t.dtype, t.byteLength]));
  for (const t of a.tensors) {
    const want = bytes(await b.readRaw(t.name));
    expect(bytes(await a.readRaw(t.name)).equals(want), t.name).toBe(true);
    expect(bytes(await a.readF32(t.name)).equals(bytes(await b.readF32(t.name))), t.name).toBe(true);
    const v = await a.readValues(t.name);
    expect([v.dtype, bytes(v.values).equals(want)], t.name).toEqual([(await b.readValues(t.name)).dtype, true]);
    const nrows = t.shape.length > 1 ? t.byteLength / 4 / t.shape[t.shape.length - 1] : 1;
    for (let r0 = 0; r0 < nrows; r0++) {
      for (let n = 0; r0 + n <= nrows; n++) {
        expect(bytes((await a.readRows!(t.name, r0, n)).values).equals(bytes((await b.readRows!(t.name, r0, n)).values)), `${t.name} ${r0}+${n}`).toBe(true);
      }
    }
    if (fp8.some(([n]) => n === a.sourceName(t.name))) expect(a.locate?.(t.name, 0, 1), t.name).toBeUndefined();
  }
  return a.tensors.map((t) => t.name);
}

describe('Qwen2-MoE to GGUF', () => {
  const cfg = {
    model_type: 'qwen2_moe', hidden_size: 8, intermediate_size: 16, num_hidden_layers: 1, num_attention_heads: 2, vocab_size: 8, num_experts: 4, num_experts_per_tok: 2,
    moe_intermediate_size: 4, shared_expert_intermediate_size: 12,
  };
  it('names the shared expert and its gate as llama.cpp does and writes the qwen2moe keys', async () => {
    const { writeSafetensors } = await import('../../src/io/safetensors-writer.js');
    const { collect } = await import('../../src/io/stream.js');
    const f = (name: string, shape: number[]) => ({ name: `model.layers.0.mlp.${name}.weight`, dtype: 'F32', shape, data: new Float32Array(shape[0] * shape[1]) });
    const ck = await openCheckpoint(fromBuffer(await collect(writeSafetensors({ tensors: [
      f('shared_expert.gate_proj', [12, 8]), f('shared_expert.up_proj', [12, 8]), f('shared_expert.down_proj', [8, 12]), f('shared_expert_gate', [1, 8]), f('gate', [4, 8]),
    ] })), 'q2moe.safetensors'));
    expect(ggufView(ck, cfg).tensors.map((t) => t.name)).toEqual(['blk.0.ffn_gate_shexp.weight', 'blk.0.ffn_up_shexp.weight', 'blk.0.ffn_down_shexp.weight', 'blk.0.ffn_gate_inp_shexp.weight', 'blk.0.ffn_gate_inp.weight']);
    const kv = Object.fromEntries(hfGgufMetadata(cfg, 1, { kind: 'none' }).map((x) => [x.key, x.value]));
    expect([kv['general.architecture'], kv['qwen2moe.expert_count'], kv['qwen2moe.expert_used_count'], kv['qwen2moe.expert_feed_forward_length'], kv['qwen2moe.expert_shared_feed_forward_length']])
      .toEqual(['qwen2moe', 4, 2, 4, 12]);
  });
  it('refuses what llama.cpp\'s qwen2moe cannot run, naming the key', () => {
    for (const [key, value] of [['norm_topk_prob', true], ['decoder_sparse_step', 2], ['mlp_only_layers', [0]]] as const) {
      expect(() => hfGgufMetadata({ ...cfg, [key]: value }, 1, { kind: 'none' })).toThrow(expect.objectContaining({ code: 'E_CONFIG', message: expect.stringContaining(key) }));
    }
    expect(() => hfGgufMetadata({ ...cfg, shared_expert_intermediate_size: undefined }, 1, { kind: 'none' })).toThrow(/shared_expert_intermediate_size/);
  });
});

describe('YaRN keys', () => {
  it('are written for a Llama-architecture checkpoint too (Yarn-Mistral), with the ramp\'s betas and factors where config.json gives them', () => {
    const cfg = {
      model_type: 'mistral', hidden_size: 8, intermediate_size: 16, num_hidden_layers: 1, num_attention_heads: 2, vocab_size: 8,
      rope_scaling: { type: 'yarn', factor: 16, original_max_position_embeddings: 8192, beta_fast: 16, beta_slow: 2, attention_factor: 1.25 },
    };
    const kv = Object.fromEntries(hfGgufMetadata(cfg, 1, { kind: 'none' }).filter((x) => x.key.includes('rope.scaling')).map((x) => [x.key, x.value]));
    expect(kv).toEqual({
      'llama.rope.scaling.type': 'yarn', 'llama.rope.scaling.factor': 16, 'llama.rope.scaling.original_context_length': 8192,
      'llama.rope.scaling.yarn_attn_factor': 1.25, 'llama.rope.scaling.yarn_beta_fast': 16, 'llama.rope.scaling.yarn_beta_slow': 2,
    });
  });
});

describe('ggufView of a DeepSeek checkpoint', () => {
  const H = 4, HEADS = 2, R = 3, NOPE = 2, ROPE = 2, VD = 2;
  const cfg = {
    model_type: 'deepseek_v3', hidden_size: H, intermediate_size: 8, num_hidden_layers: 1, num_attention_heads: HEADS, vocab_size: 8, q_lora_rank: 2,
    kv_lora_rank: R, qk_nope_head_dim: NOPE, qk_rope_head_dim: ROPE, v_head_dim: VD, n_routed_experts: 2, num_experts_per_tok: 1, moe_intermediate_size: 4,
  };
  const kvb = async (dtype: 'F32' | 'BF16') => {
    const { writeSafetensors } = await import('../../src/io/safetensors-writer.js');
    const { collect } = await import('../../src/io/stream.js');
    // kv_b_proj [heads * (nope + v), kv_lora]: row h*(nope+v) + j, column r holds 100h + 10j + r.
    const v = Float32Array.from({ length: HEADS * (NOPE + VD) * R }, (_, i) => { const row = Math.floor(i / R); return 100 * Math.floor(row / (NOPE + VD)) + 10 * (row % (NOPE + VD)) + (i % R); });
    const data = dtype === 'F32' ? v : Uint16Array.from(v, (x) => new Uint32Array(new Float32Array([x]).buffer)[0] >>> 16);
    return openCheckpoint(fromBuffer(await collect(writeSafetensors({ tensors: [
      { name: 'model.layers.0.self_attn.kv_b_proj.weight', dtype, shape: [HEADS * (NOPE + VD), R], data },
      { name: 'model.layers.0.mlp.gate.e_score_correction_bias', dtype: 'F32', shape: [2], data: new Float32Array(2) },
      // Layer 1 is past num_hidden_layers (V3's multi-token prediction): left out.
      { name: 'model.layers.1.self_attn.kv_b_proj.weight', dtype, shape: [HEADS * (NOPE + VD), R], data },
    ] })), 'ds.safetensors'));
  };

  it('splits kv_b_proj into attn_k_b [heads, kv_lora, nope] (transposed) and attn_v_b [heads, v, kv_lora], on every read path', async () => {
    for (const dtype of ['F32', 'BF16'] as const) {
      const view = ggufView(await kvb(dtype), cfg);
      expect(view.tensors.map((t) => [t.name, t.shape, t.dtype])).toEqual([
        ['blk.0.attn_k_b.weight', [HEADS, R, NOPE], dtype], ['blk.0.attn_v_b.weight', [HEADS, VD, R], dtype], ['blk.0.exp_probs_b.bias', [2], 'F32'],
      ]);
      const k = await view.readF32('blk.0.attn_k_b.weight'), v = await view.readF32('blk.0.attn_v_b.weight');
      for (let h = 0; h < HEADS; h++) {
        for (let r = 0; r < R; r++) for (let i = 0; i < NOPE; i++) expect(k[(h * R + r) * NOPE + i]).toBe(100 * h + 10 * i + r);
        for (let j = 0; j < VD; j++) for (let r = 0; r < R; r++) expect(v[(h * VD + j) * R + r]).toBe(100 * h + 10 * (NOPE + j) + r);
      }
      expect(await view.readRaw('blk.0.attn_k_b.weight')).toHaveLength(k.length * (dtype === 'F32' ? 4 : 2));
      const whole = (await view.readValues('blk.0.attn_k_b.weight')).values;
      expect(whole).toHaveLength(k.length);
      expect((await view.readRows!('blk.0.attn_k_b.weight', 2, 3)).values).toEqual(whole.subarray(2 * NOPE, 5 * NOPE));
      expect(view.locate?.('blk.0.attn_k_b.weight', 0, 1)).toBeUndefined();
      expect(view.sourceName('blk.0.attn_v_b.weight')).toBe('model.layers.0.self_attn.kv_b_proj.weight');
      // What the forward reads from a GGUF: kv_b_proj put back together, exactly.
      const { deepseekKvBJoin } = await import('../../src/convert/arch/deepseek.js');
      expect(deepseekKvBJoin(HEADS, NOPE, VD, R, k, v)).toEqual(await view.input.readF32('model.layers.0.self_attn.kv_b_proj.weight'));
    }
  });

  it('writes the deepseek2 keys, and refuses what llama.cpp could not load', async () => {
    const kv = Object.fromEntries(hfGgufMetadata(cfg, 1, { kind: 'none' }).map((x) => [x.key, x.value]));
    expect([kv['general.architecture'], kv['deepseek2.attention.head_count_kv'], kv['deepseek2.attention.key_length'], kv['deepseek2.attention.value_length'],
      kv['deepseek2.attention.key_length_mla'], kv['deepseek2.attention.value_length_mla'], kv['deepseek2.expert_gating_func'], kv['deepseek2.expert_weights_norm']])
      .toEqual(['deepseek2', 1, R + ROPE, R, NOPE + ROPE, VD, 2, true]);
    // One q_proj (q_lora_rank null) is read only from 27 layers; a tied head not at all.
    expect(() => hfGgufMetadata({ ...cfg, q_lora_rank: null }, 1, { kind: 'none' })).toThrow(/q_lora_rank/);
    expect(() => hfGgufMetadata({ ...cfg, tie_word_embeddings: true }, 1, { kind: 'none' })).toThrow(/separate output head/);
    expect(() => hfGgufMetadata({ ...cfg, kv_lora_rank: undefined }, 1, { kind: 'none' })).toThrow(/kv_lora_rank/);
    expect(() => hfGgufMetadata({ ...cfg, scoring_func: 'relu' }, 1, { kind: 'none' })).toThrow(/scoring_func/);
    // kv_b_proj of the wrong shape for the config names both.
    const ck = await kvb('F32');
    expect(() => ggufView(ck, { ...cfg, v_head_dim: 3 })).toThrow(/kv_b_proj has shape/);
  });

  it('reads FP8 block-scaled weights as F32 with their scales applied (plain, kv_b split, stacked experts), and drops the scales', async () => {
    const fp8 = [
      ['model.layers.0.self_attn.o_proj.weight', [H, HEADS * VD]],
      ['model.layers.0.self_attn.kv_b_proj.weight', [HEADS * (NOPE + VD), R]],
      ['model.layers.0.mlp.experts.0.gate_proj.weight', [4, H]],
      ['model.layers.0.mlp.experts.1.gate_proj.weight', [4, H]],
      ['model.layers.0.mlp.experts.0.down_proj.weight', [H, 4]],
      ['model.layers.0.mlp.experts.1.down_proj.weight', [H, 4]],
    ] as [string, number[]][];
    const names = await fp8Equivalence(fp8, [{ name: 'model.layers.0.input_layernorm.weight', dtype: 'BF16', shape: [H], data: new Uint16Array(H).fill(0x3f80) }], cfg);
    expect(names).toEqual(['blk.0.attn_output.weight', 'blk.0.attn_k_b.weight', 'blk.0.attn_v_b.weight', 'blk.0.ffn_gate_exps.weight', 'blk.0.ffn_down_exps.weight', 'blk.0.attn_norm.weight']);
  });
});
