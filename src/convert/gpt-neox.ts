// GPT-NeoX checkpoints (model_type gpt_neox: Pythia, GPT-NeoX-20B) seen with the Llama-style
// names the converters and the forward read. Facts from transformers' GPTNeoX and llama.cpp's
// converter: query_key_value holds, for each head in turn, its q, k and v rows (head_dim each),
// which this view regroups into all q rows, then all k, then all v (llama.cpp's converter does the
// same); LayerNorms have biases; the rotary and mask buffers of old checkpoints are dropped.
import { ErrorCodes, fail } from '../errors.js';
import { ownedValues, tensorBytes, viewBase, type Checkpoint, type TensorInfo } from '../io/checkpoint.js';

const LAYER = /^gpt_neox\.layers\.(\d+)\.(.+)$/;
const LAYER_NAMES: Record<string, string> = {
  'input_layernorm.weight': 'input_layernorm.weight',
  'input_layernorm.bias': 'input_layernorm.bias',
  'post_attention_layernorm.weight': 'post_attention_layernorm.weight',
  'post_attention_layernorm.bias': 'post_attention_layernorm.bias',
  'attention.query_key_value.weight': 'self_attn.qkv_proj.weight',
  'attention.query_key_value.bias': 'self_attn.qkv_proj.bias',
  'attention.dense.weight': 'self_attn.o_proj.weight',
  'attention.dense.bias': 'self_attn.o_proj.bias',
  'mlp.dense_h_to_4h.weight': 'mlp.up_proj.weight',
  'mlp.dense_h_to_4h.bias': 'mlp.up_proj.bias',
  'mlp.dense_4h_to_h.weight': 'mlp.down_proj.weight',
  'mlp.dense_4h_to_h.bias': 'mlp.down_proj.bias',
};
const GLOBAL_NAMES: Record<string, string> = {
  'gpt_neox.embed_in.weight': 'model.embed_tokens.weight',
  'gpt_neox.final_layer_norm.weight': 'model.norm.weight',
  'gpt_neox.final_layer_norm.bias': 'model.norm.bias',
  'embed_out.weight': 'lm_head.weight',
};
const DROPPED = /\.(?:rotary_emb\.inv_freq|attention\.bias|attention\.masked_bias)$/;

/** True when `input` holds GPT-NeoX's blocks. */
export function isGptNeoxCheckpoint(input: Checkpoint): boolean {
  return input.tensors.some((t) => /^gpt_neox\.layers\.\d+\.attention\.query_key_value\.weight$/.test(t.name));
}

/** Rows [h][q|k|v][hd] -> [q|k|v][h][hd], `rowBytes` bytes a row. */
function regroup(src: Uint8Array, heads: number, hd: number, rowBytes: number): Uint8Array {
  const out = new Uint8Array(src.byteLength);
  const block = hd * rowBytes;
  for (let h = 0; h < heads; h++) {
    for (let j = 0; j < 3; j++) out.set(src.subarray((h * 3 + j) * block, (h * 3 + j + 1) * block), (j * heads + h) * block);
  }
  return out;
}

/** The view; `heads` is config.json's num_attention_heads (the q/k/v grouping needs it). */
export function gptNeoxView(input: Checkpoint, heads: number): Checkpoint {
  const made = new Map<string, { info: TensorInfo; src: TensorInfo; qkv: boolean }>();
  const tensors: TensorInfo[] = [];
  for (const t of input.tensors) {
    if (DROPPED.test(t.name)) continue;
    const m = LAYER.exec(t.name);
    const name = m ? LAYER_NAMES[m[2]] && `model.layers.${m[1]}.${LAYER_NAMES[m[2]]}` : GLOBAL_NAMES[t.name] ?? t.name;
    if (!name) fail(ErrorCodes.MODEL, `[gpt-neox] ${input.source}: no Llama-style name for "${t.name}" of a GPT-NeoX checkpoint`, { file: input.source, tensor: t.name });
    const qkv = m !== null && m[2].startsWith('attention.query_key_value.');
    if (qkv && (!['F32', 'F16', 'BF16'].includes(t.dtype) || t.shape[0] % (3 * heads) !== 0)) {
      fail(ErrorCodes.MODEL, `[gpt-neox] ${input.source}: "${t.name}" is ${t.dtype} [${t.shape}]; expected F32, F16 or BF16 with 3 x ${heads} heads of rows`, { file: input.source, tensor: t.name, value: t.shape });
    }
    const info: TensorInfo = { ...t, name, shape: t.shape.slice() };
    made.set(name, { info, src: t, qkv });
    tensors.push(info);
  }
  const entry = (name: string) => made.get(name) ?? fail(ErrorCodes.TENSOR_NOT_FOUND, `[gpt-neox] ${input.source}: no tensor named "${name}"`, { file: input.source, tensor: name });
  const rowBytes = (t: TensorInfo, es: number) => (t.shape.length > 1 ? t.shape[1] : 1) * es;
  const grouped = (e: { src: TensorInfo }, raw: Uint8Array, es: number) => regroup(raw, heads, e.src.shape[0] / (3 * heads), rowBytes(e.src, es));
  const es = (dtype: string) => (dtype === 'F32' ? 4 : 2);
  return {
    ...viewBase(input, tensors, (name) => entry(name).info),
    async readRaw(name) {
      const e = entry(name);
      const raw = await input.readRaw(e.src.name);
      return e.qkv ? grouped(e, raw, es(e.src.dtype)) : raw;
    },
    async readF32(name) {
      const e = entry(name);
      const f = await input.readF32(e.src.name);
      if (!e.qkv) return f;
      const g = grouped(e, new Uint8Array(f.buffer, f.byteOffset, f.byteLength), 4);
      return new Float32Array(g.buffer);
    },
    async readValues(name) {
      const e = entry(name);
      return e.qkv ? ownedValues(e.src.dtype, grouped(e, await input.readRaw(e.src.name), es(e.src.dtype))) : input.readValues(e.src.name);
    },
    async readRows(name, firstRow, rows) {
      const e = entry(name);
      if (e.qkv) {
        const total = e.src.shape[0];
        if (!Number.isSafeInteger(firstRow) || !Number.isSafeInteger(rows) || firstRow < 0 || rows < 0 || firstRow + rows > total) {
          fail(ErrorCodes.BAD_INPUT, `[gpt-neox] ${input.source}: rows [${firstRow}, ${firstRow + rows}) are outside the ${total} rows of "${name}"`, { file: input.source, tensor: name, value: [firstRow, rows] });
        }
        // Presented row (part, head, i) is stored row (head * 3 + part) * hd + i: read the range's
        // runs of up to hd consecutive stored rows, not the whole tensor.
        const hd = total / (3 * heads), cols = e.src.shape.length > 1 ? e.src.shape[1] : 1, size = es(e.src.dtype);
        const out = new Uint8Array(rows * cols * size);
        for (let r = firstRow; r < firstRow + rows;) {
          const part = Math.floor(r / (heads * hd)), h = Math.floor(r / hd) % heads, i = r % hd;
          const n = Math.min(hd - i, firstRow + rows - r);
          const at = ((h * 3 + part) * hd + i) * cols * size;
          out.set(await tensorBytes(input, e.src.name, at, n * cols * size), (r - firstRow) * cols * size);
          r += n;
        }
        return ownedValues(e.src.dtype, out);
      }
      if (!input.readRows) fail(ErrorCodes.BAD_INPUT, `[gpt-neox] ${input.source} reads no row ranges`, { file: input.source, tensor: name });
      return input.readRows!(e.src.name, firstRow, rows);
    },
    locate(name, firstRow, rows) {
      const e = entry(name);
      return e.qkv ? undefined : input.locate?.(e.src.name, firstRow, rows);
    },
  };
}
