// mlx_lm's own MoE names (src/convert/mlx-switch.ts): a layer's experts stacked in
// `mlp.switch_mlp.{gate,up,down}_proj` ([experts, rows, cols], MLX-quantized or float) must give
// the GGUF and the forward of the same checkpoint saved expert by expert under Hugging Face's names.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, ensureBuilt, tempDir } from '../cli/helpers.js';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect } from '../../src/io/stream.js';
import { quantize } from '../../src/quantize.js';
import { f32ToBf16 } from '../../src/index.js';
import { llamaConfig, llamaTensorNames } from '../../src/eval/config.js';
import { LlamaModel, checkpointWeights } from '../../src/eval/llama.js';
import { openCheckpoint } from '../../src/io/open.js';
import { fromPath } from '../../src/io/node.js';
import { familyView } from '../../src/convert/arch/index.js';
import { mlxQuantizationOf } from '../../src/io/mlx.js';
import { openSafetensors } from '../../src/io/safetensors.js';
import { fromBuffer } from '../../src/io/source.js';
import { mlxSwitchView } from '../../src/convert/mlx-switch.js';

const D = 64, HEAD = 32, E = 4, VOCAB = 64;
const CONFIG = {
  architectures: ['Qwen3MoeForCausalLM'], model_type: 'qwen3_moe', hidden_size: D, intermediate_size: 128, moe_intermediate_size: D,
  num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1, head_dim: HEAD, vocab_size: VOCAB, num_experts: E,
  num_experts_per_tok: 2, norm_topk_prob: true, rms_norm_eps: 1e-6, rope_theta: 10000, max_position_embeddings: 128,
  tie_word_embeddings: false, hidden_act: 'silu', decoder_sparse_step: 1, mlp_only_layers: [], attention_bias: false,
};

function shapeOf(n: string): number[] {
  if (n.endsWith('embed_tokens.weight') || n === 'lm_head.weight') return [VOCAB, D];
  if (/(q|k)_norm\.weight$/.test(n)) return [HEAD];
  if (n.endsWith('norm.weight')) return [D];
  if (n.endsWith('q_proj.weight')) return [2 * HEAD, D];
  if (/(k|v)_proj\.weight$/.test(n)) return [HEAD, D];
  if (n.endsWith('o_proj.weight')) return [D, 2 * HEAD];
  if (n.endsWith('mlp.gate.weight')) return [E, D];
  return [D, D]; // expert gate / up / down
}

function values(n: string, count: number): Float32Array {
  let s = [...n].reduce((a, c) => (a * 31 + c.charCodeAt(0)) >>> 0, 7);
  return Float32Array.from({ length: count }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return Math.fround((n.includes('norm') ? 1 : 0) + ((s >>> 8) / 2 ** 24 - 0.5) * 0.2);
  });
}

interface St { name: string; dtype: string; shape: number[]; data: Uint8Array }
const EXPERT = /^(model\.layers\.\d+\.mlp\.)experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$/;

/** The checkpoint as mlx_lm keeps it: experts per name (HF) or stacked (switch_mlp); MLX 4-bit or BF16 linears. */
async function checkpoint(stacked: boolean, quantized: boolean): Promise<St[]> {
  const cfg = llamaConfig(CONFIG);
  const out: St[] = [];
  const stacks = new Map<string, St[][]>();
  for (const n of llamaTensorNames(cfg)) {
    const shape = shapeOf(n);
    const x = values(n, shape.reduce((a, b) => a * b, 1));
    const linear = shape.length === 2 && !n.includes('embed_tokens') && n !== 'lm_head.weight';
    let parts: St[];
    if (quantized && linear) {
      const q = await quantize(x, { format: 'mlx', rowLength: shape[1], bits: 4, groupSize: 64, scaleDtype: 'bf16' });
      const [rows, cols] = shape, codes = (rows * cols) / 2, per = rows * (cols / 64) * 2;
      const base = n.slice(0, -'.weight'.length);
      parts = [
        { name: n, dtype: 'U32', shape: [rows, cols / 8], data: q.data.subarray(0, codes) },
        { name: `${base}.scales`, dtype: 'BF16', shape: [rows, cols / 64], data: q.data.subarray(codes, codes + per) },
        { name: `${base}.biases`, dtype: 'BF16', shape: [rows, cols / 64], data: q.data.subarray(codes + per) },
      ];
    } else {
      const b = Uint16Array.from(x, f32ToBf16);
      parts = [{ name: n, dtype: 'BF16', shape, data: new Uint8Array(b.buffer) }];
    }
    const m = EXPERT.exec(n);
    if (!stacked || !m) {
      out.push(...parts);
      continue;
    }
    const key = `${m[1]}switch_mlp.${m[3]}`;
    let list = stacks.get(key);
    if (!list) {
      stacks.set(key, (list = []));
      // the stack takes its first expert's place
      out.push({ name: key, dtype: '', shape: [], data: new Uint8Array(0) });
    }
    list[Number(m[2])] = parts;
  }
  return out.flatMap((t) => {
    if (t.dtype !== '') return [t];
    const list = stacks.get(t.name)!;
    return list[0].map((first, i) => {
      const suffix = first.name.slice(first.name.lastIndexOf('.'));
      const data = new Uint8Array(list.reduce((a, p) => a + p[i].data.length, 0));
      list.reduce((at, p) => { data.set(p[i].data, at); return at + p[i].data.length; }, 0);
      return { name: `${t.name}${suffix}`, dtype: first.dtype, shape: [E, ...first.shape], data };
    });
  });
}

describe('mlx_lm stacked experts (switch_mlp)', () => {
  let tmp: string;
  beforeAll(async () => {
    await ensureBuilt();
    tmp = tempDir('mlx-switch');
  }, 120_000);
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  const write = async (dir: string, tensors: St[], quantized: boolean) => {
    mkdirSync(join(tmp, dir), { recursive: true });
    writeFileSync(join(tmp, dir, 'config.json'), JSON.stringify(quantized ? { ...CONFIG, quantization: { group_size: 64, bits: 4 } } : CONFIG));
    writeFileSync(join(tmp, dir, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
    return join(tmp, dir);
  };

  for (const quantized of [true, false]) {
    it(`${quantized ? 'MLX 4-bit' : 'BF16'} experts: the GGUF and the forward of the per-expert checkpoint`, async () => {
      const stacked = await checkpoint(true, quantized);
      expect(stacked.filter((t) => t.name.includes('switch_mlp')).map((t) => [t.name, t.dtype, t.shape]).slice(0, quantized ? 3 : 1)).toEqual(quantized
        ? [['model.layers.0.mlp.switch_mlp.gate_proj.weight', 'U32', [E, D, D / 8]], ['model.layers.0.mlp.switch_mlp.gate_proj.scales', 'BF16', [E, D, 1]], ['model.layers.0.mlp.switch_mlp.gate_proj.biases', 'BF16', [E, D, 1]]]
        : [['model.layers.0.mlp.switch_mlp.gate_proj.weight', 'BF16', [E, D, D]]]);
      const kind = quantized ? 'q' : 'f';
      // same folder name: it becomes general.name
      const a = await write(`per-expert-${kind}/model`, await checkpoint(false, quantized), quantized);
      const b = await write(`switch-${kind}/model`, stacked, quantized);
      for (const dir of [a, b]) {
        const r = await cli(['quantize', dir, '-o', `${dir}.gguf`, '--preset', 'q8_0', '--tokenizer', 'none'], { cwd: tmp });
        expect(r.code, r.stderr).toBe(0);
      }
      const ga = readFileSync(`${a}.gguf`), gb = readFileSync(`${b}.gguf`);
      expect(ga.length).toBeGreaterThan(0);
      expect(Buffer.compare(ga, gb)).toBe(0);
      // the reference forward reads the stacks through the same view
      const cfg = llamaConfig(CONFIG);
      const logits: Float32Array[] = [];
      for (const dir of [a, b]) {
        const ck = await openCheckpoint(fromPath(join(dir, 'model.safetensors')), { mlx: mlxQuantizationOf(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'))) });
        if (dir === b) expect(familyView(ck, cfg)).not.toBe(ck);
        const model = await LlamaModel.load(cfg, checkpointWeights(familyView(ck, cfg), cfg));
        logits.push(model.forward([1, 5, 9, 2]).slice());
      }
      expect([...logits[1]]).toEqual([...logits[0]]);
    });
  }
});

describe('mlxSwitchView', () => {
  const stack = Float32Array.from({ length: 2 * 3 * 4 }, (_v, i) => i);
  const file = (extra: St[] = []) => collect(writeSafetensors({ tensors: [
    ...['gate_proj', 'up_proj', 'down_proj'].map((p) => ({ name: `model.layers.0.block_sparse_moe.switch_mlp.${p}.weight`, dtype: 'F32', shape: [2, 3, 4], data: new Uint8Array(stack.buffer) })),
    { name: 'model.layers.0.block_sparse_moe.gate.weight', dtype: 'F32', shape: [2, 4], data: new Uint8Array(32) },
    ...extra,
  ] }));

  it("names Mixtral's experts w1 / w3 / w2, each a slice of its stack, rows read alone", async () => {
    const v = mlxSwitchView(await openSafetensors(fromBuffer(await file(), 'mixtral')));
    expect(v.tensors.map((t) => t.name)).toEqual([
      ...['w1', 'w3', 'w2'].flatMap((w) => [0, 1].map((e) => `model.layers.0.block_sparse_moe.experts.${e}.${w}.weight`)),
      'model.layers.0.block_sparse_moe.gate.weight',
    ]);
    expect(v.tensor('model.layers.0.block_sparse_moe.experts.1.w2.weight')).toMatchObject({ dtype: 'F32', shape: [3, 4] });
    expect([...await v.readF32('model.layers.0.block_sparse_moe.experts.1.w3.weight')]).toEqual([...stack.subarray(12)]);
    expect([...(await v.readRows!('model.layers.0.block_sparse_moe.experts.1.w1.weight', 2, 1)).values]).toEqual([...stack.subarray(20)]);
    expect(v.locate!('model.layers.0.block_sparse_moe.experts.1.w1.weight', 1, 2)?.offset).toBe(v.locate!('model.layers.0.block_sparse_moe.experts.0.w1.weight', 0, 1)!.offset + 16 * 4);
    await expect(v.readRows!('model.layers.0.block_sparse_moe.experts.0.w1.weight', 2, 2)).rejects.toMatchObject({ code: 'E_BAD_INPUT' });
  });

  it('refuses a stack of the wrong rank, naming it', async () => {
    const bad = { name: 'model.layers.1.mlp.switch_mlp.up_proj.weight', dtype: 'F32', shape: [8], data: new Uint8Array(32) };
    const ck = await openSafetensors(fromBuffer(await file([bad]), 'bad'));
    try {
      mlxSwitchView(ck);
      expect.unreachable();
    } catch (e) {
      expect(e).toMatchObject({ code: 'E_MODEL', message: /model\.layers\.1\.mlp\.switch_mlp\.up_proj\.weight.*\[experts, rows, cols\]/ });
    }
  });
});
