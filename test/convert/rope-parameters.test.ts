// transformers 5 writes config.json's rotary settings as one `rope_parameters` object (rope_theta,
// rope_type and its scaling parameters, partial_rotary_factor; Gemma 3: one per layer type). Read
// that way, a checkpoint must give the same GGUF, byte for byte, and the same forward configuration
// as its config in the earlier spelling (top-level rope_theta, rope_scaling, rope_local_base_freq).
import { describe, expect, it } from 'vitest';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, ensureBuilt, tempDir } from '../cli/helpers.js';
import { FAMILIES, familyTensors, type FamilyId } from '../helpers/hf-families.js';
import { llamaPieces, spModel } from './tokenizer-fixtures.js';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect } from '../../src/io/stream.js';
import { llamaConfig } from '../../src/eval/config.js';

/** A config.json as transformers 5 saves it. */
function v5(c: Record<string, unknown>): Record<string, unknown> {
  const { rope_theta, rope_scaling, partial_rotary_factor, rope_local_base_freq, original_max_position_embeddings, ...rest } = c;
  const rs = (rope_scaling ?? null) as Record<string, unknown> | null;
  const { type, ...scaling } = rs ?? {};
  const global: Record<string, unknown> = {
    ...scaling, rope_type: rs ? (rs.rope_type ?? type) : 'default', rope_theta,
    ...(partial_rotary_factor !== undefined ? { partial_rotary_factor } : {}),
    ...(original_max_position_embeddings !== undefined ? { original_max_position_embeddings } : {}),
  };
  const rope_parameters = rope_local_base_freq === undefined ? global : { full_attention: global, sliding_attention: { rope_type: 'default', rope_theta: rope_local_base_freq } };
  return { ...rest, rope_parameters };
}

const CASES: { family: FamilyId; config?: Record<string, unknown>; what: string }[] = [
  { family: 'qwen3', what: 'no scaling ("default")' },
  { family: 'llama3', what: 'llama3 scaling (rope_freqs.weight)' },
  { family: 'qwen2Yarn', what: 'YaRN' },
  { family: 'phi3', what: 'LongRoPE with a partial rotary factor and the original context' },
  {
    family: 'gemma3', what: 'per layer type: linear scaling of the global layers, the local layers\' own base',
    config: { ...FAMILIES.gemma3.config, rope_scaling: { rope_type: 'linear', factor: 8 }, rope_local_base_freq: 20000 },
  },
];

async function convert(root: string, tensors: Uint8Array, config: Record<string, unknown>): Promise<Buffer> {
  // The same folder name for both spellings: it names the model in the GGUF.
  const dir = join(root, 'model');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'model.safetensors'), tensors);
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  writeFileSync(join(dir, 'tokenizer.model'), spModel(llamaPieces(['▁a', '▁b'])));
  const r = await cli(['quantize', dir, '-o', join(root, 'out.gguf'), '--preset', 'f16', '--workers', '1'], { cwd: root });
  expect(r.code, r.stderr).toBe(0);
  return readFileSync(join(root, 'out.gguf'));
}

describe('config.json in transformers 5\'s spelling (rope_parameters)', () => {
  for (const c of CASES) {
    it(`${c.family}, ${c.what}: the same GGUF and the same forward configuration`, async () => {
      await ensureBuilt();
      const legacy = c.config ?? FAMILIES[c.family].config;
      const modern = v5(legacy);
      expect(modern.rope_theta).toBeUndefined();
      const tensors = await collect(writeSafetensors({ tensors: familyTensors(FAMILIES[c.family]) }));
      const a = await convert(tempDir('rope-legacy'), tensors, legacy);
      const b = await convert(tempDir('rope-v5'), tensors, modern);
      expect(b.equals(a)).toBe(true);
      expect(llamaConfig(modern)).toEqual(llamaConfig(legacy));
    });
  }
  it('the rotary base and scaling really come from rope_parameters (a changed theta changes the file)', async () => {
    await ensureBuilt();
    const legacy = FAMILIES.qwen3.config;
    const tensors = await collect(writeSafetensors({ tensors: familyTensors(FAMILIES.qwen3) }));
    const modern = v5(legacy);
    const changed = { ...modern, rope_parameters: { ...(modern.rope_parameters as object), rope_theta: 5000 } };
    expect((await convert(tempDir('rope-5000'), tensors, changed)).equals(await convert(tempDir('rope-base'), tensors, legacy))).toBe(false);
    expect(llamaConfig(changed).rope_theta).toBe(5000);
  });
});
