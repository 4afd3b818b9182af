// Access to ../shared (reference data beside the checkout; never part of the package).
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

export const SHARED = fileURLToPath(new URL('../../../shared/', import.meta.url));
export const hasShared = existsSync(join(SHARED, 'README.md'));

export function sharedBytes(rel: string): Uint8Array {
  const b = readFileSync(join(SHARED, rel));
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

export function sharedF32(rel: string): Float32Array {
  const b = sharedBytes(rel);
  return new Float32Array(b.slice().buffer);
}

/** The documented LCG input rows of shared/vectors/README.md, regenerated. */
export function vectorRows(): Float32Array {
  return sharedF32('vectors/input_f32.bin');
}
