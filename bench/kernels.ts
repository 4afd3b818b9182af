// npm run bench:kernels — single-thread quantize / dequantize throughput per format.
// GB/s of float32 input (quantize) and of float32 output (dequantize), medians of repeated runs,
// for the SIMD build, the scalar build and a plain TypeScript baseline where one exists.
// Out of cache: a 64M-value tensor (256 MB); slow formats are timed on a row prefix of it, which
// still streams from memory. In cache: a 64K-value tensor.
// Options: --values N (large tensor size), --formats a,b,c, --json path, --budget ms per cell.
import { formats } from '../src/formats/registry.js';
import { loadKernels } from '../src/kernels/loader.js';
import { quantizeWith, dequantizeWith, type QuantizeOptions } from '../src/quantize.js';
import { baselines } from './baselines.js';
import { arg, table, timeIt, writeJson } from './util.js';

const ROW = 4096;
const large = Number(arg('values', String(64 << 20)));
const budget = Number(arg('budget', '3000'));
const only = arg('formats', '').split(',').filter(Boolean);
const jsonPath = arg('json', 'bench/results/kernels.json');

function data(n: number): Float32Array {
  const v = new Float32Array(n);
  let s = 12345;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const a = (s >>> 8) / 16777216;
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    v[i] = 0.02 * (a + (s >>> 8) / 16777216 - 1);
  }
  return v;
}

const big = data(large);
const small = data(64 << 10);
const simd = await loadKernels('wasm-simd');
const scalar = await loadKernels('wasm');
const results: Record<string, Record<string, number>> = {};
const rows: (string | number)[][] = [];

// A prefix of whole rows sized so that one run takes about `target` seconds at a measured rate.
async function rate(run: (v: Float32Array) => unknown, v: Float32Array, perRunBytes: number): Promise<number> {
  const t = await timeIt(() => run(v), 15, budget);
  return perRunBytes / t / 1e9;
}

async function measure(k: typeof simd, opts: QuantizeOptions, v: Float32Array): Promise<number> {
  // Probe on 64 rows to choose a prefix that takes ~0.5 s, then time that prefix.
  const probe = v.subarray(0, Math.min(v.length, 64 * ROW));
  const t0 = performance.now();
  await quantizeWith(k, probe, opts);
  const perValue = (performance.now() - t0) / 1000 / probe.length;
  const n = Math.min(v.length, Math.max(probe.length, Math.floor(0.5 / perValue / ROW) * ROW));
  const sub = v.subarray(0, n);
  return rate((x) => quantizeWith(k, x as Float32Array, opts), sub, n * 4);
}

for (const f of formats.values()) {
  if (only.length && !only.includes(f.name)) continue;
  const opts: QuantizeOptions = { format: f.name, rowLength: ROW };
  const r: Record<string, number> = {};
  r.simdLarge = await measure(simd, opts, big);
  r.scalarLarge = await measure(scalar, opts, big);
  r.simdSmall = await measure(simd, opts, small);
  r.scalarSmall = await measure(scalar, opts, small);
  const base = baselines[f.name];
  r.tsLarge = base ? await rate((x) => base(x as Float32Array, ROW), big.subarray(0, Math.min(big.length, 256 * ROW)), Math.min(big.length, 256 * ROW) * 4) : NaN;
  const qt = await quantizeWith(simd, big.subarray(0, Math.min(big.length, 4096 * ROW)), opts);
  const outBytes = qt.shape[0] * qt.shape[1] * 4;
  r.dequantSimd = await rate(() => dequantizeWith(simd, qt), big, outBytes);
  r.dequantScalar = await rate(() => dequantizeWith(scalar, qt), big, outBytes);
  results[f.name] = r;
  const row = [f.name, r.simdLarge, r.scalarLarge, r.simdLarge / r.scalarLarge, r.tsLarge, r.simdSmall, r.scalarSmall, r.dequantSimd, r.dequantScalar];
  rows.push(row);
  console.error(`${f.name} done`);
}

console.log(`\nwebquant kernel throughput, single thread, GB/s of float32 (median). Large = ${large} values, small = 65536.\n`);
console.log(table(['format', 'SIMD large', 'scalar large', 'SIMD/scalar', 'TS baseline', 'SIMD small', 'scalar small', 'dequant SIMD', 'dequant scalar'], rows));
writeJson(jsonPath, { date: new Date().toISOString(), node: process.version, values: large, row: ROW, results });
console.log(`\nwritten ${jsonPath}`);
