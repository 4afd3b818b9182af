// A tokenizer as GGUF stores it and llama.cpp reads it (src/llama-vocab.cpp): a model name, the
// token strings with a score and a type each, BPE merges, special token ids, add-BOS/EOS flags and
// the chat template. Every tokenizer reader (SentencePiece tokenizer.model, tokenizer.json,
// llama2.c) produces one GgufVocab; vocabMetadata() turns it into the `tokenizer.*` keys.
import { ErrorCodes, fail } from '../errors.js';
import type { GgufWriteKV } from '../io/gguf-writer.js';

/** llama_token_type / gguf.TokenType (and SentencePiece's piece types, which use the same numbers). */
export const TOKEN_TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const;

export type SpecialTokenType = 'bos' | 'eos' | 'unk' | 'sep' | 'pad' | 'cls' | 'mask' | 'eot' | 'eom';

/** GGUF key of each special token id (gguf-py Keys.Tokenizer; "seperator" is spelled so in the format). */
export const SPECIAL_TOKEN_KEYS: Record<SpecialTokenType, string> = {
  bos: 'tokenizer.ggml.bos_token_id',
  eos: 'tokenizer.ggml.eos_token_id',
  unk: 'tokenizer.ggml.unknown_token_id',
  sep: 'tokenizer.ggml.seperator_token_id',
  pad: 'tokenizer.ggml.padding_token_id',
  cls: 'tokenizer.ggml.cls_token_id',
  mask: 'tokenizer.ggml.mask_token_id',
  eot: 'tokenizer.ggml.eot_token_id',
  eom: 'tokenizer.ggml.eom_token_id',
};

export type AddTokenType = 'bos' | 'eos' | 'sep';
export const ADD_TOKEN_KEYS: Record<AddTokenType, string> = {
  bos: 'tokenizer.ggml.add_bos_token',
  eos: 'tokenizer.ggml.add_eos_token',
  sep: 'tokenizer.ggml.add_sep_token',
};

/** One named template of a list-form chat_template (tokenizer_config.json). */
export interface NamedChatTemplate {
  name: string;
  template: string;
}

export interface GgufVocab {
  /** tokenizer.ggml.model: 'llama' (SentencePiece) or 'gpt2' (byte-level BPE). */
  model: 'llama' | 'gpt2';
  /** tokenizer.ggml.pre: the pre-tokenizer llama.cpp applies (BPE), 'default' for SentencePiece; absent = not written. */
  pre?: string;
  tokens: string[];
  /** tokenizer.ggml.scores (SentencePiece); absent for byte-level BPE, as llama.cpp's converter writes none. */
  scores?: number[];
  /** TOKEN_TYPE per token. */
  tokenTypes: number[];
  /** "left right" pairs, highest priority first (BPE only). */
  merges?: string[];
  /** Special token ids, written in this order. */
  special: Partial<Record<SpecialTokenType, number>>;
  add: Partial<Record<AddTokenType, boolean>>;
  chatTemplate?: string | NamedChatTemplate[];
  /** The files it was read from, for messages ("tokenizer.json + tokenizer_config.json"). */
  source: string;
  /** Things the conversion skipped or guessed; the caller shows them. */
  warnings: string[];
}

/**
 * Refuses (E_TOKENIZER) what llama.cpp would refuse when loading: arrays of different lengths,
 * duplicate token strings (llama.cpp throws "duplicate token in vocabulary") and special ids
 * outside the vocabulary.
 */
export function checkVocab(v: GgufVocab): void {
  const n = v.tokens.length;
  const bad = (msg: string, d: { value?: unknown; expected?: unknown; index?: number } = {}): never =>
    fail(ErrorCodes.TOKENIZER, `[tokenizer] ${v.source}: ${msg}`, { file: v.source, ...d });
  if (n === 0) bad('the vocabulary is empty', { expected: 'at least one token' });
  if (v.tokenTypes.length !== n) bad(`${v.tokenTypes.length} token types for ${n} tokens`, { value: v.tokenTypes.length, expected: n });
  if (v.scores && v.scores.length !== n) bad(`${v.scores.length} scores for ${n} tokens`, { value: v.scores.length, expected: n });
  const seen = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const t = v.tokens[i];
    // llama.cpp renames empty tokens to [EMPTY_<id>] on load, so two of them do not collide.
    if (t === '') continue;
    const j = seen.get(t);
    if (j !== undefined) bad(`token ${JSON.stringify(t)} appears as id ${j} and id ${i}; llama.cpp refuses duplicate tokens`, { value: t, index: i });
    seen.set(t, i);
  }
  for (const [typ, id] of Object.entries(v.special)) {
    if (!Number.isSafeInteger(id) || id! < 0 || id! >= n) bad(`the ${typ} token id ${String(id)} is outside the ${n}-token vocabulary`, { value: id, expected: `0..${n - 1}` });
  }
}

/** The `tokenizer.*` GGUF keys of a vocabulary, in the order llama.cpp's converter writes them. */
export function vocabMetadata(v: GgufVocab): GgufWriteKV[] {
  checkVocab(v);
  const kv: GgufWriteKV[] = [{ key: 'tokenizer.ggml.model', type: 'string', value: v.model }];
  if (v.pre !== undefined) kv.push({ key: 'tokenizer.ggml.pre', type: 'string', value: v.pre });
  kv.push({ key: 'tokenizer.ggml.tokens', type: 'array', itemType: 'string', value: v.tokens });
  if (v.scores) kv.push({ key: 'tokenizer.ggml.scores', type: 'array', itemType: 'f32', value: v.scores });
  kv.push({ key: 'tokenizer.ggml.token_type', type: 'array', itemType: 'i32', value: v.tokenTypes });
  if (v.merges?.length) kv.push({ key: 'tokenizer.ggml.merges', type: 'array', itemType: 'string', value: v.merges });
  for (const [typ, id] of Object.entries(v.special)) kv.push({ key: SPECIAL_TOKEN_KEYS[typ as SpecialTokenType], type: 'u32', value: id });
  for (const [typ, on] of Object.entries(v.add)) kv.push({ key: ADD_TOKEN_KEYS[typ as AddTokenType], type: 'bool', value: on });
  kv.push(...chatTemplateMetadata(v.chatTemplate));
  return kv;
}

/**
 * tokenizer.chat_template, or for a list of named templates (gguf-py add_chat_template): the
 * one named "default" as tokenizer.chat_template, each other as tokenizer.chat_template.<name>
 * (name reduced to [A-Za-z0-9_]) and their names in tokenizer.chat_templates.
 */
function chatTemplateMetadata(t: GgufVocab['chatTemplate']): GgufWriteKV[] {
  if (t === undefined) return [];
  if (typeof t === 'string') return [{ key: 'tokenizer.chat_template', type: 'string', value: t }];
  const kv: GgufWriteKV[] = [];
  const names: string[] = [];
  let def: string | undefined;
  for (const c of t) {
    const name = c.name.replace(/[^A-Za-z0-9]/g, '_');
    if (!name) continue;
    if (name === 'default') def = c.template;
    else if (!names.includes(name)) {
      names.push(name);
      kv.push({ key: `tokenizer.chat_template.${name}`, type: 'string', value: c.template });
    }
  }
  if (names.length) kv.push({ key: 'tokenizer.chat_templates', type: 'array', itemType: 'string', value: names });
  if (def !== undefined) kv.push({ key: 'tokenizer.chat_template', type: 'string', value: def });
  return kv;
}
