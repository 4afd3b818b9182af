// npx tsx bench/convert-reference.ts <llama.cpp source dir> [python]
//
// Runs llama.cpp's convert_hf_to_gguf.py (--outtype f16, through bench/convert-hf.py) on the
// checkpoints of test/helpers/convert-reference.ts and records a digest of each file it writes in
// test/convert/fixtures/convert-reference.json, which test/convert/convert-reference.test.ts
// compares `webquant quantize --preset f16` against. The python needs torch, numpy, sentencepiece
// and yaml (Debian 12: apt-get install python3-torch python3-sentencepiece python3-numpy python3-yaml).
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { REFERENCE_CASES, ggufDigest, metadataFile, writeReferenceInput } from '../test/helpers/convert-reference.js';

const [src, python = '/usr/bin/python3'] = process.argv.slice(2);
if (!src) throw new Error('usage: npx tsx bench/convert-reference.ts <llama.cpp source dir> [python]');
const shim = fileURLToPath(new URL('./convert-hf.py', import.meta.url));
const commit = (() => {
  try {
    return execFileSync('git', ['-C', src, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
})();
const root = mkdtempSync(join(tmpdir(), 'convert-ref-'));
const results = [];
for (const c of REFERENCE_CASES) {
  const dir = await writeReferenceInput(root, c);
  const out = join(root, `${c.dir}.gguf`);
  const r = spawnSync(python, [shim, src, dir, '--outtype', 'f16', '--outfile', out, ...(c.metadata ? ['--metadata', metadataFile(root, c)] : [])], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`the converter failed on ${c.dir}: ${r.stderr.split('\n').slice(-5).join('\n')}`);
  const digest = await ggufDigest(readFileSync(out));
  results.push({ dir: c.dir, ...digest });
  console.log(c.dir, Object.keys(digest.kv).length, 'keys', Object.keys(digest.tensors).length, 'tensors');
}
writeFileSync(new URL('../test/convert/fixtures/convert-reference.json', import.meta.url),
  `{\n "converter": ${JSON.stringify(`llama.cpp ${commit} convert_hf_to_gguf.py --outtype f16`)},\n "results": [\n${results.map((r) => `  ${JSON.stringify(r)}`).join(',\n')}\n ]\n}\n`);
