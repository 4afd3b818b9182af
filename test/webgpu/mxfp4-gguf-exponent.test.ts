// The mxfp4_gguf shader's exponent table (src/webgpu/shaders/mxfp4_gguf.ts) against the wasm
// kernel's floor(log2f(amax)) on every amax where log2f can round up to the next integer: the top
// 512 mantissas of every exponent field and the top 512 values under each subnormal leading bit.
// The GPU parity test then checks the WGSL on the boundaries of this table.
import { describe, expect, it } from 'vitest';
import { quantize } from '../../src/quantize.js';
import { mxfp4GgufFloorLog2, mxfp4GgufLog2Table } from '../../src/webgpu/shaders/mxfp4_gguf.js';

/** Bits of every amax tried. */
function candidates(): number[] {
  const out: number[] = [];
  for (let ef = 1; ef <= 254; ef++) for (let m = 0x7ffe00; m <= 0x7fffff; m++) out.push((ef << 23) | m);
  for (let p = 0; p <= 22; p++) for (let a = Math.max(2 ** p, 2 ** (p + 1) - 512); a < 2 ** (p + 1); a++) out.push(a);
  return out;
}

describe('mxfp4_gguf exponent table', () => {
  it('gives the wasm exponent byte for every amax near a power of two, normal and subnormal', async () => {
    const bits = candidates();
    // One block of 32 per candidate: the amax first, the rest smaller.
    const u = new Uint32Array(bits.length * 32);
    bits.forEach((b, i) => { u[i * 32] = b; u[i * 32 + 1] = (b >>> 1) | 0x80000000; });
    const x = new Float32Array(u.buffer);
    for (const backend of ['wasm-simd', 'wasm'] as const) {
      const q = await quantize(x, { format: 'mxfp4_gguf', rowLength: 32, backend });
      let bad = 0;
      let first = '';
      bits.forEach((b, i) => {
        const want = q.data[i * 17];
        const got = (mxfp4GgufFloorLog2(b) + 125) & 0xff;
        if (got !== want && bad++ === 0) first = `amax bits 0x${b.toString(16)}: wasm ${want}, table ${got}`;
      });
      expect(first, backend).toBe('');
    }
  });

  it('rounds up only at the very top of a binade, and at least once for large |exponents|', () => {
    const t = mxfp4GgufLog2Table();
    for (let ef = 1; ef <= 254; ef++) expect(t.normal[ef]).toBeGreaterThanOrEqual(0x7fff00);
    // log2 of 2^127 * (2 - 2^-23) is 128 - 8.6e-8, nearer 128 than the f32 spacing there allows.
    expect(t.normal[254]).toBeLessThan(0x800000);
    expect(mxfp4GgufFloorLog2(0x7f7fffff)).toBe(128);
    // Near 1 the f32 spacing is fine enough: never.
    expect(t.normal[126]).toBe(0x800000);
    expect(mxfp4GgufFloorLog2(0x3f7fffff)).toBe(-1);
    expect(mxfp4GgufFloorLog2(0x00000001)).toBe(-149);
    expect(mxfp4GgufFloorLog2(0x007fffff)).toBe(-126);
  });
});
