// Serving matvec (assembly/serve, src/serve): y = W x on quantized rows against the f64 dot of the
// dequantize() rows, for every registry format and option variant, on both wasm builds.
import { describe, expect, it } from 'vitest';
import { formats } from '../../src/formats/registry.js';
import { withImportance } from '../helpers/data.js';
import { dequantize, quantize, type QuantizeOptions } from '../../src/quantize.js';
import { MATVEC_REL_TOL, Q8_ACTIVATION_FORMATS, SERVE_Q8_ACT, SIMD_SCALAR_REL_TOL, hasFusedMatvec, servedFromQuantized } from '../../src/serve/index.js';
import { serveKernels } from '../../src/serve/kernels.js';
import { resolveOptions } from '../../src/options.js';

const ROWS = 12;
const ROW = 512;

function rand(n: number, seed: number, scale = 1): Float32Array {
  const v = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const a = (s >>> 8) / 16777216;
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    v[i] = scale * (a + (s >>> 8) / 16777216 - 1) * (1 + ((i * 7) % 13) / 4);
  }
  return v;
}

/** Every registry format with its default options, plus the option variants with other layouts. */
const variants: { name: string; opts: Omit<QuantizeOptions, 'rowLength'> }[] = [];
for (const f of formats.values()) {
  variants.push({ name: f.name, opts: { format: f.name } });
  if (f.doubleQuant) variants.push({ name: `${f.name}+dq`, opts: { format: f.name, doubleQuant: true } });
  for (const g of f.granularities ?? []) {
    if (g !== f.defaults?.granularity) variants.push({ name: `${f.name}/${g}`, opts: { format: f.name, granularity: g } });
  }
  for (const d of f.scaleDtypes?.slice(1) ?? []) variants.push({ name: `${f.name}/${d}`, opts: { format: f.name, scaleDtype: d } });
  if (f.name === 'intsym' || f.name === 'affine' || f.name === 'mlx') {
    for (const bits of f.bits ?? []) if (bits !== f.defaults?.bits) variants.push({ name: `${f.name}/b${bits}`, opts: { format: f.name, bits, granularity: 'group', groupSize: 64 } });
  }
}

function reference(deq: Float32Array, x: Float32Array | Float64Array, rows: number, n: number) {
  const ref = new Float64Array(rows);
  const mag = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let s = 0;
    let m = 0;
    for (let i = 0; i < n; i++) {
      s += deq[r * n + i] * x[i];
      m += Math.abs(deq[r * n + i] * x[i]);
    }
    ref[r] = s;
    mag[r] = m;
  }
  return { ref, mag };
}

describe('serve matvec vs f64 dot of dequantized rows', () => {
  it('the host tolerances mirror the wasm constants', async () => {
    for (const b of ['wasm-simd', 'wasm'] as const) {
      const k = await serveKernels(b);
      expect(k.constant('MATVEC_REL_TOL')).toBe(MATVEC_REL_TOL);
      expect(k.constant('SIMD_SCALAR_REL_TOL')).toBe(SIMD_SCALAR_REL_TOL);
      expect(k.constant('SERVE_Q8_ACT')).toBe(SERVE_Q8_ACT);
    }
  });

  for (const v of variants) {
    it(`${v.name}: both builds within MATVEC_REL_TOL, SIMD vs scalar within SIMD_SCALAR_REL_TOL`, async () => {
      const w = rand(ROWS * ROW, 17 + v.name.length, 0.05);
      const x = rand(ROW, 99, 1);
      const qt = await quantize(w, withImportance({ ...v.opts, rowLength: ROW, backend: 'wasm' }, formats.get(v.opts.format)));
      const deq = await dequantize(qt, { backend: 'wasm' });
      const { ref, mag } = reference(deq, x, ROWS, ROW);
      const ys: Float32Array[] = [];
      for (const backend of ['wasm-simd', 'wasm'] as const) {
        const t = await servedFromQuantized(qt, { backend, chunkBytes: 3000 });
        const y = t.matvec(x);
        for (let r = 0; r < ROWS; r++) {
          expect(Math.abs(y[r] - ref[r]), `${backend} row ${r}: ${y[r]} vs ${ref[r]}`).toBeLessThanOrEqual(MATVEC_REL_TOL * mag[r] + 1e-30);
        }
        // dequantize through the serving instance is the quantize.ts dequantize, bit for bit
        expect(Buffer.from(t.dequantize().buffer).equals(Buffer.from(deq.buffer))).toBe(true);
        // matmul of 3 vectors = 3 matvecs
        const X = new Float32Array(3 * ROW);
        X.set(x, 0); X.set(rand(ROW, 5), ROW); X.set(x.map((a) => -a), 2 * ROW);
        const Y = t.matmul(X, 3);
        expect(Array.from(Y.subarray(0, ROWS))).toEqual(Array.from(y));
        expect(Array.from(Y.subarray(2 * ROWS))).toEqual(Array.from(y.map((a) => -a)));
        ys.push(y);
      }
      for (let r = 0; r < ROWS; r++) {
        expect(Math.abs(ys[0][r] - ys[1][r])).toBeLessThanOrEqual(SIMD_SCALAR_REL_TOL * mag[r] + 1e-30);
      }
    });
  }

  it('bnb_nf4 / bnb_fp4 with double quantization: groups of 256 blocks across rows and chunks of rows', async () => {
    // 4 blocks a row: a group spans 64 rows, while a chunk of 3000 bytes holds a few rows
    const [rows, row] = [150, 256];
    const w = rand(rows * row, 41, 0.05);
    const x = rand(row, 7, 1);
    for (const format of ['bnb_nf4', 'bnb_fp4']) {
      const qt = await quantize(w, { format, doubleQuant: true, rowLength: row });
      const deq = await dequantize(qt);
      const { ref, mag } = reference(deq, x, rows, row);
      for (const backend of ['wasm-simd', 'wasm'] as const) {
        const t = await servedFromQuantized(qt, { backend, chunkBytes: 3000 });
        expect(Buffer.from(t.dequantize().buffer).equals(Buffer.from(deq.buffer)), `${format} ${backend}`).toBe(true);
        const y = t.matvec(x);
        for (let r = 0; r < rows; r++) expect(Math.abs(y[r] - ref[r]), `${format} ${backend} row ${r}`).toBeLessThanOrEqual(MATVEC_REL_TOL * mag[r] + 1e-30);
        expect(Array.from(t.matmul(new Float32Array([...x, ...x]), 2).subarray(rows))).toEqual(Array.from(y));
      }
    }
  });

  it('f16, bf16, the GGUF formats, NF4 / FP4 and int: matmul (one batched kernel call per chunk of rows) gives each position the bits of matvec, both builds', async () => {
    const cases: { format: string; opts?: Partial<QuantizeOptions> }[] = ['f16', 'bf16', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'iq4_nl', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k', 'iq4_xs', 'nf4', 'fp4']
      .map((format) => ({ format }));
    // NF4 with double-quantized absmax, FP4 with groups of 32 and of 256
    cases.push({ format: 'nf4', opts: { doubleQuant: true } }, { format: 'fp4', opts: { groupSize: 32 } }, { format: 'fp4', opts: { groupSize: 256 } });
    // int: 8 bits per channel / tensor (rows of 272 and 4368: a last run of 16) / group of 32, 4
    // bits per group / channel (272, 4368: not the fast path), affine 4 and 8 bits; 2, 3, 5 and 6
    // bits (dotRun's slices: rows of 272 and 4368 per channel / tensor, a short last slice; rows of
    // 259 (int8) and 258 (int4), a last slice of 3 or 2: dotI32's scalar tail)
    cases.push({ format: 'int8' }, { format: 'int8', opts: { granularity: 'tensor' } }, { format: 'int8', opts: { granularity: 'group', groupSize: 32 } },
      { format: 'int4' }, { format: 'int4', opts: { granularity: 'channel' } }, { format: 'affine', opts: { bits: 4, groupSize: 32 } },
      { format: 'affine', opts: { bits: 8, groupSize: 128 } }, { format: 'intsym', opts: { bits: 3, granularity: 'group', groupSize: 64 } },
      { format: 'intsym', opts: { bits: 6, granularity: 'channel' } }, { format: 'intsym', opts: { bits: 5, granularity: 'tensor' } },
      { format: 'affine', opts: { bits: 2, groupSize: 32 } }, { format: 'affine', opts: { bits: 3, groupSize: 64 } }, { format: 'affine', opts: { bits: 6, groupSize: 128 } });
    // FP8 per channel and per tensor (rows of 100: a tail after the last 16)
    cases.push({ format: 'fp8_e4m3' }, { format: 'fp8_e5m2', opts: { granularity: 'tensor' } });
    for (const { format, opts } of cases) {
      const half = format === 'f16' || format === 'bf16';
      const k = /_k$|iq4_xs/.test(format);
      const bnb = format === 'nf4' || format === 'fp4' || format.startsWith('int') || format === 'affine';
      const fp8 = format.startsWith('fp8');
      for (const len of half || fp8 ? [16, 24, 100, 256, 264, 4104] : k ? [256, 768, 4352] : bnb ? (format === 'int8' && opts?.granularity !== 'group' || opts?.granularity === 'channel' ? (opts?.bits === 6 ? [272, 768, 4368] : [format === 'int8' ? 259 : 258, 272, 768, 4368]) : [256, 768, 4352]) : [32, 96, 256, 4128]) {
        // f16/bf16: two groups of four positions, then one alone. GGUF rows of 4128 values: 37 rows
        // make three blocks of converted rows inside one call (15 fit its 256 KiB), and 129 blocks a
        // row leave the last one unpaired; of 4352 (17 super-blocks, or 68 NF4 groups), 15 a block too.
        const rows = half ? 11 : 37, batch = 9;
        const qt = await quantize(rand(rows * len, 3 + len, 0.05), { format, rowLength: len, backend: 'wasm', ...opts });
        const X = rand(batch * len, 7 + len, 1);
        for (const backend of ['wasm-simd', 'wasm'] as const) {
          // A chunk of a few rows: several kernel calls, the last one short; rows of 4104 (a
          // long row with a tail) and 4128 all in one call.
          const t = await servedFromQuantized(qt, { backend, chunkBytes: len >= 4104 ? undefined : 4 * len * 2 });
          const Y = t.matmul(X, batch);
          for (let b = 0; b < batch; b++) {
            const y = t.matvec(X.subarray(b * len, (b + 1) * len));
            expect(Buffer.from(Y.buffer, Y.byteOffset + b * rows * 4, rows * 4).equals(Buffer.from(y.buffer, y.byteOffset, y.byteLength)), `${format} ${JSON.stringify(opts ?? {})} ${len} ${backend} position ${b}`).toBe(true);
          }
        }
      }
    }
  });

  // The SIMD kernels walk a row in loop trips of 2 blocks / 64- or 128-value chunks and take fast
  // paths only for some run lengths (int 4-bit runs of a multiple of 32, 8-bit of 16): row lengths
  // with an odd block count, a half-filled last trip, or none of that (the fallback), and an odd
  // row count, for every variant whose block size allows the length.
  const LENGTHS = [32, 96, 100, 112, 208, 224, 256, 768, 1280];
  for (const v of variants) {
    it(`${v.name}: row lengths that do not fill a loop trip, 7 rows, both builds`, async () => {
      const spec = formats.get(v.opts.format)!;
      const block = spec.blockSize(resolveOptions(spec, v.opts));
      const lengths = LENGTHS.filter((n) => n % block === 0);
      expect(lengths.length).toBeGreaterThan(0);
      for (const n of lengths) {
        const rows = 7;
        const w = rand(rows * n, 5 + n, 0.05);
        const x = rand(n, 7 + n, 1);
        const qt = await quantize(w, withImportance({ ...v.opts, rowLength: n, backend: 'wasm' }, formats.get(v.opts.format)));
        const deq = await dequantize(qt, { backend: 'wasm' });
        const { ref, mag } = reference(deq, x, rows, n);
        const ys: Float32Array[] = [];
        for (const backend of ['wasm-simd', 'wasm'] as const) {
          const y = (await servedFromQuantized(qt, { backend })).matvec(x);
          for (let r = 0; r < rows; r++) {
            expect(Math.abs(y[r] - ref[r]), `${backend} length ${n} row ${r}: ${y[r]} vs ${ref[r]}`).toBeLessThanOrEqual(MATVEC_REL_TOL * mag[r] + 1e-30);
          }
          ys.push(y);
        }
        for (let r = 0; r < rows; r++) expect(Math.abs(ys[0][r] - ys[1][r])).toBeLessThanOrEqual(SIMD_SCALAR_REL_TOL * mag[r] + 1e-30);
        if (!Q8_ACTIVATION_FORMATS.includes(qt.format)) continue;
        // int8 activations: against the f64 dot with x^
        const q = reference(deq, quantizedX(x), rows, n);
        const qs: Float32Array[] = [];
        for (const backend of ['wasm-simd', 'wasm'] as const) {
          const y = (await servedFromQuantized(qt, { backend, activations: 'q8' })).matvec(x);
          for (let r = 0; r < rows; r++) {
            expect(Math.abs(y[r] - q.ref[r]), `q8 ${backend} length ${n} row ${r}`).toBeLessThanOrEqual(MATVEC_REL_TOL * q.mag[r] + 1e-30);
          }
          qs.push(y);
        }
        for (let r = 0; r < rows; r++) expect(Math.abs(qs[0][r] - qs[1][r])).toBeLessThanOrEqual(SIMD_SCALAR_REL_TOL * q.mag[r] + 1e-30);
      }
    });
  }

  // x^ = the int8 activations the kernels use with activations: 'q8' (assembly/serve/common.ts quantizeX).
  function quantizedX(x: Float32Array): Float64Array {
    const f = Math.fround;
    const out = new Float64Array(x.length);
    for (let b = 0; b < x.length; b += 32) {
      let amax = 0;
      for (let i = b; i < Math.min(b + 32, x.length); i++) amax = Math.max(amax, Math.abs(x[i]));
      const d = f(amax / 127);
      const id = d !== 0 ? f(1 / d) : 0;
      for (let i = b; i < Math.min(b + 32, x.length); i++) {
        if (id === Infinity) continue;
        const v = f(x[i] * id);
        let q = Math.round(v);
        if (Math.abs(v - Math.trunc(v)) === 0.5) q = 2 * Math.round(v / 2); // ties to even
        out[i] = q * d;
        expect(Math.abs(out[i] - x[i])).toBeLessThanOrEqual(d / 2 * (1 + 1e-6));
      }
    }
    return out;
  }

  for (const f of Q8_ACTIVATION_FORMATS) {
    if (!formats.has(f)) continue;
    it(`${f} with int8 activations: within MATVEC_REL_TOL of the f64 dot with x^, both builds`, async () => {
      const w = rand(ROWS * ROW, 3 + f.length, 0.05);
      const x = rand(ROW, 1234, 2);
      const qt = await quantize(w, withImportance({ format: f, rowLength: ROW, backend: 'wasm' }, formats.get(f)));
      const deq = await dequantize(qt, { backend: 'wasm' });
      const xh = quantizedX(x);
      const ys: Float32Array[] = [];
      for (const backend of ['wasm-simd', 'wasm'] as const) {
        const y = (await servedFromQuantized(qt, { backend, activations: 'q8' })).matvec(x);
        const yf = (await servedFromQuantized(qt, { backend })).matvec(x);
        let differs = false;
        for (let r = 0; r < ROWS; r++) {
          let s = 0, m = 0;
          for (let i = 0; i < ROW; i++) { s += deq[r * ROW + i] * xh[i]; m += Math.abs(deq[r * ROW + i] * xh[i]); }
          expect(Math.abs(y[r] - s), `${backend} row ${r}`).toBeLessThanOrEqual(MATVEC_REL_TOL * m);
          if (y[r] !== yf[r]) differs = true;
        }
        expect(differs).toBe(true); // the q8 path really ran
        ys.push(y);
      }
      for (let r = 0; r < ROWS; r++) {
        let m = 0;
        for (let i = 0; i < ROW; i++) m += Math.abs(deq[r * ROW + i] * xh[i]);
        expect(Math.abs(ys[0][r] - ys[1][r])).toBeLessThanOrEqual(SIMD_SCALAR_REL_TOL * m);
      }
    });
  }

  it('has fused kernels for the formats the serving path promises', async () => {
    const fused = ['q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k', 'iq4_nl', 'iq4_xs', 'q1_0', 'q2_0', 'tq2_0', 'nf4', 'fp4', 'int4', 'int8', 'intsym', 'affine', 'mlx', 'bnb_nf4', 'bnb_fp4', 'fp8_e4m3', 'fp8_e5m2', 'f16', 'bf16'];
    for (const f of fused) {
      if (!formats.has(f)) continue;
      for (const b of ['wasm-simd', 'wasm'] as const) expect(await hasFusedMatvec(f, b), `${f} ${b}`).toBe(true);
    }
  });

  it('a wrong x length is an error', async () => {
    const qt = await quantize(rand(2 * 64, 1), { format: 'q8_0', rowLength: 64 });
    const t = await servedFromQuantized(qt);
    expect(() => t.matvec(new Float32Array(10))).toThrow(/expected a Float32Array/);
  });
});
