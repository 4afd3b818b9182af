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
import { parseJson } from '../io/json.js';
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
  if (!made && !(await stat(dir).then((st) => st.isDirectory(), () => false))) {
    fail(ErrorCodes.BAD_OPTION, `[cli] quantize: the output folder ${dir} is a file; name a folder (or a .gguf / .safetensors file without the trailing /)`, { file: dir, option: 'output', value: dir, expected: 'a folder' });
  }
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

/** The files beside the model, read and checked before the model is written (folderFiles). */
export interface FolderFiles {
  files: { name: string; bytes: Uint8Array }[];
  notes: string[];
  warnings: string[];
}

/**
 * config.json (with the output's quantization entry) and the tokenizer files for the folder, read
 * before the pipeline runs: a bad config.json then stops the run before model.safetensors lands.
 */
export async function folderFiles(dir: string, input: OpenedInput, tensors: readonly PlannedTensor[], io: CliIO): Promise<FolderFiles> {
  const notes: string[] = [];
  const warnings: string[] = [];
  const files: FolderFiles['files'] = [];
  const text = await configText(input, io);
  let rc = runtimeConfig({}, tensors);
  if (text === undefined) {
    const who = { mlx: 'mlx_lm', bitsandbytes: 'transformers', modelopt: 'vLLM' };
    warnings.push(`no config.json beside the input: ${dir} holds the weights${rc.runtime ? ` (${who[rc.runtime]} needs a config.json with its quantization entry to load them)` : ''} and the tokenizer files only`);
  } else {
    let config: unknown;
    try {
      config = parseJson(text);
    } catch (e) {
      return fail(ErrorCodes.CONFIG, `[cli] ${input.configFile}: not JSON: ${(e as Error).message}`, { file: input.configFile });
    }
    if (typeof config !== 'object' || config === null || Array.isArray(config)) {
      fail(ErrorCodes.CONFIG, `[cli] ${input.configFile}: not a JSON object`, { file: input.configFile, expected: 'a JSON object' });
    }
    rc = runtimeConfig(config as Record<string, unknown>, tensors);
    files.push({ name: 'config.json', bytes: new TextEncoder().encode(JSON.stringify(rc.config ?? config, null, 2) + '\n') });
  }
  warnings.push(...rc.warnings);
  const tok = await input.tokenizerFiles(TOKENIZER_FILE_NAMES);
  // The model card describes the original weights, not this conversion: only the tokenizer's files.
  for (const name of TOKENIZER_FILE_NAMES) {
    const src = tok[name];
    if (src) files.push({ name, bytes: await src.read(0, await src.size()) });
  }
  notes.push(`${dir}: ${[MODEL_FILE, ...files.map((f) => f.name)].join(', ')}`);
  if (rc.runtime === 'mlx') notes.push(`config.json "quantization": ${JSON.stringify(rc.config!.quantization)} (mlx_lm.load reads it)`);
  if (rc.runtime === 'bitsandbytes') {
    const qc = rc.config!.quantization_config as { load_in_8bit: boolean; bnb_4bit_quant_type: string };
    notes.push(`config.json "quantization_config": bitsandbytes ${qc.load_in_8bit ? 'LLM.int8' : qc.bnb_4bit_quant_type} (transformers' from_pretrained reads it)`);
  }
  if (rc.runtime === 'modelopt') {
    const qc = rc.config!.quantization_config as { quant_algo: string; ignore: string[] };
    notes.push(`config.json "quantization_config": ModelOpt ${qc.quant_algo}, ${qc.ignore.length} linear module${qc.ignore.length === 1 ? '' : 's'} left unquantized (vLLM and SGLang read it)`);
  }
  return { files, notes, warnings };
}

/** Writes the files beside the model in `dir`, each atomically. */
export async function writeFolderFiles(dir: string, f: FolderFiles): Promise<void> {
  for (const { name, bytes } of f.files) await writeFileAtomic(join(dir, name), [bytes]);
}
