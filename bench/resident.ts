// A format's input, output sections and dequantize target resident in a bench-only wasm instance,
// so the kernels can be timed without the host steps (bench/kernels.ts, bench/simd-ratio.ts).
import { type FormatSpec, layoutOf } from '../src/formats/types.js';
import { type Kernels } from '../src/kernels/loader.js';
import { ARGS_BYTES, writeArgs } from '../src/kernels/args.js';
import { resolveOptions } from '../src/options.js';
import { baseArgs } from '../src/quantize.js';

export const ROW = 4096;

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
    writeArgs(k.buffer, this.args, {
      ...baseArgs(o), scratch: this.scratch, scales: this.out[1] ?? 0, biases: this.out[2] ?? 0, aux: this.out[3] ?? 0,
      ...extra, ...(imatrix ? { imatrix: this.imatrix } : {}),
    });
  }
  quantize(rows: number): void {
    this.k.fn(`${this.f.kernel}_quantize`)(this.input, 0, rows, ROW, this.out[0], this.args);
  }
  dequantize(rows: number): void {
    this.k.fn(`${this.f.kernel}_dequantize`)(this.out[0], rows, ROW, this.deq, this.args);
  }
  /** The quantized bytes of the first `rows` rows (first section). */
  bytes(rows: number): Uint8Array {
    const o = resolveOptions(this.f, { format: this.f.name });
    const n = layoutOf(this.f, rows, ROW, o).sections[0].bytes;
    return new Uint8Array(this.k.buffer, this.out[0], n).slice();
  }
}

/**
 * Extra kernel args when the kernels alone can run the format at its default options: no tensor
 * sections, no finish step, and a prepare step (if any) that needs no pass over the data.
 */
export async function kernelOnlyArgs(f: FormatSpec, k: Kernels): Promise<Record<string, number> | undefined> {
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
