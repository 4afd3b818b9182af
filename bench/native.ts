// npm run bench:native — our SIMD kernels against llama.cpp's native quantizers, timed in one
// process on the same data (bench:kernels' weight-like 64M values), samples interleaved, so the
// ratios hold however loaded the machine is. "llama.cpp" is quantize_<type>, what
// ggml_quantize_chunk and so llama-quantize run for a file (no imatrix); its bytes must equal ours.
// Also printed: quantize_row_<type>_ref where it does less work than the file path (IQ4_NL /
// IQ4_XS without the 15 trial scales), and the CPU backend's AVX2 quantize_row_q8_0 (what ggml
// uses for activations). Single thread, GB/s of float32 input (quantize) or output (dequantize).
// Options: --lib path/to/libggml-base.so (default: the released build, bench/llamacpp.ts),
// --formats a,b, --reps N, --values N, --json path.
import { formats } from '../src/formats/registry.js';
import { layoutOf } from '../src/formats/types.js';
import { loadKernels } from '../src/kernels/loader.js';
import { resolveOptions } from '../src/options.js';
import { loadGgml, nativeLibs } from './llamacpp.js';
import { kernelOnlyArgs, Resident, ROW } from './resident.js';
import { alternate, arg, median, table, weightData, writeJson } from './util.js';

/** Our format name -> ggml's function suffix. */
const GGML: Record<string, string> = {
  q8_0: 'q8_0', q4_0: 'q4_0', q4_1: 'q4_1', q5_0: 'q5_0', q5_1: 'q5_1', q2_k: 'q2_K', q3_k: 'q3_K', q4_k: 'q4_K',
  q5_k: 'q5_K', q6_k: 'q6_K', iq4_nl: 'iq4_nl', iq4_xs: 'iq4_xs', mxfp4_gguf: 'mxfp4', nvfp4_gguf: 'nvfp4',
};

const libs = nativeLibs(arg('lib', '') || undefined);
const ggml = loadGgml(libs);
const only = arg('formats', '').split(',').filter(Boolean);
const reps = Number(arg('reps', '7'));
const values = Number(arg('values', String(64 << 20)));
const jsonPath = arg('json', 'bench/results/native.json');
const maxRows = values / ROW;
const big = weightData(values);
const k = await loadKernels('wasm-simd', 'bench');
// llama.cpp's dequantized values, all rows of every format.
const deq = new Float32Array(values);

const secs = (f: () => unknown) => {
  const t0 = performance.now();
  f();
  return (performance.now() - t0) / 1000;
};
/** Rows of a prefix that takes about 0.3 s at the rate measured on 16 rows. */
const rowsFor = (run: (rows: number) => unknown) => Math.max(16, Math.min(maxRows, Math.floor(0.3 / Math.max(secs(() => run(16)) / 16, 1e-9))));
const gbps = (rows: number, s: number) => (rows * ROW * 4) / s / 1e9;

interface Pair { native: number; ours: number; ratio: number }
/** Interleaved samples of two runs; medians of each rate and of the per-sample ratios. */
function pair(native: () => number, ours: () => number): Pair {
  // Warm-up: V8 runs a wasm function in its baseline tier until it is hot.
  for (let i = 0; i < 2; i++) { native(); ours(); }
  const { a: o, b: n } = alternate(reps, ours, native);
  return { native: median(n), ours: median(o), ratio: median(o.map((x, i) => x / n[i])) };
}

const rows: (string | number)[][] = [];
const extra: (string | number)[][] = [];
const results: Record<string, unknown> = {};
for (const f of formats.values()) {
  const t = GGML[f.name];
  if (!t || (only.length && !only.includes(f.name))) continue;
  const o = resolveOptions(f, { format: f.name });
  const outBytes = (n: number) => layoutOf(f, n, ROW, o).sections[0].bytes;
  const q = ggml.quantize(t);
  const dq = ggml.dequantize(t);
  const dst = new Uint8Array(outBytes(maxRows));
  const nativeQ = (n: number) => q(big.subarray(0, n * ROW), dst, n, ROW, null);
  const nN = rowsFor(nativeQ);
  const args = await kernelOnlyArgs(f, k, big);
  if (!args) throw new Error(`${f.name}: the kernels alone cannot run it`);
  const res = new Resident(k, f, maxRows, big, args);
  const nO = rowsFor((n) => res.quantize(n));

  // Bytes: the native prefix against ours on the same rows.
  nativeQ(nN);
  const theirs = dst.slice(0, outBytes(nN));
  res.quantize(nN);
  const same = Buffer.compare(theirs, res.bytes(nN)) === 0;

  const quant = pair(() => gbps(nN, secs(() => nativeQ(nN))), () => gbps(nO, secs(() => res.quantize(nO))));
  // Dequantize: both read the same bytes for every row (the prefix repeated), out of cache.
  for (let at = 0; at < dst.length; at += theirs.length) dst.set(theirs.subarray(0, Math.min(theirs.length, dst.length - at)), at);
  k.u8(res.out[0], dst.length).set(dst);
  const dequant = pair(() => gbps(maxRows, secs(() => dq(dst, deq, values))), () => gbps(maxRows, secs(() => res.dequantize(maxRows))));
  const sameValues = Buffer.compare(new Uint8Array(deq.buffer), k.u8(res.deq, values * 4)) === 0;
  rows.push([f.name, quant.native, quant.ours, `${quant.ratio.toFixed(1)}x`, dequant.native, dequant.ours, `${dequant.ratio.toFixed(2)}x`, same ? 'identical' : 'DIFFER', sameValues ? 'identical' : 'DIFFER']);
  const r: Record<string, unknown> = { quantize: quant, dequantize: dequant, identicalBytes: same, identicalValues: sameValues, nativeRows: nN, ourRows: nO };

  // The row_ref variant, where its bytes differ from the file path's (it skips work).
  const ref = ggml.quantizeRef(t);
  if (ref) {
    const refDst = new Uint8Array(outBytes(maxRows));
    const refQ = (n: number) => ref(big.subarray(0, n * ROW), refDst, n * ROW);
    const nR = rowsFor(refQ);
    refQ(nN);
    if (Buffer.compare(refDst.subarray(0, outBytes(nN)), theirs) !== 0) {
      const p = pair(() => gbps(nR, secs(() => refQ(nR))), () => gbps(nO, secs(() => res.quantize(nO))));
      extra.push([`${f.name}: quantize_row_${t}_ref (other bytes: no trial scales)`, p.native, p.ours, `${p.ratio.toFixed(1)}x`]);
      r.rowRef = p;
    }
  }
  const cpu = f.name === 'q8_0' ? ggml.cpuQuantize(t) : undefined;
  if (cpu) {
    const cpuQ = (n: number) => cpu(big.subarray(0, n * ROW), dst, n * ROW);
    const nC = rowsFor(cpuQ);
    const p = pair(() => gbps(nC, secs(() => cpuQ(nC))), () => gbps(nO, secs(() => res.quantize(nO))));
    extra.push([`${f.name}: CPU backend quantize_row_${t} (AVX2, activations)`, p.native, p.ours, `${p.ratio.toFixed(1)}x`]);
    r.cpuBackend = p;
  }
  results[f.name] = r;
  console.error(`${f.name}: llama.cpp ${quant.native.toFixed(3)} GB/s, webquant ${quant.ours.toFixed(3)} GB/s (${quant.ratio.toFixed(1)}x), bytes ${same ? 'identical' : 'DIFFER'}`);
}

console.log(`\n${libs.origin} against webquant's SIMD build, one thread, GB/s of float32, medians of ${reps} interleaved samples (ratio = median of per-sample ratios).\n`);
console.log(table(['format', 'llama.cpp quantize', 'webquant quantize', 'ratio', 'llama.cpp dequant', 'webquant dequant', 'ratio', 'quantized bytes', 'dequantized bits'], rows));
if (extra.length) {
  console.log('\nOther llama.cpp paths, against the same webquant kernel:\n');
  console.log(table(['llama.cpp function', 'llama.cpp', 'webquant', 'ratio'], extra));
}
writeJson(jsonPath, { date: new Date().toISOString(), node: process.version, native: libs.origin, values, row: ROW, reps, results });
console.log(`\nwritten ${jsonPath}`);
