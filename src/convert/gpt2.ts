// GPT-2 checkpoints (model_type gpt2) seen with the Llama-style names the converters and the
// forward read. Facts from transformers' GPT2 and llama.cpp's converter: the projections are
// Conv1D layers stored [in, out], which this view transposes to [out, in] rows as every other
// family stores them (llama.cpp's converter transposes them too); c_attn holds q, k and v (in that
// order) in one projection; LayerNorms have biases; positions are a learned table (wpe); the
// attention's causal-mask buffers (attn.bias, attn.masked_bias) of old checkpoints are dropped.
// Names may carry GPT2LMHeadModel's "transformer." prefix.
import { ErrorCodes, fail } from '../errors.js';
import { ownedValues, viewBase, type Checkpoint, type TensorInfo } from '../io/checkpoint.js';

const LAYER = /^(?:transformer\.)?h\.(\d+)\.(.+)$/;
const LAYER_NAMES: Record<string, string> = {
  'ln_1.weight': 'input_layernorm.weight',
  'ln_1.bias': 'input_layernorm.bias',
  'attn.c_attn.weight': 'self_attn.qkv_proj.weight',
  'attn.c_attn.bias': 'self_attn.qkv_proj.bias',
  'attn.c_proj.weight': 'self_attn.o_proj.weight',
  'attn.c_proj.bias': 'self_attn.o_proj.bias',
  'ln_2.weight': 'post_attention_layernorm.weight',
  'ln_2.bias': 'post_attention_layernorm.bias',
  'mlp.c_fc.weight': 'mlp.up_proj.weight',
  'mlp.c_fc.bias': 'mlp.up_proj.bias',
  'mlp.c_proj.weight': 'mlp.down_proj.weight',
  'mlp.c_proj.bias': 'mlp.down_proj.bias',
};
const GLOBAL_NAMES: Record<string, string> = {
  'wte.weight': 'model.embed_tokens.weight',
  'wpe.weight': 'model.embed_positions.weight',
  'ln_f.weight': 'model.norm.weight',
  'ln_f.bias': 'model.norm.bias',
};
const ELEM: Record<string, number> = { F32: 4, F16: 2, BF16: 2 };

/** True when `input` holds GPT-2's blocks (h.N.attn.c_attn.weight). */
export function isGpt2Checkpoint(input: Checkpoint): boolean {
  return input.tensors.some((t) => /^(?:transformer\.)?h\.\d+\.attn\.c_attn\.weight$/.test(t.name));
}

/** [rows, cols] elements of `es` bytes -> [cols, rows]. */
function transpose(src: Uint8Array, rows: number, cols: number, es: number): Uint8Array {
  const out = new Uint8Array(src.byteLength);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) out.set(src.subarray((r * cols + c) * es, (r * cols + c + 1) * es), (c * rows + r) * es);
  }
  return out;
}

export function gpt2View(input: Checkpoint): Checkpoint {
  const made = new Map<string, { info: TensorInfo; src: TensorInfo; transposed: boolean }>();
  const tensors: TensorInfo[] = [];
  for (const t of input.tensors) {
    const bare = t.name.startsWith('transformer.') ? t.name.slice('transformer.'.length) : t.name;
    const m = LAYER.exec(t.name);
    if (m && (m[2] === 'attn.bias' || m[2] === 'attn.masked_bias')) continue;
    const name = m ? (LAYER_NAMES[m[2]] && `model.layers.${m[1]}.${LAYER_NAMES[m[2]]}`) : GLOBAL_NAMES[bare] ?? t.name;
    if (!name) fail(ErrorCodes.MODEL, `[gpt2] ${input.source}: no Llama-style name for "${t.name}" of a GPT-2 checkpoint`, { file: input.source, tensor: t.name });
    const transposed = m !== null && m[2].endsWith('.weight') && (m[2].startsWith('attn.') || m[2].startsWith('mlp.'));
    if (transposed && (t.shape.length !== 2 || !(t.dtype in ELEM))) {
      fail(ErrorCodes.MODEL, `[gpt2] ${input.source}: "${t.name}" is ${t.dtype} [${t.shape}]; a Conv1D weight must be an F32, F16 or BF16 matrix [in, out]`, { file: input.source, tensor: t.name, value: t.shape });
    }
    const info: TensorInfo = { ...t, name, shape: transposed ? [t.shape[1], t.shape[0]] : t.shape.slice() };
    made.set(name, { info, src: t, transposed });
    tensors.push(info);
  }
  const entry = (name: string) => made.get(name) ?? fail(ErrorCodes.TENSOR_NOT_FOUND, `[gpt2] ${input.source}: no tensor named "${name}"`, { file: input.source, tensor: name });
  // A transposed tensor's bytes, from its source's [in, out] rows.
  const raw = async (name: string): Promise<Uint8Array> => {
    const { src, transposed } = entry(name);
    const b = await input.readRaw(src.name);
    return transposed ? transpose(b, src.shape[0], src.shape[1], ELEM[src.dtype]) : b;
  };
  return {
    ...viewBase(input, tensors, (name) => entry(name).info),
    readRaw: raw,
    async readF32(name) {
      const e = entry(name);
      if (!e.transposed) return input.readF32(e.src.name);
      const f = await input.readF32(e.src.name);
      const t = transpose(new Uint8Array(f.buffer, f.byteOffset, f.byteLength), e.src.shape[0], e.src.shape[1], 4);
      return new Float32Array(t.buffer, 0, t.byteLength >> 2);
    },
    async readValues(name) {
      const e = entry(name);
      return e.transposed ? ownedValues(e.info.dtype, await raw(name)) : input.readValues(e.src.name);
    },
    // A transposed matrix's rows are its source's columns: read whole, then cut (GPT-2's largest
    // matrix is tens of MB).
    async readRows(name, firstRow, rows) {
      const e = entry(name);
      if (!e.transposed) {
        if (!input.readRows) fail(ErrorCodes.BAD_INPUT, `[gpt2] ${input.source} reads no row ranges`, { file: input.source, tensor: name });
        return input.readRows!(e.src.name, firstRow, rows);
      }
      const [n, cols] = e.info.shape;
      if (!Number.isSafeInteger(firstRow) || !Number.isSafeInteger(rows) || firstRow < 0 || rows < 0 || firstRow + rows > n) {
        fail(ErrorCodes.BAD_INPUT, `[gpt2] ${input.source}: rows [${firstRow}, ${firstRow + rows}) are outside the ${n} rows of "${name}"`, { file: input.source, tensor: name, value: [firstRow, rows] });
      }
      const es = ELEM[e.info.dtype];
      return ownedValues(e.info.dtype, (await raw(name)).slice(firstRow * cols * es, (firstRow + rows) * cols * es));
    },
    locate(name, firstRow, rows) {
      const e = entry(name);
      return e.transposed ? undefined : input.locate?.(e.src.name, firstRow, rows);
    },
  };
}
