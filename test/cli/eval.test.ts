import { beforeAll, describe, expect, it } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SHARED, hasShared } from '../helpers/shared.js';
import { cli, cliProcess, ensureBuilt, tempDir } from './helpers.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { evaluate } from '../../src/eval/evaluate.js';
import { checkpointWeights, llamaConfig } from '../../src/eval/llama.js';
import { readTokens } from '../../src/eval/tokens.js';
import { unpermuteRows } from '../../src/convert/hf-view.js';
import { permuteRows } from '../../src/convert/arch/index.js';
import { quantizedWeights } from '../../src/eval/quantized.js';
import { openQuantized } from '../../src/serve/index.js';
import { writeGpt2Dir } from '../helpers/gpt2-model.js';

const DIR = join(SHARED, 'models/stories260K');
const MODEL = join(DIR, 'model.safetensors');
const TOKENS = join(SHARED, 'eval/tinystories_dev.tokens.u16');

describe('unpermuteRows', () => {
  it('inverts permuteRows', () => {
    const rows = 24, rowBytes = 6;
    const src = Uint8Array.from({ length: rows * rowBytes }, (_, i) => (i * 37) & 0xff);
    for (const heads of [1, 2, 3, 6, 12]) {
      const p = permuteRows(src, rows, rowBytes, heads);
      expect(Buffer.from(p).equals(Buffer.from(src))).toBe(heads === 12); // pairs of rows only: the identity
      expect(Buffer.from(unpermuteRows(p, rows, rowBytes, heads)).equals(Buffer.from(src))).toBe(true);
    }
  });
});

describe.skipIf(!hasShared)('webquant eval', () => {
  let tmp: string;
  beforeAll(async () => {
    await ensureBuilt();
    tmp = tempDir('cli-eval');
  }, 300_000);

  it('GGUF and safetensors outputs of one plan evaluate identically; the reference matches evaluate()', async () => {
    // The GGUF presets' protect list (token embeddings quantized) for both containers.
    writeFileSync(join(tmp, 'plan.json'), JSON.stringify({ default: { format: 'q4_0' }, protect: ['norm', 'router', 'bias', '1d', 'position'], fileType: 2 }));
    for (const out of ['q.gguf', 'q.safetensors']) {
      const r = await cli(['quantize', MODEL, '-o', out, '--rules', 'plan.json'], { cwd: tmp });
      expect(r.code, r.stderr).toBe(0);
    }
    const runs = [];
    for (const q of ['q.gguf', 'q.safetensors']) {
      const r = await cli(['eval', '--model', MODEL, '--quantized', q, '--tokens', TOKENS, '--max-docs', '6', '--json'], { cwd: tmp });
      expect(r.code, r.stderr).toBe(0);
      runs.push(JSON.parse(r.stdout));
    }
    const [g, s] = runs;
    expect(g.documents).toBe(6);
    // Rows are quantized independently, so the permuted GGUF rows hold the same values: with the
    // q/k rows put back in order, the two candidates are the same model.
    expect(g.candidate).toEqual(s.candidate);
    expect(g.klDivergence).toBe(s.klDivergence);
    expect(g.perLayer).toEqual(s.perLayer);
    expect(g.deltaNll).toBeGreaterThan(0);
    expect(g.deltaNll).toBeLessThan(0.2);
    expect(g.top1Agreement).toBeGreaterThan(0.7);
    const ck = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(MODEL))));
    const direct = await evaluate({
      reference: { config: llamaConfig(JSON.parse(readFileSync(join(DIR, 'config.json'), 'utf8'))), weights: checkpointWeights(ck) },
      tokens: readTokens(new Uint8Array(readFileSync(TOKENS))), maxDocs: 6,
    });
    expect(g.reference).toEqual(direct.reference);
  });

  it('q8_0 costs less than q4_0; text output; missing options and files exit 2', async () => {
    const r = await cli(['quantize', MODEL, '-o', 'q8.gguf', '--preset', 'q8_0'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const e = await cli(['eval', '-m', MODEL, '-q', 'q8.gguf', '-t', TOKENS, '--max-docs', '6'], { cwd: tmp });
    expect(e.code, e.stderr).toBe(0);
    expect(e.stdout).toMatch(/^quantized\s+1\.\d{5}\s+\d\.\d{3}$/m);
    const kl8 = Number(/KL\(original \|\| quantized\) (\S+)/.exec(e.stdout)![1]);
    const j4 = JSON.parse((await cli(['eval', '-m', MODEL, '-q', 'q.gguf', '-t', TOKENS, '--max-docs', '6', '--json'], { cwd: tmp })).stdout);
    expect(kl8).toBeLessThan(j4.klDivergence / 10);
    // The documents on two worker threads (the built command: workers run dist/): the same figures.
    const w2 = await cliProcess(['eval', '-m', MODEL, '-q', 'q.gguf', '-t', TOKENS, '--max-docs', '6', '--workers', '2', '--json'], { cwd: tmp });
    expect(w2.code, w2.stderr).toBe(0);
    expect({ ...JSON.parse(w2.stdout), seconds: 0 }).toEqual({ ...j4, seconds: 0 });
    const zero = await cli(['eval', '-m', MODEL, '-q', 'q.gguf', '-t', TOKENS, '--workers', '0'], { cwd: tmp });
    expect(zero.code).toBe(2);
    expect(zero.stderr).toMatch(/--workers must be a positive integer/);
    const missing = await cli(['eval', '--model', MODEL, '--tokens', TOKENS], { cwd: tmp });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe('webquant: [cli] eval: --quantized is required (E_BAD_OPTION)\n');
    const noFile = await cli(['eval', '--model', MODEL, '--quantized', 'nope.gguf', '--tokens', TOKENS], { cwd: tmp });
    expect(noFile.code).toBe(2);
    expect(noFile.stderr).toMatch(/nope\.gguf does not exist/);
    writeFileSync(join(tmp, 'odd.u16'), new Uint8Array(3));
    const odd = await cli(['eval', '--model', MODEL, '--quantized', 'q8.gguf', '--tokens', 'odd.u16'], { cwd: tmp });
    expect(odd.code).toBe(2);
    expect(odd.stderr).toMatch(/not a whole number of uint16 tokens/);
  });
});

describe.skipIf(!hasShared)('webquant imatrix', () => {
  let tmp: string;
  beforeAll(async () => {
    await ensureBuilt();
    tmp = tempDir('cli-imatrix');
  }, 300_000);

  it('writes a GGUF imatrix that quantize --imatrix takes and that lowers the KL of a Q3_K_S quantization (IQ4_NL on these rows); bad options exit 2', async () => {
    const r = await cli(['imatrix', '-m', MODEL, '-t', TOKENS, '-o', 'im.gguf', '--chunks', '30', '--context', '256', '--json'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ chunks: 30, chunkSize: 256, tensors: 35 });
    const g = await openCheckpoint(fromBuffer(readFileSync(join(tmp, 'im.gguf')), 'im.gguf'));
    expect(g.metadata['general.type']).toBe('imatrix');
    expect(g.tensors).toHaveLength(70);
    // Calibrated on the dev split, evaluated on the test split.
    const test = join(SHARED, 'eval/tinystories_test.tokens.u16');
    const kl: number[] = [];
    for (const extra of [[], ['--imatrix', 'im.gguf']]) {
      const q = await cli(['quantize', MODEL, '-o', 'q3.gguf', '--preset', 'q3_k_s', ...extra], { cwd: tmp });
      expect(q.code, q.stderr).toBe(0);
      kl.push(JSON.parse((await cli(['eval', '-m', MODEL, '-q', 'q3.gguf', '-t', test, '--max-docs', '60', '--json'], { cwd: tmp })).stdout).klDivergence);
    }
    expect(kl[1]).toBeLessThan(kl[0]);
    // The same chunks on three worker threads (the built command: workers run dist/): the same bytes.
    const par = await cliProcess(['imatrix', '-m', MODEL, '-t', TOKENS, '-o', 'im3.gguf', '--chunks', '30', '--context', '256', '--workers', '3', '--json'], { cwd: tmp });
    expect(par.code, par.stderr).toBe(0);
    expect(readFileSync(join(tmp, 'im3.gguf')).equals(readFileSync(join(tmp, 'im.gguf')))).toBe(true);
    const cases: [string[], RegExp][] = [
      [['imatrix', '-m', MODEL, '-t', TOKENS], /--output is required/],
      [['imatrix', '-m', MODEL, '-t', TOKENS, '-o', 'im.dat'], /must end in \.gguf/],
      [['imatrix', '-m', MODEL, '-t', TOKENS, '-o', 'x.gguf', '--context', '100000000'], /make no chunk of 100000000/],
      [['imatrix', '-m', join(DIR, 'tinyllamas-stories-260k-f32.gguf'), '-t', TOKENS, '-o', 'x.gguf'], /config\.json|safetensors/],
      [['imatrix', '-m', MODEL, '-t', TOKENS, '-o', 'x.gguf', '--workers', '0'], /--workers must be a positive integer/],
    ];
    for (const [args, msg] of cases) {
      const e = await cli(args, { cwd: tmp });
      expect(e.code, args.join(' ')).toBe(2);
      expect(e.stderr).toMatch(msg);
    }
  });
});

describe('webquant eval: safetensors outputs of a family stored otherwise', () => {
  let tmp: string;
  beforeAll(async () => {
    await ensureBuilt();
    tmp = tempDir('cli-eval-gpt2');
  }, 300_000);

  it("GPT-2: its safetensors output (Conv1D names and [in, out] layout kept) is read through the original's view", async () => {
    const H = 64, V = 96, P = 32;
    const { config } = await writeGpt2Dir(tmp, H, V, P, (n, k) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * k * 0.37) * 0.5));
    const toks = Uint16Array.from({ length: 300 }, (_, i) => (i === 0 ? 1 : 2 + ((i * 7) % (V - 2))));
    writeFileSync(join(tmp, 'tok.u16'), new Uint8Array(toks.buffer));
    const out = join(tmp, 'int8.safetensors');
    const q = await cli(['quantize', tmp, '-o', out, '--preset', 'int8'], { cwd: tmp });
    expect(q.code, q.stderr).toBe(0);
    const e = await cli(['eval', '-m', tmp, '-q', out, '-t', join(tmp, 'tok.u16'), '--context', '32', '--json'], { cwd: tmp });
    expect(e.code, e.stderr).toBe(0);
    const r = JSON.parse(e.stdout);
    expect(r.candidate.tokens).toBe(r.reference.tokens);
    expect(r.klDivergence).toBeGreaterThan(0);
    expect(r.klDivergence).toBeLessThan(0.01);
    // The forward's ffn_up is the transposed dequantized c_fc, read under its Llama-style name.
    const ck = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(out)), out));
    const ws = await quantizedWeights(ck, llamaConfig(config));
    const up = await ws.get('model.layers.0.mlp.up_proj.weight');
    const served = (await openQuantized(ck)).tensor('h.0.mlp.c_fc.weight');
    expect(served.info.quantized).toBe(true);
    const cfc = await served.dequantize();
    expect(Array.from({ length: H }, (_, i) => up[3 * H + i])).toEqual(Array.from({ length: H }, (_, i) => cfc[i * 4 * H + 3]));
  });
});
