// Plain TypeScript quantizers used as the baseline column of bench:kernels: what a web app
// without webquant would run. They live beside the tests' reference implementations.
import { quantizeQ8_0Ts, quantizeQ4_0Ts } from '../test/reference/baseline-ref.js';

export const baselines: Record<string, (values: Float32Array, rowLen: number) => Uint8Array> = {
  q8_0: quantizeQ8_0Ts,
  q4_0: quantizeQ4_0Ts,
};
