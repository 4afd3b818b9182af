// Plain TypeScript Q8_0 and Q4_0 reference quantizers (spec §1, §2), written straight from the
// spec with Math.fround at every step. The tests compare them with the wasm bytes; the benchmark
// uses them as the "no wasm" baseline.
import { f32ToF16 } from '../../src/util/half.js';

const fr = Math.fround;

function roundAway(v: number): number {
  const t = Math.trunc(v);
  return Math.abs(v - t) >= 0.5 ? t + Math.sign(v) : t;
}

function truncX86(v: number): number {
  return Math.abs(v) < 2147483648 ? Math.trunc(v) : 0;
}

export function quantizeQ8_0Ts(x: Float32Array, rowLen: number): Uint8Array {
  const nb = x.length / 32;
  const out = new Uint8Array(nb * 34);
  const dv = new DataView(out.buffer);
  for (let b = 0; b < nb; b++) {
    let amax = 0;
    for (let i = 0; i < 32; i++) amax = Math.max(amax, Math.abs(x[b * 32 + i]));
    const d = fr(amax / 127);
    const id = d !== 0 ? fr(1 / d) : 0;
    if (id === Infinity) continue;
    dv.setUint16(b * 34, f32ToF16(d), true);
    for (let i = 0; i < 32; i++) dv.setInt8(b * 34 + 2 + i, roundAway(fr(x[b * 32 + i] * id)));
  }
  void rowLen;
  return out;
}

export function quantizeQ4_0Ts(x: Float32Array, rowLen: number): Uint8Array {
  const nb = x.length / 32;
  const out = new Uint8Array(nb * 18);
  const dv = new DataView(out.buffer);
  for (let b = 0; b < nb; b++) {
    let amax = 0, max = 0;
    for (let i = 0; i < 32; i++) {
      const v = x[b * 32 + i];
      if (Math.abs(v) > amax) { amax = Math.abs(v); max = v; }
    }
    const d = fr(max / -8);
    const id = d !== 0 ? fr(1 / d) : 0;
    dv.setUint16(b * 18, f32ToF16(d), true);
    for (let j = 0; j < 16; j++) {
      const lo = Math.min(15, truncX86(fr(fr(x[b * 32 + j] * id) + 8.5)));
      const hi = Math.min(15, truncX86(fr(fr(x[b * 32 + j + 16] * id) + 8.5)));
      out[b * 18 + 2 + j] = lo | (hi << 4);
    }
  }
  void rowLen;
  return out;
}
