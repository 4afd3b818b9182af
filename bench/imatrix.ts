// npm run bench:imatrix — how long `webquant imatrix` takes per chunk of 512 tokens on a
// SmolLM-135M-shaped BF16 Llama (hidden 576, 30 layers, 9 heads, 3 KV heads, FFN 1536, vocab
// 49152; bench/llama-checkpoint.ts's weights: the work does not depend on the values), and the reference forward's
// attention and float32 matmul in their two paths (plain float64 loops, wasm: same bits) on that shape.
//
// Then the command itself on --chunks chunks of 512 tokens with each --workers count (runs
// interleaved): seconds per chunk and the speedup over one thread (--workers N: one model per thread).
// The checkpoint (269 MB) is written to --dir (default /tmp/webquant-bench) once and kept.
// With --eval, also `webquant eval` of a Q8_0 output (--eval-preset P: another preset's) of the
// checkpoint against it on the same tokens (windows of 512), once per --workers count: seconds and
// whether the figures match.
// Options: --reps N (default 3) --chunks N (default 4) --workers 1,2 --eval --eval-preset P --dir D
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { attention, attentionReference, type AttentionArgs } from '../src/eval/attention.js';
import { loadKernels } from '../src/kernels/loader.js';
import { matmulF32 } from '../src/eval/llama.js';
import { matmulExact } from '../src/eval/matmul.js';
import { arg, median, table } from './util.js';
import { writeLlamaCheckpoint, writeLlamaConfig, type LlamaShape } from './llama-checkpoint.js';

// SmolLM-135M's shape.
const SHAPE: LlamaShape = { hidden: 576, ffn: 1536, heads: 9, kvHeads: 3, vocab: 49152, layers: 30, tied: true };
const H = SHAPE.hidden, NH = SHAPE.heads, NKV = SHAPE.kvHeads, HD = H / NH, F = SHAPE.ffn, V = SHAPE.vocab;

const reps = Number(arg('reps', '3'));
const chunks = Number(arg('chunks', '4'));
const workerCounts = arg('workers', '1,2').split(',').map(Number);
const ntok = 512 * chunks;
const dir = join(arg('dir', '/tmp/webquant-bench'), 'smollm135m-shape');
mkdirSync(dir, { recursive: true });
if (!existsSync(join(dir, 'model.safetensors'))) {
  console.log(`writing ${dir}/model.safetensors ...`);
  await writeLlamaCheckpoint(join(dir, 'model.safetensors'), SHAPE);
}
writeLlamaConfig(join(dir, 'config.json'), SHAPE);
const tokFile = join(dir, `tokens-${ntok}.u16`);
writeFileSync(tokFile, Buffer.from(Uint16Array.from({ length: ntok }, (_, i) => (i * 7919) % V).buffer));

// Attention on one layer's shape, both paths interleaved in one process.
const d = { dim: H, ffn: F, layers: 1, vocab: V, heads: NH, kvHeads: NKV, headDim: HD, vHeadDim: HD, qDim: NH * HD, kvDim: NKV * HD, attDim: NH * HD };
const rnd = (len: number) => Float32Array.from({ length: len }, (_, i) => Math.sin(i * 12.9898) * 0.5);
const n = 512;
const a: AttentionArgs = { q: rnd(n * d.qDim), k: rnd(n * d.kvDim), v: rnd(n * d.kvDim), n, d, scale: 1 / 8, window: n, att: new Float32Array(n * d.attDim) };
const kern = await loadKernels('auto', 'attention');
const ref: number[] = [], fast: number[] = [];
for (let r = 0; r < 5; r++) {
  let t = performance.now();
  attentionReference(a);
  ref.push(performance.now() - t);
  t = performance.now();
  attention(kern, a);
  fast.push(performance.now() - t);
}

// The original's float32 matmul on the FFN's shapes, 512 positions: plain loops and wasm (same bits).
const mm = [[F, H], [H, F]].map(([rows, cols]) => {
  const w = rnd(rows * cols), x = rnd(n * cols), y = new Float32Array(n * rows);
  const js: number[] = [], wasm: number[] = [];
  for (let r = 0; r < 3; r++) {
    let t = performance.now();
    matmulF32(w, rows, cols, x, n, y);
    js.push(performance.now() - t);
    t = performance.now();
    matmulExact(kern, w, rows, cols, x, n, y);
    wasm.push(performance.now() - t);
  }
  const gmac = (ms: number) => ((rows * cols * n) / ms / 1e6).toFixed(2);
  return [`${rows} x ${cols}`, gmac(median(js)), gmac(median(wasm)), (median(js) / median(wasm)).toFixed(2)];
});

const secs = new Map<number, number[]>(workerCounts.map((w) => [w, []]));
for (let r = 0; r < reps; r++) {
  for (const w of workerCounts) {
    const p = spawnSync(process.execPath, ['bin/webquant.js', 'imatrix', '--model', join(dir, 'model.safetensors'), '--tokens', tokFile, '-o', join(dir, `imatrix-${w}.gguf`), '--workers', String(w), '--json'], { encoding: 'utf8' });
    if (p.status !== 0) throw new Error(`webquant imatrix failed: ${p.stderr}`);
    secs.get(w)!.push(JSON.parse(p.stdout).seconds / chunks);
  }
}

console.log(`\nattention of one layer (${n} positions, 9 heads, 3 KV heads, head dim 64), ms, median of 5:`);
console.log(table(['plain float64 loops', `wasm products (${kern.build})`, 'ratio'], [[median(ref).toFixed(1), median(fast).toFixed(1), (median(ref) / median(fast)).toFixed(2)]]));
console.log(`\nfloat32 matmul, ${n} positions, GMAC/s, median of 3:`);
console.log(table(['weight', 'plain float64 loops (matmulF32)', `wasm (${kern.build}, same bits)`, 'ratio'], mm));
const one = median(secs.get(workerCounts[0])!);
const files = workerCounts.map((w) => readFileSync(join(dir, `imatrix-${w}.gguf`)));
const same = files.every((f) => f.equals(files[0]));
console.log(`\nwebquant imatrix, ${chunks} chunks of 512 tokens, seconds per chunk (median of ${reps}); the files of ${workerCounts.join(', ')} workers are ${same ? 'byte-identical' : 'DIFFERENT'}:`);
console.log(table(['workers', 'runs', 'median s per chunk', `speedup vs ${workerCounts[0]}`], workerCounts.map((w) => [String(w), secs.get(w)!.map((s) => s.toFixed(2)).join(', '), median(secs.get(w)!).toFixed(2), (one / median(secs.get(w)!)).toFixed(2)])));

if (process.argv.includes('--eval')) {
  const preset = arg('eval-preset', 'q8_0');
  const q8 = join(dir, `model-${preset}.gguf`);
  if (!existsSync(q8)) {
    const p = spawnSync(process.execPath, ['bin/webquant.js', 'quantize', join(dir, 'model.safetensors'), '-o', q8, '--preset', preset, '--tokenizer', 'none'], { encoding: 'utf8' });
    if (p.status !== 0) throw new Error(`webquant quantize failed: ${p.stderr}`);
  }
  // eval reads documents that start with BOS (1).
  const evalTok = join(dir, `eval-tokens-${ntok}.u16`);
  writeFileSync(evalTok, Buffer.from(Uint16Array.from({ length: ntok }, (_, i) => (i === 0 ? 1 : 2 + ((i * 7919) % (V - 2)))).buffer));
  const runs = workerCounts.map((w) => {
    const p = spawnSync(process.execPath, ['bin/webquant.js', 'eval', '--model', join(dir, 'model.safetensors'), '--quantized', q8, '--tokens', evalTok, '--workers', String(w), '--json'], { encoding: 'utf8' });
    if (p.status !== 0) throw new Error(`webquant eval failed: ${p.stderr}`);
    const r = JSON.parse(p.stdout);
    return { w, seconds: r.seconds as number, figures: JSON.stringify({ ...r, seconds: 0 }) };
  });
  const match = runs.every((r) => r.figures === runs[0].figures);
  console.log(`\nwebquant eval, ${preset} against the original, ${ntok} tokens in windows of 512 (one run each); the figures of ${workerCounts.join(', ')} workers are ${match ? 'identical' : 'DIFFERENT'}:`);
  console.log(table(['workers', 'seconds', `speedup vs ${workerCounts[0]}`], runs.map((r) => [String(r.w), r.seconds.toFixed(1), (runs[0].seconds / r.seconds).toFixed(2)])));
}
