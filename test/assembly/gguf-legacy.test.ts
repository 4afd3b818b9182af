// Q4_0 (importance path), Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, F16, BF16: the wasm kernels against
// the plain-TS reference of the spec (test/reference/legacy-ref.ts, itself checked against
// llama.cpp's Q4_0 bytes below), the explicit edge cases of spec §16.1/§16.2, and SIMD == scalar.
import { mulberry32 } from '../helpers/data.js';
import { describe, expect, it } from 'vitest';
import { quantize, dequantize } from '../../src/index.js';
import { dequantizeWith } from '../../src/quantize.js';
import { loadKernels, type Kernels } from '../../src/kernels/loader.js';
import { ARGS_BYTES, writeArgs } from '../../src/kernels/args.js';
import { sharedBytes, sharedF32 } from '../helpers/shared.js';
import * as ref from '../reference/legacy-ref.js';

const input = sharedF32('vectors/input_f32.bin');
const imatrix = sharedF32('vectors/imatrix_f32.bin');
const N = 4096;
const QUANTS = ['q4_0', 'q4_1', 'q5_0', 'q5_1', 'iq4_nl', 'iq4_xs'] as const;
const BACKENDS = ['wasm-simd', 'wasm'] as const;
const row = (r: number) => input.subarray(r * N, (r + 1) * N);
const BYTES: Record<string, [number, number]> = {
  q4_0: [32, 18], q4_1: [32, 20], q5_0: [32, 22], q5_1: [32, 24], iq4_nl: [32, 18], iq4_xs: [256, 136], f16: [1, 2], bf16: [1, 2],
};
const rowBytes = (fmt: string, n: number) => (n / BYTES[fmt][0]) * BYTES[fmt][1];

function firstDiff(a: Uint8Array, b: Uint8Array): number {
  if (a.length !== b.length) return -2;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** First index where two float arrays differ bitwise; any NaN equals any NaN (wasm leaves NaN bits open). */
function firstFloatDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return -2;
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < a.length; i++) if (ua[i] !== ub[i] && !(Number.isNaN(a[i]) && Number.isNaN(b[i]))) return i;
  return -1;
}

const rng = mulberry32;
function gauss(u: () => number) {
  return Math.sqrt(-2 * Math.log(1 - u())) * Math.cos(2 * Math.PI * u());
}

/** Rows of 1024 exercising scales, signs, ties, sparsity and tiny/huge magnitudes. */
function variedRows(): Float32Array {
  const n = 1024;
  const kinds = 11;
  const out = new Float32Array(kinds * n);
  const u = rng(1234);
  for (let i = 0; i < n; i++) {
    out[i] = gauss(u);
    out[n + i] = gauss(u) / Math.max(0.05, Math.abs(gauss(u))) * 0.01; // heavy tails
    out[2 * n + i] = u() < 0.9 ? 0 : gauss(u); // 90 % sparse
    out[3 * n + i] = Math.abs(gauss(u)) + (u() < 0.05 ? -0.1 : 0); // mostly positive
    out[4 * n + i] = gauss(u) * 2 ** ((Math.floor(i / 16) % 41) - 20); // per-16 exponents
    out[5 * n + i] = Math.round(gauss(u) * 6); // integer-valued: exact ties
    out[6 * n + i] = gauss(u) * 2 ** -(Math.floor(i / 32) % 61); // per-block exponents to 2^-60
    out[7 * n + i] = (Math.floor(i / 32) % 2 ? -1 : 1) * (i % 3 === 0 ? -0 : 0.25 * (i % 5)); // signed zeros, small set
    out[8 * n + i] = u() < 0.5 ? 1e-20 * gauss(u) : 3 * gauss(u); // mixed tiny / normal
    out[9 * n + i] = 1000 * gauss(u);
    out[10 * n + i] = gauss(u) * 2 ** ((Math.floor(i / 32) % 11) * 10 - 20); // x*x overflows to inf
  }
  return out;
}

/** Blocks built on the IQ4 grid midpoints (exact ties of best_index) with an extreme of +-127. */
function midpointRows(): Float32Array {
  const n = 1024;
  const out = new Float32Array(2 * n);
  const mids = ref.KVALUES.slice(0, 15).map((k, i) => (k + ref.KVALUES[i + 1]) / 2);
  const u = rng(99);
  for (let i = 0; i < 2 * n; i++) {
    const j = i % 32;
    const m = mids[Math.floor(u() * 15)];
    const v = u() < 0.5 ? m : Math.fround(m + (u() < 0.5 ? -1 : 1) * 2 ** -18);
    out[i] = j === 0 ? (i < n ? -127 : 127) : (i < n ? -v : v) * (Math.floor(i / 32) % 3 === 0 ? 1 : 0.5);
  }
  return out;
}

function importanceSets(len: number): [string, Float32Array | undefined][] {
  const u = rng(7);
  const logn = new Float32Array(len).map(() => Math.exp(gauss(u)));
  const zeros = new Float32Array(len).map(() => (u() < 0.2 ? 0 : Math.exp(gauss(u))));
  return [['none', undefined], ['log-normal', logn], ['20% zeros', zeros]];
}

async function quantBytes(x: Float32Array | Uint16Array, fmt: string, rowLength: number, backend: (typeof BACKENDS)[number], importance?: Float32Array, dtype?: 'f16' | 'bf16') {
  const qt = await quantize(x, { format: fmt, rowLength, backend, importance, dtype });
  return qt.data;
}

function expectRowsEqual(got: Uint8Array, fmt: string, rows: Float32Array, rowLength: number, qw: Float32Array | undefined, what: string) {
  const rb = rowBytes(fmt, rowLength);
  for (let r = 0; r < rows.length / rowLength; r++) {
    const want = ref.quantizers[fmt](rows.subarray(r * rowLength, (r + 1) * rowLength), qw);
    const g = got.subarray(r * rb, (r + 1) * rb);
    const at = firstDiff(g, want);
    expect(at, `${what} row ${r}: first difference at byte ${at} (block ${Math.floor(at / BYTES[fmt][1])})`).toBe(-1);
  }
}

describe('reference implementation', () => {
  it('reproduces llama.cpp Q4_0 bytes and dequantized values (anchors the oracle)', () => {
    const want = sharedBytes('vectors/q4_0.bin');
    for (let r = 0; r < 11; r++) expect(firstDiff(ref.q4_0(row(r)), want.subarray(r * 2304, (r + 1) * 2304))).toBe(-1);
    const dq = ref.dequantize('q4_0', want, 11 * N);
    expect(Buffer.from(dq.buffer).equals(Buffer.from(sharedF32('vectors/q4_0.dequant_f32.bin').buffer))).toBe(true);
  });

  it('best_index equals the midpoint count used by the SIMD build, around every midpoint and entry', () => {
    const m2 = ref.KVALUES.slice(0, 15).map((k, i) => k + ref.KVALUES[i + 1]);
    const count = (v: number) => m2.filter((m) => m <= Math.floor(2 * v)).length;
    const pts = [...m2.map((m) => m / 2), ...ref.KVALUES, 0, 0.5, -0.5];
    for (const p of pts) {
      const b = ref.bitsOf(p);
      for (let k = -3000; k <= 3000; k++) {
        const v = ref.fromBits(p === 0 ? Math.abs(k) | (k < 0 ? 0x80000000 : 0) : b + k);
        expect(ref.bestIndex(v), `v = ${v}`).toBe(count(v));
      }
    }
    for (let v = -300; v <= 300; v += 0.01) expect(ref.bestIndex(Math.fround(v))).toBe(count(Math.fround(v)));
    expect(ref.bestIndex(NaN)).toBe(15);
  });
});

for (const backend of BACKENDS) {
  describe(`test vectors (${backend})`, () => {
    for (const fmt of QUANTS) {
      for (const withImatrix of [false, true]) {
        if (fmt === 'q4_0' && !withImatrix) continue; // gguf-vectors.test.ts has llama.cpp's own bytes
        it(`${fmt}${withImatrix ? ' with imatrix' : ''}: the 11 rows equal the reference`, async () => {
          const qw = withImatrix ? imatrix : undefined;
          const got = await quantBytes(input, fmt, N, backend, qw);
          expect(got.length).toBe(11 * rowBytes(fmt, N));
          expectRowsEqual(got, fmt, input, N, qw, fmt);
        });
      }
    }
  });
}

describe('spec §16.1 edge rows', () => {
  const rowOf = async (fmt: string, r: number, qw?: Float32Array) => {
    const all = await quantBytes(input, fmt, N, 'wasm-simd', qw);
    const rb = rowBytes(fmt, N);
    const scalar = await quantBytes(input, fmt, N, 'wasm', qw);
    expect(firstDiff(all, scalar)).toBe(-1);
    return all.subarray(r * rb, (r + 1) * rb);
  };
  const blocks = (b: Uint8Array, size: number) => Array.from({ length: b.length / size }, (_, i) => b.subarray(i * size, (i + 1) * size));
  const rep = (h: string, n: number) => h.repeat(n);

  it('row 4 (zeros)', async () => {
    for (const qw of [undefined, imatrix]) {
      for (const blk of blocks(await rowOf('q4_1', 4, qw), 20)) expect(hex(blk)).toBe(rep('00', 20));
      for (const blk of blocks(await rowOf('q5_1', 4, qw), 24)) expect(hex(blk)).toBe(rep('00', 24));
      for (const blk of blocks(await rowOf('iq4_nl', 4, qw), 18)) expect(hex(blk)).toBe('0000' + rep('88', 16));
      for (const blk of blocks(await rowOf('iq4_xs', 4, qw), 136)) expect(hex(blk)).toBe('0080aaaa00000000' + rep('88', 128));
    }
    for (const blk of blocks(await rowOf('q5_0', 4), 22)) expect(hex(blk)).toBe('0080ffffffff' + rep('00', 16));
    for (const blk of blocks(await rowOf('q5_0', 4, imatrix), 22)) expect(hex(blk)).toBe(rep('00', 22));
    for (const blk of blocks(await rowOf('q4_0', 4, imatrix), 18)) expect(hex(blk)).toBe(rep('00', 18));
  });

  it('row 7 (fp32 denormals)', async () => {
    const x = row(7);
    const rq41 = await rowOf('q4_1', 7);
    const rq51 = await rowOf('q5_1', 7);
    const rq50 = await rowOf('q5_0', 7);
    for (let b = 0; b < 128; b++) {
      let mn = x[32 * b];
      let amax = 0;
      let max = 0;
      for (let j = 0; j < 32; j++) {
        const v = x[32 * b + j];
        if (v < mn) mn = v;
        if (Math.abs(v) > amax) { amax = Math.abs(v); max = v; }
      }
      const mBytes = mn < 0 ? '0080' : '0000';
      // Reference: 1/d overflows and x86 converts inf/NaN to 0: codes 0; d = +0, m = +-0.
      expect(hex(rq41.subarray(20 * b, 20 * b + 20))).toBe('0000' + mBytes + rep('00', 16));
      expect(hex(rq51.subarray(24 * b, 24 * b + 24))).toBe('0000' + mBytes + rep('00', 20));
      expect(hex(rq50.subarray(22 * b, 22 * b + 22))).toBe((max < 0 ? '0000' : '0080') + rep('00', 20));
    }
    for (const qw of [undefined, imatrix]) {
      for (const blk of blocks(await rowOf('iq4_nl', 7, qw), 18)) expect(hex(blk)).toBe('0000' + rep('88', 16));
      for (const blk of blocks(await rowOf('iq4_xs', 7, qw), 136)) expect(hex(blk)).toBe('0080aaaa00000000' + rep('88', 128));
    }
    for (const blk of blocks(await rowOf('q4_0', 7, imatrix), 18)) expect(hex(blk)).toBe(rep('00', 18));
    for (const blk of blocks(await rowOf('q5_0', 7, imatrix), 22)) expect(hex(blk)).toBe(rep('00', 22));
    // QKX has no threshold: d = 0, m = fp16(negative denormal) = -0.0, codes 0.
    for (const blk of blocks(await rowOf('q4_1', 7, imatrix), 20)) expect(hex(blk)).toBe('00000080' + rep('00', 16));
    for (const blk of blocks(await rowOf('q5_1', 7, imatrix), 24)) expect(hex(blk)).toBe('00000080' + rep('00', 20));
  });

  it('rows 8/9 (constants): Q4_1/Q5_1 reference d = 0, m = the constant, codes 0', async () => {
    for (const [r, m] of [[8, ref.toF16(0.3)], [9, ref.toF16(-1.75)]] as const) {
      const mh = hex(new Uint8Array([m & 255, m >> 8]));
      for (const blk of blocks(await rowOf('q4_1', r), 20)) expect(hex(blk)).toBe('0000' + mh + rep('00', 16));
      for (const blk of blocks(await rowOf('q5_1', r), 24)) expect(hex(blk)).toBe('0000' + mh + rep('00', 20));
      // Negative constant with imatrix: max <= min, so d = 0, m = the constant, codes 0 (§14.2).
      if (r === 9) for (const blk of blocks(await rowOf('q4_1', r, imatrix), 20)) expect(hex(blk)).toBe('0000' + mh + rep('00', 16));
    }
  });
});

describe('spec §16.2 zero importance values', () => {
  // Row 0 with a zeroed 32-column range (block 5) and a zeroed 256-column range (super-block 2).
  const qw = imatrix.slice();
  qw.fill(0, 160, 192);
  qw.fill(0, 512, 768);
  for (const backend of BACKENDS) {
    it(`degenerate units give the documented bytes (${backend})`, async () => {
      const x = row(0);
      const nl = await quantBytes(x, 'iq4_nl', N, backend, qw);
      expect(hex(nl.subarray(5 * 18, 6 * 18))).toBe('00fe' + 'ff'.repeat(16));
      for (let b = 16; b < 24; b++) expect(hex(nl.subarray(b * 18, b * 18 + 2))).toBe('00fe');
      const xs = await quantBytes(x, 'iq4_xs', N, backend, qw);
      expect(hex(xs.subarray(2 * 136, 3 * 136))).toBe('0080aaaa00000000' + '88'.repeat(128));
      for (const [fmt, size] of [['q4_0', 18], ['q5_0', 22]] as const) {
        const q = await quantBytes(x, fmt, N, backend, qw);
        expect(hex(q.subarray(5 * size, 5 * size + 2))).toBe('0000');
        expect(q.subarray(5 * size + 2, 6 * size).some((v) => v !== 0)).toBe(true); // first QX pass codes
      }
      for (const fmt of QUANTS) expectRowsEqual(await quantBytes(x, fmt, N, backend, qw), fmt, x, N, qw, `${fmt} zero-imatrix`);
    });
  }
});

describe('varied rows: SIMD build == scalar build == reference', () => {
  const rows = variedRows();
  const mids = midpointRows();
  for (const fmt of QUANTS) {
    for (const [name, qw] of importanceSets(1024)) {
      it(`${fmt}, importance ${name}`, async () => {
        for (const data of [rows, mids]) {
          const a = await quantBytes(data, fmt, 1024, 'wasm-simd', qw);
          const b = await quantBytes(data, fmt, 1024, 'wasm', qw);
          expect(firstDiff(a, b)).toBe(-1);
          expectRowsEqual(a, fmt, data, 1024, qw, `${fmt}/${name}`);
        }
      });
    }
  }
});

describe('F16 / BF16 input dtypes', () => {
  const h = new Uint16Array(input.length).map((_, i) => ref.toF16(input[i]));
  const bh = new Uint16Array(input.length).map((_, i) => ref.toBf16(input[i]));
  const wideH = new Float32Array(h.length).map((_, i) => ref.fromF16(h[i]));
  const wideB = new Float32Array(bh.length).map((_, i) => ref.fromBits(bh[i] << 16));
  for (const fmt of [...QUANTS, 'f16', 'bf16']) {
    it(`${fmt}: f16 and bf16 rows quantize as their f32 widening, on both builds`, async () => {
      for (const qw of fmt.endsWith('16') ? [undefined] : [undefined, imatrix]) {
        for (const [vals, wide, dtype] of [[h, wideH, 'f16'], [bh, wideB, 'bf16']] as const) {
          const a = await quantBytes(vals, fmt, N, 'wasm-simd', qw, dtype);
          const b = await quantBytes(vals, fmt, N, 'wasm', qw, dtype);
          expect(firstDiff(a, b)).toBe(-1);
          expectRowsEqual(a, fmt, wide, N, qw, `${fmt}/${dtype}`);
        }
      }
    });
  }
  it('f16 -> f16 and bf16 -> bf16 are copies', async () => {
    expect(firstDiff(await quantBytes(h, 'f16', N, 'wasm-simd', undefined, 'f16'), new Uint8Array(h.buffer))).toBe(-1);
    expect(firstDiff(await quantBytes(bh, 'bf16', N, 'wasm', undefined, 'bf16'), new Uint8Array(bh.buffer))).toBe(-1);
  });
});

// Direct kernel calls, for inputs quantize() rejects (inf, NaN).
async function runKernel(k: Kernels, name: string, src: Uint8Array, srcType: number, n: number, outBytes: number): Promise<Uint8Array> {
  const base = k.reserve(ARGS_BYTES + 16 * n + 65536 + src.length + outBytes + 64);
  const args = base;
  const scratch = base + ARGS_BYTES;
  const at = scratch + 16 * n + 65536;
  const out = at + ((src.length + 15) & ~15);
  writeArgs(k.buffer, args, { scratch });
  k.u8(at, src.length).set(src);
  k.fn(name)(at, srcType, 1, n, out, args);
  return k.u8(out, outBytes).slice();
}

describe('F16 / BF16 conversion', () => {
  const specials: number[] = [
    0, -0, 2 ** -149, -(2 ** -149), 2 ** -126, 2 ** -24, 2 ** -25, 2 ** -25 + 2 ** -40, 3 * 2 ** -25, 5 * 2 ** -25,
    2 ** -14, 2 ** -14 - 2 ** -25, 2 ** -14 - 3 * 2 ** -26, 65504, 65519, 65519.996, 65520, 65536, 1e30,
    ref.fromBits(0x7f7fffff), -ref.fromBits(0x7f7fffff), Infinity, -Infinity, NaN,
    ref.fromBits(0xffc00000), ref.fromBits(0x7f800001), ref.fromBits(0xff812345), ref.fromBits(0x7fbfffff),
    1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -11 + 2 ** -23, 1 - 2 ** -12, 1 + 2 ** -8, 1 + 3 * 2 ** -8,
    1 + 2 ** -8 + 2 ** -23, ref.fromBits(0x3f808000), ref.fromBits(0x3f818000), ref.fromBits(0x7f7f8000), ref.fromBits(0x7f7fffff),
    ref.fromBits(0x00008000), ref.fromBits(0x00018000), ref.fromBits(0x807fffff), 0.1, -0.3, 3.14159,
  ];
  const u = rng(3);
  const vals = new Float32Array(specials.length + 40000);
  vals.set(specials);
  const bits = new Uint32Array(vals.buffer);
  for (let i = specials.length; i < vals.length; i++) {
    // Random patterns, half of them with exponents near the fp16 range and tie-shaped mantissas.
    let b = (u() * 2 ** 32) >>> 0;
    if (i % 2) b = (b & 0x80000000) | ((((b >>> 23) & 63) + 96) << 23) | (b & (i % 4 === 1 ? 0x7fe000 : 0x7fffff)) | (i % 8 === 1 ? 0x1000 : 0);
    bits[i] = b;
  }
  const src = new Uint8Array(vals.buffer);
  for (const backend of BACKENDS) {
    it(`f32 -> f16 / bf16 equal an independent conversion, bit for bit (${backend})`, async () => {
      const k = await loadKernels(backend);
      const f16 = new Uint16Array((await runKernel(k, 'f16_quantize', src, 0, vals.length, vals.length * 2)).buffer);
      const b16 = new Uint16Array((await runKernel(k, 'bf16_quantize', src, 0, vals.length, vals.length * 2)).buffer);
      for (let i = 0; i < vals.length; i++) {
        expect(f16[i], `f16 of 0x${bits[i].toString(16)}`).toBe(ref.toF16(vals[i]));
        expect(b16[i], `bf16 of 0x${bits[i].toString(16)}`).toBe(ref.toBf16(vals[i]));
      }
      // Spot values spelled out.
      expect([f16[2], f16[3], f16[4]]).toEqual([0, 0x8000, 0]); // fp32 subnormal / 2^-126 -> +-0
      expect([f16[5], f16[6], f16[7], f16[8], f16[9]]).toEqual([1, 0, 1, 2, 2]); // 2^-24; ties to even
      expect([f16[10], f16[11], f16[12]]).toEqual([0x0400, 0x0400, 0x03ff]); // subnormal/normal edge
      expect([f16[13], f16[14], f16[15], f16[16]]).toEqual([0x7bff, 0x7bff, 0x7bff, 0x7c00]); // 65520 -> inf
      expect([f16[21], f16[22], f16[23], f16[24]]).toEqual([0x7c00, 0xfc00, 0x7e00, 0xfe00]);
      expect([b16[21], b16[22], b16[24], b16[26]]).toEqual([0x7f80, 0xff80, 0xffc0, 0xffc1]); // bf16 NaN: quiet, payload kept
    });
    it(`every finite f16 pattern read as input gives the bytes of its f32 widening (${backend})`, async () => {
      // Subnormals, zeros of both signs and the largest values, shuffled so that each row mixes them.
      const finite = Uint16Array.from({ length: 63488 }, (_, i) => ((i * 40503) % 63488) + ((i * 40503) % 63488 >= 31744 ? 1024 : 0));
      const wide = Float32Array.from(finite, (h) => ref.fromF16(h));
      for (const format of ['q8_0', 'f16', 'bf16']) {
        const a = await quantize(finite, { format, rowLength: 1024, dtype: 'f16', backend });
        const b = await quantize(wide, { format, rowLength: 1024, backend });
        expect(Buffer.compare(Buffer.from(a.data), Buffer.from(b.data)), format).toBe(0);
      }
    });
    it(`all 65536 f16 and bf16 patterns dequantize exactly (${backend})`, async () => {
      const k = await loadKernels(backend);
      const all = new Uint16Array(65536).map((_, i) => i);
      const base = k.reserve(65536 * 6 + 64);
      k.u8(base, 131072).set(new Uint8Array(all.buffer));
      k.fn('f16_dequantize')(base, 1, 65536, base + 131072, 0);
      const out = new Uint32Array(k.buffer.slice(base + 131072, base + 131072 + 262144));
      for (let i = 0; i < 65536; i++) {
        const e = (i >> 10) & 31;
        const want = e === 31 ? (((i & 0x8000) << 16) | 0x7f800000 | ((i & 1023) << 13)) >>> 0 : ref.bitsOf(ref.fromF16(i));
        if (out[i] !== want) expect(`0x${i.toString(16)} -> 0x${out[i].toString(16)}`).toBe(`0x${i.toString(16)} -> 0x${want.toString(16)}`);
      }
      // Inf / NaN beside finite values in one group of eight (the SIMD build converts such groups apart).
      const mixed = all.map((_, i) => (i % 8 === 3 ? 0x7c00 | (i & 0x83ff) : (i * 40503) & 0xffff));
      k.u8(base, 131072).set(new Uint8Array(mixed.buffer));
      k.fn('f16_dequantize')(base, 1, 65536, base + 131072, 0);
      const outM = new Uint32Array(k.buffer.slice(base + 131072, base + 131072 + 262144));
      for (let i = 0; i < 65536; i++) if (outM[i] !== out[mixed[i]]) expect(`0x${mixed[i].toString(16)} -> 0x${outM[i].toString(16)}`).toBe(`0x${mixed[i].toString(16)} -> 0x${out[mixed[i]].toString(16)}`);
      k.fn('bf16_dequantize')(base, 1, 65536, base + 131072, 0);
      const outB = new Uint32Array(k.buffer.slice(base + 131072, base + 131072 + 262144));
      for (let i = 0; i < 65536; i++) if (outB[i] !== (mixed[i] << 16) >>> 0) expect(outB[i]).toBe((mixed[i] << 16) >>> 0);
    });
  }
});

describe('dequantization (spec §15)', () => {
  const rows = variedRows();
  for (const fmt of [...QUANTS, 'f16', 'bf16']) {
    it(`${fmt}: both builds compute the §15 formula bit for bit, on quantized and on random blocks`, async () => {
      for (const qw of [undefined, imatrix.subarray(0, 1024)]) {
        const qt = await quantize(rows, { format: fmt, rowLength: 1024, importance: fmt.endsWith('16') ? undefined : qw });
        const want = ref.dequantize(fmt, qt.data, rows.length);
        for (const backend of BACKENDS) {
          const got = await dequantize(qt, { backend });
          expect(firstFloatDiff(got, want)).toBe(-1);
        }
      }
      // Random bytes with finite fp16 fields (exponent < 31) at the scale/min positions.
      const u = rng(11);
      const qt = await quantize(rows, { format: fmt, rowLength: 1024 });
      const data = qt.data.map(() => Math.floor(u() * 256));
      const [bl, bs] = BYTES[fmt];
      const fields = fmt === 'q4_1' || fmt === 'q5_1' ? [0, 2] : fmt.endsWith('16') ? [] : [0];
      for (let b = 0; b < data.length / bs; b++) for (const f of fields) if (((data[b * bs + f + 1] >> 2) & 31) === 31) data[b * bs + f + 1] &= 0xbf;
      if (fmt.endsWith('16')) for (let i = 0; i < data.length; i += 2) if ((fmt === 'f16' ? (data[i + 1] & 0x7c) === 0x7c : (data[i + 1] & 0x7f) === 0x7f && (data[i] & 0x80))) data[i + 1] &= 0xbf;
      const rq = { ...qt, data };
      const want = ref.dequantize(fmt, data, (data.length / bs) * bl);
      for (const backend of BACKENDS) {
        const k = await loadKernels(backend);
        const got = dequantizeWith(k, rq);
        expect(firstFloatDiff(got, want), `${fmt} ${backend}`).toBe(-1);
      }
    });
  }
});

describe('Q4_1 / Q5_1 block minimum and maximum where lane minima could differ from the scan', () => {
  // The SIMD build takes them with pmin/pmax, which keep their first operand when either is NaN;
  // the scan (spec §0) starts from x0 and skips a later NaN. NaN reaches the kernels only when they
  // are called directly (quantize() rejects it), so they are called directly here: a NaN at each
  // position of a block, both infinities, and zero extremes of either sign in either order.
  const u = rng(29);
  const blocks: number[][] = [];
  const base = () => Array.from({ length: 32 }, () => u() - 0.5);
  for (let p = 0; p < 32; p++) {
    const b = base();
    b[p] = NaN;
    blocks.push(b);
  }
  blocks.push(base().map((v, i) => (i === 5 ? Infinity : v)), base().map((v, i) => (i === 0 ? Infinity : i === 9 ? -Infinity : v)));
  for (const [z1, z2] of [[0, -0], [-0, 0]]) {
    blocks.push(base().map((v, i) => (i === 3 ? z1 : i === 20 ? z2 : Math.abs(v) + 0.01)));
    blocks.push(base().map((v, i) => (i === 0 ? z1 : i === 31 ? z2 : -Math.abs(v) - 0.01)));
  }
  const x = new Float32Array(blocks.flat());
  const src = new Uint8Array(x.buffer);
  for (const fmt of ['q4_1', 'q5_1'] as const) {
    it(`${fmt}: both builds write the literal scan's bytes`, async () => {
      const want = ref[fmt](x);
      for (const backend of BACKENDS) {
        const got = await runKernel(await loadKernels(backend), `${fmt}_quantize`, src, 0, x.length, want.length);
        expect(firstDiff(got, want), `${fmt} ${backend}`).toBe(-1);
      }
    });
  }
});

describe('Q8_0 block absmax on the bit patterns of |x|, with NaN and infinities', () => {
  // The SIMD build takes four blocks' maxima with integer max on |x|'s bits, where a NaN's pattern
  // is above +inf's; a group of blocks with a NaN goes to the per-block path, whose f32 max lets the
  // NaN through as the scalar build's does. quantize() rejects NaN, so the kernel is called
  // directly: a NaN at each position of a block (blocks in groups of four), infinities, zeros.
  const u = rng(31);
  const blocks: number[][] = [];
  const base = () => Array.from({ length: 32 }, () => u() - 0.5);
  for (let p = 0; p < 32; p++) {
    const b = base();
    b[p] = NaN;
    blocks.push(b, base(), base(), base());
  }
  blocks.push(base().map((v, i) => (i === 5 ? Infinity : v)), base().map((v, i) => (i === 9 ? -Infinity : v)), base().map(() => 0), base().map(() => -0));
  const x = new Float32Array(blocks.flat());
  const src = new Uint8Array(x.buffer);
  it('both builds write the same bytes', async () => {
    const [simd, scalar] = await Promise.all(BACKENDS.map(async (b) => runKernel(await loadKernels(b), 'q8_0_quantize', src, 0, x.length, (x.length / 32) * 34)));
    expect(firstDiff(simd, scalar)).toBe(-1);
  });
});
