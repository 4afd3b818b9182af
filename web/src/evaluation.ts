// The page's side of an evaluation: one Worker per run (eval-worker.ts), progress and stage
// messages passed on, the answer (or the error, as a WebquantError again) returned, the Worker
// ended. No DOM here.
import { isSerializedError, ErrorCodes, WebquantError, type EvaluateProgress, type EvaluateResult, type WasmBuild } from '../../src/index.js';
import type { EvalRequest, FromWorker, ToWorker } from './eval-protocol.js';

export interface EvaluationRun {
  done: Promise<EvaluateResult & { build: WasmBuild }>;
  /** Stops the evaluation: `done` rejects with E_ABORTED. */
  cancel(): void;
}

export function startEvaluation(req: Omit<EvalRequest, 'type'>, on: { stage?(text: string): void; progress?(p: EvaluateProgress): void } = {}): EvaluationRun {
  const worker = new Worker(new URL('./eval-worker.ts', import.meta.url), { type: 'module', name: 'webquant-eval' });
  const send = (m: ToWorker) => worker.postMessage(m);
  const done = new Promise<EvaluateResult & { build: WasmBuild }>((resolve, reject) => {
    worker.onmessage = (ev: MessageEvent<FromWorker>) => {
      const m = ev.data;
      if (m.type === 'stage') on.stage?.(m.text);
      else if (m.type === 'progress') on.progress?.(m);
      else if (m.type === 'done') resolve({ ...m.result, build: m.build });
      else {
        const err = m.error;
        reject(isSerializedError(err) ? WebquantError.fromJSON(err) : Object.assign(new Error(err.message), { name: err.name }));
      }
    };
    // The Worker's script did not load or threw outside a run.
    worker.onerror = (ev) => {
      ev.preventDefault();
      reject(new WebquantError(ErrorCodes.WORKER, `[demo] the evaluation Worker failed: ${ev.message || 'could not start'}`, {}));
    };
  });
  done.finally(() => worker.terminate()).catch(() => undefined);
  send({ type: 'run', ...req });
  return { done, cancel: () => send({ type: 'cancel' }) };
}
