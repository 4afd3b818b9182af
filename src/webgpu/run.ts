// Runs the WebGPU kernels over a tensor in chunks of whole rows that fit the device's binding and
// buffer limits. A device loss or an out-of-memory error mid-run keeps the rows already done and
// finishes the rest on wasm (with a 'warning' event); later calls in the run use wasm.
import { ErrorCodes, fail } from '../errors.js';
import { errorMetrics } from '../metrics.js';
import { getFormat } from '../formats/registry.js';
import { layoutOf, type Layout } from '../formats/types.js';
import type { TensorDequantizeOptions as DequantizeOptions, QuantizedTensor, QuantizeOptions, TensorValues, planTensor } from '../quantize.js';
import { markGpuLost, type GpuContext } from './device.js';
import { GPU_FORMATS, gpuUnsupported, quantKernel, shaderSource, type GpuKernel } from './kernels.js';
import { matvecBody } from './shaders/matvec.js';
import { noteDeviceLost, warn } from './backend.js';

type Plan = ReturnType<typeof planTensor>;

/** Test hook: called after each chunk with the rows done so far (e.g. to destroy the device). */
export const gpuHooks: { afterChunk?: (rowsDone: number, gpu: GpuContext) => void | Promise<void> } = {};

const DEFAULT_GPU_CHUNK = 64 << 20;
const align4 = (n: number) => (n + 3) & ~3;

/** The device failed (lost, out of memory, readback failed): it is marked lost for the run. */
export class GpuFailure extends Error {}

/**
 * What a device failure mid-tensor does: 'wasm' keeps the rows done and finishes the rest on wasm
 * in this thread; 'throw' rethrows the GpuFailure (the pipeline's GPU lane redoes the unit on its
 * workers).
 */
export type OnLost = 'wasm' | 'throw';

const pipelines = new WeakMap<GPUDevice, Map<string, GPUComputePipeline>>();

function pipelineFor(gpu: GpuContext, k: GpuKernel, op: 'quantize' | 'dequantize' | 'matvec'): GPUComputePipeline {
  let m = pipelines.get(gpu.device);
  if (!m) pipelines.set(gpu.device, (m = new Map()));
  const key = `${op}:${JSON.stringify(k.constants ?? {})}:${k.body}`;
  let p = m.get(key);
  if (!p) {
    const module = gpu.device.createShaderModule({ code: shaderSource(k, op === 'quantize' ? 'quantize' : 'dequantize') });
    p = gpu.device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main', constants: k.constants } });
    m.set(key, p);
  }
  return p;
}

interface Dispatch {
  kernel: GpuKernel;
  op: 'quantize' | 'dequantize' | 'matvec';
  /** Work items (blocks, elements or rows) of this chunk. */
  items: number;
  params: { rowLen: number; group: number; off1: number; off2: number; flags: number; tscale: number; p0: number; p1: number; calib: number; aux?: number };
  src: Uint8Array;
  dstBytes: number;
  /** The vector of a matvec (binding 3). */
  x?: Float32Array;
}

function f32bits(v: number): number {
  const dv = new DataView(new ArrayBuffer(4));
  dv.setFloat32(0, v, true);
  return dv.getUint32(0, true);
}

async function runDispatch(gpu: GpuContext, d: Dispatch): Promise<Uint8Array> {
  if (gpu.lost) throw new GpuFailure('device lost');
  const dev = gpu.device;
  const maxDim = gpu.limits.maxComputeWorkgroupsPerDimension;
  const groups = d.kernel.grid.by === 'row' ? d.items : Math.ceil(d.items / 64);
  const wx = Math.max(1, Math.min(groups, maxDim));
  const wy = Math.ceil(groups / wx);
  const nx = d.kernel.grid.by === 'row' ? wx : wx * 64;
  dev.pushErrorScope('out-of-memory');
  dev.pushErrorScope('validation');
  const pipeline = pipelineFor(gpu, d.kernel, d.op);
  const srcBuf = dev.createBuffer({ size: Math.max(16, align4(d.src.byteLength)), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  const dstSize = Math.max(16, align4(d.dstBytes));
  const dstBuf = dev.createBuffer({ size: dstSize, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const readBuf = dev.createBuffer({ size: dstSize, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const uni = dev.createBuffer({ size: 48, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
  const xBuf = d.x ? dev.createBuffer({ size: Math.max(16, d.x.byteLength), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST }) : undefined;
  const buffers = [srcBuf, dstBuf, readBuf, uni, ...(xBuf ? [xBuf] : [])];
  try {
    const padded = d.src.byteLength % 4 === 0 ? d.src : (() => { const c = new Uint8Array(align4(d.src.byteLength)); c.set(d.src); return c; })();
    if (padded.byteLength > 0) dev.queue.writeBuffer(srcBuf, 0, padded as Uint8Array<ArrayBuffer>);
    const p = d.params;
    dev.queue.writeBuffer(uni, 0, new Uint32Array([d.items, p.rowLen, p.group, nx, p.off1, p.off2, p.flags, p.tscale, p.p0, p.p1, p.calib, p.aux ?? 0]));
    if (xBuf && d.x) dev.queue.writeBuffer(xBuf, 0, d.x as Float32Array<ArrayBuffer>);
    const bind = dev.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [
        { binding: 0, resource: { buffer: srcBuf } },
        { binding: 1, resource: { buffer: dstBuf } },
        { binding: 2, resource: { buffer: uni } },
        ...(xBuf ? [{ binding: 3, resource: { buffer: xBuf } }] : []),
      ],
    });
    const enc = dev.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bind);
    pass.dispatchWorkgroups(wx, wy);
    pass.end();
    enc.copyBufferToBuffer(dstBuf, 0, readBuf, 0, dstSize);
    dev.queue.submit([enc.finish()]);
    const validation = await dev.popErrorScope();
    const oom = await dev.popErrorScope();
    if (oom) throw new GpuFailure(`out of memory: ${oom.message}`);
    if (validation) throw new Error(`[webgpu] validation error: ${validation.message}`);
    try {
      await readBuf.mapAsync(GPUMapMode.READ);
    } catch (e) {
      throw new GpuFailure(`readback failed: ${(e as Error).message}`);
    }
    if (gpu.lost) throw new GpuFailure('device lost');
    const out = new Uint8Array(readBuf.getMappedRange().slice(0, d.dstBytes));
    readBuf.unmap();
    return out;
  } finally {
    for (const b of buffers) b.destroy();
  }
}

/** `fixed`: bytes every chunk's input carries besides its rows (the importances). */
function rowsPerChunk(gpu: GpuContext, bytesPerRow: number, nrows: number, chunkBytes: number | undefined, name: string, fixed = 0): number {
  const cap = Math.min(gpu.limits.maxStorageBufferBindingSize, gpu.limits.maxBufferSize) - fixed;
  const budget = Math.min(cap, (chunkBytes ?? DEFAULT_GPU_CHUNK) - fixed);
  if (bytesPerRow > cap) {
    fail(ErrorCodes.BAD_INPUT, `[webgpu] ${name}: one row needs ${bytesPerRow} bytes but the device binds at most ${cap}`, { tensor: name, value: bytesPerRow, expected: cap });
  }
  return Math.max(1, Math.min(nrows, Math.floor(budget / bytesPerRow)));
}

function toF32(values: TensorValues, dtype: string, from: number, to: number): Float32Array {
  if (values instanceof Float32Array) return values.subarray(from, to);
  const out = new Float32Array(to - from);
  const u = new Uint32Array(out.buffer);
  for (let i = from; i < to; i++) {
    const h = values[i];
    if (dtype === 'bf16') u[i - from] = h << 16;
    else {
      // exact f16 -> f32
      const s = (h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
      if (e === 0) out[i - from] = (s ? -1 : 1) * m * 2 ** -24;
      else if (e === 31) u[i - from] = (s | 0x7f800000 | (m << 13)) >>> 0;
      else u[i - from] = (s | ((e + 112) << 23) | (m << 13)) >>> 0;
    }
  }
  return out;
}

/**
 * sum(x^2)/len of one row in f32 arithmetic, left to right from +0 (the wasm's sumSquares(x,
 * rowLen) / rowLen): each step through f64 and rounded to f32, which for +, * and / of f32
 * operands gives the correctly rounded f32 result (53 >= 2*24 + 2 bits).
 */
function rowSigma2(x: Float32Array, at: number, len: number): number {
  let s = 0;
  for (let i = at; i < at + len; i++) s = Math.fround(s + Math.fround(x[i] * x[i]));
  return Math.fround(s / len);
}

function onFailure(e: unknown, rowsDone: number, op: string, name: string, onLost: OnLost): void {
  if (!(e instanceof GpuFailure)) throw e;
  markGpuLost(e.message);
  noteDeviceLost(e.message);
  if (onLost === 'throw') throw e;
  warn({ kind: 'device-lost', message: `[${op}] ${name}: WebGPU failed (${e.message}) after ${rowsDone} rows; finishing on wasm`, rowsDone });
}

function rowBytesOf(layout: Layout) {
  return layout.sections.filter((s) => s.perRow > 0);
}

export async function gpuQuantize(gpu: GpuContext, values: TensorValues, opts: QuantizeOptions, p: Plan, onLost: OnLost = 'wasm'): Promise<QuantizedTensor> {
  const { spec, dtype, rowLen, nrows, o, layout, name } = p;
  // Importances (one per column) follow the chunk's values in src, for the kernels that read them.
  const f = GPU_FORMATS[spec.name];
  const useImp = !!opts.importance && spec.importance;
  const kernel = quantKernel(f, useImp)!;
  const imp = useImp && kernel === f.quantImportance ? opts.importance : undefined;
  const secs = rowBytesOf(layout);
  const data = new Uint8Array(layout.bytes);
  // NaN / inf are refused as on wasm, before any GPU work.
  const nf = values instanceof Float32Array ? scanF32(values) : scanU16(values, dtype === 'f16' ? 0x7c00 : 0x7f80);
  if (nf >= 0) {
    fail(ErrorCodes.NON_FINITE, `[quantize] ${name}: value at index ${nf} (row ${Math.floor(nf / rowLen)}, column ${nf % rowLen}) is not finite`, { tensor: name, index: nf, value: String(values[nf]) });
  }
  const perRowOut = secs.reduce((a, s) => a + s.perRow + 4, 0);
  // The legacy types' importance searches also read each row's sum(x^2)/rowLen (after the importances).
  const sig = !!imp && kernel.rowSigma2;
  const rows = rowsPerChunk(gpu, Math.max(rowLen * 4 + (sig ? 4 : 0), perRowOut), nrows, opts.chunkBytes, name, imp ? rowLen * 4 : 0);
  const c = o.calibration;
  let r0 = 0;
  try {
    for (; r0 < nrows; r0 += rows) {
      const n = Math.min(rows, nrows - r0);
      let x = toF32(values, dtype, r0 * rowLen, (r0 + n) * rowLen);
      if (imp) {
        const xi = new Float32Array(x.length + rowLen + (sig ? n : 0));
        xi.set(x);
        xi.set(imp, x.length);
        if (sig) for (let r = 0; r < n; r++) xi[x.length + rowLen + r] = rowSigma2(x, r * rowLen, rowLen);
        x = xi;
      }
      const offs: number[] = [];
      let at = 0;
      for (const s of secs) { offs.push(at); at = align4(at + s.perRow * n); }
      const items = kernel.grid.by === 'row' ? n : kernel.grid.by === 'elem' ? n * rowLen : (n * rowLen) / kernel.grid.elems(o);
      const out = await runDispatch(gpu, {
        kernel, op: 'quantize', items,
        params: {
          rowLen, group: o.groupSize, off1: offs[1] ?? 0, off2: offs[2] ?? 0, flags: 0, tscale: 0, aux: n * rowLen,
          p0: f32bits(c.method === 'fixed' ? c.scale! : c.method === 'clip' ? c.ratio! : 0),
          p1: f32bits(c.method === 'fixed' ? c.max! : 0),
          calib: c.method === 'fixed' ? 3 : c.method === 'clip' ? 4 : 0,
        },
        src: new Uint8Array(x.buffer, x.byteOffset, x.byteLength),
        dstBytes: at,
      });
      secs.forEach((s, i) => data.set(out.subarray(offs[i], offs[i] + s.perRow * n), s.offset + s.perRow * r0));
      await gpuHooks.afterChunk?.(r0 + n, gpu);
    }
  } catch (e) {
    onFailure(e, r0, 'quantize', name, onLost);
    const { quantizeWith } = await import('../quantize.js');
    const { loadKernels } = await import('../kernels/loader.js');
    const rest = values.subarray(r0 * rowLen);
    const qt = await quantizeWith(await loadKernels('auto'), rest, { ...opts, backend: 'auto', name });
    rowBytesOf(qt.layout).forEach((s, i) => data.set(qt.data.subarray(s.offset, s.offset + s.bytes), secs[i].offset + secs[i].perRow * r0));
  }
  const qt: QuantizedTensor = { format: spec.name, shape: [nrows, rowLen], data, layout, options: o, backend: 'webgpu' };
  if (opts.metrics) {
    // The dequantization runs on the GPU (bit-exact with wasm); the f64 sums on the host, so the
    // figures equal the wasm ones up to the order of the f64 additions.
    const y = await gpuDequantize(gpu, qt, { chunkBytes: opts.chunkBytes }, onLost);
    qt.metrics = errorMetrics(toF32(values, dtype, 0, values.length), y);
  }
  return qt;
}

export async function gpuDequantize(gpu: GpuContext, qt: QuantizedTensor, opts: DequantizeOptions, onLost: OnLost = 'wasm'): Promise<Float32Array> {
  const spec = getFormat(qt.format);
  const [nrows, rowLen] = qt.shape;
  const o = qt.options;
  const layout = layoutOf(spec, nrows, rowLen, o);
  if (qt.data.byteLength !== layout.bytes) {
    fail(ErrorCodes.BAD_INPUT, `[dequantize] ${qt.format} data of shape [${nrows}, ${rowLen}] must be ${layout.bytes} bytes but is ${qt.data.byteLength}`, {
      option: 'data', value: qt.data.byteLength, expected: layout.bytes,
    });
  }
  const kernel = GPU_FORMATS[spec.name].dequant!;
  const secs = rowBytesOf(layout);
  const tensorSecs = layout.sections.filter((s) => s.perRow === 0);
  const perTensor = o.granularity === 'tensor' && tensorSecs.length > 0;
  const tscale = perTensor ? new DataView(qt.data.buffer, qt.data.byteOffset + tensorSecs[0].offset, 4).getUint32(0, true) : 0;
  const flags = (o.granularity === 'tensor' ? 2 : 0) | (o.granularity === 'channel' ? 4 : 0);
  const out = new Float32Array(nrows * rowLen);
  const perRowIn = secs.reduce((a, s) => a + s.perRow + 4, 0);
  const rows = rowsPerChunk(gpu, Math.max(rowLen * 4, perRowIn), nrows, opts.chunkBytes, qt.format);
  let r0 = 0;
  try {
    for (; r0 < nrows; r0 += rows) {
      const n = Math.min(rows, nrows - r0);
      const offs: number[] = [];
      let at = 0;
      for (const s of secs) { offs.push(at); at = align4(at + s.perRow * n); }
      const src = new Uint8Array(at);
      secs.forEach((s, i) => src.set(qt.data.subarray(s.offset + s.perRow * r0, s.offset + s.perRow * (r0 + n)), offs[i]));
      const items = kernel.grid.by === 'elem' ? n * rowLen : (n * rowLen) / (kernel.grid.by === 'block' ? kernel.grid.elems(o) : rowLen);
      const res = await runDispatch(gpu, {
        kernel, op: 'dequantize', items,
        params: { rowLen, group: o.groupSize, off1: offs[1] ?? 0, off2: offs[2] ?? 0, flags, tscale, p0: 0, p1: 0, calib: 0 },
        src,
        dstBytes: n * rowLen * 4,
      });
      out.set(new Float32Array(res.buffer, res.byteOffset, n * rowLen), r0 * rowLen);
      await gpuHooks.afterChunk?.(r0 + n, gpu);
    }
  } catch (e) {
    onFailure(e, r0, 'dequantize', qt.format, onLost);
    const { dequantizeWith } = await import('../quantize.js');
    const { loadKernels } = await import('../kernels/loader.js');
    out.set(dequantizeWith(await loadKernels('auto'), sliceRows(qt, layout, r0)), r0 * rowLen);
  }
  return out;
}

/**
 * y = W x on the GPU (W quantized, rows of the tensor). Every y[r] is within MATVEC_TOLERANCE of the
 * exact dot product of the dequantized row with x. No wasm fallback: a lost device is an error.
 */
export async function gpuMatvec(gpu: GpuContext, qt: QuantizedTensor, x: Float32Array, chunkBytes?: number): Promise<Float32Array> {
  const spec = getFormat(qt.format);
  const [nrows, rowLen] = qt.shape;
  if (x.length !== rowLen) {
    fail(ErrorCodes.BAD_INPUT, `[matvec] x has ${x.length} values but rows have ${rowLen}`, { option: 'x', value: x.length, expected: rowLen });
  }
  const why = gpuUnsupported(spec.name, qt.options, 'dequantize');
  const body = matvecBody(spec.name);
  if (why || !body) fail(ErrorCodes.BAD_BACKEND, `[matvec] no WebGPU matvec: ${why ?? `format ${spec.name}`}`, { option: 'format', value: spec.name });
  const o = qt.options;
  const layout = layoutOf(spec, nrows, rowLen, o);
  const kernel: GpuKernel = { body, grid: { by: 'row' } };
  const secs = rowBytesOf(layout);
  const tensorSecs = layout.sections.filter((s) => s.perRow === 0);
  const tscale = o.granularity === 'tensor' && tensorSecs.length > 0 ? new DataView(qt.data.buffer, qt.data.byteOffset + tensorSecs[0].offset, 4).getUint32(0, true) : 0;
  const flags = (o.granularity === 'tensor' ? 2 : 0) | (o.granularity === 'channel' ? 4 : 0);
  const y = new Float32Array(nrows);
  const rows = rowsPerChunk(gpu, secs.reduce((a, s) => a + s.perRow + 4, 0), nrows, chunkBytes, qt.format);
  for (let r0 = 0; r0 < nrows; r0 += rows) {
    const n = Math.min(rows, nrows - r0);
    const offs: number[] = [];
    let at = 0;
    for (const s of secs) { offs.push(at); at = align4(at + s.perRow * n); }
    const src = new Uint8Array(at);
    secs.forEach((s, i) => src.set(qt.data.subarray(s.offset + s.perRow * r0, s.offset + s.perRow * (r0 + n)), offs[i]));
    const res = await runDispatch(gpu, {
      kernel, op: 'matvec', items: n,
      params: { rowLen, group: o.groupSize, off1: offs[1] ?? 0, off2: offs[2] ?? 0, flags, tscale, p0: 0, p1: 0, calib: 0 },
      src, dstBytes: n * 4, x,
    });
    y.set(new Float32Array(res.buffer, res.byteOffset, n), r0);
  }
  return y;
}

/** |y_gpu - sum w_i x_i| <= MATVEC_TOLERANCE(rowLen) * sum |w_i x_i| (f32 partial sums, see shaders/matvec.ts). */
export function MATVEC_TOLERANCE(rowLen: number): number {
  return (Math.ceil(rowLen / 64) + 8) * 2 ** -23;
}

/** Rows [r0, end) of a quantized tensor as a tensor of its own (tensor sections copied). */
function sliceRows(qt: QuantizedTensor, layout: Layout, r0: number): QuantizedTensor {
  const [nrows, rowLen] = qt.shape;
  const spec = getFormat(qt.format);
  const sub = layoutOf(spec, nrows - r0, rowLen, qt.options);
  const data = new Uint8Array(sub.bytes);
  layout.sections.forEach((s, i) => {
    const t = sub.sections[i];
    if (s.perRow > 0) data.set(qt.data.subarray(s.offset + s.perRow * r0, s.offset + s.bytes), t.offset);
    else data.set(qt.data.subarray(s.offset, s.offset + s.bytes), t.offset);
  });
  return { ...qt, shape: [nrows - r0, rowLen], data, layout: sub };
}

function scanF32(v: Float32Array): number {
  const u = new Uint32Array(v.buffer, v.byteOffset, v.length);
  for (let i = 0; i < u.length; i++) if ((u[i] & 0x7f800000) === 0x7f800000) return i;
  return -1;
}
function scanU16(v: Uint16Array, mask: number): number {
  for (let i = 0; i < v.length; i++) if ((v[i] & mask) === mask) return i;
  return -1;
}
