// The inputs behind test/assembly/fixtures/llamacpp-quantize.json (bench/llamacpp-quantize.ts writes it,
// test/assembly/gguf-quantize-lowbit.test.ts checks it): the varied rows with and without their three
// importance vectors, the shipped vectors with and without their imatrix, and weight-like rows.
import { sharedF32 } from './shared.js';
import { VARIED_KINDS, VARIED_ROW_LENGTH, variedRows } from './varied-rows.js';

export interface LlamacppCase { x: Float32Array; rowLength: number; importance?: Float32Array; rowName: (r: number) => string }

/** Seeded uniforms in [0, 1) (the varied rows' LCG). */
function uniforms(n: number, seed: number): Float64Array {
  const out = new Float64Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s >>> 8) / 16777216;
  }
  return out;
}

/** Weight-like rows: the sum of two uniforms, centred, std about 0.008. */
function weightRows(n: number, seed: number): Float32Array {
  const u = uniforms(2 * n, seed);
  return Float32Array.from({ length: n }, (_, i) => 0.02 * (u[2 * i] + u[2 * i + 1] - 1));
}

/** Importance spread over 2^-4 .. 2^4 (powers of two times 1..2, as activations' squares vary). */
function importance(n: number, seed: number): Float32Array {
  const u = uniforms(2 * n, seed);
  return Float32Array.from({ length: n }, (_, i) => 2 ** Math.round(8 * u[2 * i] - 4) * (1 + u[2 * i + 1]));
}

export function llamacppCases(): Record<string, LlamacppCase> {
  const varied = variedRows();
  const vectors = sharedF32('vectors/input_f32.bin');
  const weights = weightRows(32 * 4096, 777);
  const kind = (r: number) => VARIED_KINDS[r];
  const row = (r: number) => `row ${r}`;
  return {
    'varied': { x: varied.rows, rowLength: VARIED_ROW_LENGTH, rowName: kind },
    'varied+lognormal': { x: varied.rows, rowLength: VARIED_ROW_LENGTH, importance: varied.imatrix.lognormal, rowName: kind },
    'varied+zeros20': { x: varied.rows, rowLength: VARIED_ROW_LENGTH, importance: varied.imatrix.zeros20, rowName: kind },
    'varied+zeroRanges': { x: varied.rows, rowLength: VARIED_ROW_LENGTH, importance: varied.imatrix.zeroRanges, rowName: kind },
    'vectors': { x: vectors, rowLength: 4096, rowName: row },
    'vectors+imatrix': { x: vectors, rowLength: 4096, importance: sharedF32('vectors/imatrix_f32.bin'), rowName: row },
    'weights': { x: weights, rowLength: 4096, rowName: row },
    'weights+imatrix': { x: weights, rowLength: 4096, importance: importance(4096, 99), rowName: row },
  };
}

/** The case without its rows holding a value of magnitude >= maxAbs (formats that refuse them); `rows` maps back. */
export function rowsBelow(c: LlamacppCase, maxAbs: number | undefined): { c: LlamacppCase; rows: number[] } {
  const n = c.x.length / c.rowLength;
  const rows = Array.from({ length: n }, (_, r) => r).filter((r) => c.x.subarray(r * c.rowLength, (r + 1) * c.rowLength).every((v) => Math.abs(v) < (maxAbs ?? Infinity)));
  if (rows.length === n) return { c, rows };
  const x = new Float32Array(rows.length * c.rowLength);
  rows.forEach((r, i) => x.set(c.x.subarray(r * c.rowLength, (r + 1) * c.rowLength), i * c.rowLength));
  return { c: { ...c, x, rowName: (i) => c.rowName(rows[i]) }, rows };
}
