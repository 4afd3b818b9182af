// NVFP4 input scales from calibration text: the input amax of every weight matrix, against the
// naive float64 forward's inputs on the same chunks (first token BOS), and the plan's input scales.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { activationAmax, nvfp4InputScale, withInputScales } from '../../src/eval/activations.js';
import { checkpointWeights, llamaConfig, type LlamaConfig, type WeightSource } from '../../src/eval/llama.js';
import { BOS, readTokens } from '../../src/eval/tokens.js';
import { readConfig } from '../../src/io/config.js';
import { fromPath, type FileSource } from '../../src/io/node.js';
import { openSafetensors } from '../../src/io/safetensors.js';
import { ErrorCodes } from '../../src/errors.js';
import type { PlannedTensor } from '../../src/plan/types.js';
import { SHARED, hasShared, sharedBytes } from '../helpers/shared.js';
import { naiveForward } from './naive.js';

const MODEL = join(SHARED, 'models/stories260K');

describe.skipIf(!hasShared)('activationAmax on stories260K', () => {
  const files: FileSource[] = [];
  let config: LlamaConfig;
  let weights: WeightSource;
  beforeAll(async () => {
    const cfg = fromPath(join(MODEL, 'config.json'));
    const st = fromPath(join(MODEL, 'model.safetensors'));
    files.push(cfg, st);
    config = llamaConfig(await readConfig(cfg));
    weights = checkpointWeights(await openSafetensors(st));
  });
  afterAll(() => Promise.all(files.map((f) => f.close())));

  it('is the largest |input| of each matrix over every chunk, as the naive forward computes the inputs', async () => {
    // Chunks start mid-text: the BOS that replaces each first token changes what the layers see.
    const tokens = readTokens(sharedBytes('eval/tinystories_dev.tokens.u16')).slice(5, 5 + 3 * 24);
    const amax = await activationAmax({ config, weights, tokens, contextLength: 24 });
    const expected = new Map<string, number>();
    for (let c = 0; c < 3; c++) {
      const chunk = Array.from(tokens.subarray(c * 24, (c + 1) * 24));
      chunk[0] = BOS;
      await naiveForward(config, weights, chunk, (name, x) => {
        for (const row of x) for (const v of row) expected.set(name, Math.max(expected.get(name) ?? 0, Math.abs(v)));
      });
    }
    expect([...amax.keys()].sort()).toEqual([...expected.keys()].sort());
    expect(amax.size).toBe(7 * config.num_hidden_layers);
    for (const [name, m] of expected) expect(Math.abs(amax.get(name)! - m) / m, name).toBeLessThan(1e-5);
    // q, k and v read one input, and so do gate and up: runtimes fuse them with one input scale.
    for (let l = 0; l < config.num_hidden_layers; l++) {
      const p = `model.layers.${l}.`;
      expect(amax.get(p + 'self_attn.k_proj.weight')).toBe(amax.get(p + 'self_attn.q_proj.weight'));
      expect(amax.get(p + 'self_attn.v_proj.weight')).toBe(amax.get(p + 'self_attn.q_proj.weight'));
      expect(amax.get(p + 'mlp.up_proj.weight')).toBe(amax.get(p + 'mlp.gate_proj.weight'));
    }
  });

  it('refuses too few tokens and bad chunk options, naming them', async () => {
    const tokens = new Uint16Array(10).fill(2);
    await expect(activationAmax({ config, weights, tokens, contextLength: 16 })).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT, message: expect.stringContaining('[activations]') });
    await expect(activationAmax({ config, weights, tokens, contextLength: 1 })).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'contextLength' } });
    await expect(activationAmax({ config, weights, tokens, contextLength: 4, maxChunks: 0 })).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'maxChunks' } });
  });
});

describe('withInputScales', () => {
  const planned = (name: string, format: string | 'keep'): PlannedTensor => ({
    name, shape: [32, 32], dtype: 'BF16', rows: 32, rowLength: 32, params: 1024, role: 'expert', reason: 'test',
    scheme: format === 'keep' ? 'keep' : { format },
  } as PlannedTensor);

  it('gives each nvfp4 weight amax / 2688 in f32, and only nvfp4 weights', () => {
    expect(nvfp4InputScale(2688)).toBe(1);
    expect(nvfp4InputScale(1)).toBe(Math.fround(1 / 2688));
    const out = withInputScales([planned('a.weight', 'nvfp4'), planned('b.weight', 'q8_0'), planned('c.weight', 'keep')], new Map([['a.weight', 5.5], ['b.weight', 2], ['c.weight', 3]]));
    expect(out[0].scheme).toEqual({ format: 'nvfp4', inputScale: Math.fround(5.5 / 2688) });
    expect(out[1].scheme).toEqual({ format: 'q8_0' });
    expect(out[2].scheme).toBe('keep');
  });

  it('gives an expert no position reached the largest amax of its projection among the layer\'s experts', () => {
    const names = [0, 1, 2].map((e) => `model.layers.3.mlp.experts.${e}.down_proj.weight`);
    const amax = new Map([[names[0], 7], [names[2], 4], ['model.layers.4.mlp.experts.1.down_proj.weight', 100], ['model.layers.3.mlp.experts.1.up_proj.weight', 50]]);
    const out = withInputScales(names.map((n) => planned(n, 'nvfp4')), amax);
    expect(out.map((t) => (t.scheme as { inputScale: number }).inputScale)).toEqual([7, 7, 4].map(nvfp4InputScale));
  });

  it('refuses an nvfp4 weight the forward never multiplied, naming it', () => {
    expect(() => withInputScales([planned('model.layers.0.mlp.experts.0.down_proj.weight', 'nvfp4'), planned('lm_head.weight', 'nvfp4')], new Map()))
      .toThrow(expect.objectContaining({ code: ErrorCodes.MODEL, details: expect.objectContaining({ tensor: 'model.layers.0.mlp.experts.0.down_proj.weight', value: 2 }) }));
  });
});
