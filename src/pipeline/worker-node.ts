// worker_threads entry of the pool (see worker.ts).
import { parentPort } from 'node:worker_threads';
import nodeEndpoint from 'comlink/dist/esm/node-adapter.mjs';
import { Comlink } from './transfer.js';
import { createWorkerApi } from './worker.js';

if (!parentPort) throw new Error('[pipeline] worker-node.js must run in a worker thread');
Comlink.expose(createWorkerApi(), nodeEndpoint(parentPort));
