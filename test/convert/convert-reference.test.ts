// `webquant quantize --preset f16` on Hugging Face checkpoints against llama.cpp's own converter
// (convert_hf_to_gguf.py, recorded by bench/convert-reference.ts): the same keys with the same
// types and values (architecture keys, tokenizer, and the general.* keys the converter derives from
// the folder name, config.json's _name_or_path and generation_config.json), and the same tensors
// with the same types, shapes and bytes, for every family webquant converts (gpt-oss aside: that
// converter keeps its released MXFP4 experts in an f16 file, webquant's f16 preset widens them).
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, ensureBuilt, tempDir } from '../cli/helpers.js';
import { REFERENCE_CASES, ggufDigest, writeReferenceInput, type GgufDigest } from '../helpers/convert-reference.js';

const fixture = JSON.parse(readFileSync(new URL('./fixtures/convert-reference.json', import.meta.url), 'utf8')) as { converter: string; results: ({ dir: string } & GgufDigest)[] };

describe(`webquant quantize --preset f16 writes what ${fixture.converter} writes`, () => {
  it('covers every case of the helper', () => {
    expect(fixture.results.map((r) => r.dir)).toEqual(REFERENCE_CASES.map((c) => c.dir));
  });
  for (const c of REFERENCE_CASES) {
    it(`${c.family} (${c.dir})`, async () => {
      await ensureBuilt();
      const root = tempDir('convert-ref');
      const dir = await writeReferenceInput(root, c);
      const out = join(root, `${c.dir}.gguf`);
      const r = await cli(['quantize', dir, '-o', out, '--preset', 'f16', '--workers', '1', ...(c.options ?? [])], { cwd: root });
      expect(r.code, r.stderr).toBe(0);
      const ours = await ggufDigest(readFileSync(out));
      const ref = fixture.results.find((x) => x.dir === c.dir)!;
      const extra = Object.keys(c.extraKeys ?? {});
      for (const k of extra) expect(ref.kv[k], `${k} is no longer an extra key`).toBeUndefined();
      expect(Object.fromEntries(Object.entries(ours.kv).filter(([k]) => !extra.includes(k)))).toEqual(ref.kv);
      expect(ours.tensors).toEqual(ref.tensors);
    });
  }
});
