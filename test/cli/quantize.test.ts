import { beforeAll, describe, expect, it } from 'vitest';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SHARED, hasShared } from '../helpers/shared.js';
import { cli, ensureBuilt, tempDir, workerUrl } from './helpers.js';
import { quantizeCheckpoint } from '../../src/pipeline/pipeline.js';
import { ggufContainer } from '../../src/pipeline/container.js';
import type { Sink } from '../../src/pipeline/sink.js';
import { resolvePlan } from '../../src/plan/plan.js';
import { getPreset } from '../../src/plan/presets.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { openSafetensors, openSafetensorsIndex } from '../../src/io/safetensors.js';
import { fp8Weights, nvfp4Weights } from '../helpers/data.js';
import { splitGguf } from '../helpers/gguf-split.js';
import { readConfig } from '../../src/io/config.js';
import type { Checkpoint } from '../../src/io/checkpoint.js';
import { openGguf, type GgufCheckpoint } from '../../src/io/gguf.js';
import { fromPath } from '../../src/io/node.js';
import { ggufView, llamaConfigFrom } from '../../src/convert/hf-view.js';
import { dequantize, quantize } from '../../src/quantize.js';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { writeGguf } from '../../src/io/gguf-writer.js';
import { collect } from '../../src/io/stream.js';
import { openQuantized } from '../../src/serve/index.js';
import { gpuHooks } from '../../src/webgpu/run.js';
import { resetGpu } from '../../src/webgpu/device.js';
import { resetBackendState } from '../../src/webgpu/backend.js';

const DIR = join(SHARED, 'models/stories260K');
const MODEL = join(DIR, 'model.safetensors');
const GGUF1 = join(DIR, 'tinyllamas-stories-260k-f32.gguf');

const openFile = (p: string) => openCheckpoint(fromBuffer(new Uint8Array(readFileSync(p)), p));
const same = (a: ArrayBufferView, b: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
const leftovers = (dir: string) => readdirSync(dir).filter((f) => f.includes('.partial-'));

async function hfView(): Promise<Checkpoint> {
  return ggufView(await openFile(MODEL), llamaConfigFrom(await readConfig(fromBuffer(new Uint8Array(readFileSync(join(DIR, 'config.json'))), 'config.json'))));
}

/** Every tensor of a GGUF output against quantize()/dequantize() of the same input tensor. */
async function checkGguf(out: Checkpoint, src: Checkpoint): Promise<Record<string, number>> {
  const types: Record<string, number> = {};
  expect(out.tensors.map((t) => t.name).sort()).toEqual(src.tensors.map((t) => t.name).sort());
  for (const t of out.tensors) {
    types[t.dtype] = (types[t.dtype] ?? 0) + 1;
    const s = src.tensor(t.name);
    expect(t.shape, t.name).toEqual(s.shape);
    if (t.dtype === s.dtype) {
      expect(same(await out.readRaw(t.name), await src.readRaw(t.name)), t.name).toBe(true);
      continue;
    }
    const values = await src.readF32(t.name);
    const q = await quantize(values, { format: t.dtype.toLowerCase(), rowLength: t.shape[t.shape.length - 1], name: t.name });
    expect(same(await out.readRaw(t.name), q.data), `${t.name} bytes`).toBe(true);
    expect(same(await out.readF32(t.name), await dequantize(q)), `${t.name} values`).toBe(true);
  }
  return types;
}

describe.skipIf(!hasShared)('webquant quantize', () => {
  let tmp: string;
  beforeAll(async () => {
    await ensureBuilt();
    tmp = tempDir('cli-q');
  }, 300_000);

  it('stories260K safetensors -> GGUF q8_0 and q4_k_m, equal to quantize() tensor by tensor', async () => {
    const view = await hfView();
    for (const [preset, ftype] of [['q8_0', 7], ['q4_k_m', 15]] as const) {
      const out = join(tmp, `s-${preset}.gguf`);
      const r = await cli(['quantize', MODEL, '-o', out, '--preset', preset, '--workers', '2'], { cwd: tmp });
      expect(r.code).toBe(0);
      // Rows of 172 values (ffn_down) fit no 32- or 256-value block: one grouped warning per chain.
      const warnings = r.stderr.trim().split('\n');
      expect(warnings.length).toBeLessThanOrEqual(4);
      expect(r.stderr).toMatch(/^webquant: warning: \d tensors q\d_\w+ -> f16 \(the row length is not a multiple of the block\): blk\.\d\.ffn_down\.weight, /m);
      expect(r.stdout).toMatch(/role\s+quantized\s+bytes in\s+bytes out\s+RMSE\s+SQNR dB/);
      expect(r.stdout).toMatch(/^total\s+36\/47\s/m);
      expect(r.stdout).toContain('no_vocab');
      const g = (await openFile(out)) as GgufCheckpoint;
      expect(g.version).toBe(3);
      expect(g.metadata['general.file_type']).toBe(ftype);
      expect(g.metadata['general.quantization_version']).toBe(2);
      expect(g.metadata['tokenizer.ggml.model']).toBe('no_vocab');
      expect(g.metadata['general.architecture']).toBe('llama');
      expect(g.metadata['llama.attention.head_count_kv']).toBe(4);
      expect(g.metadata['llama.block_count']).toBe(5);
      const types = await checkGguf(g, view);
      if (preset === 'q8_0') expect(types).toEqual({ Q8_0: 31, F16: 5, F32: 11 });
      // Rows of 64 / 172 values: Q4_K falls back to Q5_0, Q6_K to Q8_0, and 172 to F16 (llama-quantize).
      else expect(Object.keys(types).sort()).toEqual(['F16', 'F32', 'Q5_0', 'Q8_0']);
    }
    expect(leftovers(tmp)).toEqual([]);
  });

  it('stories260K safetensors -> safetensors nf4 and int4w, sections equal to quantize()', async () => {
    const src = await openFile(MODEL);
    for (const preset of ['nf4', 'int4w']) {
      const out = join(tmp, `s-${preset}.safetensors`);
      const r = await cli(['quantize', MODEL, '-o', out, '--preset', preset, '-j', '2'], { cwd: tmp });
      expect(r.code, r.stderr).toBe(0);
      const ck = await openFile(out);
      const meta = JSON.parse(ck.metadata['webquant.quantization'] as string) as Record<string, { format: string; shape: number[]; options: never; sections: string[] }>;
      let quantized = 0;
      for (const t of src.tensors) {
        const m = meta[t.name];
        if (!m) {
          expect(same(await ck.readRaw(t.name), await src.readRaw(t.name)), t.name).toBe(true);
          continue;
        }
        quantized++;
        expect(m.format).toBe(preset === 'nf4' ? 'nf4' : 'int4');
        expect(m.shape).toEqual(t.shape);
        const rowLength = t.shape[t.shape.length - 1];
        const o = m.options as { groupSize: number; granularity: 'group' | 'channel' };
        // int4 groups of 128 do not divide rows of 64 or 172: the plan falls back (smaller groups, per channel).
        if (preset === 'int4w' && rowLength % 128 === 0) expect([o.groupSize, o.granularity]).toEqual([128, 'group']);
        const q = await quantize(await src.readF32(t.name), {
          format: m.format, rowLength, name: t.name, ...(preset === 'int4w' ? { groupSize: o.groupSize, granularity: o.granularity } : {}),
        });
        expect(q.options).toEqual(m.options);
        const stored = await collect(await Promise.all(m.sections.map((s) => ck.readRaw(s))));
        expect(same(stored, q.data), t.name).toBe(true);
      }
      // 36 matrices minus the (tied) embedding the safetensors presets keep, minus for nf4 (blocks of
      // 64) the ffn_down matrices with rows of 172, which are kept.
      expect(quantized).toBe(preset === 'nf4' ? 30 : 35);
    }
  });

  it('GGUF v1 input -> GGUF q4_0 keeps every key, updates the file type', async () => {
    const out = join(tmp, 'g-q4_0.gguf');
    const r = await cli(['quantize', GGUF1, '-o', out, '--preset', 'q4_0', '--json'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const rep = JSON.parse(r.stdout);
    expect(rep.container).toBe('gguf');
    expect(rep.fileType).toBe(2);
    const src = (await openFile(GGUF1)) as GgufCheckpoint;
    const g = (await openFile(out)) as GgufCheckpoint;
    for (const kv of src.kv) {
      if (kv.key === 'general.file_type') continue;
      expect(g.kv.find((x) => x.key === kv.key), kv.key).toEqual(kv);
    }
    expect(g.metadata['general.file_type']).toBe(2);
    expect(g.metadata['general.quantization_version']).toBe(2);
    const types = await checkGguf(g, src);
    expect(types).toEqual({ Q4_0: 31, F16: 5, Q8_0: 1, F32: 11 }); // output.weight: Q6_K -> Q8_0 on 64-value rows
  });

  it("a GGUF with MXFP4 experts (gpt-oss's MXFP4_MOE layout) requantizes from their MXFP4 values, and back to MXFP4 without loss", async () => {
    const E = 4, H = 64, FF = 96, V = 128;
    const wave = (n: number, s: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 12.9898 + s) * 0.1);
    const tensors: { name: string; ggmlType: number; shape: number[]; data: Uint8Array }[] = [];
    const f32 = (name: string, shape: number[], s: number) => tensors.push({ name, ggmlType: 0, shape, data: new Uint8Array(wave(shape.reduce((a, b) => a * b, 1), s).buffer) });
    f32('token_embd.weight', [V, H], 1);
    f32('blk.0.attn_norm.weight', [H], 2);
    f32('blk.0.attn_sinks.weight', [4], 3);
    f32('blk.0.attn_q.weight', [H, H], 4);
    f32('blk.0.attn_q.bias', [H], 5);
    f32('blk.0.ffn_gate_inp.weight', [E, H], 6);
    f32('blk.0.ffn_gate_inp.bias', [E], 7);
    for (const [i, p] of ['gate', 'up', 'down'].entries()) {
      const shape = p === 'down' ? [E, H, FF] : [E, FF, H];
      const q = await quantize(wave(E * FF * H, 8 + i), { format: 'mxfp4_gguf', rowLength: shape[2] });
      tensors.push({ name: `blk.0.ffn_${p}_exps.weight`, ggmlType: 39, shape, data: q.data });
      f32(`blk.0.ffn_${p}_exps.bias`, [E, shape[1]], 11 + i);
    }
    f32('output.weight', [V, H], 14);
    const input = join(tmp, 'oss-mxfp4.gguf');
    writeFileSync(input, await collect(writeGguf({ metadata: [{ key: 'general.architecture', type: 'string', value: 'gpt-oss' }], tensors })));
    const src = await openFile(input);
    expect(src.tensor('blk.0.ffn_up_exps.weight').dtype).toBe('MXFP4');

    const q8 = join(tmp, 'oss-q8_0.gguf');
    let r = await cli(['quantize', input, '-o', q8, '--format', 'q8_0'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const types = await checkGguf(await openFile(q8), src);
    expect(types.Q8_0).toBeGreaterThanOrEqual(4);

    const mx = join(tmp, 'oss-mxfp4-again.gguf');
    r = await cli(['quantize', input, '-o', mx, '--format', 'mxfp4_gguf'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const again = await openFile(mx);
    for (const p of ['gate', 'up', 'down']) {
      const name = `blk.0.ffn_${p}_exps.weight`;
      expect(again.tensor(name).dtype).toBe('MXFP4');
      expect(same(await again.readF32(name), await src.readF32(name)), name).toBe(true);
    }
  });

  it('--format alone writes the llama_ftype llama.cpp\'s loader guesses for the type (NVFP4 39, Q1_0 40, Q2_0 41)', async () => {
    for (const [format, ftype, dtype] of [['nvfp4_gguf', 39, 'NVFP4'], ['q1_0', 40, 'F16'], ['q2_0', 41, 'Q2_0']] as const) {
      const out = join(tmp, `s-${format}.gguf`);
      const r = await cli(['quantize', MODEL, '-o', out, '--format', format], { cwd: tmp });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).not.toMatch(/names no llama_ftype/);
      const g = (await openFile(out)) as GgufCheckpoint;
      expect(g.metadata['general.file_type'], format).toBe(ftype);
      // stories260K's rows are 64 wide: Q1_0's 128-value blocks do not fit them.
      expect(g.tensor('blk.0.ffn_up.weight').dtype, format).toBe(dtype);
    }
  });

  it('--json prints one parseable report and JSON progress lines on stderr', async () => {
    const out = join(tmp, 'j.safetensors');
    const r = await cli(['quantize', MODEL, '-o', out, '--format', 'int8', '--json'], { cwd: tmp });
    expect(r.code).toBe(0);
    const rep = JSON.parse(r.stdout);
    expect(rep.command).toBe('quantize');
    expect(rep.tensors).toHaveLength(47);
    expect(rep.totals.fileBytes).toBe(readFileSync(out).byteLength);
    expect(rep.roles.map((x: { role: string }) => x.role).sort()).toEqual(['attention', 'embedding', 'ffn', 'norm']);
    const lines = r.stderr.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.filter((l) => l.progress === 'tensor')).toHaveLength(47);
    // --fsync flushes before the rename (sinks.test.ts checks the flush): the same file.
    const synced = join(tmp, 'j-fsync.safetensors');
    const f = await cli(['quantize', MODEL, '-o', synced, '--format', 'int8', '--fsync', '--json'], { cwd: tmp });
    expect(f.code, f.stderr).toBe(0);
    expect(same(readFileSync(synced), readFileSync(out))).toBe(true);
  });

  it('draws a progress bar on a terminal', async () => {
    const r = await cli(['quantize', MODEL, '-o', join(tmp, 'tty.gguf'), '--format', 'q8_0'], { cwd: tmp, tty: true });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/\r\x1b\[K\[#+\.*\]\s+\d+% \d+\/47/);
    expect(r.stdout).not.toMatch(/^\[ ?\d+\/47\]/m);
  });

  it('reads a sharded checkpoint from its directory and from its index', async () => {
    const shard = tempDir('cli-shard');
    const src = await openFile(MODEL);
    const names = src.tensors.map((t) => t.name);
    const parts = [names.slice(0, 20), names.slice(20)];
    const weightMap: Record<string, string> = {};
    for (let i = 0; i < 2; i++) {
      const file = `model-0000${i + 1}-of-00002.safetensors`;
      const tensors = await Promise.all(parts[i].map(async (n) => ({ name: n, dtype: 'F32', shape: src.tensor(n).shape, data: await src.readRaw(n) })));
      writeFileSync(join(shard, file), await collect(writeSafetensors({ tensors })));
      for (const n of parts[i]) weightMap[n] = file;
    }
    writeFileSync(join(shard, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }));
    copyFileSync(join(DIR, 'config.json'), join(shard, 'config.json'));
    const a = await cli(['quantize', shard, '-o', join(tmp, 'shard-dir.gguf'), '--preset', 'q8_0'], { cwd: tmp });
    expect(a.code, a.stderr).toBe(0);
    const b = await cli(['quantize', join(shard, 'model.safetensors.index.json'), '-o', join(tmp, 'shard-idx.gguf'), '--preset', 'q8_0'], { cwd: tmp });
    expect(b.code, b.stderr).toBe(0);
    const one = await cli(['quantize', MODEL, '-o', join(tmp, 'single.gguf'), '--preset', 'q8_0'], { cwd: tmp });
    expect(one.code).toBe(0);
    const x = await openFile(join(tmp, 'shard-dir.gguf')), y = await openFile(join(tmp, 'shard-idx.gguf')), z = await openFile(join(tmp, 'single.gguf'));
    expect(same(readFileSync(join(tmp, 'shard-dir.gguf')), readFileSync(join(tmp, 'shard-idx.gguf')))).toBe(true);
    for (const t of z.tensors) {
      expect(same(await x.readRaw(t.name), await z.readRaw(t.name)), t.name).toBe(true);
      expect(same(await y.readRaw(t.name), await z.readRaw(t.name)), t.name).toBe(true);
    }
  });

  it('the GGUF view streams row chunks (permuted q/k included) through the pipeline: same bytes as whole tensors', async () => {
    const view = await hfView();
    expect(typeof view.readRows).toBe('function');
    const plan = resolvePlan(getPreset('q8_0').plan, view.tensors);
    let ranged = 0;
    const counted: Checkpoint = Object.assign(Object.create(view) as Checkpoint, {
      readRows: (n: string, r0: number, k: number) => { ranged++; return view.readRows!(n, r0, k); },
    });
    const runOnce = async (input: Checkpoint, maxInFlightBytes?: number) => {
      const parts: Uint8Array[] = [];
      const sink: Sink = { write: async (c) => { parts.push(c.slice()); }, close: async () => undefined, abort: async () => undefined };
      await quantizeCheckpoint({ input, plan, sink, container: ggufContainer(), workers: 2, maxInFlightBytes, poolOptions: { workerUrl: workerUrl() } });
      return collect(parts);
    };
    const whole = await runOnce(view);
    const chunked = await runOnce(counted, 6 << 10);
    expect(ranged).toBeGreaterThan(10);
    expect(same(whole, chunked)).toBe(true);
  });

  it('FP8 block-scaled weights (scales in another shard, block size from config.json) -> GGUF: the bytes of their F32 values, whole and in row chunks', async () => {
    const src = await openFile(MODEL);
    const tensors = await Promise.all(src.tensors.map(async (t) => ({ name: t.name, dtype: 'F32', shape: t.shape, data: await src.readF32(t.name) })));
    const fp8 = fp8Weights(tensors, 16);
    expect(fp8.filter((t) => t.dtype === 'F8_E4M3')).toHaveLength(35);
    const config = JSON.parse(readFileSync(join(DIR, 'config.json'), 'utf8'));
    // Both folders are named "model": general.name comes from the folder.
    const fp8Dir = join(tempDir('cli-fp8'), 'model'), f32Dir = join(tempDir('cli-fp8-f32'), 'model');
    mkdirSync(fp8Dir);
    mkdirSync(f32Dir);
    // Shard 1 holds the weights, shard 2 every scale.
    const shards = [fp8.filter((t) => !t.name.endsWith('_scale_inv')), fp8.filter((t) => t.name.endsWith('_scale_inv'))];
    const weightMap: Record<string, string> = {};
    for (let i = 0; i < 2; i++) {
      const file = `model-0000${i + 1}-of-00002.safetensors`;
      writeFileSync(join(fp8Dir, file), await collect(writeSafetensors({ tensors: shards[i] })));
      for (const t of shards[i]) weightMap[t.name] = file;
    }
    writeFileSync(join(fp8Dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }));
    writeFileSync(join(fp8Dir, 'config.json'), JSON.stringify({ ...config, quantization_config: { quant_method: 'fp8', fmt: 'e4m3', weight_block_size: [16, 16] } }));
    // The same checkpoint with every FP8 weight as its F32 values (codes times scales).
    const st = await openSafetensors(fromBuffer(await collect(writeSafetensors({ tensors: fp8 })), 'fp8.safetensors'), { fp8BlockSize: [16, 16] });
    const plain = await Promise.all(tensors.map(async (t) => ({ ...t, data: await st.readF32(t.name) })));
    writeFileSync(join(f32Dir, 'model.safetensors'), await collect(writeSafetensors({ tensors: plain })));
    writeFileSync(join(f32Dir, 'config.json'), JSON.stringify(config));
    for (const [dir, out] of [[fp8Dir, 'fp8.gguf'], [f32Dir, 'f32.gguf']]) {
      const r = await cli(['quantize', dir, '-o', join(tmp, out), '--preset', 'q8_0'], { cwd: tmp });
      expect(r.code, r.stderr).toBe(0);
    }
    expect(same(readFileSync(join(tmp, 'fp8.gguf')), readFileSync(join(tmp, 'f32.gguf')))).toBe(true);
    // Row chunks of the FP8 view (ranged FP8 reads with their scale rows): the bytes of the F32
    // checkpoint's view quantized whole.
    const cfg = llamaConfigFrom(await readConfig(fromBuffer(readFileSync(join(fp8Dir, 'config.json')), 'config.json')));
    const index = await openSafetensorsIndex(fromBuffer(readFileSync(join(fp8Dir, 'model.safetensors.index.json')), 'index.json'),
      (f) => fromBuffer(readFileSync(join(fp8Dir, f)), f), { fp8BlockSize: [16, 16] });
    let ranged = 0;
    const view = ggufView(index, cfg);
    const counted: Checkpoint = Object.assign(Object.create(view) as Checkpoint, {
      readRows: (n: string, r0: number, k: number) => { ranged++; return view.readRows!(n, r0, k); },
    });
    const run = async (input: Checkpoint, maxInFlightBytes?: number) => {
      const parts: Uint8Array[] = [];
      const sink: Sink = { write: async (c) => { parts.push(c.slice()); }, close: async () => undefined, abort: async () => undefined };
      await quantizeCheckpoint({ input, plan: resolvePlan(getPreset('q8_0').plan, input.tensors), sink, container: ggufContainer(), workers: 2, maxInFlightBytes, poolOptions: { workerUrl: workerUrl() } });
      return collect(parts);
    };
    const chunked = await run(counted, 6 << 10);
    expect(ranged).toBeGreaterThan(10);
    expect(same(chunked, await run(ggufView(await openFile(join(f32Dir, 'model.safetensors')), cfg)))).toBe(true);
  });

  it('NVFP4 weights (ModelOpt and compressed-tensors releases) -> GGUF and safetensors: the bytes of their F32 values; eval reads them', async () => {
    const src = await openFile(MODEL);
    const tensors = await Promise.all(src.tensors.map(async (t) => ({ name: t.name, dtype: 'F32', shape: t.shape, data: await src.readF32(t.name) })));
    const config = JSON.parse(readFileSync(join(DIR, 'config.json'), 'utf8'));
    for (const style of ['modelopt', 'compressed-tensors'] as const) {
      const fp4 = nvfp4Weights(tensors, style);
      // w2 (rows of 172) stays F32: NVFP4 needs rows of a multiple of 16.
      expect(fp4.filter((t) => t.dtype === 'U8'), style).toHaveLength(30);
      const fp4Dir = join(tempDir(`cli-${style}`), 'model'), f32Dir = join(tempDir(`cli-${style}-f32`), 'model');
      mkdirSync(fp4Dir);
      mkdirSync(f32Dir);
      writeFileSync(join(fp4Dir, 'model.safetensors'), await collect(writeSafetensors({ tensors: fp4 })));
      writeFileSync(join(fp4Dir, 'config.json'), JSON.stringify({ ...config, quantization_config: { quant_method: style === 'modelopt' ? 'modelopt' : 'compressed-tensors', quant_algo: 'NVFP4' } }));
      const st = await openSafetensors(fromBuffer(readFileSync(join(fp4Dir, 'model.safetensors')), 'fp4.safetensors'));
      const plain = await Promise.all(tensors.map(async (t) => ({ ...t, data: await st.readF32(t.name) })));
      expect(plain.some((t, i) => !same(t.data, tensors[i].data)), 'the codes lose something').toBe(true);
      writeFileSync(join(f32Dir, 'model.safetensors'), await collect(writeSafetensors({ tensors: plain })));
      writeFileSync(join(f32Dir, 'config.json'), JSON.stringify(config));
      for (const [dir, out] of [[fp4Dir, 'fp4.gguf'], [f32Dir, 'f32.gguf'], [fp4Dir, 'fp4.safetensors'], [f32Dir, 'f32.safetensors']]) {
        const r = await cli(['quantize', dir, '-o', join(tmp, out), '--preset', out.endsWith('.gguf') ? 'q8_0' : 'int8'], { cwd: tmp });
        expect(r.code, r.stderr).toBe(0);
      }
      expect(same(readFileSync(join(tmp, 'fp4.gguf')), readFileSync(join(tmp, 'f32.gguf'))), style).toBe(true);
      // safetensors output: the same quantized tensors; the scales are kept as they are.
      const [a, b] = await Promise.all([openFile(join(tmp, 'fp4.safetensors')), openFile(join(tmp, 'f32.safetensors'))]);
      for (const t of b.tensors) expect(same(await a.readRaw(t.name), await b.readRaw(t.name)), `${style} ${t.name}`).toBe(true);
      expect(a.tensors.filter((t) => !b.tensors.some((u) => u.name === t.name)).every((t) => /_(scale|scale_2|global_scale)$/.test(t.name)), style).toBe(true);
      // Requantized to nvfp4, whose scales take the names of the input's: those are replaced.
      for (const [dir, out] of [[fp4Dir, 'fp4-nv.safetensors'], [f32Dir, 'f32-nv.safetensors']]) {
        const r = await cli(['quantize', dir, '-o', join(tmp, out), '--format', 'nvfp4'], { cwd: tmp });
        expect(r.code, r.stderr).toBe(0);
        if (dir === fp4Dir) expect(r.stderr).toMatch(style === 'modelopt' ? /60 input tensors are replaced by the new scales/ : /30 input tensors are replaced by the new scales/);
      }
      const [c, d] = await Promise.all([openFile(join(tmp, 'fp4-nv.safetensors')), openFile(join(tmp, 'f32-nv.safetensors'))]);
      for (const t of d.tensors) expect(same(await c.readRaw(t.name), await d.readRaw(t.name)), `${style} nvfp4 ${t.name}`).toBe(true);
      expect(c.tensors.filter((t) => !d.tensors.some((u) => u.name === t.name)).map((t) => t.name).every((n) => n.endsWith('_global_scale')), style).toBe(true);
      const tokens = readdirSync(join(SHARED, 'eval')).find((f) => f.endsWith('.u16'))!;
      const e = await cli(['eval', '-m', fp4Dir, '-q', join(tmp, 'f32.gguf'), '-t', join(SHARED, 'eval', tokens), '--max-docs', '2', '--json'], { cwd: tmp });
      expect(e.code, e.stderr).toBe(0);
      const f = await cli(['eval', '-m', f32Dir, '-q', join(tmp, 'f32.gguf'), '-t', join(SHARED, 'eval', tokens), '--max-docs', '2', '--json'], { cwd: tmp });
      expect(JSON.parse(e.stdout).original, style).toEqual(JSON.parse(f.stdout).original);
    }
  });

  it('nvfp4 -> safetensors in ModelOpt\'s names and dtypes: served, read back as an NVFP4 release, evaluated', async () => {
    const plan = join(tmp, 'nvfp4.json');
    writeFileSync(plan, JSON.stringify({ default: { format: 'nvfp4' }, rules: [] }));
    const out = join(tmp, 'nvfp4.safetensors');
    const r = await cli(['quantize', DIR, '-o', out, '--rules', plan, '--json'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const quantized = JSON.parse(r.stdout).tensors.filter((t: { format: string }) => t.format === 'nvfp4').map((t: { name: string }) => t.name) as string[];
    // The config.json entry runtimes need, naming the matrices left as they were (down_proj: rows of 172).
    const note = (JSON.parse(r.stdout).notes as string[]).find((n) => n.includes('quantization_config'))!;
    // Weights only (no --activations): ModelOpt's W4A16_NVFP4, as config.json spells it ("ignore").
    expect(JSON.parse(note.slice(note.indexOf('{'), note.indexOf(' (written for you')))).toMatchObject({
      quant_method: 'modelopt', quant_algo: 'W4A16_NVFP4', group_size: 16, ignore: [...[0, 1, 2, 3, 4].map((l) => `model.layers.${l}.mlp.down_proj`), 'lm_head'],
    });
    expect(quantized.length).toBeGreaterThan(20);
    const src = await openFile(MODEL);
    const bytes = new Uint8Array(readFileSync(out));
    const st = await openSafetensors(fromBuffer(bytes, 'nvfp4.safetensors'));
    const served = await openQuantized(fromBuffer(bytes, 'nvfp4.safetensors'));
    const stripped: { name: string; dtype: string; shape: number[]; data: Uint8Array }[] = [];
    for (const t of st.tensors) stripped.push({ name: t.name, dtype: t.dtype, shape: t.shape, data: await st.readRaw(t.name) });
    // The same entries without webquant's metadata: what a ModelOpt NVFP4 release looks like.
    const release = await openSafetensors(fromBuffer(await collect(writeSafetensors({ tensors: stripped })), 'release.safetensors'));
    for (const name of quantized) {
      const info = src.tensors.find((t) => t.name === name)!;
      const [rows, cols] = info.shape;
      const entry = (n: string) => st.tensors.find((t) => t.name === n);
      expect([entry(name)?.dtype, entry(name)?.shape], name).toEqual(['U8', [rows, cols / 2]]);
      expect([entry(`${name}_scale`)?.dtype, entry(`${name}_scale_2`)?.dtype, entry(`${name}_scale_2`)?.shape], name).toEqual(['F8_E4M3', 'F32', []]);
      expect(entry(`${name}_scale`)?.shape).toEqual([rows, cols / 16]);
      // q/k/v and gate/up share one scale_2 (the pipeline test checks which); with it, the bytes are quantize()'s.
      const tensorScale = new DataView((await st.readRaw(`${name}_scale_2`)).slice().buffer).getFloat32(0, true);
      const want = await dequantize(await quantize(await src.readF32(name), { format: 'nvfp4', rowLength: cols, tensorScale }));
      expect(same(await served.tensor(name).dequantize(), want), `${name} served`).toBe(true);
      expect(release.tensors.find((t) => t.name === name)?.dtype).toBe('F4_E2M1');
      expect(same(await release.readF32(name), want), `${name} as a release`).toBe(true);
    }
    const tokens = readdirSync(join(SHARED, 'eval')).find((f) => f.endsWith('.u16'))!;
    const e = await cli(['eval', '-m', DIR, '-q', out, '-t', join(SHARED, 'eval', tokens), '--max-docs', '2', '--json'], { cwd: tmp });
    expect(e.code, e.stderr).toBe(0);
    expect(JSON.parse(e.stdout).klDivergence).toBeGreaterThan(0);
  });

  it('combines a rules file with a preset (the file first) and uses a plan file alone', async () => {
    const rules = join(tmp, 'plan.json');
    writeFileSync(rules, JSON.stringify({ rules: [{ role: 'attention', kind: 'v', scheme: { format: 'q8_0' } }] }));
    const r = await cli(['quantize', MODEL, '-o', join(tmp, 'rules.gguf'), '--preset', 'q4_0', '--rules', rules, '--json'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const rep = JSON.parse(r.stdout);
    const fmt = (n: string) => rep.tensors.find((t: { name: string }) => t.name === n).format;
    expect(fmt('blk.0.attn_v.weight')).toBe('q8_0');
    expect(fmt('blk.0.attn_q.weight')).toBe('q4_0');
    writeFileSync(rules, JSON.stringify({ default: { format: 'int8', granularity: 'channel' }, rules: [{ role: 'ffn', scheme: 'keep' }] }));
    const s = await cli(['quantize', MODEL, '-o', join(tmp, 'rules.safetensors'), '--rules', rules, '--json'], { cwd: tmp });
    expect(s.code, s.stderr).toBe(0);
    const rep2 = JSON.parse(s.stdout);
    expect(rep2.tensors.find((t: { name: string }) => t.name === 'model.layers.0.mlp.up_proj.weight').format).toBe('keep');
    expect(rep2.tensors.find((t: { name: string }) => t.name === 'model.layers.0.self_attn.q_proj.weight').format).toBe('int8');
  });
});

describe.skipIf(!hasShared)('webquant quantize: split GGUF input', () => {
  it("reads llama.cpp's gguf-split files (by the first file or their folder) as the whole file: the same output bytes", async () => {
    await ensureBuilt();
    const tmp = tempDir('cli-split');
    const whole = await openFile(GGUF1) as GgufCheckpoint;
    const dir = join(tmp, 'split');
    mkdirSync(dir);
    for (const [name, bytes] of await splitGguf(whole, 'stories', [10, 25])) writeFileSync(join(dir, name), bytes);
    expect(readdirSync(dir).sort()).toEqual(['stories-00001-of-00003.gguf', 'stories-00002-of-00003.gguf', 'stories-00003-of-00003.gguf']);
    const ref = join(tmp, 'whole.gguf');
    expect((await cli(['quantize', GGUF1, '-o', ref, '--preset', 'q8_0'], { cwd: tmp })).code).toBe(0);
    for (const input of [dir, join(dir, 'stories-00001-of-00003.gguf')]) {
      const out = join(tmp, 'from-split.gguf');
      const r = await cli(['quantize', input, '-o', out, '--preset', 'q8_0', '-j', '2'], { cwd: tmp });
      expect(r.code, r.stderr).toBe(0);
      expect(same(readFileSync(out), readFileSync(ref)), input).toBe(true);
    }
    const ins = await cli(['inspect', dir, '--json'], { cwd: tmp });
    expect(JSON.parse(ins.stdout).splits).toEqual(['stories-00001-of-00003.gguf', 'stories-00002-of-00003.gguf', 'stories-00003-of-00003.gguf']);
    expect((await cli(['inspect', dir], { cwd: tmp })).stdout).toMatch(/on disk in 3 split files/);
    // A later file, or a missing one: exit 2 naming it, no output.
    let r = await cli(['quantize', join(dir, 'stories-00002-of-00003.gguf'), '-o', join(tmp, 'bad.gguf'), '--preset', 'q8_0'], { cwd: tmp });
    expect([r.code, r.stderr]).toEqual([2, expect.stringMatching(/split 2 of 3: open the first, stories-00001-of-00003\.gguf/)]);
    rmSync(join(dir, 'stories-00003-of-00003.gguf'));
    r = await cli(['quantize', dir, '-o', join(tmp, 'bad.gguf'), '--preset', 'q8_0'], { cwd: tmp });
    expect([r.code, r.stderr]).toEqual([2, expect.stringMatching(/split stories-00003-of-00003\.gguf of .* does not exist/)]);
    expect(existsSync(join(tmp, 'bad.gguf'))).toBe(false);
  }, 120_000);
});

describe.skipIf(!hasShared)("webquant quantize: llama-quantize's overrides", () => {
  let tmp: string;
  beforeAll(async () => {
    await ensureBuilt();
    tmp = tempDir('cli-over');
  }, 300_000);
  const formats = async (args: string[], input = MODEL) => {
    const r = await cli(['quantize', input, '-o', join(tmp, 'o.gguf'), ...args, '--json'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    return Object.fromEntries(JSON.parse(r.stdout).tensors.map((t: { name: string; format: string }) => [t.name, t.format])) as Record<string, string>;
  };

  it('--tensor-type (first match wins, before the preset), --token-embedding-type and --output-tensor-type on a tied embedding', async () => {
    const f = await formats(['--preset', 'q8_0', '--tensor-type', 'attn_v=q4_0', '--tensor-type', 'attn_v|ffn_up=Q5_0', '--token-embedding-type', 'q4_1']);
    expect([f['blk.0.attn_v.weight'], f['blk.4.ffn_up.weight'], f['token_embd.weight'], f['blk.0.attn_q.weight']]).toEqual(['q4_0', 'q5_0', 'q4_1', 'q8_0']);
    // llama.cpp gives a tied token embedding the output type after the patterns, and not with --pure.
    expect((await formats(['--preset', 'q4_0', '--output-tensor-type', 'q5_1']))['token_embd.weight']).toBe('q5_1');
    expect((await formats(['--preset', 'q4_0', '--output-tensor-type', 'q5_1', '--tensor-type', 'token_embd=q8_0']))['token_embd.weight']).toBe('q8_0');
    const pure = await formats(['--preset', 'q4_0', '--output-tensor-type', 'q5_1', '--pure']);
    // Without --pure the preset's output rule gives the tied embedding Q6_K (Q8_0 on these 64-wide rows).
    expect([pure['token_embd.weight'], (await formats(['--preset', 'q4_0']))['token_embd.weight']]).toEqual(['q4_0', 'q8_0']);
  }, 120_000);

  it('--leave-output-tensor and --output-tensor-type on an untied output head; --pure drops the mixture', async () => {
    const input = join(tmp, 'untied.gguf');
    const t = (name: string, rows: number) => ({ name, ggmlType: 'F32' as const, shape: [rows, 256], data: Float32Array.from({ length: rows * 256 }, (_, i) => Math.sin(i * 0.37)) });
    const tensors = [t('token_embd.weight', 64), t('blk.0.attn_v.weight', 32), t('blk.0.ffn_down.weight', 32), t('output.weight', 64)];
    writeFileSync(input, await collect(writeGguf({ metadata: [{ key: 'general.architecture', type: 'string', value: 'llama' }], tensors })));
    const kept = await formats(['--preset', 'q4_k_m', '--leave-output-tensor', '--output-tensor-type', 'q8_0'], input);
    expect([kept['output.weight'], kept['token_embd.weight'], kept['blk.0.attn_v.weight']]).toEqual(['keep', 'q4_k', 'q6_k']);
    const out = await formats(['--preset', 'q4_k_m', '--output-tensor-type', 'q8_0', '--pure'], input);
    expect([out['output.weight'], out['token_embd.weight'], out['blk.0.attn_v.weight'], out['blk.0.ffn_down.weight']]).toEqual(['q8_0', 'q4_k', 'q4_k', 'q4_k']);
  }, 120_000);

  it('--override-kv sets GGUF keys as llama-quantize does (int as u32 of its magnitude, float as f32), last', async () => {
    const out = join(tmp, 'kv.gguf');
    const r = await cli(['quantize', GGUF1, '-o', out, '--preset', 'q8_0', '--override-kv', 'general.name=str:hello = world', '--override-kv', 'llama.context_length=int:-4096',
      '--override-kv', 'tokenizer.ggml.add_bos_token=bool:false', '--override-kv', 'my.scale=float:0.1'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const g = await openFile(out) as GgufCheckpoint;
    expect(g.kv.slice(-4)).toEqual([
      { key: 'general.name', type: 'string', value: 'hello = world' }, { key: 'llama.context_length', type: 'u32', value: 4096 },
      { key: 'tokenizer.ggml.add_bos_token', type: 'bool', value: false }, { key: 'my.scale', type: 'f32', value: Math.fround(0.1) },
    ].map((k) => expect.objectContaining(k)));
    expect(g.kv.filter((k) => k.key === 'general.name')).toHaveLength(1);
    for (const [v, msg] of [['general.name', /expected KEY=TYPE:VALUE/], ['a=int:1.5', /not an integer/], ['a=bool:yes', /not true or false/], ['a=float:x', /not a number/]] as const) {
      const b = await cli(['quantize', GGUF1, '-o', join(tmp, 'bad.gguf'), '--preset', 'q8_0', '--override-kv', v], { cwd: tmp });
      expect([b.code, b.stderr], v).toEqual([2, expect.stringMatching(msg)]);
    }
    const st = await cli(['quantize', MODEL, '-o', join(tmp, 'bad.safetensors'), '--preset', 'nf4', '--override-kv', 'a=int:1'], { cwd: tmp });
    expect([st.code, st.stderr]).toEqual([2, expect.stringMatching(/GGUF keys: write a \.gguf/)]);
    expect(existsSync(join(tmp, 'bad.gguf')) || existsSync(join(tmp, 'bad.safetensors'))).toBe(false);
  }, 120_000);

  it('--metadata replaces general.* keys of a Hugging Face checkpoint written as GGUF; refused elsewhere, bad files named', async () => {
    writeFileSync(join(tmp, 'meta.json'), JSON.stringify({ 'general.name': 'Stories', 'general.author': 'Someone', 'general.sampling.top_k': 5, 'general.tags': ['tiny'], 'general.weird': 1 }));
    const out = join(tmp, 'meta.gguf');
    const r = await cli(['quantize', MODEL, '-o', out, '--preset', 'q8_0', '--metadata', 'meta.json'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/meta\.json: "general\.weird" is not a key/);
    const g = await openFile(out) as GgufCheckpoint;
    const kv = new Map(g.kv.map((k) => [k.key, k.value]));
    expect([kv.get('general.name'), kv.get('general.author'), kv.get('general.sampling.top_k'), kv.get('general.tags'), kv.has('general.weird')]).toEqual(['Stories', 'Someone', 5, ['tiny'], false]);
    // --model-name wins over the file's name, and works alone.
    for (const extra of [['--metadata', 'meta.json'], []]) {
      const named = join(tmp, 'named.gguf');
      const n = await cli(['quantize', MODEL, '-o', named, '--preset', 'q8_0', '--model-name', 'Named One', ...extra], { cwd: tmp });
      expect(n.code, n.stderr).toBe(0);
      const m = new Map((await openFile(named) as GgufCheckpoint).kv.map((k) => [k.key, k.value]));
      expect([m.get('general.name'), m.get('general.author')]).toEqual(['Named One', extra.length ? 'Someone' : undefined]);
    }
    writeFileSync(join(tmp, 'bad-meta.json'), '{"general.name": 3}');
    writeFileSync(join(tmp, 'not-json.json'), '{"general.name": ');
    for (const [args, msg] of [
      [[MODEL, '-o', join(tmp, 'bad.gguf'), '--metadata', 'bad-meta.json'], /bad-meta\.json: "general\.name" must be a string/],
      [[MODEL, '-o', join(tmp, 'bad.gguf'), '--metadata', 'not-json.json'], /not-json\.json is not JSON/],
      [[MODEL, '-o', join(tmp, 'bad.gguf'), '--metadata', 'missing.json'], /cannot read the metadata file missing\.json/],
      [[GGUF1, '-o', join(tmp, 'bad.gguf'), '--metadata', 'meta.json'], /for a GGUF input, set keys with --override-kv/],
      [[MODEL, '-o', join(tmp, 'bad.safetensors'), '--preset', 'nf4', '--metadata', 'meta.json'], /write a \.gguf/],
    ] as const) {
      const b = await cli(['quantize', ...args, ...(args.includes('--preset') ? [] : ['--preset', 'q8_0'])], { cwd: tmp });
      expect([b.code, b.stderr], args.join(' ')).toEqual([expect.any(Number), expect.stringMatching(msg)]);
      expect(b.code).not.toBe(0);
    }
    expect(existsSync(join(tmp, 'bad.gguf')) || existsSync(join(tmp, 'bad.safetensors'))).toBe(false);
  }, 120_000);

  it('--tensor-type-file: its values where it stands among the --tensor-type options; patterns lower-cased as llama-quantize does', async () => {
    writeFileSync(join(tmp, 'types.txt'), 'ATTN_V=q4_0\n\n  ffn_up=q5_0 attn_q=q4_1\n');
    const f = await formats(['--preset', 'q8_0', '--tensor-type', 'attn_q=q5_1', '--tensor-type-file', 'types.txt', '--tensor-type', 'ffn_up=q4_1']);
    // attn_q: the option before the file wins; ffn_up: the file before the later option.
    expect([f['blk.0.attn_v.weight'], f['blk.0.attn_q.weight'], f['blk.0.ffn_up.weight'], f['blk.0.attn_output.weight']]).toEqual(['q4_0', 'q5_1', 'q5_0', 'q8_0']);
    const r = await cli(['quantize', MODEL, '-o', join(tmp, 'bad.gguf'), '--preset', 'q8_0', '--tensor-type-file', 'missing.txt'], { cwd: tmp });
    expect([r.code, r.stderr]).toEqual([2, expect.stringMatching(/--tensor-type-file missing\.txt/)]);
    writeFileSync(join(tmp, 'bad-types.txt'), 'attn_v=q4_0 ffn_up');
    const b = await cli(['quantize', MODEL, '-o', join(tmp, 'bad.gguf'), '--preset', 'q8_0', '--tensor-type-file', 'bad-types.txt'], { cwd: tmp });
    expect([b.code, b.stderr]).toEqual([2, expect.stringMatching(/"ffn_up": expected <regex>=<type>/)]);
  }, 120_000);

  it('--split-max-tensors / --split-max-size: the output in gguf-split files that open as the single file', async () => {
    const one = join(tmp, 'one.gguf');
    expect((await cli(['quantize', GGUF1, '-o', one, '--preset', 'q4_k_m'], { cwd: tmp })).code).toBe(0);
    const r = await cli(['quantize', GGUF1, '-o', join(tmp, 'sp.gguf'), '--preset', 'q4_k_m', '--split-max-tensors', '20', '--json'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const rep = JSON.parse(r.stdout);
    const g1 = await openFile(one) as GgufCheckpoint;
    const n = Math.ceil(g1.tensors.length / 20);
    const names = Array.from({ length: n }, (_, i) => join(tmp, `sp-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.gguf`));
    expect([rep.output, rep.files]).toEqual([names[0], names]);
    expect(rep.totals.fileBytes).toBe(names.reduce((a, f) => a + statSync(f).size, 0));
    expect(existsSync(join(tmp, 'sp.gguf'))).toBe(false);
    const g = await openGguf(fromPath(names[0]), { splits: (f) => fromPath(join(tmp, f)) });
    expect(g.tensors.map((t) => t.name)).toEqual(g1.tensors.map((t) => t.name));
    for (const t of g1.tensors) expect(same(await g.readRaw(t.name), await g1.readRaw(t.name)), t.name).toBe(true);
    expect(g.kv).toEqual(g1.kv);
    // By size: one file here.
    const s = await cli(['quantize', GGUF1, '-o', join(tmp, 'sz.gguf'), '--preset', 'q4_k_m', '--split-max-size', '1G'], { cwd: tmp });
    expect([s.code, existsSync(join(tmp, 'sz-00001-of-00001.gguf'))]).toEqual([0, true]);
    expect(leftovers(tmp)).toEqual([]);
  }, 120_000);

  it('--prune-layers: blocks dropped and renumbered, the block count set last; from safetensors too; misuse named', async () => {
    const out = join(tmp, 'pruned.gguf');
    const r = await cli(['quantize', MODEL, '-o', out, '--preset', 'q8_0', '--prune-layers', '1,3,9'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/--prune-layers: model\.safetensors has no block 9/);
    const g = await openFile(out) as GgufCheckpoint;
    const full = await openFile(GGUF1) as GgufCheckpoint;
    const blocks = (c: Checkpoint) => [...new Set(c.tensors.map((t) => /^blk\.(\d+)\./.exec(t.name)?.[1]).filter(Boolean))].map(Number).sort((a, b) => a - b);
    expect([blocks(full), blocks(g)]).toEqual([[0, 1, 2, 3, 4], [0, 1, 2]]);
    expect(g.kv[g.kv.length - 1]).toEqual(expect.objectContaining({ key: 'llama.block_count', type: 'u32', value: 3 }));
    expect(g.kv.filter((k) => k.key === 'llama.block_count')).toHaveLength(1);
    // Old block 4 is new block 2: the same bytes as a run without pruning gives block 4.
    const whole = join(tmp, 'whole.gguf');
    expect((await cli(['quantize', MODEL, '-o', whole, '--preset', 'q8_0'], { cwd: tmp })).code).toBe(0);
    const w = await openFile(whole);
    expect(same(await g.readRaw('blk.2.attn_q.weight'), await w.readRaw('blk.4.attn_q.weight'))).toBe(true);
    for (const [args, msg] of [
      [['-o', join(tmp, 'bad.safetensors'), '--preset', 'nf4', '--prune-layers', '1'], /--prune-layers renumbers GGUF blocks: write a \.gguf/],
      [['-o', join(tmp, 'bad.gguf'), '--preset', 'q8_0', '--prune-layers', '1;2'], /--prune-layers "1;2": "1;2" is not a layer number/],
    ] as const) {
      const b = await cli(['quantize', MODEL, ...args], { cwd: tmp });
      expect([b.code, b.stderr]).toEqual([2, expect.stringMatching(msg)]);
    }
  }, 120_000);

  it('--dry-run: the sizes and files of the run, exactly, and nothing written', async () => {
    const run = async (extra: string[]) => {
      const r = await cli(['quantize', GGUF1, '-o', join(tmp, 'dry.gguf'), '--preset', 'q4_k_m', '--split-max-tensors', '25', '--json', ...extra], { cwd: tmp });
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout);
    };
    const dry = await run(['--dry-run']);
    expect(readdirSync(tmp).filter((f) => f.startsWith('dry'))).toEqual([]);
    const real = await run([]);
    expect(dry.dryRun).toBe(true);
    expect(dry.files).toEqual(real.files);
    expect(dry.totals.fileBytes).toBe(real.files.reduce((a: number, f: string) => a + statSync(f).size, 0));
    const pick = (rep: { tensors: { name: string; format: string; outputBytes: number }[] }) => rep.tensors.map((t) => [t.name, t.format, t.outputBytes]);
    expect(pick(dry)).toEqual(pick(real));
    expect(dry.roles.map((r: { quantized: number }) => r.quantized)).toEqual(real.roles.map((r: { quantized: number }) => r.quantized));
    // A folder output is not even made.
    const f = await cli(['quantize', MODEL, '-o', join(tmp, 'dry-folder') + '/', '--preset', 'mlx4', '--dry-run'], { cwd: tmp });
    expect([f.code, f.stdout]).toEqual([0, expect.stringMatching(/nothing was written/)]);
    expect(existsSync(join(tmp, 'dry-folder'))).toBe(false);
  }, 120_000);

  it('a quantized GGUF quantized again: a warning unless --allow-requantize; tensors already in the target type copied', async () => {
    const q8 = join(tmp, 'rq8.gguf');
    expect((await cli(['quantize', GGUF1, '-o', q8, '--preset', 'q8_0'], { cwd: tmp })).code).toBe(0);
    const again = await cli(['quantize', q8, '-o', join(tmp, 'rq4.gguf'), '--preset', 'q4_0', '--json'], { cwd: tmp });
    expect(again.code, again.stderr).toBe(0);
    const rep = JSON.parse(again.stdout);
    expect(rep.warnings).toEqual(expect.arrayContaining([expect.stringMatching(/tensors are stored quantized \(Q8_0\) and quantized again/)]));
    const quiet = await cli(['quantize', q8, '-o', join(tmp, 'rq4.gguf'), '--preset', 'q4_0', '--allow-requantize', '--json'], { cwd: tmp });
    expect(JSON.parse(quiet.stdout).warnings.filter((w: string) => /quantized again/.test(w))).toEqual([]);
    // Q8_0 to Q8_0: every tensor copied as stored, the file's tensors unchanged.
    const same8 = join(tmp, 'rq88.gguf');
    expect((await cli(['quantize', q8, '-o', same8, '--preset', 'q8_0', '--allow-requantize'], { cwd: tmp })).code).toBe(0);
    const [a, b] = [await openFile(q8), await openFile(same8)];
    for (const t of a.tensors) expect(same(await a.readRaw(t.name), await b.readRaw(t.name)), t.name).toBe(true);
  }, 120_000);

  it('split options that cannot apply: exit 2 naming the option, nothing written', async () => {
    for (const [args, msg] of [
      [['--split-max-size', '5X'], /--split-max-size must be a positive size in M or G/],
      [['--split-max-size', '0M'], /--split-max-size must be a positive size/],
      [['--keep-split', '--split-max-tensors', '3'], /cannot go with --split-max-tensors/],
      [['--split-max-tensors', '0'], /--split-max-tensors must be a positive integer/],
    ] as const) {
      const r = await cli(['quantize', GGUF1, '-o', join(tmp, 'bad.gguf'), '--preset', 'q8_0', ...args], { cwd: tmp });
      expect([r.code, r.stderr], args.join(' ')).toEqual([2, expect.stringMatching(msg)]);
    }
    const st = await cli(['quantize', MODEL, '-o', join(tmp, 'bad.safetensors'), '--preset', 'nf4', '--split-max-tensors', '3'], { cwd: tmp });
    expect([st.code, st.stderr]).toEqual([2, expect.stringMatching(/--split-max-tensors splits a GGUF output/)]);
    // --keep-split of a single file: one file, as it came.
    const k = await cli(['quantize', GGUF1, '-o', join(tmp, 'k.gguf'), '--preset', 'q8_0', '--keep-split'], { cwd: tmp });
    expect([k.code, k.stdout]).toEqual([0, expect.stringMatching(/--keep-split: .* is not a split GGUF, so the output is one file/)]);
    expect(existsSync(join(tmp, 'k.gguf'))).toBe(true);
    expect(readdirSync(tmp).filter((f) => /^bad(-.*)?\.(gguf|safetensors)$/.test(f))).toEqual([]);
  }, 120_000);

  it('a malformed --tensor-type or an unknown type: exit 2 naming the option', async () => {
    for (const [v, msg] of [['attn_v', /expected <regex>=<type>/], ['attn_v=q9_9', /unknown type "q9_9"/], ['(=q8_0', /E_PLAN|regular expression/]] as const) {
      const r = await cli(['quantize', MODEL, '-o', join(tmp, 'bad.gguf'), '--preset', 'q8_0', '--tensor-type', v], { cwd: tmp });
      expect(r.code, v).toBe(2);
      expect(r.stderr, v).toMatch(msg);
      expect(existsSync(join(tmp, 'bad.gguf'))).toBe(false);
    }
  }, 60_000);
});

describe.skipIf(!hasShared)('webquant quantize: options', () => {
  let tmp: string;
  beforeAll(async () => {
    await ensureBuilt();
    tmp = tempDir('cli-opt');
  }, 300_000);

  /** llama.cpp's legacy imatrix.dat: i32 n; per entry i32 len, name, i32 ncall, i32 nval, f32[nval]. */
  function imatrixDat(entries: { name: string; ncall: number; values: Float32Array }[]): Uint8Array {
    const parts: Buffer[] = [];
    const i32 = (v: number) => { const b = Buffer.alloc(4); b.writeInt32LE(v); return b; };
    parts.push(i32(entries.length));
    for (const e of entries) {
      const n = Buffer.from(e.name);
      parts.push(i32(n.byteLength), n, i32(e.ncall), i32(e.values.length), Buffer.from(e.values.buffer, e.values.byteOffset, e.values.byteLength));
    }
    parts.push(i32(7), i32(4), Buffer.from('test'));
    return new Uint8Array(Buffer.concat(parts));
  }

  it.skipIf(!existsSync('/usr/lib/chromium/vk_swiftshader_icd.json'))('--gpu: the WebGPU lane (SwiftShader here) takes units and the file has the wasm-only bytes', async () => {
    const plain = join(tmp, 'lane-off.gguf'), lane = join(tmp, 'lane-on.gguf');
    expect((await cli(['quantize', MODEL, '-o', plain, '--preset', 'q8_0', '-j', '1'], { cwd: tmp })).code).toBe(0);
    let chunks = 0;
    gpuHooks.afterChunk = () => { chunks++; };
    try {
      const r = await cli(['quantize', MODEL, '-o', lane, '--preset', 'q8_0', '-j', '1', '--gpu'], { cwd: tmp });
      expect(r.code, r.stderr).toBe(0);
    } finally {
      gpuHooks.afterChunk = undefined;
      resetGpu();
      resetBackendState();
    }
    expect(chunks).toBeGreaterThan(0);
    expect(same(readFileSync(lane), readFileSync(plain))).toBe(true);
  }, 300_000);

  it('--budget: a 16 KiB budget cuts rows and slices (double quantization) and writes the bytes of the default run, its peak within the budget', async () => {
    for (const preset of ['q8_0', 'bnb-nf4-dq']) {
      const ext = preset === 'q8_0' ? 'gguf' : 'safetensors';
      const wide = join(tmp, `budget-wide-${preset}.${ext}`), small = join(tmp, `budget-small-${preset}.${ext}`);
      expect((await cli(['quantize', MODEL, '-o', wide, '--preset', preset], { cwd: tmp })).code).toBe(0);
      const r = await cli(['quantize', MODEL, '-o', small, '--preset', preset, '--budget', '0.015625', '--json'], { cwd: tmp });
      expect(r.code, r.stderr).toBe(0);
      const report = JSON.parse(r.stdout);
      expect(report.tensors.filter((t: { chunks: number }) => t.chunks > 1).length, preset).toBeGreaterThan(10);
      expect(report.peakInFlightBytes, preset).toBeLessThanOrEqual(16 << 10);
      expect(same(readFileSync(small), readFileSync(wide)), preset).toBe(true);
    }
  }, 300_000);

  it('--imatrix: importance (sums / ncall) reaches the quantizers by GGUF tensor name', async () => {
    const view = await hfView();
    const entries = view.tensors.filter((t) => t.shape.length === 2).map((t, k) => {
      const v = new Float32Array(t.shape[1]);
      for (let i = 0; i < v.length; i++) v[i] = 3 * (1 + ((i * 7 + k * 13) % 11));
      return { name: t.name, ncall: 3, values: v };
    });
    writeFileSync(join(tmp, 'imatrix.dat'), imatrixDat(entries));
    const out = join(tmp, 'imx.gguf');
    const r = await cli(['quantize', MODEL, '-o', out, '--preset', 'q4_0', '--imatrix', 'imatrix.dat'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const g = await openFile(out);
    let differ = 0;
    for (const e of entries) {
      const t = g.tensor(e.name);
      if (t.dtype === 'F16') continue;
      const values = await view.readF32(e.name);
      const importance = e.values.map((x) => x / e.ncall);
      const q = await quantize(values, { format: t.dtype.toLowerCase(), rowLength: t.shape[1], importance });
      expect(same(await g.readRaw(e.name), q.data), e.name).toBe(true);
      const plain = await quantize(values, { format: t.dtype.toLowerCase(), rowLength: t.shape[1] });
      if (!same(plain.data, q.data)) differ++;
    }
    expect(differ).toBeGreaterThan(20); // Q4_0 uses the importance; Q8_0 (the head) does not
    // The GGUF imatrix (llama-imatrix's current format) gives the same importance.
    const tensors = entries.flatMap((e) => [
      { name: `${e.name}.in_sum2`, ggmlType: 'F32', shape: [1, e.values.length], data: e.values },
      { name: `${e.name}.counts`, ggmlType: 'F32', shape: [1, 1], data: new Float32Array([e.ncall]) },
    ]);
    writeFileSync(join(tmp, 'imatrix.gguf'), await collect(writeGguf({
      metadata: [
        { key: 'general.type', type: 'string', value: 'imatrix' },
        { key: 'imatrix.datasets', type: 'array', itemType: 'string', value: ['test'] },
        { key: 'imatrix.chunk_count', type: 'u32', value: 7 },
      ],
      tensors,
    })));
    const out2 = join(tmp, 'imx2.gguf');
    const r2 = await cli(['quantize', MODEL, '-o', out2, '--preset', 'q4_0', '--imatrix', 'imatrix.gguf'], { cwd: tmp });
    expect(r2.code, r2.stderr).toBe(0);
    const g2 = await openFile(out2);
    for (const t of g.tensors) expect(same(await g2.readRaw(t.name), await g.readRaw(t.name)), t.name).toBe(true);
    // llama-quantize's four keys: the imatrix as given, its dataset, entry and chunk counts
    // (the .dat file's trailer says 7 chunks of "test"; the GGUF its imatrix.* keys).
    const keys = (c: typeof g) => Object.fromEntries(Object.entries(c.metadata).filter(([k]) => k.startsWith('quantize.imatrix.')));
    expect(keys(g)).toEqual({ 'quantize.imatrix.file': 'imatrix.dat', 'quantize.imatrix.dataset': 'test', 'quantize.imatrix.entries_count': entries.length, 'quantize.imatrix.chunks_count': 7 });
    expect(keys(g2)).toEqual({ ...keys(g), 'quantize.imatrix.file': 'imatrix.gguf' });
    writeFileSync(join(tmp, 'short.dat'), imatrixDat([{ name: 'blk.0.attn_q.weight', ncall: 1, values: new Float32Array(10).fill(1) }]));
    const bad = await cli(['quantize', MODEL, '-o', out, '--preset', 'q4_0', '--imatrix', 'short.dat'], { cwd: tmp });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/"blk\.0\.attn_q\.weight" has 10 values but its rows have 64.*E_IMPORTANCE_LENGTH/);
  });

  it('--include-weights / --exclude-weights: only the entries named (by substring) reach the quantizers; none left is no imatrix', async () => {
    const view = await hfView();
    const entries = view.tensors.filter((t) => t.shape.length === 2).map((t, k) => ({ name: t.name, ncall: 1, values: Float32Array.from({ length: t.shape[1] }, (_, i) => 1 + ((i * 5 + k) % 9)) }));
    writeFileSync(join(tmp, 'sel.dat'), imatrixDat(entries));
    const run = async (name: string, args: string[]) => {
      const r = await cli(['quantize', MODEL, '-o', join(tmp, name), '--preset', 'q4_0', ...args], { cwd: tmp });
      expect(r.code, r.stderr).toBe(0);
      return openFile(join(tmp, name));
    };
    const all = await run('sel-all.gguf', ['--imatrix', 'sel.dat']);
    const none = await run('sel-none.gguf', []);
    const inc = await run('sel-inc.gguf', ['--imatrix', 'sel.dat', '--include-weights', 'attn_v', '--include-weights', 'blk.2.']);
    const exc = await run('sel-exc.gguf', ['--imatrix', 'sel.dat', '--exclude-weights', 'attn_v']);
    let checked = 0;
    for (const e of entries) {
      if (all.tensor(e.name).dtype !== 'Q4_0') continue;
      const [a, n] = [await all.readRaw(e.name), await none.readRaw(e.name)];
      if (same(a, n)) continue;
      checked++;
      const picked = e.name.includes('attn_v') || e.name.includes('blk.2.');
      expect(same(await inc.readRaw(e.name), picked ? a : n), e.name).toBe(true);
      expect(same(await exc.readRaw(e.name), e.name.includes('attn_v') ? n : a), e.name).toBe(true);
    }
    expect(checked).toBeGreaterThan(10);
    expect([inc.metadata['quantize.imatrix.entries_count'], exc.metadata['quantize.imatrix.entries_count']]).toEqual([
      entries.filter((e) => e.name.includes('attn_v') || e.name.includes('blk.2.')).length, entries.filter((e) => !e.name.includes('attn_v')).length]);
    // Nothing left: written as without an imatrix (no quantize.imatrix.* keys), as llama-quantize does.
    const empty = await run('sel-empty.gguf', ['--imatrix', 'sel.dat', '--include-weights', 'no such tensor']);
    expect(Object.keys(empty.metadata).filter((k) => k.startsWith('quantize.imatrix'))).toEqual([]);
    for (const t of none.tensors) expect(same(await empty.readRaw(t.name), await none.readRaw(t.name)), t.name).toBe(true);
    for (const [args, msg] of [[['--imatrix', 'sel.dat', '--include-weights', 'a', '--exclude-weights', 'b'], /cannot be used together/], [['--exclude-weights', 'b'], /--imatrix, which is not given/]] as const) {
      const b = await cli(['quantize', MODEL, '-o', join(tmp, 'bad.gguf'), '--preset', 'q4_0', ...args], { cwd: tmp });
      expect([b.code, b.stderr]).toEqual([2, expect.stringMatching(msg)]);
    }
  });

  it('--format with --group-size, --bits and --calibration; --strict refuses fallbacks', async () => {
    const out = join(tmp, 'affine.safetensors');
    const r = await cli(['quantize', MODEL, '-o', out, '--format', 'affine', '--bits', '3', '--group-size', '32', '--calibration', 'hqq', '--json'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const ck = await openFile(out);
    const meta = JSON.parse(ck.metadata['webquant.quantization'] as string);
    const m = meta['model.layers.0.self_attn.q_proj.weight'];
    expect(m.format).toBe('affine');
    expect(m.options).toMatchObject({ bits: 3, groupSize: 32, calibration: { method: 'hqq' } });
    const src = await openFile(MODEL);
    const q = await quantize(await src.readF32('model.layers.0.self_attn.q_proj.weight'), { format: 'affine', bits: 3, groupSize: 32, calibration: 'hqq', rowLength: 64 });
    const stored = await collect(await Promise.all(m.sections.map((x: string) => ck.readRaw(x))));
    expect(same(stored, q.data)).toBe(true);
    const strict = await cli(['quantize', MODEL, '-o', join(tmp, 'strict.gguf'), '--preset', 'q4_k_m', '--strict'], { cwd: tmp });
    expect(strict.code).toBe(2);
    expect(strict.stderr).toMatch(/^webquant: \[plan\] preset q4_k_m: \d+ errors: token_embd\.weight: .*strict: no fallback.*E_PLAN\)\n$/);
    const badBits = await cli(['quantize', MODEL, '-o', out, '--format', 'q8_0', '--bits', '3'], { cwd: tmp });
    expect(badBits.code).toBe(2);
    expect(badBits.stderr).toMatch(/bits/);
    const badCal = await cli(['quantize', MODEL, '-o', out, '--format', 'affine', '--calibration', 'mse'], { cwd: tmp });
    expect(badCal.code).toBe(2);
    expect(badCal.stderr).toBe('webquant: [quantize] format affine does not accept calibration "mse"; it accepts: minmax, hqq (E_BAD_CALIBRATION)\n');
    const badInt = await cli(['quantize', MODEL, '-o', out, '--format', 'int4', '--group-size', 'x'], { cwd: tmp });
    expect(badInt.code).toBe(2);
    expect(badInt.stderr).toMatch(/--group-size must be a positive integer/);
  });
});

describe.skipIf(!hasShared)('webquant quantize: bad input', () => {
  let tmp: string;
  beforeAll(async () => {
    await ensureBuilt();
    tmp = tempDir('cli-bad');
  }, 300_000);

  const oneLine = (s: string) => {
    expect(s.trim().split('\n')).toHaveLength(1);
    expect(s).toMatch(/^webquant: /);
    expect(s).not.toMatch(/\n\s+at /);
  };

  it('missing file, truncated file, unknown preset, bad rules JSON: exit 2, one line, no output', async () => {
    const out = join(tmp, 'out.gguf');
    const truncated = join(tmp, 'truncated.safetensors');
    writeFileSync(truncated, readFileSync(MODEL).subarray(0, 5000));
    const badRules = join(tmp, 'bad.json');
    writeFileSync(badRules, '{"default": {"format": "q8_0"},');
    const emptyDir = join(tmp, 'empty');
    mkdirSync(emptyDir, { recursive: true });
    const emptyIndex = join(emptyDir, 'model.safetensors.index.json');
    writeFileSync(emptyIndex, '{"metadata": {}, "weight_map": {}}');
    // a safetensors header nested 100000 levels deep (printing it would overflow the stack)
    const deep = join(tmp, 'deep.safetensors');
    const header = Buffer.from(`{"a":{"dtype":"F32","shape":${'['.repeat(100000)}${']'.repeat(100000)},"data_offsets":[0,0]}}`);
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    writeFileSync(deep, Buffer.concat([len, header]));
    const cases: [string[], RegExp][] = [
      [['quantize', join(tmp, 'nope.safetensors'), '-o', out, '--preset', 'q8_0'], /does not exist/],
      [['quantize', truncated, '-o', out, '--format', 'q8_0'], /\[safetensors\].*E_ST_/],
      [['quantize', MODEL, '-o', out, '--preset', 'q5_x'], /unknown preset "q5_x"; valid presets: f16, .*q4_k_m/],
      [['quantize', MODEL, '-o', out, '--preset', 'q8_0', '--rules', badRules], /not valid JSON.*E_PLAN/],
      [['quantize', MODEL, '-o', out, '--format', 'q9'], /unknown format "q9"; valid formats/],
      [['quantize', MODEL, '-o', join(tmp, 'x.bin'), '--format', 'q8_0'], /\.gguf or \.safetensors/],
      [['quantize', MODEL, '-o', out, '--preset', 'nf4'], /writes safetensors/],
      [['quantize', MODEL, '-o', out, '--format', 'mxfp4'], /writes safetensors.*mxfp4_gguf is MXFP4 as GGUF stores it/],
      [['quantize', MODEL, '-o', out, '--format', 'nvfp4'], /writes safetensors.*nvfp4_gguf is NVFP4 as GGUF stores it/],
      [['quantize', MODEL, '-o', out], /--preset <name>, --format <format> or --rules/],
      [['quantize', MODEL, '-o', out, '--preset', 'q8_0', '--budget', '-1'], /--budget must be a positive number of MiB but is "-1"/],
      [['quantize', MODEL, '-o', out, '--preset', 'q8_0', '--budget', 'lots'], /--budget must be a positive number of MiB/],
      [['quantize', MODEL, '-o', out, '--presett', 'q8_0'], /unknown option --presett; valid options: -o\/--output, -p\/--preset/],
      [['quantise', MODEL], /unknown command "quantise"; valid commands: inspect, quantize, presets/],
      [['inspect', join(tmp, 'nope.gguf')], /does not exist/],
      [['inspect', truncated], /E_ST_/],
      [['quantize', MODEL, '-o', '', '--preset', 'q8_0'], /-o <output> is required/],
      [['quantize', 'http://', '-o', out, '--preset', 'q8_0'], /http:\/\/ is not a valid URL.*E_BAD_INPUT/],
      [['quantize', MODEL, '-o', out, '--preset', 'q8_0', '--workers', '100000'], /--workers must be an integer from 1 to 256 but got 100000/],
      [['quantize', deep, '-o', out, '--preset', 'q8_0'], /header is not JSON \(nested deeper than 128 levels.*E_ST_/],
      [['quantize', MODEL, '-o', out, '--preset', 'q8_0', '--tokenizer', emptyDir], /holds no tokenizer\.json or tokenizer\.model.*E_TOKENIZER/],
      [['quantize', emptyIndex, '-o', out, '--preset', 'q8_0'], /holds no tensors.*E_BAD_INPUT/],
      [['inspect', '/dev/zero'], /input \/dev\/zero is not a regular file or a folder.*E_BAD_INPUT/],
      [['quantize', MODEL, '-o', out, '--preset', 'q4_k_m', '--imatrix', GGUF1], /not an importance matrix.*E_BAD_INPUT/],
    ];
    for (const [argv, msg] of cases) {
      const r = await cli(argv, { cwd: tmp });
      expect(r.code, argv.join(' ')).toBe(2);
      oneLine(r.stderr);
      expect(r.stderr, argv.join(' ')).toMatch(msg);
    }
    expect(existsSync(out)).toBe(false);
    expect(leftovers(tmp)).toEqual([]);
  });

  it('--json failures: exit 2 and an error object on stdout', async () => {
    const r = await cli(['quantize', MODEL, '-o', join(tmp, 'j.gguf'), '--preset', 'nope', '--json'], { cwd: tmp });
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout).error).toMatchObject({ code: 'E_UNKNOWN_PRESET', details: { option: 'preset', value: 'nope' } });
    const d = await cli(['quantize', MODEL, '-o', join(tmp, 'no/such/dir/x.gguf'), '--preset', 'q8_0'], { cwd: tmp });
    expect(d.code).toBe(2);
    expect(d.stderr).toMatch(/output directory .* does not exist/);
  });

  it('a failure in the middle of a run leaves neither the output nor a partial file', async () => {
    const values = new Float32Array(64 * 64).fill(0.01);
    values[1000] = NaN;
    const bad = join(tmp, 'nan.safetensors');
    const ok = new Float32Array(64 * 64).fill(0.02);
    writeFileSync(bad, await collect(writeSafetensors({ tensors: [
      { name: 'model.layers.0.mlp.up_proj.weight', dtype: 'F32', shape: [64, 64], data: ok },
      { name: 'model.layers.1.mlp.up_proj.weight', dtype: 'F32', shape: [64, 64], data: values },
    ] })));
    const out = join(tmp, 'nan-out.safetensors');
    writeFileSync(out, 'previous');
    const r = await cli(['quantize', bad, '-o', out, '--format', 'int8'], { cwd: tmp });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/model\.layers\.1\.mlp\.up_proj\.weight.*not finite.*E_NON_FINITE/);
    expect(readFileSync(out, 'utf8')).toBe('previous');
    expect(leftovers(tmp)).toEqual([]);
  });
});
