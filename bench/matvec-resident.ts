// Shared by bench/matvec.ts and its workers (bench/matvec-worker.ts): the fused serving kernel on
// quantized weights kept resident in a wasm instance's memory, and row slices of a quantized tensor.
import type { QuantizedTensor } from '../src/quantize.js';
import { getFormat } from '../src/formats/registry.js';
import { layoutOf } from '../src/formats/types.js';
import { FLAGS, writeArgs, ARGS_BYTES } from '../src/kernels/args.js';
import type { Kernels } from '../src/kernels/loader.js';
import { SERVE_Q8_ACT } from '../src/serve/index.js';

export interface Resident {
  /** x in wasm memory (rowLength values): write it, then call(). */
  x: Float32Array;
  /** y in wasm memory (rows values), valid after call(). */
  y: Float32Array;
  /** Runs the kernel; `q8` (default: residentKernel's) picks int8 or f32 activations. */
  call(q8?: boolean): void;
}

/**
 * Copies every section of qt into k's memory once; call() runs `<kernel>_matvec` on them. Two
 * argument blocks (f32 and int8 activations) are written, so that call(q8) can switch per call.
 */
export function residentKernel(k: Kernels, qt: QuantizedTensor, q8 = false): Resident {
  const spec = getFormat(qt.format);
  const [rows, rowLen] = qt.shape;
  const layout = layoutOf(spec, rows, rowLen, qt.options);
  const align = (n: number) => (n + 15) & ~15;
  let at = 0;
  const pArgs = at; at += ARGS_BYTES;
  const pArgsQ8 = at; at += ARGS_BYTES;
  const pScratch = at; at = align(at + 16 * rowLen + 65536);
  const pX = at; at = align(at + rowLen * 4);
  const pY = at; at = align(at + rows * 4);
  const pSec = layout.sections.map((s) => { const p = at; at = align(at + s.bytes); return p; });
  const base = k.reserve(at);
  layout.sections.forEach((s, i) => k.u8(base + pSec[i], s.bytes).set(qt.data.subarray(s.offset, s.offset + s.bytes)));
  const o = qt.options;
  let flags = 0;
  if (o.doubleQuant) flags |= FLAGS.doubleQuant;
  if (o.granularity === 'tensor') flags |= FLAGS.perTensor;
  if (o.granularity === 'channel') flags |= FLAGS.perChannel;
  const rowSecs = layout.sections.filter((s) => s.perRow > 0).length;
  const args = {
    group: o.groupSize, bits: o.bits, flags, scratch: base + pScratch,
    scales: rowSecs > 1 ? base + pSec[1] : 0, biases: rowSecs > 2 ? base + pSec[2] : 0,
    aux: pSec.length > rowSecs ? base + pSec[rowSecs] : 0,
  };
  writeArgs(k.buffer, base + pArgs, args);
  writeArgs(k.buffer, base + pArgsQ8, { ...args, flags: flags | SERVE_Q8_ACT });
  const fn = k.fn(`${spec.kernel}_matvec`);
  // reserve() above is the last growth of this instance's memory, so these views stay valid
  // as long as nothing else reserves more in the same instance.
  return {
    x: k.f32(base + pX, rowLen),
    y: k.f32(base + pY, rows),
    call: (useQ8 = q8) => { fn(base + pSec[0], rows, rowLen, base + pX, base + pY, base + (useQ8 ? pArgsQ8 : pArgs)); },
  };
}

/** Whether a tensor's layout has tensor-level sections (perRow 0). */
export function hasTensorSections(qt: QuantizedTensor): boolean {
  return qt.layout.sections.some((s) => s.perRow === 0);
}

/**
 * Rows [r0, r1) of qt as a QuantizedTensor of their own: the row sections of a layout are rows back
 * to back (src/formats/types.ts layoutOf), so the slice of each row section, in section order, is the
 * layout of an (r1 - r0)-row tensor. Only for layouts without tensor-level sections.
 */
export function rowSlice(qt: QuantizedTensor, r0: number, r1: number): QuantizedTensor {
  if (hasTensorSections(qt)) throw new Error(`rowSlice: ${qt.format} has tensor-level sections`);
  const spec = getFormat(qt.format);
  const n = r1 - r0;
  const layout = layoutOf(spec, n, qt.shape[1], qt.options);
  const data = new Uint8Array(layout.bytes);
  qt.layout.sections.forEach((s, i) => data.set(qt.data.subarray(s.offset + s.perRow * r0, s.offset + s.perRow * r1), layout.sections[i].offset));
  return { ...qt, shape: [n, qt.shape[1]], data, layout, metrics: undefined };
}
