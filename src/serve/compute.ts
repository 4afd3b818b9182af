// Compute on a tensor's bytes: the chunked driver that copies row sections into the private wasm
// instance and runs the format's fused matvec / matmul, or its dequantizer and a dot product.
import { ErrorCodes, fail } from '../errors.js';
import { setRow0, writeArgs, type KernelArgs, ARGS_BYTES } from '../kernels/args.js';
import type { Kernels } from '../kernels/loader.js';
import { layoutOf, type FormatSpec, type Layout, type ResolvedOptions } from '../formats/types.js';
import { checkChunkBytes, optionFlags } from '../quantize.js';
import { applyScale, type Entry } from './entries.js';
import { Q8_ACTIVATION_FORMATS, SERVE_Q8_ACT, type LoadedTensor, type ServeComputeOptions } from './types.js';

const align = (n: number) => (n + 15) & ~15;

function kernelArgs(o: ResolvedOptions | undefined, spec: FormatSpec, layout: Layout, tensorSecs: readonly Uint8Array[]): KernelArgs {
  if (!o) return {};
  const names = layout.sections.filter((x) => x.perRow === 0).map((x) => x.name);
  return { group: o.groupSize, bits: o.bits, flags: optionFlags(o), ...spec.storedArgs?.((name) => tensorSecs[names.indexOf(name)], o) };
}

/** Bytes per row of each row section (a float tensor is one section of plain rows). */
function rowSectionBytes(e: Entry): number[] {
  const kind = e.kind;
  if (kind.type === 'quant') return kind.layout.sections.filter((s) => s.perRow > 0).map((s) => s.perRow);
  return [e.info.rowLength * (kind.type === 'float' && kind.dtype !== 'F32' ? 2 : 4)];
}

/**
 * Scratch of a batched kernel beyond matvec's (the GGUF formats, assembly/serve/gguf-matmul.ts matmul32
 * and matmul256): the positions transposed and their x sums per 16 and per 32 (4.375 bytes a
 * value), a 256 KiB block of rows' codes as f32 (or one row's, 4 bytes a value, if larger), and
 * their scales and min factors (at most 0.5625 bytes a value of the block: 36 KiB, or one row's).
 */
function matmulScratch(batch: number, rowLen: number): number {
  return 64 + Math.ceil(batch * rowLen * 4.375) + Math.max(256 << 10, 4 * rowLen) + Math.max(40 << 10, rowLen);
}

/**
 * The chunked driver behind matvec / matmul / dequantize. Row sections are copied into the private
 * wasm instance `rows` at a time; `mode` 'dequantize' writes f32 rows into `out` ([rows, rowLen]),
 * 'matvec' computes out[b*nrows + r] = row r . X[b].
 */
function run(k: Kernels, e: Entry, sections: readonly Uint8Array[], chunkBytes: number, mode: 'matvec' | 'dequantize', X?: Float32Array, batch = 1, q8 = false): Float32Array {
  const { rows: nrows, rowLength: rowLen } = e.info;
  const kind = e.kind;
  let kernel: string;
  const perRow = rowSectionBytes(e);
  let tensorSecs: Uint8Array[] = [];
  let args: KernelArgs = {};
  if (kind.type === 'quant') {
    kernel = kind.spec.kernel;
    tensorSecs = sections.slice(perRow.length) as Uint8Array[];
    args = kernelArgs(kind.options, kind.spec, kind.layout, tensorSecs);
    if (q8 && mode === 'matvec' && Q8_ACTIVATION_FORMATS.includes(kind.spec.name)) args.flags = (args.flags ?? 0) | SERVE_Q8_ACT;
  } else {
    kernel = (kind.type === 'float' ? kind.dtype : 'F32').toLowerCase();
  }
  const out = new Float32Array(mode === 'dequantize' ? nrows * rowLen : batch * nrows);
  if (nrows === 0 || rowLen === 0) return out;
  const fused = mode === 'matvec' && k.has(`${kernel}_matvec`);
  const rowBytes = perRow.reduce((a, b) => a + b, 0);
  const needDeq = !fused;
  let rows = Math.max(1, Math.min(nrows, Math.floor(chunkBytes / rowBytes)));
  if (needDeq) rows = Math.max(1, Math.min(rows, Math.floor(chunkBytes / (rowLen * 4))));
  const auxBytes = tensorSecs.reduce((a, s) => a + s.byteLength, 0);

  // Several positions in one call where the format has a batched kernel (the same bits as matvec).
  const batched = mode === 'matvec' && batch > 1 && k.has(`${kernel}_matmul`);
  let at = 0;
  const pArgs = at; at += ARGS_BYTES;
  const pScratch = at; at = align(at + 16 * rowLen + 65536 + (batched ? matmulScratch(batch, rowLen) : 0));
  const pX = at; at = align(at + (mode === 'matvec' ? batch * rowLen * 4 : 0));
  const pY = at; at = align(at + (mode === 'matvec' ? batch * rows * 4 : 0));
  const pAux = at; at = align(at + auxBytes + 64);
  // 8 readable bytes after each row section: the int kernels' 8-byte group loads (assembly/serve/int.ts)
  const pSec = perRow.map((b) => { const p = at; at = align(at + b * rows + 8); return p; });
  const pDeq = at; at = align(at + (needDeq ? rows * rowLen * 4 : 0));
  const base = k.reserve(at);
  const A = (p: number) => p + base;

  let auxAt = A(pAux);
  for (const s of tensorSecs) { k.u8(auxAt, s.byteLength).set(s); auxAt += s.byteLength; }
  const a: KernelArgs = { ...args, scratch: A(pScratch), aux: A(pAux) };
  if (pSec.length > 1) a.scales = A(pSec[1]);
  if (pSec.length > 2) a.biases = A(pSec[2]);
  writeArgs(k.buffer, A(pArgs), a);
  if (mode === 'matvec') k.f32(A(pX), batch * rowLen).set(X!.subarray(0, batch * rowLen));

  const mv = fused ? k.fn(`${kernel}_matvec`) : undefined;
  const mm = batched ? k.fn(`${kernel}_matmul`) : undefined;
  const dq = needDeq && k.has(`${kernel}_dequantize`) ? k.fn(`${kernel}_dequantize`) : undefined;
  const dot = k.fn('serve_dot_rows');
  for (let r0 = 0; r0 < nrows; r0 += rows) {
    const n = Math.min(rows, nrows - r0);
    perRow.forEach((b, i) => k.u8(A(pSec[i]), b * n).set(sections[i].subarray(b * r0, b * (r0 + n))));
    setRow0(k.buffer, A(pArgs), (e.row0 ?? 0) + r0);
    let deq = A(pSec[0]);
    if (needDeq) {
      if (dq) dq(A(pSec[0]), n, rowLen, A(pDeq), A(pArgs));
      else k.u8(A(pDeq), n * rowLen * 4).set(sections[0].subarray(r0 * rowLen * 4, (r0 + n) * rowLen * 4));
      deq = A(pDeq);
      if (mode === 'dequantize') {
        out.set(k.f32(deq, n * rowLen), r0 * rowLen);
        continue;
      }
    }
    if (mm) {
      mm(A(pSec[0]), n, rowLen, A(pX), A(pY), A(pArgs), batch, rows);
      for (let b = 0; b < batch; b++) out.set(k.f32(A(pY) + b * rows * 4, n), b * nrows + r0);
      continue;
    }
    for (let b = 0; b < batch; b++) {
      const x = A(pX) + b * rowLen * 4;
      const y = A(pY) + b * rows * 4;
      if (mv) mv(A(pSec[0]), n, rowLen, x, y, A(pArgs));
      else dot(deq, n, rowLen, x, y);
      out.set(k.f32(y, n), b * nrows + r0);
    }
  }
  return out;
}

/** A tensor in memory: the chunked kernels over its sections. */
export function loadedTensor(k: Kernels, e: Entry, sections: readonly Uint8Array[], chunkBytes: number, q8: boolean, scale?: Float32Array): LoadedTensor {
  const scaled = (out: Float32Array, mode: 'matvec' | 'dequantize', batch = 1) => (scale ? applyScale(e, scale, out, mode, batch) : out);
  return {
    info: e.info,
    sections,
    bytes: sections.reduce((a, b) => a + b.byteLength, 0),
    matvec: (x) => (checkX(e, x, 1), scaled(run(k, e, sections, chunkBytes, 'matvec', x, 1, q8), 'matvec')),
    matmul: (X, batch) => (checkX(e, X, batch), scaled(run(k, e, sections, chunkBytes, 'matvec', X, batch, q8), 'matvec', batch)),
    dequantize: () => scaled(run(k, e, sections, chunkBytes, 'dequantize'), 'dequantize'),
    rows(first, count) {
      const { rows, rowLength } = e.info;
      if (!Number.isSafeInteger(first) || !Number.isSafeInteger(count) || first < 0 || count < 0 || first + count > rows) {
        fail(ErrorCodes.BAD_INPUT, `[serve] ${e.info.name}: rows [${first}, ${first + count}) are outside its ${rows} rows`, {
          tensor: e.info.name, value: [first, count], expected: `0 <= first <= first + count <= ${rows}`,
        });
      }
      let kind = e.kind;
      // The view's rows, then the whole tensor's sections.
      const tensorRows = e.tensorRows ?? e.info.rows;
      if (kind.type === 'quant') kind = { ...kind, layout: layoutOf(kind.spec, count, rowLength, kind.options, tensorRows) };
      const perRow = rowSectionBytes(e);
      const info = { ...e.info, name: `${e.info.name}[${first}:${first + count}]`, shape: [count, rowLength], rows: count, byteLength: perRow.reduce((a, b) => a + b, 0) * count };
      // Row sections cut to the rows; whole-tensor sections (after them) as they are.
      const cut = sections.map((sec, i) => (i < perRow.length ? sec.subarray(perRow[i] * first, perRow[i] * (first + count)) : sec));
      return loadedTensor(k, { info, kind, row0: (e.row0 ?? 0) + first, tensorRows, scaleRows: e.scaleRows }, cut, chunkBytes, q8, scale);
    },
  };
}

/** chunkBytes (an integer >= 1, default 4 MiB) and activations ('f32' or 'q8'), checked. */
export function computeOptions(o: ServeComputeOptions & { chunkBytes?: number }): { chunkBytes: number; q8: boolean } {
  checkChunkBytes(o.chunkBytes, 'serve');
  const chunkBytes = o.chunkBytes ?? 4 << 20;
  if (o.activations !== undefined && o.activations !== 'f32' && o.activations !== 'q8') {
    fail(ErrorCodes.BAD_OPTION, `[serve] activations must be "f32" or "q8" but got ${JSON.stringify(o.activations)}`, { option: 'activations', value: String(o.activations), expected: ['f32', 'q8'] });
  }
  return { chunkBytes, q8: o.activations === 'q8' };
}

function checkX(e: Entry, X: Float32Array, batch: number): void {
  const n = e.info.rowLength;
  if (!(X instanceof Float32Array) || !Number.isInteger(batch) || batch < 1 || X.length < batch * n) {
    fail(ErrorCodes.BAD_INPUT, `[serve] ${e.info.name}: expected a Float32Array of ${batch} x ${n} values but got ${(X as Float32Array)?.length}`, {
      tensor: e.info.name, option: 'x', value: (X as Float32Array)?.length, expected: batch * n,
    });
  }
}
