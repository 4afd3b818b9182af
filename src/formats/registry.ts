// The one format registry: dispatch, validation, tests and tooling all read it.
import { ErrorCodes, fail } from '../errors.js';
import { ggufFormats } from './gguf.js';
import { intFormats } from './int.js';
import { bnbFormats } from './bnb.js';
import type { FormatSpec } from './types.js';

const all: FormatSpec[] = [...ggufFormats, ...intFormats, ...bnbFormats];

/** The formats webquant quantizes to. */
export const formats: ReadonlyMap<string, FormatSpec> = new Map(all.map((f) => [f.name, f]));

/** A format to quantize to, or to read stored bytes of. */
export function getFormat(name: string): FormatSpec {
  const key = typeof name === 'string' ? name.toLowerCase() : name;
  const f = formats.get(key);
  if (!f) {
    fail(ErrorCodes.UNKNOWN_FORMAT, `[quantize] unknown format "${String(name)}"; valid formats: ${[...formats.keys()].join(', ')}`, {
      option: 'format', value: name, expected: [...formats.keys()],
    });
  }
  return f;
}

/** What to name in an error refusing format `name` for GGUF: its GGUF twin, if it has one. */
export function ggufTwinHint(name: string): string {
  const twin = formats.get(name)?.ggufTwin;
  return twin ? ` (${twin} is ${name.toUpperCase()} as GGUF stores it, with llama.cpp's rounding)` : '';
}

/** The format of a GGUF tensor type. */
export function ggufFormatByType(type: number): FormatSpec | undefined {
  return all.find((f) => f.ggml?.type === type);
}
