// Hugging Face tokenizer files -> GgufVocab, following llama.cpp's convert_hf_to_gguf.py:
//  - tokenizer.model (SentencePiece)            -> "llama"  (_create_vocab_sentencepiece)
//  - tokenizer.json BPE with byte_fallback       -> "llama"  (gguf-py LlamaHfVocab; Mistral, TinyLlama)
//  - tokenizer.json byte-level BPE               -> "gpt2"   (get_vocab_base; Llama 3, Qwen2)
// The vocabulary is padded with "[PAD<id>]" UNUSED tokens up to config.json's vocab_size, which is
// the row count of the embedding that llama.cpp checks against the token count.
import { ErrorCodes, fail } from '../errors.js';
import { bpePre } from './bpe-pre.js';
import { checkVocab, TOKEN_TYPE, type GgufVocab } from './gguf-vocab.js';
import type { SentencePiece } from './sentencepiece.js';
import { addedTokens, isObj, specialVocab, tokenContent, type Json, type SpecialVocabInput } from './special-vocab.js';

export type HfFiles = Omit<SpecialVocabInput, 'nVocab' | 'loadMerges'> & {
  /** added_tokens.json (SentencePiece checkpoints): content -> id. */
  addedTokensJson?: Json;
  names: SpecialVocabInput['names'] & { tokenizerModel: string; addedTokensJson: string };
  /** Which files were read, for GgufVocab.source. */
  read: string[];
};

const bad = (file: string, msg: string, d: { option?: string; value?: unknown; expected?: unknown } = {}): never =>
  fail(ErrorCodes.TOKENIZER, `[tokenizer] ${file}: ${msg}`, { file, ...d });

/** Added tokens that look like control tokens though not marked special (convert_hf_to_gguf does_token_look_special). */
export function looksSpecial(t: string): boolean {
  return ['<pad>', '<mask>', '<2mass>', '[@BOS@]'].includes(t)
    || (t.startsWith('<|') && t.endsWith('|>'))
    || (t.startsWith('<\uff5c') && t.endsWith('\uff5c>'))
    || (t.startsWith('<unused') && t.endsWith('>'));
}

function withSpecials(f: HfFiles, base: Omit<GgufVocab, 'special' | 'add' | 'chatTemplate' | 'warnings' | 'source'>, loadMerges: boolean, warnings: string[]): GgufVocab {
  const sv = specialVocab({ ...f, nVocab: base.model === 'llama' ? base.tokens.length : undefined, loadMerges });
  const v: GgufVocab = {
    ...base, special: sv.special, add: sv.add, source: f.read.join(' + '), warnings: [...warnings, ...sv.warnings],
    ...(sv.merges ? { merges: sv.merges } : {}), ...(sv.chatTemplate !== undefined ? { chatTemplate: sv.chatTemplate } : {}),
  };
  checkVocab(v);
  return v;
}

/** tokenizer.model (+ added_tokens.json, tokenizer_config.json's added_tokens_decoder). */
export function sentencePieceVocab(pieces: SentencePiece[], f: HfFiles, vocabSize = pieces.length): GgufVocab {
  const warnings: string[] = [];
  const tokens = Array.from({ length: vocabSize }, (_, i) => `[PAD${i}]`);
  const scores = new Array<number>(vocabSize).fill(-10000);
  const types = new Array<number>(vocabSize).fill(TOKEN_TYPE.UNUSED);
  if (pieces.length > vocabSize) warnings.push(`${f.names.tokenizerModel}: ${pieces.length - vocabSize} pieces past vocab_size ${vocabSize} are dropped`);
  for (let i = 0; i < Math.min(pieces.length, vocabSize); i++) {
    const p = pieces[i];
    tokens[i] = p.piece;
    scores[i] = p.score;
    // As the converter: USER_DEFINED pieces stay NORMAL unless added_tokens_decoder says otherwise.
    types[i] = p.type === TOKEN_TYPE.UNKNOWN || p.type === TOKEN_TYPE.CONTROL || p.type === TOKEN_TYPE.UNUSED || p.type === TOKEN_TYPE.BYTE ? p.type : TOKEN_TYPE.NORMAL;
  }
  const place = (id: number, from: string): boolean => {
    if (id < vocabSize) return true;
    warnings.push(`${from}: token id ${id} is outside vocab_size ${vocabSize}; ignored`);
    return false;
  };
  if (f.addedTokensJson) {
    for (const [text, id] of Object.entries(f.addedTokensJson)) {
      if (!Number.isSafeInteger(id) || (id as number) < 0) bad(f.names.addedTokensJson, `the id of ${JSON.stringify(text)} must be an integer >= 0`, { value: id });
      if (!place(id as number, f.names.addedTokensJson)) continue;
      tokens[id as number] = text;
      scores[id as number] = -1000;
      types[id as number] = TOKEN_TYPE.USER_DEFINED;
    }
  }
  const decoder = f.tokenizerConfig?.added_tokens_decoder;
  if (isObj(decoder)) {
    for (const [key, data] of Object.entries(decoder)) {
      const id = Number(key);
      if (!/^\d+$/.test(key) || !isObj(data) || typeof data.content !== 'string') {
        bad(f.names.tokenizerConfig, `added_tokens_decoder["${key}"] must map an integer id to {content, special}`, { option: 'added_tokens_decoder', value: data });
      }
      if (!place(id, f.names.tokenizerConfig)) continue;
      let text = (data as Json).content as string;
      if ((data as Json).special === true || looksSpecial(text)) types[id] = TOKEN_TYPE.CONTROL;
      else {
        text = text.replaceAll('\u2581', ' '); // user-defined tokens are matched on pre-normalized text
        types[id] = TOKEN_TYPE.USER_DEFINED;
      }
      scores[id] = -1000;
      tokens[id] = text;
    }
  }
  return withSpecials(f, { model: 'llama', pre: 'default', tokens, scores, tokenTypes: types }, false, warnings);
}

/** tokenizer.json model.vocab, validated: token -> id. */
function modelVocab(tj: Json, file: string): Map<string, number> {
  const vocab = isObj(tj.model) ? tj.model.vocab : undefined;
  if (!isObj(vocab)) bad(file, 'model.vocab must be an object of token -> id', { option: 'model.vocab', expected: '{"token": id, ...}' });
  const m = new Map<string, number>();
  for (const [t, id] of Object.entries(vocab as Json)) {
    if (!Number.isSafeInteger(id) || (id as number) < 0) bad(file, `model.vocab[${JSON.stringify(t)}] must be an integer id >= 0 but is ${JSON.stringify(id)}`, { option: 'model.vocab', value: id });
    m.set(t, id as number);
  }
  return m;
}

/** The tokenizer's get_vocab(): model.vocab with added_tokens over it, inverted to id -> token. */
function idToToken(vocab: Map<string, number>, added: { id: number; content: string }[]): Map<number, string> {
  const all = new Map(vocab);
  for (const a of added) all.set(a.content, a.id);
  const rev = new Map<number, string>();
  for (const [t, id] of all) rev.set(id, t);
  return rev;
}

/**
 * tokenizer.json of a SentencePiece-style BPE (byte_fallback, "▁" for spaces) without a
 * tokenizer.model, as gguf-py's LlamaHfVocab. Scores: llama.cpp's SentencePiece tokenizer merges
 * the adjacent pair whose result has the highest score, so a token gets minus the rank of the
 * first merge that makes it (the order SentencePiece's own scores follow); tokens no merge makes
 * get -1000 less than the last merge. (LlamaHfVocab writes -1000 for every token, a placeholder
 * under which llama.cpp would merge left to right instead of by rank.)
 */
export function llamaHfVocab(tj: Json, f: HfFiles, vocabSize?: number): GgufVocab {
  const file = f.names.tokenizerJson;
  const vocab = modelVocab(tj, file);
  const added = addedTokens(tj, file);
  const rev = idToToken(vocab, added);
  const base = vocab.size;
  const extra = added.filter((a) => a.id >= base).sort((a, b) => a.id - b.id);
  // all_special_tokens: the named special tokens and additional_special_tokens of the tokenizer config.
  const cfg = { ...f.specialTokensMap, ...f.tokenizerConfig };
  const specialTexts = new Set<string>();
  for (const k of ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token']) {
    const c = tokenContent(cfg[k]);
    if (c !== undefined) specialTexts.add(c);
  }
  if (Array.isArray(cfg.additional_special_tokens)) for (const t of cfg.additional_special_tokens) { const c = tokenContent(t); if (c !== undefined) specialTexts.add(c); }
  const allIds = new Map<string, number>([...rev].map(([id, t]) => [t, id]));
  const specialIds = new Set([...specialTexts].map((t) => allIds.get(t)).filter((x): x is number => x !== undefined));

  const merges = isObj(tj.model) && Array.isArray(tj.model.merges) ? tj.model.merges : [];
  const rank = new Map<string, number>();
  merges.forEach((m: unknown, i: number) => {
    const pair = typeof m === 'string' ? m.split(' ') : Array.isArray(m) ? m : [];
    if (pair.length === 2 && typeof pair[0] === 'string' && typeof pair[1] === 'string' && !rank.has(pair[0] + pair[1])) rank.set(pair[0] + pair[1], i);
  });
  const floor = -1000 - merges.length;

  const tokens: string[] = [], scores: number[] = [], types: number[] = [];
  const extraIds = new Set(extra.map((a) => a.id));
  for (let id = 0; id < base; id++) {
    if (extraIds.has(id)) continue;
    const t = rev.get(id);
    if (t === undefined) bad(file, `model.vocab has ${base} tokens but no token with id ${id}`, { option: 'model.vocab', value: id, expected: `ids 0..${base - 1}` });
    const r = rank.get(t!);
    tokens.push(t!);
    scores.push(r !== undefined ? -r : floor);
    types.push(/^<0x[0-9A-Fa-f]{2}>$/.test(t!) ? TOKEN_TYPE.BYTE : specialIds.has(id) ? TOKEN_TYPE.CONTROL : TOKEN_TYPE.NORMAL);
  }
  for (const a of extra) {
    if (a.id !== tokens.length) bad(file, `added token ${JSON.stringify(a.content)} has id ${a.id}, but added tokens must follow the ${base}-token vocabulary without gaps`, { option: 'added_tokens', value: a.id, expected: tokens.length });
    tokens.push(a.content);
    scores.push(-1000);
    types.push(specialTexts.has(a.content) ? TOKEN_TYPE.CONTROL : TOKEN_TYPE.USER_DEFINED);
  }
  padTo(tokens, types, vocabSize, file, scores);
  return withSpecials(f, { model: 'llama', pre: 'default', tokens, scores, tokenTypes: types }, false, []);
}

/** "[PAD<id>]" UNUSED tokens up to vocab_size (the embedding's rows). */
function padTo(tokens: string[], types: number[], vocabSize: number | undefined, file: string, scores?: number[]): void {
  if (vocabSize === undefined) return;
  if (tokens.length > vocabSize) bad(file, `the tokenizer has ${tokens.length} tokens but config.json's vocab_size is ${vocabSize}`, { value: tokens.length, expected: `<= ${vocabSize}` });
  for (let i = tokens.length; i < vocabSize; i++) {
    tokens.push(`[PAD${i}]`);
    types.push(TOKEN_TYPE.UNUSED);
    scores?.push(-1000);
  }
}

/** Byte-level BPE tokenizer.json (get_vocab_base + _set_vocab_gpt2). */
export function gpt2Vocab(tj: Json, f: HfFiles, vocabSize?: number, pre?: string): GgufVocab {
  const file = f.names.tokenizerJson;
  const vocab = modelVocab(tj, file);
  const added = addedTokens(tj, file);
  const rev = idToToken(vocab, added);
  const n = vocabSize ?? rev.size;
  let maxId = -1;
  for (const id of rev.keys()) maxId = Math.max(maxId, id);
  if (maxId >= n) bad(file, `token id ${maxId} is outside config.json's vocab_size ${n}`, { value: maxId, expected: `< ${n}` });
  const addedByContent = new Map(added.map((a) => [a.content, a]));
  const tokens: string[] = [], types: number[] = [];
  for (let i = 0; i < n; i++) {
    let t = rev.get(i);
    if (t === undefined) {
      tokens.push(`[PAD${i}]`);
      types.push(TOKEN_TYPE.UNUSED);
      continue;
    }
    const a = addedByContent.get(t);
    if (!a) types.push(TOKEN_TYPE.NORMAL);
    else if (a.special || looksSpecial(t)) types.push(TOKEN_TYPE.CONTROL);
    else {
      t = t.replaceAll('\u2581', ' ');
      types.push(TOKEN_TYPE.USER_DEFINED);
    }
    tokens.push(t);
  }
  const v = withSpecials(f, { model: 'gpt2', pre: pre ?? bpePre(tj, file), tokens, tokenTypes: types }, true, []);
  if (!v.merges?.length) bad(file, 'a byte-level BPE tokenizer needs model.merges (llama.cpp refuses a "gpt2" vocabulary without them)', { option: 'model.merges', expected: 'a non-empty list' });
  return v;
}
