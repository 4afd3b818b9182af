// eval and imatrix check config.json against the checkpoint before anything is listed or
// allocated by the config's counts, refuse rope scaling factors the formulas divide by, and take
// any context length (nothing is allocated by it).
import { describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SHARED, hasShared } from '../helpers/shared.js';
import { cli, tempDir } from '../cli/helpers.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { writeGguf } from '../../src/io/gguf-writer.js';
import type { GgufCheckpoint } from '../../src/io/gguf.js';
import { checkpointWeights, llamaConfig, type LlamaConfig } from '../../src/eval/llama.js';
import { quantizedWeights } from '../../src/eval/quantized.js';
import { checkContextLength, evaluate } from '../../src/eval/evaluate.js';
import { imatrixChunks } from '../../src/eval/imatrix.js';
import { readTokens } from '../../src/eval/tokens.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';

const DIR = join(SHARED, 'models/stories260K');
const RAW = (): Record<string, unknown> => JSON.parse(readFileSync(join(DIR, 'config.json'), 'utf8'));
const TOKENS = join(SHARED, 'eval/tinystories_dev.tokens.u16');

async function rejection(p: Promise<unknown> | (() => unknown)): Promise<WebquantError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    if (e instanceof WebquantError) return e;
    throw e;
  }
  throw new Error('did not throw');
}

const collect = async (g: AsyncGenerator<Uint8Array>) => {
  const parts: Uint8Array[] = [];
  for await (const c of g) parts.push(c);
  return Buffer.concat(parts);
};

/** The F32 GGUF of stories260K, token_embd reshaped by `embd`. */
async function gguf(embd: (shape: number[]) => number[]): Promise<GgufCheckpoint> {
  const g = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(join(DIR, 'tinyllamas-stories-260k-f32.gguf'))), 'f32.gguf')) as GgufCheckpoint;
  const tensors = [];
  for (const t of g.tensors) tensors.push({ name: t.name, ggmlType: 'F32', shape: t.name === 'token_embd.weight' ? embd(t.shape) : t.shape, data: await g.readF32(t.name) });
  const bytes = await collect(writeGguf({ metadata: g.kv.map((k) => ({ key: k.key, type: k.type, itemType: k.itemType, value: k.value })), tensors }));
  return await openCheckpoint(fromBuffer(new Uint8Array(bytes), 'x.gguf')) as GgufCheckpoint;
}

describe('llamaConfig', () => {
  it('bounds num_hidden_layers (per-layer flags are built from it before any tensor is seen)', async () => {
    const cfg = { hidden_size: 64, intermediate_size: 172, num_attention_heads: 8, vocab_size: 512 };
    expect(llamaConfig({ ...cfg, num_hidden_layers: 512 }).num_hidden_layers).toBe(512);
    for (const model_type of ['llama', 'gemma2']) {
      const e = await rejection(() => llamaConfig({ ...cfg, model_type, sliding_window: 8, num_hidden_layers: 1e9 }));
      expect([e.code, e.details.option]).toEqual([ErrorCodes.MODEL, 'num_hidden_layers']);
    }
  });

  it('refuses llama3 and linear rope scaling whose factors would divide by zero, naming the key', async () => {
    const cfg = { hidden_size: 64, intermediate_size: 172, num_hidden_layers: 1, num_attention_heads: 8, vocab_size: 512 };
    const llama3 = { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 256 };
    expect(llamaConfig({ ...cfg, rope_scaling: llama3 }).rope_factors).toHaveLength(4);
    for (const [rs, key] of [[{ ...llama3, factor: 0 }, 'factor'], [{ ...llama3, original_max_position_embeddings: -1 }, 'original_max_position_embeddings'],
      [{ ...llama3, high_freq_factor: 1 }, 'high_freq_factor'], [{ type: 'linear', factor: 0 }, 'factor']] as const) {
      const e = await rejection(() => llamaConfig({ ...cfg, rope_scaling: rs }));
      expect(e.details.option, JSON.stringify(rs)).toBe(`rope_scaling.${key}`);
    }
  });
});

describe('context length', () => {
  it('one check for evaluate and imatrix', async () => {
    for (const who of ['evaluate', 'imatrix']) expect((await rejection(() => checkContextLength(1.5, who))).message).toBe(`[${who}] contextLength must be an integer >= 2 but got 1.5`);
    expect((await rejection(() => imatrixChunks({ tokens: new Uint16Array(10), contextLength: 1 }))).message).toBe('[imatrix] contextLength must be an integer >= 2 but got 1');
    expect(checkContextLength(undefined, 'evaluate')).toBe(512);
  });

  it.skipIf(!hasShared)('a context past 2^31 evaluates as one longer than every document (nothing is sized by it)', async () => {
    const ck = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(join(DIR, 'model.safetensors'))), 'model.safetensors'));
    const bf = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(join(DIR, 'model.bf16.safetensors'))), 'bf16.safetensors'));
    const config = llamaConfig(RAW());
    const tokens = readTokens(new Uint8Array(readFileSync(TOKENS)));
    const run = (contextLength: number) => evaluate({ reference: { config, weights: checkpointWeights(ck) }, candidate: checkpointWeights(bf), tokens, maxDocs: 3, contextLength });
    const [huge, long] = [await run(2 ** 31), await run(1 << 16)];
    expect(huge.perLayer).toHaveLength(5);
    expect({ ...huge, seconds: 0 }).toEqual({ ...long, seconds: 0 });
  });
});

describe.skipIf(!hasShared)('quantizedWeights', () => {
  it('refuses a 1-D token_embd as a shape, naming it and the matrix the config needs', async () => {
    const config = llamaConfig(RAW());
    await expect(quantizedWeights(await gguf((s) => s), config)).resolves.toBeDefined();
    const e = await rejection(quantizedWeights(await gguf((s) => [s[0] * s[1]]), config));
    expect([e.code, e.details.tensor, e.details.expected]).toEqual([ErrorCodes.MODEL, 'token_embd.weight', '[512, 64]']);
  });

  it("looks for the config's last layer before listing every layer's names", async () => {
    const config: LlamaConfig = { ...llamaConfig(RAW()), num_hidden_layers: 200_000 };
    const e = await rejection(quantizedWeights(await gguf((s) => s), config));
    expect([e.code, e.details.tensor]).toEqual([ErrorCodes.TENSOR_NOT_FOUND, 'blk.199999.*']);
  });
});

describe.skipIf(!hasShared)('webquant eval / imatrix: config.json against the original', () => {
  it('refuse a layer count the tensors do not have, before listing or allocating by it', async () => {
    const tmp = tempDir('eval-config');
    writeFileSync(join(tmp, 'model.safetensors'), readFileSync(join(DIR, 'model.safetensors')));
    const q = await cli(['quantize', join(DIR, 'model.safetensors'), '-o', 'q8.gguf', '--preset', 'q8_0', '--workers', '1'], { cwd: tmp });
    expect(q.code, q.stderr).toBe(0);
    for (const [layers, re] of [
      [9, /num_hidden_layers = 9, but there is no tensor "model\.layers\.8\.[^"]+": the checkpoint stores 5 layers \(E_TENSOR_NOT_FOUND\)/],
      [3, /num_hidden_layers = 3, but the checkpoint stores 5 layers .*\(E_MODEL\)/],
      [1e9, /num_hidden_layers 1000000000 is more than the 512 layers .*\(E_MODEL\)/],
    ] as const) {
      writeFileSync(join(tmp, 'config.json'), JSON.stringify({ ...RAW(), num_hidden_layers: layers }));
      for (const args of [['eval', '-q', 'q8.gguf', '-t', TOKENS, '--max-docs', '1'], ['imatrix', '-t', TOKENS, '-o', 'im.gguf', '--chunks', '1']]) {
        const r = await cli([...args, '-m', 'model.safetensors'], { cwd: tmp });
        expect(r.code, `${args[0]} ${layers}: ${r.stderr}`).toBe(2);
        expect(r.stderr, `${args[0]} ${layers}`).toMatch(re);
      }
    }
  }, 60_000);
});
