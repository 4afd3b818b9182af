// Importance matrices computed by webquant, as llama.cpp's llama-imatrix computes them: the
// reference forward runs the calibration tokens in chunks of `contextLength` (each from an empty
// cache, its first token replaced by BOS), and for every weight matrix multiplied the squares of
// its input are summed per column over every position that reaches it (a MoE expert: the
// positions routed to it), with the number of those positions. Sums are kept in float64, per
// chunk and then over chunks in order (llama-imatrix adds in float32, so its files differ from
// these by rounding); the CLI can run the chunks on several threads for the same bits. The output head is
// left out unless asked for, as llama-imatrix does by default.
//
// The result is stored in llama.cpp's GGUF imatrix format, under GGUF tensor names:
// `<name>.in_sum2` F32 [matrices, cols] and `<name>.counts` F32 [matrices, 1] (matrices: 1, or a
// layer's experts), with general.type = "imatrix" and the dataset, chunk count and chunk size.
// `webquant quantize --imatrix` and llama-quantize read it (src/io/imatrix.ts).
import { ErrorCodes, fail } from '../errors.js';
import type { GgufWriteKV, GgufWriteTensor } from '../io/gguf-writer.js';
import { ggufArchitecture, ggufExpertSlot, ggufTensorName } from '../convert/arch/index.js';
import { LlamaModel, type LlamaConfig, type WeightSource } from './llama.js';
import { BOS } from './tokens.js';
import { checkContextLength } from './evaluate.js';

export interface ImatrixEntry {
  cols: number;
  /** Per matrix (one, or one per expert): sums of squared inputs per column, and positions seen. */
  sums: Float64Array[];
  counts: number[];
}

export interface ImatrixResult {
  /** By GGUF tensor name. */
  entries: Map<string, ImatrixEntry>;
  chunks: number;
  chunkSize: number;
}

/** A forward over calibration text, in chunks (the importance matrix, activation scales). */
export interface CalibrationOptions {
  config: LlamaConfig;
  weights: WeightSource;
  /** Calibration token stream (uint16 ids); cut into chunks of contextLength tokens. */
  tokens: Uint16Array;
  /** Tokens per chunk (default 512, llama-imatrix's default context). */
  contextLength?: number;
  /** Use at most this many chunks. */
  maxChunks?: number;
  bos?: number;
  onProgress?: (p: { chunks: number; totalChunks: number }) => void;
  signal?: AbortSignal;
}

export interface ImatrixOptions extends CalibrationOptions {
  /** Also collect the output head's input (llama-imatrix --process-output). */
  processOutput?: boolean;
}

/** `src` with `observe` seeing the input of every matrix the forward multiplies. */
export function observedWeights(src: WeightSource, observe: NonNullable<WeightSource['observe']>): WeightSource {
  return {
    get: (name) => src.get(name),
    ...(src.matvec ? { matvec: (name: string, x: Float32Array) => src.matvec!(name, x) } : {}),
    ...(src.matmul ? { matmul: (name: string, x: Float32Array, n: number) => src.matmul!(name, x, n) } : {}),
    observe,
  };
}

/** GGUF name of the matrix the forward reads as `hf`, and its expert index within it. */
function ggufTarget(hf: string, arch: string): { name: string; expert: number } | undefined {
  const slot = ggufExpertSlot(hf);
  if (slot) return slot;
  try {
    const name = ggufTensorName(hf, arch);
    return name ? { name, expert: 0 } : undefined;
  } catch {
    return undefined; // a matrix GGUF stores differently (MLA's kv_b split): no entry
  }
}

/** What one chunk's forward adds to each entry: its own float64 sums, before they are merged. */
export type ImatrixChunk = Map<string, ImatrixEntry>;

export interface ImatrixCollector {
  /** Runs one chunk (contextLength tokens, the first replaced by BOS here) and returns its sums. */
  chunk(tokens: Uint16Array): ImatrixChunk;
}

/**
 * The forward with its observer, one chunk at a time. Each chunk's sums start from zero and are
 * added to the totals in chunk order by mergeImatrixChunk, so the result is the same bits however
 * the chunks are spread over threads (see src/cli/forward-workers.ts).
 */
export async function imatrixCollector(opts: Pick<ImatrixOptions, 'config' | 'weights' | 'bos' | 'processOutput'>): Promise<ImatrixCollector> {
  const { config } = opts;
  const arch = ggufArchitecture(config)?.name ?? 'llama';
  const experts = config.moe?.experts ?? 1;
  const head = config.tie_word_embeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
  let entries: ImatrixChunk = new Map();
  const targets = new Map<string, { name: string; expert: number } | undefined>();
  const observe = (hf: string, x: Float32Array, n: number, cols: number) => {
    if (hf === head && !opts.processOutput) return;
    let t = targets.get(hf);
    if (!targets.has(hf)) targets.set(hf, (t = hf === head ? { name: 'output.weight', expert: 0 } : ggufTarget(hf, arch)));
    if (!t) return;
    let e = entries.get(t.name);
    if (!e) {
      const mats = ggufExpertSlot(hf) ? experts : 1;
      entries.set(t.name, (e = { cols, sums: Array.from({ length: mats }, () => new Float64Array(cols)), counts: new Array<number>(mats).fill(0) }));
    }
    const s = e.sums[t.expert];
    for (let p = 0; p < n; p++) {
      const o = p * cols;
      for (let c = 0; c < cols; c++) s[c] += x[o + c] * x[o + c];
    }
    e.counts[t.expert] += n;
  };
  const model = await LlamaModel.load(config, observedWeights(opts.weights, observe));
  return {
    chunk(tokens) {
      const chunk = bosChunk(tokens, opts.bos);
      entries = new Map();
      model.forward(chunk, { logits: !!opts.processOutput });
      return entries;
    },
  };
}

/** Adds one chunk's sums to the totals (chunks must come in order for the same bits). */
export function mergeImatrixChunk(totals: Map<string, ImatrixEntry>, chunk: ImatrixChunk): void {
  for (const [name, c] of chunk) {
    const t = totals.get(name);
    if (!t) {
      totals.set(name, { cols: c.cols, sums: c.sums.map((s) => Float64Array.from(s)), counts: [...c.counts] });
      continue;
    }
    if (t.cols !== c.cols || t.sums.length !== c.sums.length) {
      fail(ErrorCodes.MODEL, `[imatrix] ${name}: a chunk has ${c.sums.length} x ${c.cols} sums but the totals ${t.sums.length} x ${t.cols}`, { tensor: name, value: c.cols, expected: t.cols });
    }
    c.sums.forEach((s, m) => {
      const d = t.sums[m];
      for (let i = 0; i < s.length; i++) d[i] += s[i];
      t.counts[m] += c.counts[m];
    });
  }
}

/** Checks the options and returns the number of chunks to run. */
export function imatrixChunks(opts: Pick<ImatrixOptions, 'tokens' | 'contextLength' | 'maxChunks'>, who = 'imatrix'): { ctx: number; chunks: number } {
  const { tokens } = opts;
  const ctx = checkContextLength(opts.contextLength, who);
  if (opts.maxChunks !== undefined && !(Number.isInteger(opts.maxChunks) && opts.maxChunks >= 1)) {
    fail(ErrorCodes.BAD_OPTION, `[${who}] maxChunks must be a positive integer but got ${opts.maxChunks}`, { option: 'maxChunks', value: opts.maxChunks, expected: '>= 1' });
  }
  const total = Math.floor(tokens.length / ctx);
  if (total === 0) {
    fail(ErrorCodes.BAD_INPUT, `[${who}] ${tokens.length} calibration tokens make no chunk of ${ctx}; give more text or a smaller context`, { value: tokens.length, expected: `>= ${ctx} tokens` });
  }
  return { ctx, chunks: Math.min(total, opts.maxChunks ?? total) };
}

/** A chunk's tokens with the first replaced by BOS, as llama-imatrix runs each chunk. */
export function bosChunk(tokens: Uint16Array, bos = BOS): Uint16Array {
  const chunk = Uint16Array.from(tokens);
  chunk[0] = bos;
  return chunk;
}

/**
 * Runs `each` on the calibration chunks in order (`span` from imatrixChunks), checking the signal
 * before each and reporting progress after it.
 */
export async function runChunks(opts: CalibrationOptions, who: string, span: { ctx: number; chunks: number }, each: (tokens: Uint16Array) => void): Promise<void> {
  const { ctx, chunks } = span;
  for (let i = 0; i < chunks; i++) {
    if (opts.signal?.aborted) fail(ErrorCodes.ABORTED, `[${who}] aborted after ${i} of ${chunks} chunks`, { index: i, value: String(opts.signal.reason ?? 'aborted') });
    each(opts.tokens.subarray(i * ctx, (i + 1) * ctx));
    opts.onProgress?.({ chunks: i + 1, totalChunks: chunks });
    // Let a page or a signal handler run between chunks.
    await new Promise((r) => setTimeout(r, 0));
  }
}

export async function computeImatrix(opts: ImatrixOptions): Promise<ImatrixResult> {
  const span = imatrixChunks(opts);
  const collector = await imatrixCollector(opts);
  const entries = new Map<string, ImatrixEntry>();
  await runChunks(opts, 'imatrix', span, (tokens) => mergeImatrixChunk(entries, collector.chunk(tokens)));
  return { entries, chunks: span.chunks, chunkSize: span.ctx };
}

/** The GGUF imatrix file's metadata and tensors (see the top of this file). */
export function imatrixGguf(r: ImatrixResult, dataset: string): { metadata: GgufWriteKV[]; tensors: GgufWriteTensor[] } {
  const tensors: GgufWriteTensor[] = [];
  for (const [name, e] of r.entries) {
    const mats = e.sums.length;
    const sums = new Float32Array(mats * e.cols);
    e.sums.forEach((s, m) => sums.set(s, m * e.cols));
    tensors.push(
      { name: `${name}.in_sum2`, ggmlType: 'F32', shape: [mats, e.cols], data: sums },
      { name: `${name}.counts`, ggmlType: 'F32', shape: [mats, 1], data: Float32Array.from(e.counts) },
    );
  }
  return {
    metadata: [
      { key: 'general.type', type: 'string', value: 'imatrix' },
      { key: 'imatrix.datasets', type: 'array', itemType: 'string', value: [dataset] },
      { key: 'imatrix.chunk_count', type: 'u32', value: r.chunks },
      { key: 'imatrix.chunk_size', type: 'u32', value: r.chunkSize },
    ],
    tensors,
  };
}
