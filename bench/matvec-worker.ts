// A worker of bench/matvec.ts's "with workers" table: holds a row slice of a quantized tensor
// resident in its own wasm instance (serve kernels, SIMD build) and computes its part of y = W x
// whenever the main thread bumps the generation counter.
//
// Shared memory per case: x (rowLength f32, written by the main thread before each call), y (rows
// f32, each worker writes rows [r0, r1)), ctrl (Int32Array): [0] generation, [1] workers done,
// [2] command (0 = run, 1 = leave the loop and wait for the next 'load' message).
import { parentPort } from 'node:worker_threads';
import type { QuantizedTensor } from '../src/quantize.js';
import { serveKernels } from '../src/serve/kernels.js';
import { residentKernel } from './matvec-resident.js';

export interface LoadMessage {
  qt: QuantizedTensor;
  r0: number;
  x: SharedArrayBuffer;
  y: SharedArrayBuffer;
  ctrl: SharedArrayBuffer;
  workers: number;
  /** Float64Array [2 * workers]: each worker's start and end time (performance.timeOrigin + now) of its last call. */
  times: SharedArrayBuffer;
  /** This worker's index among the case's workers. */
  index: number;
}

const k = await serveKernels('wasm-simd');

parentPort!.on('message', (m: LoadMessage) => {
  const R = residentKernel(k, m.qt, false);
  const xs = new Float32Array(m.x);
  const ys = new Float32Array(m.y, m.r0 * 4, m.qt.shape[0]);
  const ctrl = new Int32Array(m.ctrl);
  const times = new Float64Array(m.times);
  let gen = Atomics.load(ctrl, 0);
  parentPort!.postMessage('ready');
  for (;;) {
    Atomics.wait(ctrl, 0, gen);
    gen = Atomics.load(ctrl, 0);
    const stop = Atomics.load(ctrl, 2) === 1;
    if (!stop) {
      times[2 * m.index] = performance.timeOrigin + performance.now();
      R.x.set(xs);
      R.call();
      ys.set(R.y);
      times[2 * m.index + 1] = performance.timeOrigin + performance.now();
    }
    if (Atomics.add(ctrl, 1, 1) + 1 === m.workers) Atomics.notify(ctrl, 1);
    if (stop) break;
  }
});
parentPort!.postMessage('started');
