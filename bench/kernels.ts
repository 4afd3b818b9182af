// npm run bench:kernels — single-thread quantize / dequantize throughput per format.
// Kernel columns: GB/s of float32 input (quantize) or float32 output (dequantize) with the data
// resident in wasm memory, for the SIMD and the scalar build. "API" is quantize() end to end
// (copy into wasm, NaN scan, kernel, copy out). "TS" is a plain TypeScript quantizer where one
// exists. Large = 64M values (256 MB, out of cache; slow formats are timed on a prefix of whole
// rows that still streams from memory), small = 64K values (in cache). Medians of repeated runs.
// Options: --values N, --formats a,b, --budget ms per cell, --json path.
import { formats } from '../src/formats/registry.js';
import { loadKernels } from '../src/kernels/loader.js';
import { quantizeWith } from '../src/quantize.js';
import { baselines } from './baselines.js';
import { kernelOnlyArgs, Resident, ROW } from './resident.js';
import { arg, weightData, table, timeIt, writeJson } from './util.js';

const large = Number(arg('values', String(64 << 20)));
const budget = Number(arg('budget', '2500'));
const only = arg('formats', '').split(',').filter(Boolean);
const jsonPath = arg('json', 'bench/results/kernels.json');

async function rate(run: () => unknown, bytes: number): Promise<number> {
  return bytes / (await timeIt(run, 25, budget)) / 1e9;
}

/** Rows of a prefix that takes about `seconds` at the rate measured on 16 rows. */
function prefixRows(run: (rows: number) => unknown, maxRows: number, seconds = 0.3): number {
  const probe = Math.min(16, maxRows);
  const t0 = performance.now();
  run(probe);
  const perRow = Math.max((performance.now() - t0) / 1000 / probe, 1e-9);
  return Math.max(probe, Math.min(maxRows, Math.floor(seconds / perRow)));
}

const big = weightData(large);
const small = big.subarray(0, 64 << 10);
const results: Record<string, Record<string, number>> = {};
const rows: (string | number)[][] = [];
const builds = { simd: await loadKernels('wasm-simd', 'bench'), scalar: await loadKernels('wasm', 'bench') };
const apiK = await loadKernels('wasm-simd');

for (const f of formats.values()) {
  if (only.length && !only.includes(f.name)) continue;
  const r: Record<string, number> = {};
  const extra = await kernelOnlyArgs(f, builds.simd, big);
  if (extra) {
    for (const [name, k] of Object.entries(builds)) {
      const res = new Resident(k, f, large / ROW, big, extra);
      const n = prefixRows((x) => res.quantize(x), large / ROW);
      r[`${name}Large`] = await rate(() => res.quantize(n), n * ROW * 4);
      const ns = small.length / ROW;
      r[`${name}Small`] = await rate(() => res.quantize(ns), ns * ROW * 4);
      res.quantize(large / ROW >= n ? n : large / ROW);
      r[`${name}Dequant`] = await rate(() => res.dequantize(n), n * ROW * 4);
    }
  }
  // End to end through the public API (every format, host steps included).
  const apiRows = Math.min(large / ROW, 4096);
  const probeRows = prefixRows((x) => quantizeWith(apiK, big.subarray(0, x * ROW), { format: f.name, rowLength: ROW }), apiRows);
  r.api = await rate(() => quantizeWith(apiK, big.subarray(0, probeRows * ROW), { format: f.name, rowLength: ROW }), probeRows * ROW * 4);
  const base = baselines[f.name];
  if (base) {
    const n = Math.min(large / ROW, 512);
    r.ts = await rate(() => base(big.subarray(0, n * ROW), ROW), n * ROW * 4);
  }
  results[f.name] = r;
  rows.push([f.name, r.simdLarge, r.scalarLarge, r.simdLarge / r.scalarLarge, r.simdSmall, r.scalarSmall, r.api, r.ts ?? NaN, r.simdDequant, r.scalarDequant]);
  console.error(`${f.name}: SIMD ${r.simdLarge?.toFixed(3)} GB/s`);
}

console.log(`\nwebquant kernels, single thread, GB/s of float32 (medians). Large = ${large} values, small = ${small.length}.\n`);
console.log(table(['format', 'SIMD large', 'scalar large', 'SIMD/scalar', 'SIMD small', 'scalar small', 'API (quantize())', 'TS baseline', 'dequant SIMD', 'dequant scalar'], rows));
writeJson(jsonPath, { date: new Date().toISOString(), node: process.version, values: large, row: ROW, results });
console.log(`\nwritten ${jsonPath}`);
