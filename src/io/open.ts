// One entry point for a single-file checkpoint whose format is not known in advance.
import { ErrorCodes, fail } from '../errors.js';
import type { Checkpoint } from './checkpoint.js';
import { GGUF_MAGIC, openGguf, type GgufOptions } from './gguf.js';
import { openSafetensors, type SafetensorsOptions } from './safetensors.js';
import type { ByteSource } from './source.js';

/** Whether a file's first bytes are an HTML (or XML) page: what servers answer for a missing file or a sign-in. */
export function looksLikeHtml(head: Uint8Array): boolean {
  return /^\s*<(!doctype|html|head|body|\?xml)/i.test(String.fromCharCode(...head.subarray(0, 64)));
}

/** GGUF when the file starts with "GGUF", safetensors otherwise (whose own checks then apply). */
export async function openCheckpoint(src: ByteSource, opts: GgufOptions & SafetensorsOptions = {}): Promise<Checkpoint> {
  const size = await src.size();
  // One read answers both formats' first questions (and, for a file that is neither, quotes it).
  const head = await src.read(0, Math.min(size, 72));
  if (size >= 4 && (head[0] | (head[1] << 8) | (head[2] << 16) | (head[3] << 24)) >>> 0 === GGUF_MAGIC) return openGguf(src, opts);
  if (size < 8) fail(ErrorCodes.ST_HEADER_TOO_SMALL, `[io] ${src.name}: ${size} bytes is neither a GGUF nor a safetensors file`, { file: src.name, value: size, expected: '>= 8 bytes' });
  // A safetensors header is JSON and starts with "{" right after its 8-byte length. Anything else
  // (an HTML or sign-in page served at a model URL, a text file) would otherwise be reported by
  // the length its first 8 bytes happen to spell.
  if (size > 8 && head[8] !== 0x7b) {
    const text = Array.from(head, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
    const html = looksLikeHtml(head) ? ' (an HTML page?)' : '';
    fail(ErrorCodes.ST_NOT_JSON, `[io] ${src.name} is neither a GGUF file (it would start with "GGUF") nor a safetensors file (an 8-byte header length, then JSON starting with "{"): it starts with "${text}"${html}`, {
      file: src.name, value: text, expected: ['GGUF', 'safetensors'],
    });
  }
  return openSafetensors(src, opts);
}
