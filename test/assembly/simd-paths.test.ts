// The SIMD build's data-dependent shortcuts against the scalar build, on many blocks of weight-like
// data: the IQ4 search's vector pick (a guessed end of the winner chain, proven or re-run as the
// loop) and the Q3_K coordinate descent (sub-blocks that accept no change are finished after one
// vector pass; the others run rounds that commit the first accepted change) with its vector scale
// steps (largest scale, NaN passed over; codes kept where a scale quantizes to 0). All must give the
// scalar build's bytes; a wrong guess or a missed commit would show as a byte difference.
import { describe, expect, it } from 'vitest';
import { quantize } from '../../src/index.js';

const ROW = 4096;

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s >>> 8) / 16777216;
  };
}

/** Rows of weight-like values: bell-shaped, heavy-tailed, few-valued (ties between passes), overflowing. */
function rows(): Float32Array {
  const u = lcg(2024);
  const kinds: (() => number)[] = [
    () => 0.02 * (u() + u() - 1),
    () => (u() + u() + u() + u() - 2) * 0.05,
    () => (u() - 0.5) / Math.max(0.02, u()),
    () => Math.round((u() + u() - 1) * 6),
    () => [-1, -0.5, 0.5, 1][Math.floor(u() * 4)] * (u() < 0.5 ? 1 : 1.5),
    () => (u() < 0.7 ? 0 : u() - 0.5),
    // Every 7th sub-block of 16 so large that x*x overflows: its make_q3_quants scale is NaN,
    // which Q3_K's search for the largest scale must pass over as the scalar scan does.
    (() => {
      let i = 0;
      return () => 0.02 * (u() + u() - 1) * ((i++ >> 4) % 7 === 3 ? 1e21 : 1);
    })(),
  ];
  const perKind = 4;
  const x = new Float32Array(kinds.length * perKind * ROW);
  kinds.forEach((gen, k) => {
    for (let i = 0; i < perKind * ROW; i++) x[k * perKind * ROW + i] = gen();
  });
  return x;
}

function firstDiff(a: Uint8Array, b: Uint8Array): number {
  if (a.length !== b.length) return -2;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

describe('SIMD shortcuts == scalar build on weight-like rows', () => {
  const x = rows();
  const u = lcg(77);
  const importance = new Float32Array(ROW).map(() => (u() < 0.1 ? 0 : 0.1 + u() * u() * 4));
  for (const format of ['iq4_nl', 'iq4_xs', 'q3_k']) {
    for (const [name, imp] of [['none', undefined], ['imatrix', importance]] as const) {
      it(`${format}, importance ${name}`, async () => {
        const a = (await quantize(x, { format, rowLength: ROW, backend: 'wasm-simd', importance: imp })).data;
        const b = (await quantize(x, { format, rowLength: ROW, backend: 'wasm', importance: imp })).data;
        expect(firstDiff(a, b)).toBe(-1);
      });
    }
  }
});

/**
 * Blocks with elements on a trial's switching point: x_j a few ulps around m / id_t for a
 * midpoint m of the IQ4 grid and a trial t, so that some trial's value id_t*x_j lies exactly on,
 * just below or just above a midpoint (best_index takes the upper entry on it). The SIMD search
 * decides each trial's code from one comparison with the midpoint between two candidates; a
 * comparison off by one ulp there changes a pass's sums, and often the bytes (the weight-like
 * rows above rarely land on a midpoint).
 */
function boundaryRows(): Float32Array {
  const u = lcg(4242);
  const mids = [-115.5, -93.5, -74, -57, -42, -28.5, -16, -4.5, 7, 19, 31.5, 45.5, 61, 79, 101];
  const bits = new Int32Array(1);
  const f = new Float32Array(bits.buffer);
  const nudge = (v: number, k: number) => {
    f[0] = v;
    bits[0] += v >= 0 ? k : -k;
    return f[0];
  };
  const x = new Float32Array(16 * ROW);
  for (let b = 0; b < x.length / 32; b++) {
    const scale = [1, 0.003, 37.5, 1e-6][b % 4] * (1 + u());
    const max = Math.fround((b & 4 ? -1 : 1) * scale);
    for (let j = 0; j < 32; j++) x[b * 32 + j] = Math.fround((u() - 0.5) * 0.6 * scale);
    x[b * 32 + Math.floor(u() * 32)] = max;
    for (let n = 0; n < 12; n++) {
      const j = b * 32 + Math.floor(u() * 32);
      if (Math.abs(x[j]) === Math.abs(max)) continue;
      const id = Math.fround((Math.floor(u() * 15) - 7 - 127) / max);
      const v = Math.fround(mids[Math.floor(u() * mids.length)] / id);
      if (Math.abs(v) < Math.abs(max)) x[j] = nudge(v, Math.floor(u() * 5) - 2);
    }
  }
  return x;
}

describe('IQ4 SIMD search == scalar build on blocks with elements at switching points', () => {
  const x = boundaryRows();
  const u = lcg(91);
  const importance = new Float32Array(ROW).map(() => (u() < 0.1 ? 0 : 0.1 + u() * 4));
  for (const format of ['iq4_nl', 'iq4_xs']) {
    for (const [name, imp] of [['none', undefined], ['imatrix', importance]] as const) {
      it(`${format}, importance ${name}`, async () => {
        const a = (await quantize(x, { format, rowLength: ROW, backend: 'wasm-simd', importance: imp })).data;
        const b = (await quantize(x, { format, rowLength: ROW, backend: 'wasm', importance: imp })).data;
        expect(firstDiff(a, b)).toBe(-1);
      });
    }
  }
});
