// A config.json that contradicts the checkpoint's tensors is refused before a GGUF is written
// (checkConfigTensors, shared with `webquant eval`), and llama3 / linear rope scaling with
// factors the formulas divide by is refused, naming the key.
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SHARED, hasShared } from '../helpers/shared.js';
import { cli, tempDir } from '../cli/helpers.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { ggufView } from '../../src/convert/hf-view.js';
import { checkConfigTensors, llama3RopeFactors, llamaMetadata, type LlamaConfig } from '../../src/convert/arch/index.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';

const DIR = join(SHARED, 'models/stories260K');
const CONFIG = (): LlamaConfig & Record<string, unknown> => JSON.parse(readFileSync(join(DIR, 'config.json'), 'utf8'));

function thrown(f: () => unknown): WebquantError {
  try {
    f();
  } catch (e) {
    if (e instanceof WebquantError) return e;
    throw e;
  }
  throw new Error('did not throw');
}

describe.skipIf(!hasShared)('ggufView refuses a config.json that contradicts the tensors', () => {
  const open = async () => openCheckpoint(fromBuffer(new Uint8Array(readFileSync(join(DIR, 'model.safetensors'))), 'model.safetensors'));

  it('names the key, the tensor and both values', async () => {
    const ck = await open();
    expect(ggufView(ck, CONFIG()).tensors).toHaveLength(47);
    const cases: [Record<string, unknown>, string, string, string, unknown, unknown][] = [
      // [config change, code, option, tensor, config value, tensor value]
      [{ num_hidden_layers: 1e9 }, ErrorCodes.TENSOR_NOT_FOUND, 'num_hidden_layers', 'model.layers.999999999.', 1e9, 5],
      [{ num_hidden_layers: 9 }, ErrorCodes.TENSOR_NOT_FOUND, 'num_hidden_layers', 'model.layers.8.', 9, 5],
      [{ num_hidden_layers: 3 }, ErrorCodes.MODEL, 'num_hidden_layers', 'model.layers.4.', 3, 5],
      [{ hidden_size: 128 }, ErrorCodes.MODEL, 'hidden_size', 'model.embed_tokens.weight', 128, 64],
      [{ vocab_size: 600 }, ErrorCodes.MODEL, 'vocab_size', 'model.embed_tokens.weight', 600, 512],
      [{ num_attention_heads: 16 }, ErrorCodes.MODEL, 'num_key_value_heads, head_dim', 'self_attn.k_proj.weight', 16, 32],
      [{ num_key_value_heads: 8 }, ErrorCodes.MODEL, 'num_key_value_heads, head_dim', 'self_attn.k_proj.weight', 64, 32],
      [{ head_dim: 16 }, ErrorCodes.MODEL, 'head_dim', 'self_attn.', 64, 32],
      [{ intermediate_size: 200 }, ErrorCodes.MODEL, 'intermediate_size', 'mlp.', 200, 172],
    ];
    for (const [change, code, option, tensor, value, stored] of cases) {
      const e = thrown(() => ggufView(ck, { ...CONFIG(), ...change }));
      const what = JSON.stringify(change);
      expect(e.code, what).toBe(code);
      expect(e.details.option, what).toContain(option);
      expect(String(e.details.tensor), what).toContain(tensor);
      expect([e.details.value, e.details.expected], what).toEqual([value, stored]);
    }
  });

  it('webquant quantize exits 2 and writes nothing', async () => {
    const tmp = tempDir('config-tensors');
    writeFileSync(join(tmp, 'model.safetensors'), readFileSync(join(DIR, 'model.safetensors')));
    writeFileSync(join(tmp, 'config.json'), JSON.stringify({ ...CONFIG(), hidden_size: 128 }));
    const r = await cli(['quantize', tmp, '-o', 'x.gguf', '--preset', 'q8_0', '--workers', '1'], { cwd: tmp });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/"model\.embed_tokens\.weight" is \[512, 64\], but config\.json's hidden_size 128 needs \[512, 128\].*E_MODEL/);
    expect(existsSync(join(tmp, 'x.gguf'))).toBe(false);
  });
});

describe('checkConfigTensors', () => {
  const base = { model_type: 'qwen3_moe', hidden_size: 8, intermediate_size: 32, moe_intermediate_size: 4, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 16, vocab_size: 10 };
  const tensors = (ffn: number) => [
    { name: 'model.embed_tokens.weight', shape: [10, 8] },
    // head_dim independent of hidden_size / heads (Qwen3, Gemma).
    { name: 'model.layers.0.self_attn.q_proj.weight', shape: [32, 8] },
    { name: 'model.layers.0.self_attn.k_proj.weight', shape: [16, 8] },
    { name: 'model.layers.0.self_attn.o_proj.weight', shape: [8, 32] },
    { name: 'model.layers.0.mlp.experts.0.gate_proj.weight', shape: [ffn, 8] },
    { name: 'model.layers.0.mlp.experts.0.down_proj.weight', shape: [8, ffn] },
  ];

  it("checks MoE experts against moe_intermediate_size, and DeepSeek-V3's extra (MTP) layers pass", () => {
    expect(() => checkConfigTensors(base, tensors(4), 'moe')).not.toThrow();
    const e = thrown(() => checkConfigTensors(base, tensors(32), 'moe'));
    expect([e.code, e.details.option, e.details.tensor, e.details.value, e.details.expected]).toEqual([ErrorCodes.MODEL, 'moe_intermediate_size', 'model.layers.0.mlp.experts.0.gate_proj.weight', 4, 32]);
    const mtp = [{ name: 'model.embed_tokens.weight', shape: [10, 8] }, { name: 'model.layers.0.input_layernorm.weight', shape: [8] }, { name: 'model.layers.1.input_layernorm.weight', shape: [8] }];
    expect(() => checkConfigTensors({ ...base, model_type: 'deepseek_v3', kv_lora_rank: 4 }, mtp, 'ds')).not.toThrow();
    expect(thrown(() => checkConfigTensors({ ...base, model_type: 'llama' }, mtp, 'll')).details.option).toBe('num_hidden_layers');
  });

  it('refuses a 1-D tensor where the config needs a matrix, naming the stored name', () => {
    const e = thrown(() => checkConfigTensors(base, [{ name: 'model.embed_tokens.weight', shape: [80], stored: 'token_embd.weight' }, ...tensors(4).slice(1)], 'x.gguf'));
    expect([e.code, e.details.tensor, e.details.expected]).toEqual([ErrorCodes.MODEL, 'token_embd.weight', '[10, 8]']);
  });
});

describe('rope scaling factors the formulas divide by', () => {
  const rs = { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 };

  it('llama3: factor, low/high_freq_factor and original_max_position_embeddings finite and > 0, high != low', () => {
    expect(llama3RopeFactors(rs, 500000, 64)).toHaveLength(32);
    for (const [key, v] of [['factor', 0], ['factor', -2], ['factor', Infinity], ['factor', '8'], ['low_freq_factor', 0], ['high_freq_factor', Number.NaN], ['original_max_position_embeddings', 0]] as const) {
      const e = thrown(() => llama3RopeFactors({ ...rs, [key]: v }, 500000, 64));
      expect([e.code, e.details.option], `${key} ${String(v)}`).toEqual([ErrorCodes.CONFIG, `rope_scaling.${key}`]);
    }
    const same = thrown(() => llama3RopeFactors({ ...rs, high_freq_factor: 1 }, 500000, 64));
    expect([same.code, same.details.option]).toEqual([ErrorCodes.CONFIG, 'rope_scaling.high_freq_factor']);
  });

  it('linear: a factor of 0 is refused (llama.cpp would read it as no scaling)', () => {
    const cfg = { hidden_size: 64, intermediate_size: 172, num_hidden_layers: 5, num_attention_heads: 8, vocab_size: 512 };
    expect(llamaMetadata({ ...cfg, rope_scaling: { type: 'linear', factor: 2 } })['llama.rope.scaling.factor']).toEqual({ type: 'f32', value: 2 });
    expect(thrown(() => llamaMetadata({ ...cfg, rope_scaling: { type: 'linear', factor: 0 } })).details.option).toBe('rope_scaling.factor');
  });
});
