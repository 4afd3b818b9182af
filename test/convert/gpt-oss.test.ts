// gpt-oss checkpoints through convert/gpt-oss.ts: MXFP4 experts decoded as transformers decodes
// them (byte i: element 2i low nibble, 2i + 1 high; E2M1 times 2^(scale - 127)), gate and up
// taken from the even and odd rows of gate_up_proj, dequantized releases transposed, row ranges,
// typed errors, and the mxfp4_moe preset writing the experts back as GGUF MXFP4 without loss.
import { beforeAll, describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gptOssView, isGptOssCheckpoint } from '../../src/convert/gpt-oss.js';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect } from '../../src/io/stream.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { ErrorCodes } from '../../src/errors.js';
import type { Checkpoint } from '../../src/io/checkpoint.js';
import { cli, ensureBuilt, tempDir } from '../cli/helpers.js';

const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];
type T = { name: string; dtype: string; shape: number[]; data: Float32Array | Uint8Array };
const open = async (tensors: T[]) => openCheckpoint(fromBuffer(await collect(writeSafetensors({ tensors })), 'oss.safetensors'));

let s = 7;
const byte = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) >>> 24);
const rnd = (n: number) => Float32Array.from({ length: n }, () => byte() / 128 - 1);

/** Experts of one layer: E experts, gate_up [E, 2*ff, h] and down [E, h, ff] in MXFP4, with biases. */
function packed(E: number, ff: number, h: number): T[] {
  const p = 'model.layers.0.mlp.';
  const blocks = (rows: number, cols: number) => Uint8Array.from({ length: E * rows * (cols / 32) * 16 }, byte);
  const scales = (rows: number, cols: number) => Uint8Array.from({ length: E * rows * (cols / 32) }, () => 120 + (byte() & 7));
  return [
    { name: `${p}router.weight`, dtype: 'F32', shape: [E, h], data: rnd(E * h) },
    { name: `${p}router.bias`, dtype: 'F32', shape: [E], data: rnd(E) },
    { name: `${p}experts.gate_up_proj_blocks`, dtype: 'U8', shape: [E, 2 * ff, h / 32, 16], data: blocks(2 * ff, h) },
    { name: `${p}experts.gate_up_proj_scales`, dtype: 'U8', shape: [E, 2 * ff, h / 32], data: scales(2 * ff, h) },
    { name: `${p}experts.gate_up_proj_bias`, dtype: 'F32', shape: [E, 2 * ff], data: rnd(E * 2 * ff) },
    { name: `${p}experts.down_proj_blocks`, dtype: 'U8', shape: [E, h, ff / 32, 16], data: blocks(h, ff) },
    { name: `${p}experts.down_proj_scales`, dtype: 'U8', shape: [E, h, ff / 32], data: scales(h, ff) },
    { name: `${p}experts.down_proj_bias`, dtype: 'F32', shape: [E, h], data: rnd(E * h) },
    { name: 'model.layers.0.self_attn.sinks', dtype: 'F32', shape: [4], data: rnd(4) },
  ];
}

/** Row r of expert e of an MXFP4 pair, decoded independently of the view. */
function decodeRow(t: T[], which: string, e: number, r: number): Float32Array {
  const b = t.find((x) => x.name.endsWith(`${which}_blocks`))!, sc = t.find((x) => x.name.endsWith(`${which}_scales`))!;
  const [, rows, nb] = b.shape;
  const out = new Float32Array(nb * 32);
  for (let k = 0; k < nb; k++) {
    const scale = 2 ** ((sc.data as Uint8Array)[(e * rows + r) * nb + k] - 127);
    for (let i = 0; i < 16; i++) {
      const v = (b.data as Uint8Array)[((e * rows + r) * nb + k) * 16 + i];
      out[k * 32 + 2 * i] = E2M1[v & 15] * scale;
      out[k * 32 + 2 * i + 1] = E2M1[v >> 4] * scale;
    }
  }
  return out;
}

describe('gpt-oss view', () => {
  it('decodes MXFP4 experts: gate from even rows, up from odd rows, down whole; biases split the same way', async () => {
    const t = packed(3, 64, 64);
    const ck = await open(t);
    expect(isGptOssCheckpoint(ck)).toBe(true);
    const v = gptOssView(ck);
    const p = 'model.layers.0.mlp.';
    expect(v.tensor(`${p}experts.2.gate_proj.weight`)).toMatchObject({ dtype: 'F32', shape: [64, 64] });
    expect(v.tensor(`${p}experts.2.down_proj.weight`)).toMatchObject({ dtype: 'F32', shape: [64, 64] });
    const gate = await v.readF32(`${p}experts.2.gate_proj.weight`);
    const up = await v.readF32(`${p}experts.2.up_proj.weight`);
    const down = await v.readF32(`${p}experts.1.down_proj.weight`);
    for (const f of [0, 5, 63]) {
      expect(gate.subarray(f * 64, (f + 1) * 64)).toEqual(decodeRow(t, 'gate_up_proj', 2, 2 * f));
      expect(up.subarray(f * 64, (f + 1) * 64)).toEqual(decodeRow(t, 'gate_up_proj', 2, 2 * f + 1));
      expect(down.subarray(f * 64, (f + 1) * 64)).toEqual(decodeRow(t, 'down_proj', 1, f));
    }
    // A row range reads as the same rows of the whole.
    const rows = await v.readRows!(`${p}experts.2.up_proj.weight`, 7, 5);
    expect(rows.values).toEqual(up.subarray(7 * 64, 12 * 64));
    const bias = t.find((x) => x.name.endsWith('gate_up_proj_bias'))!.data as Float32Array;
    const ub = await v.readF32(`${p}experts.1.up_proj.bias`);
    expect(ub).toEqual(Float32Array.from({ length: 64 }, (_, f) => bias[128 + 2 * f + 1]));
    // The router under Qwen-MoE's name; everything else as it is.
    expect(await v.readF32(`${p}gate.bias`)).toEqual(t[1].data);
    expect(await v.readF32('model.layers.0.self_attn.sinks')).toEqual(t[8].data);
    expect(v.tensors.some((x) => x.name.includes('_blocks') || x.name.includes('_scales') || x.name.includes('router'))).toBe(false);
  });

  it('transposes dequantized releases ([experts, in, out])', async () => {
    const E = 2, h = 8, ff = 4;
    const gu = rnd(E * h * 2 * ff), dn = rnd(E * ff * h);
    const ck = await open([
      { name: 'model.layers.0.mlp.experts.gate_up_proj', dtype: 'F32', shape: [E, h, 2 * ff], data: gu },
      { name: 'model.layers.0.mlp.experts.down_proj', dtype: 'F32', shape: [E, ff, h], data: dn },
    ]);
    const v = gptOssView(ck);
    const up = await v.readF32('model.layers.0.mlp.experts.1.up_proj.weight');
    const down = await v.readF32('model.layers.0.mlp.experts.1.down_proj.weight');
    for (let f = 0; f < ff; f++) for (let j = 0; j < h; j++) expect(up[f * h + j]).toBe(gu[(1 * h + j) * 2 * ff + 2 * f + 1]);
    for (let o = 0; o < h; o++) for (let j = 0; j < ff; j++) expect(down[o * ff + j]).toBe(dn[(1 * ff + j) * h + o]);
  });

  it('blocks without scales, or scales of another shape, fail naming the tensor', async () => {
    const t = packed(2, 32, 32);
    const noScales = await open(t.filter((x) => !x.name.endsWith('gate_up_proj_scales')));
    expect(() => gptOssView(noScales)).toThrow(expect.objectContaining({ code: ErrorCodes.MODEL, details: expect.objectContaining({ tensor: 'model.layers.0.mlp.experts.gate_up_proj_blocks' }) }));
    const wrong = await open(t.map((x) => (x.name.endsWith('down_proj_scales') ? { ...x, shape: [2, 16, 2], data: (x.data as Uint8Array).subarray(0, 64) } : x)));
    expect(() => gptOssView(wrong)).toThrow(/down_proj_blocks.*not MXFP4 blocks/);
  });
});

describe('gpt-oss to GGUF with the mxfp4_moe preset', () => {
  let dir: string;
  beforeAll(async () => {
    await ensureBuilt();
    dir = tempDir('oss');
  }, 300_000);

  it('experts stay MXFP4 with their values, other matrices Q8_0, vectors F32, file type 38', async () => {
    const H = 64, E = 2, FF = 64, V = 96;
    const layer = packed(E, FF, H);
    const w = (name: string, shape: number[]) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1)) });
    const tensors: T[] = [w('model.embed_tokens.weight', [V, H]), w('model.norm.weight', [H]), w('lm_head.weight', [V, H]),
      w('model.layers.0.input_layernorm.weight', [H]), w('model.layers.0.post_attention_layernorm.weight', [H]), ...layer];
    for (const x of ['q', 'k', 'v']) tensors.push(w(`model.layers.0.self_attn.${x}_proj.weight`, [x === 'q' ? 64 : 32, H]), w(`model.layers.0.self_attn.${x}_proj.bias`, [x === 'q' ? 64 : 32]));
    tensors.push(w('model.layers.0.self_attn.o_proj.weight', [H, 64]), w('model.layers.0.self_attn.o_proj.bias', [H]));
    writeFileSync(join(dir, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
    writeFileSync(join(dir, 'config.json'), JSON.stringify({
      architectures: ['GptOssForCausalLM'], model_type: 'gpt_oss', hidden_size: H, intermediate_size: FF, num_hidden_layers: 1, num_attention_heads: 4,
      num_key_value_heads: 2, head_dim: 16, vocab_size: V, max_position_embeddings: 256, rms_norm_eps: 1e-5, rope_theta: 150000, num_local_experts: E,
      num_experts_per_tok: 1, sliding_window: 8, layer_types: ['sliding_attention'], attention_bias: true, hidden_act: 'silu',
      rope_scaling: { rope_type: 'yarn', factor: 32, original_max_position_embeddings: 64, beta_fast: 32, beta_slow: 1, truncate: false },
    }));
    const out = join(dir, 'oss.gguf');
    const r = await cli(['quantize', dir, '-o', out, '--preset', 'mxfp4_moe'], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    const g: Checkpoint = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(out)), out));
    const dtype = (n: string) => g.tensor(n).dtype;
    expect(g.metadata['general.architecture']).toBe('gpt-oss');
    expect(g.metadata['general.file_type']).toBe(38);
    expect([g.metadata['gpt-oss.expert_count'], g.metadata['gpt-oss.expert_feed_forward_length'], g.metadata['gpt-oss.attention.sliding_window'], g.metadata['gpt-oss.attention.key_length']]).toEqual([E, FF, 8, 16]);
    expect(['blk.0.ffn_gate_exps.weight', 'blk.0.ffn_up_exps.weight', 'blk.0.ffn_down_exps.weight'].map(dtype)).toEqual(['MXFP4', 'MXFP4', 'MXFP4']);
    expect(['blk.0.attn_q.weight', 'blk.0.attn_output.weight', 'blk.0.ffn_gate_inp.weight', 'output.weight', 'token_embd.weight'].map(dtype)).toEqual(['Q8_0', 'Q8_0', 'F32', 'Q8_0', 'Q8_0']);
    expect(['blk.0.attn_sinks.weight', 'blk.0.ffn_gate_inp.bias', 'blk.0.ffn_up_exps.bias', 'blk.0.attn_output.bias', 'blk.0.post_attention_norm.weight'].map(dtype)).toEqual(['F32', 'F32', 'F32', 'F32', 'F32']);
    expect(g.tensor('blk.0.ffn_down_exps.bias').shape).toEqual([E, H]);
    const src = gptOssView(await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(join(dir, 'model.safetensors'))), 'model.safetensors')));
    const up = await g.readF32('blk.0.ffn_up_exps.weight');
    // Equal values (a -0 code reads back as +0).
    const plain = (a: Float32Array) => a.map((x) => x + 0);
    for (let e = 0; e < E; e++) expect(plain(up.subarray(e * FF * H, (e + 1) * FF * H))).toEqual(plain(await src.readF32(`model.layers.0.mlp.experts.${e}.up_proj.weight`)));
    expect(await g.readF32('blk.0.ffn_gate_exps.bias')).toEqual(Float32Array.from({ length: E * FF }, (_, i) => (layer[4].data as Float32Array)[2 * i]));
  });
});
