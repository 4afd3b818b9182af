// `webquant quantize <in> -o <out>`: a checkpoint through the streaming pipeline into a GGUF or
// safetensors file, written atomically (nothing is left at <out> after a failure).
import { readFile, rmdir, stat } from 'node:fs/promises';
import { basename, dirname, extname, join } from 'node:path';
import { ErrorCodes, fail } from '../errors.js';
import { ggufTwinHint } from '../formats/registry.js';
import { fromPath } from '../io/node.js';
import { planOutput, quantizeCheckpoint, type ProgressEvent, type TensorReport } from '../pipeline/pipeline.js';
import { chooseContainer, hfSideFiles, keepStoredTypes } from '../pipeline/prepare.js';
import { MODEL_CARD } from '../convert/tokenizer-files.js';
import { fileSink, splitFileSink, splitPaths } from '../pipeline/sink-node.js';
import { writesSplit, type Container } from '../pipeline/container.js';
import type { Checkpoint } from '../io/checkpoint.js';
import type { PlanChoice } from './plan.js';
import { asValues } from '../serve/as-values.js';
import { resolvePlan, schemeLabel } from '../plan/plan.js';
import type { PlannedTensor, ResolvedPlan } from '../plan/types.js';
import { importanceFor, imatrixMetadata, readImatrix, type Imatrix } from '../io/imatrix.js';
import { modeloptQuantizationConfig } from '../io/runtime-config.js';
import { activationAmax, withInputScales } from '../eval/activations.js';
import { imatrixChunks } from '../eval/imatrix.js';
import { llamaConfig } from '../eval/config.js';
import { quantizedWeights } from '../eval/quantized.js';
import { readTokenFile } from './eval.js';
import { absPath, baseName, isUrl, openInput, tokenizerFilesAt, type OpenedInput } from './input.js';
import { fmtBytes, fmtNum, fmtSci, table, type CliIO } from './io.js';
import { choosePlan, type PlanArgs } from './plan.js';
import { parsePruneLayers } from '../convert/prune-layers.js';
import type { MetadataOverride } from '../convert/general-metadata.js';
import { isJsonObject, parseJson } from '../io/json.js';
import { expandTensorTypes, parseKvOverride, renameEntries, requantized, selectWeights, splitOption } from './quantize-options.js';
import { checkPoolSize } from '../pipeline/pool.js';
import { MODEL_FILE, folderFiles, folderOutput, prepareFolder, writeFolderFiles } from './hf-dir.js';

export interface QuantizeArgs extends Omit<PlanArgs, 'rules' | 'tensorTypes'> {
  input: string;
  /** --tensor-type values and --tensor-type-file files (their whitespace-separated values), in command-line order. */
  tensorTypes?: (string | { file: string })[];
  /** A plan file (--rules). */
  rulesFile?: string;
  output: string;
  strict?: boolean;
  workers?: number;
  /** --budget: MiB of tensor data read and not yet written (the pipeline's maxInFlightBytes). */
  budget?: string | number;
  imatrix?: string;
  /** --activations: calibration tokens for the input scales of nvfp4 weights (W4A4), with their chunk count and length. */
  activations?: string;
  activationChunks?: number;
  activationContext?: number;
  /** --gpu: run the pipeline's WebGPU lane beside the workers (backend 'webgpu'). */
  gpu?: boolean;
  /** --fsync: flush the output to disk before the rename (fileSink's `durable`). */
  fsync?: boolean;
  /** --tokenizer: a tokenizer file or folder, or 'none' (default: the files beside the input). */
  tokenizer?: string;
  /** --tokenizer-pre: tokenizer.ggml.pre for a byte-level BPE tokenizer. */
  tokenizerPre?: string;
  /** --override-kv KEY=TYPE:VALUE (repeatable), as llama-quantize's. */
  overrideKv?: string[];
  /** --metadata: convert_hf_to_gguf.py's metadata override file (JSON of general.* keys). */
  metadataFile?: string;
  /** --model-name: general.name, set after the metadata file (convert_hf_to_gguf.py's). */
  modelName?: string;
  /** --include-weights / --exclude-weights (repeatable): imatrix entries whose names contain one of these are kept / dropped. */
  includeWeights?: string[];
  excludeWeights?: string[];
  /** --keep-split: a split GGUF input gives an output split the same way. */
  keepSplit?: boolean;
  /** --split-max-tensors / --split-max-size (N followed by M or G) / --no-tensor-first-split: a split GGUF output. */
  splitMaxTensors?: number;
  splitMaxSize?: string;
  noTensorFirstSplit?: boolean;
  /** --prune-layers L0,L1,...: blocks dropped from a GGUF output, the rest renumbered (llama-quantize's). */
  pruneLayers?: string;
  /** --allow-requantize: no warning for tensors quantized again (llama-quantize refuses them without it). */
  allowRequantize?: boolean;
  /** --dry-run: plan, sizes and file names without reading a weight or writing a file (llama-quantize's). */
  dryRun?: boolean;
  json?: boolean;
}

export interface RoleSummary {
  role: string;
  tensors: number;
  quantized: number;
  bytesIn: number;
  bytesOut: number;
  /** Over the quantized tensors of the role (undefined when none). */
  rmse?: number;
  sqnrDb?: number;
}

export interface QuantizeReport {
  command: 'quantize';
  input: string;
  output: string;
  /** A split GGUF output: its files, in order (`output` is the first). */
  files?: string[];
  /** --dry-run: nothing was quantized or written; sizes are the planned ones. */
  dryRun?: boolean;
  container: 'gguf' | 'safetensors';
  plan: string;
  fileType?: number;
  tensors: (TensorReport & { role: string; scheme: string })[];
  roles: RoleSummary[];
  totals: RoleSummary & { params: number; bpw: number; fileBytes: number };
  warnings: string[];
  notes: string[];
  elapsedMs: number;
  /** The most bytes that were in memory between reading and writing (the budget's measure). */
  peakInFlightBytes: number;
}

/** Per-role totals; RMSE and SQNR are recombined from each tensor's sums (exact, not averaged). */
export function summarize(tensors: QuantizeReport['tensors']): { roles: RoleSummary[]; total: RoleSummary } {
  const acc = new Map<string, RoleSummary & { se: number; sx: number; n: number }>();
  const total = { role: 'total', tensors: 0, quantized: 0, bytesIn: 0, bytesOut: 0, se: 0, sx: 0, n: 0 };
  for (const t of tensors) {
    let r = acc.get(t.role);
    if (!r) acc.set(t.role, (r = { role: t.role, tensors: 0, quantized: 0, bytesIn: 0, bytesOut: 0, se: 0, sx: 0, n: 0 }));
    for (const x of [r, total]) {
      x.tensors++;
      x.bytesIn += t.bytes;
      x.bytesOut += t.outputBytes;
      if (t.format !== 'keep') x.quantized++;
      const m = t.metrics;
      if (m && m.count > 0) {
        const se = m.rmse * m.rmse * m.count;
        x.se += se;
        x.n += m.count;
        // sqnr = 10 log10(sx / se); an exact reconstruction (se = 0) carries no sx information.
        x.sx += se > 0 && Number.isFinite(m.sqnrDb) ? se * 10 ** (m.sqnrDb / 10) : 0;
      }
    }
  }
  const fin = (x: typeof total): RoleSummary => ({
    role: x.role, tensors: x.tensors, quantized: x.quantized, bytesIn: x.bytesIn, bytesOut: x.bytesOut,
    rmse: x.n ? Math.sqrt(x.se / x.n) : undefined,
    sqnrDb: x.n ? (x.se > 0 ? 10 * Math.log10(x.sx / x.se) : Infinity) : undefined,
  });
  return { roles: [...acc.values()].map(fin), total: fin(total) };
}

export function summaryTable(rep: Pick<QuantizeReport, 'roles' | 'totals'>): string {
  const row = (r: RoleSummary) => [r.role, `${r.quantized}/${r.tensors}`, fmtBytes(r.bytesIn), fmtBytes(r.bytesOut), fmtSci(r.rmse), fmtNum(r.sqnrDb, 1)];
  return table(['role', 'quantized', 'bytes in', 'bytes out', 'RMSE', 'SQNR dB'], [...rep.roles.map(row), row(rep.totals)], [1, 2, 3, 4, 5]);
}

function outputKind(out: string): 'gguf' | 'safetensors' {
  const ext = extname(out).toLowerCase();
  if (ext === '.gguf') return 'gguf';
  if (ext === '.safetensors') return 'safetensors';
  return fail(ErrorCodes.BAD_OPTION, `[cli] quantize: -o must end in .gguf or .safetensors (the container follows the extension) but is "${out}"`, {
    option: 'output', value: out, expected: ['.gguf', '.safetensors'],
  });
}

/** One tensor's line of the plain progress (and of a dry run): position, name, role, format, sizes. */
function tensorLine(i: number, count: number, t: { name: string; role: string; format: string; bytes: number; outputBytes: number }): string {
  return `[${String(i + 1).padStart(String(count).length)}/${count}] ${t.name} (${t.role}) ${t.format} ${fmtBytes(t.bytes)} -> ${fmtBytes(t.outputBytes)}`;
}

/** Progress as a bar on a terminal, one line per tensor otherwise, JSON lines on stderr with --json. */
function progressPrinter(io: CliIO, json: boolean, roles: Map<string, PlannedTensor>) {
  const out = io.stdout;
  let drawn = false;
  return {
    event(e: ProgressEvent) {
      if (json) {
        io.stderr.write(JSON.stringify({ progress: e.type, ...e }) + '\n');
        return;
      }
      if (e.type === 'warning') {
        if (drawn) { out.write('\r\x1b[K'); drawn = false; }
        io.stderr.write(`webquant: warning: ${e.message}\n`);
        return;
      }
      if (e.type !== 'tensor') return;
      const pct = e.bytesTotal ? e.bytesDone / e.bytesTotal : 1;
      if (out.isTTY) {
        const width = Math.max(10, Math.min(30, (out.columns ?? 80) - 60));
        const fill = Math.round(pct * width);
        const eta = e.etaMs !== undefined ? ` ETA ${Math.ceil(e.etaMs / 1000)}s` : '';
        const line = `[${'#'.repeat(fill)}${'.'.repeat(width - fill)}] ${(pct * 100).toFixed(0).padStart(3)}% ${e.index + 1}/${e.count} ${fmtBytes(e.throughput)}/s${eta} ${e.name}`;
        out.write(`\r\x1b[K${line.slice(0, (out.columns ?? 80) - 1)}`);
        drawn = true;
      } else {
        const m = e.metrics ? `  rmse ${fmtSci(e.metrics.rmse)}  sqnr ${fmtNum(e.metrics.sqnrDb, 1)} dB` : '';
        const role = roles.get(e.name)?.role ?? e.role ?? '';
        out.write(`${tensorLine(e.index, e.count, { ...e, role })}${m}\n`);
      }
    },
    end() {
      if (drawn) out.write('\r\x1b[K');
    },
  };
}

async function loadImatrix(path: string, io: CliIO): Promise<Imatrix> {
  const src = fromPath(absPath(path, io));
  try {
    return await readImatrix(src);
  } finally {
    await src.close();
  }
}

/**
 * general.name for a GGUF written from a Hugging Face checkpoint: the directory holding it, or for a
 * URL the repository name of a Hub "resolve" link (…/org/name/resolve/rev/file), else the file stem.
 */
export function modelName(input: Pick<OpenedInput, 'dir' | 'file'>): string {
  if (input.dir) return basename(input.dir);
  const path = new URL(input.file).pathname.split('/').filter(Boolean).map(decodeURIComponent);
  const r = path.indexOf('resolve');
  if (r > 0) return path[r - 1];
  if (path.length > 1) return path[path.length - 2];
  return (path[0] ?? 'model').replace(/\.[^.]*$/, '').replace(/\.safetensors\.index$/, '');
}

/** Plan warnings, with the row-length fallbacks (one per tensor in the plan) grouped by chain. */
export function planWarnings(r: ResolvedPlan): string[] {
  const fellBack = new Map<string, string[]>();
  const out: string[] = [];
  const byName = new Map(r.tensors.map((t) => [t.name, t]));
  for (const p of r.problems) {
    if (p.severity !== 'warning') continue;
    const t = p.tensor !== undefined ? byName.get(p.tensor) : undefined;
    if (t?.fallback) {
      const key = `${schemeLabel(t.fallback.from)} -> ${schemeLabel(t.scheme)}`;
      const list = fellBack.get(key) ?? [];
      list.push(t.name);
      fellBack.set(key, list);
    } else out.push(p.message);
  }
  for (const [chain, names] of fellBack) {
    out.push(`${names.length} tensor${names.length > 1 ? 's' : ''} ${chain} (the row length is not a multiple of the block): ${names.slice(0, 3).join(', ')}${names.length > 3 ? ', ...' : ''}`);
  }
  return out;
}

/** What a runtime loading ModelOpt NVFP4 needs beside a single file: config.json's quantization_config. */
function nvfp4Note(planned: readonly PlannedTensor[]): string {
  const { config } = modeloptQuantizationConfig(planned);
  return `NVFP4 in ModelOpt's layout: runtimes that load it (vLLM, SGLang) take the scheme from config.json's "quantization_config": ${JSON.stringify(config)} (written for you with -o folder/)`;
}

/**
 * --activations: runs the input model on the calibration tokens and gives every nvfp4 weight
 * ModelOpt's input_scale for its input's amax (src/eval/activations.ts).
 */
async function calibrateInputScales(a: QuantizeArgs, input: OpenedInput, tensors: PlannedTensor[], notes: string[], io: CliIO): Promise<PlannedTensor[]> {
  const n = tensors.filter((t) => t.scheme !== 'keep' && t.scheme.format === 'nvfp4').length;
  if (!n) {
    fail(ErrorCodes.BAD_OPTION, '[cli] quantize: --activations sets the input scales of nvfp4 weights, and the plan quantizes none to nvfp4', { option: 'activations', expected: '--format nvfp4 or --preset nvfp4' });
  }
  if (input.configError) throw input.configError;
  if (!input.config || input.checkpoint.format !== 'safetensors') {
    fail(ErrorCodes.BAD_INPUT, `[cli] quantize: --activations runs the model, which needs a Hugging Face safetensors checkpoint with its config.json; ${input.file} is ${input.config ? input.checkpoint.format : 'without config.json'}`, {
      file: input.file, option: 'activations', expected: 'safetensors with config.json',
    });
  }
  const { file, tokens } = await readTokenFile(a.activations!, io);
  const config = llamaConfig(input.config);
  const { ctx, chunks } = imatrixChunks({ tokens, contextLength: a.activationContext, maxChunks: a.activationChunks }, 'activations');
  const amax = await activationAmax({
    config, tokens, contextLength: ctx, maxChunks: chunks, signal: io.signal,
    weights: await quantizedWeights(input.checkpoint, config, { original: input.file }),
    head: tensors.some((t) => t.role === 'output' && t.scheme !== 'keep' && t.scheme.format === 'nvfp4'),
  });
  notes.push(`input scales (amax / 2688) of ${n} nvfp4 weight${n > 1 ? 's' : ''} from ${chunks} chunk${chunks > 1 ? 's' : ''} of ${ctx} tokens of ${basename(file)}`);
  return withInputScales(tensors, amax);
}

/** --budget in MiB (a positive number, fractions allowed) as bytes. */
function budgetBytes(v: string | number): number {
  const mib = typeof v === 'number' ? v : /^\s*[0-9]*\.?[0-9]+(e[+-]?[0-9]+)?\s*$/i.test(v) ? Number(v) : NaN;
  const bytes = Math.floor(mib * 2 ** 20);
  if (!Number.isFinite(mib) || bytes < 1) {
    fail(ErrorCodes.BAD_OPTION, `[cli] quantize: --budget must be a positive number of MiB but is "${v}"`, { option: 'budget', value: v, expected: 'MiB > 0' });
  }
  return bytes;
}

/** Runs a quantization and prints its progress and summary; returns the report. */
export async function quantizeCommand(a: QuantizeArgs, io: CliIO): Promise<QuantizeReport> {
  const json = !!a.json;
  const budget = a.budget === undefined ? undefined : budgetBytes(a.budget);
  if (a.workers !== undefined) checkPoolSize(a.workers, '[cli] quantize: --workers');
  // -o <folder>/: model.safetensors, config.json and the tokenizer files in a folder (hf-dir.ts).
  const folder = await folderOutput(a.output, io);
  const kind = folder ? 'safetensors' : outputKind(a.output);
  const out = folder ? join(folder, MODEL_FILE) : absPath(a.output, io);
  const outDir = dirname(out);
  if (!folder && !(await stat(outDir).then((s) => s.isDirectory(), () => false))) {
    fail(ErrorCodes.BAD_OPTION, `[cli] quantize: the output directory ${outDir} does not exist`, { file: out, option: 'output', value: outDir });
  }
  let rulesText: { text: string; file: string } | undefined;
  if (a.rulesFile !== undefined) {
    const p = absPath(a.rulesFile, io);
    const text = await readFile(p, 'utf8').catch((e) => fail(ErrorCodes.IO, `[cli] cannot read the plan file ${a.rulesFile}: ${(e as Error).message}`, { file: p, option: 'rules' }));
    rulesText = { text, file: a.rulesFile };
  }
  let metadata: MetadataOverride | undefined;
  if (a.metadataFile !== undefined) {
    const p = absPath(a.metadataFile, io);
    const text = await readFile(p, 'utf8').catch((e) => fail(ErrorCodes.IO, `[cli] cannot read the metadata file ${a.metadataFile}: ${(e as Error).message}`, { file: p, option: 'metadata' }));
    let values: unknown;
    try {
      values = parseJson(text);
    } catch (e) {
      fail(ErrorCodes.BAD_INPUT, `[cli] the metadata file ${a.metadataFile} is not JSON: ${(e as Error).message}`, { file: p, option: 'metadata', expected: 'a JSON object of GGUF keys' });
    }
    metadata = { file: a.metadataFile, values: values as Record<string, unknown> };
  }
  // The converter sets --model-name's name after reading the file.
  // (A file that is not a JSON object is left as it is, for generalMetadata to refuse.)
  if (a.modelName !== undefined && (!metadata || isJsonObject(metadata.values))) {
    metadata = { file: metadata?.file ?? '--model-name', values: { ...metadata?.values, 'general.name': a.modelName } };
  }
  const split = splitOption(a, kind);
  const tensorTypes = await expandTensorTypes(a.tensorTypes, io);
  const choice = choosePlan({ ...a, tensorTypes, rules: rulesText });
  if (choice.container && choice.container !== kind) {
    fail(ErrorCodes.BAD_OPTION, `[cli] quantize: ${choice.label} writes ${choice.container}, but -o ${basename(out)} asks for ${kind}; use a .${choice.container} output or another ${choice.preset ? 'preset' : 'format'}${kind === 'gguf' && typeof a.format === 'string' ? ggufTwinHint(a.format) : ''}`, {
      option: 'output', value: a.output, expected: `.${choice.container}`,
    });
  }

  const input: OpenedInput = await openInput(a.input, io);
  let madeFolder = false;
  try {
    if (!isUrl(a.input) && absPath(input.file, io) === out) {
      fail(ErrorCodes.BAD_OPTION, `[cli] quantize: the output ${a.output} is the input; write to another file`, { option: 'output', value: a.output });
    }
    if (input.checkpoint.tensors.length === 0) {
      fail(ErrorCodes.BAD_INPUT, `[cli] quantize: ${a.input} holds no tensors`, { file: input.file, expected: 'a checkpoint with tensors' });
    }
    if (folder && !a.dryRun) madeFolder = await prepareFolder(folder, input);
    const warnings: string[] = [];
    const notes: string[] = [];
    const fileType = choice.fileType;
    if (kind === 'gguf' && input.checkpoint.format !== 'gguf' && input.configError) throw input.configError;
    const wantsVocab = kind === 'gguf' && input.checkpoint.format !== 'gguf';
    // The model card is the input's; --tokenizer replaces the tokenizer files (and
    // generation_config.json, whose ids go with them); none drops the vocabulary only.
    const files = !wantsVocab ? {}
      : a.tokenizer === 'none' ? await input.tokenizerFiles(['generation_config.json', MODEL_CARD])
        : a.tokenizer !== undefined ? { ...await tokenizerFilesAt(a.tokenizer, io), ...await input.tokenizerFiles([MODEL_CARD]) } : await input.tokenizerFiles();
    const side = await hfSideFiles(input.checkpoint, kind, input.config, files, a.tokenizerPre);
    const { vocab, generation, card } = side;
    warnings.push(...side.warnings);
    if (a.imatrix === undefined && (a.includeWeights?.length || a.excludeWeights?.length)) {
      fail(ErrorCodes.BAD_OPTION, '[cli] quantize: --include-weights and --exclude-weights select entries of --imatrix, which is not given', { option: a.includeWeights?.length ? 'include-weights' : 'exclude-weights', expected: '--imatrix <file>' });
    }
    // llama-quantize keeps no imatrix at all when --include-weights / --exclude-weights leave no entry.
    const loaded = a.imatrix !== undefined ? selectWeights(await loadImatrix(a.imatrix, io), a.includeWeights, a.excludeWeights) : undefined;
    const imatrix = loaded?.size ? loaded : undefined;
    // A webquant output is read as its values, so that it can be quantized again.
    const { input: ck, container, tokenizer, pruned, hparams, warnings: cardWarnings } = chooseContainer(await asValues(input.checkpoint), kind, choice, {
      config: input.config, vocab, name: modelName(input), file: baseName(input.file), generation, card,
      ...(imatrix ? { imatrix: imatrixMetadata(a.imatrix!, imatrix) } : {}),
      ...(a.overrideKv?.length ? { overrides: a.overrideKv.map(parseKvOverride) } : {}),
      ...(metadata ? { metadata } : {}),
      split,
      ...(a.pruneLayers !== undefined ? { prune: parsePruneLayers(a.pruneLayers) } : {}),
    });
    warnings.push(...(cardWarnings ?? []));
    if (pruned?.missing.length) warnings.push(`--prune-layers: ${baseName(input.file)} has no block ${pruned.missing.join(', ')}`);
    const splitOut = writesSplit(split, ck);
    if (split?.by === 'input' && !splitOut) notes.push(`--keep-split: ${baseName(input.file)} is not a split GGUF, so the output is one file`);
    if (tokenizer?.kind === 'none') {
      notes.push(a.tokenizer === 'none'
        ? '--tokenizer none: the GGUF has tokenizer.ggml.model = "no_vocab" (llama.cpp loads it; it cannot tokenize text)'
        : 'no tokenizer beside the input: the GGUF has tokenizer.ggml.model = "no_vocab" (llama.cpp loads it; it cannot tokenize text; --tokenizer names one)');
    }
    if (tokenizer?.kind === 'vocab') {
      const v = tokenizer.vocab;
      notes.push(`tokenizer from ${v.source.split(' + ').map(baseName).join(' + ')}: ${v.model}${v.pre ? ` (pre ${v.pre})` : ''}, ${v.tokens.length} tokens${v.merges ? `, ${v.merges.length} merges` : ''}`);
      warnings.push(...v.warnings);
    }
    if (kind === 'gguf' && fileType === undefined) {
      warnings.push(input.checkpoint.format === 'gguf'
        ? 'general.file_type is carried over unchanged: the plan names no llama_ftype (give "fileType" in the plan file)'
        : 'general.file_type = 0 (ALL_F32): the plan names no llama_ftype');
    }

    let resolved = keepStoredTypes(resolvePlan(choice.plan, ck.tensors, { strict: a.strict, importance: imatrix !== undefined, ...hparams, ...(pruned ? { ffnLayers: pruned.blocksBefore } : {}) }), kind);
    warnings.push(...planWarnings(resolved));
    const errors = resolved.problems.filter((p) => p.severity === 'error');
    if (errors.length) {
      fail(ErrorCodes.PLAN, `[plan] ${choice.label}: ${errors.length} error${errors.length > 1 ? 's' : ''}: ${errors.slice(0, 3).map((e) => e.message.replace(/^\[plan\] /, '')).join('; ')}${errors.length > 3 ? '; ...' : ''}`, {
        value: errors.map((e) => e.message), tensor: errors[0].tensor,
      });
    }
    const requant = a.allowRequantize ? undefined : requantized(resolved.tensors);
    if (requant) warnings.push(requant);
    if (a.activations !== undefined && a.dryRun) {
      notes.push('--dry-run: the input scales (--activations) are not computed; they change no size');
    } else if (a.activations !== undefined) {
      resolved = { ...resolved, tensors: await calibrateInputScales(a, input, resolved.tensors, notes, io) };
    } else if (a.activationChunks !== undefined || a.activationContext !== undefined) {
      fail(ErrorCodes.BAD_OPTION, '[cli] quantize: --activation-chunks and --activation-context go with --activations', { option: a.activationChunks !== undefined ? 'activation-chunks' : 'activation-context' });
    }
    let importance: Record<string, Float32Array> | undefined;
    if (imatrix) {
      // Pruned: each kept block's entries under its new number, as llama-quantize looks them up.
      const r = importanceFor(pruned ? renameEntries(imatrix, pruned.map) : imatrix, resolved.tensors, basename(a.imatrix!), ck.source);
      warnings.push(...r.warnings);
      importance = r.importance;
    }
    const roles = new Map(resolved.tensors.map((t) => [t.name, t]));
    if (a.dryRun) return dryRun({ a, input, ck, out, kind, fileType, choice, resolved, container, warnings, notes, json, io });
    const beside = folder ? await folderFiles(folder, input, resolved.tensors, io) : undefined;
    if (beside) warnings.push(...beside.warnings);
    if (!json) {
      io.stdout.write(`webquant: ${baseName(input.file)} (${ck.format}, ${ck.tensors.length} tensors) -> ${basename(out)} (${kind}) with ${choice.label}\n`);
      for (const w of warnings) io.stderr.write(`webquant: warning: ${w}\n`);
    }
    const progress = progressPrinter(io, json, roles);
    // The sink exists only from here on; the pipeline removes its partial file on any failure.
    const splitFiles = splitOut ? splitFileSink(out, { durable: a.fsync }) : undefined;
    const sink = splitFiles ? splitFiles.sink : await fileSink(out, { durable: a.fsync });
    let result;
    try {
      result = await quantizeCheckpoint({
        input: ck, plan: resolved, sink, container, workers: a.workers, importance, signal: io.signal, maxInFlightBytes: budget,
        poolOptions: io.workerUrl ? { workerUrl: io.workerUrl } : undefined,
        inputSize: input.size,
        ...(a.gpu ? { backend: 'webgpu' as const } : {}),
        onProgress: (e) => { if (e.type === 'warning') warnings.push(e.message); progress.event(e); },
      });
    } finally {
      progress.end();
    }
    const tensors = result.tensors.map((t) => {
      const p = roles.get(t.name)!;
      return { ...t, role: p.role, scheme: schemeLabel(p.scheme) };
    });
    const { roles: byRole, total } = summarize(tensors);
    if (kind === 'safetensors' && !folder && tensors.some((t) => t.format === 'nvfp4')) notes.push(nvfp4Note(resolved.tensors));
    if (beside) {
      await writeFolderFiles(folder!, beside);
      notes.push(...beside.notes);
    }
    const params = resolved.tensors.reduce((x, t) => x + t.params, 0);
    const written = splitFiles?.paths();
    const report: QuantizeReport = {
      command: 'quantize', input: input.file, output: written ? written[0] : out, ...(written ? { files: written } : {}), container: kind, plan: choice.label, fileType: kind === 'gguf' ? fileType : undefined,
      tensors, roles: byRole,
      totals: { ...total, params, bpw: params ? (8 * total.bytesOut) / params : 0, fileBytes: result.bytesWritten },
      warnings, notes, elapsedMs: result.elapsedMs, peakInFlightBytes: result.peakInFlightBytes,
    };
    if (!json) {
      io.stdout.write('\n' + summaryTable(report));
      io.stdout.write(`\nwrote ${written ? `${written.length} files, ${written.map((f) => basename(f)).join(', ')}` : out}: ${fmtBytes(result.bytesWritten)} (${fmtNum(report.totals.bpw, 2)} bits per weight over ${params.toLocaleString('en-US')} parameters) in ${(result.elapsedMs / 1000).toFixed(1)} s\n`);
      for (const n of notes) io.stdout.write(`note: ${n}\n`);
    }
    return report;
  } catch (e) {
    // A folder this run made and left empty (the model file is written atomically) goes again.
    if (madeFolder) await rmdir(folder!).catch(() => undefined);
    throw e;
  } finally {
    await input.close();
  }
}

/**
 * --dry-run: the report a run would give, from the plan and the container's layout alone (sizes
 * exact, headers and padding included; no error figures), as llama-quantize's dry run.
 */
function dryRun(d: {
  a: QuantizeArgs; input: OpenedInput; ck: Checkpoint; out: string; kind: 'gguf' | 'safetensors'; fileType?: number; choice: PlanChoice;
  resolved: ResolvedPlan; container: Container; warnings: string[]; notes: string[]; json: boolean; io: CliIO;
}): QuantizeReport {
  const { io, resolved } = d;
  const { tensors: outs, layout } = planOutput(d.ck, resolved, d.container);
  const byName = new Map(resolved.tensors.map((t) => [t.name, t]));
  const tensors = outs.map((o) => {
    const p = byName.get(o.name)!;
    const bytes = d.ck.tensor(o.name).byteLength;
    return { name: o.name, format: o.format ?? 'keep', bytes, outputBytes: o.byteLength, cached: false, chunks: 1, role: p.role, scheme: schemeLabel(p.scheme) };
  });
  const n = layout.files?.length;
  const files = n ? splitPaths(d.out, n) : undefined;
  const { roles, total } = summarize(tensors);
  const params = resolved.tensors.reduce((x, t) => x + t.params, 0);
  const report: QuantizeReport = {
    command: 'quantize', dryRun: true, input: d.input.file, output: files ? files[0] : d.out, ...(files ? { files } : {}), container: d.kind, plan: d.choice.label,
    fileType: d.kind === 'gguf' ? d.fileType : undefined, tensors, roles,
    totals: { ...total, params, bpw: params ? (8 * total.bytesOut) / params : 0, fileBytes: layout.totalBytes },
    warnings: d.warnings, notes: d.notes, elapsedMs: 0, peakInFlightBytes: 0,
  };
  if (!d.json) {
    io.stdout.write(`webquant: dry run: ${baseName(d.input.file)} (${d.ck.format}, ${d.ck.tensors.length} tensors) with ${d.choice.label}\n`);
    for (const w of d.warnings) io.stderr.write(`webquant: warning: ${w}\n`);
    tensors.forEach((t, i) => io.stdout.write(`${tensorLine(i, tensors.length, t)}\n`));
    io.stdout.write('\n' + summaryTable(report));
    const where = files ? `${files.length} files, ${files.map((f) => basename(f)).join(', ')}` : d.out;
    io.stdout.write(`\nwould write ${where}: ${fmtBytes(layout.totalBytes)} (${fmtNum(report.totals.bpw, 2)} bits per weight over ${params.toLocaleString('en-US')} parameters); nothing was written\n`);
    for (const note of d.notes) io.stdout.write(`note: ${note}\n`);
  }
  return report;
}
