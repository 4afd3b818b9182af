// npm run bench:pipeline — end-to-end streaming quantization of a large synthetic checkpoint.
// Generates Llama-shaped BF16 safetensors (32 layers, ~4.4 GB; and an 8-layer ~1.3 GB one to show
// that peak memory does not grow with the model), quantizes each to Q4_K and Q8_0 with 1 and 2
// workers, each run in its own process so that peak RSS (VmHWM from /proc) belongs to that run.
// Prints wall time, GB of input per second, the single-thread kernel throughput for the same work,
// and peak RSS. Options: --dir D (default /tmp/webquant-bench), --layers 32,8, --formats q4_k,q8_0,
// --workers 1,2, --budget MiB (default 256), --keep (keep the generated files).
import { execFileSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { arg, table, writeJson } from './util.js';

const dist = (p: string) => new URL(`../dist/${p}`, import.meta.url).href;

const HIDDEN = 2304, FFN = 6144, HEADS = 18, KV_HEADS = 6, VOCAB = 32000;

async function generate(path: string, layers: number): Promise<void> {
  const { SafetensorsWriter } = await import(dist('index.js'));
  const hd = HIDDEN / HEADS;
  const shapes: [string, number[]][] = [['model.embed_tokens.weight', [VOCAB, HIDDEN]]];
  for (let l = 0; l < layers; l++) {
    const p = `model.layers.${l}.`;
    shapes.push(
      [p + 'input_layernorm.weight', [HIDDEN]],
      [p + 'self_attn.q_proj.weight', [HIDDEN, HIDDEN]],
      [p + 'self_attn.k_proj.weight', [KV_HEADS * hd, HIDDEN]],
      [p + 'self_attn.v_proj.weight', [KV_HEADS * hd, HIDDEN]],
      [p + 'self_attn.o_proj.weight', [HIDDEN, HIDDEN]],
      [p + 'post_attention_layernorm.weight', [HIDDEN]],
      [p + 'mlp.gate_proj.weight', [FFN, HIDDEN]],
      [p + 'mlp.up_proj.weight', [FFN, HIDDEN]],
      [p + 'mlp.down_proj.weight', [HIDDEN, FFN]],
    );
  }
  shapes.push(['model.norm.weight', [HIDDEN]], ['lm_head.weight', [VOCAB, HIDDEN]]);
  const w = new SafetensorsWriter({ tensors: shapes.map(([name, shape]) => ({ name, dtype: 'BF16', shape })) });
  const out = createWriteStream(path + '.tmp');
  const write = (b: Uint8Array) => new Promise<void>((res, rej) => (out.write(b, (e) => (e ? rej(e) : res()))));
  await write(w.header);
  let s = 0x2545f491;
  for (const [name, shape] of shapes) {
    const n = shape.reduce((a, b) => a * b, 1);
    const bits = new Uint16Array(n);
    const f = new Float32Array(1), u = new Uint32Array(f.buffer);
    for (let i = 0; i < n; i++) {
      // Sum of two uniforms: a bell-shaped weight around 0 with std ~0.02, as bf16 bits.
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      const a = s >>> 16;
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      f[0] = ((a + (s >>> 16)) / 65536 - 1) * 0.035;
      bits[i] = u[0] >>> 16;
    }
    for (const c of w.tensor(name, new Uint8Array(bits.buffer))) await write(c);
  }
  w.finish();
  await new Promise<void>((res) => out.end(res));
  renameSync(path + '.tmp', path);
}

async function child(): Promise<void> {
  const [input, format, workers, budget] = process.argv.slice(process.argv.indexOf('--child') + 1);
  const lib = await import(dist('index.js'));
  const { fromPath } = await import(dist('io/node.js'));
  const { fileSink } = await import(dist('pipeline/node.js'));
  const ck = await lib.openCheckpoint(fromPath(input));
  const plan = lib.resolvePlan({ default: { format }, rules: [], skip: [] }, ck.tensors.map((t: { name: string; shape: number[]; dtype: string }) => ({ name: t.name, shape: t.shape, dtype: t.dtype })));
  const outPath = `${input}.${format}.out`;
  const t0 = performance.now();
  const res = await lib.quantizeCheckpoint({ input: ck, plan, sink: await fileSink(outPath), workers: Number(workers), maxInFlightBytes: Number(budget) << 20, metrics: false });
  const wall = (performance.now() - t0) / 1000;
  rmSync(outPath, { force: true });
  // Kernel-only rate for the same work: one FFN matrix on this thread, same input dtype.
  const k = await lib.loadKernels('auto');
  const { quantizeWith } = await import(dist('quantize.js'));
  const vals = await ck.readValues('model.layers.0.mlp.gate_proj.weight');
  await quantizeWith(k, vals.values, { format, rowLength: HIDDEN, dtype: vals.dtype });
  const t1 = performance.now();
  await quantizeWith(k, vals.values, { format, rowLength: HIDDEN, dtype: vals.dtype });
  const kernelGBs = vals.values.byteLength / ((performance.now() - t1) / 1000) / 1e9;
  const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  const inBytes = statSync(input).size;
  console.log(JSON.stringify({ wall, inBytes, gbps: inBytes / wall / 1e9, kernelGBs, peakRssMB: hwm ? Number(hwm[1]) / 1024 : NaN, peakInFlightMB: res.peakInFlightBytes / 2 ** 20, bytesWritten: res.bytesWritten }));
  process.exit(0);
}

async function main(): Promise<void> {
  const dir = arg('dir', '/tmp/webquant-bench');
  const layerSizes = arg('layers', '32,8').split(',').map(Number);
  const fmts = arg('formats', 'q4_k,q8_0').split(',');
  const workerCounts = arg('workers', '1,2').split(',').map(Number);
  const budget = Number(arg('budget', '256'));
  mkdirSync(dir, { recursive: true });
  const rows: (string | number)[][] = [];
  const results: unknown[] = [];
  for (const layers of layerSizes) {
    const path = `${dir}/synthetic-${layers}L.safetensors`;
    if (!existsSync(path)) {
      console.error(`generating ${path} ...`);
      await generate(path, layers);
    }
    for (const format of fmts) {
      const byWorkers: Record<number, { gbps: number }> = {};
      for (const workers of workerCounts) {
        const out = execFileSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', path, format, String(workers), String(budget)], { encoding: 'utf8', maxBuffer: 1 << 20 });
        const r = JSON.parse(out.trim().split('\n').pop()!);
        byWorkers[workers] = r;
        results.push({ layers, format, workers, budgetMB: budget, ...r });
        const speedup = workers > 1 && byWorkers[1] ? r.gbps / byWorkers[1].gbps : NaN;
        rows.push([`${(r.inBytes / 1e9).toFixed(2)} GB (${layers}L)`, format, workers, r.wall, r.gbps, r.kernelGBs, r.gbps / (r.kernelGBs * workers), speedup, r.peakRssMB, r.peakInFlightMB]);
        console.error(`${layers}L ${format} x${workers}: ${r.wall.toFixed(1)} s`);
      }
    }
    if (!process.argv.includes('--keep')) rmSync(path, { force: true });
  }
  console.log(`\nwebquant pipeline, BF16 safetensors in, budget ${budget} MiB in flight (medians not applicable: one run each; see README)\n`);
  console.log(table(['input', 'format', 'workers', 'wall s', 'GB/s in', 'kernel GB/s (1 thread)', 'vs kernel x workers', 'speedup vs 1', 'peak RSS MB', 'peak in flight MB'], rows));
  writeJson('bench/results/pipeline.json', { date: new Date().toISOString(), results });
}

if (process.argv.includes('--child')) await child();
else await main();
