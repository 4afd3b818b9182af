// llama2.c's tokenizer.bin (tok512.bin, ...): u32 max_token_length, then per token f32 score,
// u32 byte length and the UTF-8 bytes, all little-endian. The vocabulary size is not stored: it
// is the model's (config vocab_size), or every record up to the end of the file.
// Converted as llama.cpp's convert-llama2c-to-ggml does: ids 0, 1, 2 become "<unk>" (UNKNOWN),
// "<s>" and "</s>" (CONTROL) whatever the file says (llama2.c stores "\n<s>\n"), empty tokens
// are CONTROL, "<0xNN>" tokens are BYTE, the rest NORMAL; spaces become U+2581 as SentencePiece
// writes them (llama2.c's exporter turned them back into spaces).
import { ErrorCodes, fail } from '../errors.js';
import { checkVocab, TOKEN_TYPE, type GgufVocab } from './gguf-vocab.js';

const UNK = 0, BOS = 1, EOS = 2;
const utf8 = new TextDecoder('utf-8', { fatal: true });

export function llama2cVocab(bytes: Uint8Array, file: string, vocabSize?: number): GgufVocab {
  const bad = (msg: string, d: { value?: unknown; expected?: unknown; index?: number } = {}): never =>
    fail(ErrorCodes.TOKENIZER, `[tokenizer] ${file}: ${msg}; expected a llama2.c tokenizer (u32 max_token_length, then f32 score, u32 length, bytes per token)`, { file, ...d });
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 4) bad(`${bytes.length} bytes is too short for the header`, { value: bytes.length, expected: '>= 4' });
  const maxLen = dv.getUint32(0, true);
  const tokens: string[] = [], scores: number[] = [], tokenTypes: number[] = [];
  let at = 4;
  while (vocabSize === undefined ? at < bytes.length : tokens.length < vocabSize) {
    const id = tokens.length;
    if (bytes.length - at < 8) bad(`token ${id} is cut off at byte ${at}${vocabSize !== undefined ? ` (the model has ${vocabSize} tokens)` : ''}`, { index: id, value: at });
    const score = dv.getFloat32(at, true);
    const len = dv.getUint32(at + 4, true);
    if (len > maxLen) bad(`token ${id} is ${len} bytes, longer than the header's max_token_length ${maxLen}`, { index: id, value: len, expected: `<= ${maxLen}` });
    if (len > bytes.length - at - 8) bad(`token ${id} (${len} bytes) runs past the end of the file`, { index: id, value: len });
    let text: string;
    try {
      text = utf8.decode(bytes.subarray(at + 8, at + 8 + len));
    } catch {
      return bad(`token ${id} is not UTF-8`, { index: id });
    }
    at += 8 + len;
    let type: number = TOKEN_TYPE.NORMAL;
    if (id === UNK) { text = '<unk>'; type = TOKEN_TYPE.UNKNOWN; }
    else if (id === BOS) { text = '<s>'; type = TOKEN_TYPE.CONTROL; }
    else if (id === EOS) { text = '</s>'; type = TOKEN_TYPE.CONTROL; }
    else if (text === '') type = TOKEN_TYPE.CONTROL;
    else if (/^<0x[0-9A-Fa-f]{2}>$/.test(text)) type = TOKEN_TYPE.BYTE;
    tokens.push(text.replaceAll(' ', '\u2581'));
    scores.push(score);
    tokenTypes.push(type);
  }
  if (at !== bytes.length) bad(`${bytes.length - at} bytes follow the ${tokens.length} tokens of the model's vocabulary`, { value: bytes.length - at, expected: 0 });
  const v: GgufVocab = {
    model: 'llama', tokens, scores, tokenTypes,
    // convert-llama2c-to-ggml writes unk/bos/eos (its sep/pad = 0xFFFFFFFF are ids llama.cpp warns about and ignores).
    special: { unk: UNK, bos: BOS, eos: EOS }, add: {}, source: file, warnings: [],
  };
  if (tokens.length <= EOS) bad(`${tokens.length} tokens cannot hold <unk>, <s> and </s>`, { value: tokens.length, expected: '>= 3' });
  checkVocab(v);
  return v;
}
