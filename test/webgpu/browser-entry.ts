// Bundled by browser.test.ts for the page: runs the WebGPU kernels against the wasm kernels in
// Chromium (navigator.gpu) and reports mismatches.
import { configureWasm } from '../../src/kernels/loader.js';
import { dequantize, quantize, type QuantizeOptions } from '../../src/quantize.js';
import { gpuState } from '../../src/webgpu/device.js';

export interface PageReport {
  adapter: string;
  cpuEmulated: boolean;
  results: { name: string; quantDiff: number; dequantDiff: number; backend: string }[];
}

async function run(): Promise<PageReport> {
  const [simd, scalar] = await Promise.all(['/simd.wasm', '/scalar.wasm'].map(async (u) => new Uint8Array(await (await fetch(u)).arrayBuffer())));
  configureWasm({ 'wasm-simd': simd, wasm: scalar });
  const s = await gpuState();
  if (!s.ok) throw new Error(s.reason);
  const ROW = 256;
  const x = new Float32Array(12 * ROW);
  let seed = 1;
  const rnd = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) >>> 8) / 16777216;
  for (let i = 0; i < x.length; i++) {
    const r = i >> 8;
    x[i] = r === 0 ? 0 : r === 1 ? 1e-39 * (rnd() - 0.5) : r === 2 ? 1e-6 * (rnd() - 0.5) : r === 3 ? ((i % 32) - 16) + 0.5 : (rnd() - 0.5) * 2 ** ((r % 9) - 4);
  }
  const imp = Float32Array.from({ length: ROW }, (_, i) => (i % 13 === 0 ? 0 : 3 * rnd()));
  const cases: [string, Omit<QuantizeOptions, 'rowLength'>][] = [
    ['q8_0', { format: 'q8_0' }], ['q4_0', { format: 'q4_0' }], ['q4_1', { format: 'q4_1' }], ['q5_0', { format: 'q5_0' }], ['q5_1', { format: 'q5_1' }], ['nf4', { format: 'nf4' }],
    ['int8', { format: 'int8' }], ['affine4', { format: 'affine', bits: 4 }], ['fp8_e4m3', { format: 'fp8_e4m3' }],
    ['q2_k', { format: 'q2_k' }], ['q2_k imatrix', { format: 'q2_k', importance: imp }], ['q3_k', { format: 'q3_k' }], ['q3_k imatrix', { format: 'q3_k', importance: imp }], ['q4_k', { format: 'q4_k' }], ['q5_k', { format: 'q5_k' }], ['q6_k', { format: 'q6_k' }], ['iq4_nl', { format: 'iq4_nl' }],
    ['q4_k imatrix', { format: 'q4_k', importance: imp }], ['q5_k imatrix', { format: 'q5_k', importance: imp }], ['q6_k imatrix', { format: 'q6_k', importance: imp }],
    ['iq4_nl imatrix', { format: 'iq4_nl', importance: imp }], ['q4_0 imatrix', { format: 'q4_0', importance: imp }], ['q5_1 imatrix', { format: 'q5_1', importance: imp }], ['iq4_xs', { format: 'iq4_xs' }], ['iq4_xs imatrix', { format: 'iq4_xs', importance: imp }],
    ['nvfp4_gguf', { format: 'nvfp4_gguf' }], ['mxfp4', { format: 'mxfp4' }], ['mxfp4_gguf', { format: 'mxfp4_gguf' }],
  ];
  const results: PageReport['results'] = [];
  for (const [name, o] of cases) {
    const w = await quantize(x, { ...o, rowLength: ROW, backend: 'wasm-simd' });
    const g = await quantize(x, { ...o, rowLength: ROW, backend: 'webgpu' });
    let quantDiff = 0;
    for (let i = 0; i < w.data.length; i++) if (w.data[i] !== g.data[i]) quantDiff++;
    const dw = new Uint32Array((await dequantize(w, { backend: 'wasm-simd' })).buffer);
    const dg = new Uint32Array((await dequantize(w, { backend: 'webgpu' })).buffer);
    let dequantDiff = 0;
    for (let i = 0; i < dw.length; i++) if (dw[i] !== dg[i]) dequantDiff++;
    results.push({ name, quantDiff, dequantDiff, backend: g.backend });
  }
  return { adapter: `${s.gpu.info.vendor} ${s.gpu.info.architecture}`, cpuEmulated: s.gpu.info.cpuEmulated, results };
}

(globalThis as { webgpuParity?: () => Promise<PageReport> }).webgpuParity = run;
