// npx tsx bench/llamacpp-quantize.ts [--formats a,b] [--write] [--time] [--lib path/to/libggml-base.so]
//
// The quantizers of the GGUF types llama.cpp writes beyond the twelve of the spec (IQ1_S, IQ1_M,
// IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, TQ1_0, TQ2_0, Q1_0, Q2_0, MXFP4, NVFP4) against llama.cpp's own, through
// ggml_quantize_chunk (llama-quantize's entry point) of the released build of bench/llamacpp.ts:
// the rows of test/helpers/llamacpp-cases.ts (varied rows with and without three importance
// vectors, the shipped vectors with and without their imatrix, weight-like rows). Both wasm builds must
// give llama.cpp's bytes, row for row; the first differing block of each case is printed.
// `--time` adds a speed table (see the end). `--write` (only when everything matches) records SHA-256 digests of llama.cpp's bytes in
// test/assembly/fixtures/llamacpp-quantize.json (the types run replace theirs, the others are kept),
// which the test suite checks without the library.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { quantize } from '../src/index.js';
import { getFormat } from '../src/formats/registry.js';
import { type LlamacppCase as Case, llamacppCases, rowsBelow } from '../test/helpers/llamacpp-cases.js';
import { loadGgml, nativeLibs } from './llamacpp.js';
import { arg, table } from './util.js';

const TYPES = ['q1_0', 'q2_0', 'tq1_0', 'tq2_0', 'iq3_xxs', 'iq3_s', 'iq2_xxs', 'iq2_xs', 'iq2_s', 'iq1_s', 'iq1_m', 'mxfp4_gguf', 'nvfp4_gguf'];

const write = process.argv.includes('--write');
const only = arg('formats', '');
const types = only ? only.split(',') : TYPES;
const ggml = loadGgml(nativeLibs(arg('lib', '') || undefined));
const FIXTURE = fileURLToPath(new URL('../test/assembly/fixtures/llamacpp-quantize.json', import.meta.url));
const cases = llamacppCases();

const sha = (a: Uint8Array) => createHash('sha256').update(a).digest('hex');

function native(type: string, c: Case): Uint8Array {
  const spec = getFormat(type);
  const g = spec.ggml!;
  const rows = c.x.length / c.rowLength;
  const out = new Uint8Array(rows * (c.rowLength / g.blockSize) * g.typeSize);
  const written = ggml.quantizeChunk(g.type, c.x, out, 0, rows, c.rowLength, c.importance ?? null) as number | bigint;
  if (Number(written) !== out.length) throw new Error(`${type}: ggml_quantize_chunk wrote ${written} bytes, expected ${out.length}`);
  return out;
}

const fixture: Record<string, unknown> = {
  _about: `SHA-256 of the bytes llama.cpp's ggml_quantize_chunk writes (${nativeLibs(arg('lib', '') || undefined).origin}), recorded by bench/llamacpp-quantize.ts --write. sha256 covers all rows of a case; rows[r] is the first 12 hex digits of row r's SHA-256. Inputs: test/helpers/llamacpp-cases.ts.`,
};
const report: (string | number)[][] = [];
let allSame = true;
for (const [name, all] of Object.entries(cases)) {
  const entry: Record<string, { sha256: string; rows: string[] }> = {};
  for (const type of types) {
    // llama.cpp asserts an importance matrix where the registry requires one (ggml_quantize_requires_imatrix).
    if (!all.importance && getFormat(type).requiresImportance) continue;
    // Rows llama.cpp aborts on are refused by webquant (FormatSpec.maxAbs): left out here.
    const { c } = rowsBelow(all, getFormat(type).maxAbs);
    const g = getFormat(type).ggml!;
    const rowBytes = (c.rowLength / g.blockSize) * g.typeSize;
    const want = native(type, c);
    const rows = c.x.length / c.rowLength;
    entry[type] = { sha256: sha(want), rows: Array.from({ length: rows }, (_, r) => sha(want.subarray(r * rowBytes, (r + 1) * rowBytes)).slice(0, 12)) };
    for (const backend of ['wasm-simd', 'wasm'] as const) {
      let got: Uint8Array;
      try {
        got = (await quantize(c.x, { format: type, rowLength: c.rowLength, backend, importance: c.importance })).data;
      } catch (e) {
        report.push([name, type, backend, 'error', (e as Error).message.slice(0, 100)]);
        allSame = false;
        continue;
      }
      const bad: string[] = [];
      let first = '';
      for (let r = 0; r < rows; r++) {
        const a = got.subarray(r * rowBytes, (r + 1) * rowBytes);
        const b = want.subarray(r * rowBytes, (r + 1) * rowBytes);
        let i = 0;
        while (i < a.length && a[i] === b[i]) i++;
        if (i === a.length) continue;
        bad.push(c.rowName(r));
        if (!first) {
          const blk = Math.floor(i / g.typeSize);
          const at = blk * g.typeSize;
          const hex = (u: Uint8Array) => Buffer.from(u.subarray(at, at + Math.min(g.typeSize, 24))).toString('hex');
          first = `${c.rowName(r)} block ${blk} byte ${i - at}: ours ${hex(a)} llama.cpp ${hex(b)}`;
        }
      }
      if (bad.length) allSame = false;
      report.push([name, type, backend, `${rows - bad.length}/${rows}`, first]);
    }
  }
  fixture[name] = entry;
}
console.log(table(['case', 'type', 'build', 'rows identical', 'first difference'], report));
if (write) {
  if (!allSame) {
    console.error('not writing the fixture: some rows differ from llama.cpp');
    process.exit(1);
  }
  // Types not run this time keep their recorded digests.
  const old = existsSync(FIXTURE) ? JSON.parse(readFileSync(FIXTURE, 'utf8')) as Record<string, Record<string, unknown>> : {};
  for (const name of Object.keys(cases)) fixture[name] = { ...old[name], ...(fixture[name] as object) };
  // One line per type, as fixtures/llamacpp-digests.json.
  const lines = Object.entries(fixture).map(([k, v]) => typeof v === 'string'
    ? ` ${JSON.stringify(k)}: ${JSON.stringify(v)}`
    : ` ${JSON.stringify(k)}: {\n${Object.entries(v as object).map(([t, e]) => `  ${JSON.stringify(t)}: ${JSON.stringify(e)}`).join(',\n')}\n }`);
  writeFileSync(FIXTURE, `{\n${lines.join(',\n')}\n}\n`);
  console.log(`wrote ${FIXTURE}`);
}
if (!allSame) process.exit(1);

// `--time`: single-thread quantize throughput (GB/s of f32 input) on the weight-like rows (32 x 4096)
// with their importance, quantize() on the SIMD build against ggml_quantize_chunk, samples
// alternating (the ratio is the median of per-sample ratios; > 1: webquant faster).
if (process.argv.includes('--time')) {
  const c = cases['weights+imatrix'];
  const rows: (string | number)[][] = [];
  for (const type of types) {
    const g = getFormat(type).ggml!;
    const out = new Uint8Array((c.x.length / g.blockSize) * g.typeSize);
    const secs = async (f: () => unknown) => { const t0 = performance.now(); await f(); return (performance.now() - t0) / 1000; };
    const ours = () => secs(() => quantize(c.x, { format: type, rowLength: c.rowLength, backend: 'wasm-simd', importance: c.importance }));
    const theirs = () => secs(() => ggml.quantizeChunk(g.type, c.x, out, 0, c.x.length / c.rowLength, c.rowLength, c.importance));
    for (let i = 0; i < 2; i++) { await ours(); await theirs(); }
    const a: number[] = [], b: number[] = [];
    for (let i = 0; i < 9; i++) {
      if (i % 2 === 0) { a.push(await ours()); b.push(await theirs()); } else { b.push(await theirs()); a.push(await ours()); }
    }
    const gb = (sec: number) => (c.x.length * 4) / sec / 1e9;
    const med = (v: number[]) => [...v].sort((x, y) => x - y)[v.length >> 1];
    rows.push([type, gb(med(b)).toPrecision(3), gb(med(a)).toPrecision(3), `${med(a.map((x, i) => b[i] / x)).toFixed(2)}x`]);
  }
  console.log(table(['format', 'llama.cpp quantize', 'webquant quantize', 'ratio'], rows));
}
