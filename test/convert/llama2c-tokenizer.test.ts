import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { SHARED, hasShared, sharedBytes } from '../helpers/shared.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { llama2cVocab } from '../../src/convert/llama2c-tokenizer.js';
import { vocabMetadata } from '../../src/convert/gguf-vocab.js';
import { WebquantError } from '../../src/errors.js';

const DIR = join(SHARED, 'models/stories260K');

/** A llama2.c tokenizer file from (score, text) records. */
function tokFile(maxLen: number, recs: [number, string][]): Uint8Array {
  const parts: number[] = [];
  const u32 = (x: number) => parts.push(...new Uint8Array(new Uint32Array([x]).buffer));
  u32(maxLen);
  for (const [score, text] of recs) {
    parts.push(...new Uint8Array(new Float32Array([score]).buffer));
    const b = new TextEncoder().encode(text);
    u32(b.length);
    parts.push(...b);
  }
  return new Uint8Array(parts);
}

describe.skipIf(!hasShared)('llama2.c tok512.bin against the stories260K GGUF', () => {
  it('gives the tokenizer arrays of tinyllamas-stories-260k-f32.gguf exactly', async () => {
    const ref = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(join(DIR, 'tinyllamas-stories-260k-f32.gguf')))));
    const v = llama2cVocab(sharedBytes('models/stories260K/tok512.bin'), 'tok512.bin', 512);
    const got = Object.fromEntries(vocabMetadata(v).map((e) => [e.key, e.value]));
    const want = ref.metadata;
    expect(got['tokenizer.ggml.model']).toBe(want['tokenizer.ggml.model']);
    expect(got['tokenizer.ggml.tokens']).toEqual(want['tokenizer.ggml.tokens']);
    // f32 scores stored and read back bit for bit.
    expect(new Float32Array(got['tokenizer.ggml.scores'] as number[])).toEqual(new Float32Array(want['tokenizer.ggml.scores'] as number[]));
    expect(got['tokenizer.ggml.token_type']).toEqual(want['tokenizer.ggml.token_type']);
    expect(got['tokenizer.ggml.bos_token_id']).toBe(want['tokenizer.ggml.bos_token_id']);
    expect(got['tokenizer.ggml.eos_token_id']).toBe(want['tokenizer.ggml.eos_token_id']);
    // Known differences. The reference (written by crabml) sets padding_token_id = 0 (= <unk>) and
    // no unknown_token_id; llama.cpp's convert-llama2c-to-ggml writes unknown_token_id = 0 and no
    // usable pad (0xFFFFFFFF, which llama.cpp ignores). llama.cpp's own defaults for a "llama"
    // vocabulary are unk 0 and no pad, so both files tokenize alike.
    expect(want['tokenizer.ggml.padding_token_id']).toBe(0);
    expect(got['tokenizer.ggml.padding_token_id']).toBeUndefined();
    expect(want['tokenizer.ggml.unknown_token_id']).toBeUndefined();
    expect(got['tokenizer.ggml.unknown_token_id']).toBe(0);
    const tokKeys = (m: Record<string, unknown>) => Object.keys(m).filter((k) => k.startsWith('tokenizer.')).sort();
    expect(tokKeys(got).filter((k) => k !== 'tokenizer.ggml.unknown_token_id'))
      .toEqual(tokKeys(want).filter((k) => k !== 'tokenizer.ggml.padding_token_id'));
    // What the conversion itself changes: llama2.c stores "\n<s>\n" / "\n</s>\n" and spaces for U+2581.
    const raw = new TextDecoder().decode(sharedBytes('models/stories260K/tok512.bin'));
    expect(raw).toContain('\n<s>\n');
    expect(v.tokens.filter((t) => t.startsWith('\u2581'))).toHaveLength(91);
  });

  it('reads to the end of the file when the vocabulary size is not given', () => {
    expect(llama2cVocab(sharedBytes('models/stories260K/tok512.bin'), 'tok512.bin').tokens).toHaveLength(512);
  });
});

describe('llama2.c tokenizer files', () => {
  const recs: [number, string][] = [[0, '<unk>'], [0, '\n<s>\n'], [0, '\n</s>\n'], [0, '<0x0A>'], [-1, ' the'], [-2, ''], [-3, 'a b']];

  it('applies convert-llama2c-to-ggml rules: special ids 0-2, byte and empty tokens, spaces to U+2581', () => {
    const v = llama2cVocab(tokFile(6, recs), 't.bin');
    expect(v.tokens).toEqual(['<unk>', '<s>', '</s>', '<0x0A>', '\u2581the', '', 'a\u2581b']);
    expect(v.tokenTypes).toEqual([2, 3, 3, 6, 1, 3, 1]);
    expect(v.scores).toEqual([0, 0, 0, 0, -1, -2, -3]);
    expect(v.special).toEqual({ unk: 0, bos: 1, eos: 2 });
  });

  it('refuses malformed files with the file name', () => {
    const good = tokFile(6, recs);
    const cases: [Uint8Array, number | undefined, RegExp][] = [
      [good.subarray(0, 2), undefined, /too short for the header/],
      [good.subarray(0, good.length - 1), undefined, /runs past the end/],
      [good.subarray(0, good.length - 4), undefined, /cut off|runs past/],
      [good, 8, /token 7 is cut off/],
      [good, 5, /bytes follow the 5 tokens/],
      [tokFile(3, recs), undefined, /longer than the header's max_token_length 3/],
      [new Uint8Array([...tokFile(6, recs.slice(0, 3)), 0, 0, 0, 0, 1, 0, 0, 0, 0xff]), undefined, /token 3 is not UTF-8/],
      [tokFile(6, recs.slice(0, 2)), undefined, /cannot hold <unk>, <s> and <\/s>/],
      [tokFile(6, [...recs, [0, ' the']]), undefined, /appears as id 4 and id 7/],
    ];
    for (const [bytes, n, re] of cases) {
      let err: unknown;
      try { llama2cVocab(bytes, '/x/tok.bin', n); } catch (e) { err = e; }
      expect(err, String(re)).toBeInstanceOf(WebquantError);
      expect((err as WebquantError).code).toBe('E_TOKENIZER');
      expect((err as WebquantError).message).toMatch(re);
      expect((err as WebquantError).details.file).toBe('/x/tok.bin');
    }
  });
});
