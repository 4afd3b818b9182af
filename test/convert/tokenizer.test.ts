import { describe, expect, it } from 'vitest';
import { gguf } from '@huggingface/gguf';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readGgufVocab } from '../../src/convert/tokenizer-files.js';
import { readSentencePieceModel } from '../../src/convert/sentencepiece.js';
import { TOKEN_TYPE, vocabMetadata, type GgufVocab } from '../../src/convert/gguf-vocab.js';
import { writeGguf } from '../../src/io/gguf-writer.js';
import { collect } from '../../src/io/stream.js';
import { WebquantError } from '../../src/errors.js';
import { BPE_MERGES, byteChars, byteLevelTokenizer, DEEPSEEK_LLM_PRE_TOKENIZER, DEEPSEEK_V3_PRE_TOKENIZER, files, GPT4O_REGEX, lenField, llamaPieces, QWEN2_REGEX, spModel, spmStyleTokenizer, varint } from './tokenizer-fixtures.js';

const { NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE } = TOKEN_TYPE;
const f32 = (x: number) => Math.fround(x);

/** Every tokenizer.* key of a vocabulary, as llama.cpp would read it back (through @huggingface/gguf). */
async function roundTrip(v: GgufVocab): Promise<Record<string, unknown>> {
  const bytes = await collect(writeGguf({ metadata: vocabMetadata(v), tensors: [] }));
  const dir = mkdtempSync(join(tmpdir(), 'webquant-vocab-'));
  try {
    writeFileSync(join(dir, 'v.gguf'), bytes);
    const { metadata } = await gguf(join(dir, 'v.gguf'), { allowLocalFile: true });
    return Object.fromEntries(Object.entries(metadata).filter(([k]) => k.startsWith('tokenizer.')));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function tokenizerError(p: Promise<unknown> | (() => unknown)): Promise<WebquantError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    expect(e).toBeInstanceOf(WebquantError);
    expect((e as WebquantError).code).toBe('E_TOKENIZER');
    return e as WebquantError;
  }
  throw new Error('expected an E_TOKENIZER error');
}

describe('SentencePiece tokenizer.model', () => {
  it('reads pieces, scores and types and skips the other fields', () => {
    const pieces = llamaPieces(['▁t', '▁the', 'he', '▁a']);
    const got = readSentencePieceModel(spModel(pieces));
    expect(got).toHaveLength(pieces.length);
    expect(got.map((p) => p.piece)).toEqual(pieces.map((p) => p.piece));
    expect(got.map((p) => p.score)).toEqual(pieces.map((p) => f32(p.score)));
    // A piece without field 3 is NORMAL (the proto default).
    expect(got.map((p) => p.type)).toEqual(pieces.map((p) => p.type ?? NORMAL));
  });

  it('refuses malformed files with the file name and what was expected', async () => {
    const good = spModel(llamaPieces(['▁a']));
    const cases: [Uint8Array, RegExp][] = [
      [good.subarray(0, 7), /runs past the end|truncated/],
      [new Uint8Array([...lenField(2, [8]), 0x80]), /truncated varint/],
      [new Uint8Array(lenField(2, [8, 1])), /no pieces/],
      [new Uint8Array([...varint(1 * 8 + 0), 5]), /pieces have wire type 0/],
      [new Uint8Array(lenField(1, [...lenField(1, [0xff, 0xfe])])), /not UTF-8/],
      [new Uint8Array(lenField(1, [...lenField(1, [0x61]), 3 * 8, 9])), /piece type 9/],
      [new Uint8Array(lenField(1, [2 * 8 + 5, 0, 0])), /truncated score/],
      [new Uint8Array(lenField(1, [2 * 8 + 5, 0, 0, 0, 0])), /has no text/],
      [new Uint8Array([3 * 8 + 3]), /wire type 3/],
    ];
    for (const [bytes, re] of cases) {
      const e = await tokenizerError(() => readSentencePieceModel(bytes, '/m/tokenizer.model'));
      expect(e.message).toMatch(re);
      expect(e.message).toContain('/m/tokenizer.model');
      expect(e.details.file).toBe('/m/tokenizer.model');
    }
  });

  it('converts as convert_hf_to_gguf: added tokens, added_tokens_decoder, [PAD] up to vocab_size, special ids', async () => {
    const pieces = llamaPieces(['▁t', '▁the', 'he', '▁a']);
    pieces.push({ piece: '<mine>', score: 0, type: USER_DEFINED }, { piece: '<old>', score: 0, type: UNUSED });
    const n = pieces.length;
    const v = (await readGgufVocab(files({
      'tokenizer.model': spModel(pieces),
      'added_tokens.json': { '<tool>': n },
      'tokenizer_config.json': {
        add_bos_token: true, add_eos_token: false, bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>',
        chat_template: '{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}',
        added_tokens_decoder: {
          [n + 1]: { content: '<|im_end|>', special: false },
          [n + 2]: { content: '▁custom▁word', special: false },
        },
      },
    }), { vocabSize: n + 5, config: { bos_token_id: 1, eos_token_id: 2, pad_token_id: 0 } }))!;
    expect(v.model).toBe('llama');
    expect(v.pre).toBe('default');
    expect(v.tokens.slice(0, n)).toEqual(pieces.map((p) => p.piece));
    expect(v.tokens.slice(n)).toEqual(['<tool>', '<|im_end|>', ' custom word', `[PAD${n + 3}]`, `[PAD${n + 4}]`]);
    expect(v.scores!.slice(n)).toEqual([-1000, -1000, -1000, -10000, -10000]);
    expect(v.scores![n - 3]).toBe(f32(-3.25));
    // USER_DEFINED pieces stay NORMAL (the converter checks unknown/control/unused/byte only).
    expect(v.tokenTypes.slice(0, 4)).toEqual([UNKNOWN, CONTROL, CONTROL, BYTE]);
    expect(v.tokenTypes.slice(n - 2)).toEqual([NORMAL, UNUSED, USER_DEFINED, CONTROL, USER_DEFINED, UNUSED, UNUSED]);
    // No tokenizer.json: tokenizer_config's names match no added token; the ids come from config.json.
    expect(v.special).toEqual({ bos: 1, eos: 2, pad: 0 });
    expect(v.add).toEqual({ bos: true, eos: false });
    const md = await roundTrip(v);
    expect(md).toEqual({
      'tokenizer.ggml.model': 'llama',
      'tokenizer.ggml.pre': 'default',
      'tokenizer.ggml.tokens': v.tokens,
      'tokenizer.ggml.scores': v.scores!.map(f32),
      'tokenizer.ggml.token_type': v.tokenTypes,
      'tokenizer.ggml.bos_token_id': 1,
      'tokenizer.ggml.eos_token_id': 2,
      'tokenizer.ggml.padding_token_id': 0,
      'tokenizer.ggml.add_bos_token': true,
      'tokenizer.ggml.add_eos_token': false,
      'tokenizer.chat_template': '{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}',
    });
  });

  it('takes special ids from tokenizer.json added_tokens first and skips ids outside the vocabulary', async () => {
    const pieces = llamaPieces(['▁a', '▁b']);
    const v = (await readGgufVocab(files({
      'tokenizer.model': spModel(pieces),
      'tokenizer.json': spmStyleTokenizer(),
      'tokenizer_config.json': { bos_token: { content: '<s>', special: true }, eos_token: '</s>', unk_token: '<unk>' },
    }), { config: { bos_token_id: 7, eos_token_id: 2, pad_token_id: 99999 } }))!;
    expect(v.source).toBe('tokenizer.json + tokenizer.model + tokenizer_config.json');
    expect(v.tokens).toHaveLength(pieces.length);
    expect(v.special).toEqual({ bos: 1, eos: 2, unk: 0 });
    expect(v.warnings.join()).toMatch(/pad token id 99999 is outside the 261-token vocabulary/);
    // tokenizer.json's TemplateProcessing puts <s> first: add BOS.
    expect(v.add).toEqual({ bos: true });
  });
});

describe('tokenizer.json, byte-level BPE (gpt2)', () => {
  const llama3 = () => byteLevelTokenizer({
    added: [
      { content: '<|begin_of_text|>', special: true }, { content: '<|end_of_text|>', special: true },
      { content: '<|eot_id|>', special: true }, { content: '<|reserved_special_token_0|>', special: false }, { content: '▁user▁word', special: false },
    ],
    pairMerges: true, bosTemplate: '<|begin_of_text|>',
  });
  const nBase = 256 + BPE_MERGES.length;

  it('converts a Llama 3 tokenizer: llama-bpe, merges, control tokens, add_bos from the post-processor', async () => {
    const template = "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] }}{%- endfor %}";
    const v = (await readGgufVocab(files({
      'tokenizer.json': llama3(),
      'tokenizer_config.json': { bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>', chat_template: template, model_max_length: 131072 },
      'generation_config.json': { bos_token_id: nBase, eos_token_id: [nBase + 1, nBase + 2], pad_token_id: nBase + 1 },
    }), { vocabSize: nBase + 8, config: { bos_token_id: nBase, eos_token_id: nBase + 1 } }))!;
    expect(v.model).toBe('gpt2');
    expect(v.pre).toBe('llama-bpe');
    expect(v.tokens.slice(0, 256)).toEqual(byteChars());
    expect(v.tokens.slice(256, nBase)).toEqual(BPE_MERGES.map(([a, b]) => a + b));
    expect(v.tokens.slice(nBase)).toEqual(['<|begin_of_text|>', '<|end_of_text|>', '<|eot_id|>', '<|reserved_special_token_0|>', ' user word', `[PAD${nBase + 5}]`, `[PAD${nBase + 6}]`, `[PAD${nBase + 7}]`]);
    // A non-special added token that looks like one (<|...|>) is CONTROL; others USER_DEFINED with ▁ -> space.
    expect(v.tokenTypes.slice(nBase)).toEqual([CONTROL, CONTROL, CONTROL, CONTROL, USER_DEFINED, UNUSED, UNUSED, UNUSED]);
    expect(v.tokenTypes.slice(0, nBase).every((t) => t === NORMAL)).toBe(true);
    expect(v.scores).toBeUndefined();
    expect(v.merges).toEqual(BPE_MERGES.map(([a, b]) => `${a} ${b}`));
    // tokenizer_config first, then config.json / generation_config.json only fill gaps.
    expect(v.special).toEqual({ bos: nBase, eos: nBase + 2, pad: nBase + 1 });
    expect(v.add).toEqual({ bos: true });
    const md = await roundTrip(v);
    expect(Object.keys(md)).toEqual([
      'tokenizer.ggml.model', 'tokenizer.ggml.pre', 'tokenizer.ggml.tokens', 'tokenizer.ggml.token_type', 'tokenizer.ggml.merges',
      'tokenizer.ggml.bos_token_id', 'tokenizer.ggml.eos_token_id', 'tokenizer.ggml.padding_token_id', 'tokenizer.ggml.add_bos_token', 'tokenizer.chat_template',
    ]);
    expect(md['tokenizer.ggml.merges']).toEqual(v.merges);
    expect(md['tokenizer.ggml.tokens']).toEqual(v.tokens);
    expect(md['tokenizer.ggml.token_type']).toEqual(v.tokenTypes);
    expect(md['tokenizer.chat_template']).toBe(template);
  });

  it('encodes spaces inside pair-form merges as U+0120 (gguf-py)', async () => {
    const tj = llama3();
    (tj.model as { merges: string[][] }).merges.push(['a b', 'c']);
    const v = (await readGgufVocab(files({ 'tokenizer.json': tj })))!;
    expect(v.merges!.at(-1)).toBe('a\u0120b c');
  });

  it('converts a Qwen2 tokenizer: qwen2 pre, ids from config.json where tokenizer_config names none', async () => {
    const tj = byteLevelTokenizer({ regex: QWEN2_REGEX, added: [{ content: '<|endoftext|>', special: true }, { content: '<|im_start|>', special: true }, { content: '<|im_end|>', special: true }] });
    const v = (await readGgufVocab(files({
      'tokenizer.json': tj,
      'tokenizer_config.json': { bos_token: null, eos_token: '<|im_end|>', pad_token: '<|endoftext|>', chat_template: [{ name: 'default', template: 'D' }, { name: 'tool use', template: 'T' }] },
    }), { vocabSize: nBase + 3, config: { bos_token_id: nBase, eos_token_id: nBase + 2 }, architecture: 'qwen2' }))!;
    expect(v.pre).toBe('qwen2');
    expect(v.special).toEqual({ eos: nBase + 2, pad: nBase, bos: nBase });
    const md = await roundTrip(v);
    expect(md['tokenizer.chat_template']).toBe('D');
    expect(md['tokenizer.chat_template.tool_use']).toBe('T');
    expect(md['tokenizer.chat_templates']).toEqual(['tool_use']);
    expect(md['tokenizer.ggml.add_bos_token']).toBeUndefined();
  });

  it('names the post-processor EOS and keeps the old one as end-of-turn', async () => {
    const tj = byteLevelTokenizer({ added: [{ content: '<|begin_of_text|>', special: true }, { content: '<|end|>', special: true }, { content: '<|eot|>', special: true }] });
    (tj as { post_processor: unknown }).post_processor = {
      type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<|begin_of_text|>' } }, { Sequence: { id: 'A' } }, { SpecialToken: { id: '<|end|>' } }], pair: [],
    };
    const v = (await readGgufVocab(files({ 'tokenizer.json': tj, 'tokenizer_config.json': { bos_token: '<|begin_of_text|>', eos_token: '<|eot|>' } })))!;
    expect(v.special).toEqual({ bos: nBase, eos: nBase + 1, eot: nBase + 2 });
    expect(v.add).toEqual({ bos: true, eos: true });
  });

  it('recognises GPT-2 (lone ByteLevel), GPT-4o\'s regex and SmolLM (single digits, then GPT-2), refuses unknown regexes unless pre is given', async () => {
    const gpt2 = byteLevelTokenizer({ added: [{ content: '<|endoftext|>', special: true }], gpt2Pre: true });
    expect((await readGgufVocab(files({ 'tokenizer.json': gpt2 })))!.pre).toBe('gpt-2');
    const o200k = byteLevelTokenizer({ regex: GPT4O_REGEX, added: [{ content: '<|endoftext|>', special: true }] });
    expect((await readGgufVocab(files({ 'tokenizer.json': o200k })))!.pre).toBe('gpt-4o');
    const smol = byteLevelTokenizer({ added: [{ content: '<|endoftext|>', special: true }], digitsPre: true });
    expect((await readGgufVocab(files({ 'tokenizer.json': smol })))!.pre).toBe('smollm');
    // Digits grouped (individual_digits false) are another pre-tokenizer: refused.
    const grouped = JSON.parse(JSON.stringify(smol));
    grouped.pre_tokenizer.pretokenizers[0].individual_digits = false;
    expect((await tokenizerError(readGgufVocab(files({ 'tokenizer.json': grouped })))).code).toBe('E_TOKENIZER');
    const odd = byteLevelTokenizer({ regex: String.raw`\p{L}+|\s+`, added: [] });
    const e = await tokenizerError(readGgufVocab(files({ 'tokenizer.json': odd })));
    expect(e.message).toContain('/ckpt/tokenizer.json');
    expect(e.message).toContain(String.raw`\\p{L}+|\\s+`);
    expect(e.details.expected).toContain('llama-bpe');
    expect((await readGgufVocab(files({ 'tokenizer.json': odd }), { pre: 'gpt-2' }))!.pre).toBe('gpt-2');
  });

  it('recognises DeepSeek-V3\'s three splits (deepseek-v3), and nothing that differs from them in a regex, an order or a behaviour', async () => {
    const ds = { ...byteLevelTokenizer({ added: [{ content: '<｜end▁of▁sentence｜>', special: true }] }), pre_tokenizer: DEEPSEEK_V3_PRE_TOKENIZER };
    const steps = DEEPSEEK_V3_PRE_TOKENIZER.pretokenizers as { pattern?: { Regex: string } }[];
    // The parsed JSON holds the line breaks as characters, as the real file does.
    expect(steps[2].pattern!.Regex).toContain('[^\r\n\\p{L}');
    expect((await readGgufVocab(files({ 'tokenizer.json': ds })))!.pre).toBe('deepseek-v3');
    const variant = (f: (p: { type: string; behavior?: string; pattern?: { Regex: string } }[]) => void) => {
      const t = JSON.parse(JSON.stringify(ds));
      f(t.pre_tokenizer.pretokenizers);
      return tokenizerError(readGgufVocab(files({ 'tokenizer.json': t })));
    };
    expect((await variant((p) => { p[0].pattern!.Regex = '\\p{N}'; })).code).toBe('E_TOKENIZER');
    expect((await variant((p) => { p.splice(0, 2, p[1], p[0]); })).code).toBe('E_TOKENIZER');
    expect((await variant((p) => { p[1].behavior = 'Removed'; })).code).toBe('E_TOKENIZER');
    expect((await variant((p) => { p.splice(1, 1); })).code).toBe('E_TOKENIZER');
  });

  it('recognises DeepSeek-LLM\'s five splits and single digits (deepseek-llm: V2, V2-Lite, V2.5), and not without the digits step', async () => {
    const ds = { ...byteLevelTokenizer({ added: [{ content: '<｜end▁of▁sentence｜>', special: true }] }), pre_tokenizer: DEEPSEEK_LLM_PRE_TOKENIZER };
    expect((await readGgufVocab(files({ 'tokenizer.json': ds })))!.pre).toBe('deepseek-llm');
    const variant = (f: (p: { type: string; pattern?: { Regex: string } }[]) => void) => {
      const t = JSON.parse(JSON.stringify(ds));
      f(t.pre_tokenizer.pretokenizers);
      return tokenizerError(readGgufVocab(files({ 'tokenizer.json': t })));
    };
    expect((await variant((p) => { p.splice(5, 1); })).code).toBe('E_TOKENIZER');
    expect((await variant((p) => { p[1].pattern!.Regex = '\\s?\\p{L}+'; })).code).toBe('E_TOKENIZER');
    expect((await variant((p) => { p[3].pattern!.Regex = '\\s+'; })).code).toBe('E_TOKENIZER');
  });
});

describe('tokenizer.json, SentencePiece-style BPE (llama)', () => {
  it('converts as LlamaHfVocab, with scores that follow the merge ranks', async () => {
    const v = (await readGgufVocab(files({
      'tokenizer.json': spmStyleTokenizer(),
      'special_tokens_map.json': { bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>' },
    }), { vocabSize: 275 }))!;
    expect(v.model).toBe('llama');
    expect(v.pre).toBe('default');
    expect(v.tokens.slice(259)).toEqual(['▁', 't', 'h', 'e', 'a', 'n', 'd', '▁and', 'he', '▁t', '▁the', 'an', '▁an', '[PAD272]', '[PAD273]', '[PAD274]']);
    // Named special tokens are CONTROL (LlamaHfVocab marks <unk> so too), <0xNN> BYTE.
    expect(v.tokenTypes.slice(0, 4)).toEqual([CONTROL, CONTROL, CONTROL, BYTE]);
    expect(v.tokenTypes.slice(259)).toEqual([...new Array(13).fill(NORMAL), UNUSED, UNUSED, UNUSED]);
    // ▁t (merge 0) > he (1) > ▁the (2) > an (3) > ▁an (4) > ▁and (5) > unmerged single letters.
    const score = (t: string) => v.scores![v.tokens.indexOf(t)];
    expect(['▁t', 'he', '▁the', 'an', '▁an', '▁and'].map(score)).toEqual([-0, -1, -2, -3, -4, -5]);
    expect(score('t')).toBe(-1006);
    // special_tokens_map.json stands in for the missing tokenizer_config.json.
    expect(v.special).toEqual({ bos: 1, eos: 2, unk: 0 });
    expect(v.add).toEqual({ bos: true });
    expect(v.merges).toBeUndefined();
  });

  it('reads it as byte-level BPE for Qwen2 (convert_hf_to_gguf Qwen2Model has no SentencePiece-JSON path)', async () => {
    const e = await tokenizerError(readGgufVocab(files({ 'tokenizer.json': spmStyleTokenizer() }), { architecture: 'qwen2' }));
    expect(e.message).toMatch(/pre-tokenizer/);
  });
});

describe('tokenizer files: missing, unsupported, malformed', () => {
  it('no tokenizer.json / tokenizer.model: no vocabulary (the caller writes no_vocab)', async () => {
    expect(await readGgufVocab({})).toBeUndefined();
    expect(await readGgufVocab(files({ 'tokenizer_config.json': { bos_token: '<s>' }, 'special_tokens_map.json': {} }))).toBeUndefined();
  });

  it('refuses each malformed file with its name', async () => {
    const good = byteLevelTokenizer({ added: [] });
    const bad: [Record<string, unknown>, RegExp, string][] = [
      [{ 'tokenizer.json': '{"model": ' }, /not JSON/, 'tokenizer.json'],
      [{ 'tokenizer.json': '[1, 2]' }, /not a JSON object/, 'tokenizer.json'],
      [{ 'tokenizer.json': new Uint8Array([0x7b, 0xff, 0x7d]) }, /not UTF-8/, 'tokenizer.json'],
      [{ 'tokenizer.json': { version: '1.0' } }, /no "model" section/, 'tokenizer.json'],
      [{ 'tokenizer.json': { model: { type: 'Unigram', vocab: [] } } }, /model.type "Unigram" is not supported/, 'tokenizer.json'],
      [{ 'tokenizer.json': { ...good, model: { ...(good.model as object), vocab: { a: -1 } } } }, /model.vocab\["a"\] must be an integer id/, 'tokenizer.json'],
      [{ 'tokenizer.json': { ...good, model: { ...(good.model as object), merges: [['a']] } } }, /model.merges\[0\]/, 'tokenizer.json'],
      [{ 'tokenizer.json': { ...good, model: { ...(good.model as object), merges: [] } } }, /needs model.merges/, 'tokenizer.json'],
      [{ 'tokenizer.json': { ...good, added_tokens: [{ id: 'x', content: 'a' }] } }, /added_tokens\[0\]/, 'tokenizer.json'],
      // tokenizer.json cannot hold a token twice (its vocabulary is a map); a tokenizer.model can.
      [{ 'tokenizer.model': spModel(llamaPieces(['▁a', '▁b', '▁a'])) }, /"▁a" appears as id 259 and id 261; llama.cpp refuses duplicate tokens/, 'tokenizer.model'],
      [{ 'tokenizer.json': good, 'tokenizer_config.json': 'nope' }, /not JSON/, 'tokenizer_config.json'],
      [{ 'tokenizer.model': spModel(llamaPieces([])), 'tokenizer_config.json': { added_tokens_decoder: { x: { content: 'a' } } } }, /added_tokens_decoder\["x"\]/, 'tokenizer_config.json'],
      [{ 'tokenizer.model': spModel(llamaPieces([])), 'added_tokens.json': { '<t>': -4 } }, /must be an integer >= 0/, 'added_tokens.json'],
      [{ 'tokenizer.model': new Uint8Array([0x0a, 0x05, 0x0a]) }, /runs past the end/, 'tokenizer.model'],
    ];
    for (const [f, re, file] of bad) {
      const e = await tokenizerError(readGgufVocab(files(f), { vocabSize: 400 }));
      expect(e.message, file).toMatch(re);
      expect(String(e.details.file), e.message).toContain(file);
    }
    // A vocabulary larger than config.json's vocab_size cannot match the embedding.
    const e = await tokenizerError(readGgufVocab(files({ 'tokenizer.json': good }), { vocabSize: 100 }));
    expect(e.message).toMatch(/outside config.json's vocab_size 100/);
    const neg = await tokenizerError(readGgufVocab(files({ 'tokenizer.json': good }), { config: { bos_token_id: -1 } }));
    expect(neg.message).toMatch(/bos token id -1 is negative/);
  });
});
