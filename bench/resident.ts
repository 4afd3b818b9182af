// A format's input, output sections and dequantize target resident in a bench-only wasm instance,
// so the kernels can be timed without the host steps (bench/kernels.ts, bench/simd-ratio.ts).
import { type FormatSpec, layoutOf } from '../src/formats/types.js';
import { type Kernels } from '../src/kernels/loader.js';
import { ARGS_BYTES, writeArgs } from '../src/kernels/args.js';
import { resolveOptions } from '../src/options.js';
import { baseArgs } from '../src/quantize.js';

export const ROW = 4096;
/** A positive, uneven importance per column, as an imatrix file holds (ROW values). */
export const IMPORTANCE = new Float32Array(ROW).map((_, i) => 0.05 + ((Math.imul(i + 1, 2654435761) >>> 0) / 2 ** 32) * 2);

export class Resident {
  args = 0; scratch = 0; input = 0; out: number[] = []; deq = 0; imatrix = 0;
  /** imatrix: per-column importance (ROW values) handed to the kernel, or none. */
  constructor(readonly k: Kernels, readonly f: FormatSpec, readonly rows: number, values: Float32Array,
    extra: Record<string, number>, imatrix?: Float32Array) {
    const o = resolveOptions(f, { format: f.name });
    const layout = layoutOf(f, rows, ROW, o);
    const align = (x: number) => (x + 63) & ~63;
    let at = 0;
    this.args = at; at += ARGS_BYTES;
    this.scratch = at = align(at); at += 16 * ROW + 65536;
    this.input = at = align(at); at += rows * ROW * 4;
    for (const s of layout.sections) { at = align(at); this.out.push(at); at += s.bytes; }
    this.deq = at = align(at); at += rows * ROW * 4;
    if (imatrix) { this.imatrix = at = align(at); at += ROW * 4; }
    const base = k.reserve(at);
    for (const key of ['args', 'scratch', 'input', 'deq'] as const) this[key] += base;
    this.out = this.out.map((p) => p + base);
    k.f32(this.input, rows * ROW).set(values.subarray(0, rows * ROW));
    if (imatrix) { this.imatrix += base; k.f32(this.imatrix, ROW).set(imatrix); }
    // Row sections after the first are scales and biases; the first tensor section is aux.
    const rowOut = this.out.filter((_, i) => layout.sections[i].perRow > 0);
    const tensorOut = this.out.filter((_, i) => layout.sections[i].perRow === 0);
    writeArgs(k.buffer, this.args, {
      ...baseArgs(o), scratch: this.scratch, scales: rowOut[1] ?? 0, biases: rowOut[2] ?? 0, aux: tensorOut[0] ?? 0,
      ...extra, ...(imatrix ? { imatrix: this.imatrix } : {}),
    });
  }
  quantize(rows: number): void {
    this.k.fn(`${this.f.kernel}_quantize`)(this.input, 0, rows, ROW, this.out[0], this.args);
  }
  dequantize(rows: number): void {
    this.k.fn(`${this.f.kernel}_dequantize`)(this.out[0], rows, ROW, this.deq, this.args);
  }
  /** The dequantized floats of the first `rows` rows, as bytes. */
  dequantized(rows: number): Uint8Array {
    return new Uint8Array(this.k.buffer, this.deq, rows * ROW * 4).slice();
  }
  /** The quantized bytes of the first `rows` rows (first section). */
  bytes(rows: number): Uint8Array {
    const o = resolveOptions(this.f, { format: this.f.name });
    const n = layoutOf(this.f, rows, ROW, o).sections[0].bytes;
    return new Uint8Array(this.k.buffer, this.out[0], n).slice();
  }
}

/**
 * Extra kernel args when the kernels alone can run the format at its default options: no finish
 * step that can change bytes, and a prepare step (if any) that needs no pass over the data, or whose pass runs here over
 * the first rows of `values` (a per-tensor scale; the pass itself is not timed).
 */
export async function kernelOnlyArgs(f: FormatSpec, k: Kernels, values?: Float32Array): Promise<Record<string, number> | undefined> {
  const o = resolveOptions(f, { format: f.name });
  // finish may only write tensor sections that are not constant: without any at these options
  // (nf4 / fp4 without double quantization) it changes nothing the kernels wrote.
  if (f.finish && (f.tensorSections?.(ROW, ROW, o) ?? []).some((s) => !s.constant)) return undefined;
  if (!f.prepare) return {};
  let missing = false;
  const rows = values ? Math.min(values.length / ROW, 1024) : 0;
  const args = await f.prepare({
    kernels: k, nrows: rows, rowLen: ROW, opts: o,
    reduce: async (name, outBytes, init) => {
      if (!values) { missing = true; return new DataView(new ArrayBuffer(Math.max(outBytes, 64))); }
      const at = k.reserve(ARGS_BYTES + 64 + outBytes + 16 * ROW + rows * ROW * 4);
      const out = at + ARGS_BYTES, scratch = out + ((outBytes + 63) & ~63), input = scratch + 16 * ROW;
      writeArgs(k.buffer, at, { ...baseArgs(o), scratch });
      new Uint8Array(k.buffer, out, outBytes).fill(0);
      init?.(new DataView(k.buffer, out, outBytes));
      k.f32(input, rows * ROW).set(values.subarray(0, rows * ROW));
      k.fn(name)(input, 0, rows, ROW, out, at);
      return new DataView(k.buffer.slice(out, out + outBytes));
    },
  });
  return missing ? undefined : (args as Record<string, number>);
}
