// From "this checkpoint with that preset (or format)" to what quantizeCheckpoint needs, for the
// runtimes that have no CLI (the demo page, the Cloudflare Worker). It makes the choices
// `webquant quantize` makes (src/cli/quantize.ts), so every runtime writes the same bytes for the
// same input: GGUF from a Hugging Face checkpoint goes through the llama.cpp converter view and
// needs config.json; safetensors output records the plan's label. test/browser checks the bytes.
import { ErrorCodes, WebquantError } from '../errors.js';
import type { Checkpoint } from '../io/checkpoint.js';
import { readConfig, safetensorsOptions, type ModelConfig } from '../io/config.js';
import type { GgufWriteKV } from '../io/gguf-writer.js';
import { looksLikeHtml, openCheckpoint } from '../io/open.js';
import { openSafetensorsIndex, type SafetensorsOptions } from '../io/safetensors.js';
import { importanceFor, imatrixMetadata } from '../io/imatrix.js';
import { fromUrl, type ByteSource, type UrlSourceOptions } from '../io/source.js';
import { resolvePlan } from '../plan/plan.js';
import type { PlannedTensor, ResolvedPlan, ResolveOptions } from '../plan/types.js';
import { llamaHparams } from '../plan/llama-hparams.js';
import { formats } from '../formats/registry.js';
import { ggmlType } from '../io/ggml-types.js';
import { ggufView, hfGgufMetadata, llamaConfigFrom, type GgufTokenizer } from '../convert/hf-view.js';
import type { GgufVocab } from '../convert/gguf-vocab.js';
import { ggufArchitecture } from '../convert/arch/index.js';
import { readModelCard, type ModelCard } from '../convert/model-card.js';
import type { MetadataOverride } from '../convert/general-metadata.js';
import { BESIDE_FILE_NAMES, MODEL_CARD, readGenerationConfig, readGgufVocab, type BesideFileName, type TokenizerFiles } from '../convert/tokenizer-files.js';
import { choosePlan, type PlanChoice } from '../cli/plan.js';
import { pruneLayers, type PrunedCheckpoint } from '../convert/prune-layers.js';
import type { GgufCheckpoint } from '../io/gguf.js';
import { ggufContainer, safetensorsContainer, type Container, type GgufSplit } from './container.js';
import { asValues } from '../serve/as-values.js';

export type ContainerKind = 'gguf' | 'safetensors';

export interface InputBundle {
  checkpoint: Checkpoint;
  /** GGUF general.name: the CLI uses the name of the folder holding the checkpoint. */
  name: string;
  config?: ModelConfig;
  /** Tokenizer files that came with the checkpoint, converted when GGUF is written from it. */
  tokenizer?: TokenizerFiles;
}

export interface PreparedOutput {
  /** The checkpoint as the container sees it (the GGUF view of a Hugging Face one). */
  input: Checkpoint;
  plan: ResolvedPlan;
  container: Container;
  kind: ContainerKind;
  /** 'preset q8_0', 'format nf4'. */
  label: string;
  /** Plan warnings (fallbacks for rows a format cannot take...). */
  warnings: string[];
  /** `<name>-<preset or format>.<kind>` */
  fileName: string;
  /** Per-column importance by tensor name, from the importance matrix given (for quantizeCheckpoint). */
  importance?: Record<string, Float32Array>;
}

export interface PrepareOptions {
  /**
   * An importance matrix (readImatrix) and the name of its file, as `webquant quantize --imatrix`;
   * a GGUF output records them in llama-quantize's quantize.imatrix.* keys.
   */
  imatrix?: { matrix: ReadonlyMap<string, Float32Array>; file: string };
  /**
   * convert_hf_to_gguf.py's metadata override (`webquant quantize --metadata`): general.* keys
   * (name, author, sampling defaults, tags, base models, ...) that replace the derived ones when a
   * Hugging Face checkpoint is written as GGUF; `file` names it in errors and warnings.
   */
  metadata?: MetadataOverride;
}

/**
 * A file beside a URL, or undefined when it cannot be read (as the CLI treats config.json) or is
 * an HTML page (servers that answer every path with one, such as a single-page app's).
 */
async function besideUrl(file: string, url: string, opts: UrlSourceOptions): Promise<ByteSource | undefined> {
  try {
    const src = fromUrl(new URL(file, url).toString(), opts);
    const head = await src.read(0, Math.min(await src.size(), 64));
    if (looksLikeHtml(head)) return undefined;
    return src;
  } catch (e) {
    if (e instanceof WebquantError && e.code !== ErrorCodes.ABORTED) return undefined;
    throw e;
  }
}

/** The files (`names`, by default all of BESIDE_FILE_NAMES) that exist beside a URL (one probe each). */
export async function tokenizerFilesBesideUrl(url: string, opts: UrlSourceOptions = {}, names: readonly BesideFileName[] = BESIDE_FILE_NAMES): Promise<TokenizerFiles> {
  const found = await Promise.all(names.map(async (f) => [f, await besideUrl(f, url, opts)] as const));
  return Object.fromEntries(found.filter(([, s]) => s)) as TokenizerFiles;
}

/** A checkpoint read by URL with Range requests, with the config.json and tokenizer files beside it. */
export async function openUrlInput(url: string, opts: UrlSourceOptions = {}): Promise<InputBundle & { size?: number }> {
  // config.json first: its FP8 block size (quantization_config) is needed to open the checkpoint.
  const cfg = await besideUrl('config.json', url, opts);
  const config = cfg ? await readConfig(cfg) : undefined;
  const { checkpoint, size } = await openUrlCheckpoint(url, safetensorsOptions(config), opts);
  const path = new URL(url).pathname.split('/').filter(Boolean);
  return {
    checkpoint,
    name: path.length > 1 ? path[path.length - 2] : new URL(url).host,
    config,
    tokenizer: await tokenizerFilesBesideUrl(url, opts),
    size,
  };
}

/**
 * The checkpoint at a URL: a sharded safetensors index with its shards, or one file (a split
 * GGUF's first, with the others beside it), each file read by Range requests. `size` is the
 * file's, for a single file only.
 */
export async function openUrlCheckpoint(url: string, st: SafetensorsOptions, opts: UrlSourceOptions = {}): Promise<{ checkpoint: Checkpoint; size?: number }> {
  const main = fromUrl(url, opts);
  const beside = (f: string) => fromUrl(new URL(f, url).toString(), opts);
  if (url.split('?')[0].endsWith('.json')) return { checkpoint: await openSafetensorsIndex(main, beside, st) };
  const checkpoint = await openCheckpoint(main, { ...st, splits: beside });
  return { checkpoint, size: (checkpoint as { splits?: string[] }).splits ? undefined : await main.size() };
}

/**
 * Plan and container for a preset or a format. `want` picks the container for a format that
 * GGUF and safetensors can both hold (default GGUF); a preset's own container must match it.
 */
export interface ContainerChoice {
  /** The checkpoint as the container sees it (the GGUF view of a Hugging Face one). */
  input: Checkpoint;
  container: Container;
  /** What happened to the tokenizer (GGUF from a Hugging Face checkpoint only). */
  tokenizer?: GgufTokenizer;
  /** With `prune`: the blocks' new numbers (the importance matrix's names follow them) and the layers not found. */
  pruned?: Pick<PrunedCheckpoint, 'map' | 'missing' | 'blockCount' | 'blocksBefore'>;
  /**
   * For resolvePlan (GGUF only): what llama-quantize reads from the hyper-parameters it loads,
   * the input's keys with --override-kv's (before --prune-layers).
   */
  hparams?: Pick<ResolveOptions, 'gqa' | 'nExperts' | 'modelType'>;
  /** Model card values left out (of a type the converter cannot write). */
  warnings?: string[];
}

/**
 * The output container for a checkpoint and a plan: the one place that decides GGUF metadata, so
 * the CLI, the demo page and the Worker write the same bytes. GGUF from GGUF keeps every key
 * (file type and quantization version updated); GGUF from Hugging Face goes through the
 * llama.cpp converter view and needs config.json; safetensors records the plan's label.
 */
export function chooseContainer(
  ck: Checkpoint,
  kind: ContainerKind,
  choice: Pick<PlanChoice, 'label' | 'fileType'>,
  src: {
    config?: ModelConfig; vocab?: GgufVocab; name: string; file: string; imatrix?: GgufWriteKV[]; overrides?: GgufWriteKV[]; split?: GgufSplit; prune?: number[];
    /** generation_config.json, parsed: its sampling defaults become general.sampling.* keys. */
    generation?: Record<string, unknown>;
    /** README.md's front matter, parsed: license, tags, languages, base models, datasets. */
    card?: ModelCard;
    /** convert_hf_to_gguf.py's --metadata file: general.* keys over the derived ones (Hugging Face input to GGUF). */
    metadata?: MetadataOverride;
  },
): ContainerChoice {
  // llama-quantize sets --override-kv's keys after the file's, then the imatrix's (which win).
  const im = src.imatrix ?? [];
  const imKeys = new Set(im.map((k) => k.key));
  const overrides = (src.overrides ?? []).filter((k) => !imKeys.has(k.key));
  const over = new Set(overrides.map((k) => k.key));
  const last = (kv: GgufWriteKV[]) => [...kv.filter((k) => !over.has(k.key) && !imKeys.has(k.key)), ...overrides, ...im];
  if (kind === 'safetensors' && src.overrides?.length) {
    throw new WebquantError(ErrorCodes.BAD_OPTION, '[quantize] metadata overrides (--override-kv) are GGUF keys: write a .gguf', { option: 'override-kv', value: src.overrides.map((k) => k.key) });
  }
  if (kind === 'safetensors' && src.prune?.length) {
    throw new WebquantError(ErrorCodes.BAD_OPTION, '[quantize] --prune-layers renumbers GGUF blocks: write a .gguf', { option: 'prune-layers', value: src.prune });
  }
  if (kind === 'safetensors' && src.split) {
    throw new WebquantError(ErrorCodes.BAD_OPTION, '[quantize] a split output is a GGUF one: write a .gguf', { option: 'split', value: src.split });
  }
  if (src.metadata && (kind !== 'gguf' || ck.format === 'gguf')) {
    throw new WebquantError(ErrorCodes.BAD_OPTION, `[quantize] a metadata file (${src.metadata.file}) replaces the general.* keys of a Hugging Face checkpoint converted to GGUF; ${kind !== 'gguf' ? 'write a .gguf' : 'for a GGUF input, set keys with --override-kv'}`, {
      file: src.metadata.file, option: 'metadata', expected: kind !== 'gguf' ? '.gguf output' : 'a safetensors input',
    });
  }
  if (kind === 'safetensors') return { input: ck, container: safetensorsContainer({ 'webquant.plan': choice.label }) };
  const split = src.split;
  // --prune-layers: a view without the blocks, and `<arch>.block_count` set last, as llama-quantize sets it.
  const prune = (view: Checkpoint, arch: unknown) => {
    if (!src.prune?.length) return undefined;
    if (typeof arch !== 'string') {
      throw new WebquantError(ErrorCodes.BAD_INPUT, `[quantize] ${src.file} has no general.architecture, so --prune-layers cannot set its block count`, { file: src.file, option: 'prune-layers' });
    }
    const p = pruneLayers(view, src.prune);
    return { ...p, kv: [{ key: `${arch}.block_count`, type: 'u32', value: p.blockCount }] as GgufWriteKV[] };
  };
  const hparams = (keys: (key: string) => unknown) => {
    const o = new Map(overrides.map((k) => [k.key, k.value]));
    return llamaHparams((key) => (o.has(key) ? o.get(key) : keys(key)));
  };
  if (ck.format === 'gguf') {
    // In llama-quantize's order (it sets the quantization version, then the file type).
    const kv: GgufWriteKV[] = [{ key: 'general.quantization_version', type: 'u32', value: 2 }];
    if (choice.fileType !== undefined) kv.push({ key: 'general.file_type', type: 'u32', value: choice.fileType });
    const md = (ck as GgufCheckpoint).metadata;
    const p = prune(ck, md['general.architecture']);
    return {
      input: p?.checkpoint ?? ck, container: ggufContainer({ metadata: [...last(kv), ...(p?.kv ?? [])], split }), ...(p ? { pruned: p } : {}),
      hparams: hparams((key) => md[key]),
    };
  }
  if (!src.config) {
    throw new WebquantError(ErrorCodes.CONFIG, `[quantize] writing GGUF from a safetensors checkpoint needs its config.json beside ${src.file} (architecture and hyper-parameters)`, {
      file: src.file, option: 'config', expected: 'config.json',
    });
  }
  const cfg = llamaConfigFrom(src.config);
  const tokenizer: GgufTokenizer = src.vocab ? { kind: 'vocab', vocab: src.vocab } : { kind: 'none' };
  const view = ggufView(ck, cfg);
  const warnings: string[] = [];
  const meta = hfGgufMetadata(cfg, choice.fileType ?? 0, tokenizer, src.name, { config: src.config.raw, generation: src.generation, card: src.card, tensors: view.tensors, warnings, ...(src.metadata ? { override: src.metadata } : {}) });
  const p = prune(view, meta.find((k) => k.key === 'general.architecture')?.value);
  const metadata = [...last(meta).filter((k) => !p || k.key !== p.kv[0].key), ...(p?.kv ?? [])];
  const written = new Map(meta.map((k) => [k.key, k.value]));
  return { input: p?.checkpoint ?? view, container: ggufContainer({ metadata, split }), tokenizer, ...(p ? { pruned: p } : {}), hparams: hparams((key) => written.get(key)), warnings };
}

/**
 * What the files beside a Hugging Face checkpoint add to its GGUF: the vocabulary (from the
 * tokenizer files, for a supported architecture), generation_config.json (read once, for the
 * vocabulary's ids and the general.sampling.* keys) and the model card (README.md's front matter,
 * for the license, tags and base models; `warnings` says what of it was left out). A GGUF input
 * keeps its own keys.
 */
export async function hfSideFiles(
  ck: Checkpoint, kind: ContainerKind, config: ModelConfig | undefined, files: TokenizerFiles | undefined, pre?: string,
): Promise<{ vocab?: GgufVocab; generation?: Record<string, unknown>; card?: ModelCard; warnings: string[] }> {
  const warnings: string[] = [];
  if (kind !== 'gguf' || ck.format === 'gguf' || !config || !files) return { warnings };
  const arch = ggufArchitecture({ model_type: config.modelType });
  if (!arch) return { warnings }; // chooseContainer refuses the model type
  const generation = await readGenerationConfig(files);
  const card = await readModelCard(files[MODEL_CARD], warnings);
  const vocab = await readGgufVocab(files, { vocabSize: config.vocabSize, config: config.raw, architecture: arch.name, pre, generationConfig: generation });
  return { vocab, generation, card, warnings };
}

/**
 * A GGUF output copies a tensor the plan gives the GGUF type it is stored in already, as
 * llama-quantize does: quantizing its dequantized values to the same type again would change them.
 */
export function keepStoredTypes(r: ResolvedPlan, kind: ContainerKind): ResolvedPlan {
  if (kind !== 'gguf') return r;
  const same = (t: PlannedTensor) => {
    if (t.scheme === 'keep') return false;
    const g = formats.get(t.scheme.format)?.ggml;
    return g !== undefined && ggmlType(t.dtype)?.id === g.type;
  };
  if (!r.tensors.some(same)) return r;
  return { ...r, tensors: r.tensors.map((t) => (same(t) ? { ...t, scheme: 'keep', reason: `${t.reason}; stored as ${t.dtype} already: copied` } : t)) };
}

export async function prepareOutput(src: InputBundle, what: { preset?: string; format?: string }, want?: ContainerKind, opts: PrepareOptions = {}): Promise<PreparedOutput> {
  const choice: PlanChoice = choosePlan(what);
  if (want && choice.container && want !== choice.container) {
    throw new WebquantError(ErrorCodes.BAD_OPTION, `[prepare] ${choice.label} writes ${choice.container}, not ${want}`, { option: 'container', value: want, expected: choice.container });
  }
  const kind: ContainerKind = choice.container ?? want ?? 'gguf';
  const warnings: string[] = [];
  const side = await hfSideFiles(src.checkpoint, kind, src.config, src.tokenizer);
  const { vocab, generation, card } = side;
  warnings.push(...side.warnings);
  // A webquant output is read as its values (serve/as-values.ts), as the CLI reads it.
  const { input, container, tokenizer, hparams, warnings: cardWarnings } = chooseContainer(await asValues(src.checkpoint), kind, choice, {
    config: src.config, vocab, name: src.name, file: src.checkpoint.source, generation, card,
    ...(opts.imatrix ? { imatrix: imatrixMetadata(opts.imatrix.file, opts.imatrix.matrix) } : {}),
    ...(opts.metadata ? { metadata: opts.metadata } : {}),
  });
  warnings.push(...(cardWarnings ?? []));
  if (tokenizer?.kind === 'none') warnings.push('no tokenizer came with the checkpoint: the GGUF has tokenizer.ggml.model = "no_vocab"');
  if (tokenizer?.kind === 'vocab') warnings.push(...tokenizer.vocab.warnings);
  const plan = keepStoredTypes(resolvePlan(choice.plan, input.tensors, { importance: !!opts.imatrix, ...hparams }), kind);
  for (const p of plan.problems) if (p.severity === 'warning') warnings.push(p.message);
  const errors = plan.problems.filter((p) => p.severity === 'error');
  if (errors.length) {
    throw new WebquantError(ErrorCodes.PLAN, `[plan] ${choice.label}: ${errors.map((e) => e.message).join('; ')}`, { value: errors.map((e) => e.message), tensor: errors[0].tensor });
  }
  const imp = opts.imatrix && importanceFor(opts.imatrix.matrix, plan.tensors, opts.imatrix.file, src.checkpoint.source);
  if (imp) warnings.push(...imp.warnings);
  const tag = (what.preset ?? what.format ?? 'quant').toLowerCase();
  return { input, plan, container, kind, label: choice.label, warnings, fileName: `${src.name || 'model'}-${tag}.${kind}`, ...(imp ? { importance: imp.importance } : {}) };
}
