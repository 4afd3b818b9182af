// What quantization cost: next-token NLL of a reference model and, given a candidate (for example
// the quantized weights), the NLL difference, KL(P_ref || P_cand), top-1 agreement and the error
// of the residual stream after every layer. Both models run in lockstep, one token at a time.
import { ErrorCodes, fail } from '../errors.js';
import { finishMetrics, newMetricsAccumulator, type ErrorMetrics } from '../metrics.js';
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

export async function evaluate(opts: EvaluateOptions): Promise<EvaluateResult> {
  const t0 = now();
  const ctx = opts.contextLength ?? DEFAULT_CONTEXT;
  if (!Number.isInteger(ctx) || ctx < 2) {
    fail(ErrorCodes.BAD_OPTION, `[evaluate] contextLength must be an integer >= 2 but got ${ctx}`, { option: 'contextLength', value: ctx, expected: 'an integer >= 2' });
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

  const withCand = opts.candidate !== undefined;
  const perLayer = opts.perLayer ?? withCand;
  const ref = await LlamaModel.load(config, opts.reference.weights);
  const cand = withCand ? await LlamaModel.load(config, opts.candidate!) : undefined;
  const capture = perLayer && withCand;

  const V = config.vocab_size, dim = config.hidden_size;
  const lpRef = new Float64Array(V), lpCand = new Float64Array(V);
  const layerAcc = capture ? Array.from({ length: config.num_hidden_layers }, () => newMetricsAccumulator()) : [];
  const refLayers = capture ? Array.from({ length: config.num_hidden_layers }, () => new Float32Array(ctx * dim)) : [];
  const saveLayer = (l: number, h: Float32Array) => refLayers[l].set(h);
  const compareLayer = (l: number, h: Float32Array) => accumulate(refLayers[l], h, h.length, layerAcc[l]);
  let nllRef = 0, nllCand = 0, kl = 0, agree = 0, count = 0;
  let lastYield = now();

  const runWindow = (win: Uint16Array) => {
    const n = win.length - 1; // the last token is only a target
    const inp = win.subarray(0, n);
    const lr = ref.forward(inp, capture ? { onLayer: saveLayer } : {});
    const lc = cand?.forward(inp, capture ? { onLayer: compareLayer } : {});
    for (let p = 0; p < n; p++) {
      const target = win[p + 1];
      const argRef = logSoftmax(lr.subarray(p * V, (p + 1) * V), lpRef);
      nllRef -= lpRef[target];
      if (lc) {
        const argCand = logSoftmax(lc.subarray(p * V, (p + 1) * V), lpCand);
        nllCand -= lpCand[target];
        let k = 0;
        for (let i = 0; i < V; i++) k += Math.exp(lpRef[i]) * (lpRef[i] - lpCand[i]);
        kl += k;
        if (argRef === argCand) agree++;
      }
    }
    count += n;
  };

  const aborted = (done: number) => fail(ErrorCodes.ABORTED, `[evaluate] aborted after ${done} of ${docs.length} documents`, { index: done, value: String(opts.signal?.reason ?? 'aborted') });
  if (opts.signal?.aborted) aborted(0);
  for (let di = 0; di < docs.length; di++) {
    const doc = docs[di];
    // Windows of ctx tokens overlapping by one: [0, ctx), [ctx-1, 2ctx-1), ...
    for (let start = 0; start + 1 < doc.length; start += ctx - 1) {
      runWindow(doc.subarray(start, Math.min(doc.length, start + ctx)));
    }
    opts.onProgress?.({ documents: di + 1, totalDocuments: docs.length, tokens: count });
    // Let the event loop breathe (UI, abort signals) without paying for it on every document.
    if (now() - lastYield > 50) {
      await yieldToLoop();
      lastYield = now();
    }
    if (opts.signal?.aborted) aborted(di + 1);
  }

  if (count === 0) {
    fail(ErrorCodes.BAD_INPUT, '[evaluate] no token to predict: every document has fewer than two tokens', { option: 'tokens', value: docs.length });
  }
  const result: EvaluateResult = {
    documents: docs.length,
    reference: { nll: nllRef / count, ppl: Math.exp(nllRef / count), tokens: count },
    seconds: 0,
  };
  if (withCand) {
    result.candidate = { nll: nllCand / count, ppl: Math.exp(nllCand / count), tokens: count };
    result.deltaNll = result.candidate.nll - result.reference.nll;
    result.klDivergence = kl / count;
    result.top1Agreement = agree / count;
    if (capture) result.perLayer = layerAcc.map((s, layer) => ({ layer, ...finishMetrics(s) }));
  }
  result.seconds = (now() - t0) / 1000;
  return result;
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
