// config.json entries for runtimes: ModelOpt's for nvfp4 (weight-only or W4A4), and the input's
// own quantization entry left out when the output no longer holds that scheme.
import { describe, expect, it } from 'vitest';
import { modeloptQuantizationConfig, runtimeConfig } from '../../src/io/runtime-config.js';
import type { PlannedTensor } from '../../src/plan/types.js';

const t = (name: string, role: string, scheme: PlannedTensor['scheme'], dtype = 'BF16', shape = [64, 64]): PlannedTensor =>
  ({ name, role, scheme, dtype, shape, rows: shape[0], rowLength: shape[shape.length - 1], params: shape.reduce((a, b) => a * b, 1), reason: 'test' } as PlannedTensor);

const model = (scheme: (name: string) => PlannedTensor['scheme']) => [
  t('model.embed_tokens.weight', 'embedding', 'keep'),
  t('model.layers.0.input_layernorm.weight', 'norm', 'keep', 'BF16', [64]),
  t('model.layers.0.self_attn.q_proj.weight', 'attention', scheme('model.layers.0.self_attn.q_proj.weight')),
  t('model.layers.0.mlp.gate.weight', 'router', 'keep', 'BF16', [8, 64]),
  t('model.layers.0.mlp.experts.0.down_proj.weight', 'expert', scheme('model.layers.0.mlp.experts.0.down_proj.weight')),
  t('lm_head.weight', 'output', 'keep'),
];

const FP4 = { type: 'float', num_bits: 4, group_size: 16, dynamic: false };

describe('modeloptQuantizationConfig', () => {
  it('describes weight-only nvfp4 as W4A16_NVFP4 and lists the linear modules left unquantized in "ignore"', () => {
    const { config, warning } = modeloptQuantizationConfig(model(() => ({ format: 'nvfp4' })));
    expect(config).toEqual({
      quant_method: 'modelopt', quant_algo: 'W4A16_NVFP4', group_size: 16, kv_cache_scheme: null,
      config_groups: { group_0: { targets: ['Linear'], weights: FP4, input_activations: null } },
      ignore: ['model.layers.0.mlp.gate', 'lm_head'],
      producer: { name: 'webquant' },
    });
    expect(warning).toBeUndefined();
  });

  it('is NVFP4 (W4A4, static FP4 activations) when every nvfp4 weight has an input scale', () => {
    const { config, warning } = modeloptQuantizationConfig(model(() => ({ format: 'nvfp4', inputScale: 0.01 })));
    expect(config).toMatchObject({ quant_algo: 'NVFP4', config_groups: { group_0: { weights: FP4, input_activations: FP4 } } });
    expect(warning).toBeUndefined();
  });

  it('stays weight-only, with a warning, when only some have one, and warns of other formats', () => {
    const some = modeloptQuantizationConfig(model((n) => ({ format: 'nvfp4', ...(n.includes('q_proj') ? { inputScale: 0.01 } : {}) })));
    expect(some.config).toMatchObject({ quant_algo: 'W4A16_NVFP4' });
    expect(some.warning).toContain('1 of 2 nvfp4 tensors have an input scale');
    const mixed = modeloptQuantizationConfig(model((n) => ({ format: n.includes('q_proj') ? 'nvfp4' : 'int8' })));
    expect(mixed.warning).toContain('1 tensors are quantized in other formats than nvfp4 (model.layers.0.mlp.experts.0.down_proj.weight)');
    expect(modeloptQuantizationConfig(model(() => ({ format: 'int8' })))).toEqual({});
  });

  it('lists lm_head for a tied head (no tensor of its own), and not when lm_head is nvfp4', () => {
    const tied = model(() => ({ format: 'nvfp4' })).filter((x) => x.name !== 'lm_head.weight');
    expect(modeloptQuantizationConfig(tied).config!.ignore).toEqual(['model.layers.0.mlp.gate', 'lm_head']);
    const head = model(() => ({ format: 'nvfp4' })).map((x) => (x.name === 'lm_head.weight' ? { ...x, scheme: { format: 'nvfp4' } } : x));
    expect(modeloptQuantizationConfig(head).config!.ignore).toEqual(['model.layers.0.mlp.gate']);
  });
});

describe('runtimeConfig and the input\'s own quantization entry', () => {
  const fp8Input = { model_type: 'deepseek_v3', quantization_config: { quant_method: 'fp8', weight_block_size: [128, 128] } };

  it('replaces it with ModelOpt\'s for nvfp4 outputs', () => {
    const rc = runtimeConfig(fp8Input, model(() => ({ format: 'nvfp4' })));
    expect(rc.runtime).toBe('modelopt');
    expect(rc.config).toMatchObject({ model_type: 'deepseek_v3', quantization_config: { quant_method: 'modelopt' } });
  });

  it('leaves it out, with a warning, when the output holds no tensor in that scheme', () => {
    const rc = runtimeConfig(fp8Input, model(() => ({ format: 'int8' })));
    expect(rc.runtime).toBeUndefined();
    expect(rc.config).toEqual({ model_type: 'deepseek_v3' });
    expect(rc.warnings).toEqual([expect.stringContaining('"fp8" entry is left out')]);
    // MLX's "quantization" entry of an mlx_lm input likewise
    const mlx = runtimeConfig({ model_type: 'llama', quantization: { group_size: 64, bits: 4 } }, model(() => 'keep'));
    expect(mlx.config).toEqual({ model_type: 'llama' });
  });

  it('keeps it while kept FP8 weights are copied as stored, and adds nothing to a plain input', () => {
    const tensors = [...model(() => ({ format: 'int8' })), t('model.layers.1.mlp.down_proj.weight', 'ffn', 'keep', 'F8_E4M3')];
    expect(runtimeConfig(fp8Input, tensors)).toEqual({ warnings: [] });
    expect(runtimeConfig({ model_type: 'llama' }, model(() => ({ format: 'int8' })))).toEqual({ warnings: [] });
  });
});
