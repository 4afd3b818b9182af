// The page's side of an evaluation: one Worker per run (eval-worker.ts), or several, each with its
// own copy of the models, running the context windows the page hands to whichever is free; their
// sums are added in window order (inOrder, windowTotals), so the figures are the one Worker's for
// any count.
// Progress and stage messages passed on, the answer (or the error, as a WebquantError again)
// returned, the Workers ended. No DOM here.
import { isSerializedError, ErrorCodes, WebquantError, type EvaluateProgress, type EvaluateResult, type WasmBuild } from '../../src/index.js';
import { evalResult, windowTotals, type WindowStats, type WindowTotals } from '../../src/eval/evaluate.js';
import { inOrder } from '../../src/eval/in-order.js';
import type { EvalPlan, EvalRequest, FromWorker, ToWorker } from './eval-protocol.js';

export interface EvaluationRun {
  done: Promise<EvaluateResult & { build: WasmBuild }>;
  /** Stops the evaluation: `done` rejects with E_ABORTED. */
  cancel(): void;
}

export interface EvaluationEvents {
  stage?(text: string): void;
  progress?(p: EvaluateProgress): void;
}

type Result = EvaluateResult & { build: WasmBuild };

function spawn(onMessage: (m: FromWorker) => void, onFail: (e: Error) => void): Worker {
  const worker = new Worker(new URL('./eval-worker.ts', import.meta.url), { type: 'module', name: 'webquant-eval' });
  worker.onmessage = (ev: MessageEvent<FromWorker>) => onMessage(ev.data);
  // The Worker's script did not load or threw outside a run.
  worker.onerror = (ev) => {
    ev.preventDefault();
    onFail(new WebquantError(ErrorCodes.WORKER, `[demo] the evaluation Worker failed: ${ev.message || 'could not start'}`, {}));
  };
  return worker;
}

const asError = (m: Extract<FromWorker, { type: 'error' }>) =>
  isSerializedError(m.error) ? WebquantError.fromJSON(m.error) : Object.assign(new Error(m.error.message), { name: m.error.name });

/** `threads` Workers (1: one runs evaluate() whole). */
export function startEvaluation(req: Omit<EvalRequest, 'type'>, on: EvaluationEvents = {}, threads = 1): EvaluationRun {
  return threads > 1 ? startWindows(req, on, threads) : startOne(req, on);
}

function startOne(req: Omit<EvalRequest, 'type'>, on: EvaluationEvents): EvaluationRun {
  let worker!: Worker;
  const done = new Promise<Result>((resolve, reject) => {
    worker = spawn((m) => {
      if (m.type === 'stage') on.stage?.(m.text);
      else if (m.type === 'progress') on.progress?.(m);
      else if (m.type === 'done') resolve({ ...m.result, build: m.build });
      else if (m.type === 'error') reject(asError(m));
    }, reject);
  });
  done.finally(() => worker.terminate()).catch(() => undefined);
  const send = (m: ToWorker) => worker.postMessage(m);
  send({ type: 'run', ...req });
  return { done, cancel: () => send({ type: 'cancel' }) };
}

function startWindows(req: Omit<EvalRequest, 'type'>, on: EvaluationEvents, threads: number): EvaluationRun {
  const t0 = performance.now();
  const workers: Worker[] = [];
  let fail!: (e: Error) => void;
  const done = new Promise<Result>((resolve, reject) => {
    fail = reject;
    let plan: EvalPlan | undefined;
    let build: WasmBuild = 'wasm';
    let opened = 0;
    let next = 0; // the next window to hand out
    let totals: WindowTotals;
    const give = (w: Worker) => {
      if (!plan || next >= plan.windows.length) return;
      const i = next++;
      w.postMessage({ type: 'window', index: i, tokens: plan.windows[i].win } satisfies ToWorker);
    };
    const complete = () => {
      try {
        resolve({ ...evalResult(totals.total, plan!.documents, true, (performance.now() - t0) / 1000), build });
      } catch (e) {
        reject(e); // no token to predict: evaluate()'s error
      }
    };
    const finished = inOrder<WindowStats>((i, stats) => {
      totals.add(i, stats);
      if (i === plan!.windows.length - 1) complete();
    });
    for (let k = 0; k < threads; k++) {
      const w = spawn((m) => {
        if (m.type === 'stage') {
          if (k === 0) on.stage?.(m.text);
        } else if (m.type === 'opened') {
          if (m.plan) plan = m.plan;
          build = m.build;
          if (++opened < threads) return;
          totals = windowTotals(plan!.windows, plan!.documents, on.progress);
          on.stage?.(`Evaluating on ${threads} Workers…`);
          if (plan!.windows.length === 0) complete();
          for (const x of workers) give(x);
        } else if (m.type === 'window-done') {
          finished(m.index, m.stats);
          give(w);
        } else if (m.type === 'error') {
          reject(asError(m));
        }
      }, reject);
      workers.push(w);
    }
  });
  done.finally(() => workers.forEach((w) => w.terminate())).catch(() => undefined);
  workers.forEach((w, k) => w.postMessage({ type: 'open', ...req, plan: k === 0 } satisfies ToWorker));
  return {
    done,
    cancel: () => fail(new WebquantError(ErrorCodes.ABORTED, '[demo] the evaluation was cancelled', {})),
  };
}
