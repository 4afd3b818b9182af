// openQuantized on files webquant writes: a GGUF (quantize() + writeGguf) and a safetensors output
// laid out by the pipeline's safetensorsContainer; lazy reads, the LRU byte cap, the eval adapter.
import { describe, expect, it } from 'vitest';
import { collect, fromBuffer, openCheckpoint, writeGguf, type ByteSource } from '../../src/io/index.js';
import { safetensorsContainer, type OutputTensor } from '../../src/pipeline/container.js';
import { dequantize, quantize, type QuantizedTensor } from '../../src/quantize.js';
import { MATVEC_REL_TOL, openQuantized, servedFromQuantized, weightSource } from '../../src/serve/index.js';
import { asValues } from '../../src/serve/as-values.js';
import { LlamaModel, llamaConfig, llamaTensorNames } from '../../src/eval/llama.js';
import { mapSource, randomWeights } from '../eval/naive.js';
import { f32ToF16 } from '../../src/util/half.js';

function rand(n: number, seed: number, scale = 1): Float32Array {
  const v = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    v[i] = scale * ((s >>> 8) / 8388608 - 1);
  }
  return v;
}

/** A ByteSource that counts reads and bytes read. */
function counting(bytes: Uint8Array) {
  const inner = fromBuffer(bytes, 'mem');
  const stats = { reads: 0, bytes: 0 };
  const src: ByteSource = {
    name: 'mem',
    size: () => inner.size(),
    async read(o, n) { stats.reads++; stats.bytes += n; return inner.read(o, n); },
  };
  return { src, stats };
}

function f64dot(deq: Float32Array, x: Float32Array, rows: number, n: number) {
  return Array.from({ length: rows }, (_, r) => {
    let s = 0, m = 0;
    for (let i = 0; i < n; i++) { s += deq[r * n + i] * x[i]; m += Math.abs(deq[r * n + i] * x[i]); }
    return { s, m };
  });
}

interface Spec { name: string; shape: [number, number]; format?: string; opts?: Record<string, unknown>; keep?: boolean }

async function build(specs: Spec[]) {
  const values = new Map<string, Float32Array>();
  const quant = new Map<string, QuantizedTensor>();
  for (const [i, s] of specs.entries()) {
    const v = rand(s.shape[0] * s.shape[1], 11 + i, 0.1);
    values.set(s.name, v);
    if (s.format) quant.set(s.name, await quantize(v, { format: s.format, rowLength: s.shape[1], ...s.opts }));
  }
  return { values, quant };
}

/** The pipeline's safetensors layout (safetensorsContainer) with the quantized sections as data. */
async function webquantSafetensors(specs: Spec[], built: Awaited<ReturnType<typeof build>>): Promise<Uint8Array> {
  const outs: OutputTensor[] = specs.map((s) => {
    const q = built.quant.get(s.name);
    // a GGUF block-type tensor the pipeline kept as it was (stored as U8 with storedAs)
    if (q && s.keep) return { name: s.name, kind: 'keep', inputDtype: s.format!.toUpperCase(), shape: s.shape, byteLength: q.data.byteLength };
    return q
      ? { name: s.name, kind: 'quantized', inputDtype: 'F32', shape: s.shape, byteLength: q.layout.bytes, format: q.format, options: q.options, layout: q.layout }
      : { name: s.name, kind: 'keep', inputDtype: 'F32', shape: s.shape, byteLength: s.shape[0] * s.shape[1] * 4 };
  });
  const input = { format: 'safetensors', metadata: {} } as unknown as Parameters<ReturnType<typeof safetensorsContainer>['plan']>[1];
  const plan = safetensorsContainer().plan(outs, input);
  const parts: Uint8Array[] = [plan.header];
  specs.forEach((s, i) => {
    const q = built.quant.get(s.name);
    const data = q ? q.data : new Uint8Array(built.values.get(s.name)!.buffer);
    let at = 0;
    for (const e of plan.entries[i]) {
      parts.push(data.subarray(at, at + e.byteLength), new Uint8Array(e.padAfter));
      at += e.byteLength;
    }
  });
  const out = new Uint8Array(plan.totalBytes);
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.byteLength; }
  expect(at).toBe(plan.totalBytes);
  return out;
}

const specs: Spec[] = [
  { name: 'a.q4_k', shape: [6, 512], format: 'q4_k' },
  { name: 'b.nf4dq', shape: [5, 256], format: 'nf4', opts: { doubleQuant: true } },
  { name: 'c.int4', shape: [4, 256], format: 'int4' },
  { name: 'd.affine', shape: [3, 128], format: 'affine', opts: { bits: 3, groupSize: 32 } },
  { name: 'e.fp8t', shape: [4, 64], format: 'fp8_e4m3', opts: { granularity: 'tensor' } },
  { name: 'f.mxfp4', shape: [2, 64], format: 'mxfp4' },
  { name: 'g.plain', shape: [3, 40] },
  { name: 'h.kept_q8_0', shape: [2, 64], format: 'q8_0', keep: true },
];

async function checkTensor(q: Awaited<ReturnType<typeof openQuantized>>, name: string, want: Float32Array, rows: number, n: number) {
  const t = q.tensor(name);
  expect(t.info.rows).toBe(rows);
  expect(t.info.rowLength).toBe(n);
  const deq = await t.dequantize();
  expect(Buffer.from(deq.buffer).equals(Buffer.from(want.buffer))).toBe(true);
  const h = await t.dequantizeF16();
  for (let i = 0; i < want.length; i++) expect(h[i]).toBe(f32ToF16(want[i]));
  const x = rand(n, 3);
  const y = await t.matvec(x);
  f64dot(want, x, rows, n).forEach(({ s, m }, r) => expect(Math.abs(y[r] - s)).toBeLessThanOrEqual(MATVEC_REL_TOL * m + 1e-30));
  const Y = await t.matmul(new Float32Array([...x, ...x]), 2);
  expect(Array.from(Y)).toEqual([...y, ...y]);
}

describe('openQuantized', () => {
  it('serves a safetensors file laid out by webquant: every section format, plain tensors too, lazily', async () => {
    const built = await build(specs);
    const file = await webquantSafetensors(specs, built);
    const { src, stats } = counting(file);
    const q = await openQuantized(src);
    const headerReads = stats.reads;
    // section tensors are folded into their tensor
    expect(q.tensors.map((t) => t.name)).toEqual(specs.map((s) => s.name));
    expect(q.tensor('b.nf4dq').info).toMatchObject({ format: 'nf4', quantized: true, shape: [5, 256] });
    expect(q.tensor('g.plain').info).toMatchObject({ format: 'F32', quantized: false });
    expect(q.tensor('h.kept_q8_0').info).toMatchObject({ format: 'q8_0', quantized: true, shape: [2, 64] });
    expect(stats.reads).toBe(headerReads); // tensor() reads nothing
    for (const s of specs) {
      const qt = built.quant.get(s.name);
      const want = qt ? await dequantize(qt) : built.values.get(s.name)!;
      const before = stats.reads;
      await checkTensor(q, s.name, want, s.shape[0], s.shape[1]);
      // one read per section, once: the later calls hit the cache
      expect(stats.reads - before).toBe(qt ? qt.layout.sections.length : 1);
    }
    expect(q.cacheStats().entries).toBe(specs.length);
  });

  it('serves a GGUF file (quantize() + writeGguf), F16 and F32 tensors included', async () => {
    const g: Spec[] = [
      { name: 'blk.0.q8', shape: [4, 256], format: 'q8_0' },
      { name: 'blk.0.q6k', shape: [3, 512], format: 'q6_k' },
      { name: 'blk.0.iq4nl', shape: [2, 64], format: 'iq4_nl' },
      { name: 'blk.0.f32', shape: [3, 33] },
    ];
    const built = await build(g);
    const half = new Uint16Array(built.values.get('blk.0.f32')!.length).map((_, i) => f32ToF16(built.values.get('blk.0.f32')![i]));
    const file = await collect(writeGguf({
      tensors: [
        ...g.map((s) => built.quant.has(s.name)
          ? { name: s.name, ggmlType: s.format!.toUpperCase(), shape: s.shape, data: built.quant.get(s.name)!.data }
          : { name: s.name, ggmlType: 'F32', shape: s.shape, data: built.values.get(s.name)! }),
        { name: 'blk.0.f16', ggmlType: 'F16', shape: [3, 33], data: half },
      ],
    }));
    const { src, stats } = counting(file);
    const q = await openQuantized(src);
    const afterOpen = stats.reads;
    expect(q.tensor('blk.0.q6k').info).toMatchObject({ format: 'q6_k', quantized: true, shape: [3, 512] });
    for (const s of g) {
      const qt = built.quant.get(s.name);
      await checkTensor(q, s.name, qt ? await dequantize(qt) : built.values.get(s.name)!, s.shape[0], s.shape[1]);
    }
    const ckpt = await openCheckpoint(fromBuffer(file));
    await checkTensor(q, 'blk.0.f16', await ckpt.readF32('blk.0.f16'), 3, 33);
    expect(stats.reads - afterOpen).toBe(g.length + 1);
    // an opened Checkpoint works as the source too
    const q2 = await openQuantized(ckpt);
    expect(Array.from(await q2.tensor('blk.0.q8').matvec(new Float32Array(256).fill(1)))).toEqual(Array.from(await q.tensor('blk.0.q8').matvec(new Float32Array(256).fill(1))));
    expect(() => q.tensor('nope')).toThrow(/no tensor named "nope"/);
  });

  it("multiplies a GGUF weight by its `<m>.scale` (llama.cpp's NVFP4 weight_scale_2, per tensor or per expert), as llama.cpp's graph does", async () => {
    const v = rand(4 * 128, 3, 2), stackV = rand(3 * 2 * 128, 4, 2);
    const w = await quantize(v, { format: 'nvfp4_gguf', rowLength: 128 });
    const st = await quantize(stackV, { format: 'q8_0', rowLength: 128 });
    const tensors = (scales: { w?: Float32Array; st?: Float32Array; f?: Float32Array }) => [
      { name: 'blk.0.attn_q.weight', ggmlType: 'NVFP4', shape: [4, 128], data: w.data },
      { name: 'blk.0.ffn_up_exps.weight', ggmlType: 'Q8_0', shape: [3, 2, 128], data: st.data },
      { name: 'blk.0.ffn_down.weight', ggmlType: 'F32', shape: [2, 128], data: v.subarray(0, 256) },
      { name: 'blk.0.attn_q.input_scale', ggmlType: 'F32', shape: [1], data: Float32Array.of(7) },
      ...(scales.w ? [{ name: 'blk.0.attn_q.scale', ggmlType: 'F32', shape: [scales.w.length], data: scales.w }] : []),
      ...(scales.st ? [{ name: 'blk.0.ffn_up_exps.scale', ggmlType: 'F32', shape: [scales.st.length], data: scales.st }] : []),
      ...(scales.f ? [{ name: 'blk.0.ffn_down.scale', ggmlType: 'F32', shape: [scales.f.length], data: scales.f }] : []),
    ];
    const open = async (scales: Parameters<typeof tensors>[0]) => openQuantized(fromBuffer(await collect(writeGguf({ tensors: tensors(scales) })), 's.gguf'));
    const plain = await open({});
    const q = await open({ w: Float32Array.of(0.03125), st: Float32Array.of(0.5, 3, -0.25), f: Float32Array.of(4) });
    expect(q.tensor('blk.0.attn_q.weight').info.scale).toBe('blk.0.attn_q.scale');
    expect(plain.tensor('blk.0.attn_q.weight').info.scale).toBeUndefined();
    const x = rand(128, 9), X = rand(3 * 128, 10);
    for (const [name, rowScale] of [['blk.0.attn_q.weight', () => 0.03125], ['blk.0.ffn_up_exps.weight', (r: number) => [0.5, 3, -0.25][r >> 1]], ['blk.0.ffn_down.weight', () => 4]] as const) {
      const a = plain.tensor(name), b = q.tensor(name);
      const rows = a.info.rows;
      const deqA = await a.dequantize(), deqB = await b.dequantize();
      expect(Array.from(deqB), name).toEqual(Array.from(deqA, (y, i) => Math.fround(y * rowScale(Math.floor(i / 128)))));
      expect(Array.from(await b.matvec(x)), name).toEqual(Array.from(await a.matvec(x), (y, r) => Math.fround(y * rowScale(r))));
      expect(Array.from(await b.matmul(X, 3)), name).toEqual(Array.from(await a.matmul(X, 3), (y, i) => Math.fround(y * rowScale(i % rows))));
    }
    // One expert of the stack takes its own scale.
    const e2 = (await q.tensor('blk.0.ffn_up_exps.weight').load()).rows(4, 2);
    const p2 = (await plain.tensor('blk.0.ffn_up_exps.weight').load()).rows(4, 2);
    expect(Array.from(e2.matvec(x))).toEqual(Array.from(p2.matvec(x), (y) => Math.fround(y * -0.25)));
    expect(Array.from(e2.dequantize())).toEqual(Array.from(p2.dequantize(), (y) => Math.fround(y * -0.25)));
    // The eval adapter sees the scaled weights.
    const ws = await weightSource(q, { names: ['blk.0.attn_q.weight'] });
    expect(Array.from(ws.matvec('blk.0.attn_q.weight', x))).toEqual(Array.from(await q.tensor('blk.0.attn_q.weight').matvec(x)));
    // A scale llama.cpp could not load ({1} for a plain weight, {1} or {n_expert} for a stack) is refused, naming it.
    await expect(open({ st: Float32Array.of(1, 2) })).rejects.toThrow(/"blk\.0\.ffn_up_exps\.scale" \(F32 \[2\]\).*F32 with 1 or 3 values/);
    await expect(open({ w: Float32Array.of(1, 2) })).rejects.toMatchObject({ code: 'E_BAD_INPUT', details: { tensor: 'blk.0.attn_q.scale' } });
  });

  it('serves rows of a tensor apart (one expert of a stack): the bytes and results of those rows alone', async () => {
    // A [3 experts, 4 rows, 256] stack per format, and one expert quantized on its own.
    for (const [format, ggml] of [['q4_k', 'Q4_K'], ['q8_0', 'Q8_0'], ['f16', 'F16']] as const) {
      const v = rand(3 * 4 * 256, 5, 0.1);
      const stack = format === 'f16' ? undefined : await quantize(v, { format, rowLength: 256 });
      const data = stack ? stack.data : Uint16Array.from(v, (x) => f32ToF16(x));
      const file = await collect(writeGguf({ tensors: [{ name: 'blk.0.ffn_up_exps.weight', ggmlType: ggml, shape: [3, 4, 256], data }] }));
      const whole = await (await openQuantized(fromBuffer(file))).tensor('blk.0.ffn_up_exps.weight').load();
      expect(whole.info).toMatchObject({ rows: 12, rowLength: 256 });
      const one = whole.rows(4, 4);
      expect(one.info).toMatchObject({ rows: 4, shape: [4, 256] });
      const x = rand(256 * 2, 9);
      const deq = whole.dequantize();
      expect(Array.from(one.dequantize())).toEqual(Array.from(deq.subarray(4 * 256, 8 * 256)));
      expect(Array.from(one.matmul(x, 2))).toEqual([...whole.matmul(x, 2).subarray(4, 8), ...whole.matmul(x, 2).subarray(16, 20)]);
      if (stack) {
        const alone = await quantize(v.subarray(4 * 256, 8 * 256), { format, rowLength: 256 });
        expect(Buffer.from(one.sections[0]).equals(Buffer.from(alone.data))).toBe(true);
      }
      expect(() => whole.rows(10, 3)).toThrow(/outside its 12 rows/);
    }
  });

  it('serves rows apart for layouts with whole-tensor sections too (double quantization, a per-tensor scale)', async () => {
    // 150 rows of 4 blocks: double quantization's groups of 256 blocks cross rows (and these cuts)
    const v = rand(150 * 256, 13, 0.05);
    for (const opts of [{ format: 'nf4', doubleQuant: true }, { format: 'bnb_nf4', doubleQuant: true }, { format: 'int8', granularity: 'tensor' as const }]) {
      const t = await servedFromQuantized(await quantize(v, { ...opts, rowLength: 256 }), { chunkBytes: 3000 });
      const deq = t.dequantize();
      for (const [first, count] of [[0, 3], [63, 3], [70, 80], [149, 1]]) {
        const part = t.rows(first, count);
        expect(Array.from(part.dequantize()), `${opts.format} rows ${first}+${count}`).toEqual(Array.from(deq.subarray(first * 256, (first + count) * 256)));
        // rows of rows: the offsets add up
        if (count > 2) expect(Array.from(part.rows(1, 2).dequantize())).toEqual(Array.from(deq.subarray((first + 1) * 256, (first + 3) * 256)));
      }
    }
  });

  it('keeps the cache under cacheBytes (LRU), rereading evicted tensors only', async () => {
    const g: Spec[] = [0, 1, 2, 3].map((i) => ({ name: `t${i}`, shape: [8, 256] as [number, number], format: 'q8_0' }));
    const built = await build(g);
    const file = await collect(writeGguf({ tensors: g.map((s) => ({ name: s.name, ggmlType: 'Q8_0', shape: s.shape, data: built.quant.get(s.name)!.data })) }));
    const per = 8 * 8 * 34; // 2176 bytes per tensor
    const { src, stats } = counting(file);
    const q = await openQuantized(src, { cacheBytes: 2 * per + 100 });
    const x = rand(256, 1);
    const reads = async (name: string) => { const b = stats.reads; await q.tensor(name).matvec(x); return stats.reads - b; };
    expect(await reads('t0')).toBe(1);
    expect(await reads('t1')).toBe(1);
    expect(await reads('t0')).toBe(0); // hit; t0 becomes most recent
    expect(await reads('t2')).toBe(1); // evicts t1 (least recently used)
    expect(q.cacheStats().bytes).toBeLessThanOrEqual(2 * per + 100);
    expect(q.cacheStats().entries).toBe(2);
    expect(await reads('t0')).toBe(0);
    expect(await reads('t1')).toBe(1);
    expect(q.cacheStats()).toMatchObject({ entries: 2, evictions: 2 });
    // a tensor bigger than the cap is served but never cached
    const tiny = await openQuantized(src, { cacheBytes: 1000 });
    const b = stats.reads;
    await tiny.tensor('t3').matvec(x);
    await tiny.tensor('t3').matvec(x);
    expect(stats.reads - b).toBe(2);
    expect(tiny.cacheStats().bytes).toBe(0);
  });

  it('runs the reference Llama forward on quantized weights through weightSource', async () => {
    const c = llamaConfig({
      hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2,
      vocab_size: 96, rms_norm_eps: 1e-5, rope_theta: 10000, tie_word_embeddings: false,
    });
    const w = randomWeights(c, 3);
    const names = llamaTensorNames(c);
    const tensors = [];
    const deq = new Map<string, Float32Array>();
    for (const n of names) {
      const v = w.get(n)!;
      const cols = n.includes('norm') ? v.length : n.includes('down_proj') ? c.intermediate_size : c.hidden_size;
      if (n.includes('norm')) {
        tensors.push({ name: n, ggmlType: 'F32', shape: [v.length], data: v });
        deq.set(n, v);
      } else {
        const qt = await quantize(v, { format: 'q8_0', rowLength: cols });
        tensors.push({ name: n, ggmlType: 'Q8_0', shape: [v.length / cols, cols], data: qt.data });
        deq.set(n, await dequantize(qt));
      }
    }
    const file = await collect(writeGguf({ tensors }));
    const q = await openQuantized(fromBuffer(file));
    const src = await weightSource(q);
    const seq = [1, 5, 9, 3, 15, 0, 7];
    const viaKernels = (await LlamaModel.load(c, src)).forward(seq).slice();
    const viaDequant = (await LlamaModel.load(c, mapSource(deq))).forward(seq);
    let maxErr = 0, maxAbs = 0;
    for (let i = 0; i < viaDequant.length; i++) {
      maxErr = Math.max(maxErr, Math.abs(viaKernels[i] - viaDequant[i]));
      maxAbs = Math.max(maxAbs, Math.abs(viaDequant[i]));
    }
    expect(maxAbs).toBeGreaterThan(0.1);
    expect(maxErr).toBeLessThan(1e-4 * maxAbs);
  });
});

describe('asValues: a webquant output as a checkpoint of its values', () => {
  it('presents each quantized tensor as F32 (whole and by rows, double quantization included) and leaves the rest as stored', async () => {
    const built = await build(specs);
    const bytes = await webquantSafetensors(specs, built);
    const ck = await openCheckpoint(fromBuffer(bytes, 'wq.safetensors'));
    const v = await asValues(ck);
    expect(v.tensors.map((t) => [t.name, t.dtype])).toEqual([
      // the Q8_0 tensor kept as U8 bytes is a GGUF block type to the serving API: its values too
      ['a.q4_k', 'F32'], ['b.nf4dq', 'F32'], ['c.int4', 'F32'], ['d.affine', 'F32'], ['e.fp8t', 'F32'], ['f.mxfp4', 'F32'], ['g.plain', 'F32'], ['h.kept_q8_0', 'F32'],
    ]);
    for (const s of specs) {
      const q = built.quant.get(s.name);
      if (!q) continue;
      const want = await dequantize(q);
      expect([...await v.readF32(s.name)], s.name).toEqual([...want]);
      // rows 1.. (two where the tensor has them)
      const n = Math.min(2, s.shape[0] - 1);
      const rows = await v.readRows!(s.name, 1, n);
      expect([...rows.values], `${s.name} rows`).toEqual([...want.subarray(s.shape[1], (1 + n) * s.shape[1])]);
      expect(v.locate!(s.name, 0, 1), s.name).toBeUndefined();
    }
    expect([...await v.readF32('g.plain')]).toEqual([...built.values.get('g.plain')!]);
    expect(v.locate!('g.plain', 0, 1)).toBeDefined();
    // anything else is returned as it is
    const gguf = await openCheckpoint(fromBuffer(await collect(writeGguf({ metadata: [], tensors: [{ name: 't', ggmlType: 'F32', shape: [2], data: new Float32Array(2) }] })), 'g.gguf'));
    expect(await asValues(gguf)).toBe(gguf);
  });
});
