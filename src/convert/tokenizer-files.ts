// The tokenizer files beside a checkpoint, by name, and the one entry point that turns them into
// a GgufVocab. Which reader runs follows llama.cpp's converter: tokenizer.model first (SentencePiece),
// else tokenizer.json (SentencePiece-style BPE for Llama-architecture models, byte-level BPE
// otherwise). A llama2.c tokenizer is read only when named. No tokenizer file: undefined (the
// caller writes tokenizer.ggml.model = "no_vocab"); a malformed one: E_TOKENIZER naming the file.
import { ErrorCodes, fail } from '../errors.js';
import { parseJson } from '../io/json.js';
import type { ByteSource } from '../io/source.js';
import type { GgufVocab } from './gguf-vocab.js';
import { gpt2Vocab, llamaHfVocab, sentencePieceVocab, type HfFiles } from './hf-tokenizer.js';
import { llama2cVocab } from './llama2c-tokenizer.js';
import { readSentencePieceModel } from './sentencepiece.js';
import { isObj, type Json } from './special-vocab.js';

/** The tokenizer's files (and generation_config.json, whose ids go with them), copied with a converted folder. */
export const TOKENIZER_FILE_NAMES = [
  'tokenizer.json', 'tokenizer.model', 'tokenizer_config.json', 'special_tokens_map.json',
  'added_tokens.json', 'generation_config.json', 'chat_template.jinja', 'chat_template.json',
] as const;
export type TokenizerFileName = (typeof TOKENIZER_FILE_NAMES)[number];

/** The model card (license, tags, base models: src/convert/model-card.ts). */
export const MODEL_CARD = 'README.md';

/** Every file read from beside a Hugging Face checkpoint: the tokenizer's and the model card. */
export const BESIDE_FILE_NAMES = [...TOKENIZER_FILE_NAMES, MODEL_CARD] as const;
export type BesideFileName = (typeof BESIDE_FILE_NAMES)[number];

/** Files beside a checkpoint by name; `llama2c` is a llama2.c tokenizer.bin (tok512.bin...). */
export type TokenizerFiles = Partial<Record<BesideFileName | 'llama2c', ByteSource>>;

export interface VocabOptions {
  /** config.json vocab_size: the vocabulary is padded to it (and a llama2.c file holds exactly that many tokens). */
  vocabSize?: number;
  /** config.json as parsed (special token ids). */
  config?: Record<string, unknown>;
  /** GGUF architecture: only 'llama' reads a SentencePiece-style tokenizer.json as "llama" (convert_hf_to_gguf's LlamaModel). */
  architecture?: string;
  /** tokenizer.ggml.pre for byte-level BPE, when the pre-tokenizer is not recognised (or to override it). */
  pre?: string;
  /** generation_config.json, when the caller has parsed it already (readGenerationConfig). */
  generationConfig?: Record<string, unknown>;
}

/** A tokenizer file is larger than any real one (Gemma's tokenizer.json is 34 MB). */
const MAX_TOKENIZER_FILE = 256 << 20;

/** Does the set hold a file a vocabulary can be made from? */
export function hasTokenizer(files: TokenizerFiles): boolean {
  return !!(files.llama2c || files['tokenizer.model'] || files['tokenizer.json']);
}

async function readAll(src: ByteSource): Promise<Uint8Array> {
  const size = await src.size();
  if (size > MAX_TOKENIZER_FILE) fail(ErrorCodes.TOKENIZER, `[tokenizer] ${src.name}: ${size} bytes is too large for a tokenizer file`, { file: src.name, value: size, expected: `<= ${MAX_TOKENIZER_FILE}` });
  return src.read(0, size);
}

async function readText(src: ByteSource): Promise<string> {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(await readAll(src));
  } catch (e) {
    if (e instanceof TypeError) fail(ErrorCodes.TOKENIZER, `[tokenizer] ${src.name}: not UTF-8 text`, { file: src.name, expected: 'UTF-8' });
    throw e;
  }
}

async function readJson(src: ByteSource | undefined): Promise<Json | undefined> {
  if (!src) return undefined;
  const text = await readText(src);
  let v: unknown;
  try {
    v = parseJson(text);
  } catch (e) {
    return fail(ErrorCodes.TOKENIZER, `[tokenizer] ${src.name}: not JSON (${(e as Error).message})`, { file: src.name, expected: 'a JSON object' });
  }
  if (!isObj(v)) fail(ErrorCodes.TOKENIZER, `[tokenizer] ${src.name}: not a JSON object`, { file: src.name, value: Array.isArray(v) ? 'array' : typeof v, expected: 'a JSON object' });
  return v as Json;
}

/** generation_config.json among the files, parsed (its sampling defaults go into a GGUF's general.sampling.* keys). */
export async function readGenerationConfig(files: TokenizerFiles): Promise<Record<string, unknown> | undefined> {
  return readJson(files['generation_config.json']);
}

/** The GGUF vocabulary of the tokenizer files, or undefined when there is none to read. */
export async function readGgufVocab(files: TokenizerFiles, opts: VocabOptions = {}): Promise<GgufVocab | undefined> {
  if (files.llama2c) return llama2cVocab(await readAll(files.llama2c), files.llama2c.name, opts.vocabSize);
  if (!files['tokenizer.model'] && !files['tokenizer.json']) return undefined;
  const name = (f: TokenizerFileName) => files[f]?.name ?? f;
  const [tokenizerJson, tokenizerConfig, specialTokensMap, addedTokensJson, chatJson] = await Promise.all(
    (['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'added_tokens.json', 'chat_template.json'] as const).map((f) => readJson(files[f])),
  );
  const generationConfig = opts.generationConfig ?? await readGenerationConfig(files);
  const jinja = files['chat_template.jinja'] ? await readText(files['chat_template.jinja']) : undefined;
  const hf: HfFiles = {
    tokenizerJson, tokenizerConfig, specialTokensMap, addedTokensJson, generationConfig, config: opts.config,
    chatTemplateFile: jinja ?? chatJson?.chat_template,
    names: {
      tokenizerJson: name('tokenizer.json'), tokenizerConfig: name('tokenizer_config.json'),
      tokenizerModel: name('tokenizer.model'), addedTokensJson: name('added_tokens.json'),
    },
    read: TOKENIZER_FILE_NAMES.filter((f) => files[f]).map((f) => f),
  };
  if (files['tokenizer.model']) {
    const pieces = readSentencePieceModel(await readAll(files['tokenizer.model']), name('tokenizer.model'));
    return sentencePieceVocab(pieces, hf, opts.vocabSize);
  }
  const tj = tokenizerJson!;
  const file = name('tokenizer.json');
  const model = tj.model;
  if (!isObj(model) || typeof model.type !== 'string') {
    return fail(ErrorCodes.TOKENIZER, `[tokenizer] ${file}: no "model" section with a "type"`, { file, option: 'model.type', expected: 'an object with "type"' });
  }
  if (model.type !== 'BPE') {
    return fail(ErrorCodes.TOKENIZER, `[tokenizer] ${file}: model.type "${model.type}" is not supported; webquant converts BPE tokenizer.json files and SentencePiece tokenizer.model files (pass --tokenizer none to write no vocabulary)`, {
      file, option: 'model.type', value: model.type, expected: ['BPE'],
    });
  }
  // gguf-py LlamaHfVocab: byte_fallback BPE with a Sequence decoder (Llama 3's BPE has no byte_fallback).
  const decoder = isObj(tj.decoder) ? tj.decoder.type : undefined;
  const spmStyle = model.byte_fallback === true && decoder === 'Sequence';
  if (spmStyle && (opts.architecture ?? 'llama') === 'llama') return llamaHfVocab(tj, hf, opts.vocabSize);
  return gpt2Vocab(tj, hf, opts.vocabSize, opts.pre);
}
