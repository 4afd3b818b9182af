// npm run bench:webgpu — throughput of the WebGPU kernels (quantize, dequantize, matvec) per format,
// end to end through quantize()/dequantize() (upload, dispatch, readback), beside wasm-simd.
// On a CPU-emulated adapter (SwiftShader here) the GPU figures say nothing about GPU speed: the
// table is then printed for correctness runs only, and says so.
// Every GPU quantization is first checked against the wasm-simd bytes (column "same bytes"); that
// call and one untimed dequantize / matvec compile the pipelines, so the timed runs measure the
// kernels, not the shader compiler.
// Options: --values N (default 1M; 256K on a CPU-emulated adapter), --budget ms per cell,
// --formats a,b (names of the first column).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dequantize, quantize, type QuantizeOptions } from '../src/quantize.js';
import { gpuState } from '../src/webgpu/device.js';
import { gpuUnsupported, webgpuMatvec } from '../src/webgpu/index.js';
import { getFormat } from '../src/formats/registry.js';
import { resolveOptions } from '../src/options.js';
import { arg, table, timeIt, weightData } from './util.js';

// Dawn in Node finds SwiftShader's Vulkan loader only through the environment the process starts
// with: rerun once with it (Debian's chromium ships both).
const CHROMIUM = '/usr/lib/chromium';
if (!process.env.WEBQUANT_BENCH_CHILD && existsSync(`${CHROMIUM}/vk_swiftshader_icd.json`) && !(process.env.LD_LIBRARY_PATH ?? '').includes(CHROMIUM)) {
  const r = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: {
      ...process.env, WEBQUANT_BENCH_CHILD: '1',
      VK_ICD_FILENAMES: process.env.VK_ICD_FILENAMES ?? `${CHROMIUM}/vk_swiftshader_icd.json`,
      LD_LIBRARY_PATH: [process.env.LD_LIBRARY_PATH, CHROMIUM].filter(Boolean).join(':'),
    },
  });
  process.exit(r.status ?? 1);
}

const ROW = 4096;
const budget = Number(arg('budget', '3000'));
const only = arg('formats', '').split(',').filter(Boolean);

// Importances as an imatrix gives them: positive, spread over orders of magnitude.
const importance = Float32Array.from(weightData(ROW, 99), (v) => Math.exp(400 * v));
const CASES: [string, Omit<QuantizeOptions, 'rowLength'>][] = [
  ['q8_0', { format: 'q8_0' }], ['q4_0', { format: 'q4_0' }], ['q4_0 imatrix', { format: 'q4_0', importance }], ['q4_1', { format: 'q4_1' }],
  ['q5_0', { format: 'q5_0' }], ['q5_1', { format: 'q5_1' }], ['q2_k', { format: 'q2_k' }], ['q3_k', { format: 'q3_k' }],
  ['q4_k', { format: 'q4_k' }], ['q4_k imatrix', { format: 'q4_k', importance }], ['q5_k', { format: 'q5_k' }], ['q6_k', { format: 'q6_k' }],
  ['q6_k imatrix', { format: 'q6_k', importance }], ['iq4_nl', { format: 'iq4_nl' }], ['iq4_nl imatrix', { format: 'iq4_nl', importance }],
  ['iq4_xs', { format: 'iq4_xs' }], ['nf4', { format: 'nf4' }],
  ['int8', { format: 'int8' }], ['affine4', { format: 'affine', bits: 4 }], ['fp8_e4m3', { format: 'fp8_e4m3' }],
];

const s = await gpuState();
if (!s.ok) {
  console.log(`No WebGPU device: ${s.reason}`);
  process.exit(1);
}
const emulated = s.gpu.info.cpuEmulated;
console.log(`adapter: ${s.gpu.info.vendor} ${s.gpu.info.architecture} ${s.gpu.info.description}${emulated ? ' (CPU-emulated)' : ''}`);
if (emulated) {
  console.log('NOTE: this adapter is a CPU emulation (SwiftShader): the WebGPU columns are correctness-only figures,');
  console.log('      not GPU performance; the quantizers use integer soft-float (exact) arithmetic, which emulation makes slow.');
}

const n = Math.max(ROW, Math.floor(Number(arg('values', String(emulated ? 1 << 18 : 1 << 20))) / ROW) * ROW);
const x = weightData(n);
const vec = x.subarray(0, ROW).slice();
const mvs = (sec: number) => n / sec / 1e6;
const rows: (string | number)[][] = [];
for (const [name, o] of CASES) {
  if (only.length && !only.includes(name)) continue;
  const opts = { ...o, rowLength: ROW };
  const ro = resolveOptions(getFormat(o.format), o);
  const q = await quantize(x, { ...opts, backend: 'wasm-simd' });
  const hasQ = !gpuUnsupported(getFormat(o.format).name, ro, 'quantize', !!o.importance);
  let same = '-';
  if (hasQ) {
    const g = await quantize(x, { ...opts, backend: 'webgpu' });
    same = g.data.length === q.data.length && g.data.every((b, i) => b === q.data[i]) ? 'yes' : 'NO';
  }
  // compile the dequantize and matvec pipelines outside the timed runs
  await dequantize(q, { backend: 'webgpu' });
  await webgpuMatvec(q, vec);
  const qGpu = hasQ ? await timeIt(() => quantize(x, { ...opts, backend: 'webgpu' }), 5, budget, 1) : NaN;
  const qWasm = await timeIt(() => quantize(x, { ...opts, backend: 'wasm-simd' }), 5, budget, 1);
  const dGpu = await timeIt(() => dequantize(q, { backend: 'webgpu' }), 5, budget, 1);
  const dWasm = await timeIt(() => dequantize(q, { backend: 'wasm-simd' }), 5, budget, 1);
  const mGpu = await timeIt(() => webgpuMatvec(q, vec), 5, budget, 1);
  rows.push([name, hasQ ? mvs(qGpu) : '-', mvs(qWasm), hasQ ? qWasm / qGpu : '-', same, mvs(dGpu), mvs(dWasm), mvs(mGpu)]);
  console.log(`${name} done`);
}
console.log(`\n${n} values (rows of ${ROW}), million values per second, end to end${emulated ? ' — SwiftShader: correctness-only figures' : ''}`);
console.log(table(['format', 'quant webgpu', 'quant wasm-simd', 'quant gpu/wasm', 'same bytes', 'dequant webgpu', 'dequant wasm-simd', 'matvec webgpu'], rows));
process.exit(0);
