// Phi-1/1.5/2 checkpoints through convert/phi2.ts (renames only), their config.json keys, and a GGUF
// written from one: phi2 keys, the biased head as output.bias, q/k/v apart with their biases.
import { beforeAll, describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isPhi2Checkpoint, phi2View } from '../../src/convert/phi2.js';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect } from '../../src/io/stream.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { llamaConfig } from '../../src/eval/llama.js';
import { cli, ensureBuilt, tempDir } from '../cli/helpers.js';

const H = 64, V = 96;
const seq = (n: number, k: number) => Float32Array.from({ length: n }, (_, i) => (((i * k) % 89) - 44) / 64);
function tensors() {
  const w = (name: string, shape: number[], k: number) => ({ name, dtype: 'F32', shape, data: seq(shape.reduce((a, b) => a * b, 1), k) });
  const t = [w('model.embed_tokens.weight', [V, H], 1), w('model.final_layernorm.weight', [H], 2), w('model.final_layernorm.bias', [H], 3), w('lm_head.weight', [V, H], 4), w('lm_head.bias', [V], 5),
    w('model.layers.0.input_layernorm.weight', [H], 6), w('model.layers.0.input_layernorm.bias', [H], 7)];
  for (const x of ['q', 'k', 'v']) t.push(w(`model.layers.0.self_attn.${x}_proj.weight`, [H, H], 8), w(`model.layers.0.self_attn.${x}_proj.bias`, [H], 9));
  t.push(w('model.layers.0.self_attn.dense.weight', [H, H], 10), w('model.layers.0.self_attn.dense.bias', [H], 11), w('model.layers.0.mlp.fc1.weight', [4 * H, H], 12),
    w('model.layers.0.mlp.fc1.bias', [4 * H], 13), w('model.layers.0.mlp.fc2.weight', [H, 4 * H], 14), w('model.layers.0.mlp.fc2.bias', [H], 15));
  return t;
}
const config = { architectures: ['PhiForCausalLM'], model_type: 'phi', hidden_size: H, intermediate_size: 4 * H, num_hidden_layers: 1, num_attention_heads: 4, num_key_value_heads: 4,
  vocab_size: V, max_position_embeddings: 128, partial_rotary_factor: 0.4, rope_theta: 10000, layer_norm_eps: 1e-5, hidden_act: 'gelu_new', qk_layernorm: false, tie_word_embeddings: false };

describe('Phi-2', () => {
  let dir: string;
  beforeAll(async () => {
    await ensureBuilt();
    dir = tempDir('phi2');
  }, 300_000);

  it('renames dense, fc1, fc2 and final_layernorm; reads the same values', async () => {
    const ck = await openCheckpoint(fromBuffer(await collect(writeSafetensors({ tensors: tensors() })), 'phi.safetensors'));
    expect(isPhi2Checkpoint(ck)).toBe(true);
    const v = phi2View(ck);
    expect(v.tensors.map((t) => t.name).filter((n) => /o_proj|up_proj|down_proj|model\.norm/.test(n)))
      .toEqual(['model.norm.weight', 'model.norm.bias', 'model.layers.0.self_attn.o_proj.weight', 'model.layers.0.self_attn.o_proj.bias', 'model.layers.0.mlp.up_proj.weight', 'model.layers.0.mlp.up_proj.bias', 'model.layers.0.mlp.down_proj.weight', 'model.layers.0.mlp.down_proj.bias']);
    expect(await v.readF32('model.layers.0.mlp.up_proj.bias')).toEqual(await ck.readF32('model.layers.0.mlp.fc1.bias'));
    expect(v.tensor('model.layers.0.mlp.down_proj.weight')).toMatchObject({ name: 'model.layers.0.mlp.down_proj.weight', shape: [H, 4 * H] });
  });

  it("reads PhiConfig's keys; q/k LayerNorms are refused", () => {
    expect(llamaConfig(config).phi2).toEqual({ eps: 1e-5, rotaryDims: 6 });
    expect(() => llamaConfig({ ...config, qk_layernorm: true })).toThrow(/qk_layernorm/);
  });

  it('becomes GGUF with phi2 keys, a biased head and q/k/v apart', async () => {
    writeFileSync(join(dir, 'model.safetensors'), await collect(writeSafetensors({ tensors: tensors() })));
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
    const out = join(dir, 'phi.gguf');
    const r = await cli(['quantize', dir, '-o', out, '--preset', 'q8_0'], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    const g = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(out)), out));
    expect([g.metadata['general.architecture'], g.metadata['phi2.rope.dimension_count'], g.metadata['phi2.attention.head_count_kv']]).toEqual(['phi2', 6, 4]);
    expect(['output.weight', 'output.bias', 'output_norm.bias', 'blk.0.attn_q.weight', 'blk.0.attn_v.bias', 'blk.0.attn_output.bias', 'blk.0.ffn_up.weight', 'blk.0.ffn_down.bias'].map((n) => g.tensor(n).dtype))
      .toEqual(['Q8_0', 'F32', 'F32', 'Q8_0', 'F32', 'F32', 'Q8_0', 'F32']);
    expect(await g.readF32('output.bias')).toEqual(seq(V, 5));
  });
});
