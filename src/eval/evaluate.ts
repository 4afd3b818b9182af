// What quantization cost: next-token NLL of a reference model and, given a candidate (for example
// the quantized weights), the NLL difference, KL(P_ref || P_cand), top-1 agreement and the error
// of the residual stream after every layer. Both models run in lockstep, one window at a time;
// sums are kept per window and added up in window order.
import { ErrorCodes, fail } from '../errors.js';
import { finishMetrics, mergeMetrics, newMetricsAccumulator, type ErrorMetrics } from '../metrics.js';
import { LlamaModel, type LlamaConfig, type WeightSource } from './llama.js';
import { BOS, splitDocuments } from './tokens.js';

export interface ModelInput {
  config: LlamaConfig;
  weights: WeightSource;
}

export interface EvaluateProgress {
  documents: number;
  totalDocuments: number;
  /** Predicted tokens so far. */
  tokens: number;
}

export interface EvaluateOptions {
  reference: ModelInput;
  /** Same architecture as the reference (its config is used). */
  candidate?: WeightSource;
  /** Token stream (see tokens.ts): documents start with BOS. */
  tokens: Uint16Array;
  /** Evaluate only the first maxDocs documents. */
  maxDocs?: number;
  /**
   * Most tokens the model sees at once (default 512). A longer document is cut into windows of
   * contextLength tokens that overlap by one token, each starting from an empty cache, so every
   * token after the first is predicted exactly once.
   */
  contextLength?: number;
  /** Residual-stream error per layer (default: true when there is a candidate). */
  perLayer?: boolean;
  bos?: number;
  onProgress?: (p: EvaluateProgress) => void;
  signal?: AbortSignal;
}

export interface NllStats {
  /** Mean negative log-likelihood in nats per predicted token. */
  nll: number;
  ppl: number;
  tokens: number;
}

export interface LayerError extends ErrorMetrics {
  /** Layer index; the metrics compare the residual stream after this layer over all positions. */
  layer: number;
}

export interface EvaluateResult {
  documents: number;
  reference: NllStats;
  candidate?: NllStats;
  /** candidate.nll - reference.nll */
  deltaNll?: number;
  /** Mean over predicted positions of KL(P_ref || P_cand), nats. */
  klDivergence?: number;
  /** Fraction of predicted positions where both models' argmax agree. */
  top1Agreement?: number;
  perLayer?: LayerError[];
  seconds: number;
}

export const DEFAULT_CONTEXT = 512;

/** log-softmax of logits into out, in float64; returns the argmax (first on ties). */
export function logSoftmax(logits: Float32Array, out: Float64Array): number {
  let max = -Infinity, arg = 0;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) { max = logits[i]; arg = i; }
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  const lse = max + Math.log(sum);
  for (let i = 0; i < logits.length; i++) out[i] = logits[i] - lse;
  return arg;
}

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());
const yieldToLoop = () => new Promise<void>((r) => setTimeout(r, 0));

/**
 * One window's sums. Each window's start from zero and are added to the totals in window order
 * (mergeWindow), so the result is the same bits however windows are spread over threads
 * (src/cli/forward-workers.ts).
 */
export interface WindowStats {
  nllRef: number;
  nllCand: number;
  kl: number;
  agree: number;
  count: number;
  /** Per layer: the residual-stream error sums (see accumulate), when captured. */
  layers: Float64Array[];
}

export interface EvalCollector {
  /** Runs one window (see evalWindows) from an empty cache and returns its sums. */
  window(win: Uint16Array): WindowStats;
}

const isWeightSource = (w: unknown) => typeof (w as WeightSource | null)?.get === 'function';

/** reference is { config, weights } and candidate, when given, a WeightSource (E_BAD_INPUT). */
function checkModels(opts: Pick<EvaluateOptions, 'reference' | 'candidate'>): void {
  if (typeof opts.reference?.config !== 'object' || opts.reference.config === null || !isWeightSource(opts.reference.weights)) {
    fail(ErrorCodes.BAD_INPUT, '[evaluate] reference must be { config, weights }: a LlamaConfig and a WeightSource', { option: 'reference', expected: '{ config: LlamaConfig, weights: WeightSource }' });
  }
  if (opts.candidate !== undefined && !isWeightSource(opts.candidate)) {
    fail(ErrorCodes.BAD_INPUT, '[evaluate] candidate must be a WeightSource (or left out)', { option: 'candidate', value: opts.candidate === null ? 'null' : typeof opts.candidate, expected: 'a WeightSource' });
  }
}

export async function evalCollector(opts: Pick<EvaluateOptions, 'reference' | 'candidate' | 'contextLength' | 'perLayer'>): Promise<EvalCollector> {
  checkModels(opts);
  const ctx = checkContext(opts.contextLength);
  const config = opts.reference.config;
  const withCand = opts.candidate !== undefined;
  const perLayer = opts.perLayer ?? withCand;
  const ref = await LlamaModel.load(config, opts.reference.weights);
  const cand = withCand ? await LlamaModel.load(config, opts.candidate!) : undefined;
  const capture = perLayer && withCand;

  const V = config.vocab_size;
  const lpRef = new Float64Array(V), lpCand = new Float64Array(V);
  // The reference's residual stream per layer, sized by the longest window run so far: the
  // context may be far longer than any document.
  const refLayers: Float32Array[] = [];
  let st: WindowStats;
  const saveLayer = (l: number, h: Float32Array) => {
    if (!(refLayers[l]?.length >= h.length)) refLayers[l] = new Float32Array(h.length);
    refLayers[l].set(h);
  };
  const compareLayer = (l: number, h: Float32Array) => accumulate(refLayers[l], h, h.length, st.layers[l]);

  const runWindow = (win: Uint16Array) => {
    if (win.length > ctx) fail(ErrorCodes.BAD_INPUT, `[evaluate] a window of ${win.length} tokens exceeds the context of ${ctx}`, { value: win.length, expected: `<= ${ctx}` });
    const n = win.length - 1; // the last token is only a target
    const inp = win.subarray(0, n);
    const lr = ref.forward(inp, capture ? { onLayer: saveLayer } : {});
    const lc = cand?.forward(inp, capture ? { onLayer: compareLayer } : {});
    for (let p = 0; p < n; p++) {
      const target = win[p + 1];
      const argRef = logSoftmax(lr.subarray(p * V, (p + 1) * V), lpRef);
      st.nllRef -= lpRef[target];
      if (lc) {
        const argCand = logSoftmax(lc.subarray(p * V, (p + 1) * V), lpCand);
        st.nllCand -= lpCand[target];
        let k = 0;
        for (let i = 0; i < V; i++) k += Math.exp(lpRef[i]) * (lpRef[i] - lpCand[i]);
        st.kl += k;
        if (argRef === argCand) st.agree++;
      }
    }
    st.count += n;
  };
  return {
    window(win) {
      st = { nllRef: 0, nllCand: 0, kl: 0, agree: 0, count: 0, layers: capture ? Array.from({ length: config.num_hidden_layers }, () => newMetricsAccumulator()) : [] };
      runWindow(win);
      return st;
    },
  };
}

/** Adds one window's sums to the totals (windows in order for the same bits). */
export function mergeWindow(total: WindowStats, d: WindowStats): void {
  total.nllRef += d.nllRef;
  total.nllCand += d.nllCand;
  total.kl += d.kl;
  total.agree += d.agree;
  total.count += d.count;
  d.layers.forEach((s, l) => mergeMetrics((total.layers[l] ??= newMetricsAccumulator()), s));
}

export const emptyStats = (): WindowStats => ({ nllRef: 0, nllCand: 0, kl: 0, agree: 0, count: 0, layers: [] });

export interface WindowTotals {
  readonly total: WindowStats;
  /** Documents whose every window has been added. */
  readonly documents: number;
  /** Adds window i's sums (windows in order); true when that finished a document. */
  add(i: number, stats: WindowStats): boolean;
}

/** The totals of evalWindows' windows, reporting progress after each document's last window. */
export function windowTotals(windows: readonly { doc: number }[], totalDocuments: number, onProgress?: (p: EvaluateProgress) => void): WindowTotals {
  const total = emptyStats();
  let documents = 0;
  return {
    total,
    get documents() { return documents; },
    add(i, stats) {
      mergeWindow(total, stats);
      if (windows[i + 1]?.doc === windows[i].doc) return false;
      documents = windows[i].doc + 1;
      onProgress?.({ documents, totalDocuments, tokens: total.count });
      return true;
    },
  };
}

/**
 * The context length of `who` (evaluate, imatrix): an integer >= 2, default 512. Nothing is
 * allocated by it: a window holds at most the tokens there are.
 */
export function checkContextLength(ctx: number | undefined, who: string): number {
  const n = ctx ?? DEFAULT_CONTEXT;
  if (!Number.isInteger(n) || n < 2) {
    fail(ErrorCodes.BAD_OPTION, `[${who}] contextLength must be an integer >= 2 but got ${n}`, { option: 'contextLength', value: n, expected: 'an integer >= 2' });
  }
  return n;
}

const checkContext = (ctx?: number) => checkContextLength(ctx, 'evaluate');

/** Checks the options and splits the token stream into the documents to evaluate. */
export function evalDocuments(opts: Pick<EvaluateOptions, 'reference' | 'tokens' | 'maxDocs' | 'contextLength' | 'bos'>): Uint16Array[] {
  checkModels(opts);
  checkContext(opts.contextLength);
  const vocab = opts.reference.config.vocab_size;
  if (opts.bos !== undefined && !(Number.isInteger(opts.bos) && opts.bos >= 0 && opts.bos < vocab)) {
    fail(ErrorCodes.BAD_OPTION, `[evaluate] bos must be a token id (an integer in [0, ${vocab})) but got ${typeof opts.bos === 'string' ? JSON.stringify(opts.bos) : String(opts.bos)}`, { option: 'bos', value: String(opts.bos), expected: `an integer in [0, ${vocab})` });
  }
  if (opts.maxDocs !== undefined && (!Number.isInteger(opts.maxDocs) || opts.maxDocs < 1)) {
    fail(ErrorCodes.BAD_OPTION, `[evaluate] maxDocs must be a positive integer but got ${opts.maxDocs}`, { option: 'maxDocs', value: opts.maxDocs, expected: 'a positive integer' });
  }
  if (!(opts.tokens instanceof Uint16Array)) {
    fail(ErrorCodes.BAD_INPUT, '[evaluate] tokens must be a Uint16Array (see readTokens)', { option: 'tokens', expected: 'Uint16Array' });
  }
  let docs = splitDocuments(opts.tokens, opts.bos ?? BOS);
  if (opts.maxDocs !== undefined) docs = docs.slice(0, opts.maxDocs);
  const config = opts.reference.config;
  for (const doc of docs) {
    for (let i = 0; i < doc.length; i++) {
      if (doc[i] >= config.vocab_size) {
        const index = doc.byteOffset / 2 - opts.tokens.byteOffset / 2 + i;
        fail(ErrorCodes.BAD_INPUT, `[evaluate] token ${doc[i]} at index ${index} is outside the vocabulary of ${config.vocab_size}`, { option: 'tokens', index, value: doc[i], expected: `< ${config.vocab_size}` });
      }
    }
  }
  return docs;
}

/**
 * The windows of the documents, in order: ctx tokens overlapping by one ([0, ctx), [ctx-1,
 * 2ctx-1), ...), so every token after a document's first is predicted exactly once; `doc` is the
 * index of the document each belongs to.
 */
export function evalWindows(docs: Uint16Array[], contextLength?: number): { win: Uint16Array; doc: number }[] {
  const ctx = checkContext(contextLength);
  const out: { win: Uint16Array; doc: number }[] = [];
  docs.forEach((d, doc) => {
    for (let start = 0; start + 1 < d.length; start += ctx - 1) out.push({ win: d.subarray(start, Math.min(d.length, start + ctx)), doc });
  });
  return out;
}

/** The report of merged window sums. */
export function evalResult(total: WindowStats, documents: number, withCandidate: boolean, seconds: number): EvaluateResult {
  const count = total.count;
  if (count === 0) {
    fail(ErrorCodes.BAD_INPUT, '[evaluate] no token to predict: every document has fewer than two tokens', { option: 'tokens', value: documents });
  }
  const result: EvaluateResult = {
    documents,
    reference: { nll: total.nllRef / count, ppl: Math.exp(total.nllRef / count), tokens: count },
    seconds,
  };
  if (withCandidate) {
    result.candidate = { nll: total.nllCand / count, ppl: Math.exp(total.nllCand / count), tokens: count };
    result.deltaNll = result.candidate.nll - result.reference.nll;
    result.klDivergence = total.kl / count;
    result.top1Agreement = total.agree / count;
    if (total.layers.length) result.perLayer = total.layers.map((s, layer) => ({ layer, ...finishMetrics(s) }));
  }
  return result;
}

export async function evaluate(opts: EvaluateOptions): Promise<EvaluateResult> {
  const t0 = now();
  const docs = evalDocuments(opts);
  const collector = await evalCollector(opts);
  const windows = evalWindows(docs, opts.contextLength);
  const totals = windowTotals(windows, docs.length, opts.onProgress);
  let lastYield = now();
  const aborted = (done: number) => fail(ErrorCodes.ABORTED, `[evaluate] aborted after ${done} of ${docs.length} documents`, { index: done, value: String(opts.signal?.reason ?? 'aborted') });
  if (opts.signal?.aborted) aborted(0);
  for (let i = 0; i < windows.length; i++) {
    if (!totals.add(i, collector.window(windows[i].win))) continue;
    // Let the event loop breathe (UI, abort signals) without paying for it on every document.
    if (now() - lastYield > 50) {
      await yieldToLoop();
      lastYield = now();
    }
    if (opts.signal?.aborted) aborted(totals.documents);
  }
  return evalResult(totals.total, docs.length, opts.candidate !== undefined, (now() - t0) / 1000);
}

// Same running sums as the quantize metrics kernel: [sum (x-y)^2, max |x-y|, sum x^2, sum y^2, sum xy, n].
function accumulate(x: Float32Array, y: Float32Array, n: number, s: Float64Array): void {
  for (let i = 0; i < n; i++) {
    const e = x[i] - y[i];
    s[0] += e * e;
    if (Math.abs(e) > s[1]) s[1] = Math.abs(e);
    s[2] += x[i] * x[i];
    s[3] += y[i] * y[i];
    s[4] += x[i] * y[i];
  }
  s[5] += n;
}
