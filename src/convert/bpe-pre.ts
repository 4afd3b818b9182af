// Which of llama.cpp's BPE pre-tokenizers (tokenizer.ggml.pre) a tokenizer.json uses.
// llama.cpp's converter finds it by hashing the token ids a reference tokenizer gives for a test
// text; without that tokenizer at hand, webquant recognises the pre_tokenizer section itself: the
// Split regex (or DeepSeek-V3's three) before a ByteLevel step, a lone ByteLevel with its built-in
// GPT-2 regex, or single digits split off before such a ByteLevel. The
// regexes are the ones llama.cpp quotes as "original regex from tokenizer.json" (src/llama-vocab.cpp).
// Tokenizers that share a regex but differ elsewhere cannot be told apart this way: `pre` overrides.
import { ErrorCodes, fail } from '../errors.js';

/** tokenizer.json Split regex -> tokenizer.ggml.pre. */
export const BPE_PRE_REGEXES: Readonly<Record<string, string>> = {
  // Llama 3 / 3.1 / 3.2 (digits in groups of up to three).
  [String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`]: 'llama-bpe',
  // Qwen2, Qwen2.5, Qwen3 (single digits).
  [String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`]: 'qwen2',
  // o200k (GPT-4o; Phi-4, Phi-4-mini): case-aware words with the contraction as a suffix, digits in threes.
  [String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`]: 'gpt-4o',
  // Mistral's Tekken (Mistral Nemo, Pixtral's text model, Ministral).
  [String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`]: 'tekken',
};

// DeepSeek-V3's word regex: an ASCII punctuation mark may lead ASCII letters; letters with their
// marks; punctuation and symbol runs; line breaks; spaces.
const DEEPSEEK_V3_WORDS = String.raw`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + '`' + String.raw`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

// DeepSeek-LLM's cased-letter class is a long list of Unicode ranges: it is known by its start.
const DEEPSEEK_LLM_LETTERS = (r: string): boolean => r.startsWith('\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba') && r.endsWith(']+');

/**
 * Pre-tokenizers of several Split steps (each Isolated), possibly single digits split off, then a
 * ByteLevel without its regex, by their regexes in order (a string: that regex; a function: a test
 * of it): the ones llama.cpp lists for these names (src/llama-vocab.cpp).
 */
export const BPE_PRE_SEQUENCES: readonly { name: string; regexes: readonly (string | ((r: string) => boolean))[]; digits?: true }[] = [
  // DeepSeek-V3, R1: digits in threes, then runs of CJK ideographs (U+4E00-9FA5) and kana, then words.
  { name: 'deepseek-v3', regexes: [String.raw`\p{N}{1,3}`, '[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+', DEEPSEEK_V3_WORDS] },
  // DeepSeek-LLM, V2, V2-Lite, V2.5: line breaks; cased letters; ASCII, fullwidth and CJK
  // punctuation; trailing spaces; CJK ideographs and Hangul; then every digit on its own.
  {
    name: 'deepseek-llm', digits: true,
    regexes: ['[\r\n]', DEEPSEEK_LLM_LETTERS, '\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+', '\\s+$', '[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+'],
  },
];

// tokenizer.json writes some line breaks in its regexes as the characters themselves (DeepSeek's),
// others escaped (Llama 3's): the same regex either way.
const canonical = (r: string): string => r.replace(/\r/g, '\\r').replace(/\n/g, '\\n');

type Json = Record<string, unknown>;
const obj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** tokenizer.ggml.pre for a byte-level BPE tokenizer.json; E_TOKENIZER when it is not recognised. */
const BPE_PRE_CANONICAL = new Map(Object.entries(BPE_PRE_REGEXES).map(([r, name]) => [canonical(r), name]));

export function bpePre(tokenizer: Json, file: string): string {
  const pre = tokenizer.pre_tokenizer;
  const steps: unknown[] = obj(pre) && pre.type === 'Sequence' && Array.isArray(pre.pretokenizers) ? pre.pretokenizers : [pre];
  const split = steps.filter((s): s is Json => obj(s) && s.type === 'Split');
  const byteLevel = steps.filter((s): s is Json => obj(s) && s.type === 'ByteLevel');
  const regexOf = (s: Json) => (obj(s.pattern) && typeof s.pattern.Regex === 'string' ? s.pattern.Regex : undefined);
  if (steps.length === 2 && split.length === 1 && byteLevel.length === 1 && byteLevel[0].use_regex === false) {
    const name = BPE_PRE_REGEXES[regexOf(split[0]) ?? ''] ?? BPE_PRE_CANONICAL.get(canonical(regexOf(split[0]) ?? ''));
    if (name) return name;
  }
  // Several Isolated splits (then maybe single digits), then a ByteLevel without its regex.
  const last = steps[steps.length - 1], beforeLast = steps[steps.length - 2];
  const digitsLast = obj(beforeLast) && beforeLast.type === 'Digits' && beforeLast.individual_digits === true;
  if (split.length === steps.length - (digitsLast ? 2 : 1) && byteLevel.length === 1 && last === byteLevel[0] && byteLevel[0].use_regex === false
    && split.every((s, i) => s === steps[i] && s.behavior === 'Isolated' && s.invert !== true)) {
    const got = split.map((s) => canonical(regexOf(s) ?? ''));
    const hit = BPE_PRE_SEQUENCES.find((q) => !!q.digits === digitsLast && q.regexes.length === got.length
      && q.regexes.every((r, i) => (typeof r === 'string' ? canonical(r) === got[i] : r(got[i]))));
    if (hit) return hit.name;
  }
  // A lone ByteLevel splits with the GPT-2 regex (use_regex defaults to true).
  if (steps.length === 1 && byteLevel.length === 1 && byteLevel[0].use_regex !== false) return 'gpt-2';
  // Every digit on its own, then GPT-2's regex (SmolLM, SmolLM2, SmolLM3; StarCoder2 splits the
  // same way): llama.cpp's "smollm" runs \p{N} before that regex.
  const digits = steps[0];
  if (steps.length === 2 && obj(digits) && digits.type === 'Digits' && digits.individual_digits === true && byteLevel.length === 1 && steps[1] === byteLevel[0] && byteLevel[0].use_regex !== false) return 'smollm';
  const regex = split.map(regexOf).find((r) => r !== undefined);
  return fail(ErrorCodes.TOKENIZER, `[tokenizer] ${file}: the BPE pre-tokenizer ${regex ? `regex ${JSON.stringify(regex)}` : JSON.stringify(pre)?.slice(0, 200)} is not one webquant recognises; name llama.cpp's pre-tokenizer for it (CLI --tokenizer-pre, API option pre)`, {
    file, option: 'pre', value: regex ?? pre, expected: [...Object.values(BPE_PRE_REGEXES), ...BPE_PRE_SEQUENCES.map((q) => q.name), 'gpt-2', 'smollm'],
  });
}
