// Worker entry of bench/matvec.ts: registers tsx's ESM loader in this worker thread (execArgv
// ['--import', 'tsx'] does not reach worker threads on Node 20), then runs the TypeScript worker,
// which tsx compiles to JS on import.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);
