// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (spec §4, §5, §9–§11, §13, §14.3–§14.6, §15, §16): both wasm builds
// against the plain TypeScript reference (test/reference/kquants-ref.ts), byte for byte, on the
// 11 shared vector rows and random rows, with and without an importance matrix, plus the edge
// encodings the spec states explicitly.
import { describe, expect, it } from 'vitest';
import { quantize, dequantize, f32ToF16, f32ToBf16, f16ToF32, bf16ToF32, getFormat, loadKernels } from '../../src/index.js';
import { sharedF32 } from '../helpers/shared.js';
import { kquantRefs, dequantRef, nearestInt } from '../reference/kquants-ref.js';

const input = sharedF32('vectors/input_f32.bin');
const imatrix = sharedF32('vectors/imatrix_f32.bin');
const ROW = 4096;
const BYTES: Record<string, number> = { q2_k: 84, q3_k: 110, q4_k: 144, q5_k: 176, q6_k: 210 };
const FORMATS = Object.keys(BYTES);
const BACKENDS = ['wasm-simd', 'wasm'] as const;

function lcg(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s >>> 8) / 16777216;
  };
}

/** Varied rows: gaussian-ish, heavy tails, sparse, positive, per-16 exponents, integers, tiny blocks. */
function randomRows(nrows: number, rowLen: number, seed: number): Float32Array {
  const u = lcg(seed);
  const x = new Float32Array(nrows * rowLen);
  for (let r = 0; r < nrows; r++) {
    const kind = r % 8;
    for (let i = 0; i < rowLen; i++) {
      const g = (u() + u() + u() - 1.5) * 2;
      let v: number;
      switch (kind) {
        case 0: v = 0.03 * g; break;
        case 1: v = 0.01 * g / Math.max(0.05, u()); break;
        case 2: v = u() < 0.9 ? 0 : g; break;
        case 3: v = 0.2 + u() - 0.1 * u(); break;
        case 4: v = g * 2 ** (((i >> 4) % 41) - 20); break;
        case 5: v = Math.round(g * 6); break;
        case 6: v = g * 2 ** -((i >> 8) * 7 % 61); break;
        default: v = u() < 0.02 ? 40 * g : 0.1 * g;
      }
      x[r * rowLen + i] = v;
    }
  }
  return x;
}

function logNormalImatrix(n: number, seed: number, zeroFrac = 0): Float32Array {
  const u = lcg(seed);
  const w = new Float32Array(n);
  for (let i = 0; i < n; i++) w[i] = u() < zeroFrac ? 0 : Math.exp(2 * (u() + u() - 1));
  return w;
}

function firstDiff(a: Uint8Array, b: Uint8Array): number {
  if (a.length !== b.length) return -2;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

function expectRowsEqual(got: Uint8Array, want: Uint8Array, rowBytes: number, what: string): void {
  expect(got.length).toBe(want.length);
  const bad: string[] = [];
  for (let r = 0; r * rowBytes < want.length; r++) {
    const d = firstDiff(got.subarray(r * rowBytes, (r + 1) * rowBytes), want.subarray(r * rowBytes, (r + 1) * rowBytes));
    if (d >= 0) bad.push(`row ${r} @${d}`);
  }
  expect(bad, what).toEqual([]);
}

const u16 = (b: Uint8Array, at: number) => b[at] | (b[at + 1] << 8);
const dOffsets: Record<string, [number, number | undefined]> = {
  q2_k: [80, 82], q3_k: [108, undefined], q4_k: [0, 2], q5_k: [0, 2], q6_k: [208, undefined],
};

describe('K-quants: nearest_int helper of the reference', () => {
  it('is round-half-even and maps inf/NaN like the C bit trick', () => {
    expect([0.5, 1.5, 2.5, -0.5, -1.5, 3.49, -3.51].map(nearestInt)).toEqual([0, 2, 2, 0, -2, 3, -4]);
    expect(nearestInt(Infinity)).toBe(-4194304);
    expect(nearestInt(-Infinity)).toBe(-4194304);
    expect(nearestInt(NaN)).toBe(0);
  });
});

describe('K-quants: registry and wasm constants', () => {
  const TYPES: Record<string, number> = { q2_k: 10, q3_k: 11, q4_k: 12, q5_k: 13, q6_k: 14 };
  it('ggml type ids, block geometry and exported constants agree with spec §17', async () => {
    for (const backend of BACKENDS) {
      const k = await loadKernels(backend);
      for (const fmt of FORMATS) {
        const spec = getFormat(fmt);
        expect(spec.ggml).toEqual({ type: TYPES[fmt], blockSize: 256, typeSize: BYTES[fmt] });
        expect(spec.importance).toBe(true);
        expect(k.constant(`${fmt.toUpperCase()}_BLOCK`)).toBe(256);
        expect(k.constant(`${fmt.toUpperCase()}_BYTES`)).toBe(BYTES[fmt]);
      }
    }
  });
  it('rejects a row length that is not a multiple of 256', async () => {
    for (const fmt of FORMATS) {
      await expect(quantize(new Float32Array(512), { format: fmt, rowLength: 128 })).rejects.toThrow(/multiple of/);
    }
  });
});

for (const fmt of FORMATS) {
  const bytes = BYTES[fmt];
  const rowBytes = (ROW / 256) * bytes;
  describe(`${fmt}`, () => {
    for (const im of [false, true]) {
      const tag = im ? 'imatrix' : 'no imatrix';
      const imp = im ? imatrix : undefined;
      const want = kquantRefs[fmt](input, ROW, imp);

      for (const backend of BACKENDS) {
        it(`${backend}, ${tag}: the 11 vector rows equal the reference byte for byte`, async () => {
          const qt = await quantize(input, { format: fmt, rowLength: ROW, backend, importance: imp });
          expect(qt.data.length).toBe(11 * rowBytes);
          expectRowsEqual(qt.data, want, rowBytes, `${fmt} ${backend} ${tag}`);
        });
      }

      it(`${tag}: one row per kernel call (reused output memory) gives the same bytes`, async () => {
        for (const backend of BACKENDS) {
          const qt = await quantize(input, { format: fmt, rowLength: ROW, backend, importance: imp, chunkBytes: ROW * 4 });
          expectRowsEqual(qt.data, want, rowBytes, `${fmt} ${backend} ${tag} row by row`);
        }
      });

      it(`${tag}: row 4 (zeros) is all zero bytes`, () => {
        expect(want.subarray(4 * rowBytes, 5 * rowBytes).every((v) => v === 0)).toBe(true);
      });

      it(`${tag}: row 7 (fp32 denormals) gives the spec's encoding`, () => {
        const row = want.subarray(7 * rowBytes, 8 * rowBytes);
        const nanDmin = im && (fmt === 'q2_k' || fmt === 'q4_k' || fmt === 'q5_k');
        for (let b = 0; b < ROW / 256; b++) {
          const blk = row.subarray(b * bytes, (b + 1) * bytes);
          const dmOff = dOffsets[fmt][1];
          for (let i = 0; i < bytes; i++) {
            const isDminHi = nanDmin && dmOff !== undefined && i === dmOff + 1;
            const isDminLo = nanDmin && dmOff !== undefined && i === dmOff;
            expect(blk[i], `block ${b} byte ${i}`).toBe(isDminHi ? 0xfe : isDminLo ? 0x00 : 0);
          }
        }
      });

      it(`${tag}: SIMD and scalar builds agree on random rows (F32, F16, BF16 input, 1 and 5 super-blocks)`, async () => {
        for (const rowLen of [256, 1280]) {
          const x = randomRows(16, rowLen, 7 + rowLen);
          const w = im ? logNormalImatrix(rowLen, 99, 0.2) : undefined;
          const ref = kquantRefs[fmt](x, rowLen, w);
          for (const backend of BACKENDS) {
            const qt = await quantize(x, { format: fmt, rowLength: rowLen, backend, importance: w });
            expectRowsEqual(qt.data, ref, (rowLen / 256) * bytes, `${fmt} ${backend} f32 rowLen ${rowLen}`);
          }
          for (const dtype of ['f16', 'bf16'] as const) {
            const h = new Uint16Array(x.length);
            const widened = new Float32Array(x.length);
            for (let i = 0; i < x.length; i++) {
              // keep f16 finite (the huge-exponent rows would overflow it)
              const v = dtype === 'f16' ? Math.max(-60000, Math.min(60000, x[i])) : x[i];
              h[i] = dtype === 'f16' ? f32ToF16(v) : f32ToBf16(v);
              widened[i] = dtype === 'f16' ? f16ToF32(h[i]) : bf16ToF32(h[i]);
            }
            const refH = kquantRefs[fmt](widened, rowLen, w);
            for (const backend of BACKENDS) {
              const qt = await quantize(h, { format: fmt, rowLength: rowLen, dtype, backend, importance: w });
              expectRowsEqual(qt.data, refH, (rowLen / 256) * bytes, `${fmt} ${backend} ${dtype} rowLen ${rowLen}`);
            }
          }
        }
      });
    }

    it('the importance matrix changes the bytes (importance: true)', async () => {
      const a = await quantize(input.subarray(0, ROW), { format: fmt, rowLength: ROW });
      const b = await quantize(input.subarray(0, ROW), { format: fmt, rowLength: ROW, importance: imatrix });
      expect(firstDiff(a.data, b.data)).toBeGreaterThanOrEqual(0);
    });

    it('a zeroed 256-column imatrix range gives the §16.2 super-block', async () => {
      const w = Float32Array.from(imatrix);
      w.fill(0, 512, 768); // super-block 2 of every row
      const want = kquantRefs[fmt](input, ROW, w);
      for (const backend of BACKENDS) {
        const qt = await quantize(input, { format: fmt, rowLength: ROW, backend, importance: w });
        expectRowsEqual(qt.data, want, rowBytes, `${fmt} ${backend} zeroed imatrix`);
      }
      for (const r of [0, 1, 2, 3, 5, 6, 10]) {
        const blk = want.subarray(r * rowBytes + 2 * bytes, r * rowBytes + 3 * bytes);
        const [dOff, mOff] = dOffsets[fmt];
        if (fmt === 'q2_k' || fmt === 'q4_k' || fmt === 'q5_k') {
          expect(u16(blk, dOff), `row ${r} d`).toBe(0xfe00);
          // row 2 is all positive: every the_min is -0.0, so QP sees max == 0 and returns 0
          expect(u16(blk, mOff!), `row ${r} dmin`).toBe(r === 2 ? 0 : 0xfe00);
          // final-pass codes are nearest_int(NaN) = 0
          const codes = fmt === 'q2_k' ? blk.subarray(16, 80) : fmt === 'q4_k' ? blk.subarray(16, 144) : blk.subarray(16, 176);
          expect(codes.every((v) => v === 0), `row ${r} codes`).toBe(true);
        } else if (fmt === 'q3_k') {
          expect(u16(blk, dOff), `row ${r} d`).toBe(0);
          expect(blk.subarray(96, 108).every((v) => v === 0), `row ${r} scales`).toBe(true);
        } else {
          expect(blk.every((v) => v === 0), `row ${r} block`).toBe(true);
        }
      }
    });

    it('dequantization follows §15 bit for bit on both builds (vector rows and random rows, with NaN scales)', async () => {
      const w = Float32Array.from(imatrix);
      w.fill(0, 256, 512);
      const cases: [Float32Array, number, Float32Array | undefined][] = [
        [input, ROW, undefined], [input, ROW, w], [randomRows(8, 512, 3), 512, undefined],
      ];
      for (const [x, rowLen, imp] of cases) {
        const qt = await quantize(x, { format: fmt, rowLength: rowLen, importance: imp });
        const want = dequantRef(fmt, qt.data, x.length);
        for (const backend of BACKENDS) {
          const got = await dequantize(qt, { backend });
          let bad = -1;
          for (let i = 0; i < got.length && bad < 0; i++) {
            if (!Object.is(got[i], want[i]) && !(Number.isNaN(got[i]) && Number.isNaN(want[i]))) bad = i;
          }
          expect(bad, `${fmt} ${backend} first differing value`).toBe(-1);
        }
      }
    });

    it('dequantization of hand-built blocks matches the layout of the spec', async () => {
      // One super-block with every code field set from a counter: the reference dequantizer is
      // written element by element from the layout text, the wasm one block-wise.
      const blk = new Uint8Array(bytes);
      for (let i = 0; i < bytes; i++) blk[i] = (i * 37 + 11) & 0xff;
      const [dOff, mOff] = dOffsets[fmt];
      blk[dOff] = 0x00; blk[dOff + 1] = 0x3c; // d = 1.0
      if (mOff !== undefined) { blk[mOff] = 0x00; blk[mOff + 1] = 0x38; } // dmin = 0.5
      const qt = await quantize(new Float32Array(256), { format: fmt, rowLength: 256 });
      qt.data.set(blk);
      const want = dequantRef(fmt, blk, 256);
      for (const backend of BACKENDS) {
        const got = await dequantize(qt, { backend });
        expect(Array.from(got)).toEqual(Array.from(want));
      }
      // spot checks straight from the §15 formulas
      if (fmt === 'q6_k') {
        const L = (blk[0] & 15) | ((blk[128] & 3) << 4);
        expect(want[0]).toBe(((blk[192] << 24) >> 24) * (L - 32));
      }
      if (fmt === 'q2_k') {
        expect(want[0]).toBe((blk[0] & 15) * (blk[16] & 3) - 0.5 * (blk[0] >> 4));
      }
      if (fmt === 'q4_k') {
        expect(want[0]).toBe((blk[4] & 63) * (blk[16] & 15) - 0.5 * (blk[8] & 63));
      }
    });
  });
}
