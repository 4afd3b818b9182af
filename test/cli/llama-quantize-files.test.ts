import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openGguf } from '../../src/io/gguf.js';
import { fromBuffer } from '../../src/io/source.js';
import { presetModel } from '../../bench/preset-model.js';
import { MODELS, type FileCase, type FileHashes } from '../helpers/llama-quantize-files.js';
import { splitGguf } from '../helpers/gguf-split.js';
import { cli, tempDir } from './helpers.js';

// `webquant quantize` of a GGUF against the files llama-quantize wrote for the same input and
// options (test/cli/fixtures/llama-quantize-files.json, from bench/llama-quantize-files.ts): every
// file byte-identical, presets with and without an importance matrix, both GQA shapes, the override
// options and --keep-split of a split input.

const fixture = JSON.parse(readFileSync(new URL('./fixtures/llama-quantize-files.json', import.meta.url), 'utf8')) as {
  llamaQuantize: string;
  results: (FileCase & { case: number; files: FileHashes })[];
};

const dirs = new Map<string, Promise<string>>();
function modelDir(model: string): Promise<string> {
  let d = dirs.get(model);
  if (!d) {
    d = (async () => {
      const dir = tempDir('wq-lqf-');
      const { model: bytes, imatrix } = await presetModel(MODELS[model]);
      writeFileSync(join(dir, 'f32.gguf'), bytes);
      writeFileSync(join(dir, 'imatrix.gguf'), imatrix);
      return dir;
    })();
    dirs.set(model, d);
  }
  return d;
}

/** The input as llama-gguf-split --split-max-tensors n writes it (bench/llama-quantize-files.ts). */
async function splitInput(dir: string, n: number, tag: string): Promise<string> {
  const whole = await openGguf(fromBuffer(new Uint8Array(readFileSync(join(dir, 'f32.gguf'))), 'f32.gguf'));
  const cuts = [];
  for (let i = n; i < whole.tensors.length; i += n) cuts.push(i);
  const files = await splitGguf(whole, `in-${tag}`, cuts);
  for (const [name, bytes] of files) writeFileSync(join(dir, name), bytes);
  return [...files.keys()][0];
}

describe(`byte-identical to llama-quantize (${fixture.llamaQuantize})`, () => {
  it('the fixture covers the cases', () => {
    expect(fixture.results.length).toBeGreaterThanOrEqual(25);
    expect(fixture.results.filter((r) => r.files.length > 1).length).toBeGreaterThanOrEqual(2);
  });

  for (const r of fixture.results) {
    it(`${r.model} ${r.preset} ${r.options.join(' ')}`, async () => {
      const dir = await modelDir(r.model);
      // A case quantizing an earlier one's output runs after it (tests of a file run in order).
      const input = r.splitInput ? await splitInput(dir, r.splitInput, String(r.case)) : r.from !== undefined ? `out${r.from}.gguf` : 'f32.gguf';
      const out = `out${r.case}`;
      const run = await cli(['quantize', input, '--preset', r.preset, ...r.options, '-o', `${out}.gguf`, '-j', '1'], { cwd: dir });
      expect(run.code, run.stderr).toBe(0);
      const written = readdirSync(dir).filter((f) => f === `${out}.gguf` || f.startsWith(`${out}-`)).sort();
      const got = written.map((f) => {
        const b = readFileSync(join(dir, f));
        return { name: f.slice(out.length), sha256: createHash('sha256').update(b).digest('hex'), bytes: b.length };
      });
      expect(got).toEqual(r.files);
    }, 60_000);
  }
});
