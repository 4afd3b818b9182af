// Panel 5 of the demo page: what quantization cost, measured by the reference forward in Web
// Workers (evaluation.ts: one, or Threads of them, each with its own copy of the models). The original is the checkpoint of panel 1; the quantized one a chosen
// file, else a URL, else the result of panel 4; the tokens a URL or a file.
import type { EvaluateResult, WasmBuild } from '../../src/index.js';
import { startEvaluation, type EvaluationRun } from './evaluation.js';
import type { Bytes } from './eval-protocol.js';
import type { InputSpec } from './job.js';

type ErrorState = { name: string; message: string; isWebquantError: boolean; code?: string; tensor?: string };

/** What a test (or the console) can read about the last evaluation: `webquantDemo.evaluation`. */
export interface EvaluationState {
  state: 'running' | 'done' | 'error';
  /** The quantized checkpoint evaluated (file name or URL). */
  quantized: string;
  progress?: { documents: number; totalDocuments: number; tokens: number };
  result?: EvaluateResult & { build: WasmBuild };
  error?: ErrorState;
}

export interface EvalPanelDeps {
  demo: { evaluation?: EvaluationState };
  /** The checkpoint of panel 1. */
  original(): InputSpec | undefined;
  /** The output of panel 4, if any. */
  quantizedResult(): Bytes | undefined;
  errorState(e: unknown): ErrorState;
  errorText(e: unknown): string;
}

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

export function setupEvalPanel(d: EvalPanelDeps): void {
  const els = {
    quantFile: $<HTMLInputElement>('eval-quantized-file'), quantUrl: $<HTMLInputElement>('eval-quantized-url'),
    tokensUrl: $<HTMLInputElement>('eval-tokens-url'), tokensFile: $<HTMLInputElement>('eval-tokens-file'),
    docs: $<HTMLInputElement>('eval-docs'), context: $<HTMLInputElement>('eval-context'), threads: $<HTMLInputElement>('eval-threads'),
    run: $<HTMLButtonElement>('eval-run'), cancel: $<HTMLButtonElement>('eval-cancel'), status: $('eval-status'),
    bar: $<HTMLProgressElement>('eval-bar'), summary: $<HTMLTableElement>('eval-summary').tBodies[0],
    cost: $('eval-cost'), layers: $<HTMLTableElement>('eval-layers').tBodies[0],
  };
  let running: EvaluationRun | undefined;

  const status = (text: string, state: 'running' | 'done' | 'error') => {
    els.status.textContent = text;
    els.status.dataset.state = state;
  };
  const chosen = (input: HTMLInputElement): Bytes | undefined => {
    const f = input.files?.[0];
    return f ? { blob: f, name: f.name } : undefined;
  };
  const url = (input: HTMLInputElement): Bytes | undefined => (input.value.trim() ? { url: input.value.trim() } : undefined);
  // Empty means "no limit" (every document) or "the default" (context).
  const positiveInt = (el: HTMLInputElement) => {
    const n = Number(el.value);
    return el.value.trim() && Number.isInteger(n) && n > 0 ? n : undefined;
  };
  const cell = (row: HTMLTableRowElement, text: string, num = false) => {
    const td = row.insertCell();
    td.textContent = text;
    if (num) td.className = 'num';
  };

  function show(r: EvaluateResult): void {
    for (const [label, s] of [['original', r.reference], ['quantized', r.candidate!]] as const) {
      const row = els.summary.insertRow();
      cell(row, label);
      cell(row, s.nll.toFixed(5), true);
      cell(row, s.ppl.toFixed(3), true);
    }
    els.cost.textContent = `ΔNLL ${r.deltaNll!.toFixed(5)} nats/token · KL(original ‖ quantized) ${r.klDivergence!.toExponential(3)} nats/token · top-1 agreement ${(100 * r.top1Agreement!).toFixed(2)} %`;
    for (const l of r.perLayer ?? []) {
      const row = els.layers.insertRow();
      cell(row, String(l.layer), true);
      cell(row, l.rmse.toExponential(3), true);
      cell(row, Number.isFinite(l.sqnrDb) ? l.sqnrDb.toFixed(1) : '∞', true);
      cell(row, l.cosine.toFixed(6), true);
    }
  }

  async function run(): Promise<void> {
    const original = d.original();
    const quantized = chosen(els.quantFile) ?? url(els.quantUrl) ?? d.quantizedResult();
    const tokens = chosen(els.tokensFile) ?? url(els.tokensUrl);
    if (!original || !quantized || !tokens) {
      const missing = !original ? 'the original checkpoint (panel 1)' : !quantized ? 'a quantized checkpoint (quantize above, or choose a file or URL)' : 'evaluation tokens (a URL or a file)';
      status(`Needs ${missing}.`, 'error');
      return;
    }
    const ev: EvaluationState = { state: 'running', quantized: 'url' in quantized ? quantized.url : quantized.name };
    d.demo.evaluation = ev;
    els.run.disabled = true;
    els.cancel.disabled = false;
    els.bar.value = 0;
    els.summary.replaceChildren();
    els.layers.replaceChildren();
    els.cost.textContent = '';
    const threads = Math.min(16, positiveInt(els.threads) ?? 1);
    status(threads > 1 ? `Starting ${threads} Workers…` : 'Starting the Worker…', 'running');
    try {
      running = startEvaluation(
        { original, quantized, tokens, maxDocs: positiveInt(els.docs), contextLength: positiveInt(els.context) },
        {
          stage: (text) => status(text, 'running'),
          progress: (p) => {
            ev.progress = { documents: p.documents, totalDocuments: p.totalDocuments, tokens: p.tokens };
            els.bar.value = p.documents / p.totalDocuments;
            status(`Evaluating: ${p.documents} of ${p.totalDocuments} documents, ${p.tokens} tokens`, 'running');
          },
        },
        threads,
      );
      const r = await running.done;
      ev.result = r;
      ev.state = 'done';
      show(r);
      status(`Done: ${r.documents} documents, ${r.reference.tokens} predicted tokens in ${r.seconds.toFixed(2)} s (${r.build}, ${threads > 1 ? `${threads} Web Workers` : 'Web Worker'}).`, 'done');
    } catch (e) {
      ev.error = d.errorState(e);
      ev.state = 'error';
      status(d.errorText(e), 'error');
    } finally {
      running = undefined;
      els.run.disabled = false;
      els.cancel.disabled = true;
    }
  }

  els.run.addEventListener('click', () => void run());
  els.cancel.addEventListener('click', () => running?.cancel());
}
