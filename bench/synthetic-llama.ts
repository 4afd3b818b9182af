// Synthetic Llama-architecture GGUF models for bench/matvec-browser.ts: llama.cpp's decode time per
// token is then dominated by matrices of one chosen shape and type, so that it can be compared with
// one webquant matvec on that shape.
//
// For a target shape rows x rowLength (rows outputs, rowLength inputs), hidden size = rowLength and
// n_head * head_dim = rows (head_dim 128, as Llama), MHA (n_head_kv = n_head). Each layer is then
//   attn_q, attn_k, attn_v: rows x rowLength       (the target shape)
//   attn_output:            rowLength x rows       (the same weights, transposed)
//   ffn_gate, ffn_up:       256 x rowLength, ffn_down: rowLength x 256  (the smallest FFN a K-quant
//                           row allows; 4.5 % of a layer's weights for 4096x4096 and 4096x11008)
// so for 4096x4096 the four attention matrices are all the target shape, and for 4096x11008 (Llama
// 7B's down_proj) three of four are. The vocabulary is SentencePiece-style, 259 ASCII pieces, token_embd F32, the norms F32 ones.
//
// Values: one matrix of the target shape is quantized (weight-like data, bench/util.ts) and every
// 2-D tensor of the model takes the first bytes of it that its own size needs (repeated, if it
// needs more): GGUF blocks carry their own scales, so any run of whole blocks is a valid tensor of
// any shape with the same number of blocks. Every layer (and q/k/v) shares those bytes; llama.cpp still streams each tensor from its
// own place in memory, which is what the timing needs (the values do not change the work done).
import { GgufWriter, writeGguf, type GgufWriteKV, type GgufWriteTensor } from '../src/io/gguf-writer.js';
import { ggmlBytes, ggmlType } from '../src/io/ggml-types.js';
import { llamaMetadata, type LlamaConfig } from '../src/convert/arch/index.js';
import { vocabMetadata, TOKEN_TYPE, type GgufVocab } from '../src/convert/gguf-vocab.js';
import { getFormat } from '../src/formats/registry.js';
import type { QuantizedTensor } from '../src/quantize.js';
import { weightData } from './util.js';

export const HEAD_DIM = 128;
export const FFN = 256;
export const VOCAB = 259;

export interface SyntheticModel {
  config: LlamaConfig;
  /** Names and [rows, rowLength] of one layer's matrices (layer 0). */
  layerMatrices: { name: string; shape: [number, number] }[];
  /** Weights per layer in its 2-D tensors. */
  layerWeights: number;
  /** Bytes per layer in its 2-D tensors (quantized). */
  layerBytes: number;
  /** Weights per layer in tensors of exactly the target shape. */
  targetWeights: number;
  totalBytes: number;
  /** The GGUF file, written on each call (nothing is held but the shared quantized bytes). */
  stream(): AsyncGenerator<Uint8Array>;
}

/**
 * 3 control tokens and 256 ASCII pieces ("▁", the printable characters, "▁" + each, then fillers):
 * enough for llama.cpp to load, tokenize and detokenize, and whatever it generates is valid UTF-8
 * (a byte-token vocabulary lets random weights emit half a character, which the server's JSON
 * output refuses).
 */
export function asciiVocab(): GgufVocab {
  const tokens = ['<unk>', '<s>', '</s>', '\u2581'];
  for (let c = 33; c < 127; c++) tokens.push(String.fromCharCode(c));
  for (let c = 33; c < 127; c++) tokens.push(`\u2581${String.fromCharCode(c)}`);
  while (tokens.length < VOCAB) tokens.push(`w${tokens.length}`);
  const types = tokens.map((_, i) => (i === 0 ? TOKEN_TYPE.UNKNOWN : i < 3 ? TOKEN_TYPE.CONTROL : TOKEN_TYPE.NORMAL));
  return {
    model: 'llama', tokens, scores: tokens.map((t) => -t.length), tokenTypes: types,
    special: { unk: 0, bos: 1, eos: 2 }, add: { bos: true, eos: false }, source: 'synthetic ASCII vocabulary', warnings: [],
  };
}

/** A `layers`-layer model whose attention matrices have the shape of `qt` and its type. */
export function syntheticLlama(qt: QuantizedTensor, layers: number): SyntheticModel {
  const [rows, rowLength] = qt.shape;
  const spec = getFormat(qt.format);
  const type = spec.ggml && ggmlType(spec.ggml.type);
  if (!type) throw new Error(`synthetic model: ${qt.format} is not a GGUF type`);
  if (rows % HEAD_DIM !== 0) throw new Error(`synthetic model: ${rows} rows are not a multiple of head_dim ${HEAD_DIM}`);
  const heads = rows / HEAD_DIM;
  const config: LlamaConfig = {
    hidden_size: rowLength, intermediate_size: FFN, num_hidden_layers: layers, num_attention_heads: heads,
    num_key_value_heads: heads, head_dim: HEAD_DIM, vocab_size: VOCAB, max_position_embeddings: 512,
  };
  const kv: GgufWriteKV[] = Object.entries(llamaMetadata(config, `webquant synthetic ${qt.format} ${rows}x${rowLength}`))
    .map(([key, v]) => ({ key, type: v.type, value: v.value }));
  // n_head * head_dim differs from the hidden size (4096x11008): llama.cpp then needs the head size.
  kv.push({ key: 'llama.attention.key_length', type: 'u32', value: HEAD_DIM }, { key: 'llama.attention.value_length', type: 'u32', value: HEAD_DIM });
  kv.push(...vocabMetadata(asciiVocab()));

  const quant = (name: string, shape: [number, number]): GgufWriteTensor => {
    const bytes = ggmlBytes(type, shape[0] * shape[1]);
    if (bytes <= qt.data.byteLength) return { name, ggmlType: type.name, shape, data: qt.data.subarray(0, bytes) };
    // larger than the quantized matrix (the output matrix of a small test shape): its blocks repeated
    const data = new Uint8Array(bytes);
    for (let at = 0; at < bytes; at += qt.data.byteLength) data.set(qt.data.subarray(0, Math.min(qt.data.byteLength, bytes - at)), at);
    return { name, ggmlType: type.name, shape, data };
  };
  const ones = (n: number) => new Float32Array(n).fill(1);
  const layerMatrices: { name: string; shape: [number, number] }[] = [
    { name: 'attn_q.weight', shape: [rows, rowLength] },
    { name: 'attn_k.weight', shape: [rows, rowLength] },
    { name: 'attn_v.weight', shape: [rows, rowLength] },
    { name: 'attn_output.weight', shape: [rowLength, rows] },
    { name: 'ffn_gate.weight', shape: [FFN, rowLength] },
    { name: 'ffn_up.weight', shape: [FFN, rowLength] },
    { name: 'ffn_down.weight', shape: [rowLength, FFN] },
  ];
  const norm = ones(rowLength);
  const tensors: GgufWriteTensor[] = [
    { name: 'token_embd.weight', ggmlType: 'F32', shape: [VOCAB, rowLength], data: weightData(VOCAB * rowLength, 99) },
    { name: 'output_norm.weight', ggmlType: 'F32', shape: [rowLength], data: norm },
    quant('output.weight', [VOCAB, rowLength]),
  ];
  for (let l = 0; l < layers; l++) {
    tensors.push({ name: `blk.${l}.attn_norm.weight`, ggmlType: 'F32', shape: [rowLength], data: norm });
    tensors.push({ name: `blk.${l}.ffn_norm.weight`, ggmlType: 'F32', shape: [rowLength], data: norm });
    for (const m of layerMatrices) tensors.push(quant(`blk.${l}.${m.name}`, m.shape));
  }
  const spec0 = { metadata: kv, tensors };
  const layerWeights = layerMatrices.reduce((a, m) => a + m.shape[0] * m.shape[1], 0);
  return {
    config,
    layerMatrices: layerMatrices.map((m) => ({ name: `blk.0.${m.name}`, shape: m.shape })),
    layerWeights,
    layerBytes: layerMatrices.reduce((a, m) => a + ggmlBytes(type, m.shape[0] * m.shape[1]), 0),
    targetWeights: layerMatrices.filter((m) => m.shape[0] === rows && m.shape[1] === rowLength).length * rows * rowLength,
    totalBytes: new GgufWriter(spec0).totalBytes,
    stream: () => writeGguf(spec0),
  };
}
