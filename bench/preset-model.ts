// The F32 Llama GGUF and importance matrix that bench/preset-check-model.ts writes, as bytes, for
// any size: the tests compare webquant's outputs of a small one with llama-quantize's
// (test/fixtures/llama-quantize.json). Deterministic: the same sizes give the same bytes.
import { collect } from '../src/io/stream.js';
import { writeGguf, type GgufWriteKV, type GgufWriteTensor } from '../src/io/gguf-writer.js';
import { llamaMetadata } from '../src/convert/llama-gguf.js';
import { vocabMetadata } from '../src/convert/gguf-vocab.js';
import { imatrixGguf } from '../src/eval/imatrix.js';
import { asciiVocab, VOCAB } from './synthetic-llama.js';
import { weightData } from './stats.js';

export interface PresetModelSize {
  kvHeads: number;
  hidden?: number;
  ffn?: number;
  layers?: number;
  heads?: number;
  headDim?: number;
}

/** Rows all multiples of 256 when `hidden` and `ffn` are; an untied output; weight-like values. */
export async function presetModel(s: PresetModelSize): Promise<{ model: Uint8Array; imatrix: Uint8Array }> {
  const { kvHeads, hidden: H = 512, ffn: F = 1024, layers: L = 16, heads: HEADS = 8, headDim: HD = 64 } = s;
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
  const model = await collect(writeGguf({ metadata: kv, tensors }));
  const entries = new Map();
  for (const t of tensors) {
    if (t.shape.length !== 2 || t.name === 'token_embd.weight') continue;
    const cols = t.shape[1];
    const w = weightData(cols, seed++);
    entries.set(t.name, { cols, sums: [Float64Array.from(w, (v) => 2 ** Math.round(300 * v) * 10)], counts: [100] });
  }
  const im = imatrixGguf({ entries, chunks: 1, chunkSize: 100 } as never, 'synthetic');
  return { model, imatrix: await collect(writeGguf(im)) };
}
