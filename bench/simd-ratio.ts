// npm run bench:simd-ratio (or npx tsx bench/simd-ratio.ts) — the SIMD build's quantize speed over
// the scalar build's, measured robustly on a shared machine: both builds in one process on the
// same resident data, timed samples interleaved (SIMD, scalar, scalar, SIMD, ...) so that a load
// change hits both, and the median of the per-pair ratios reported beside the medians of each
// build. bench/kernels.ts times each build's cells seconds apart, which on a busy machine moves a
// ratio by 10-20%.
// Options: --formats a,b (default q3_k,q2_k,fp8_e4m3,fp8_e5m2), --values N (resident input,
// default 4M), --pairs N (default 15), --ms N (minimum SIMD sample, default 40),
// --imatrix (also time with an importance matrix, formats that take one; formats that need one
// always get it), --baseline file.wasm
// (time the SIMD build against that wasm instead of the scalar build, e.g. a saved earlier SIMD
// build: a same-process A/B of a kernel change), --build file.wasm (time that wasm instead of
// the current SIMD build, e.g. the scalar build against a saved earlier scalar build).
import { formats } from '../src/formats/registry.js';
import { readFileSync } from 'node:fs';
import { configureWasm, loadKernels } from '../src/kernels/loader.js';
import { IMPORTANCE, kernelOnlyArgs, Resident, ROW } from './resident.js';
import { alternate, arg, median, table, weightData } from './util.js';

const only = arg('formats', 'q3_k,q2_k,fp8_e4m3,fp8_e5m2').split(',').filter(Boolean);
const values = Number(arg('values', String(4 << 20)));
const pairs = Number(arg('pairs', '15'));
const minMs = Number(arg('ms', '40'));
const withImatrix = process.argv.includes('--imatrix');
const dequant = process.argv.includes('--dequant');

const data = weightData(values);
const baseline = arg('baseline', '');
const build = arg('build', '');
if (build) configureWasm({ 'wasm-simd': readFileSync(build) });
const simd = await loadKernels('wasm-simd', 'bench');
if (baseline) configureWasm({ wasm: readFileSync(baseline) });
const scalar = await loadKernels('wasm', 'bench');
const out: (string | number)[][] = [];

/** Seconds of `reps` calls of quantize(rows) (or dequantize(rows)). */
function sample(r: Resident, rows: number, reps: number): number {
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) if (dequant) r.dequantize(rows); else r.quantize(rows);
  return (performance.now() - t0) / 1000;
}

for (const name of only) {
  const f = formats.get(name);
  if (!f) throw new Error(`unknown format ${name}`);
  const extra = await kernelOnlyArgs(f, simd, data);
  if (!extra) { console.error(`${name}: needs host steps, skipped`); continue; }
  // Formats whose quantizer needs importance (IQ1_S, IQ2_XXS, ...) always get the imatrix.
  const variants = f.requiresImportance ? [IMPORTANCE] : withImatrix && f.importance ? [undefined, IMPORTANCE] : [undefined];
  for (const imatrix of variants) {
    const rows = Math.floor(values / ROW);
    const a = new Resident(simd, f, rows, data, extra, imatrix);
    const b = new Resident(scalar, f, rows, data, extra, imatrix);
    // Rows and repetitions so that one SIMD sample takes at least minMs.
    a.quantize(rows);
    b.quantize(rows);
    let same = Buffer.compare(a.bytes(rows), b.bytes(rows)) === 0;
    if (dequant) {
      a.dequantize(rows);
      b.dequantize(rows);
      same &&= Buffer.compare(a.dequantized(rows), b.dequantized(rows)) === 0;
    }
    const t1 = sample(a, rows, 1);
    const reps = Math.max(1, Math.ceil(minMs / 1000 / t1));
    const { a: ts, b: tc } = alternate(pairs, () => sample(a, rows, reps), () => sample(b, rows, reps));
    const ratio = tc.map((c, i) => c / ts[i]);
    const gbs = (t: number) => (rows * ROW * 4 * reps) / t / 1e9;
    const sorted = [...ratio].sort((x, y) => x - y);
    const q = (k: number) => sorted[Math.min(sorted.length - 1, Math.floor(k * sorted.length))];
    const label = imatrix ? `${name} +imatrix` : name;
    out.push([label, gbs(median(ts)), gbs(median(tc)), median(ratio), `${q(0.25).toFixed(2)}-${q(0.75).toFixed(2)}`, same ? 'yes' : 'NO']);
    console.error(`${label}: ${median(ratio).toFixed(2)}x`);
  }
}

const other = baseline || 'scalar';
const self = build || 'SIMD';
console.log(`\n${self} vs ${other} ${dequant ? 'dequantize' : 'quantize'}, one process, ${pairs} interleaved pairs, ${values} values resident (GB/s of float32, medians).\n`);
console.log(table(['format', self, other, `${self}/${other} (median of pairs)`, 'quartiles', dequant ? 'same bytes and floats' : 'same bytes'], out));
