// npx tsx bench/preset-check-model.ts <kv-heads> <dir>
//
// Writes <dir>/f32.gguf, an F32 Llama GGUF whose rows are all multiples of 256 (16 layers, hidden
// 512, FFN 1024, 8 query heads of 64 over <kv-heads> KV heads: 2 gives gqa 4, 8 gives gqa 1; an
// untied output), with weight-like values, and <dir>/imatrix.gguf, an importance matrix for every
// 2-D tensor but token_embd (values spread over 2^-6 .. 2^6). For comparing `webquant quantize
// <dir>/f32.gguf --preset P [--imatrix <dir>/imatrix.gguf]` with llama-quantize of the same file
// (bench/gguf-diff.ts; README, "Presets against llama-quantize").
import { writeFileSync } from 'node:fs';
import { collect } from '../src/io/stream.js';
import { writeGguf, type GgufWriteKV, type GgufWriteTensor } from '../src/io/gguf-writer.js';
import { llamaMetadata } from '../src/convert/llama-gguf.js';
import { vocabMetadata } from '../src/convert/gguf-vocab.js';
import { imatrixGguf } from '../src/eval/imatrix.js';
import { asciiVocab, VOCAB } from './synthetic-llama.js';
import { weightData } from './util.js';
const kvHeads = Number(process.argv[2]);
const out = process.argv[3];
const H = 512, F = 1024, L = 16, HEADS = 8, HD = 64;
const config = { hidden_size: H, intermediate_size: F, num_hidden_layers: L, num_attention_heads: HEADS, num_key_value_heads: kvHeads, head_dim: HD, vocab_size: VOCAB, max_position_embeddings: 512 };
const kv: GgufWriteKV[] = Object.entries(llamaMetadata(config as never, 'preset check')).map(([key, v]) => ({ key, type: v.type, value: v.value }));
kv.push(...vocabMetadata(asciiVocab()));
let seed = 1;
const t2 = (name: string, rows: number, cols: number): GgufWriteTensor => ({ name, ggmlType: 'F32', shape: [rows, cols], data: weightData(rows * cols, seed++) });
const ones = (n: number) => new Float32Array(n).fill(1);
const tensors: GgufWriteTensor[] = [t2('token_embd.weight', VOCAB, H), { name: 'output_norm.weight', ggmlType: 'F32', shape: [H], data: ones(H) }, t2('output.weight', VOCAB, H)];
for (let l = 0; l < L; l++) {
  tensors.push({ name: `blk.${l}.attn_norm.weight`, ggmlType: 'F32', shape: [H], data: ones(H) }, { name: `blk.${l}.ffn_norm.weight`, ggmlType: 'F32', shape: [H], data: ones(H) });
  tensors.push(t2(`blk.${l}.attn_q.weight`, HEADS * HD, H), t2(`blk.${l}.attn_k.weight`, kvHeads * HD, H), t2(`blk.${l}.attn_v.weight`, kvHeads * HD, H), t2(`blk.${l}.attn_output.weight`, H, HEADS * HD));
  tensors.push(t2(`blk.${l}.ffn_gate.weight`, F, H), t2(`blk.${l}.ffn_up.weight`, F, H), t2(`blk.${l}.ffn_down.weight`, H, F));
}
writeFileSync(`${out}/f32.gguf`, await collect(writeGguf({ metadata: kv, tensors })));
const entries = new Map();
for (const t of tensors) {
  if (t.shape.length !== 2 || t.name === 'token_embd.weight') continue;
  const cols = t.shape[1];
  const w = weightData(cols, seed++);
  entries.set(t.name, { cols, sums: [Float64Array.from(w, (v) => 2 ** Math.round(300 * v) * 10)], counts: [100] });
}
const im = imatrixGguf({ entries, chunks: 1, chunkSize: 100 } as never, 'synthetic');
writeFileSync(`${out}/imatrix.gguf`, await collect(writeGguf(im)));
console.log('ok');
