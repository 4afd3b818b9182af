// The webquant command line (Node only). `main(argv, io)` runs one command and returns its exit
// code: 0 success, 2 bad input (unknown command or option, unreadable or malformed files, plans
// with errors), 1 runtime failure, 130 interrupted. bin/webquant.js calls it with process I/O.
import { readFileSync } from 'node:fs';
import { ErrorCodes, WebquantError, type ErrorCode } from '../errors.js';
import { listPresets, PRESET_ALIASES } from '../plan/presets.js';
import { resolvePlan } from '../plan/plan.js';
import { estimatePlan } from '../plan/estimate.js';
import { syntheticModel } from '../plan/recommend.js';
import { helpText, parseArgs, type OptionSpecs, type Parsed } from './args.js';
import { inspectCommand } from './inspect.js';
import { fmtNum, processIO, table, toJSON, type CliIO } from './io.js';
import { quantizeCommand } from './quantize.js';
import { sampleCommand } from './sample.js';
import { absPath } from './input.js';
import { evalCommand, EVAL_OPTIONS } from './eval.js';
import { imatrixCommand, IMATRIX_OPTIONS } from './imatrix-command.js';

export type { CliIO, Output } from './io.js';

/** Failures of the machine or the run rather than of what the user asked for. */
const RUNTIME: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  ErrorCodes.WASM_LOAD, ErrorCodes.WORKER, ErrorCodes.WORKER_CRASHED, ErrorCodes.CACHE, ErrorCodes.ABORTED,
]);

/** Exit code of an error: 2 for what the user can fix in the command or its files, 1 otherwise. */
export function exitCodeOf(e: unknown, outputs: readonly string[] = []): number {
  if (!(e instanceof WebquantError)) return 1;
  if (e.code === ErrorCodes.ABORTED) return 130;
  if (RUNTIME.has(e.code)) return 1;
  // I/O errors while writing the output (disk full, permissions) are runtime failures.
  if (e.code === ErrorCodes.IO && typeof e.details.file === 'string' && outputs.some((o) => e.details.file!.startsWith(o))) return 1;
  return 2;
}

const QUANTIZE_OPTIONS: OptionSpecs = {
  output: { type: 'string', short: 'o', value: 'file', help: 'output file: .gguf or .safetensors (the container follows the extension), or a folder (ending in /): model.safetensors with config.json and the tokenizer files, as MLX and transformers load a model' },
  preset: { type: 'string', short: 'p', value: 'name', help: 'a preset (see `webquant presets`)' },
  format: { type: 'string', short: 'f', value: 'format', help: 'one format for every weight matrix (q8_0, q4_k, int4, nf4, ...)' },
  'group-size': { type: 'int', value: 'n', help: 'group size, with --format' },
  bits: { type: 'int', value: 'n', help: 'bits, with --format (intsym, affine)' },
  'scale-dtype': { type: 'string', value: 'bf16|f16|f32', help: 'scale and bias dtype, with --format mlx (default bf16)' },
  'double-quant': { type: 'boolean', help: 'double quantization of the block absmax values, with --format nf4, fp4, bnb_nf4, bnb_fp4' },
  calibration: { type: 'string', value: 'c', help: 'calibration with --format: a name (mse, hqq, ...), "clip,0.9", or JSON' },
  rules: { type: 'string', value: 'plan.json', help: 'a plan file (webquant or MaxText form); with --preset/--format its rules come first' },
  'tensor-type': { type: 'list', value: 'regex=format', help: "as llama-quantize's: tensors whose name (the output's) matches the regex get the format; repeatable, the first match wins, before every other rule" },
  'tensor-type-file': { type: 'list', value: 'file', help: 'a file of --tensor-type values separated by spaces or newlines, taken where it stands among the --tensor-type options' },
  'output-tensor-type': { type: 'string', value: 'format', help: 'format of the output head (and of a tied token embedding), as llama-quantize\'s' },
  'token-embedding-type': { type: 'string', value: 'format', help: "format of the token embedding, as llama-quantize's" },
  'leave-output-tensor': { type: 'boolean', help: "keep the output head as stored (llama-quantize's; a tied token embedding is still quantized)" },
  'include-weights': { type: 'list', value: 'name', help: "with --imatrix: use only the entries whose names contain this (llama-quantize's; repeatable)" },
  'exclude-weights': { type: 'list', value: 'name', help: "with --imatrix: drop the entries whose names contain this (llama-quantize's; repeatable)" },
  'override-kv': { type: 'list', value: 'KEY=TYPE:VALUE', help: "GGUF metadata to set, as llama-quantize's: TYPE int (written u32), float (f32), bool or str; repeatable" },
  'model-name': { type: 'string', value: 'name', help: "Hugging Face input to GGUF: general.name, over a --metadata file's (convert_hf_to_gguf.py's --model-name)" },
  metadata: { type: 'string', value: 'file.json', help: "Hugging Face input to GGUF: general.* keys that replace the derived ones (name, author, sampling defaults, tags, base models, ...), as convert_hf_to_gguf.py's --metadata" },
  pure: { type: 'boolean', help: "drop the preset's mixture rules: every weight in its default format (llama-quantize's --pure; the options above still apply)" },
  'prune-layers': { type: 'string', value: 'L0,L1,...', help: "GGUF output without these blocks (blk.N), the later ones renumbered and the block count set (llama-quantize's)" },
  'allow-requantize': { type: 'boolean', help: "no warning for tensors stored quantized and quantized again (llama-quantize's; it refuses them without)" },
  'dry-run': { type: 'boolean', help: "plan, sizes and file names only: no weight is read, no file written (llama-quantize's)" },
  'keep-split': { type: 'boolean', help: "a split GGUF input gives an output split the same way (llama-quantize's): <out>-00001-of-0000N.gguf, ..." },
  'split-max-tensors': { type: 'int', value: 'n', help: 'GGUF output in files of at most n tensors (<out>-00001-of-0000N.gguf, ..., as llama-gguf-split writes them)' },
  'split-max-size': { type: 'string', value: 'N(M|G)', help: 'GGUF output in files of at most this much tensor data (decimal megabytes / gigabytes, as llama-gguf-split)' },
  'no-tensor-first-split': { type: 'boolean', help: "with a split output: the first file holds the metadata only (llama-gguf-split's)" },
  strict: { type: 'boolean', help: 'fail instead of falling back when a block size does not divide a row' },
  workers: { type: 'int', short: 'j', value: 'n', help: 'worker threads (default: number of cores)' },
  budget: { type: 'string', value: 'MiB', help: 'memory for tensor data read and not yet written (default 256); larger tensors go through in row chunks' },
  imatrix: { type: 'string', value: 'file', help: "llama.cpp importance matrix (imatrix.dat or imatrix .gguf)" },
  activations: { type: 'string', value: 'file.u16', help: "calibration tokens (little-endian uint16 ids) for nvfp4 weights' input scales: the model runs on them and each weight gets ModelOpt's input_scale (W4A4)" },
  'activation-chunks': { type: 'int', value: 'n', help: 'with --activations, use the first n chunks only' },
  'activation-context': { type: 'int', value: 'n', help: 'with --activations, tokens per chunk (default 512)' },
  gpu: { type: 'boolean', help: "a WebGPU lane beside the workers (Node's webgpu package); same bytes; an error without a GPU" },
  fsync: { type: 'boolean', help: 'flush the output to disk before renaming it into place (survives a power loss right after; waits for the disk)' },
  tokenizer: { type: 'string', value: 'path|none', help: 'GGUF from safetensors: tokenizer.json / tokenizer.model / llama2.c .bin, or their folder; "none" for no vocabulary (default: files beside the input)' },
  'tokenizer-pre': { type: 'string', value: 'name', help: "llama.cpp BPE pre-tokenizer (tokenizer.ggml.pre) when the tokenizer's is not recognised" },
  json: { type: 'boolean', help: 'one JSON report on stdout; progress as JSON lines on stderr' },
  help: { type: 'boolean', short: 'h', help: 'show this help' },
};

const INSPECT_OPTIONS: OptionSpecs = {
  json: { type: 'boolean', help: 'JSON report on stdout' },
  all: { type: 'boolean', help: 'list every tensor' },
  help: { type: 'boolean', short: 'h', help: 'show this help' },
};

const PRESETS_OPTIONS: OptionSpecs = {
  json: { type: 'boolean', help: 'JSON on stdout' },
  help: { type: 'boolean', short: 'h', help: 'show this help' },
};

const SAMPLE_OPTIONS: OptionSpecs = {
  json: { type: 'boolean', help: 'JSON report on stdout' },
  workers: { type: 'int', short: 'j', value: 'n', help: 'worker threads' },
  help: { type: 'boolean', short: 'h', help: 'show this help' },
  version: { type: 'boolean', short: 'v', help: 'print the version' },
};

interface Command {
  usage: string;
  summary: string;
  options: OptionSpecs;
  run(positionals: string[], o: Parsed['options'], io: CliIO, sequence: Parsed['sequence']): Promise<unknown>;
}

function version(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

function needOne(cmd: string, pos: string[], what: string): string {
  if (pos.length !== 1) {
    throw new WebquantError(ErrorCodes.BAD_OPTION, `[cli] ${cmd}: expected one ${what} but got ${pos.length ? pos.map((p) => `"${p}"`).join(' ') : 'none'}; see \`webquant ${cmd} --help\``, { value: pos, expected: what });
  }
  return pos[0];
}

const str = (v: unknown) => (v === undefined ? undefined : String(v));
const num = (v: unknown) => (v === undefined ? undefined : Number(v));

function presetsReport() {
  // Bits per weight on a 7B Llama-shaped tensor list (a model size most users know).
  const model = syntheticModel(7e9);
  return listPresets().map((p) => {
    const r = resolvePlan(p.plan, model);
    const est = r.ok ? estimatePlan(r) : undefined;
    return { name: p.name, container: p.container, fileType: p.fileType, bpw: est?.bpw, description: p.description };
  });
}

const COMMANDS: Record<string, Command> = {
  inspect: {
    usage: 'webquant inspect <file|dir|url> [--json] [--all]',
    summary: 'tensors, roles, metadata, config.json and the size of every preset',
    options: INSPECT_OPTIONS,
    async run(pos, o, io) {
      const r = await inspectCommand({ input: needOne('inspect', pos, 'checkpoint'), json: !!o.json, all: !!o.all }, io);
      if (o.json) io.stdout.write(toJSON(r, 2) + '\n');
    },
  },
  quantize: {
    usage: 'webquant quantize <in> -o <out.gguf|out.safetensors|folder/> [--preset P | --format F [--group-size N --bits N --calibration C --scale-dtype D --double-quant]] [--rules plan.json] [--tensor-type regex=type ...] [--tensor-type-file file ...] [--output-tensor-type T] [--token-embedding-type T] [--leave-output-tensor] [--pure] [--override-kv KEY=TYPE:VALUE ...] [--metadata file.json] [--model-name name] [--prune-layers L0,L1,...] [--allow-requantize] [--dry-run] [--keep-split | --split-max-tensors N | --split-max-size N(M|G)] [--no-tensor-first-split] [--strict] [--workers N] [--budget MiB] [--gpu] [--fsync] [--imatrix file [--include-weights name ...] [--exclude-weights name ...]] [--activations file.u16 [--activation-chunks N] [--activation-context N]] [--tokenizer path|none] [--tokenizer-pre name] [--json]',
    summary: 'quantize a checkpoint (file, sharded index, directory or URL) into GGUF or safetensors',
    options: QUANTIZE_OPTIONS,
    async run(pos, o, io, seq) {
      const input = needOne('quantize', pos, 'input checkpoint');
      if (o.output === undefined || String(o.output).trim() === '') throw new WebquantError(ErrorCodes.BAD_OPTION, '[cli] quantize: -o <output> is required (.gguf, .safetensors or a folder/)', { option: 'output' });
      const r = await quantizeCommand({
        input, output: String(o.output), preset: str(o.preset), format: str(o.format), groupSize: num(o['group-size']), bits: num(o.bits),
        calibration: str(o.calibration), scaleDtype: str(o['scale-dtype']), doubleQuant: o['double-quant'] === true ? true : undefined, rulesFile: str(o.rules),
        tensorTypes: seq.filter((x) => x.name === 'tensor-type' || x.name === 'tensor-type-file').map((x) => (x.name === 'tensor-type' ? x.value : { file: x.value })), outputTensorType: str(o['output-tensor-type']), tokenEmbeddingType: str(o['token-embedding-type']),
        leaveOutputTensor: o['leave-output-tensor'] === true ? true : undefined, pure: o.pure === true ? true : undefined, overrideKv: o['override-kv'] as string[] | undefined, metadataFile: str(o.metadata), modelName: str(o['model-name']),
        includeWeights: o['include-weights'] as string[] | undefined, excludeWeights: o['exclude-weights'] as string[] | undefined,
        keepSplit: o['keep-split'] === true ? true : undefined, splitMaxTensors: num(o['split-max-tensors']), splitMaxSize: str(o['split-max-size']), noTensorFirstSplit: o['no-tensor-first-split'] === true ? true : undefined, pruneLayers: str(o['prune-layers']), dryRun: o['dry-run'] === true ? true : undefined, allowRequantize: o['allow-requantize'] === true ? true : undefined,
        strict: !!o.strict, workers: num(o.workers), budget: str(o.budget), imatrix: str(o.imatrix),
        activations: str(o.activations), activationChunks: num(o['activation-chunks']), activationContext: num(o['activation-context']), gpu: !!o.gpu, fsync: !!o.fsync, tokenizer: str(o.tokenizer), tokenizerPre: str(o['tokenizer-pre']), json: !!o.json,
      }, io);
      if (o.json) io.stdout.write(toJSON(r) + '\n');
    },
  },
  presets: {
    usage: 'webquant presets [--json]',
    summary: 'the built-in presets with their bits per weight',
    options: PRESETS_OPTIONS,
    async run(pos, o, io) {
      if (pos.length) throw new WebquantError(ErrorCodes.BAD_OPTION, `[cli] presets takes no arguments but got "${pos[0]}"`, { value: pos });
      const list = presetsReport();
      if (o.json) { io.stdout.write(toJSON(list, 2) + '\n'); return; }
      io.stdout.write(table(['preset', 'container', 'bpw*', 'description'], list.map((p) => [p.name, p.container, fmtNum(p.bpw, 2), p.description.length > 100 ? `${p.description.slice(0, 97)}...` : p.description]), [2]));
      io.stdout.write(`\naliases (as llama-quantize names them): ${Object.entries(PRESET_ALIASES).map(([a, p]) => `${a} = ${p}`).join(', ')}\n`);
      io.stdout.write('\n* bits per weight over all tensors of a 7B Llama-shaped model (norms included); `webquant inspect <model>` gives the figures for a real checkpoint.\n');
    },
  },
  eval: {
    usage: 'webquant eval --model <original> --quantized <quantized> --tokens <file.u16> [--max-docs N] [--context N] [--workers N] [--json]',
    summary: 'next-token NLL, KL divergence, top-1 agreement and per-layer error of a quantized checkpoint against its original',
    options: EVAL_OPTIONS,
    async run(pos, o, io) {
      if (pos.length) throw new WebquantError(ErrorCodes.BAD_OPTION, `[cli] eval takes options only but got "${pos[0]}"`, { value: pos });
      await evalCommand(o, io);
    },
  },
  imatrix: {
    usage: 'webquant imatrix --model <original> --tokens <file.u16> -o <imatrix.gguf> [--chunks N] [--context N] [--process-output] [--workers N] [--json]',
    summary: "an importance matrix from calibration tokens, in llama.cpp's GGUF imatrix format (for quantize --imatrix)",
    options: IMATRIX_OPTIONS,
    async run(pos, o, io) {
      if (pos.length) throw new WebquantError(ErrorCodes.BAD_OPTION, `[cli] imatrix takes options only but got "${pos[0]}"`, { value: pos });
      await imatrixCommand(o, io);
    },
  },
};

function usage(): string {
  const cmds = Object.entries(COMMANDS).map(([n, c]) => `  ${n.padEnd(10)} ${c.summary}`).join('\n');
  return `webquant ${version()}: quantize LLM checkpoints (GGUF bit-exact with llama.cpp, NF4/FP4/FP8/MXFP4, int)\n\n` +
    `Usage: webquant <command> [options]\n\n${cmds}\n\n` +
    `With no command, webquant writes a small sample model to ./webquant-sample/ and quantizes it (q4_k_m).\n` +
    `\`webquant <command> --help\` lists a command's options. Set WEBQUANT_DEBUG=1 for stack traces.\n`;
}

function report(e: unknown, io: CliIO, debug: boolean): void {
  if (e instanceof WebquantError) {
    io.stderr.write(`webquant: ${e.message.split('\n')[0]} (${e.code})\n`);
  } else {
    io.stderr.write(`webquant: internal error: ${(e as Error)?.message ?? String(e)}\n`);
  }
  if (debug) io.stderr.write(`${(e as Error)?.stack ?? String(e)}\n`);
}

export async function main(argv: readonly string[], io: CliIO = processIO()): Promise<number> {
  const debug = (io.env ?? {}).WEBQUANT_DEBUG === '1';
  const outputs: string[] = [absPath('webquant-sample', io)];
  try {
    const [cmd, ...rest] = argv;
    if (cmd === undefined || cmd.startsWith('-')) {
      const { options: o, positionals } = parseArgs('webquant', argv, SAMPLE_OPTIONS);
      if (positionals.length) throw new WebquantError(ErrorCodes.BAD_OPTION, `[cli] unknown command "${positionals[0]}"; valid commands: ${Object.keys(COMMANDS).join(', ')}`, { value: positionals[0], expected: Object.keys(COMMANDS) });
      if (o.help) { io.stdout.write(usage()); return 0; }
      if (o.version) { io.stdout.write(`${version()}\n`); return 0; }
      const r = await sampleCommand(io, { json: !!o.json, workers: num(o.workers) });
      if (o.json) io.stdout.write(toJSON(r) + '\n');
      return 0;
    }
    if (cmd === 'help') {
      const h = rest[0] !== undefined && Object.hasOwn(COMMANDS, rest[0]) ? COMMANDS[rest[0]] : undefined;
      io.stdout.write(h ? helpText(`Usage: ${h.usage}\n\n${h.summary}`, h.options) : usage());
      return 0;
    }
    if (cmd === 'version') { io.stdout.write(`${version()}\n`); return 0; }
    const c = Object.hasOwn(COMMANDS, cmd) ? COMMANDS[cmd] : undefined;
    if (!c) {
      throw new WebquantError(ErrorCodes.BAD_OPTION, `[cli] unknown command "${cmd}"; valid commands: ${Object.keys(COMMANDS).join(', ')} (or none, for the sample run)`, { value: cmd, expected: Object.keys(COMMANDS) });
    }
    const { positionals, options, sequence } = parseArgs(cmd, rest, c.options);
    if (options.help) { io.stdout.write(helpText(`Usage: ${c.usage}\n\n${c.summary}`, c.options)); return 0; }
    if ((cmd === 'quantize' || cmd === 'imatrix') && typeof options.output === 'string') {
      const out = absPath(options.output, io);
      // A split output's files are <prefix>-0000i-of-0000n.gguf.
      outputs.push(out, out.replace(/\.gguf$/i, '-'));
    }
    await c.run(positionals, options, io, sequence);
    return 0;
  } catch (e) {
    report(e, io, debug);
    // --json callers parse stdout: they get the failure there too.
    if (argv.includes('--json')) {
      const err = e instanceof WebquantError ? { code: e.code, message: e.message, details: e.details } : { code: 'E_INTERNAL', message: (e as Error)?.message ?? String(e) };
      io.stdout.write(toJSON({ error: err }) + '\n');
    }
    return exitCodeOf(e, outputs);
  }
}

