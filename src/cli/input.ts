// Opening what the user names on the command line: a .safetensors or .gguf file, a sharded
// checkpoint (its model.safetensors.index.json or the directory holding it), a directory with one
// checkpoint, or an http(s) URL read with range requests. config.json beside the input is read
// when present; tokenizer files beside it are looked for when a GGUF is written.
import { readdir, readFile, stat } from 'node:fs/promises';
import { basename, dirname, extname, isAbsolute, join, resolve } from 'node:path';
import { ErrorCodes, fail, WebquantError } from '../errors.js';
import type { Checkpoint } from '../io/checkpoint.js';
import { readConfig, safetensorsOptions, type ModelConfig } from '../io/config.js';
import { fromPath, type FileSource } from '../io/node.js';
import { openCheckpoint } from '../io/open.js';
import { isLaterGgufSplit } from '../io/gguf.js';
import { openSafetensorsIndex } from '../io/safetensors.js';
import { fromBuffer, fromUrl, type ByteSource } from '../io/source.js';
import type { CliIO } from './io.js';
import { BESIDE_FILE_NAMES, TOKENIZER_FILE_NAMES, type BesideFileName, type TokenizerFiles } from '../convert/tokenizer-files.js';
import { openUrlCheckpoint, tokenizerFilesBesideUrl } from '../pipeline/prepare.js';

export interface OpenedInput {
  checkpoint: Checkpoint;
  /** What the user gave, and the resolved file (or URL) read. */
  spec: string;
  file: string;
  /** Local directory of the input (undefined for URLs). */
  dir?: string;
  config?: ModelConfig;
  configFile?: string;
  /** config.json exists but could not be read: only commands that need it fail with this. */
  configError?: WebquantError;
  /** The files beside the input (`names`, by default all of BESIDE_FILE_NAMES). */
  tokenizerFiles(names?: readonly BesideFileName[]): Promise<TokenizerFiles>;
  /** Bytes of the input file(s), when known. */
  size?: number;
  close(): Promise<void>;
}

export const isUrl = (s: string) => /^https?:\/\//i.test(s);

export function absPath(p: string, io: CliIO): string {
  return isAbsolute(p) ? p : resolve(io.cwd ?? process.cwd(), p);
}

async function exists(p: string): Promise<'file' | 'dir' | 'other' | undefined> {
  try {
    const s = await stat(p);
    return s.isDirectory() ? 'dir' : s.isFile() ? 'file' : 'other';
  } catch {
    return undefined;
  }
}

/** Refuses a path that is missing, or neither a file nor a folder (a device, a pipe: no size to read by range). */
function needPath(what: string, p: string, kind: Awaited<ReturnType<typeof exists>>): asserts kind is 'file' | 'dir' {
  if (!kind) notFound(what, p);
  if (kind === 'other') fail(ErrorCodes.BAD_INPUT, `[cli] ${what} ${p} is not a regular file or a folder`, { file: p, expected: 'a file or a folder' });
}

function notFound(what: string, p: string): never {
  return fail(ErrorCodes.IO, `[cli] ${what} ${p} does not exist`, { file: p, value: 'ENOENT' });
}

/** The checkpoint file of a directory: a sharded index, model.safetensors, or its only checkpoint. */
async function pickInDir(dir: string): Promise<string> {
  for (const f of ['model.safetensors.index.json', 'model.safetensors']) if ((await exists(join(dir, f))) === 'file') return join(dir, f);
  const files = (await readdir(dir)).filter((f) => /\.(safetensors|gguf)$|\.safetensors\.index\.json$/.test(f)).sort();
  const idx = files.filter((f) => f.endsWith('.index.json'));
  // Shards are not checkpoints of their own; a split GGUF is opened by its first file.
  const pick = idx.length === 1 ? idx : files.filter((f) => !/-\d+-of-\d+\.safetensors$/.test(f) && !isLaterGgufSplit(f));
  if (pick.length !== 1) {
    fail(ErrorCodes.BAD_INPUT, `[cli] ${dir}: ${pick.length ? `several checkpoints (${pick.join(', ')}); name one` : 'no .safetensors, .gguf or model.safetensors.index.json in this directory'}`, {
      file: dir, value: pick, expected: 'one checkpoint file',
    });
  }
  return join(dir, pick[0]);
}

export async function openInput(spec: string, io: CliIO): Promise<OpenedInput> {
  if (isUrl(spec)) return openUrl(spec, io);
  let file = absPath(spec, io);
  const kind = await exists(file);
  needPath('input', spec, kind);
  if (kind === 'dir') file = await pickInDir(file);
  const dir = dirname(file);
  const sources: FileSource[] = [];
  const src = (p: string) => { const s = fromPath(p); sources.push(s); return s; };
  const close = async () => { await Promise.all(sources.map((s) => s.close())); };
  try {
    // config.json first: its FP8 block size (quantization_config) is needed to open the checkpoint.
    const found: Pick<OpenedInput, 'config' | 'configFile' | 'configError'> = {};
    const cfg = join(dir, 'config.json');
    if ((await exists(cfg)) === 'file') {
      found.configFile = cfg;
      try {
        found.config = await readConfig(src(cfg));
      } catch (e) {
        if (!(e instanceof WebquantError)) throw e;
        found.configError = e;
      }
    }
    const opts = safetensorsOptions(found.config);
    let checkpoint: Checkpoint;
    let size: number | undefined;
    if (file.endsWith('.json')) {
      const index = src(file);
      checkpoint = await openSafetensorsIndex(index, async (shard) => {
        const p = join(dir, shard);
        if ((await exists(p)) !== 'file') notFound(`shard ${shard} of`, file);
        return src(p);
      }, opts);
      size = 0;
      for (const s of sources.slice(sources.indexOf(index) + 1)) size += await s.size();
    } else {
      const s = src(file);
      const splits = async (name: string) => {
        const p = join(dir, name);
        if ((await exists(p)) !== 'file') notFound(`split ${name} of`, file);
        return src(p);
      };
      checkpoint = await openCheckpoint(s, { ...opts, splits });
      size = 0;
      for (const f of sources.slice(sources.indexOf(s))) size += await f.size();
    }
    return { checkpoint, spec, file, dir, size, close, tokenizerFiles: (names) => tokenizerFilesIn(dir, names), ...found };
  } catch (e) {
    await close();
    throw e;
  }
}

async function openUrl(url: string, io: CliIO): Promise<OpenedInput> {
  try {
    new URL(url);
  } catch {
    fail(ErrorCodes.BAD_INPUT, `[cli] ${url} is not a valid URL`, { file: url, expected: 'http(s)://host/path' });
  }
  const opts = io.fetch ? { fetch: io.fetch } : {};
  const found: Pick<OpenedInput, 'config' | 'configFile' | 'configError'> = {};
  // config.json beside a URL is optional: any failure to fetch it means there is none.
  const cfgUrl = new URL('config.json', url).toString();
  let cfgSrc: ByteSource | undefined;
  try {
    cfgSrc = fromUrl(cfgUrl, opts);
    await cfgSrc.size();
  } catch (e) {
    if (!(e instanceof WebquantError)) throw e;
    cfgSrc = undefined;
  }
  if (cfgSrc) {
    found.configFile = cfgUrl;
    try {
      found.config = await readConfig(cfgSrc);
    } catch (e) {
      if (!(e instanceof WebquantError)) throw e;
      found.configError = e;
    }
  }
  // Its FP8 block size (quantization_config) is needed to open the checkpoint.
  const { checkpoint, size } = await openUrlCheckpoint(url, safetensorsOptions(found.config), opts);
  return {
    checkpoint, spec: url, file: url, size, close: async () => undefined,
    tokenizerFiles: (names) => tokenizerFilesBesideUrl(url, opts, names), ...found,
  };
}

/** A local file read whole (tokenizer files are small next to a checkpoint, and need no handle kept open). */
async function localSource(p: string): Promise<ByteSource> {
  const bytes = await readFile(p).catch((e) => fail(ErrorCodes.IO, `[cli] cannot read ${p}: ${(e as Error).message}`, { file: p }));
  return fromBuffer(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), p);
}

/** The files `names` (by default all of BESIDE_FILE_NAMES) that are in a directory. */
export async function tokenizerFilesIn(dir: string, names: readonly BesideFileName[] = BESIDE_FILE_NAMES): Promise<TokenizerFiles> {
  const files: TokenizerFiles = {};
  for (const f of names) if ((await exists(join(dir, f))) === 'file') files[f] = await localSource(join(dir, f));
  return files;
}

/**
 * The tokenizer named by --tokenizer: a directory of tokenizer files; a .json file (read as
 * tokenizer.json) or a .model file (tokenizer.model), each with the other files of its directory;
 * any other file is a llama2.c tokenizer (tok512.bin, tokenizer.bin).
 */
export async function tokenizerFilesAt(spec: string, io: CliIO): Promise<TokenizerFiles> {
  const p = absPath(spec, io);
  const kind = await exists(p);
  needPath('tokenizer', spec, kind);
  if (kind === 'dir') {
    const files = await tokenizerFilesIn(p, TOKENIZER_FILE_NAMES);
    if (!files['tokenizer.json'] && !files['tokenizer.model']) {
      fail(ErrorCodes.TOKENIZER, `[cli] --tokenizer ${spec}: the folder holds no tokenizer.json or tokenizer.model (a llama2.c tokenizer is named by its file; --tokenizer none writes no vocabulary)`, {
        file: p, option: 'tokenizer', expected: ['tokenizer.json', 'tokenizer.model'],
      });
    }
    return files;
  }
  const ext = extname(p).toLowerCase();
  if (ext === '.json' || ext === '.model') {
    const files = await tokenizerFilesIn(dirname(p), TOKENIZER_FILE_NAMES);
    const main = ext === '.json' ? 'tokenizer.json' : 'tokenizer.model';
    // The named file replaces (and rules out) the other main file of the folder.
    delete files['tokenizer.json'];
    delete files['tokenizer.model'];
    files[main] = await localSource(p);
    return files;
  }
  return { llama2c: await localSource(p) };
}

export function baseName(p: string): string {
  return basename(p.split('?')[0]);
}
