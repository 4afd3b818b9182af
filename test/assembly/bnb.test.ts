// bnb/fp8/mx family: both wasm builds against the plain-TS reference (test/reference/bnb-ref.ts),
// byte for byte, plus error bounds, dtype equivalence, chunking, SQNR sanity and option refusals.
import { describe, expect, it } from 'vitest';
import { dequantize, quantize, formats, WebquantError, f32ToBf16, bf16ToF32, f32ToF16, f16ToF32 } from '../../src/index.js';
import type { QuantizeOptions } from '../../src/quantize.js';
import {
  DYNAMIC_MAP, FP4_VALUES, FP8, NF4_VALUES, decimalToF32, refDequantize4, refDequantizeFp8, refDequantizeMxfp4, refFlatDoubleQuant,
  refQuantize4, refQuantizeFp8, refQuantizeMxfp4, refQuantizeNvfp4, refDequantizeNvfp4, type RefOptions,
} from '../reference/bnb-ref.js';

const BACKENDS = ['wasm-simd', 'wasm'] as const;
const f = Math.fround;

function rng(seed: number) {
  let s = seed >>> 0;
  const u = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const gauss = () => Math.sqrt(-2 * Math.log(1 - u())) * Math.cos(2 * Math.PI * u());
  return { u, gauss };
}

function gaussian(n: number, seed: number, sigma = 1): Float32Array {
  const g = rng(seed);
  return Float32Array.from({ length: n }, () => g.gauss() * sigma);
}

/**
 * Blocks of 32 whose absmax is 2 (so 1/absmax = 0.5 exactly) and whose other values are twice the
 * NF4 and FP4 decision thresholds and the E2M1 rounding midpoints: every value lands on a tie.
 */
function thresholdPattern(n: number): Float32Array {
  const nf4 = ['-0.8480964004993439', '-0.4599952697753906', '-0.045525018125772476', '0.03979014977812767', '0.1202552504837513',
    '0.2920137718319893', '0.5016634166240692', '0.8614784181118011'].map(decimalToF32);
  const fp4 = ['0.00260417', '0.0859375', '0.20833333', '0.29166667', '0.4166667', '0.583333', '0.8333333'].map(decimalToF32);
  const block = [2, ...nf4.map((t) => 2 * t), ...fp4.map((t) => 2 * t), ...fp4.map((t) => -2 * t), 0.125, 0.375, 0.625, 0.875, 1.25, -0.625, 1.75, 0.5, -0.125];
  return Float32Array.from({ length: n }, (_, i) => block[i % 32]);
}

/** Named inputs of `rows x rowLen`, covering the edge cases of every format. */
function cases(rowLen: number, rows: number): [string, Float32Array][] {
  const n = rowLen * rows;
  const g = rng(rowLen * 31 + rows);
  const out: [string, Float32Array][] = [
    ['gaussian', gaussian(n, rowLen + rows)],
    ['zeros', new Float32Array(n)],
    ['negative zeros', new Float32Array(n).fill(-0)],
    ['negative zeros among values', (() => { const a = gaussian(n, 5); for (let i = 0; i < n; i += 3) a[i] = -0; return a; })()],
    ['constant', new Float32Array(n).fill(0.7)],
    ['negative constant', new Float32Array(n).fill(-3.25)],
    ['single outlier', (() => { const a = gaussian(n, 7, 0.01); a[Math.floor(n / 3)] = 1000; return a; })()],
    ['fp32 denormals', Float32Array.from({ length: n }, () => (g.u() - 0.5) * 2e-39)],
    ['tiny', Float32Array.from({ length: n }, () => (g.u() - 0.5) * 1e-30)],
    ['huge', Float32Array.from({ length: n }, () => (g.u() - 0.5) * 6e38)],
    ['wide range', Float32Array.from({ length: n }, () => (g.u() < 0.5 ? -1 : 1) * 10 ** (g.u() * 12 - 8))],
    ['sparse', Float32Array.from({ length: n }, () => (g.u() < 0.9 ? 0 : g.gauss()))],
    ['bf16 values', Float32Array.from({ length: n }, () => bf16ToF32(f32ToBf16(g.gauss() * 3)))],
    ['on thresholds', thresholdPattern(n)],
  ];
  return out;
}

type Cfg = { label: string; opts: Omit<QuantizeOptions, 'rowLength'>; ref: RefOptions };

const CFGS: Cfg[] = [];
for (const fmt of ['nf4', 'fp4'] as const) {
  for (const groupSize of [32, 64, 128, 256]) {
    for (const doubleQuant of [false, true]) {
      CFGS.push({ label: `${fmt} g${groupSize}${doubleQuant ? ' dq' : ''}`, opts: { format: fmt, groupSize, doubleQuant }, ref: { groupSize, doubleQuant } });
    }
  }
}
for (const fmt of ['fp8_e4m3', 'fp8_e5m2'] as const) {
  for (const granularity of ['channel', 'tensor'] as const) {
    const cals = [
      { method: 'absmax' as const },
      { method: 'clip' as const, ratio: 0.8 },
      { method: 'fixed' as const, scale: fmt === 'fp8_e4m3' ? 0.01 : 1e-4, max: 2.5 },
    ];
    for (const c of cals) {
      CFGS.push({ label: `${fmt} ${granularity} ${c.method}`, opts: { format: fmt, granularity, calibration: c }, ref: { granularity, calibration: c } });
    }
  }
}
CFGS.push({ label: 'mxfp4', opts: { format: 'mxfp4' }, ref: {} });
CFGS.push({ label: 'nvfp4', opts: { format: 'nvfp4' }, ref: {} });

function refQ(fmt: string, x: Float32Array, rows: number, rowLen: number, o: RefOptions): Uint8Array {
  if (fmt === 'nf4' || fmt === 'fp4') return refQuantize4(fmt, x, rows, rowLen, o);
  if (fmt === 'mxfp4') return refQuantizeMxfp4(x, rows, rowLen);
  if (fmt === 'nvfp4') return refQuantizeNvfp4(x);
  return refQuantizeFp8(fmt as keyof typeof FP8, x, rows, rowLen, o);
}

function refD(fmt: string, data: Uint8Array, rows: number, rowLen: number, o: RefOptions): Float32Array {
  if (fmt === 'nf4' || fmt === 'fp4') return refDequantize4(fmt, data, rows, rowLen, o);
  if (fmt === 'mxfp4') return refDequantizeMxfp4(data, rows, rowLen);
  if (fmt === 'nvfp4') return refDequantizeNvfp4(data, rows * rowLen);
  return refDequantizeFp8(fmt as keyof typeof FP8, data, rows, rowLen, o);
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && Buffer.from(a).equals(Buffer.from(b));
const bits = (a: Float32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

function firstDiff(a: Uint8Array, b: Uint8Array): string {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return `byte ${i}: ${a[i]} vs ${b[i]}`;
  return `lengths ${a.length} vs ${b.length}`;
}

// Shapes: row lengths multiple of 256 (every group size); odd lengths for fp8 tails.
const SHAPES: [number, number][] = [[256, 1], [512, 5], [1024, 3]];

const refuse = async (o: Partial<QuantizeOptions>, code: string, text: RegExp) => {
  const x = new Float32Array(512);
  const err = await quantize(x, { format: 'nf4', rowLength: 256, ...o } as QuantizeOptions).catch((e) => e);
  expect(err).toBeInstanceOf(WebquantError);
  expect(err.code).toBe(code);
  expect(err.message).toMatch(text);
};

describe('reference implementation facts', () => {
  it('NF4 and FP4 tables are the published bitsandbytes tables', () => {
    expect(NF4_VALUES[0]).toBe(-1);
    expect(NF4_VALUES[7]).toBe(0);
    expect(NF4_VALUES[15]).toBe(1);
    for (let i = 1; i < 16; i++) expect(NF4_VALUES[i]).toBeGreaterThan(NF4_VALUES[i - 1]);
    // bitsandbytes FP4: sign | e1 e0 | m with bias 3, values 0, 0.0625, 8, 12, 4, 6, 2, 3 over 12.
    const raw = [0, 0.0625, 8, 12, 4, 6, 2, 3];
    raw.forEach((v, i) => expect(FP4_VALUES[i]).toBe(f(v / 12)));
  });
  it('the dynamic map is 256 sorted entries from -0.99297 to 1 with 0 at 127', () => {
    expect(DYNAMIC_MAP.length).toBe(256);
    expect(DYNAMIC_MAP[127]).toBe(0);
    expect(DYNAMIC_MAP[255]).toBe(1);
    expect(DYNAMIC_MAP[0]).toBe(f(-0.99296875));
    for (let i = 1; i < 256; i++) expect(DYNAMIC_MAP[i]).toBeGreaterThan(DYNAMIC_MAP[i - 1]);
    // smallest magnitude: 10^-6 * 0.55
    expect(DYNAMIC_MAP[128]).toBe(f(5.5e-7));
  });
  it('decimal literals round once to f32 (double rounding would differ for these)', () => {
    expect(decimalToF32('0.1202552504837513')).not.toBe(f(0.1202552504837513));
    expect(decimalToF32('0.5')).toBe(0.5);
  });
});

for (const backend of BACKENDS) {
  describe(`bnb/fp8/mx vs reference (${backend})`, () => {
    for (const cfg of CFGS) {
      it(`${cfg.label}: bytes and dequantization equal the reference`, async () => {
        for (const [rowLen, rows] of SHAPES) {
          for (const [name, x] of cases(rowLen, rows)) {
            const qt = await quantize(x, { ...cfg.opts, rowLength: rowLen, backend });
            const want = refQ(cfg.opts.format, x, rows, rowLen, cfg.ref);
            expect(sameBytes(qt.data, want), `${name} ${rows}x${rowLen}: ${firstDiff(qt.data, want)}`).toBe(true);
            const got = await dequantize(qt, { backend });
            const wantD = refD(cfg.opts.format, want, rows, rowLen, cfg.ref);
            expect(sameBytes(bits(got), bits(wantD)), `${name} ${rows}x${rowLen} dequantized: ${firstDiff(bits(got), bits(wantD))}`).toBe(true);
          }
        }
      });
    }
  });
}

describe('SIMD and scalar builds', () => {
  it('give identical bytes on odd FP8 row lengths (vector tails)', async () => {
    for (const fmt of ['fp8_e4m3', 'fp8_e5m2']) {
      for (const rowLen of [1, 7, 15, 17, 33, 1023]) {
        const x = gaussian(rowLen * 3, rowLen);
        const a = await quantize(x, { format: fmt, rowLength: rowLen, backend: 'wasm-simd' });
        const b = await quantize(x, { format: fmt, rowLength: rowLen, backend: 'wasm' });
        expect(sameBytes(a.data, b.data), `${fmt} ${rowLen}`).toBe(true);
        expect(sameBytes(a.data, refQuantizeFp8(fmt as keyof typeof FP8, x, 3, rowLen)), `${fmt} ${rowLen} ref`).toBe(true);
        const da = await dequantize(a, { backend: 'wasm-simd' });
        const db = await dequantize(a, { backend: 'wasm' });
        expect(sameBytes(bits(da), bits(db))).toBe(true);
      }
    }
  });
  it('FP8: every code dequantizes to the reference value, NaN and inf codes amid finite ones (SIMD converts those sixteen apart)', async () => {
    for (const fmt of ['fp8_e4m3', 'fp8_e5m2'] as const) {
      const qt = await quantize(gaussian(4 * 256, 5), { format: fmt, rowLength: 256 });
      // Each row holds all 256 codes in another order.
      for (let r = 0; r < 4; r++) for (let i = 0; i < 256; i++) qt.data[r * 256 + i] = (i * (2 * r + 37) + r) & 255;
      const want = refDequantizeFp8(fmt, qt.data, 4, 256);
      const da = await dequantize(qt, { backend: 'wasm-simd' });
      const db = await dequantize(qt, { backend: 'wasm' });
      expect(sameBytes(bits(da), bits(db)), fmt).toBe(true);
      for (let i = 0; i < want.length; i++) {
        if (!(Object.is(da[i], want[i]) || (Number.isNaN(da[i]) && Number.isNaN(want[i])))) expect(`${fmt} code ${qt.data[i]}: ${da[i]}`).toBe(`${fmt} code ${qt.data[i]}: ${want[i]}`);
      }
    }
  });
  it('MXFP4: every scale code (subnormal, overflowing, NaN) with every element code, both builds equal the reference', async () => {
    const qt = await quantize(new Float32Array(256 * 32), { format: 'mxfp4', rowLength: 32 });
    for (let c = 0; c < 256; c++) {
      qt.data[c * 17] = c;
      for (let j = 0; j < 16; j++) qt.data[c * 17 + 1 + j] = ((j + c) & 15) | (((7 * j + c) & 15) << 4);
    }
    const want = refDequantizeMxfp4(qt.data, 256, 32);
    const da = await dequantize(qt, { backend: 'wasm-simd' });
    const db = await dequantize(qt, { backend: 'wasm' });
    expect(sameBytes(bits(da), bits(db))).toBe(true);
    for (let i = 0; i < want.length; i++) {
      const c = qt.data[(i >> 5) * 17];
      if (!(Object.is(da[i], want[i]) || (Number.isNaN(da[i]) && Number.isNaN(want[i])))) expect(`scale ${c} element ${i & 31}: ${da[i]}`).toBe(`scale ${c} element ${i & 31}: ${want[i]}`);
    }
  });
  it('NVFP4: row lengths whose block count is not a multiple of four (SIMD takes four at a time)', async () => {
    for (const rowLen of [16, 48, 80, 272]) {
      const x = gaussian(rowLen * 3, rowLen);
      x[5] = -0;
      x[rowLen + 7] = 1e-12; // a block of its own scale far below the tensor's: its E4M3 scale rounds to 0
      for (let i = rowLen + 16; i < rowLen + 32 && i < x.length; i++) x[i] = (i % 3) * 1e-9;
      const want = refQuantizeNvfp4(x);
      for (const backend of BACKENDS) {
        const q = await quantize(x, { format: 'nvfp4', rowLength: rowLen, backend });
        expect(sameBytes(q.data, want), `${rowLen} ${backend}: ${firstDiff(q.data, want)}`).toBe(true);
      }
    }
  });
  it('NVFP4: every scale byte with every element code, both builds equal (and the reference below 0x7f)', async () => {
    const n = 256 * 16;
    for (const gs of [0.0123, 3e-40, 1e30]) {
      const qt = await quantize(gaussian(n, 7), { format: 'nvfp4', rowLength: 512 });
      for (let b = 0; b < 256; b++) {
        qt.data[n / 2 + b] = b;
        for (let j = 0; j < 8; j++) qt.data[b * 8 + j] = ((2 * j + b) & 15) | (((2 * j + 1 + 3 * b) & 15) << 4);
      }
      new DataView(qt.data.buffer, qt.data.byteOffset).setFloat32(n / 2 + n / 16, gs, true);
      const da = await dequantize(qt, { backend: 'wasm-simd' });
      const db = await dequantize(qt, { backend: 'wasm' });
      expect(sameBytes(bits(da), bits(db)), `scale_2 ${gs}: ${firstDiff(bits(da), bits(db))}`).toBe(true);
      const want = refDequantizeNvfp4(qt.data, n);
      for (let i = 0; i < 0x7f * 16; i++) {
        if (!Object.is(da[i], want[i])) expect(`scale_2 ${gs} byte ${i >> 4} element ${i & 15}: ${da[i]}`).toBe(`scale_2 ${gs} byte ${i >> 4} element ${i & 15}: ${want[i]}`);
      }
    }
  });
  it('give identical bytes on a larger random tensor for every configuration', async () => {
    const rowLen = 4096;
    const x = gaussian(rowLen * 8, 99, 0.02);
    for (const cfg of CFGS) {
      const a = await quantize(x, { ...cfg.opts, rowLength: rowLen, backend: 'wasm-simd' });
      const b = await quantize(x, { ...cfg.opts, rowLength: rowLen, backend: 'wasm' });
      expect(sameBytes(a.data, b.data), cfg.label).toBe(true);
    }
  });
});

describe('ties and rounding', () => {
  it('NF4/FP4: a value exactly on a decision threshold takes the lower code', async () => {
    // absmax 1 in every block, so v = x; the thresholds are the f32 midpoints bitsandbytes uses.
    const nt = ['-0.8480964004993439', '-0.6106329262256622', '-0.4599952697753906', '-0.33967943489551544',
      '-0.23460740596055984', '-0.13791173323988914', '-0.045525018125772476', '0.03979014977812767', '0.1202552504837513',
      '0.2035212516784668', '0.2920137718319893', '0.3893125355243683', '0.5016634166240692', '0.6427869200706482',
      '0.8614784181118011'].map(decimalToF32);
    const x = new Float32Array(32);
    x[0] = 1;
    nt.forEach((t, k) => { x[1 + k] = t; });
    for (const backend of BACKENDS) {
      const qt = await quantize(x, { format: 'nf4', groupSize: 32, rowLength: 32, backend });
      const code = (i: number) => (i % 2 === 0 ? qt.data[i >> 1] >> 4 : qt.data[i >> 1] & 15);
      expect(code(0)).toBe(15);
      nt.forEach((_t, k) => expect(code(1 + k), `threshold ${k}`).toBe(k));
    }
  });
  it('FP8 and MXFP4 round half to even on their grids', async () => {
    // fixed scale 1: y = x. E4M3 grid around 1: step 1/8; 1 + 1/16 ties to 1 (even), 1 + 3/16 to 1.25.
    const x = Float32Array.from([1 + 1 / 16, 1 + 3 / 16, 2 ** -10, 3 * 2 ** -10, 464, -464, 500, 1e30, -0]);
    for (const backend of BACKENDS) {
      const qt = await quantize(x, { format: 'fp8_e4m3', rowLength: x.length, calibration: 'fixed,1,1e38', backend });
      expect(Array.from(qt.data.subarray(0, x.length))).toEqual([0x38, 0x3a, 0x00, 0x02, 0x7e, 0xfe, 0x7e, 0x7e, 0x80]);
      const m = Float32Array.from([4, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 5.5, -0.25, -0.75, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -6]);
      const mq = await quantize(m, { format: 'mxfp4', rowLength: 32, backend });
      expect(mq.data[0]).toBe(127); // amax 6 -> floor(log2 6) - 2 = 0
      const nib = (i: number) => (i < 16 ? mq.data[1 + i] & 15 : mq.data[1 + i - 16] >> 4);
      expect([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 31].map(nib)).toEqual([6, 0, 2, 2, 4, 4, 6, 6, 7, 8, 10, 15]);
    }
  });
});

/** Per element: |x - x'| <= half the gap to the neighbouring code values times the scale + eps. */
describe('error bounds and zeros', () => {
  const sortedGaps = (vals: number[]) => {
    const s = [...new Set(vals)].sort((a, b) => a - b);
    return (v: number) => {
      const i = s.indexOf(v);
      const lo = i > 0 ? v - s[i - 1] : 0;
      const hi = i < s.length - 1 ? s[i + 1] - v : 0;
      return Math.max(lo, hi) / 2;
    };
  };
  it('nf4/fp4: every element lies within half a code gap of its value (times absmax)', async () => {
    for (const fmt of ['nf4', 'fp4'] as const) {
      const table = fmt === 'nf4' ? NF4_VALUES : FP4_VALUES;
      const gap = sortedGaps(table);
      for (const gs of [32, 256]) {
        const x = gaussian(4096 * 4, gs);
        const qt = await quantize(x, { format: fmt, groupSize: gs, rowLength: 4096 });
        const y = await dequantize(qt);
        const scales = new Float32Array(qt.data.slice(qt.layout.sections[1].offset).buffer);
        for (let i = 0; i < x.length; i++) {
          const s = scales[Math.floor(i / gs)];
          const c = i % 2 === 0 ? qt.data[i >> 1] >> 4 : qt.data[i >> 1] & 15;
          expect(y[i]).toBe(f(table[c] * s));
          expect(Math.abs(x[i] - y[i]) <= gap(table[c]) * s * (1 + 1e-6) + 1e-30, `${fmt} ${i}`).toBe(true);
        }
      }
    }
  });
  it('nf4 with double quantization: the stored absmax is within half a dynamic-map gap', async () => {
    const rowLen = 300 * 32; // 300 blocks per row, 900 in all: groups of 256 across rows, the last of 132
    const x = gaussian(rowLen * 3, 5);
    const qt = await quantize(x, { format: 'nf4', groupSize: 32, doubleQuant: true, rowLength: rowLen });
    const plain = await quantize(x, { format: 'nf4', groupSize: 32, rowLength: rowLen });
    const am = new Float32Array(plain.data.slice(plain.layout.sections[1].offset).buffer);
    const [, qs, a2s, off] = qt.layout.sections;
    const q = qt.data.subarray(qs.offset, qs.offset + qs.bytes);
    const a2 = new Float32Array(qt.data.slice(a2s.offset, a2s.offset + a2s.bytes).buffer);
    const offset = new Float32Array(qt.data.slice(off.offset, off.offset + 4).buffer)[0];
    expect(a2.length).toBe(4);
    let mean = 0;
    for (const v of am) mean += v;
    expect(offset).toBeCloseTo(mean / am.length, 6);
    const gap = sortedGaps(DYNAMIC_MAP);
    for (let b = 0; b < am.length; b++) {
      const g = b >> 8;
      const rec = f(f(DYNAMIC_MAP[q[b]] * a2[g]) + offset);
      expect(Math.abs(rec - am[b]) <= gap(DYNAMIC_MAP[q[b]]) * a2[g] * (1 + 1e-6) + 1e-7, `block ${b}`).toBe(true);
    }
    // The 4-bit codes are those of the exact absmax; only the scales differ.
    expect(sameBytes(qt.data.subarray(0, rowLen * 3 / 2), plain.data.subarray(0, rowLen * 3 / 2))).toBe(true);
  });
  it('fp8 and mxfp4: within half the local grid gap times the scale', async () => {
    const x = Float32Array.from(gaussian(8192, 3), (v, i) => v * 10 ** ((i % 7) - 3));
    for (const fmt of ['fp8_e4m3', 'fp8_e5m2'] as const) {
      const vals = FP8[fmt].grid.values;
      const gap = sortedGaps([...vals, ...vals.map((v) => -v)]);
      const qt = await quantize(x, { format: fmt, rowLength: 1024 });
      const y = await dequantize(qt);
      const scales = new Float32Array(qt.data.slice(qt.layout.sections[1].offset).buffer);
      for (let i = 0; i < x.length; i++) {
        const s = scales[Math.floor(i / 1024)];
        const v = vals[qt.data[i] & 0x7f] * (qt.data[i] & 0x80 ? -1 : 1);
        expect(y[i]).toBe(f(v * s));
        // |x| can exceed FMAX * s by the rounding of 1/s; such values saturate to FMAX.
        const bound = Math.max(gap(v) * s, Math.abs(x[i]) - FP8[fmt].fmax * s);
        expect(Math.abs(x[i] - y[i]) <= bound * (1 + 1e-6) + 1e-30, `${fmt} ${i}`).toBe(true);
      }
    }
    const qt = await quantize(x, { format: 'mxfp4', rowLength: 1024 });
    const y = await dequantize(qt);
    const e2m1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6];
    const gap = sortedGaps([...e2m1, ...e2m1.map((v) => -v)]);
    for (let i = 0; i < x.length; i++) {
      const blk = Math.floor(i / 32) * 17;
      const s = 2 ** (qt.data[blk] - 127);
      const j = i % 32;
      const c = j < 16 ? qt.data[blk + 1 + j] & 15 : qt.data[blk + 1 + j - 16] >> 4;
      const v = e2m1[c & 7] * (c & 8 ? -1 : 1);
      expect(y[i]).toBe(v * s);
      // values in [6, 8) * s saturate to 6 * s: the OCP scale rule's known clipping
      const bound = Math.abs(x[i]) > 6 * s ? Math.abs(x[i]) - 6 * s : gap(v) * s;
      expect(Math.abs(x[i] - y[i]) <= bound * (1 + 1e-6) + 1e-30, `mxfp4 ${i}`).toBe(true);
    }
  });
  it('zeros round-trip to zeros in every configuration', async () => {
    for (const cfg of CFGS) {
      if (cfg.opts.calibration && (cfg.opts.calibration as { method: string }).method === 'fixed') continue;
      for (const z of [new Float32Array(512), new Float32Array(512).fill(-0)]) {
        for (const backend of BACKENDS) {
          const y = await dequantize(await quantize(z, { ...cfg.opts, rowLength: 256, backend }), { backend });
          expect(y.every((v) => v === 0), cfg.label).toBe(true);
        }
      }
    }
  });
});

describe('input dtypes', () => {
  it('bf16 and f16 inputs give the same bytes as their exact f32 widening', async () => {
    const g = gaussian(1024 * 4, 11, 2);
    const bf = Uint16Array.from(g, (v) => f32ToBf16(v));
    const hf = Uint16Array.from(g, (v) => f32ToF16(v));
    const bfw = Float32Array.from(bf, (h) => bf16ToF32(h));
    const hfw = Float32Array.from(hf, (h) => f16ToF32(h));
    for (const cfg of CFGS) {
      for (const backend of BACKENDS) {
        const o = { ...cfg.opts, rowLength: 1024, backend };
        const a = await quantize(bf, { ...o, dtype: 'bf16' });
        const b = await quantize(bfw, o);
        expect(sameBytes(a.data, b.data), `${cfg.label} bf16`).toBe(true);
        const c = await quantize(hf, { ...o, dtype: 'f16' });
        const d = await quantize(hfw, o);
        expect(sameBytes(c.data, d.data), `${cfg.label} f16`).toBe(true);
      }
    }
  });
});

describe('chunking and metrics', () => {
  it('any chunk size gives the same bytes (tensor-level prepare hooks included)', async () => {
    const rowLen = 2048;
    const x = gaussian(rowLen * 13, 17, 0.05);
    for (const cfg of CFGS) {
      const whole = await quantize(x, { ...cfg.opts, rowLength: rowLen });
      const small = await quantize(x, { ...cfg.opts, rowLength: rowLen, chunkBytes: rowLen * 4 * 3 });
      const one = await quantize(x, { ...cfg.opts, rowLength: rowLen, chunkBytes: 1 });
      expect(sameBytes(whole.data, small.data), cfg.label).toBe(true);
      expect(sameBytes(whole.data, one.data), cfg.label).toBe(true);
      const back = await dequantize(whole, { chunkBytes: rowLen * 4 * 2 });
      expect(sameBytes(bits(back), bits(await dequantize(whole))), cfg.label).toBe(true);
    }
  });
  it('metrics use the stored (double-quantized) scales', async () => {
    const x = gaussian(4096 * 4, 23);
    for (const cfg of CFGS) {
      const qt = await quantize(x, { ...cfg.opts, rowLength: 4096, metrics: true, chunkBytes: 4096 * 4 });
      const y = await dequantize(qt);
      let se = 0, sx = 0;
      for (let i = 0; i < x.length; i++) { se += (x[i] - y[i]) ** 2; sx += x[i] ** 2; }
      expect(qt.metrics!.sqnrDb).toBeCloseTo(10 * Math.log10(sx / se), 6);
    }
  });
});

describe('round-trip error on Gaussian data', () => {
  // Expected SQNR for N(0,1) weights: NF4 at group 64 ~20 dB (QLoRA's information-theoretic code),
  // bitsandbytes FP4 lower (its 1/192 entry wastes a level), E4M3 ~31 dB (3 mantissa bits),
  // E5M2 ~25 dB, MXFP4 ~17-19 dB (power-of-two scales and 4-bit E2M1).
  const ranges: Record<string, [number, number]> = {
    'nf4 g64': [19.5, 21.5], 'fp4 g64': [15.5, 19], 'nf4 g64 dq': [19.5, 21.5],
    'fp8_e4m3 channel absmax': [30, 32.5], 'fp8_e5m2 channel absmax': [24, 26.5], mxfp4: [16, 19.5],
  };
  for (const [label, [lo, hi]] of Object.entries(ranges)) {
    it(`${label}: SQNR in [${lo}, ${hi}] dB`, async () => {
      const cfg = CFGS.find((c) => c.label === label)!;
      const x = gaussian(4096 * 16, 2024);
      const qt = await quantize(x, { ...cfg.opts, rowLength: 4096, metrics: true });
      expect(qt.metrics!.sqnrDb).toBeGreaterThan(lo);
      expect(qt.metrics!.sqnrDb).toBeLessThan(hi);
    });
  }
});

describe('registry and refusals', () => {
  it('registers the five formats with their layouts', async () => {
    for (const name of ['nf4', 'fp4', 'fp8_e4m3', 'fp8_e5m2', 'mxfp4']) expect(formats.has(name)).toBe(true);
    const x = gaussian(4096 * 2, 1);
    const sizes = async (o: Omit<QuantizeOptions, 'rowLength'>) =>
      (await quantize(x, { ...o, rowLength: 4096 })).layout.sections.map((s) => [s.name, s.bytes]);
    expect(await sizes({ format: 'nf4' })).toEqual([['codes', 4096], ['scales', 512]]);
    // 128 blocks of the flattened tensor: one group of 256 (bitsandbytes groups across rows)
    expect(await sizes({ format: 'fp4', doubleQuant: true })).toEqual([['codes', 4096], ['absmax_codes', 128], ['absmax_scales', 4], ['offset', 4]]);
    expect(await sizes({ format: 'fp8_e4m3' })).toEqual([['codes', 8192], ['scales', 8]]);
    expect(await sizes({ format: 'fp8_e5m2', granularity: 'tensor' })).toEqual([['codes', 8192], ['scale', 4]]);
    expect(await sizes({ format: 'mxfp4' })).toEqual([['blocks', 2 * 128 * 17]]);
  });
  it('refuses invalid combinations with clear errors', async () => {
    await refuse({ format: 'nf4', calibration: 'clip' }, 'E_BAD_CALIBRATION', /nf4 does not accept calibration "clip"; it accepts: absmax/);
    await refuse({ format: 'mxfp4', calibration: 'fixed,1,2' }, 'E_BAD_CALIBRATION', /mxfp4 does not accept/);
    await refuse({ format: 'nf4', groupSize: 48 }, 'E_BAD_OPTION', /groupSize for nf4 must be one of 32, 64, 128, 256 but got 48/);
    await refuse({ format: 'fp4', granularity: 'tensor' }, 'E_BAD_OPTION', /granularity for fp4/);
    await refuse({ format: 'fp8_e4m3', granularity: 'group' }, 'E_BAD_OPTION', /granularity for fp8_e4m3 must be one of channel, tensor but got group/);
    await refuse({ format: 'fp8_e5m2', doubleQuant: true }, 'E_BAD_OPTION', /fp8_e5m2 has no double quantization/);
    await refuse({ format: 'mxfp4', doubleQuant: true }, 'E_BAD_OPTION', /mxfp4 has no double quantization/);
    await refuse({ format: 'fp8_e4m3', bits: 8 }, 'E_BAD_OPTION', /fp8_e4m3 has no option bits/);
    await refuse({ format: 'fp8_e4m3', calibration: 'fixed,1' }, 'E_BAD_CALIBRATION', /fixed,<scale>,<max>/);
    await refuse({ format: 'fp8_e4m3', calibration: { method: 'clip', ratio: 1.5 } }, 'E_BAD_CALIBRATION', /ratio must be in \(0, 1\]/);
    await refuse({ format: 'mxfp4', rowLength: 16 } as Partial<QuantizeOptions>, 'E_ROW_LENGTH', /block size 32/);
    await refuse({ format: 'nf4', groupSize: 128, rowLength: 64 } as Partial<QuantizeOptions>, 'E_ROW_LENGTH', /not a multiple of the nf4 block size 128/);
  });
});

describe('bnb_int8: LLM.int8 as bitsandbytes quantizes it', () => {
  const rne = (v: number) => {
    const r = Math.round(v);
    return Math.abs(v % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
  };
  it('codes round(x * f32(127 / row absmax)) half to even, SCB the absmax, weight_format 0, both builds', async () => {
    const rowLen = 72;
    const rows: number[][] = [
      Array.from(gaussian(rowLen, 31, 0.02)),
      Array(rowLen).fill(0),
      // ties: 127 / 2 = 63.5 exactly, so x = k + 0.5 scaled lands on halves
      Array.from({ length: rowLen }, (_v, i) => (i === 0 ? 2 : ((i % 9) - 4 + 0.5) * (2 / 127))),
      Array.from({ length: rowLen }, (_v, i) => (i % 5 === 0 ? -1e-39 : i * 1e-41)), // 127 / amax overflows
      Array.from({ length: rowLen }, (_v, i) => (i === 3 ? -5e30 : Math.sin(i) * 1e29)),
      // values where x * f32(127 / amax) and x / f32(amax / 127) round apart (-57 against -58)
      Array.from({ length: rowLen }, (_v, i) => (i === 0 ? 0.050200000405311584 : i % 2 ? -0.022728346288204193 : 0)),
    ];
    const x = Float32Array.from(rows.flat());
    for (const backend of BACKENDS) {
      const q = await quantize(x, { format: 'bnb_int8', rowLength: rowLen, backend });
      expect(q.layout.sections.map((sec) => [sec.name, sec.bytes])).toEqual([['codes', rows.length * rowLen], ['scb', rows.length * 4], ['weight_format', 1]]);
      const codes = new Int8Array(q.data.buffer, q.data.byteOffset, rows.length * rowLen);
      const scb = new Float32Array(q.data.slice(rows.length * rowLen, rows.length * (rowLen + 4)).buffer);
      expect(q.data[q.data.length - 1]).toBe(0);
      const y = await dequantize(q, { backend });
      for (let r = 0; r < rows.length; r++) {
        let amax = 0;
        for (let i = 0; i < rowLen; i++) amax = Math.max(amax, Math.abs(x[r * rowLen + i]));
        expect(scb[r], `${backend} row ${r}`).toBe(amax);
        const inv = f(127 / amax);
        for (let i = 0; i < rowLen; i++) {
          const xi = x[r * rowLen + i];
          const want = amax === 0 ? 0 : inv === Infinity ? rne(f(f(xi / amax) * 127)) : rne(f(xi * inv));
          expect(codes[r * rowLen + i], `${backend} row ${r} col ${i}`).toBe(want === 0 ? 0 : want);
          expect(y[r * rowLen + i]).toBe(f(f(codes[r * rowLen + i] * amax) * f(1 / 127)));
        }
      }
      // the tie row: halves went to even
      expect([...codes.subarray(2 * rowLen + 1, 2 * rowLen + 10)]).toEqual([-2, -2, 0, 0, 2, 2, 4, 4, -4]);
    }
  });
});

describe('bnb_nf4 / bnb_fp4: transformers\' bitsandbytes 4-bit layout', () => {
  for (const type of ['nf4', 'fp4'] as const) {
    it(`${type}: the ${type} codes and absmax, then bitsandbytes' code book and JSON quant state`, async () => {
      const x = gaussian(3 * 256, 17, 0.02);
      for (const [dtype, values, torch] of [['f32', x, 'float32'], ['bf16', Uint16Array.from(x, f32ToBf16), 'bfloat16'], ['f16', Uint16Array.from(x, f32ToF16), 'float16']] as const) {
        for (const backend of BACKENDS) {
          const plain = await quantize(values, { format: type, rowLength: 256, dtype, backend });
          const q = await quantize(values, { format: `bnb_${type}`, rowLength: 256, dtype, backend });
          expect(q.layout.sections.map((s) => s.name)).toEqual(['codes', 'scales', 'quant_map', 'quant_state']);
          expect(sameBytes(q.data.subarray(0, plain.data.length), plain.data), `${dtype} ${backend}`).toBe(true);
          // the code book: what the format decodes codes 0..15 to at absmax 1
          const map = new Float32Array(q.data.slice(plain.data.length, plain.data.length + 64).buffer);
          const book = await dequantize({ ...plain, shape: [1, 64], data: Uint8Array.from([0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, ...new Uint8Array(24), ...new Uint8Array(new Float32Array([1]).buffer)]) });
          expect([...map]).toEqual([...book.subarray(0, 16)]);
          const state = new TextDecoder().decode(q.data.subarray(plain.data.length + 64));
          expect(JSON.parse(state)).toEqual({ quant_type: type, blocksize: 64, dtype: torch, shape: [3, 256] });
          expect(state.length).toBe(q.layout.sections[3].bytes);
          expect([...await dequantize(q, { backend })]).toEqual([...await dequantize(plain, { backend })]);
        }
      }
    });
  }
  for (const type of ['nf4', 'fp4'] as const) {
    it(`${type} with double quantization: bitsandbytes' nested absmax in groups of 256 across rows`, async () => {
      // 4 blocks a row, so a group of 256 blocks spans 64 rows; 150 rows end inside the third group
      const [rows, rowLen] = [150, 256];
      const x = Float32Array.from(gaussian(rows * rowLen, 23, 0.02), (v, i) => v * (1 + (Math.floor(i / 64) % 5)));
      const plain = refQuantize4(type, x, rows, rowLen);
      const am = new Float32Array(plain.slice(rows * rowLen / 2).buffer);
      const want = refFlatDoubleQuant(am);
      for (const backend of BACKENDS) {
        for (const chunkBytes of [undefined, 7 * rowLen * 4]) {
          const q = await quantize(x, { format: `bnb_${type}`, rowLength: rowLen, doubleQuant: true, backend, chunkBytes });
          const at = (name: string) => q.layout.sections.find((sec) => sec.name === name)!;
          const part = (name: string) => q.data.subarray(at(name).offset, at(name).offset + at(name).bytes);
          const label = `${backend} chunk ${chunkBytes}`;
          expect(q.layout.sections.map((sec) => sec.name)).toEqual(['codes', 'absmax_codes', 'nested_absmax', 'nested_quant_map', 'quant_map', 'quant_state']);
          expect(sameBytes(part('codes'), plain.subarray(0, rows * rowLen / 2)), label).toBe(true);
          expect(sameBytes(part('absmax_codes'), want.codes), label).toBe(true);
          // the same scheme as the format's own double quantization, under other names
          const own = await quantize(x, { format: type, rowLength: rowLen, doubleQuant: true, backend, chunkBytes });
          expect(sameBytes(own.data.subarray(0, q.layout.sections[2].offset + q.layout.sections[2].bytes), q.data.subarray(0, q.layout.sections[2].offset + q.layout.sections[2].bytes)), label).toBe(true);
          expect([...new Float32Array(part('nested_absmax').slice().buffer)], label).toEqual([...want.nested]);
          expect([...new Float32Array(part('nested_quant_map').slice().buffer)]).toEqual(DYNAMIC_MAP);
          const state = new TextDecoder().decode(part('quant_state'));
          expect(JSON.parse(state)).toEqual({ quant_type: type, blocksize: 64, dtype: 'float32', shape: [rows, rowLen], nested_blocksize: 256, nested_dtype: 'float32', nested_offset: want.offset });
          // decoded as bitsandbytes does: DYN[q] * nested_absmax + offset per block, then the 4-bit map
          const y = await dequantize(q, { backend, chunkBytes });
          const table = type === 'nf4' ? NF4_VALUES : FP4_VALUES;
          for (let i = 0; i < x.length; i += 61) {
            const b = Math.floor(i / 64);
            const absmax = f(f(DYNAMIC_MAP[want.codes[b]] * want.nested[b >> 8]) + want.offset);
            const c = i % 2 === 0 ? plain[i >> 1] >> 4 : plain[i >> 1] & 15;
            expect(y[i], `${label} value ${i}`).toBe(f(table[c] * absmax));
          }
        }
      }
    });
  }
  it('double quantization: a quant state without a finite nested_offset is E_BAD_INPUT on dequantize', async () => {
    const q = await quantize(gaussian(4 * 256, 3), { format: 'bnb_nf4', rowLength: 256, doubleQuant: true });
    const st = q.layout.sections.find((sec) => sec.name === 'quant_state')!;
    const data = q.data.slice();
    data.set(new TextEncoder().encode(JSON.stringify({ quant_type: 'nf4', nested_offset: 'x' }).padEnd(st.bytes, ' ')), st.offset);
    await expect(dequantize({ ...q, data })).rejects.toMatchObject({ code: 'E_BAD_INPUT', message: /nested_offset/ });
  });
  it('refuses what transformers does not save', async () => {
    await refuse({ format: 'bnb_nf4', groupSize: 32 }, 'E_BAD_OPTION', /groupSize for bnb_nf4 must be one of 64, 128, 256/);
  });
});
