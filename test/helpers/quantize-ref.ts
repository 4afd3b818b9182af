// What the other runtimes are compared with: `webquant quantize` on Node, in-process, for
// stories260K (BF16) with a preset. Returns the output file's bytes.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { quantizeCommand } from '../../src/cli/quantize.js';
import { imatrixCommand } from '../../src/cli/imatrix-command.js';
import type { CliIO } from '../../src/cli/io.js';
import { SHARED } from './shared.js';
import { compiledUrl, ROOT } from '../pipeline/helpers.js';

export const STORIES_BF16 = join(SHARED, 'models/stories260K/model.bf16.safetensors');
export const STORIES_CONFIG = join(SHARED, 'models/stories260K/config.json');

const quiet = { write: () => true };
const nodeIo = (): CliIO => ({ stdout: quiet, stderr: quiet, cwd: ROOT, workerUrl: compiledUrl('src/pipeline/worker-node.js') });

/** `webquant quantize <STORIES_BF16> -o <dir>/ref-<preset>.<ext> --preset <preset> [--imatrix <file>]`. */
export async function cliReference(dir: string, preset: string, ext: 'gguf' | 'safetensors', imatrix?: string): Promise<Buffer> {
  const out = join(dir, `ref-${preset}${imatrix ? '-imatrix' : ''}.${ext}`);
  await quantizeCommand({ input: STORIES_BF16, output: out, preset, json: true, ...(imatrix ? { imatrix } : {}) }, nodeIo());
  return readFileSync(out);
}

/** `webquant quantize <input> -o <out> --preset <preset>` in process; the output's bytes. */
export async function cliQuantize(input: string, out: string, preset: string): Promise<Buffer> {
  await quantizeCommand({ input, output: out, preset, json: true }, nodeIo());
  return readFileSync(out);
}

/** `webquant imatrix -m <STORIES_BF16> -t <tokens> -o <out> --chunks <n> --context 128`. */
export async function cliImatrix(tokens: string, out: string, chunks: number): Promise<void> {
  await imatrixCommand({ model: STORIES_BF16, tokens, output: out, chunks, context: 128, json: true }, nodeIo());
}

export function firstDifference(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}
