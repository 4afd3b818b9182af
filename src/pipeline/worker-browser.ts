// Web Worker entry of the pool (see worker.ts). Load it as a module worker.
import { Comlink } from './transfer.js';
import { createWorkerApi } from './worker.js';

Comlink.expose(createWorkerApi());
