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
