// npx tsx bench/llamacpp-decode.ts [--write] [--lib path/to/libggml-base.so]
//
// The low-bit GGUF types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, TQ1_0, TQ2_0,
// Q1_0, Q2_0) against llama.cpp's own dequantize_row_<type> (the released build of
// bench/llamacpp.ts, through koffi):
// 1. The IQ types' grids are facts of the formats, not derivable by a rule: they are probed here
//    from llama.cpp's decoder (one block per 32 or 64 grid entries, with a scale that makes each
//    value exact) and packed as level indices into assembly/gguf/iq_grids.ts (`--write` writes it,
//    otherwise the file is checked against the probe).
// 3. `--time`: single-thread dequantize throughput (GB/s of f32 output, 4M values per call) of
//    the SIMD build's kernel (data resident in wasm memory) and of llama.cpp's, samples
//    alternating, the ratio the median of per-sample ratios.
// 2. Our dequantization of seeded blocks (test/helpers/ggml-blocks.ts) is compared with llama.cpp's
//    bit for bit (NaNs as NaNs), on both wasm builds; `--write` records SHA-256 digests of
//    llama.cpp's output in test/assembly/fixtures/llamacpp-decode.json, which the test suite checks
//    without the native library.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dequantize } from '../src/index.js';
import { loadKernels } from '../src/kernels/loader.js';
import { canonicalNaN, LOW_BIT_TYPES, randomBlocks, setScale } from '../test/helpers/ggml-blocks.js';
import { loadGgml, nativeLibs } from './llamacpp.js';
import { alternate, arg, median, table } from './util.js';

const write = process.argv.includes('--write');
const ggml = loadGgml(nativeLibs(arg('lib', '') || undefined));
const GRIDS = fileURLToPath(new URL('../assembly/gguf/iq_grids.ts', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../test/assembly/fixtures/llamacpp-decode.json', import.meta.url));

function native(type: string, blocks: Uint8Array, n: number): Float32Array {
  const y = new Float32Array(n);
  ggml.dequantize(type)(blocks, y, n);
  return y;
}

// ---- 1. grids ----------------------------------------------------------------------------

interface Grid { name: string; entries: number; width: number; levels: number[]; values: number[][] }

/** Probes `entries` grid entries, `perBlock` at a time: fill() sets entry e at slot k of a block. */
function probe(type: string, bytes: number, entries: number, perBlock: number, width: number, fill: (b: Uint8Array, k: number, e: number) => void, unscale: (v: number) => number): number[][] {
  const out: number[][] = [];
  for (let base = 0; base < entries; base += perBlock) {
    const b = new Uint8Array(bytes);
    setScale(LOW_BIT_TYPES.find((t) => t.name === type)!, b, 0x3c00); // d = 1
    for (let k = 0; k < perBlock; k++) fill(b, k, base + k);
    const y = native(type, b, 256);
    for (let k = 0; k < perBlock; k++) out.push([...y.subarray(width * k, width * (k + 1))].map(unscale));
  }
  return out;
}

const u16 = (b: Uint8Array, at: number, v: number) => { b[at] = v & 0xff; b[at + 1] = v >> 8; };
const grids: Grid[] = [
  // IQ2_XXS: four 8-bit entry indices per 32 values, scale nibble 0 -> db = d * 0.5 * 0.25.
  { name: 'IQ2XXS', entries: 256, width: 8, levels: [8, 25, 43], values: probe('iq2_xxs', 66, 256, 32, 8, (b, k, e) => { b[2 + (k >> 2) * 8 + (k & 3)] = e; }, (v) => v * 8) },
  // IQ2_XS: one u16 per 8 values, 9-bit index.
  { name: 'IQ2XS', entries: 512, width: 8, levels: [8, 25, 43], values: probe('iq2_xs', 74, 512, 32, 8, (b, k, e) => u16(b, 2 + 2 * k, e), (v) => v * 8) },
  // IQ2_S: 8 low bits in qs, 2 high bits per entry in the 32-value group's qh byte.
  { name: 'IQ2S', entries: 1024, width: 8, levels: [8, 25, 43], values: probe('iq2_s', 82, 1024, 32, 8, (b, k, e) => { b[2 + k] = e & 255; b[66 + (k >> 2)] |= (e >> 8) << (2 * (k & 3)); }, (v) => v * 8) },
  // IQ3_XXS: one byte per 4 values, scale nibble 0 -> db = d * 0.5 * 0.5.
  { name: 'IQ3XXS', entries: 256, width: 4, levels: [4, 12, 20, 28, 36, 44, 52, 62], values: probe('iq3_xxs', 98, 256, 64, 4, (b, k, e) => { b[2 + k] = e; }, (v) => v * 4) },
  // IQ3_S: 8 low bits in qs, the 9th in qh (one bit per 4 values), scale nibble 0 -> db = d.
  { name: 'IQ3S', entries: 512, width: 4, levels: [1, 3, 5, 7, 9, 11, 13, 15], values: probe('iq3_s', 110, 512, 64, 4, (b, k, e) => { b[2 + k] = e & 255; if (e & 256) b[66 + (k >> 3)] |= 1 << (k & 7); }, (v) => v) },
  // IQ1_S: 8 low bits in qs, 3 high bits per entry in the 32-value group's u16 qh; value = grid + 1/8.
  { name: 'IQ1S', entries: 2048, width: 8, levels: [-1, 0, 1], values: probe('iq1_s', 50, 2048, 32, 8, (b, k, e) => { b[2 + k] = e & 255; const at = 34 + 2 * (k >> 2); u16(b, at, (b[at] | (b[at + 1] << 8)) | ((e >> 8) << (3 * (k & 3)))); }, (v) => v - 0.125) },
];

function gridSource(): string {
  const lines = [
    '// Grids of llama.cpp\'s IQ1 / IQ2 / IQ3 types: each entry is 8 (IQ1_S, IQ2_*) or 4 (IQ3_*) values,',
    '// packed here as indices into the grid\'s level list, 2 (8-value grids) or 3 bits per value,',
    '// value 0 in the low bits. The grids are facts of the formats (chosen by llama.cpp\'s authors, not',
    '// generated by a rule); they were probed from llama.cpp\'s dequantize_row_<type> and are checked',
    '// against it by bench/llamacpp-decode.ts, which also writes this file (`--write`).',
    '// Levels: IQ2_* 8, 25, 43; IQ3_XXS 4, 12, 20, 28, 36, 44, 52, 62; IQ3_S 1, 3, ..., 15; IQ1_S -1, 0, 1.',
    '',
  ];
  for (const g of grids) {
    const bits = g.width === 8 ? 2 : 3;
    const words = g.values.map((vals, e) => vals.reduce((w, v, j) => {
      const li = g.levels.indexOf(v);
      if (li < 0) throw new Error(`${g.name} entry ${e}: value ${v} is not a level of the grid`);
      return w | (li << (bits * j));
    }, 0));
    lines.push(`export const ${g.name}_GRID = memory.data<u16>([`);
    for (let i = 0; i < words.length; i += 16) lines.push(`  ${words.slice(i, i + 16).map((w) => `0x${w.toString(16).padStart(4, '0')}`).join(', ')},`);
    lines.push(']);', '');
  }
  return lines.join('\n');
}

// The IQ2 / IQ3 sign bytes: 7 stored bits plus an 8th that makes the count of set bits even.
{
  const t = LOW_BIT_TYPES.find((x) => x.name === 'iq2_xxs')!;
  for (let s = 0; s < 128; s += 8) {
    const b = new Uint8Array(66);
    setScale(t, b, 0x3c00);
    for (let ib = 0; ib < 8; ib++) b[2 + ib * 8 + 4] = s + ib; // sign index of the group's first 8 values
    const y = native('iq2_xxs', b, 256);
    for (let ib = 0; ib < 8; ib++) {
      let m = 0;
      for (let j = 0; j < 8; j++) if (y[ib * 32 + j] < 0) m |= 1 << j;
      let par = 0;
      for (let v = s + ib; v; v >>= 1) par ^= v & 1;
      if (m !== ((s + ib) | (par << 7))) throw new Error(`sign byte ${s + ib}: llama.cpp has ${m}, expected the even-parity rule`);
    }
  }
}

const source = gridSource();
if (write) writeFileSync(GRIDS, source);
else if (readFileSync(GRIDS, 'utf8') !== source) throw new Error(`${GRIDS} differs from the grids probed from llama.cpp (run with --write after checking why)`);
console.log(`grids: ${grids.map((g) => `${g.name} ${g.entries}`).join(', ')} ${write ? 'written' : 'match llama.cpp'}; sign bytes follow the parity rule`);

// ---- 2. dequantization -------------------------------------------------------------------

const CASES = { weights: { count: 512, seed: 1 }, raw: { count: 512, seed: 2 } } as const;
const sha = (a: Uint8Array) => createHash('sha256').update(a).digest('hex');
const fixture: Record<string, unknown> = {
  _about: 'SHA-256 of the f32 bytes llama.cpp\'s dequantize_row_<type> writes for the blocks of test/helpers/ggml-blocks.ts (randomBlocks(type, count, seed, case)), NaNs made 0x7fc00000; recorded by bench/llamacpp-decode.ts from node-llama-cpp 3.22.1\'s libggml-base.so (a September 2026 llama.cpp).',
};
let bad = 0;
for (const t of LOW_BIT_TYPES) {
  const entry: Record<string, { count: number; seed: number; sha256: string }> = {};
  for (const [name, c] of Object.entries(CASES)) {
    const blocks = randomBlocks(t, c.count, c.seed, name as 'weights' | 'raw');
    const n = c.count * t.block;
    const ref = native(t.name, blocks, n);
    for (const backend of ['wasm-simd', 'wasm'] as const) {
      const ours = await dequantize({ format: t.name, shape: [c.count, t.block], data: blocks } as never, { backend });
      let first = -1;
      for (let i = 0; i < n && first < 0; i++) {
        if (!(Object.is(ours[i], ref[i]) || (Number.isNaN(ours[i]) && Number.isNaN(ref[i])))) first = i;
      }
      if (first >= 0) {
        bad++;
        console.log(`${t.name} ${name} ${backend}: value ${first} (block ${Math.floor(first / t.block)}) is ${ours[first]}, llama.cpp ${ref[first]}`);
      }
    }
    entry[name] = { ...c, sha256: sha(canonicalNaN(ref)) };
  }
  fixture[t.name] = entry;
}
if (write) writeFileSync(FIXTURE, `${JSON.stringify(fixture, null, 2)}\n`);
console.log(bad ? `${bad} mismatches` : `dequantization: every value of ${LOW_BIT_TYPES.length} types equals llama.cpp's on both builds${write ? `; ${FIXTURE} written` : ''}`);
if (bad) process.exit(1);

// ---- 3. speed ----------------------------------------------------------------------------

if (process.argv.includes('--time')) {
  const k = await loadKernels('wasm-simd', 'bench');
  const rows: (string | number)[][] = [];
  for (const t of LOW_BIT_TYPES) {
    // 4M values of every type, as nblk rows of one block each.
    const nblk = (16384 * 256) / t.block;
    const n = nblk * t.block;
    const y = new Float32Array(n);
    const blocks = randomBlocks(t, nblk, 3, 'weights');
    const src = k.reserve(blocks.length + n * 4 + 64);
    const dst = src + ((blocks.length + 63) & ~63);
    k.u8(src, blocks.length).set(blocks);
    const fn = k.fn(`${t.name}_dequantize`);
    const secs = (f: () => unknown) => { const t0 = performance.now(); f(); return (performance.now() - t0) / 1000; };
    const ours = () => secs(() => fn(src, nblk, t.block, dst, 0));
    const theirs = () => secs(() => ggml.dequantize(t.name)(blocks, y, n));
    for (let i = 0; i < 2; i++) { ours(); theirs(); }
    const { a, b } = alternate(15, ours, theirs);
    const gb = (s: number) => (n * 4) / s / 1e9;
    rows.push([t.name, gb(median(b)), gb(median(a)), `${median(a.map((x, i) => b[i] / x)).toFixed(2)}x`]);
  }
  console.log(table(['format', 'llama.cpp dequant', 'webquant dequant', 'ratio'], rows));
}
