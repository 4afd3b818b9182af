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
