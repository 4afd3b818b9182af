// The quantizers of the ternary and sub-4-bit IQ types against digests of llama.cpp's own bytes
// (fixtures/llamacpp-quantize.json, recorded from its ggml_quantize_chunk by bench/llamacpp-quantize.ts):
// every case of test/helpers/llamacpp-cases.ts on both wasm builds, row by row.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ErrorCodes, formats, quantize } from '../../src/index.js';
import { llamacppCases, rowsBelow } from '../helpers/llamacpp-cases.js';
import { gaussian, withImportance } from '../helpers/data.js';
import { f32ToF16 } from '../../src/util/half.js';
import { loadKernels } from '../../src/kernels/loader.js';
import { ARGS_BYTES, writeArgs } from '../../src/kernels/args.js';

interface Entry { sha256: string; rows: string[] }
const fixture = JSON.parse(readFileSync(new URL('./fixtures/llamacpp-quantize.json', import.meta.url), 'utf8')) as Record<string, Record<string, Entry> | string>;
const cases = llamacppCases();
const sha = (a: Uint8Array) => createHash('sha256').update(a).digest('hex');
const recorded = new Set(Object.entries(fixture).flatMap(([k, v]) => (k === '_about' ? [] : Object.keys(v as object))));

describe('fixture covers what it claims', () => {
  it('every case is recorded, and every recorded type is a format webquant writes', () => {
    expect(Object.keys(fixture).filter((k) => k !== '_about').sort()).toEqual(Object.keys(cases).sort());
    for (const t of recorded) expect(formats.has(t), t).toBe(true);
    expect([...recorded].sort()).toEqual(['iq1_m', 'iq1_s', 'iq2_s', 'iq2_xs', 'iq2_xxs', 'iq3_s', 'iq3_xxs', 'mxfp4_gguf', 'nvfp4_gguf', 'q1_0', 'q2_0', 'tq1_0', 'tq2_0']);
  });

  it('types llama.cpp needs an importance matrix for are recorded with importance only', () => {
    for (const [name, c] of Object.entries(cases)) {
      for (const t of Object.keys(fixture[name] as object)) expect(!c.importance && formats.get(t)!.requiresImportance, `${name} ${t}`).toBeFalsy();
    }
  });
});

describe('inputs llama.cpp refuses or aborts on are typed errors', () => {
  it('iq1_s, iq2_xxs and iq2_xs without importance (llama.cpp asserts an importance matrix)', async () => {
    expect([...formats.values()].filter((f) => f.requiresImportance).map((f) => f.name).sort()).toEqual(['iq1_s', 'iq2_xs', 'iq2_xxs']);
    for (const format of ['iq1_s', 'iq2_xxs', 'iq2_xs']) {
      await expect(quantize(new Float32Array(512).fill(0.5), { format, rowLength: 256, name: 'w' }))
        .rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { tensor: 'w', option: 'importance' } });
      const imp = new Float32Array(256).fill(1);
      expect((await quantize(new Float32Array(512).fill(0.5), { format, rowLength: 256, importance: imp })).data.length).toBe(2 * formats.get(format)!.ggml!.typeSize);
    }
  });

  it('IQ2 / IQ3 values at or above maxAbs (llama.cpp aborts where its squared errors overflow), named by index, in f32 and bf16', async () => {
    expect([...formats.values()].filter((f) => f.maxAbs !== undefined).map((f) => f.name).sort()).toEqual(['iq2_s', 'iq2_xs', 'iq2_xxs', 'iq3_s', 'iq3_xxs']);
    for (const format of ['iq3_xxs', 'iq3_s', 'iq2_xxs', 'iq2_xs', 'iq2_s']) {
      const spec = formats.get(format)!;
      const max = spec.maxAbs!;
      const x = Float32Array.from({ length: 1024 }, (_, i) => Math.sin(i));
      x[700] = -max;
      await expect(quantize(x, withImportance({ format, rowLength: 512 }, spec))).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT, details: { index: 700 } });
      const bf = new Uint16Array(1024);
      bf[300] = 0x5380; // 2^40 in bfloat16
      await expect(quantize(bf, withImportance({ format, rowLength: 512, dtype: 'bf16' as const }, spec))).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT, details: { index: 300 } });
      x[700] = -max * (1 - 2 ** -23);
      await expect(quantize(x, withImportance({ format, rowLength: 512 }, spec))).resolves.toBeDefined();
    }
  });

  it('rows the varied cases leave out for a type are exactly those with a value beyond its maxAbs', () => {
    const c = cases.varied;
    expect(rowsBelow(c, formats.get('iq3_xxs')!.maxAbs).rows.length).toBe(c.x.length / c.rowLength - 1);
    expect(rowsBelow(c, formats.get('q4_k')!.maxAbs).rows.length).toBe(c.x.length / c.rowLength);
  });
});

/** Q1_0 as quantize_row_q1_0_ref states it: fp16 of the in-order fp32 sum of |x| over 128, sign bits x >= 0. */
function q1_0Reference(x: Float32Array): Uint8Array {
  const out = new Uint8Array((x.length / 128) * 18);
  for (let b = 0; b < x.length / 128; b++) {
    let s = 0;
    for (let j = 0; j < 128; j++) s = Math.fround(s + Math.abs(x[b * 128 + j]));
    const h = f32ToF16(Math.fround(s / 128));
    out[b * 18] = h & 0xff;
    out[b * 18 + 1] = h >> 8;
    for (let j = 0; j < 128; j++) if (x[b * 128 + j] >= 0) out[b * 18 + 2 + (j >> 3)] |= 1 << (j & 7);
  }
  return out;
}

describe('q1_0: the SIMD build sums four blocks at once, one per lane', () => {
  it('rows of 1 to 9 blocks (groups of four and the blocks left over) give the reference bytes on both builds', async () => {
    for (let nb = 1; nb <= 9; nb++) {
      const x = gaussian(3 * nb * 128, nb);
      x[5] = -0; // sign bit set for -0 (x >= 0)
      const want = q1_0Reference(x);
      for (const backend of ['wasm-simd', 'wasm'] as const) {
        const got = (await quantize(x, { format: 'q1_0', rowLength: nb * 128, backend })).data;
        expect(Buffer.from(got).equals(Buffer.from(want)), `${nb} blocks ${backend}`).toBe(true);
      }
    }
  });
});

for (const backend of ['wasm-simd', 'wasm'] as const) {
  describe(`llama.cpp's ggml_quantize_chunk bytes (${backend})`, () => {
    for (const [name, all] of Object.entries(cases)) {
      for (const [fmt, want] of Object.entries(fixture[name] as Record<string, Entry>)) {
        it(`${name} ${fmt}`, async () => {
          const { c } = rowsBelow(all, formats.get(fmt)!.maxAbs);
          const got = (await quantize(c.x, { format: fmt, rowLength: c.rowLength, backend, importance: c.importance })).data;
          const g = formats.get(fmt)!.ggml!;
          const rowBytes = (c.rowLength / g.blockSize) * g.typeSize;
          expect(got.length).toBe(want.rows.length * rowBytes);
          const bad = want.rows.flatMap((d, r) => (sha(got.subarray(r * rowBytes, (r + 1) * rowBytes)).startsWith(d) ? [] : [c.rowName(r)]));
          expect(bad, 'rows whose bytes differ from llama.cpp').toEqual([]);
          expect(sha(got)).toBe(want.sha256);
        });
      }
    }
  });
}

describe('block absmax (bnb/lut.ts absmax): a NaN never becomes it, on either build', () => {
  // The scan keeps its maximum unless |x| > it, so a NaN is passed over, and the SIMD build's pmax
  // does the same. quantize() rejects NaN, so the kernels are called directly: NaN first, last
  // and inside a block, next to finite blocks and a -0. The ternary codes and GGUF NVFP4 take
  // their block scale from it. (GGUF MXFP4 does too, but its SIMD code of a NaN value itself is
  // 7 where the scalar one is 0: masking that cost 9% of its speed for input quantize() refuses.)
  for (const fmt of ['tq1_0', 'tq2_0', 'q2_0', 'nvfp4_gguf']) {
    it(`${fmt}: both builds write the same bytes`, async () => {
      const { blockSize: n, typeSize: bytes } = formats.get(fmt)!.ggml!;
      const x = new Float32Array(4 * n).map((_, i) => Math.sin(i) * 0.1);
      x[0] = NaN;
      x[2 * n - 1] = NaN;
      x[2 * n + 5] = NaN;
      x[3 * n + 7] = -0;
      const src = new Uint8Array(x.buffer);
      const outs: string[] = [];
      for (const backend of ['wasm-simd', 'wasm'] as const) {
        const k = await loadKernels(backend);
        const base = k.reserve(ARGS_BYTES + 65536 + src.length + 4 * bytes + 64);
        const at = base + ARGS_BYTES + 65536, out = at + src.length;
        writeArgs(k.buffer, base, { scratch: base + ARGS_BYTES });
        k.u8(at, src.length).set(src);
        k.fn(`${formats.get(fmt)!.kernel}_quantize`)(at, 0, 1, x.length, out, base);
        outs.push(Buffer.from(k.u8(out, 4 * bytes)).toString('hex'));
      }
      expect(outs[0]).toBe(outs[1]);
    });
  }
});
