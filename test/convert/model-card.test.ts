// Model cards (README.md front matter) against gguf-py itself: for each recorded folder (card,
// config.json, parameter count), the general.* keys llama.cpp's converter writes, in order and with
// their types (fixtures/model-cards.json, recorded by bench/gguf-py-cards.py). The cases reach each
// rule: card fields over _name_or_path over the folder, model_* spellings, base models and datasets
// as Hub ids, Hub URLs, other URLs and mappings, license lists, tags from pipeline_tag, the YAML 1.1
// "no", tabs, CRLF, anchors and merge keys, and cards that are not front matter.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { generalMetadata } from '../../src/convert/general-metadata.js';
import { frontMatter, parseModelCard, readModelCard } from '../../src/convert/model-card.js';
import { fromBuffer } from '../../src/io/source.js';

const ref = JSON.parse(readFileSync(new URL('./fixtures/model-cards.json', import.meta.url), 'utf8')) as {
  dir: string; total: number; config: Record<string, unknown> | null; card: string; kv: [string, string, unknown][];
}[];

const TYPE_NAMES: Record<string, string> = { string: 'string', u32: 'uint32' };
const utf8 = (s: string) => new TextEncoder().encode(s);

function written(dir: string, total: number, config: Record<string, unknown> | undefined, cardText: string, warnings: string[] = []) {
  const card = parseModelCard(utf8(cardText), 'README.md', warnings);
  const tensors = total > 0 ? [{ name: 'token_embd.weight', shape: [total] }] : [];
  return generalMetadata({ dirName: dir, config, tensors, card, warnings })
    .map((k) => [k.key, k.type === 'array' ? `array:${k.itemType}` : TYPE_NAMES[k.type] ?? k.type, k.value]);
}

describe('model card keys as llama.cpp converter writes them', () => {
  for (const c of ref) {
    it(`${c.dir}`, () => {
      const warnings: string[] = [];
      expect(written(c.dir, c.total, c.config ?? undefined, c.card, warnings)).toEqual(c.kv);
      expect(warnings).toEqual([]);
    });
  }

  it('cuts the front matter as gguf-py does', () => {
    expect(frontMatter('---\na: 1\n---\nbody')).toBe('a: 1\n');
    expect(frontMatter('---\r\na: 1\r\n---')).toBe('a: 1\n');
    expect(frontMatter('\n---\na: 1\n---')).toBeUndefined();
    expect(frontMatter('--- \na: 1\n---')).toBeUndefined();
    expect(frontMatter('')).toBeUndefined();
    expect(frontMatter('---\nl:\n- no\n- nob\n---')).toBe('l:\n- "no"\n- nob\n');
  });

  it('leaves out values of the wrong type, with a warning naming them', () => {
    const warnings: string[] = [];
    const kv = written('w', 0, undefined, '---\nname: 2024\nversion: 1.0\nlicense: [mit, 3]\ntags: [a, 7, b]\nlanguage: [yes]\nbase_model: [7, {name: x, version: 2}]\n---\n', warnings);
    expect(kv).toEqual([
      ['general.type', 'string', 'model'], ['general.name', 'string', 'W'],
      ['general.base_model.count', 'uint32', 2], ['general.base_model.1.name', 'string', 'x'],
      ['general.tags', 'array:string', ['a', 'b']],
    ]);
    expect(warnings).toEqual([
      'model card: base_model entry 7 is neither a name nor a mapping: written as an empty entry',
      'model card: name 2024 is not a string: left out',
      'model card: version 1 is not a string: left out',
      'model card: license ["mit",3] is not a string: left out',
      'model card: base_model 1 version 2 is not a string: left out',
      'model card: tags [7] is not a string: left out',
      'model card: languages [true] is not a string: left out',
    ]);
  });

  it('warns and writes no card keys for front matter that is not YAML or not UTF-8', async () => {
    const warnings: string[] = [];
    expect(parseModelCard(utf8('---\na: [1, 2\nb: c\n---\n'), 'm/README.md', warnings)).toBeUndefined();
    expect(parseModelCard(new Uint8Array([0x2d, 0x2d, 0x2d, 0x0a, 0xff, 0x0a]), 'm/README.md', warnings)).toBeUndefined();
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/^m\/README\.md: the front matter is not YAML/);
    expect(warnings[1]).toMatch(/^m\/README\.md: not UTF-8/);
    // Alias bombs are refused by the parser, not expanded.
    const bomb = '---\na: &a [x, x, x, x, x, x, x, x, x, x]\n' + Array.from({ length: 8 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(10).fill(`*${String.fromCharCode(97 + i)}`).join(', ')}]`).join('\n') + '\n---\n';
    const w2: string[] = [];
    expect(parseModelCard(utf8(bomb), 'README.md', w2)).toBeUndefined();
    expect(w2[0]).toMatch(/not YAML/);
    expect(await readModelCard(fromBuffer(utf8('---\nlicense: mit\n---\n'), 'README.md'))).toEqual({ license: 'mit' });
    expect(await readModelCard(undefined)).toBeUndefined();
  });
});
