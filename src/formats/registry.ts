// The one format registry: dispatch, validation, tests and tooling all read it.
import { ErrorCodes, fail } from '../errors.js';
import { ggufFormats } from './gguf.js';
import { intFormats } from './int.js';
import { bnbFormats } from './bnb.js';
import type { FormatSpec } from './types.js';

const all: FormatSpec[] = [...ggufFormats, ...intFormats, ...bnbFormats];

export const formats: ReadonlyMap<string, FormatSpec> = new Map(all.map((f) => [f.name, f]));

export function getFormat(name: string): FormatSpec {
  const f = formats.get(typeof name === 'string' ? name.toLowerCase() : name);
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

export function ggufFormatByType(type: number): FormatSpec | undefined {
  return all.find((f) => f.ggml?.type === type);
}
