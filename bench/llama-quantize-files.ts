// npx tsx bench/llama-quantize-files.ts <dir of llama-quantize and llama-gguf-split>
//
// Runs llama-quantize on the cases of test/helpers/llama-quantize-files.ts and writes the SHA-256
// of every file it writes to test/cli/fixtures/llama-quantize-files.json, which
// test/cli/llama-quantize-files.test.ts compares `webquant quantize` against (same input, same
// options: the files must be byte-identical).
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { presetModel } from './preset-model.js';
import { CASES, MODELS, type FileHashes } from '../test/helpers/llama-quantize-files.js';

const bin = process.argv[2];
if (!bin) throw new Error('usage: npx tsx bench/llama-quantize-files.ts <dir with llama-quantize and llama-gguf-split>');
const env = { ...process.env, LD_LIBRARY_PATH: bin };
const run = (exe: string, args: string[], cwd: string) => execFileSync(join(bin, exe), args, { cwd, env, stdio: ['ignore', 'ignore', 'pipe'] });

const dirs = new Map<string, string>();
for (const [name, size] of Object.entries(MODELS)) {
  const d = mkdtempSync(join(tmpdir(), `lqf-${name}-`));
  const { model, imatrix } = await presetModel(size);
  writeFileSync(join(d, 'f32.gguf'), model);
  writeFileSync(join(d, 'imatrix.gguf'), imatrix);
  dirs.set(name, d);
}
const results: { case: number; files: FileHashes }[] = [];
let version = 'unknown';
for (const [i, c] of CASES.entries()) {
  const d = dirs.get(c.model)!;
  let input = c.from !== undefined ? `out${c.from}.gguf` : 'f32.gguf';
  if (c.splitInput) {
    run('llama-gguf-split', ['--split', '--split-max-tensors', String(c.splitInput), 'f32.gguf', `in${i}`], d);
    input = readdirSync(d).filter((f) => f.startsWith(`in${i}-`)).sort()[0];
  }
  const r = spawnSync(join(bin, 'llama-quantize'), [...c.options, input, `out${i}.gguf`, c.preset], { cwd: d, env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`llama-quantize failed on case ${i}: ${r.stderr}`);
  version = /version: (.*)/.exec(r.stdout + r.stderr)?.[1] ?? version;
  const files = readdirSync(d).filter((f) => f === `out${i}.gguf` || f.startsWith(`out${i}-`)).sort().map((f) => {
    const b = readFileSync(join(d, f));
    return { name: f.slice(`out${i}`.length), sha256: createHash('sha256').update(b).digest('hex'), bytes: b.length };
  });
  results.push({ case: i, files });
  console.log(c.preset, c.options.join(' '), files.map((f) => `${f.name} ${f.bytes}`).join(', '));
}
writeFileSync(new URL('../test/cli/fixtures/llama-quantize-files.json', import.meta.url), `{\n "llamaQuantize": ${JSON.stringify(version)},\n "results": [\n${results.map((r) => `  ${JSON.stringify({ ...r, ...CASES[r.case] })}`).join(',\n')}\n ]\n}\n`);
