// `webquant quantize <in> -o <folder>/`: the output as a Hugging Face style folder, which is how
// MLX (mlx_lm.load), transformers and vLLM take a model: model.safetensors, the input's
// config.json (for MLX outputs with the "quantization" entry mlx_lm reads, for bitsandbytes
// outputs with transformers' quantization_config, for NVFP4 outputs with ModelOpt's) and the
// tokenizer files beside the input.
// Each file is written whole or not at all (writeFileAtomic); a folder made for a run that then
// fails is removed again.
import { readdir, mkdir, readFile, rmdir, stat } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { ErrorCodes, fail } from '../errors.js';
import { runtimeConfig } from '../io/runtime-config.js';
import { fromUrl } from '../io/source.js';
import { writeFileAtomic } from '../io/node.js';
import { TOKENIZER_FILE_NAMES } from '../convert/tokenizer-files.js';
import type { PlannedTensor } from '../plan/types.js';
import { absPath, isUrl, type OpenedInput } from './input.js';
import type { CliIO } from './io.js';

export const MODEL_FILE = 'model.safetensors';

/** The folder `-o` names (a path ending in a separator, or an existing directory), or undefined. */
export async function folderOutput(output: string, io: CliIO): Promise<string | undefined> {
  const p = absPath(output, io);
  if (output.endsWith('/') || output.endsWith(sep)) return resolve(p);
  return (await stat(p).then((s) => s.isDirectory(), () => false)) ? p : undefined;
}

/**
 * Makes the folder (its parent must exist) and refuses one that would mix this output with
 * another model: the input's own folder, or a folder holding other .safetensors files (mlx_lm
 * and transformers load every model*.safetensors they find). Returns whether it made the folder.
 */
export async function prepareFolder(dir: string, input: OpenedInput): Promise<boolean> {
  if (!(await stat(dirname(dir)).then((s) => s.isDirectory(), () => false))) {
    fail(ErrorCodes.BAD_OPTION, `[cli] quantize: the output folder's parent ${dirname(dir)} does not exist`, { file: dir, option: 'output', value: dir });
  }
  const made = await mkdir(dir, { recursive: false }).then(() => true, (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EEXIST') fail(ErrorCodes.IO, `[cli] quantize: cannot make the output folder ${dir}: ${e.message}`, { file: dir, option: 'output' });
    return false;
  });
  try {
    checkFolder(dir, input, await readdir(dir));
  } catch (e) {
    if (made) await rmdir(dir).catch(() => undefined);
    throw e;
  }
  return made;
}

function checkFolder(dir: string, input: OpenedInput, files: string[]): void {
  if (input.dir && resolve(input.dir) === resolve(dir)) {
    fail(ErrorCodes.BAD_OPTION, `[cli] quantize: the output folder ${dir} is the input's folder; write to another one`, { file: dir, option: 'output', value: dir });
  }
  const others = files.filter((f) => f.endsWith('.safetensors') && f !== MODEL_FILE || f === 'model.safetensors.index.json');
  if (others.length) {
    fail(ErrorCodes.BAD_OPTION, `[cli] quantize: the output folder ${dir} already holds ${others.join(', ')}, which a runtime would load beside ${MODEL_FILE}; use an empty folder`, {
      file: dir, option: 'output', value: others, expected: 'a folder without other .safetensors files',
    });
  }
}

async function configText(input: OpenedInput, io: CliIO): Promise<string | undefined> {
  if (!input.configFile) return undefined;
  if (isUrl(input.configFile)) {
    const src = fromUrl(input.configFile, io.fetch ? { fetch: io.fetch } : {});
    return new TextDecoder().decode(await src.read(0, await src.size()));
  }
  return readFile(input.configFile, 'utf8');
}

/**
 * Writes config.json and the tokenizer files beside the model in `dir`; returns notes on what it
 * wrote (and warnings for what a runtime will miss).
 */
export async function writeFolderFiles(dir: string, input: OpenedInput, tensors: readonly PlannedTensor[], warnings: string[], io: CliIO): Promise<string[]> {
  const notes: string[] = [];
  const written: string[] = [MODEL_FILE];
  const text = await configText(input, io);
  let rc = runtimeConfig({}, tensors);
  if (text === undefined) {
    const who = { mlx: 'mlx_lm', bitsandbytes: 'transformers', modelopt: 'vLLM' };
    warnings.push(`no config.json beside the input: ${dir} holds the weights${rc.runtime ? ` (${who[rc.runtime]} needs a config.json with its quantization entry to load them)` : ''} and the tokenizer files only`);
  } else {
    let config: Record<string, unknown>;
    try {
      config = JSON.parse(text);
    } catch (e) {
      return fail(ErrorCodes.CONFIG, `[cli] ${input.configFile}: not JSON: ${(e as Error).message}`, { file: input.configFile });
    }
    rc = runtimeConfig(config, tensors);
    await writeFileAtomic(join(dir, 'config.json'), [new TextEncoder().encode(JSON.stringify(rc.config ?? config, null, 2) + '\n')]);
    written.push('config.json');
  }
  warnings.push(...rc.warnings);
  const files = await input.tokenizerFiles();
  for (const name of TOKENIZER_FILE_NAMES) {
    const src = files[name];
    if (!src) continue;
    await writeFileAtomic(join(dir, name), [await src.read(0, await src.size())]);
    written.push(name);
  }
  notes.push(`${dir}: ${written.join(', ')}`);
  if (rc.runtime === 'mlx') notes.push(`config.json "quantization": ${JSON.stringify(rc.config!.quantization)} (mlx_lm.load reads it)`);
  if (rc.runtime === 'bitsandbytes') {
    const qc = rc.config!.quantization_config as { load_in_8bit: boolean; bnb_4bit_quant_type: string };
    notes.push(`config.json "quantization_config": bitsandbytes ${qc.load_in_8bit ? 'LLM.int8' : qc.bnb_4bit_quant_type} (transformers' from_pretrained reads it)`);
  }
  if (rc.runtime === 'modelopt') {
    const qc = rc.config!.quantization_config as { quant_algo: string; ignore: string[] };
    notes.push(`config.json "quantization_config": ModelOpt ${qc.quant_algo}, ${qc.ignore.length} linear module${qc.ignore.length === 1 ? '' : 's'} left unquantized (vLLM and SGLang read it)`);
  }
  return notes;
}
