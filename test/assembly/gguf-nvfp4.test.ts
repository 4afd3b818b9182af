// GGUF NVFP4 (ggml type 40, format nvfp4_gguf): both wasm builds against a plain-TS transcription
// of ggml's quantize_row_nvfp4_ref (fp32_to_ue4m3 of amax/6 per 16 values, then the literal
// 16-entry search in fp32), and the decode (doubled E2M1 times the halved UE4M3 scale).
import { describe, expect, it } from 'vitest';
import { dequantize, quantize } from '../../src/index.js';
import { edgeRows, gaussian } from '../helpers/data.js';
import { KV, bestFp4, expectReferenceBytes } from '../helpers/fp4-ref.js';

const f = Math.fround;
const BACKENDS = ['wasm-simd', 'wasm'] as const;

/** ggml_ue4m3_to_fp32: half the UE4M3 value; bit 7 ignored; 0 and 0x7F decode to 0. */
function ue4m3Half(b: number): number {
  if (b === 0 || b === 0x7f) return 0;
  const e = (b >> 3) & 15, m = b & 7;
  return (e === 0 ? m * 2 ** -9 : (1 + m / 8) * 2 ** (e - 7)) * 0.5;
}

/** ggml_fp32_to_ue4m3, transcribed with fp32 arithmetic. */
function toUe4m3(v: number): number {
  if (!(v > 0)) return 0;
  const x = f(Math.min(v, 448));
  const bits = new Uint32Array(new Float32Array([x]).buffer)[0];
  let e = ((bits >>> 23) & 0xff) - 127 + 7;
  if (e <= 0) {
    const m = Math.trunc(f(f(x * 512) + 0.5));
    return m < 1 ? 0 : Math.min(m, 7);
  }
  if (e >= 15) return 0x7e;
  let m = ((bits >>> 20) & 7) + ((bits >>> 19) & 1);
  if (m > 7) {
    m = 0;
    if (++e >= 15) return 0x7e;
  }
  return (e << 3) | m;
}

function refQuantize(x: Float32Array): Uint8Array {
  const nb = x.length / 64;
  const out = new Uint8Array(nb * 36);
  for (let b = 0; b < nb; b++) {
    for (let s = 0; s < 4; s++) {
      const v = x.subarray(b * 64 + s * 16, b * 64 + s * 16 + 16);
      let amax = 0;
      for (const a of v) if (amax < Math.abs(a)) amax = Math.abs(a);
      const ue = toUe4m3(f(amax / 6));
      out[b * 36 + s] = ue;
      const d = ue4m3Half(ue);
      for (let j = 0; j < 8; j++) out[b * 36 + 4 + s * 8 + j] = bestFp4(v[j], d) | (bestFp4(v[j + 8], d) << 4);
    }
  }
  return out;
}

function refDequantize(q: Uint8Array): Float32Array {
  const nb = q.length / 36;
  const y = new Float32Array(nb * 64);
  for (let b = 0; b < nb; b++) {
    for (let s = 0; s < 4; s++) {
      const d = ue4m3Half(q[b * 36 + s]);
      for (let j = 0; j < 8; j++) {
        const c = q[b * 36 + 4 + s * 8 + j];
        y[b * 64 + s * 16 + j] = KV[c & 15] * d;
        y[b * 64 + s * 16 + j + 8] = KV[c >> 4] * d;
      }
    }
  }
  return y;
}

const block = (fill: (j: number) => number) => Float32Array.from({ length: 64 }, (_, j) => fill(j));

/** Rows that reach every branch of the scale encoder and of the code search. */
function awkwardRows(): { name: string; values: Float32Array }[] {
  const rows: { name: string; values: Float32Array }[] = [];
  // Every level and midpoint (units of the E2M1 grid) of sub-blocks whose scale is exactly 1/4:
  // amax 1.5 -> amax/6 = 0.25 = 0x30.
  const pts = [0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 5.999];
  rows.push({ name: 'grid and midpoints', values: block((j) => (j % 2 ? -1 : 1) * (j % 16 === 14 ? 6 : pts[j % 16]) / 4) });
  // amax/6 across the subnormal scales, the 7.5/512 .. 8/512 clamp, the first normal and the
  // mantissa's half-up rounding (bit 19 set, lower bits zero), and saturation.
  const amaxes = [1e-30, 2 ** -12, 6 * 2 ** -11, 6 * 0.49 * 2 ** -9, 6 * 0.5 * 2 ** -9, 6 * 3.5 * 2 ** -9, 6 * 7.4 * 2 ** -9, 6 * 7.5 * 2 ** -9,
    6 * 7.9 * 2 ** -9, 6 * 2 ** -6, 6 * 1.0625, 6 * 1.0625 * 2 ** 5, 6 * 1.9375, 6 * 240, 6 * 250, 6 * 448, 6 * 449, 1e6, 3e38];
  for (const a of amaxes) {
    rows.push({ name: `amax ${a}`, values: block((j) => (j % 16 === 3 ? -a : a * (((j * 7) % 13) - 6) / 6.5)) });
  }
  rows.push({ name: 'zeros and signed zeros', values: block((j) => (j % 2 ? -0 : 0)) });
  rows.push({ name: 'one value per sub-block', values: block((j) => (j % 16 === 5 ? (j - 30) / 7 : 0)) });
  return rows;
}

describe('GGUF NVFP4 (nvfp4_gguf)', () => {
  it('scale bytes: hand-computed cases of the encoder and the decode', async () => {
    const cases: [number, number][] = [[1, 0x38], [448, 0x7e], [1e9, 0x7e], [2 ** -6, 0x08], [2 ** -10, 0x01], [0.45 * 2 ** -9, 0],
      [7.6 / 512, 7], [1.0625, 0x38 | 1], [1.03125, 0x38], [1.96875, 0x40], [240, 0x77], [249, 0x7e], [0, 0]];
    for (const [v, b] of cases) {
      expect(toUe4m3(v), `${v}`).toBe(b);
      const x = new Float32Array(64);
      x[0] = f(v * 6);
      for (const backend of BACKENDS) expect((await quantize(x, { format: 'nvfp4_gguf', rowLength: 64, backend })).data[0], `${v} ${backend}`).toBe(toUe4m3(f(x[0] / 6)));
    }
    expect([0x38, 0x7e, 3, 0x7f, 0xff, 0x80, 0xb8].map(ue4m3Half)).toEqual([0.5, 224, 3 * 2 ** -10, 0, 240, 0, 0.5]);
  });

  it('equals the literal search on random, edge-case and awkward rows, both builds', async () => {
    const rows = [
      ...edgeRows(512).map((r) => ({ name: r.name, values: r.values })),
      { name: 'gaussian', values: gaussian(64 * 256, 3, 0.02) },
      { name: 'gaussian, large', values: gaussian(64 * 64, 5, 300) },
      ...awkwardRows(),
    ];
    await expectReferenceBytes('nvfp4_gguf', rows, refQuantize, refDequantize);
  });

  it('equals the literal search on sub-blocks of random scale whose values sit on or beside grid midpoints', async () => {
    let s = 777;
    const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
    const nb = 3000;
    const x = new Float32Array(nb * 64);
    const mids = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 6, 0, 3, 5.99];
    for (let b = 0; b < nb * 4; b++) {
      // Scales from the subnormal UE4M3 range to saturation, with 1-3 significant bits.
      const scale = 2 ** Math.floor(rnd() * 30 - 18) * [1, 1.25, 1.5, 1.75, 1.125][Math.floor(rnd() * 5)];
      for (let j = 0; j < 16; j++) {
        const m = mids[Math.floor(rnd() * mids.length)] * (rnd() < 0.5 ? -1 : 1);
        const nudge = [0, 0, 1e-7, -1e-7, rnd() - 0.5][Math.floor(rnd() * 5)];
        x[b * 16 + j] = f((m + nudge) * scale);
      }
    }
    const want = refQuantize(x);
    for (const backend of BACKENDS) {
      const qt = await quantize(x, { format: 'nvfp4_gguf', rowLength: 64 * 8, backend });
      expect(Buffer.from(qt.data).equals(Buffer.from(want)), backend).toBe(true);
    }
  });

  it('decodes every scale byte and code as ggml does', async () => {
    const bytes = new Uint8Array(256 * 36);
    for (let e = 0; e < 256; e++) {
      for (let s = 0; s < 4; s++) bytes[e * 36 + s] = (e + 61 * s) & 0xff;
      for (let j = 0; j < 32; j++) bytes[e * 36 + 4 + j] = (j * 9 + e) & 0xff;
    }
    const want = refDequantize(bytes);
    const qt = await quantize(new Float32Array(256 * 64), { format: 'nvfp4_gguf', rowLength: 64 });
    qt.data.set(bytes);
    for (const backend of BACKENDS) {
      const got = await dequantize(qt, { backend });
      expect(Buffer.from(got.buffer).equals(Buffer.from(want.buffer)), backend).toBe(true);
    }
    // The layout: sub-block 1's element 9 is the high nibble of its byte 1.
    const one = new Uint8Array(36);
    one[1] = 0x38;
    one[4 + 8 + 1] = 0x70;
    const qv = await quantize(new Float32Array(64), { format: 'nvfp4_gguf', rowLength: 64 });
    qv.data.set(one);
    const v = await dequantize(qv);
    expect([...v].findIndex((a) => a !== 0)).toBe(16 + 9);
    expect(v[16 + 9]).toBe(6);
  });
});
