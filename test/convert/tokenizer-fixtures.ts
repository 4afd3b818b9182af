// Small but realistic tokenizer files, generated: a SentencePiece ModelProto encoder, GPT-2's
// byte-to-unicode table, and tokenizer.json files shaped like Llama 3's, Qwen2's and Mistral's
// (same sections, same regexes, tiny vocabularies).
import type { TokenizerFiles } from '../../src/convert/tokenizer-files.js';
import { fromBuffer } from '../../src/io/source.js';

// ---- protobuf -------------------------------------------------------------------------------
export function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) { out.push((n % 128) | 0x80); n = Math.floor(n / 128); }
  out.push(n);
  return out;
}
const key = (field: number, wire: number) => varint(field * 8 + wire);
export const lenField = (field: number, body: ArrayLike<number>) => [...key(field, 2), ...varint(body.length), ...Array.from(body)];
const f32 = (x: number) => Array.from(new Uint8Array(new Float32Array([x]).buffer));

export interface Piece { piece: string; score: number; type?: number }

/** A SentencePiece ModelProto with the given pieces, plus a trainer_spec and normalizer_spec to skip. */
export function spModel(pieces: Piece[]): Uint8Array {
  const out: number[] = [];
  for (const p of pieces) {
    const body = [...lenField(1, new TextEncoder().encode(p.piece)), ...key(2, 5), ...f32(p.score)];
    if (p.type !== undefined) body.push(...key(3, 0), ...varint(p.type));
    out.push(...lenField(1, body));
  }
  // trainer_spec { model_type: BPE (3), vocab_size (4), byte_fallback (35), a fixed64 field } and normalizer_spec { name }.
  out.push(...lenField(2, [...key(3, 0), 2, ...key(4, 0), ...varint(pieces.length), ...key(35, 0), 1, ...key(99, 1), 1, 2, 3, 4, 5, 6, 7, 8]));
  out.push(...lenField(3, lenField(1, new TextEncoder().encode('identity'))));
  return new Uint8Array(out);
}

/** Llama-2-like pieces: <unk>, <s>, </s>, 256 byte pieces, then ▁-words with falling scores. */
export function llamaPieces(words: string[]): Piece[] {
  const p: Piece[] = [{ piece: '<unk>', score: 0, type: 2 }, { piece: '<s>', score: 0, type: 3 }, { piece: '</s>', score: 0, type: 3 }];
  for (let b = 0; b < 256; b++) p.push({ piece: `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, score: 0, type: 6 });
  words.forEach((w, i) => p.push({ piece: w, score: -i - 0.25 }));
  return p;
}

// ---- byte-level BPE -------------------------------------------------------------------------
/** GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others map to U+0100 on. */
export function byteChars(): string[] {
  const chars: string[] = new Array(256);
  let n = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    chars[b] = String.fromCodePoint(printable ? b : 256 + n++);
  }
  return chars;
}

export const LLAMA3_REGEX = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
export const GPT4O_REGEX = String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
export const QWEN2_REGEX = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

/** Merges over byte-level text ("Ġ" = space): each merge's result is a vocabulary token. */
export const BPE_MERGES: [string, string][] = [['Ġ', 't'], ['h', 'e'], ['Ġt', 'he'], ['i', 'n'], ['Ġ', 'a'], ['o', 'n'], ['in', 'g'], ['Ġ', 'w'], ['e', 'r'], ['Ġa', 'nd']];

export interface AddedSpec { content: string; special: boolean }

/** A byte-level BPE tokenizer.json: 256 byte tokens, the merges' results, then added tokens. */
export function byteLevelTokenizer(o: { regex?: string; added: AddedSpec[]; pairMerges?: boolean; bosTemplate?: string; gpt2Pre?: boolean; digitsPre?: boolean; extraMerges?: [string, string][] }): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  byteChars().forEach((c, i) => { vocab[c] = i; });
  // SmolLM's shape also merges two digits, which its pre-tokenizer never lets meet.
  const merges: [string, string][] = [...BPE_MERGES, ...(o.digitsPre ? [['1', '2'] as [string, string]] : []), ...(o.extraMerges ?? [])];
  for (const [a, b] of merges) vocab[a + b] ??= Object.keys(vocab).length;
  let id = Object.keys(vocab).length;
  const added = o.added.map((a) => ({ id: id++, content: a.content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: a.special }));
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: o.digitsPre
      // SmolLM's: every digit on its own, then GPT-2's regex.
      ? { type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true }, { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }] }
      : o.gpt2Pre
      ? { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }
      : {
        type: 'Sequence',
        pretokenizers: [
          { type: 'Split', pattern: { Regex: o.regex ?? LLAMA3_REGEX }, behavior: 'Isolated', invert: false },
          { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
        ],
      },
    post_processor: o.bosTemplate
      ? {
        type: 'Sequence',
        processors: [
          { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
          {
            type: 'TemplateProcessing',
            single: [{ SpecialToken: { id: o.bosTemplate, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
            pair: [{ SpecialToken: { id: o.bosTemplate, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: o.bosTemplate, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
            special_tokens: {},
          },
        ],
      }
      : { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: !!o.bosTemplate,
      vocab,
      merges: o.pairMerges ? merges.map((m) => [...m]) : merges.map((m) => m.join(' ')),
    },
  };
}

/** A SentencePiece-style tokenizer.json (Mistral 7B v0.1 / TinyLlama): byte_fallback BPE over "▁" words. */
export function spmStyleTokenizer(): Record<string, unknown> {
  const vocab: Record<string, number> = { '<unk>': 0, '<s>': 1, '</s>': 2 };
  for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = 3 + b;
  // Single letters first, then merged tokens in an order unlike their merge ranks.
  for (const c of ['▁', 't', 'h', 'e', 'a', 'n', 'd']) vocab[c] = Object.keys(vocab).length;
  const merges = ['▁ t', 'h e', '▁t he', 'a n', '▁ an', '▁an d'];
  for (const t of ['▁and', 'he', '▁t', '▁the', 'an', '▁an']) vocab[t] = Object.keys(vocab).length;
  return {
    version: '1.0',
    added_tokens: [
      { id: 0, content: '<unk>', special: true, normalized: false },
      { id: 1, content: '<s>', special: true, normalized: false },
      { id: 2, content: '</s>', special: true, normalized: false },
    ],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }, { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
    pre_tokenizer: null,
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [], special_tokens: {},
    },
    decoder: { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges },
  };
}

/** Tokenizer files from objects (JSON) and bytes, named like the files beside a checkpoint. */
export function files(entries: Record<string, unknown>): TokenizerFiles {
  const out: Record<string, ReturnType<typeof fromBuffer>> = {};
  for (const [name, v] of Object.entries(entries)) {
    const bytes = v instanceof Uint8Array ? v : new TextEncoder().encode(typeof v === 'string' ? v : JSON.stringify(v));
    out[name] = fromBuffer(bytes, `/ckpt/${name}`);
  }
  return out as TokenizerFiles;
}

/**
 * DeepSeek-V3's pre_tokenizer (V3, R1) as the JSON text of its tokenizer.json writes it: three
 * Isolated splits (line breaks as JSON escapes, i.e. the characters themselves once parsed), then a
 * ByteLevel without its regex. Parsed here, not built, so that the test sees what a reader sees.
 */
export const DEEPSEEK_V3_PRE_TOKENIZER: Record<string, unknown> = JSON.parse(String.raw`{
  "type": "Sequence",
  "pretokenizers": [
    { "type": "Split", "pattern": { "Regex": "\\p{N}{1,3}" }, "behavior": "Isolated", "invert": false },
    { "type": "Split", "pattern": { "Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+" }, "behavior": "Isolated", "invert": false },
    { "type": "Split", "pattern": { "Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_` + '`' + String.raw`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+" }, "behavior": "Isolated", "invert": false },
    { "type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false }
  ]
}`);

/**
 * DeepSeek-LLM's pre_tokenizer (DeepSeek-V2, V2-Lite, V2.5) as its tokenizer.json writes it: five
 * Isolated splits (line breaks; cased letters as a long list of ranges; ASCII, fullwidth and CJK
 * punctuation; trailing spaces; CJK ideographs and Hangul), every digit on its own, then a
 * ByteLevel without its regex.
 */
export const DEEPSEEK_LLM_PRE_TOKENIZER: Record<string, unknown> = JSON.parse(String.raw`{
  "type": "Sequence",
  "pretokenizers": [
    { "type": "Split", "pattern": { "Regex": "[\r\n]" }, "behavior": "Isolated", "invert": false },
    { "type": "Split", "pattern": { "Regex": "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ\ud801\udc00-\ud801\udc4f\ud801\udcb0-\ud801\udcd3\ud801\udcd8-\ud801\udcfb\ud803\udc80-\ud803\udcb2\ud803\udcc0-\ud803\udcf2\ud806\udca0-\ud806\udcdf\ud83a\udd00-\ud83a\udd43]+" }, "behavior": "Isolated", "invert": false },
    { "type": "Split", "pattern": { "Regex": "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+" }, "behavior": "Isolated", "invert": false },
    { "type": "Split", "pattern": { "Regex": "\\s+$" }, "behavior": "Isolated", "invert": false },
    { "type": "Split", "pattern": { "Regex": "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+" }, "behavior": "Isolated", "invert": false },
    { "type": "Digits", "individual_digits": true },
    { "type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false }
  ]
}`);
