// The registry mirrors the wasm exports, and every registered format passes the same checks on
// both builds: identical bytes, dtype equivalence, round trip, and typed errors.
import { describe, expect, it } from 'vitest';
import { dequantize, errorMetrics, formats, quantize, quantize as quantizeAny, WebquantError, ErrorCodes } from '../../src/index.js';
import { loadKernels } from '../../src/kernels/loader.js';
import { ARGS_BYTES, A } from '../../src/kernels/args.js';
import { resolveOptions } from '../../src/options.js';
import { constantSections, cutsByRows } from '../../src/formats/types.js';
import { CODE_BOOKS } from '../../src/formats/bnb.js';
import { edgeRows, toBf16Exact, gaussian, withImportance } from '../helpers/data.js';

const builds = ['wasm-simd', 'wasm'] as const;
/** Gaussian data through a ternary code book (-d, 0, d with d the block's absmax) keeps less. */
// Q1_0 keeps signs only: on gaussian data its cosine is E|x| / sqrt(E x^2) = sqrt(2 / pi) ~ 0.798.
const MIN_COSINE: Record<string, number> = { tq1_0: 0.65, tq2_0: 0.65, q1_0: 0.79, q2_0: 0.75 };

describe('registry mirrors the wasm exports', () => {
  it('bitsandbytes code books written without the kernels are the kernels\' tables', async () => {
    const k = await loadKernels('auto');
    for (const [type, words] of Object.entries(CODE_BOOKS)) {
      const at = k.constant(`${type.toUpperCase()}_TABLE`);
      expect([...new Uint32Array(k.buffer.slice(at, at + 64))], type).toEqual([...words]);
    }
  });

  it('the host region starts 64-byte aligned whatever the static tables add (Float64Array views of the reference forward need it)', async () => {
    for (const build of builds) {
      const k = await loadKernels(build);
      const raw = Number((k.exports.heapBase as () => number)());
      expect(k.heapBase % 64, build).toBe(0);
      expect(k.heapBase - raw, build).toBeLessThan(64);
      expect(k.heapBase, build).toBeGreaterThanOrEqual(raw);
      expect(new Float64Array(k.buffer, k.reserve(64), 8).length).toBe(8);
    }
  });

  for (const build of builds) {
    it(`${build}: every format has its kernels and GGUF constants`, async () => {
      const k = await loadKernels(build);
      expect(k.constant('ARGS_BYTES')).toBe(ARGS_BYTES);
      expect(Object.keys(A).length).toBeGreaterThan(0);
      for (const f of formats.values()) {
        expect(k.has(`${f.kernel}_quantize`), `${f.name} quantize`).toBe(true);
        expect(k.has(`${f.kernel}_dequantize`), `${f.name} dequantize`).toBe(true);
        if (f.ggml) {
          const up = f.kernel.toUpperCase();
          expect(k.constant(`${up}_BLOCK`), `${f.name} block`).toBe(f.ggml.blockSize);
          expect(k.constant(`${up}_BYTES`), `${f.name} bytes`).toBe(f.ggml.typeSize);
        }
      }
    });
  }
});

for (const f of formats.values()) {
  describe(`format ${f.name}`, () => {
    const o = { format: f.name };
    // Formats that need importance weights get them (withImportance), every call alike.
    const quantize: typeof quantizeAny = (v, opts) => quantizeAny(v, withImportance(opts, f));
    it('SIMD and scalar builds give identical bytes on edge-case rows', async () => {
      const rowLen = 4096;
      for (const { name, values } of edgeRows(rowLen)) {
        const a = await quantize(values, { ...o, rowLength: rowLen, backend: 'wasm-simd' });
        const b = await quantize(values, { ...o, rowLength: rowLen, backend: 'wasm' });
        expect(Buffer.from(a.data).equals(Buffer.from(b.data)), `${f.name} ${name}`).toBe(true);
        const da = await dequantize(a, { backend: 'wasm-simd' });
        const db = await dequantize(b, { backend: 'wasm' });
        expect(Buffer.from(da.buffer).equals(Buffer.from(db.buffer)), `${f.name} ${name} dequantized`).toBe(true);
      }
    });

    it('bf16 input gives the same bytes as its exact f32 widening', async () => {
      const rowLen = 512;
      const { bits, widened } = toBf16Exact(gaussian(rowLen * 3, 11));
      const a = await quantize(bits, { ...o, rowLength: rowLen, dtype: 'bf16' });
      const b = await quantize(widened, { ...o, rowLength: rowLen });
      // Sections that record the dtype (bitsandbytes' quant state) are left out, and must differ.
      for (const s of a.layout.sections) {
        const same = Buffer.from(a.data.subarray(s.offset, s.offset + s.bytes)).equals(Buffer.from(b.data.subarray(s.offset, s.offset + s.bytes)));
        expect(same, `${f.name} ${s.name}`).toBe(!f.dtypeSections?.includes(s.name));
      }
    });

    it('chunking does not change the bytes', async () => {
      const rowLen = 512;
      const v = gaussian(rowLen * 9, 5);
      const whole = await quantize(v, { ...o, rowLength: rowLen });
      const chunked = await quantize(v, { ...o, rowLength: rowLen, chunkBytes: rowLen * 4 * 2 });
      expect(Buffer.from(whole.data).equals(Buffer.from(chunked.data))).toBe(true);
    });

    it('a layout cut by rows: rows quantized in separate calls, and the constant sections, give the bytes of one call (what lets the pipeline cut it)', async () => {
      const rowLen = 512;
      const v = Float32Array.from(gaussian(rowLen * 9, 7), (x, i) => x * (1 + (i >> 9)));
      const whole = await quantize(v, { ...o, rowLength: rowLen });
      if (!cutsByRows(whole.layout)) return; // tensor-level sections from the values: never cut
      // The pipeline writes the constant sections itself: they must fill their sections.
      for (const dtype of ['f32', 'f16', 'bf16'] as const) {
        for (const [i, bytes] of constantSections(f, whole.layout, { nrows: 9, rowLen, opts: whole.options, dtype })) {
          expect(bytes.byteLength, `${f.name} ${whole.layout.sections[i].name} ${dtype}`).toBe(whole.layout.sections[i].bytes);
        }
      }
      const parts = [await quantize(v.subarray(0, rowLen * 4), { ...o, rowLength: rowLen }), await quantize(v.subarray(rowLen * 4), { ...o, rowLength: rowLen })];
      for (const sec of whole.layout.sections.filter((x) => x.perRow > 0)) {
        const joined = Buffer.concat(parts.map((p) => {
          const ps = p.layout.sections.find((x) => x.name === sec.name)!;
          return Buffer.from(p.data.subarray(ps.offset, ps.offset + ps.bytes));
        }));
        expect(joined.equals(Buffer.from(whole.data.subarray(sec.offset, sec.offset + sec.bytes))), `${f.name} ${sec.name}`).toBe(true);
      }
    });

    it('slices of rows with the whole tensor\'s calibration (prepareOnly) give its row sections, and each its tensor sections', async () => {
      const rowLen = 512;
      // Rows of growing scale: a per-tensor scale or double quantization's groups from one slice
      // alone would differ from the whole's.
      // 72 rows: bitsandbytes' double quantization groups 256 blocks of the flattened tensor
      // (32 rows here), so the slices' groups must follow their place in the whole.
      const v = Float32Array.from(gaussian(rowLen * 72, 8), (x, i) => x * (1 + (i >> 12)));
      // Per-tensor scales (with calibration passes) and double quantization where the format has them.
      const variants: Record<string, unknown>[] = [{}];
      if (f.granularities?.includes('tensor')) variants.push({ granularity: 'tensor' }, ...(f.calibrations.includes('mse') ? [{ granularity: 'tensor', calibration: 'mse' }] : []));
      if (f.doubleQuant) variants.push({ doubleQuant: true });
      for (const variant of variants) {
        const label = `${f.name} ${JSON.stringify(variant)}`;
        const whole = await quantize(v, { ...o, ...variant, rowLength: rowLen });
        const { prepared } = await quantize(v, { ...o, ...variant, rowLength: rowLen, prepareOnly: true });
        expect(prepared, label).toBeDefined();
        const parts = [];
        for (const [a, b] of [[0, 20], [20, 50], [50, 72]]) {
          parts.push(await quantize(v.subarray(a * rowLen, b * rowLen), { ...o, ...variant, rowLength: rowLen, slice: { row0: a, rows: 72, prepared } }));
        }
        for (const sec of whole.layout.sections) {
          const want = Buffer.from(whole.data.subarray(sec.offset, sec.offset + sec.bytes));
          const got = parts.map((p) => {
            const ps = p.layout.sections.find((x) => x.name === sec.name)!;
            return Buffer.from(p.data.subarray(ps.offset, ps.offset + ps.bytes));
          });
          if (sec.perRow > 0) expect(Buffer.concat(got).equals(want), `${label} ${sec.name}`).toBe(true);
          else got.forEach((g, i) => expect(g.equals(want), `${label} ${sec.name} slice ${i}`).toBe(true));
        }
      }
    });

    it('zeros round-trip to zeros and gaussian data round-trips with bounded error', async () => {
      const rowLen = 512;
      const z = await dequantize(await quantize(new Float32Array(rowLen * 2), { ...o, rowLength: rowLen }));
      expect(z.every((x) => x === 0)).toBe(true);
      const v = gaussian(rowLen * 4, 3);
      const qt = await quantize(v, { ...o, rowLength: rowLen, metrics: true });
      expect(qt.metrics!.cosine).toBeGreaterThan(MIN_COSINE[f.name] ?? 0.85);
      expect(qt.metrics!.count).toBe(v.length);
    });

    it('refuses NaN with its index, and bad row lengths', async () => {
      const v = gaussian(1024, 1);
      v[700] = NaN;
      await expect(quantize(v, { ...o, rowLength: 512 })).rejects.toMatchObject({ code: ErrorCodes.NON_FINITE, details: { index: 700 } });
      const block = f.blockSize(resolveOptions(f, { format: f.name }));
      if (block > 1) {
        await expect(quantize(new Float32Array(block + 1), { ...o, rowLength: block + 1 })).rejects.toMatchObject({ code: ErrorCodes.ROW_LENGTH });
      }
    });
  });
}

describe('typed errors', () => {
  it('unknown format lists the valid ones', async () => {
    const e = await quantize(new Float32Array(32), { format: 'q9_9', rowLength: 32 }).catch((x) => x);
    expect(e).toBeInstanceOf(WebquantError);
    expect(e.code).toBe(ErrorCodes.UNKNOWN_FORMAT);
    expect(e.details.expected).toContain('q8_0');
  });
  it('importance of the wrong length is refused', async () => {
    await expect(quantize(new Float32Array(64), { format: 'q4_0', rowLength: 64, importance: new Float32Array(32) })).rejects.toMatchObject({ code: ErrorCodes.IMPORTANCE_LENGTH });
  });
  it('a calibration the format does not accept is refused', async () => {
    await expect(quantize(new Float32Array(64), { format: 'q8_0', rowLength: 64, calibration: 'hqq' })).rejects.toMatchObject({ code: ErrorCodes.BAD_CALIBRATION });
  });
  it('chunkBytes that is not an integer >= 1 is refused (NaN took no rows and gave zeros)', async () => {
    const v = new Float32Array(64 * 4).map((_, i) => Math.sin(i));
    const q = await quantize(v, { format: 'q8_0', rowLength: 64 });
    for (const chunkBytes of [NaN, 0, -1, 1.5, Infinity]) {
      await expect(quantize(v, { format: 'q8_0', rowLength: 64, chunkBytes }), String(chunkBytes)).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'chunkBytes' } });
      await expect(dequantize(q, { chunkBytes }), String(chunkBytes)).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'chunkBytes' } });
    }
    // The smallest legal chunk is one row at a time: same bytes.
    expect((await quantize(v, { format: 'q8_0', rowLength: 64, chunkBytes: 1 })).data).toEqual(q.data);
  });
  it('dequantize: a malformed tensor object is named, a GGUF tensor\'s bytes need no options', async () => {
    const v = new Float32Array(64 * 2).map((_, i) => Math.cos(i));
    const q4 = await quantize(v, { format: 'q4_0', rowLength: 64 });
    const int4 = await quantize(v, { format: 'int4', rowLength: 128 });
    const bad = (x: unknown) => dequantize(x as never);
    await expect(bad(null)).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT });
    await expect(bad({ ...q4, shape: 'x' })).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT, details: { option: 'shape' } });
    await expect(bad({ ...q4, shape: [2, -64] })).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT, details: { option: 'shape' } });
    await expect(bad({ ...q4, data: [1, 2] })).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT, details: { option: 'data' } });
    await expect(bad({ ...q4, options: 7 })).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT, details: { option: 'options' } });
    await expect(bad({ ...q4, shape: [2, 48] })).rejects.toMatchObject({ code: ErrorCodes.ROW_LENGTH });
    await expect(bad({ ...int4, options: undefined })).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT, details: { option: 'options' } });
    await expect(bad({ format: 'q4_0', shape: [2, 64], data: q4.data })).resolves.toEqual(await dequantize(q4));
  });
  it('a Uint16Array without dtype is refused', async () => {
    await expect(quantize(new Uint16Array(64), { format: 'q8_0', rowLength: 64 })).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT });
  });
  for (const build of builds) {
    it(`${build}: a non-finite f16/bf16/f32 value is named by its index, wherever it lies`, async () => {
      // Indices inside a 32-value SIMD stretch, at its edges, in the scalar tail, and two bad
      // values (the first is named); both infinities and NaN, in each 16-bit encoding.
      const n = 4 * 256 + 32;
      const bad16 = { f16: [0x7c00, 0xfc00, 0x7e00, 0x7c01], bf16: [0x7f80, 0xff80, 0x7fc0, 0x7f81] };
      for (const at of [[0], [31], [32], [517, 900], [1023], [n - 1]]) {
        for (const dtype of ['f16', 'bf16'] as const) {
          for (const b of bad16[dtype]) {
            const v = new Uint16Array(n).fill(dtype === 'f16' ? 0x3c00 : 0x3f80);
            v[7] = dtype === 'f16' ? 0x7bff : 0x7f7f; // the largest finite value is not refused
            for (const i of at) v[i] = b;
            await expect(quantize(v, { format: 'q8_0', rowLength: 32, dtype, backend: build }), `${dtype} ${b.toString(16)} at ${at}`)
              .rejects.toMatchObject({ code: ErrorCodes.NON_FINITE, details: { index: at[0] } });
          }
        }
        const f = new Float32Array(n).fill(1);
        for (const i of at) f[i] = -Infinity;
        await expect(quantize(f, { format: 'q8_0', rowLength: 32, backend: build })).rejects.toMatchObject({ code: ErrorCodes.NON_FINITE, details: { index: at[0] } });
      }
      const clean = new Uint16Array(n).fill(0x7f7f);
      await expect(quantize(clean, { format: 'q8_0', rowLength: 32, dtype: 'bf16', backend: build })).resolves.toBeDefined();
    });
  }
  it('errors survive JSON (the worker boundary)', () => {
    const e = new WebquantError(ErrorCodes.ROW_LENGTH, 'x', { tensor: 't', value: 3 });
    const back = WebquantError.fromJSON(JSON.parse(JSON.stringify(e.toJSON())));
    expect(back).toBeInstanceOf(WebquantError);
    expect(back.code).toBe(ErrorCodes.ROW_LENGTH);
    expect(back.details).toEqual({ tensor: 't', value: 3 });
  });
});

describe('error metrics', () => {
  for (const build of builds) {
    it(`${build}: quantize metrics equal a host computation over the dequantized values`, async () => {
      const v = gaussian(4096 * 3 + 0, 21);
      v[77] = 3.5;
      for (const dtype of ['f32', 'bf16'] as const) {
        const input = dtype === 'f32' ? v : toBf16Exact(v).bits;
        const exact = dtype === 'f32' ? v : toBf16Exact(v).widened;
        const qt = await quantize(input, { format: 'q4_k', rowLength: 4096, dtype, metrics: true, backend: build });
        const host = errorMetrics(exact, await dequantize(qt, { backend: build }));
        const m = qt.metrics!;
        expect(m.count).toBe(v.length);
        expect(m.maxAbsError).toBe(host.maxAbsError);
        for (const k of ['rmse', 'sqnrDb', 'cosine'] as const) expect(Math.abs(m[k] - host[k])).toBeLessThan(1e-9 * Math.max(1, Math.abs(host[k])));
      }
    });
  }
});

describe('dequantizeInto', () => {
  it('fills a caller-owned array with the same values and refuses a wrong size', async () => {
    const { dequantizeInto } = await import('../../src/index.js');
    const v = gaussian(2048, 4);
    const qt = await quantize(v, { format: 'q4_0', rowLength: 512 });
    const out = new Float32Array(2048).fill(7);
    expect(await dequantizeInto(qt, out)).toBe(out);
    expect(Buffer.from(out.buffer).equals(Buffer.from((await dequantize(qt)).buffer))).toBe(true);
    await expect(dequantizeInto(qt, new Float32Array(10))).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT });
  });
});

describe('slices refuse what they cannot do', () => {
  const v = gaussian(512 * 4, 2);
  it('rows outside the tensor, a value-dependent layout without prepared, prepareOnly on a slice: E_BAD_OPTION naming the option', async () => {
    await expect(quantize(v, { format: 'q8_0', rowLength: 512, slice: { row0: 2, rows: 5 } })).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'slice' } });
    await expect(quantize(v, { format: 'q8_0', rowLength: 512, slice: { row0: -1, rows: 8 } })).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'slice' } });
    await expect(quantize(v, { format: 'int8', granularity: 'tensor', rowLength: 512, slice: { row0: 0, rows: 8 } })).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'slice.prepared' } });
    await expect(quantize(v, { format: 'int8', rowLength: 512, prepareOnly: true, slice: { row0: 0, rows: 8 } })).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'prepareOnly' } });
    // rows-only layouts need no calibration: a slice of them is its rows
    const whole = await quantize(v, { format: 'q8_0', rowLength: 512 });
    const part = await quantize(v.subarray(1024), { format: 'q8_0', rowLength: 512, slice: { row0: 2, rows: 4 } });
    expect(Buffer.from(part.data).equals(Buffer.from(whole.data.subarray(part.data.byteLength)))).toBe(true);
  });

  it('a prepared that no prepareOnly call gives (unknown fields, no tscale, an auxInit past the tensor sections) is refused', async () => {
    const bad = async (format: string, prepared: unknown, extra: object = {}) => expect(quantize(v.subarray(1024), { format, rowLength: 512, ...extra, slice: { row0: 2, rows: 4, prepared: prepared as never } }))
      .rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION, details: { option: 'slice.prepared' } });
    await bad('nvfp4', { foo: 1 });
    await bad('nvfp4', { tscale: 1, scratch: 0 });
    await bad('nf4', 'x', { doubleQuant: true });
    await bad('int8', {}, { granularity: 'tensor' });
    await bad('int8', { tscale: NaN }, { granularity: 'tensor' });
    await bad('nf4', { tscale: 0.5, auxInit: new Uint8Array(1 << 20) }, { doubleQuant: true });
    // what prepareOnly gives is taken
    const whole = await quantize(v, { format: 'nf4', doubleQuant: true, rowLength: 512 });
    const { prepared } = await quantize(v, { format: 'nf4', doubleQuant: true, rowLength: 512, prepareOnly: true });
    const part = await quantize(v.subarray(1024), { format: 'nf4', doubleQuant: true, rowLength: 512, slice: { row0: 2, rows: 4, prepared } });
    expect(part.data.byteLength).toBeGreaterThan(0);
    expect(whole.data.byteLength).toBeGreaterThan(part.data.byteLength);
  });

  it('values that are not an array and options that are not an object are E_BAD_INPUT / E_BAD_OPTION', async () => {
    await expect(quantize(null as never, { format: 'q8_0', rowLength: 64 })).rejects.toMatchObject({ code: ErrorCodes.BAD_INPUT });
    await expect(quantize(v, undefined as never)).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION });
    await expect(quantize(v, null as never)).rejects.toMatchObject({ code: ErrorCodes.BAD_OPTION });
    let deep: unknown[] = [];
    for (let i = 0; i < 20000; i++) deep = [deep];
    await expect(quantize(v, { format: 'int4', rowLength: 512, calibration: { method: 'clip', ratio: deep as never } })).rejects.toMatchObject({ code: ErrorCodes.BAD_CALIBRATION, details: { value: 'object' } });
  });

  it('a slice names the whole tensor\'s row of a NaN', async () => {
    const w = v.slice(1024);
    w[700] = NaN;
    await expect(quantize(w, { format: 'q8_0', rowLength: 512, slice: { row0: 2, rows: 4 } })).rejects.toMatchObject({ code: ErrorCodes.NON_FINITE, details: { index: 2 * 512 + 700 } });
  });
});
