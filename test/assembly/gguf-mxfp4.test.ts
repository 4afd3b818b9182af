// GGUF MXFP4 (ggml type 39, format mxfp4_gguf): both wasm builds against a plain-TS transcription
// of llama.cpp's quantize_row_mxfp4_ref (the literal 16-entry search in fp32), against two blocks
// whose bytes llama.cpp's reference wrote, and its dequantization (KV * 2^(e-128)).
import { describe, expect, it } from 'vitest';
import { dequantize, quantize } from '../../src/index.js';
import { edgeRows, gaussian } from '../helpers/data.js';
import { KV, bestFp4, expectReferenceBytes } from '../helpers/fp4-ref.js';

const f = Math.fround;
const BACKENDS = ['wasm-simd', 'wasm'] as const;

/** ggml_e8m0_to_fp32_half. */
function e8m0Half(e: number): number {
  const bits = e < 2 ? 0x00200000 << e : (e - 1) << 23;
  return new Float32Array(new Uint32Array([bits >>> 0]).buffer)[0];
}

/** quantize_row_mxfp4_ref: floorf(log2f(amax)) with log2f taken as the correctly rounded fp32 log2. */
function refQuantize(x: Float32Array): Uint8Array {
  const nb = x.length / 32;
  const out = new Uint8Array(nb * 17);
  for (let b = 0; b < nb; b++) {
    const v = x.subarray(b * 32, b * 32 + 32);
    let amax = 0;
    for (const a of v) if (amax < Math.abs(a)) amax = Math.abs(a);
    const e = amax > 0 ? (Math.floor(f(Math.log2(amax))) - 2 + 127) & 0xff : 0;
    const d = e8m0Half(e);
    out[b * 17] = e;
    for (let j = 0; j < 16; j++) out[b * 17 + 1 + j] = bestFp4(v[j], d) | (bestFp4(v[j + 16], d) << 4);
  }
  return out;
}

function refDequantize(q: Uint8Array): Float32Array {
  const nb = q.length / 17;
  const y = new Float32Array(nb * 32);
  for (let b = 0; b < nb; b++) {
    const d = e8m0Half(q[b * 17]);
    for (let j = 0; j < 16; j++) {
      y[b * 32 + j] = KV[q[b * 17 + 1 + j] & 15] * d;
      y[b * 32 + j + 16] = KV[q[b * 17 + 1 + j] >> 4] * d;
    }
  }
  return y;
}

// Two blocks and the bytes llama.cpp's quantize_row_mxfp4_ref writes for them (published as
// golden data of another project's MXFP4 tests; the inputs are exact fp32 values).
const GOLDEN: { x: number[]; bytes: string }[] = [
  {
    x: [-0.835388184, -0.960388184, -1.0680542, -0.445983887, -1.15429688, -1.93328857, -1.16522217, -0.382568359,
      -0.77532959, -0.570251465, -1.63549805, -0.967651367, -0.876098633, -1.50268555, -0.160827637, -1.77832031,
      -0.683288574, -1.34307861, -1.62945557, -0.65802002, -0.162536621, -1.73706055, -1.17883301, -0.301757812,
      -1.18078613, -1.93463135, -0.867736816, -0.392028809, -1.70367432, -0.194030762, -1.03997803, -1.09802246],
    bytes: '7d' + 'ddfefedc9effeeabedfcdfbefeafe9ef',
  },
  {
    x: [0.194091797, -0.401489258, -0.336669922, 0.383911133, 0.985534668, -0.794616699, 0.955200195, 0.940307617,
      -0.512634277, -0.33392334, -0.315612793, 0.548034668, 0.80847168, 0.579223633, -0.954284668, -0.98034668,
      -0.134216309, 0.443725586, 0.168823242, -0.544677734, -0.984619141, 0.12713623, -0.690002441, 0.810180664,
      0.102355957, -0.107421875, 0.931091309, 0.11529541, 0.615844727, -0.0777587891, -0.147155762, -0.212036133],
    bytes: '7c' + 'a36d3de5f72ff7772ead7d266796afbf',
  },
];

/** Rows that reach every branch: midpoint ties, amax at and just below powers of two, tiny and huge blocks. */
function awkwardRows(): { name: string; values: Float32Array }[] {
  const rows: { name: string; values: Float32Array }[] = [];
  const block = (fill: (j: number) => number) => Float32Array.from({ length: 32 }, (_, j) => fill(j));
  // Every grid point and midpoint of a block whose scale is 2^-3 (amax 1.5 -> e = 125), both signs.
  const mids = [0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8, 10, 12, 11.999];
  rows.push({ name: 'grid and midpoints', values: block((j) => (j % 2 ? -1 : 1) * mids[j % 16] / 8) });
  const below = (p: number, ulps: number) => {
    const u = new Uint32Array(new Float32Array([2 ** p]).buffer);
    u[0] -= ulps;
    return new Float32Array(u.buffer)[0];
  };
  for (const p of [-20, -8, -3, 0, 3, 8, 20, 100]) {
    for (const ulps of [0, 1, 3, 20, 60, 300]) rows.push({ name: `amax 2^${p} - ${ulps} ulp`, values: block((j) => (j === 5 ? -below(p, ulps) : below(p, ulps) * ((j * 7) % 11) / 11)) });
  }
  for (const p of [-149, -140, -127, -126, -125, -124, -123, -122]) rows.push({ name: `tiny 2^${p}`, values: block((j) => (j % 3 - 1) * 2 ** p * (1 + (j % 4) / 8)) });
  rows.push({ name: 'max finite', values: block((j) => (j % 2 ? -3.4028234663852886e38 : 1e38) * ((j % 5) + 1) / 5) });
  rows.push({ name: 'zeros and signed zeros', values: block((j) => (j % 2 ? -0 : 0)) });
  return rows;
}

describe('GGUF MXFP4 (mxfp4_gguf)', () => {
  it("llama.cpp's bytes for two blocks, on both builds", async () => {
    for (const g of GOLDEN) {
      const x = Float32Array.from(g.x);
      expect(Buffer.from(refQuantize(x)).toString('hex')).toBe(g.bytes);
      for (const backend of BACKENDS) {
        const qt = await quantize(x, { format: 'mxfp4_gguf', rowLength: 32, backend });
        expect(Buffer.from(qt.data).toString('hex'), backend).toBe(g.bytes);
      }
    }
  });

  it('equals the literal search on random, edge-case and awkward rows, both builds', async () => {
    const rows = [
      ...edgeRows(512).map((r) => ({ name: r.name, values: r.values })),
      { name: 'gaussian', values: gaussian(32 * 256, 3, 0.02) },
      ...awkwardRows(),
    ];
    await expectReferenceBytes('mxfp4_gguf', rows, refQuantize, refDequantize);
  });

  it('equals the literal search on blocks of random scale whose values sit on or beside grid midpoints', async () => {
    let s = 12345;
    const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
    const nb = 4000;
    const x = new Float32Array(nb * 32);
    const mids = [0.5, 1.5, 2.5, 3.5, 5, 7, 10, 12, 0, 6, 15.99];
    for (let b = 0; b < nb; b++) {
      const scale = 2 ** Math.floor(rnd() * 240 - 120);
      for (let j = 0; j < 32; j++) {
        const m = mids[Math.floor(rnd() * mids.length)] * (rnd() < 0.5 ? -1 : 1);
        const nudge = [0, 0, 1, -1, 1e-7, -1e-7, rnd() - 0.5][Math.floor(rnd() * 7)];
        x[b * 32 + j] = f((m + nudge) * scale / 8);
      }
    }
    const want = refQuantize(x);
    for (const backend of BACKENDS) {
      const qt = await quantize(x, { format: 'mxfp4_gguf', rowLength: 32 * 16, backend });
      expect(Buffer.from(qt.data).equals(Buffer.from(want)), backend).toBe(true);
    }
  });

  it('an amax a few ulps below a power of two takes the next exponent, as log2f rounds', async () => {
    const x = new Float32Array(32);
    const u = new Uint32Array(new Float32Array([8]).buffer);
    u[0] -= 1; // 8 - 2^-21: log2 = 3 - 4e-7, which rounds to 3 in fp32
    x[0] = new Float32Array(u.buffer)[0];
    const qt = await quantize(x, { format: 'mxfp4_gguf', rowLength: 32 });
    expect(qt.data[0]).toBe(3 - 2 + 127);
    x[0] = 7.5; // well below: floor(log2) = 2
    expect((await quantize(x, { format: 'mxfp4_gguf', rowLength: 32 })).data[0]).toBe(2 - 2 + 127);
  });

  it('decodes every exponent as ggml does (subnormal scales at 0 and 1, 2^127 at 255)', async () => {
    const bytes = new Uint8Array(256 * 17);
    for (let e = 0; e < 256; e++) {
      bytes[e * 17] = e;
      // Both nibbles take all sixteen codes in every block.
      for (let j = 0; j < 16; j++) bytes[e * 17 + 1 + j] = ((j + e) & 15) | (((7 * j + e) & 15) << 4);
    }
    const want = refDequantize(bytes);
    const qt = await quantize(new Float32Array(256 * 32), { format: 'mxfp4_gguf', rowLength: 32 });
    qt.data.set(bytes);
    for (const backend of BACKENDS) {
      const got = await dequantize(qt, { backend });
      expect(Buffer.from(got.buffer).equals(Buffer.from(want.buffer)), backend).toBe(true);
    }
  });
});
