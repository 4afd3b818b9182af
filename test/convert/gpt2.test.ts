// GPT-2 checkpoints through convert/gpt2.ts: Conv1D weights ([in, out]) presented transposed under
// Llama-style names, in F32 and BF16, whole and by row ranges; the causal-mask buffers dropped;
// the "transformer." prefix; config.json's GPT-2 names; typed errors; and a GGUF written from it.
import { beforeAll, describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gpt2View, isGpt2Checkpoint } from '../../src/convert/gpt2.js';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect } from '../../src/io/stream.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { readConfig } from '../../src/io/config.js';
import { ErrorCodes } from '../../src/errors.js';
import { llamaConfig } from '../../src/eval/llama.js';
import { cli, ensureBuilt, tempDir } from '../cli/helpers.js';
import { writeGpt2Dir } from '../helpers/gpt2-model.js';

type T = { name: string; dtype: string; shape: number[]; data: Float32Array | Uint8Array };
const open = async (tensors: T[]) => openCheckpoint(fromBuffer(await collect(writeSafetensors({ tensors })), 'gpt2.safetensors'));
const seq = (n: number, k = 1) => Float32Array.from({ length: n }, (_, i) => (i * k) % 97 - 48);
const bf16 = (f: Float32Array) => new Uint8Array(Uint16Array.from(f, (v) => new Uint32Array(new Float32Array([v]).buffer)[0] >>> 16).buffer);

describe('GPT-2 view', () => {
  it('presents Conv1D weights transposed, biases and norms renamed, the mask buffer dropped', async () => {
    const H = 8;
    const cAttn = seq(H * 3 * H, 5);
    const ck = await open([
      { name: 'transformer.wte.weight', dtype: 'F32', shape: [16, H], data: seq(16 * H) },
      { name: 'transformer.h.0.attn.c_attn.weight', dtype: 'F32', shape: [H, 3 * H], data: cAttn },
      { name: 'transformer.h.0.attn.c_attn.bias', dtype: 'F32', shape: [3 * H], data: seq(3 * H) },
      { name: 'transformer.h.0.attn.bias', dtype: 'F32', shape: [1, 1, 4, 4], data: new Float32Array(16) },
      { name: 'transformer.h.0.mlp.c_fc.weight', dtype: 'BF16', shape: [H, 4 * H], data: bf16(seq(4 * H * H, 3)) },
      { name: 'transformer.ln_f.bias', dtype: 'F32', shape: [H], data: seq(H) },
    ]);
    expect(isGpt2Checkpoint(ck)).toBe(true);
    const v = gpt2View(ck);
    expect(v.tensors.map((t) => t.name)).toEqual(['model.embed_tokens.weight', 'model.layers.0.self_attn.qkv_proj.weight', 'model.layers.0.self_attn.qkv_proj.bias', 'model.layers.0.mlp.up_proj.weight', 'model.norm.bias']);
    expect(v.tensor('model.layers.0.self_attn.qkv_proj.weight').shape).toEqual([3 * H, H]);
    const qkv = await v.readF32('model.layers.0.self_attn.qkv_proj.weight');
    for (let o = 0; o < 3 * H; o++) for (let i = 0; i < H; i++) expect(qkv[o * H + i]).toBe(cAttn[i * 3 * H + o]);
    // BF16 stays BF16, transposed; row ranges are rows of the transposed matrix.
    const up = await v.readValues('model.layers.0.mlp.up_proj.weight');
    expect(up.dtype).toBe('bf16');
    const upF = await v.readF32('model.layers.0.mlp.up_proj.weight');
    const rows = await v.readRows!('model.layers.0.mlp.up_proj.weight', 5, 3);
    expect(rows.values).toEqual((up.values as Uint16Array).subarray(5 * H, 8 * H));
    expect(upF[5 * H + 2]).toBe(seq(4 * H * H, 3)[2 * 4 * H + 5]);
  });

  it('a Conv1D weight that is not a float matrix fails naming it', async () => {
    const ck = await open([{ name: 'h.0.attn.c_attn.weight', dtype: 'F32', shape: [24], data: seq(24) }]);
    expect(() => gpt2View(ck)).toThrow(expect.objectContaining({ code: ErrorCodes.MODEL, details: expect.objectContaining({ tensor: 'h.0.attn.c_attn.weight' }) }));
  });

  it("reads GPT2Config's names (n_embd, n_layer, n_head, n_positions, n_inner null) and its tied head", async () => {
    const json = { architectures: ['GPT2LMHeadModel'], model_type: 'gpt2', n_embd: 64, n_layer: 3, n_head: 4, n_positions: 128, n_inner: null, vocab_size: 500, layer_norm_epsilon: 1e-5 };
    const c = await readConfig(fromBuffer(new TextEncoder().encode(JSON.stringify(json)), 'config.json'));
    expect([c.hiddenSize, c.numLayers, c.numHeads, c.maxPositions, c.intermediateSize, c.tieWordEmbeddings]).toEqual([64, 3, 4, 128, 256, true]);
    expect(llamaConfig(json).gpt2).toEqual({ eps: 1e-5, positions: 128 });
    expect(() => llamaConfig({ ...json, activation_function: 'relu' })).toThrow(/activation_function/);
  });
});

describe('GPT-2 to GGUF', () => {
  let dir: string;
  beforeAll(async () => {
    await ensureBuilt();
    dir = tempDir('gpt2');
  }, 300_000);

  it('gpt2 keys, Conv1D weights transposed into Q8_0 rows, positions and vectors kept', async () => {
    const H = 64, V = 96, P = 32;
    const { tensors } = await writeGpt2Dir(dir, H, V, P, (n, k) => seq(n, k).map((x) => x / 64));
    const out = join(dir, 'gpt2.gguf');
    const r = await cli(['quantize', dir, '-o', out, '--preset', 'q8_0'], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    const g = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(out)), out));
    expect([g.metadata['general.architecture'], g.metadata['gpt2.embedding_length'], g.metadata['gpt2.feed_forward_length'], g.metadata['gpt2.context_length'], g.metadata['gpt2.attention.layer_norm_epsilon']])
      .toEqual(['gpt2', H, 4 * H, P, Math.fround(1e-5)]);
    const dt = (n: string) => [g.tensor(n).dtype, ...g.tensor(n).shape];
    expect(dt('blk.0.attn_qkv.weight')).toEqual(['Q8_0', 3 * H, H]);
    expect(dt('blk.0.ffn_down.weight')).toEqual(['Q8_0', H, 4 * H]);
    expect(dt('position_embd.weight')).toEqual(['F32', P, H]);
    expect(dt('output_norm.bias')).toEqual(['F32', H]);
    expect(g.tensors.some((t) => t.name === 'output.weight')).toBe(false);
    // ffn_up row 3 is column 3 of c_fc.
    const up = await g.readF32('blk.0.ffn_up.weight');
    const cfc = tensors.find((t) => t.name === 'h.0.mlp.c_fc.weight')!.data as Float32Array;
    const col = Float32Array.from({ length: H }, (_, i) => cfc[i * 4 * H + 3]);
    const row = up.subarray(3 * H, 4 * H);
    for (let i = 0; i < H; i++) expect(Math.abs(row[i] - col[i])).toBeLessThan(0.02);
  });
});
