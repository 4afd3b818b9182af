// The F32 Llama GGUF and importance matrix that bench/preset-check-model.ts writes, as bytes, for
// any size: the tests compare webquant's outputs of a small one with llama-quantize's
// (test/fixtures/llama-quantize.json). Deterministic: the same sizes give the same bytes.
import { collect } from '../src/io/stream.js';
import { writeGguf, type GgufWriteKV, type GgufWriteTensor } from '../src/io/gguf-writer.js';
import { llamaMetadata } from '../src/convert/arch/index.js';
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
  /** q, k and v in one attn_qkv (Phi-3, GPT-2), which llama-quantize treats as attn_v. */
  fusedQkv?: boolean;
  /** No output.weight: token_embd is the output head too. */
  tied?: boolean;
  /** Biases beside the projections (GPT-2-like): vectors named like the weights, which llama-quantize never counts. */
  biases?: boolean;
  /** Only these blocks have attention; the others a convolution (LFM2-like hybrids). */
  attnLayers?: number[];
  /** Only these blocks have an FFN. */
  ffnLayers?: number[];
  /**
   * Tensors llama-quantize keeps as they are or treats as token_embd: LFM2's convolution in the
   * blocks without attention, a 2-D Mamba-1 ssm_a, Gemma 3n's AltUp / Laurel / per-layer
   * projection and per_layer_token_embd.
   */
  extras?: boolean;
  /** MoE blocks after the first (which stays dense): a router, this many experts of `ffn / 2` and a shared expert. */
  experts?: number;
}

/**
 * Rows all multiples of 256 when `hidden` and `ffn` are; an untied output; weight-like values.
 * The options change the tensor set (and so llama-quantize's counters) without another
 * architecture: llama-quantize decides by tensor names.
 */
export async function presetModel(s: PresetModelSize): Promise<{ model: Uint8Array; imatrix: Uint8Array }> {
  const { kvHeads, hidden: H = 512, ffn: F = 1024, layers: L = 16, heads: HEADS = 8, headDim: HD = 64, experts: E } = s;
  const config = {
    hidden_size: H, intermediate_size: F, num_hidden_layers: L, num_attention_heads: HEADS, num_key_value_heads: kvHeads, head_dim: HD, vocab_size: VOCAB, max_position_embeddings: 512,
    ...(E ? { num_local_experts: E, num_experts_per_tok: 2 } : {}),
  };
  const kv: GgufWriteKV[] = Object.entries(llamaMetadata(config as never, 'preset check')).map(([key, v]) => ({ key, type: v.type, value: v.value }));
  kv.push(...vocabMetadata(asciiVocab()));
  let seed = 1;
  const t2 = (name: string, rows: number, cols: number): GgufWriteTensor => ({ name, ggmlType: 'F32', shape: [rows, cols], data: weightData(rows * cols, seed++) });
  const t3 = (name: string, n: number, rows: number, cols: number): GgufWriteTensor => ({ name, ggmlType: 'F32', shape: [n, rows, cols], data: weightData(n * rows * cols, seed++) });
  const ones = (n: number) => new Float32Array(n).fill(1);
  const tensors: GgufWriteTensor[] = [t2('token_embd.weight', VOCAB, H), { name: 'output_norm.weight', ggmlType: 'F32', shape: [H], data: ones(H) }];
  if (!s.tied) tensors.push(t2('output.weight', VOCAB, H));
  if (s.extras) tensors.push(t2('per_layer_token_embd.weight', VOCAB, H), t2('per_layer_model_proj.weight', H, H));
  for (let l = 0; l < L; l++) {
    const attn = !s.attnLayers || s.attnLayers.includes(l), ffn = !s.ffnLayers || s.ffnLayers.includes(l);
    tensors.push({ name: `blk.${l}.attn_norm.weight`, ggmlType: 'F32', shape: [H], data: ones(H) });
    if (ffn) tensors.push({ name: `blk.${l}.ffn_norm.weight`, ggmlType: 'F32', shape: [H], data: ones(H) });
    if (!attn) tensors.push(t2(`blk.${l}.shortconv.in_proj.weight`, 3 * H, H), t2(`blk.${l}.shortconv.out_proj.weight`, H, H));
    if (!attn && s.extras) tensors.push(t2(`blk.${l}.shortconv.conv.weight`, H, 3));
    if (s.extras && l === 0) tensors.push(t2(`blk.${l}.ssm_a`, 64, H), t2(`blk.${l}.altup_proj.weight`, H, H), t2(`blk.${l}.laurel_l.weight`, 64, H));
    else if (s.fusedQkv) tensors.push(t2(`blk.${l}.attn_qkv.weight`, (HEADS + 2 * kvHeads) * HD, H), t2(`blk.${l}.attn_output.weight`, H, HEADS * HD));
    else tensors.push(t2(`blk.${l}.attn_q.weight`, HEADS * HD, H), t2(`blk.${l}.attn_k.weight`, kvHeads * HD, H), t2(`blk.${l}.attn_v.weight`, kvHeads * HD, H), t2(`blk.${l}.attn_output.weight`, H, HEADS * HD));
    if (s.biases) {
      const vec = (name: string, n: number): GgufWriteTensor => ({ name, ggmlType: 'F32', shape: [n], data: weightData(n, seed++) });
      tensors.push(vec(`blk.${l}.attn_qkv.bias`, (HEADS + 2 * kvHeads) * HD), vec(`blk.${l}.ffn_up.bias`, F), vec(`blk.${l}.ffn_down.bias`, H));
    }
    if (!ffn) continue;
    if (E && l > 0) {
      const EF = F / 2;
      tensors.push(t2(`blk.${l}.ffn_gate_inp.weight`, E, H), t3(`blk.${l}.ffn_gate_exps.weight`, E, EF, H), t3(`blk.${l}.ffn_up_exps.weight`, E, EF, H), t3(`blk.${l}.ffn_down_exps.weight`, E, H, EF));
      tensors.push(t2(`blk.${l}.ffn_gate_shexp.weight`, EF, H), t2(`blk.${l}.ffn_up_shexp.weight`, EF, H), t2(`blk.${l}.ffn_down_shexp.weight`, H, EF));
    } else {
      tensors.push(t2(`blk.${l}.ffn_gate.weight`, F, H), t2(`blk.${l}.ffn_up.weight`, F, H), t2(`blk.${l}.ffn_down.weight`, H, F));
    }
  }
  const model = await collect(writeGguf({ metadata: kv, tensors }));
  const entries = new Map();
  for (const t of tensors) {
    if (t.shape.length < 2 || t.name === 'token_embd.weight') continue;
    const cols = t.shape[t.shape.length - 1], mats = t.shape.length === 3 ? t.shape[0] : 1;
    const sums = Array.from({ length: mats }, () => Float64Array.from(weightData(cols, seed++), (v) => 2 ** Math.round(300 * v) * 10));
    entries.set(t.name, { cols, sums, counts: new Array<number>(mats).fill(100) });
  }
  const im = imatrixGguf({ entries, chunks: 1, chunkSize: 100 } as never, 'synthetic');
  return { model, imatrix: await collect(writeGguf(im)) };
}
