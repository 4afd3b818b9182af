// Evaluation token files: little-endian uint16 token ids, every document starting with BOS.
// Works on bytes (Uint8Array / ArrayBuffer) so a browser can pass a fetch() body straight in.
import { ErrorCodes, fail } from '../errors.js';

export const BOS = 1;

/** Decodes a .u16 token file. Always little-endian, whatever the host's byte order. */
export function readTokens(bytes: Uint8Array | ArrayBuffer, file = 'tokens'): Uint16Array {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  if (u8.byteLength % 2 !== 0) {
    fail(ErrorCodes.BAD_INPUT, `[tokens] ${file}: ${u8.byteLength} bytes is not a whole number of uint16 tokens`, {
      file, value: u8.byteLength, expected: 'an even number of bytes',
    });
  }
  const out = new Uint16Array(u8.byteLength / 2);
  const dv = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  for (let i = 0; i < out.length; i++) out[i] = dv.getUint16(2 * i, true);
  return out;
}

/**
 * Splits a token stream into documents: each starts at a BOS and runs up to the next BOS.
 * The results are views into `tokens` (no copy). Tokens before the first BOS are an error
 * because they would be a document whose first token is not BOS.
 */
export function splitDocuments(tokens: Uint16Array, bos = BOS): Uint16Array[] {
  if (tokens.length === 0) return [];
  if (tokens[0] !== bos) {
    fail(ErrorCodes.BAD_INPUT, `[tokens] the token stream must start with BOS = ${bos} but starts with ${tokens[0]}`, {
      index: 0, value: tokens[0], expected: bos,
    });
  }
  const docs: Uint16Array[] = [];
  let start = 0;
  for (let i = 1; i <= tokens.length; i++) {
    if (i === tokens.length || tokens[i] === bos) {
      docs.push(tokens.subarray(start, i));
      start = i;
    }
  }
  return docs;
}
