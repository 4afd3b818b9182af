// npm run bench:kernels — single-thread quantize / dequantize throughput per format.
// Kernel columns: GB/s of float32 input (quantize) or float32 output (dequantize) with the data
// resident in wasm memory, for the SIMD and the scalar build. "API" is quantize() end to end
// (copy into wasm, NaN scan, kernel, copy out). "TS" is a plain TypeScript quantizer where one
// exists. Large = 64M values (256 MB, out of cache; slow formats are timed on a prefix of whole
// rows that still streams from memory), small = 64K values (in cache). Medians of repeated runs.
// Options: --values N, --formats a,b, --budget ms per cell, --json path.
import { formats } from '../src/formats/registry.js';
import { layoutOf, type FormatSpec } from '../src/formats/types.js';
import { loadKernels, type Kernels } from '../src/kernels/loader.js';
import { ARGS_BYTES, writeArgs } from '../src/kernels/args.js';
import { resolveOptions } from '../src/options.js';
import { baseArgs, quantizeWith } from '../src/quantize.js';
import { baselines } from './baselines.js';
import { arg, weightData, table, timeIt, writeJson } from './util.js';

const ROW = 4096;
const large = Number(arg('values', String(64 << 20)));
const budget = Number(arg('budget', '2500'));
const only = arg('formats', '').split(',').filter(Boolean);
const jsonPath = arg('json', 'bench/results/kernels.json');

/** Input, output sections and a dequantize target resident in a bench-only wasm instance. */
class Resident {
  args = 0; scratch = 0; input = 0; out: number[] = []; deq = 0;
  constructor(readonly k: Kernels, readonly f: FormatSpec, readonly rows: number, values: Float32Array, extra: Record<string, number>) {
    const o = resolveOptions(f, { format: f.name });
    const layout = layoutOf(f, rows, ROW, o);
    const align = (x: number) => (x + 63) & ~63;
    let at = 0;
    this.args = at; at += ARGS_BYTES;
    this.scratch = at = align(at); at += 16 * ROW + 65536;
    this.input = at = align(at); at += rows * ROW * 4;
    for (const s of layout.sections) { at = align(at); this.out.push(at); at += s.bytes; }
    this.deq = at = align(at); at += rows * ROW * 4;
    const base = k.reserve(at);
    for (const key of ['args', 'scratch', 'input', 'deq'] as const) this[key] += base;
    this.out = this.out.map((p) => p + base);
    k.f32(this.input, rows * ROW).set(values.subarray(0, rows * ROW));
    writeArgs(k.buffer, this.args, { ...baseArgs(o), scratch: this.scratch, scales: this.out[1] ?? 0, biases: this.out[2] ?? 0, aux: this.out[3] ?? 0, ...extra });
  }
  quantize(rows: number): void {
    this.k.fn(`${this.f.kernel}_quantize`)(this.input, 0, rows, ROW, this.out[0], this.args);
  }
  dequantize(rows: number): void {
    this.k.fn(`${this.f.kernel}_dequantize`)(this.out[0], rows, ROW, this.deq, this.args);
  }
}

/**
 * Extra kernel args when the kernels alone can run the format at its default options: no tensor
 * sections, no finish step, and a prepare step (if any) that needs no pass over the data.
 */
async function kernelOnlyArgs(f: FormatSpec, k: Kernels): Promise<Record<string, number> | undefined> {
  const o = resolveOptions(f, { format: f.name });
  if (f.finish || f.tensorSections?.(1, ROW, o).length) return undefined;
  if (!f.prepare) return {};
  let reduced = false;
  const args = await f.prepare({
    kernels: k, nrows: 1, rowLen: ROW, opts: o,
    reduce: async () => { reduced = true; return new DataView(new ArrayBuffer(64)); },
  });
  return reduced ? undefined : (args as Record<string, number>);
}

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
  const extra = await kernelOnlyArgs(f, builds.simd);
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
