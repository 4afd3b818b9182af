// The `mlx` format (MLX's affine quantizer) on both wasm builds against the plain-TypeScript
// reference written from MLX's rules (test/reference/mlx-ref.ts), byte for byte, on weight-like
// rows and on the groups where its rules matter (ties, all-negative and constant groups, values
// under its 1e-7 scale floor), for every width, group size and scale dtype.
import { describe, expect, it } from 'vitest';
import { quantize, dequantize, ErrorCodes, getFormat } from '../../src/index.js';
import { mlxDequantizeRef, mlxGroupParams, mlxQuantizeRef, type MlxOpts } from '../reference/mlx-ref.js';

const BACKENDS = ['wasm-simd', 'wasm'] as const;
const fr = Math.fround;

function gaussian(n: number, seed: number, sigma: number): Float32Array {
  let a = seed >>> 0;
  const r = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return Float32Array.from({ length: n }, () => sigma * Math.sqrt(-2 * Math.log(Math.max(r(), 1e-12))) * Math.cos(2 * Math.PI * r()));
}

/** 128 values per row: groups chosen for MLX's rules, whatever the group size divides them into. */
function awkwardRows(): Float32Array {
  const rows: number[][] = [
    Array(128).fill(0), // all zero: scale -1e-7, bias 0
    Array(128).fill(-3), // constant negative: max starts at 0, so the range is [-3, 0]
    Array(128).fill(5), // constant positive: range under the 1e-7 floor
    Array.from({ length: 128 }, (_v, i) => -1 - (i % 7) * 0.25), // all negative
    Array.from({ length: 128 }, (_v, i) => 2 + (i % 5) * 0.125), // all positive
    Array.from({ length: 128 }, (_v, i) => (i % 16) + 0.5 - (i % 2 ? 15.5 : 0)), // half-integers: ties
    Array.from({ length: 128 }, (_v, i) => [15, 0, 2.5, 0.5, 7.5, 12.5, 1.5, 3][i % 8]), // ties on a scale of -1
    Array.from({ length: 128 }, (_v, i) => (i % 3 - 1) * 1e-9), // tiny: under the scale floor
    Array.from({ length: 128 }, (_v, i) => (i === 5 ? -40 : (i % 9) * 0.01)), // negative outlier
    Array.from({ length: 128 }, (_v, i) => (i === 77 ? 60000 : -(i % 4))), // large positive outlier
  ];
  return Float32Array.from(rows.flat());
}

function firstDiff(a: Uint8Array, b: Uint8Array): number {
  if (a.length !== b.length) return -2;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

describe('mlx bytes equal the reference on both builds', () => {
  const data: [string, Float32Array, number][] = [
    ['weights', gaussian(8 * 256, 3, 0.02), 256],
    ['awkward groups', awkwardRows(), 128],
  ];
  for (const bits of [2, 3, 4, 5, 6, 8]) {
    for (const groupSize of [32, 64, 128]) {
      for (const scaleDtype of ['bf16', 'f16', 'f32'] as const) {
        if (scaleDtype !== 'bf16' && groupSize !== 64) continue;
        const o: MlxOpts = { bits, groupSize, scaleDtype };
        it(`bits ${bits} g${groupSize} ${scaleDtype}`, async () => {
          for (const [name, x, rowLength] of data) {
            const want = mlxQuantizeRef(x, rowLength, o);
            for (const backend of BACKENDS) {
              const qt = await quantize(x, { format: 'mlx', rowLength, backend, bits, groupSize, scaleDtype });
              expect(firstDiff(qt.data, want), `${name} ${backend}: first differing byte`).toBe(-1);
              const y = await dequantize(qt, { backend });
              expect([...y], `${name} ${backend} dequantized`).toEqual([...mlxDequantizeRef(want, x.length, o)]);
            }
          }
        });
      }
    }
  }
});

describe('mlx rules', () => {
  it('rounds ties away from zero, not to even', () => {
    // range [0, 15] at 4 bits: scale -1 from the edge 15, so x = 2.5 is code 12.5 -> 13
    const x = new Float32Array(32).fill(0);
    x[0] = 15;
    x[1] = 2.5;
    const { scale, bias } = mlxGroupParams(x, 4);
    expect([scale, bias]).toEqual([-1, 15]);
    const bytes = mlxQuantizeRef(x, 32, { bits: 4, groupSize: 32, scaleDtype: 'f32' });
    expect(bytes[0] >> 4).toBe(13);
  });

  it('keeps the larger end exact and starts the maximum at zero', async () => {
    const x = Float32Array.from({ length: 64 }, (_v, i) => fr(-0.5 - i / 64));
    const qt = await quantize(x, { format: 'mlx', rowLength: 64, scaleDtype: 'f32' });
    const y = await dequantize(qt);
    // The edge (the minimum) is the bias and decodes exactly; the top of the grid is 0, not -0.5.
    expect(y[63]).toBe(x[63]);
    const v = new DataView(qt.data.buffer, qt.data.byteOffset);
    expect(v.getFloat32(32 + 4, true)).toBe(x[63]);
    expect(fr(v.getFloat32(32, true) * 15 + x[63])).toBeCloseTo(0, 6);
  });

  it('refuses what MLX does not have', async () => {
    const x = new Float32Array(128);
    await expect(quantize(x, { format: 'mlx', rowLength: 128, bits: 7 })).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'bits' } });
    await expect(quantize(x, { format: 'mlx', rowLength: 128, groupSize: 16 })).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'groupSize' } });
    await expect(quantize(x, { format: 'mlx', rowLength: 128, scaleDtype: 'f8' as never })).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'scaleDtype' } });
    await expect(quantize(x, { format: 'affine', rowLength: 128, scaleDtype: 'bf16' })).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'scaleDtype' } });
    await expect(quantize(x, { format: 'mlx', rowLength: 96 })).rejects.toMatchObject({ code: ErrorCodes.ROW_LENGTH });
    expect(getFormat('mlx').scaleDtypes).toEqual(['bf16', 'f16', 'f32']);
  });
});
