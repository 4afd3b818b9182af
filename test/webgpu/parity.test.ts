// WebGPU kernels against the wasm kernels, byte for byte, in Node through the `webgpu` package
// (Dawn) on SwiftShader. The process env (VK_ICD_FILENAMES, LD_LIBRARY_PATH) comes from
// vitest.config.ts. Where the SwiftShader ICD exists, a missing adapter fails these tests.
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dequantize, quantize, type QuantizedTensor, type QuantizeOptions } from '../../src/quantize.js';
import { WebquantError } from '../../src/errors.js';
import { gpuState, resetGpu } from '../../src/webgpu/device.js';
import { resetBackendState, setBackendPreference, webgpuEvents, type WebgpuWarning } from '../../src/webgpu/backend.js';
import { gpuHooks } from '../../src/webgpu/run.js';
import { allShaders } from '../../src/webgpu/kernels.js';
import { mxfp4GgufLog2Table } from '../../src/webgpu/shaders/mxfp4_gguf.js';
import { edgeRows, lcg } from '../helpers/data.js';

const ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
const ROW = 256;

function rows(list: Float32Array[]): Float32Array {
  const out = new Float32Array(list.length * ROW);
  list.forEach((r, i) => out.set(r, i * ROW));
  return out;
}

const row = (f: (i: number) => number) => Float32Array.from({ length: ROW }, (_, i) => f(i));

/**
 * Blocks of 32 whose amax is the last value below, then the first at, the table's rounding-up
 * threshold: exponent fields 1..254 at a stride and subnormal leading bits 17..22.
 */
function log2Boundaries(): Float32Array[] {
  const t = mxfp4GgufLog2Table();
  const maxima: number[] = [];
  for (const ef of [1, 2, 40, 100, 130, 200, 252, 254]) maxima.push((ef << 23) | (t.normal[ef] - 1), (ef << 23) | t.normal[ef]);
  for (const p of [17, 18, 20, 22]) maxima.push(t.subnormal[p] - 1, t.subnormal[p]);
  const u = lcg(7);
  const out: Float32Array[] = [];
  for (let r = 0; r < maxima.length / 8; r++) {
    const bits = new Uint32Array(ROW);
    for (let i = 0; i < ROW; i++) {
      const a = maxima[r * 8 + (i >> 5)];
      // the maximum first, then fractions of it (bits shifted down: still finite, smaller), either sign
      bits[i] = i % 32 === 0 ? a : Math.floor(a * u()) | (u() < 0.5 ? 0x80000000 : 0);
    }
    out.push(new Float32Array(bits.buffer));
  }
  return out;
}

/** The shared edge rows plus the rounding cases of each kernel. */
function testInput(): Float32Array {
  const u = lcg(99);
  const NF4_T = [-0.8480964004993439, -0.6106329262256622, -0.4599952697753906, -0.33967943489551544, -0.2346074134111404,
    -0.13791173323988914, -0.045525018125772476, 0.03979014977812767, 0.1202552504837513, 0.2035212516784668,
    0.2920137718319893, 0.3893125355243683, 0.5016634166240692, 0.6427869200706482, 0.8614784181118011];
  const extra = [
    // |x| <= 1 with an exact 1.0: NF4 thresholds hit exactly (inv = 1)
    row((i) => (i % 64 === 0 ? 1 : Math.fround(NF4_T[i % 15]))),
    // int8: amax 127 -> s = 1, x / s = k + 0.5 (half to even)
    row((i) => (i % 64 === 0 ? 127 : ((i % 50) - 25) + 0.5)),
    // affine: min 0, max 15 per group -> scale 1, bias 0, half-integer ties
    row((i) => (i % 64 === 0 ? 0 : i % 64 === 1 ? 15 : (i % 15) + 0.5)),
    // FP8 E4M3: amax 448 -> s = 1; midpoints between grid values, subnormal ties (odd * 2^-10)
    row((i) => (i === 0 ? 448 : i % 3 === 0 ? 1.0625 * (i % 2 ? -1 : 1) : i % 3 === 1 ? (2 * (i % 7) + 1) * 2 ** -10 : 3.25 + 0.0625 * (i % 8))),
    // fp16-subnormal scales and values deeper still
    row(() => 3e-7 * (2 * u() - 1)),
    row(() => 2e-9 * (2 * u() - 1)),
    // amax ~ 2e-36 (normal d, huge 1/d) with fp32 denormals beside it
    row((i) => (i % 32 === 5 ? 2e-36 : (i % 2 ? -1 : 1) * 1e-39 * (1 + (i % 7)))),
    // denormal-only block and normal blocks in one row
    row((i) => (i < 64 ? 1e-40 * ((i % 9) - 4) : 2 * u() - 1)),
    // +0 / -0 mixtures
    row((i) => (i % 3 === 0 ? -0 : i % 3 === 1 ? 0 : i % 64 === 2 ? -0.5 : 0.25)),
    // IQ4: x = half the midpoints of the grid with max 127 (pass 0 has id = 1: exact ties)
    row((i) => (i % 32 === 0 ? 127 : [-231, -187, -148, -114, -84, -57, -32, -9, 14, 38, 63, 91, 122, 158, 202][i % 15] / 2)),
    // K-quants: one sub-block far larger than the rest, sign changes per sub-block
    row((i) => ((i >> 5) === 3 ? 1e4 : 1e-3) * (((i >> 4) & 1) ? -1 : 1) * (1 + (i % 5))),
    // NVFP4: amax 1.5 per 16 (scale 1/4): values on the E2M1 midpoints, both signs; and amax/6
    // just below 2^-6 (the encoder's clamp to 7) and saturated scales
    row((i) => (i % 16 === 0 ? 1.5 : [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5][i % 7] / 4 * (i % 2 ? -1 : 1))),
    row((i) => (i % 16 === 0 ? 6 * 7.7 * 2 ** -9 * (i % 32 ? 1 : 1000) : (u() - 0.5) * 0.09)),
    // mxfp4_gguf: block maxima on both sides of log2f's rounding up to the next exponent
    ...log2Boundaries(),
    // large magnitudes (differences overflow to inf for Q4_1: NaN codes)
    row((i) => (i % 2 ? 3e38 : -3e38)),
    row((i) => (i % 5 === 0 ? 60000 : -70000 * u())),
  ];
  return rows([...edgeRows(ROW).map((r) => r.values), ...extra]);
}

function diffBytes(a: Uint8Array, b: Uint8Array): number {
  expect(b.length).toBe(a.length);
  let n = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) n++;
  return n;
}
function firstBitDiff(a: Float32Array, b: Float32Array): string | undefined {
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length), ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  expect(ub.length).toBe(ua.length);
  for (let i = 0; i < ua.length; i++) {
    if (ua[i] !== ub[i]) return `index ${i} (row ${Math.floor(i / ROW)}): wasm 0x${ua[i].toString(16)} ${a[i]} vs gpu 0x${ub[i].toString(16)} ${b[i]}`;
  }
  return undefined;
}

/** Random bytes with finite fp16 fields at the given byte offsets of each block. */
function randomBlocks(nblocks: number, bytes: number, f16At: number[], seed: number): Uint8Array {
  const u = lcg(seed);
  const out = new Uint8Array(nblocks * bytes);
  for (let i = 0; i < out.length; i++) out[i] = Math.floor(u() * 256);
  for (let b = 0; b < nblocks; b++) {
    for (const o of f16At) {
      const hi = b * bytes + o + 1;
      if ((out[hi] & 0x7c) === 0x7c) out[hi] &= 0xbf; // exponent 31 -> finite
    }
  }
  return out;
}

/** Importances (one per column): random, with zeros, -0, tiny and huge values among them. */
function importance(): Float32Array {
  const u = lcg(41);
  return Float32Array.from({ length: ROW }, (_, i) => (i % 17 === 0 ? 0 : i % 23 === 0 ? -0 : i % 29 === 0 ? 1e-30 : i % 31 === 0 ? 1e6 : 4 * u()));
}

const QUANT_CASES: { name: string; opts: Omit<QuantizeOptions, 'rowLength'> }[] = [
  { name: 'q8_0', opts: { format: 'q8_0' } },
  { name: 'q4_0', opts: { format: 'q4_0' } },
  { name: 'q4_1', opts: { format: 'q4_1' } },
  { name: 'q5_0', opts: { format: 'q5_0' } },
  { name: 'q5_1', opts: { format: 'q5_1' } },
  { name: 'nf4 g64', opts: { format: 'nf4' } },
  { name: 'nf4 g32', opts: { format: 'nf4', groupSize: 32 } },
  { name: 'nf4 g256', opts: { format: 'nf4', groupSize: 256 } },
  { name: 'int8 channel', opts: { format: 'int8' } },
  { name: 'intsym 8 channel', opts: { format: 'intsym', bits: 8, granularity: 'channel' } },
  { name: 'affine int4 g64', opts: { format: 'affine', bits: 4 } },
  { name: 'affine int4 g32', opts: { format: 'affine', bits: 4, groupSize: 32 } },
  { name: 'affine int4 g128', opts: { format: 'affine', bits: 4, groupSize: 128 } },
  { name: 'fp8_e4m3 absmax', opts: { format: 'fp8_e4m3' } },
  { name: 'fp8_e4m3 clip', opts: { format: 'fp8_e4m3', calibration: 'clip,0.7' } },
  { name: 'fp8_e4m3 fixed', opts: { format: 'fp8_e4m3', calibration: 'fixed,0.01,2' } },
  { name: 'nvfp4_gguf', opts: { format: 'nvfp4_gguf' } },
  { name: 'mxfp4', opts: { format: 'mxfp4' } },
  { name: 'mxfp4_gguf', opts: { format: 'mxfp4_gguf' } },
  // The scale searches, without and with importances (all zero: IQ4_NL's 0/0 scale, K-quant
  // searches that accept no trial).
  // The legacy types' searches (their plain cases are above).
  ...(['q4_0', 'q4_1', 'q5_0', 'q5_1'] as const).flatMap((format) => [
    { name: `${format} imatrix`, opts: { format, importance: importance() } },
    { name: `${format} imatrix zeros`, opts: { format, importance: new Float32Array(ROW) } },
  ]),
  ...(['q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k', 'iq4_nl', 'iq4_xs'] as const).flatMap((format) => [
    { name: format, opts: { format } },
    { name: `${format} imatrix`, opts: { format, importance: importance() } },
    { name: `${format} imatrix zeros`, opts: { format, importance: new Float32Array(ROW) } },
  ]),
];

if (existsSync(ICD)) {
  describe('webgpu on SwiftShader', () => {
    const x = testInput();
    beforeAll(async () => {
      const s = await gpuState();
      // Fails (never skips) when the adapter is missing on a machine that has the ICD.
      expect(s.ok ? 'ok' : s.reason).toBe('ok');
    });
    afterAll(() => {
      gpuHooks.afterChunk = undefined;
      resetGpu();
      resetBackendState();
    });

    it('has a SwiftShader adapter, reported as CPU-emulated, with the adapter limits requested', async () => {
      const s = await gpuState();
      if (!s.ok) throw new Error(s.reason);
      expect(s.gpu.info.cpuEmulated).toBe(true);
      expect(s.gpu.limits.maxStorageBufferBindingSize).toBeGreaterThan(128 << 20);
    });

    it('compiles every shader without errors', async () => {
      const s = await gpuState();
      if (!s.ok) throw new Error(s.reason);
      for (const sh of allShaders()) {
        const info = await s.gpu.device.createShaderModule({ code: sh.source }).getCompilationInfo();
        expect(info.messages.filter((m) => m.type === 'error').map((m) => `${sh.name} ${sh.op}: ${m.message}`)).toEqual([]);
      }
    });

    for (const c of QUANT_CASES) {
      it(`quantize ${c.name}: same bytes as wasm-simd and wasm`, async () => {
        const opts = { ...c.opts, rowLength: ROW };
        const g = await quantize(x, { ...opts, backend: 'webgpu' });
        expect(g.backend).toBe('webgpu');
        for (const backend of ['wasm-simd', 'wasm'] as const) {
          const w = await quantize(x, { ...opts, backend });
          expect(diffBytes(w.data, g.data), `${backend}`).toBe(0);
        }
      });
      it(`dequantize ${c.name}: same f32 bits as wasm`, async () => {
        const q = await quantize(x, { ...c.opts, rowLength: ROW, backend: 'wasm-simd' });
        const w = await dequantize(q, { backend: 'wasm-simd' });
        const g = await dequantize(q, { backend: 'webgpu' });
        expect(firstBitDiff(w, g)).toBeUndefined();
        expect(firstBitDiff(await dequantize(q, { backend: 'wasm' }), g)).toBeUndefined();
      });
    }

    it('the legacy types\' importance searches in chunks of a few rows: each row\'s sum of squares travels with it', async () => {
      for (const format of ['q4_0', 'q5_1'] as const) {
        const opts = { format, rowLength: ROW, importance: importance() };
        const g = await quantize(x, { ...opts, backend: 'webgpu', chunkBytes: 4 * ROW * 4 }); // 2 rows a chunk
        expect(g.backend).toBe('webgpu');
        expect(diffBytes((await quantize(x, { ...opts, backend: 'wasm' })).data, g.data), format).toBe(0);
      }
    });

    it('importances reach the GPU searches: they change the bytes', async () => {
      for (const format of ['q4_0', 'q4_1', 'q5_0', 'q5_1', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k', 'iq4_nl', 'iq4_xs'] as const) {
        const plain = await quantize(x, { format, rowLength: ROW, backend: 'webgpu' });
        const imp = await quantize(x, { format, rowLength: ROW, backend: 'webgpu', importance: importance() });
        expect(diffBytes(plain.data, imp.data), format).toBeGreaterThan(0);
      }
    });

    // Dequantizers on wasm-quantized test rows, plus random blocks (every bit pattern of the codes).
    for (const [format, bytes, f16At, block] of [['q2_k', 84, [80, 82], 256], ['q3_k', 110, [108], 256], ['q4_k', 144, [0, 2], 256], ['q5_k', 176, [0, 2], 256], ['q6_k', 210, [208], 256], ['iq4_nl', 18, [0], 32], ['iq4_xs', 136, [0], 256],
      ['q8_0', 34, [0], 32], ['q4_0', 18, [0], 32], ['q4_1', 20, [0, 2], 32], ['q5_0', 22, [0], 32], ['q5_1', 24, [0, 2], 32], ['nvfp4_gguf', 36, [], 64], ['mxfp4', 17, [], 32], ['mxfp4_gguf', 17, [], 32]] as const) {
      it(`dequantize ${format}: wasm-quantized rows and random blocks, same f32 bits as wasm`, async () => {
        const q = await quantize(x, { format, rowLength: ROW, backend: 'wasm-simd' });
        expect(firstBitDiff(await dequantize(q, { backend: 'wasm-simd' }), await dequantize(q, { backend: 'webgpu' }))).toBeUndefined();
        const nrows = 24;
        const data = randomBlocks((nrows * ROW) / block, bytes, [...f16At], 5);
        const r: QuantizedTensor = { ...q, shape: [nrows, ROW], data, layout: { bytes: data.length, sections: [{ name: 'data', offset: 0, bytes: data.length, perRow: data.length / nrows }] } };
        expect(firstBitDiff(await dequantize(r, { backend: 'wasm' }), await dequantize(r, { backend: 'webgpu' }))).toBeUndefined();
      });
    }

    it('dequantize int8 per tensor / per group and fp8 per tensor, same bits as wasm', async () => {
      for (const opts of [{ format: 'int8', granularity: 'tensor' }, { format: 'int8', granularity: 'group', groupSize: 64 }, { format: 'fp8_e4m3', granularity: 'tensor' }] as const) {
        const q = await quantize(x, { ...opts, rowLength: ROW, backend: 'wasm-simd' });
        expect(firstBitDiff(await dequantize(q, { backend: 'wasm-simd' }), await dequantize(q, { backend: 'webgpu' })), opts.format).toBeUndefined();
      }
    });

    it('dequantize fp8_e4m3 of every code (NaN codes included), same bits as wasm', async () => {
      const q = await quantize(new Float32Array(256).fill(1), { format: 'fp8_e4m3', rowLength: 256, backend: 'wasm-simd' });
      const codes = Uint8Array.from({ length: 256 }, (_, i) => i);
      const data = new Uint8Array(q.data.length);
      data.set(codes);
      new DataView(data.buffer).setFloat32(256, 0.75, true);
      const t = { ...q, data };
      expect(firstBitDiff(await dequantize(t, { backend: 'wasm' }), await dequantize(t, { backend: 'webgpu' }))).toBeUndefined();
    });

    it('f16 and bf16 inputs, and many small chunks, give the wasm bytes', async () => {
      const h = new Uint16Array(x.length);
      const u = lcg(3);
      for (let i = 0; i < h.length; i++) h[i] = Math.floor(u() * 0x7c00) | (u() < 0.5 ? 0x8000 : 0);
      for (const dtype of ['f16', 'bf16'] as const) {
        for (const format of ['q4_1', 'int8'] as const) {
          const w = await quantize(h, { format, rowLength: ROW, dtype, backend: 'wasm-simd' });
          const g = await quantize(h, { format, rowLength: ROW, dtype, backend: 'webgpu', chunkBytes: 3 * ROW * 4 });
          expect(diffBytes(w.data, g.data), `${dtype} ${format}`).toBe(0);
        }
      }
      // importances travel with every chunk
      for (const format of ['iq4_nl', 'q6_k'] as const) {
        const w = await quantize(h, { format, rowLength: ROW, dtype: 'f16', backend: 'wasm-simd', importance: importance() });
        const g = await quantize(h, { format, rowLength: ROW, dtype: 'f16', backend: 'webgpu', importance: importance(), chunkBytes: 7 * ROW * 4 });
        expect(diffBytes(w.data, g.data), `f16 ${format} imatrix`).toBe(0);
      }
      const q = await quantize(x, { format: 'nf4', rowLength: ROW, backend: 'wasm-simd' });
      expect(firstBitDiff(await dequantize(q), await dequantize(q, { backend: 'webgpu', chunkBytes: 5 * ROW * 4 }))).toBeUndefined();
    });

    it('error metrics of a WebGPU quantization equal the wasm ones (f64 sums, order aside)', async () => {
      for (const format of ['q4_1', 'nf4', 'fp8_e4m3'] as const) {
        const w = await quantize(x.subarray(0, 8 * ROW), { format, rowLength: ROW, backend: 'wasm-simd', metrics: true });
        const g = await quantize(x.subarray(0, 8 * ROW), { format, rowLength: ROW, backend: 'webgpu', metrics: true });
        expect(diffBytes(w.data, g.data)).toBe(0);
        expect(g.metrics!.count).toBe(w.metrics!.count);
        expect(g.metrics!.maxAbsError).toBe(w.metrics!.maxAbsError);
        for (const k of ['rmse', 'sqnrDb', 'cosine'] as const) expect(g.metrics![k]).toBeCloseTo(w.metrics![k], 9);
      }
    });

    it("selection: 'auto' never picks a CPU-emulated adapter, forced unsupported options are errors", async () => {
      const q = await quantize(x, { format: 'q8_0', rowLength: ROW, preferGpu: true });
      expect(q.backend).not.toBe('webgpu');
      setBackendPreference('webgpu');
      expect((await quantize(x, { format: 'q8_0', rowLength: ROW })).backend).not.toBe('webgpu');
      // With emulated adapters allowed, 'auto' takes the GPU where a kernel exists, wasm elsewhere.
      setBackendPreference('webgpu', { allowCpuEmulated: true });
      expect((await quantize(x, { format: 'q8_0', rowLength: ROW })).backend).toBe('webgpu');
      expect((await quantize(x, { format: 'q8_0', rowLength: ROW, preferGpu: false })).backend).toBe('wasm-simd');
      expect((await quantize(x, { format: 'fp4', rowLength: ROW })).backend).toBe('wasm-simd');
      expect((await quantize(x, { format: 'q4_0', rowLength: ROW, importance: new Float32Array(ROW).fill(1) })).backend).toBe('webgpu');
      setBackendPreference('wasm');
      const bad = [
        () => quantize(x, { format: 'fp4', rowLength: ROW, backend: 'webgpu' }),
        () => quantize(x, { format: 'nf4', rowLength: ROW, backend: 'webgpu', doubleQuant: true }),
        () => quantize(x, { format: 'int8', rowLength: ROW, backend: 'webgpu', calibration: 'mse' }),
      ];
      for (const f of bad) {
        const e = await f().then(() => undefined, (err: unknown) => err);
        expect(e).toBeInstanceOf(WebquantError);
        expect((e as WebquantError).code).toBe('E_BAD_BACKEND');
      }
      const e = await quantize(x, { format: 'q8_0', rowLength: ROW, backend: 'gpu' as never }).catch((err: unknown) => err);
      expect((e as WebquantError).code).toBe('E_BAD_BACKEND');
    });

    // Last: it loses the device for the rest of the run.
    it('a device destroyed mid-run: finished rows are kept, the rest runs on wasm, a warning is emitted', async () => {
      const big = rows(Array.from({ length: 40 }, (_, i) => row((j) => Math.sin(i * 7 + j) * (1 + i))));
      const w = await quantize(big, { format: 'q4_1', rowLength: ROW, backend: 'wasm-simd' });
      const warnings: WebgpuWarning[] = [];
      const on = (ev: Event) => warnings.push((ev as CustomEvent<WebgpuWarning>).detail);
      webgpuEvents.addEventListener('warning', on);
      let done = -1;
      gpuHooks.afterChunk = (r, gpu) => {
        if (done < 0 && r >= 16) { done = r; gpu.device.destroy(); }
      };
      try {
        const g = await quantize(big, { format: 'q4_1', rowLength: ROW, backend: 'webgpu', chunkBytes: 8 * ROW * 4 });
        expect(done).toBe(16);
        expect(diffBytes(w.data, g.data)).toBe(0);
        expect(warnings.some((x) => x.kind === 'device-lost' && x.rowsDone === 16)).toBe(true);
        // The rest of the run uses wasm, with a warning for a forced request.
        const d = await dequantize(w, { backend: 'webgpu' });
        expect(firstBitDiff(await dequantize(w, { backend: 'wasm-simd' }), d)).toBeUndefined();
        expect(warnings.some((x) => x.kind === 'fallback')).toBe(true);
      } finally {
        webgpuEvents.removeEventListener('warning', on);
        gpuHooks.afterChunk = undefined;
      }
    });

    it('a device destroyed mid-dequantize: the output is complete and equals wasm', async () => {
      resetGpu();
      resetBackendState();
      const big = rows(Array.from({ length: 40 }, (_, i) => row((j) => Math.cos(i * 3 + j) * (1 + i))));
      const q = await quantize(big, { format: 'nf4', rowLength: ROW, backend: 'wasm-simd' });
      const warnings: WebgpuWarning[] = [];
      const on = (ev: Event) => warnings.push((ev as CustomEvent<WebgpuWarning>).detail);
      webgpuEvents.addEventListener('warning', on);
      gpuHooks.afterChunk = (r, gpu) => { if (r >= 24) gpu.device.destroy(); };
      try {
        const g = await dequantize(q, { backend: 'webgpu', chunkBytes: 12 * ROW * 4 });
        expect(firstBitDiff(await dequantize(q, { backend: 'wasm-simd' }), g)).toBeUndefined();
        expect(warnings.map((w) => [w.kind, w.rowsDone])).toEqual([['device-lost', 24]]);
      } finally {
        webgpuEvents.removeEventListener('warning', on);
        gpuHooks.afterChunk = undefined;
      }
    });
  });
} else {
  describe('webgpu without a Vulkan ICD', () => {
    it("a forced 'webgpu' backend without an adapter is a WebquantError", async () => {
      const s = await gpuState();
      if (s.ok) return; // a machine with a real GPU: the parity tests above need the ICD path only for SwiftShader
      const e = await quantize(new Float32Array(32), { format: 'q8_0', rowLength: 32, backend: 'webgpu' }).catch((err: unknown) => err);
      expect((e as WebquantError).code).toBe('E_BAD_BACKEND');
    });
  });
}
