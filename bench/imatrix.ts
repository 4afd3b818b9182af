// npm run bench:imatrix — how long `webquant imatrix` takes per chunk of 512 tokens on a
// SmolLM-135M-shaped BF16 Llama (hidden 576, 30 layers, 9 heads, 3 KV heads, FFN 1536, vocab
// 49152; random weights: the work does not depend on the values), and the reference forward's
// attention in its two paths (plain float64 loops, wasm products: same bits) on one layer's shape.
//
// The checkpoint (269 MB) is written to --dir (default /tmp/webquant-bench) once and kept.
// Options: --reps N (default 3) --tokens N (default 512) --dir D
import { spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { SafetensorsWriter } from '../src/io/safetensors-writer.js';
import { attention, attentionReference, type AttentionArgs } from '../src/eval/attention.js';
import { loadKernels } from '../src/kernels/loader.js';
import { arg, median, table } from './util.js';

const H = 576, L = 30, NH = 9, NKV = 3, HD = 64, F = 1536, V = 49152;

async function writeModel(dir: string): Promise<void> {
  const t: { name: string; dtype: string; shape: number[] }[] = [
    { name: 'model.embed_tokens.weight', dtype: 'BF16', shape: [V, H] }, { name: 'model.norm.weight', dtype: 'BF16', shape: [H] },
  ];
  for (let l = 0; l < L; l++) {
    const p = `model.layers.${l}.`;
    t.push({ name: `${p}input_layernorm.weight`, dtype: 'BF16', shape: [H] }, { name: `${p}post_attention_layernorm.weight`, dtype: 'BF16', shape: [H] },
      { name: `${p}self_attn.q_proj.weight`, dtype: 'BF16', shape: [NH * HD, H] }, { name: `${p}self_attn.k_proj.weight`, dtype: 'BF16', shape: [NKV * HD, H] },
      { name: `${p}self_attn.v_proj.weight`, dtype: 'BF16', shape: [NKV * HD, H] }, { name: `${p}self_attn.o_proj.weight`, dtype: 'BF16', shape: [H, NH * HD] },
      { name: `${p}mlp.gate_proj.weight`, dtype: 'BF16', shape: [F, H] }, { name: `${p}mlp.up_proj.weight`, dtype: 'BF16', shape: [F, H] },
      { name: `${p}mlp.down_proj.weight`, dtype: 'BF16', shape: [H, F] });
  }
  t.sort((a, b) => (a.name < b.name ? -1 : 1));
  const w = new SafetensorsWriter({ tensors: t });
  const out = createWriteStream(join(dir, 'model.safetensors'));
  out.write(w.header);
  let seed = 1;
  for (const x of t) {
    const n = x.shape.reduce((a, b) => a * b, 1);
    const u = new Uint16Array(n);
    const f = new Float32Array(1), b = new Uint32Array(f.buffer);
    for (let i = 0; i < n; i++) {
      seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
      f[0] = x.name.endsWith('norm.weight') ? 1 : ((seed >>> 8) / 16777216 - 0.5) * 0.1;
      u[i] = b[0] >>> 16;
    }
    if (!out.write(Buffer.from(u.buffer))) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  writeFileSync(join(dir, 'config.json'), JSON.stringify({
    architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: H, intermediate_size: F, num_hidden_layers: L, num_attention_heads: NH,
    num_key_value_heads: NKV, vocab_size: V, rms_norm_eps: 1e-5, rope_theta: 10000, tie_word_embeddings: true, hidden_act: 'silu',
  }));
}

const reps = Number(arg('reps', '3'));
const ntok = Number(arg('tokens', '512'));
const dir = join(arg('dir', '/tmp/webquant-bench'), 'smollm135m-shape');
mkdirSync(dir, { recursive: true });
if (!existsSync(join(dir, 'config.json'))) {
  console.log(`writing ${dir}/model.safetensors ...`);
  await writeModel(dir);
}
const tokFile = join(dir, `tokens-${ntok}.u16`);
writeFileSync(tokFile, Buffer.from(Uint16Array.from({ length: ntok }, (_, i) => (i * 7919) % V).buffer));

// Attention on one layer's shape, both paths interleaved in one process.
const d = { dim: H, ffn: F, layers: 1, vocab: V, heads: NH, kvHeads: NKV, headDim: HD, vHeadDim: HD, qDim: NH * HD, kvDim: NKV * HD, attDim: NH * HD };
const rnd = (len: number) => Float32Array.from({ length: len }, (_, i) => Math.sin(i * 12.9898) * 0.5);
const n = Math.min(ntok, 512);
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

const secs: number[] = [];
for (let r = 0; r < reps; r++) {
  const p = spawnSync(process.execPath, ['bin/webquant.js', 'imatrix', '--model', join(dir, 'model.safetensors'), '--tokens', tokFile, '-o', join(dir, 'imatrix.gguf'), '--json'], { encoding: 'utf8' });
  if (p.status !== 0) throw new Error(`webquant imatrix failed: ${p.stderr}`);
  secs.push(JSON.parse(p.stdout).seconds);
}

console.log(`\nattention of one layer (${n} positions, 9 heads, 3 KV heads, head dim 64), ms, median of 5:`);
console.log(table(['plain float64 loops', `wasm products (${kern.build})`, 'ratio'], [[median(ref).toFixed(1), median(fast).toFixed(1), (median(ref) / median(fast)).toFixed(2)]]));
console.log(`\nwebquant imatrix, ${ntok} tokens, one thread: ${secs.map((s) => s.toFixed(1)).join(', ')} s (median ${median(secs).toFixed(1)} s)`);
