// One entry point for a single-file checkpoint whose format is not known in advance.
import { ErrorCodes, fail } from '../errors.js';
import type { Checkpoint } from './checkpoint.js';
import { GGUF_MAGIC, openGguf, type GgufOptions } from './gguf.js';
import { openSafetensors, type SafetensorsOptions } from './safetensors.js';
import type { ByteSource } from './source.js';

/** GGUF when the file starts with "GGUF", safetensors otherwise (whose own checks then apply). */
export async function openCheckpoint(src: ByteSource, opts: GgufOptions & SafetensorsOptions = {}): Promise<Checkpoint> {
  const size = await src.size();
  if (size >= 4) {
    const m = await src.read(0, 4);
    if ((m[0] | (m[1] << 8) | (m[2] << 16) | (m[3] << 24)) >>> 0 === GGUF_MAGIC) return openGguf(src, opts);
  }
  if (size < 8) fail(ErrorCodes.ST_HEADER_TOO_SMALL, `[io] ${src.name}: ${size} bytes is neither a GGUF nor a safetensors file`, { file: src.name, value: size, expected: '>= 8 bytes' });
  return openSafetensors(src, opts);
}
