// WebGPU matvec on quantized weights against the wasm dequantization and an f64 dot product,
// within MATVEC_TOLERANCE (src/webgpu/run.ts). Node + SwiftShader, env from vitest.config.ts.
import { beforeAll, describe, expect, it } from 'vitest';
import { dequantize, quantize, type QuantizeOptions } from '../../src/quantize.js';
import { gpuState } from '../../src/webgpu/device.js';
import { MATVEC_TOLERANCE, webgpuMatvec } from '../../src/webgpu/index.js';
import { gaussian } from '../helpers/data.js';


const CASES: Omit<QuantizeOptions, 'rowLength'>[] = [
  { format: 'q8_0' }, { format: 'q4_0' }, { format: 'q4_1' }, { format: 'q5_0' }, { format: 'q5_1' }, { format: 'q2_k' }, { format: 'q3_k' },
  { format: 'q4_k' }, { format: 'q5_k' }, { format: 'q6_k' }, { format: 'iq4_nl' }, { format: 'iq4_xs' }, { format: 'mxfp4_gguf' }, { format: 'nvfp4_gguf' }, { format: 'mxfp4' },
  { format: 'nf4' }, { format: 'int8' }, { format: 'int8', granularity: 'group', groupSize: 128 }, { format: 'int8', granularity: 'tensor' },
  { format: 'affine', bits: 4 }, { format: 'fp8_e4m3' }, { format: 'fp8_e4m3', granularity: 'tensor' },
];

describe('webgpu matvec', () => {
  beforeAll(async () => {
    const s = await gpuState();
    expect(s.ok ? 'ok' : s.reason).toBe('ok');
  });
  for (const c of CASES) {
    it(`${c.format} ${c.granularity ?? ''} within tolerance of the wasm dequantization`, async () => {
      const rows = 48, len = 512;
      const w = gaussian(rows * len, 11, 0.05);
      for (let i = 0; i < w.length; i += 97) w[i] *= 20; // outliers
      const x = gaussian(len, 12);
      const q = await quantize(w, { ...c, rowLength: len, backend: 'wasm-simd' });
      const deq = await dequantize(q, { backend: 'wasm-simd' });
      const y = await webgpuMatvec(q, x, { chunkBytes: 16 * len });
      const tol = MATVEC_TOLERANCE(len);
      for (let r = 0; r < rows; r++) {
        let exact = 0, mag = 0;
        for (let i = 0; i < len; i++) { const p = deq[r * len + i] * x[i]; exact += p; mag += Math.abs(p); }
        expect(Math.abs(y[r] - exact), `row ${r}`).toBeLessThanOrEqual(tol * mag);
      }
    });
  }
});
