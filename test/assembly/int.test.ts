// Integer family (int8, int4, intsym, affine) on both wasm builds against the plain-TypeScript
// reference (test/reference/int-ref.ts), byte for byte, plus math properties and option checks.
import { mulberry32 } from '../helpers/data.js';
import { describe, expect, it } from 'vitest';
import { quantize, dequantize, ErrorCodes, getFormat, loadKernels, type QuantizeOptions } from '../../src/index.js';
import { INTSYM_OPS } from '../../src/formats/int.js';
import { f32ToBf16, f32ToF16, bf16ToF32, f16ToF32 } from '../../src/util/half.js';
import {
  affineDequantizeRef, affineQuantizeRef, f16Down, f16Up, affineValue, affineCode, hqqObjective, symDequantizeRef, symQuantizeRef, symSqErr,
  type AffineCalib, type Granularity, type SymCalib,
} from '../reference/int-ref.js';

const BACKENDS = ['wasm-simd', 'wasm'] as const;
const fr = Math.fround;

const rng = mulberry32;

function gaussian(n: number, seed: number, sigma = 1): Float32Array {
  const r = rng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const u = Math.max(r(), 1e-12);
    out[i] = sigma * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
  }
  return out;
}

/** Gaussian weights with a few large outliers (about 1 in 200, 10-30 sigma). */
function withOutliers(n: number, seed: number): Float32Array {
  const x = gaussian(n, seed, 0.02);
  const r = rng(seed ^ 0x5bd1e995);
  for (let i = 0; i < n; i++) if (r() < 0.005) x[i] = fr((r() < 0.5 ? -1 : 1) * 0.02 * (10 + 20 * r()));
  return x;
}

/** Named inputs: [values, rowLength]; every rowLength is a multiple of 256. */
function inputs(): [string, Float32Array, number][] {
  const cases: [string, Float32Array, number][] = [];
  cases.push(['gaussian 6x512', gaussian(6 * 512, 1), 512]);
  cases.push(['outliers 4x768', withOutliers(4 * 768, 2), 768]);
  cases.push(['zeros 2x256', new Float32Array(512), 256]);
  const c = new Float32Array(3 * 256);
  c.fill(0.1, 0, 256);
  c.fill(-3, 256, 512);
  c.fill(65504, 512, 768);
  cases.push(['constant rows', c, 256]);
  const o = gaussian(2 * 256, 3, 0.01);
  o[17] = 1000;
  o[300] = -250;
  cases.push(['one outlier', o, 256]);
  const t = gaussian(2 * 256, 4);
  for (let i = 0; i < t.length; i++) t[i] = fr(t[i] * (i < 256 ? 1e-30 : 1e-41));
  cases.push(['tiny and subnormal', t, 256]);
  cases.push(['one group', gaussian(256, 5), 256]);
  cases.push(['many rows 300x256', gaussian(300 * 256, 6, 0.05), 256]);
  const h = gaussian(2 * 256, 7);
  for (let i = 0; i < h.length; i += 3) h[i] = fr(Math.round(h[i] * 4) / 4); // exact ties and repeats
  h[5] = -0;
  cases.push(['halves and ties', h, 256]);
  return cases;
}

function same(a: Uint8Array | Float32Array, b: Uint8Array | Float32Array): boolean {
  const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  return Buffer.from(x).equals(Buffer.from(y));
}

function firstDiff(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : Math.min(a.length, b.length);
}

type SymCase = { format: string; bits: number; granularity: Granularity; groupSize: number; calibration: SymCalib };

const SYM_CALIBS: SymCalib[] = [
  { method: 'absmax' },
  { method: 'clip', ratio: 0.85 },
  { method: 'fixed', scale: 0.5, max: 3 },
  { method: 'percentile', percentile: 99 },
  { method: 'mse', iterations: 10 },
];

function calibOption(c: SymCalib | AffineCalib): QuantizeOptions['calibration'] {
  return { ...c } as QuantizeOptions['calibration'];
}

function symCases(): SymCase[] {
  const out: SymCase[] = [];
  for (const calibration of SYM_CALIBS) {
    out.push({ format: 'int8', bits: 8, granularity: 'channel', groupSize: 128, calibration });
    out.push({ format: 'int8', bits: 8, granularity: 'tensor', groupSize: 128, calibration });
    out.push({ format: 'int4', bits: 4, granularity: 'group', groupSize: 128, calibration });
    out.push({ format: 'intsym', bits: 3, granularity: 'group', groupSize: 32, calibration });
  }
  for (const bits of [2, 5, 6, 7]) out.push({ format: 'intsym', bits, granularity: 'group', groupSize: 64, calibration: { method: 'absmax' } });
  out.push({ format: 'intsym', bits: 6, granularity: 'channel', groupSize: 128, calibration: { method: 'percentile', percentile: 99.9 } });
  // Per-row absmax / clip of the SIMD build is computed one row ahead (sym.ts): 4-bit and other widths.
  out.push({ format: 'int4', bits: 4, granularity: 'channel', groupSize: 128, calibration: { method: 'absmax' } });
  out.push({ format: 'intsym', bits: 5, granularity: 'channel', groupSize: 128, calibration: { method: 'clip', ratio: 0.85 } });
  // Low percentiles take the radix-select path (4-bit digits for groups, 8-bit for rows > 512).
  out.push({ format: 'int4', bits: 4, granularity: 'group', groupSize: 64, calibration: { method: 'percentile', percentile: 60 } });
  out.push({ format: 'int8', bits: 8, granularity: 'channel', groupSize: 128, calibration: { method: 'percentile', percentile: 75 } });
  out.push({ format: 'int4', bits: 4, granularity: 'group', groupSize: 256, calibration: { method: 'mse', iterations: 7 } });
  out.push({ format: 'int4', bits: 4, granularity: 'tensor', groupSize: 256, calibration: { method: 'mse', iterations: 6 } });
  return out;
}

function symOpts(c: SymCase, rowLength: number, backend: (typeof BACKENDS)[number]): QuantizeOptions {
  const o: QuantizeOptions = { format: c.format, rowLength, backend, granularity: c.granularity, calibration: calibOption(c.calibration) };
  if (c.granularity === 'group') o.groupSize = c.groupSize;
  if (c.format === 'intsym') o.bits = c.bits;
  return o;
}

const label = (c: { calibration: { method: string } } & Record<string, unknown>) => JSON.stringify(c);

describe('intsym / int8 / int4 bytes equal the reference on both builds', () => {
  const data = inputs();
  for (const c of symCases()) {
    it(label(c), async () => {
      for (const [name, x, rowLength] of data) {
        const want = symQuantizeRef(x, rowLength, c);
        for (const backend of BACKENDS) {
          const qt = await quantize(x, symOpts(c, rowLength, backend));
          expect(firstDiff(qt.data, want), `${name} ${backend}: first differing byte`).toBe(-1);
          const y = await dequantize(qt, { backend });
          expect(same(y, symDequantizeRef(want, x.length / rowLength, rowLength, c)), `${name} ${backend} dequantized`).toBe(true);
        }
      }
    });
  }
  it('mse weights by importance (and importance changes the choice)', async () => {
    const x = withOutliers(8 * 256, 11);
    const imp = new Float32Array(256);
    const r = rng(12);
    for (let i = 0; i < 256; i++) imp[i] = fr(r() < 0.1 ? 50 * r() : r());
    const c: SymCase = { format: 'int4', bits: 4, granularity: 'group', groupSize: 32, calibration: { method: 'mse', iterations: 16 } };
    const want = symQuantizeRef(x, 256, { ...c, importance: imp });
    expect(same(want, symQuantizeRef(x, 256, c))).toBe(false);
    for (const backend of BACKENDS) {
      const qt = await quantize(x, { ...symOpts(c, 256, backend), importance: imp });
      expect(firstDiff(qt.data, want), backend).toBe(-1);
    }
    for (const g of ['channel', 'tensor'] as const) {
      const ct: SymCase = { ...c, granularity: g };
      const wt = symQuantizeRef(x, 256, { ...ct, importance: imp });
      for (const backend of BACKENDS) {
        const qt = await quantize(x, { ...symOpts(ct, 256, backend), importance: imp });
        expect(firstDiff(qt.data, wt), `${g} ${backend}`).toBe(-1);
      }
    }
  });
});

const AFFINE_CALIBS: AffineCalib[] = [{ method: 'minmax' }, { method: 'hqq', iterations: 20 }];

describe('affine bytes equal the reference on both builds', () => {
  const data = inputs();
  for (const calibration of AFFINE_CALIBS) {
    for (const bits of [2, 3, 4, 5, 6, 8]) {
      for (const groupSize of [32, 64, 128]) {
        if (calibration.method === 'hqq' && groupSize !== 64 && bits !== 4) continue;
        const c = { bits, groupSize, calibration };
        it(label(c), async () => {
          for (const [name, x, rowLength] of data) {
            if (calibration.method === 'hqq' && x.length > 4096) continue;
            const want = affineQuantizeRef(x, rowLength, c);
            for (const backend of BACKENDS) {
              const qt = await quantize(x, { format: 'affine', rowLength, backend, bits, groupSize, calibration: calibOption(calibration) });
              expect(firstDiff(qt.data, want), `${name} ${backend}: first differing byte`).toBe(-1);
              const y = await dequantize(qt, { backend });
              expect(same(y, affineDequantizeRef(want, x.length, c)), `${name} ${backend} dequantized`).toBe(true);
            }
          }
        });
      }
    }
  }
  it('hqq with importance weights', async () => {
    const x = withOutliers(4 * 256, 21);
    const imp = new Float32Array(256).map((_v, i) => fr(0.1 + (i % 13)));
    const c = { bits: 3, groupSize: 32, calibration: { method: 'hqq', iterations: 30 } as AffineCalib, importance: imp };
    const want = affineQuantizeRef(x, 256, c);
    expect(same(want, affineQuantizeRef(x, 256, { ...c, importance: undefined }))).toBe(false);
    for (const backend of BACKENDS) {
      const qt = await quantize(x, { format: 'affine', rowLength: 256, backend, bits: 3, groupSize: 32, calibration: 'hqq,30', importance: imp });
      expect(firstDiff(qt.data, want), backend).toBe(-1);
    }
  });
});

describe('properties', () => {
  it('absmax: per group |x - x\'| <= scale/2 (+ f32 rounding); zeros stay exactly zero', async () => {
    const x = gaussian(16 * 256, 31);
    for (let i = 0; i < x.length; i += 5) x[i] = 0;
    for (const [format, bits, granularity] of [['int8', 8, 'channel'], ['int4', 4, 'group'], ['intsym', 2, 'group'], ['intsym', 5, 'tensor']] as const) {
      const qt = await quantize(x, { format, rowLength: 256, bits, granularity, groupSize: 64 });
      const y = await dequantize(qt);
      const codesBytes = (x.length * bits) / 8;
      const sv = new DataView(qt.data.buffer, qt.data.byteOffset + codesBytes);
      const run = granularity === 'group' ? 64 : 256;
      for (let i = 0; i < x.length; i++) {
        const s = granularity === 'tensor' ? sv.getFloat32(0, true) : sv.getFloat32(4 * Math.floor(i / run), true);
        expect(Math.abs(x[i] - y[i]) <= s / 2 + 1e-6 * Math.abs(x[i]), `${format} ${i}`).toBe(true);
        if (x[i] === 0) expect(y[i]).toBe(0);
      }
    }
  });

  it('minmax: per group |x - x\'| <= scale/2 (+ f32 rounding); all-zero tensors round-trip to zeros', async () => {
    const x = withOutliers(8 * 256, 32);
    for (const bits of [2, 3, 4, 5, 6, 8]) {
      const qt = await quantize(x, { format: 'affine', rowLength: 256, bits, groupSize: 32 });
      const y = await dequantize(qt);
      const v = new DataView(qt.data.buffer, qt.data.byteOffset + (x.length * bits) / 8);
      for (let i = 0; i < x.length; i++) {
        const s = f16ToF32(v.getUint16(2 * Math.floor(i / 32), true));
        expect(Math.abs(x[i] - y[i]) <= s / 2 + 1e-6 * Math.abs(x[i]) + 1e-9, `bits ${bits} i ${i}`).toBe(true);
      }
    }
    const z = new Float32Array(4 * 256);
    for (const o of [{ format: 'affine' }, { format: 'affine', calibration: 'hqq' }, { format: 'int8' }, { format: 'int4', calibration: 'mse' },
      { format: 'int8', granularity: 'tensor', calibration: 'percentile' }, { format: 'intsym', bits: 3, granularity: 'group', groupSize: 32, calibration: 'clip,0.5' }]) {
      for (const backend of BACKENDS) {
        const y = await dequantize(await quantize(z, { rowLength: 256, backend, ...(o as { format: string }) }), { backend });
        expect(y.every((v) => v === 0), JSON.stringify(o)).toBe(true);
      }
    }
  });

  it('mse is never worse than absmax in squared error', async () => {
    for (const seed of [41, 42, 43]) {
      const x = seed === 43 ? gaussian(16 * 256, seed) : withOutliers(16 * 256, seed);
      for (const [format, bits, granularity, groupSize] of [['int4', 4, 'group', 32], ['int4', 4, 'channel', 128], ['intsym', 2, 'group', 64], ['int8', 8, 'tensor', 128], ['intsym', 3, 'group', 256]] as const) {
        const base = { format, rowLength: 256, bits, granularity, groupSize };
        const ya = await dequantize(await quantize(x, { ...base, calibration: 'absmax' }));
        const ym = await dequantize(await quantize(x, { ...base, calibration: { method: 'mse', iterations: 25 } }));
        let ea = 0;
        let em = 0;
        for (let i = 0; i < x.length; i++) {
          ea += (x[i] - ya[i]) ** 2;
          em += (x[i] - ym[i]) ** 2;
        }
        expect(em <= ea, `${format} ${granularity} seed ${seed}: mse ${em} absmax ${ea}`).toBe(true);
        if (seed !== 43 && bits <= 4) expect(em < ea).toBe(true);
      }
    }
  });

  it('hqq is never worse than minmax in its weighted lp objective (Gaussian with outliers)', async () => {
    const x = withOutliers(16 * 256, 51);
    const imp = new Float32Array(256).map((_v, i) => fr(1 + (i % 5)));
    for (const bits of [2, 3, 4]) {
      for (const importance of [undefined, imp]) {
        const opts = { format: 'affine', rowLength: 256, bits, groupSize: 64, importance };
        const mm = await quantize(x, opts);
        const hq = await quantize(x, { ...opts, calibration: 'hqq' });
        const qmax = 2 ** bits - 1;
        const at = (qt: typeof mm, k: number, sec: number) => {
          const v = new DataView(qt.data.buffer, qt.data.byteOffset + (x.length * bits) / 8 + sec * (x.length / 64) * 2);
          return f16ToF32(v.getUint16(2 * k, true));
        };
        let om = 0;
        let oh = 0;
        let better = 0;
        for (let k = 0; k < x.length / 64; k++) {
          const xs = x.subarray(k * 64, k * 64 + 64);
          const w = importance?.subarray((k * 64) % 256, ((k * 64) % 256) + 64);
          const a = hqqObjective(xs, at(mm, k, 0), at(mm, k, 1), qmax, w);
          const b = hqqObjective(xs, at(hq, k, 0), at(hq, k, 1), qmax, w);
          expect(b <= a, `group ${k}`).toBe(true);
          if (b < a) better++;
          om += a;
          oh += b;
        }
        expect(oh <= om).toBe(true);
        expect(better, `bits ${bits}: groups improved`).toBeGreaterThan(0);
        // The objective is computed from the dequantized values the library returns.
        const y = await dequantize(hq);
        for (let i = 0; i < 64; i++) expect(y[i]).toBe(affineValue(affineCode(x[i], at(hq, 0, 0), at(hq, 0, 1), qmax), at(hq, 0, 0), at(hq, 0, 1)));
      }
    }
  });

  it('f32, f16 and bf16 inputs give the same bytes as their f32 widening', async () => {
    const x = withOutliers(4 * 256, 61);
    const h = new Uint16Array(x.length).map((_v, i) => f32ToF16(x[i]));
    const b = new Uint16Array(x.length).map((_v, i) => f32ToBf16(x[i]));
    const xh = new Float32Array(h.length).map((_v, i) => f16ToF32(h[i]));
    const xb = new Float32Array(b.length).map((_v, i) => bf16ToF32(b[i]));
    const optsList: Omit<QuantizeOptions, 'rowLength'>[] = [
      { format: 'int8' }, { format: 'int4', calibration: 'mse' }, { format: 'intsym', bits: 5, granularity: 'tensor', calibration: 'percentile,99.5' },
      { format: 'affine', bits: 3 }, { format: 'affine', calibration: 'hqq,5' },
    ];
    for (const o of optsList) {
      for (const backend of BACKENDS) {
        const fh = await quantize(xh, { ...o, rowLength: 256, backend });
        const qh = await quantize(h, { ...o, rowLength: 256, backend, dtype: 'f16' });
        expect(same(fh.data, qh.data), `${o.format} f16 ${backend}`).toBe(true);
        const fb = await quantize(xb, { ...o, rowLength: 256, backend });
        const qb = await quantize(b, { ...o, rowLength: 256, backend, dtype: 'bf16' });
        expect(same(fb.data, qb.data), `${o.format} bf16 ${backend}`).toBe(true);
      }
    }
  });

  it('per-tensor calibration is exact across chunk boundaries', async () => {
    const x = withOutliers(37 * 256, 71);
    for (const calibration of SYM_CALIBS) {
      const c: SymCase = { format: 'intsym', bits: 4, granularity: 'tensor', groupSize: 128, calibration };
      const want = symQuantizeRef(x, 256, c);
      for (const backend of BACKENDS) {
        for (const chunkBytes of [1024, 5 * 1024, 1 << 20]) {
          const qt = await quantize(x, { ...symOpts(c, 256, backend), chunkBytes });
          expect(firstDiff(qt.data, want), `${calibration.method} ${backend} chunk ${chunkBytes}`).toBe(-1);
        }
      }
    }
    // The largest value sits in the last chunk; the percentile rank straddles chunks.
    const y = gaussian(9 * 256, 72);
    y[y.length - 3] = 77;
    const c: SymCase = { format: 'int8', bits: 8, granularity: 'tensor', groupSize: 128, calibration: { method: 'absmax' } };
    const qt = await quantize(y, { ...symOpts(c, 256, 'wasm'), chunkBytes: 1024 });
    expect(new DataView(qt.data.buffer).getFloat32(qt.data.length - 4, true)).toBe(fr(77 / 127));
  });
});

describe('layout and options', () => {
  it('sections and sizes', async () => {
    const x = gaussian(2 * 256, 81);
    const a = await quantize(x, { format: 'affine', rowLength: 256 });
    expect(a.layout.sections.map((s) => [s.name, s.bytes])).toEqual([['codes', 256], ['scales', 16], ['biases', 16]]);
    expect(a.options.bits).toBe(4);
    expect(a.options.groupSize).toBe(64);
    const i8 = await quantize(x, { format: 'int8', rowLength: 256 });
    expect(i8.options.granularity).toBe('channel');
    expect(i8.layout.sections.map((s) => [s.name, s.bytes])).toEqual([['codes', 512], ['scales', 8]]);
    const i4 = await quantize(x, { format: 'int4', rowLength: 256 });
    expect([i4.options.granularity, i4.options.groupSize]).toEqual(['group', 128]);
    expect(i4.layout.sections.map((s) => [s.name, s.bytes])).toEqual([['codes', 256], ['scales', 16]]);
    const t = await quantize(x, { format: 'intsym', bits: 3, rowLength: 256, granularity: 'tensor' });
    expect(t.layout.sections.map((s) => [s.name, s.bytes])).toEqual([['codes', 192], ['scale', 4]]);
    expect(getFormat('affine').calibrations).toEqual(['minmax', 'hqq']);
    expect(getFormat('int8').calibrations[0]).toBe('absmax');
  });

  it('host mirrors of the wasm constants agree', async () => {
    for (const backend of BACKENDS) {
      const k = await loadKernels(backend);
      for (const [name, v] of Object.entries(INTSYM_OPS)) expect(k.constant(name), `${backend} ${name}`).toBe(v);
    }
  });

  it('directed f16 rounding (affine minmax) agrees with the reference over the f32 range', async () => {
    const b = new Uint32Array(1);
    const f = new Float32Array(b.buffer);
    for (const backend of BACKENDS) {
      const k = await loadKernels(backend);
      const down = k.fn('f16Down');
      const up = k.fn('f16Up');
      const bad: string[] = [];
      let checked = 0;
      for (let u = 0; u < 0x100000000; u += 65537) {
        for (const bits of [u, (u ^ 0x80000000) >>> 0, (u & 0xffffe000) >>> 0, ((u & 0xffffe000) | 0x1000) >>> 0]) {
          b[0] = bits;
          if (!Number.isFinite(f[0])) continue;
          checked++;
          if (down(f[0]) !== f16Down(f[0]) || up(f[0]) !== f16Up(f[0])) bad.push(bits.toString(16));
        }
      }
      expect(checked).toBeGreaterThan(200000);
      expect(bad, backend).toEqual([]);
    }
  });

  it('per channel and per tensor accept rows that fill whole bytes', async () => {
    const x = gaussian(3 * 24, 82);
    for (const backend of BACKENDS) {
      const qt = await quantize(x, { format: 'intsym', bits: 3, rowLength: 24, granularity: 'channel', backend });
      expect(firstDiff(qt.data, symQuantizeRef(x, 24, { bits: 3, granularity: 'channel', groupSize: 0, calibration: { method: 'absmax' } }))).toBe(-1);
    }
    await expect(quantize(new Float32Array(12), { format: 'intsym', bits: 3, rowLength: 12, granularity: 'channel' })).rejects.toMatchObject({ code: ErrorCodes.ROW_LENGTH });
  });

  const refused: [string, Partial<QuantizeOptions>, string][] = [
    ['row length not a multiple of the group', { format: 'int4', rowLength: 192 }, ErrorCodes.ROW_LENGTH],
    ['affine row length not a multiple of the group', { format: 'affine', rowLength: 96, groupSize: 64 }, ErrorCodes.ROW_LENGTH],
    ['affine bits 7', { format: 'affine', bits: 7 }, ErrorCodes.BAD_OPTION],
    ['affine group 256', { format: 'affine', groupSize: 256 }, ErrorCodes.BAD_OPTION],
    ['affine per channel', { format: 'affine', granularity: 'channel' }, ErrorCodes.BAD_OPTION],
    ['intsym bits 9', { format: 'intsym', bits: 9 }, ErrorCodes.BAD_OPTION],
    ['intsym bits 1', { format: 'intsym', bits: 1 }, ErrorCodes.BAD_OPTION],
    ['int8 bits 4', { format: 'int8', bits: 4 }, ErrorCodes.BAD_OPTION],
    ['int4 group 48', { format: 'int4', groupSize: 48 }, ErrorCodes.BAD_OPTION],
    ['hqq on symmetric', { format: 'int8', calibration: 'hqq' }, ErrorCodes.BAD_CALIBRATION],
    ['minmax on symmetric', { format: 'int4', calibration: 'minmax' }, ErrorCodes.BAD_CALIBRATION],
    ['mse on affine', { format: 'affine', calibration: 'mse' }, ErrorCodes.BAD_CALIBRATION],
    ['percentile 0', { format: 'int8', calibration: 'percentile,0' }, ErrorCodes.BAD_CALIBRATION],
    ['clip ratio above 1', { format: 'int8', calibration: 'clip,1.5' }, ErrorCodes.BAD_CALIBRATION],
    ['fixed without max', { format: 'int8', calibration: 'fixed,1' }, ErrorCodes.BAD_CALIBRATION],
    ['hqq 0 iterations', { format: 'affine', calibration: 'hqq,0' }, ErrorCodes.BAD_CALIBRATION],
    ['unknown calibration', { format: 'affine', calibration: 'gptq' }, ErrorCodes.BAD_CALIBRATION],
  ];
  for (const [what, o, code] of refused) {
    it(`refuses ${what}`, async () => {
      const opts = { rowLength: 256, ...o } as QuantizeOptions;
      await expect(quantize(new Float32Array(opts.rowLength * 2), opts)).rejects.toMatchObject({ code });
    });
  }

  it('fixed,<scale>,<max> uses the bound scale*max for every group', async () => {
    const x = gaussian(256, 91, 3);
    for (const backend of BACKENDS) {
      const qt = await quantize(x, { format: 'int4', rowLength: 256, groupSize: 64, calibration: 'fixed,0.5,4', backend });
      const v = new DataView(qt.data.buffer, qt.data.byteOffset + 128);
      for (let k = 0; k < 4; k++) expect(v.getFloat32(4 * k, true)).toBe(fr(2 / 7));
    }
  });

  it('rounds half to even and packs int4 as low nibble first', async () => {
    const x = new Float32Array(32);
    x.set([0.125, 0.375, 0.625, -0.125, -0.375, 1.875, -3, 0.0625]);
    for (const backend of BACKENDS) {
      // fixed,0.25,7: bound 1.75, scale 1.75 / 7 = 0.25 exactly, so x / s hits .5 ties.
      const qt = await quantize(x, { format: 'int4', rowLength: 32, groupSize: 32, calibration: 'fixed,0.25,7', backend });
      expect(Array.from(qt.data.subarray(0, 5)), backend).toEqual([0x20, 0x02, 0x7e, 0x09, 0x00]);
      expect(new DataView(qt.data.buffer).getFloat32(16, true)).toBe(0.25);
    }
  });

  it('3-bit codes form one little-endian bit stream', async () => {
    const x = new Float32Array([0, 1, 2, 3, -1, -2, -3, 1]);
    const want = [0, 1, 2, 3, 7, 6, 5, 1].reduce((a, c, i) => a + c * 2 ** (3 * i), 0);
    for (const backend of BACKENDS) {
      const qt = await quantize(x, { format: 'intsym', bits: 3, rowLength: 8, granularity: 'channel', calibration: 'fixed,1,3', backend });
      expect(Array.from(qt.data.subarray(0, 3)), backend).toEqual([want & 255, (want >> 8) & 255, (want >> 16) & 255]);
      expect(Array.from(await dequantize(qt, { backend }))).toEqual([0, 1, 2, 3, -1, -2, -3, 1]);
    }
  });

  it('squared error helper agrees with the dequantized output', async () => {
    const x = gaussian(256, 92);
    const qt = await quantize(x, { format: 'int8', rowLength: 256 });
    const y = await dequantize(qt);
    const s = new DataView(qt.data.buffer, qt.data.byteOffset + 256).getFloat32(0, true);
    let e = 0;
    for (let i = 0; i < 256; i++) e += (x[i] - y[i]) ** 2;
    expect(symSqErr(x, s, 127)).toBe(e);
  });
});
