// A Hugging Face Llama-family (or Qwen2/Qwen3, Gemma 3) checkpoint seen as llama.cpp's converter would write it:
// GGUF tensor names, no tensors GGUF does not store (rotary caches), q_proj / k_proj rows permuted
// from the rotate-half layout to interleaved pairs (Llama only), and 1-D F16/BF16 tensors (norms,
// biases) widened to F32, since llama.cpp stores every vector in F32 (Gemma 3's norms + 1 first).
// FP8 weights are presented as F32 with their scales applied (GGUF has no FP8 type; what is
// quantized is the value the checkpoint means): DeepSeek's `_scale_inv` blocks or
// compressed-tensors' `weight_scale`; those and the activation scales are left out.
// Nothing is read until a tensor is asked for; ranged reads of a permuted tensor fetch only the
// source rows they need.
import { ErrorCodes, fail } from '../errors.js';
import { numel, viewBase, type Checkpoint, type TensorInfo, type TensorValues } from '../io/checkpoint.js';
import type { GgufWriteKV } from '../io/gguf-writer.js';
import type { ModelConfig } from '../io/config.js';
import { generalMetadata, type GeneralSources } from './general-metadata.js';
import { vocabMetadata, type AddTokenType, type GgufVocab, type SpecialTokenType } from './gguf-vocab.js';
import type { DerivedTensor } from './arch/deepseek.js';
import { NVFP4_GLOBAL_SUFFIX, NVFP4_SCALE_2_SUFFIX, SCALE_SUFFIX, WEIGHT_SCALE_SUFFIX } from '../io/safetensors.js';
import { READ_AS_F32_DTYPES } from '../io/dtypes.js';
import { GGUF_ARCHITECTURES, LAYER, checkConfigTensors, familyView, ggufArchitecture, ggufExpertSlot, ggufTensorName, permuteHeads, permuteRows, type LlamaConfig } from './arch/index.js';
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from '../util/half.js';

export interface GgufViewOptions {
  /** Present 1-D F16/BF16 tensors as F32, as llama.cpp's converter stores them (default true). */
  f32Vectors?: boolean;
}

export interface GgufView extends Checkpoint {
  /** The checkpoint seen through the view. */
  readonly input: Checkpoint;
  /** Source (Hugging Face) name of a GGUF tensor name of the view. */
  sourceName(name: string): string;
}

interface Entry {
  info: TensorInfo;
  src: TensorInfo;
  /** Head count for permuted tensors. */
  heads?: number;
  /** A vector presented as F32 (from F16/BF16, or shifted). */
  widened: boolean;
  /** Added to every value in the source dtype before widening (Gemma's norms; see GgufArchitecture). */
  shift: number;
  /** A tensor the converter adds, not in the source (rope_freqs.weight); `src` is then `info`. */
  synth?: Float32Array;
  /** A layer's MoE experts stacked into one tensor: the per-expert source tensors, in order. */
  experts?: TensorInfo[];
  /** Made from `src`'s values (DeepSeek's attn_k_b / attn_v_b). */
  derive?: DerivedTensor;
}

/** Values of several tensors of one dtype, one after another. */
function concatValues(parts: TensorValues[]): TensorValues {
  const total = parts.reduce((a, p) => a + p.values.length, 0);
  const values = parts[0].dtype === 'f32' ? new Float32Array(total) : new Uint16Array(total);
  let at = 0;
  for (const p of parts) {
    values.set(p.values as never, at);
    at += p.values.length;
  }
  return { values, dtype: parts[0].dtype } as TensorValues;
}

const ELEM: Record<string, number> = { F32: 4, F16: 2, BF16: 2 };
/** FP8, NVFP4, MLX and bitsandbytes weights: values come from readF32 / readRows with their scales applied. */
const isF8 = (t: TensorInfo): boolean => t.dtype !== 'F64' && READ_AS_F32_DTYPES.has(t.dtype);
const READABLE = ['F32', 'F16', 'BF16', ...[...READ_AS_F32_DTYPES].filter((d) => d !== 'F64')];
const readable = (t: TensorInfo): boolean => t.dtype in ELEM || isF8(t);
/** The dtype the view presents a source tensor in: FP8 becomes F32 (GGUF has no FP8 type). */
const viewDtype = (t: TensorInfo): string => (isF8(t) ? 'F32' : t.dtype);
const bytesOf = (v: Float32Array | Uint16Array): Uint8Array => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);

function rowGeometry(shape: readonly number[]): { rows: number; rowLen: number } {
  // A 1-D tensor (a bias) is permuted element by element: its "rows" are single values.
  if (shape.length <= 1) return { rows: shape[0] ?? 1, rowLen: 1 };
  const rowLen = shape[shape.length - 1];
  return { rows: rowLen === 0 ? 0 : numel(shape) / rowLen, rowLen };
}

/** Source row of output row `to` of the rotate-half -> interleaved permutation (see permuteRows). */
function sourceRow(to: number, perHead: number): number {
  const h = Math.floor(to / perHead), j = to % perHead, half = perHead / 2;
  return h * perHead + (j % 2) * half + (j >> 1);
}

function permuteValues(v: TensorValues, rows: number, heads: number): TensorValues {
  const bytes = new Uint8Array(v.values.buffer, v.values.byteOffset, v.values.byteLength);
  const out = permuteRows(bytes, rows, v.values.byteLength / rows, heads);
  return {
    values: v.dtype === 'f32' ? new Float32Array(out.buffer, 0, out.byteLength >> 2) : new Uint16Array(out.buffer, 0, out.byteLength >> 1),
    dtype: v.dtype,
  };
}

/** A vector's values as F32, with `shift` added in the stored dtype first (one rounding, as torch adds). */
function vectorF32(v: TensorValues, shift: number): Float32Array {
  if (v.dtype === 'f32') return shift ? v.values.map((x) => x + shift) as Float32Array : v.values as Float32Array;
  const [toF32, fromF32] = v.dtype === 'bf16' ? [bf16ToF32, f32ToBf16] : [f16ToF32, f32ToF16];
  return Float32Array.from(v.values as Uint16Array, (b) => (shift ? toF32(fromF32(toF32(b) + shift)) : toF32(b)));
}

export function ggufView(source: Checkpoint, config: LlamaConfig, opts: GgufViewOptions = {}): GgufView {
  const widen = opts.f32Vectors ?? true;
  const arch = ggufArchitecture(config);
  // gpt-oss's packed experts, GPT-2's Conv1D layers, ...: under the Llama-style names read below.
  const input = familyView(source, config);
  const permute = arch?.permuteQK ?? true;
  const entries = new Map<string, Entry>();
  const tensors: TensorInfo[] = [];
  // MoE experts, gathered per merged tensor; each merged tensor takes its first expert's place.
  const experts = new Map<string, { at: number; list: TensorInfo[] }>();
  const fp8 = new Set(input.tensors.filter(isF8).map((t) => t.name));
  // An FP8 or NVFP4 weight's scales are applied by the input's reads (readF32, readRows): GGUF
  // gets the product. Its activation scales (input_scale, input_global_scale) and the KV-cache
  // scales of an FP8 KV cache (a runtime setting, with FP8 weights or without) have no GGUF tensor.
  const fp8Aux = (n: string) => [SCALE_SUFFIX, WEIGHT_SCALE_SUFFIX, NVFP4_SCALE_2_SUFFIX, NVFP4_GLOBAL_SUFFIX].some((s) => n.endsWith(s) && fp8.has(n.slice(0, -s.length)))
    || (/\.input_(?:global_)?scale$/.test(n) && fp8.has(`${n.slice(0, n.lastIndexOf('.'))}.weight`))
    || /\.self_attn\.(?:k|v|kv)_scale$/.test(n);
  for (const src of input.tensors) {
    if (fp8Aux(src.name)) continue;
    const layer = LAYER.exec(src.name);
    if (layer && arch?.extraLayers === 'drop' && Number(layer[1]) >= config.num_hidden_layers) continue;
    const derived = layer && arch?.derived?.(layer[2], src.shape, config);
    if (derived) {
      if (!readable(src)) {
        fail(ErrorCodes.UNSUPPORTED_DTYPE, `[convert] ${input.source}: "${src.name}" is ${src.dtype}; only F32, F16, BF16 and FP8 tensors can be reshaped for GGUF`, { file: input.source, tensor: src.name, value: src.dtype, expected: READABLE });
      }
      for (const d of derived) {
        const dtype = viewDtype(src);
        const info: TensorInfo = { name: `blk.${layer[1]}.${d.name}`, dtype, shape: d.shape, offset: 0, byteLength: numel(d.shape) * ELEM[dtype] };
        entries.set(info.name, { info, src, widened: false, shift: 0, derive: d });
        tensors.push(info);
      }
      continue;
    }
    const slot = ggufExpertSlot(src.name);
    if (slot) {
      let g = experts.get(slot.name);
      if (!g) experts.set(slot.name, (g = { at: tensors.length, list: [] }));
      if (g.list[slot.expert]) fail(ErrorCodes.MODEL, `[convert] ${input.source}: two tensors for expert ${slot.expert} of "${slot.name}"`, { file: input.source, tensor: src.name });
      g.list[slot.expert] = src;
      continue;
    }
    const name = ggufTensorName(src.name, arch?.name);
    if (name === undefined) continue;
    if (entries.has(name)) {
      fail(ErrorCodes.MODEL, `[convert] ${input.source}: tensors "${entries.get(name)!.src.name}" and "${src.name}" both map to GGUF "${name}"`, { file: input.source, tensor: src.name, value: name });
    }
    const heads = permute ? permuteHeads(src.name, config) : undefined;
    if (heads !== undefined) {
      if (!readable(src)) {
        fail(ErrorCodes.UNSUPPORTED_DTYPE, `[convert] ${input.source}: "${src.name}" is ${src.dtype}; only F32, F16, BF16 and FP8 q/k projections can be permuted for GGUF`, {
          file: input.source, tensor: src.name, value: src.dtype, expected: READABLE,
        });
      }
      const { rows } = rowGeometry(src.shape);
      if (rows % (2 * heads) !== 0) {
        fail(ErrorCodes.MODEL, `[convert] ${input.source}: "${src.name}" has ${rows} rows, which do not split into ${heads} heads of row pairs (check num_attention_heads / num_key_value_heads in config.json)`, {
          file: input.source, tensor: src.name, value: rows, expected: `a multiple of ${2 * heads}`,
        });
      }
    }
    const shift = arch?.normShift && src.shape.length <= 1 && src.name.endsWith('norm.weight') ? arch.normShift : 0;
    if (shift && !(src.dtype in ELEM)) {
      fail(ErrorCodes.UNSUPPORTED_DTYPE, `[convert] ${input.source}: "${src.name}" is ${src.dtype}; only F32, F16 and BF16 norms can be written for ${arch!.name}`, {
        file: input.source, tensor: src.name, value: src.dtype, expected: Object.keys(ELEM),
      });
    }
    const widened = src.shape.length <= 1 && (shift !== 0 || (widen && (src.dtype === 'F16' || src.dtype === 'BF16')));
    const info: TensorInfo = { ...src, shape: src.shape.slice(), name, ...(widened || isF8(src) ? { dtype: 'F32', byteLength: numel(src.shape) * 4 } : {}) };
    entries.set(name, { info, src, heads, widened, shift });
    tensors.push(info);
  }

  for (const [name, g] of [...experts].reverse()) {
    const list = g.list, first = list[0];
    for (let e = 0; e < list.length; e++) {
      const x = list[e];
      // Matrices, or vectors (gpt-oss's expert biases).
      if (!x || x.dtype !== first?.dtype || x.shape.join() !== first.shape.join() || x.shape.length < 1 || x.shape.length > 2 || !readable(x)) {
        fail(ErrorCodes.MODEL, `[convert] ${input.source}: the experts of "${name}" must be F32, F16, BF16 or FP8 matrices (or vectors) of one dtype and shape; expert ${e} is ${x ? `${x.dtype} [${x.shape}]` : 'missing'}`, {
          file: input.source, tensor: x?.name ?? name, expected: first ? `${first.dtype} [${first.shape}]` : 'expert 0',
        });
      }
    }
    const dtype = viewDtype(first);
    const info: TensorInfo = { name, dtype, shape: [list.length, ...first.shape], offset: 0, byteLength: list.length * numel(first.shape) * ELEM[dtype] };
    entries.set(name, { info, src: first, widened: false, shift: 0, experts: list });
    tensors.splice(g.at, 0, info);
  }

  // Metadata from a config.json that contradicts the tensors makes a GGUF llama.cpp refuses (or
  // runs wrong); checked before the rope factors below are sized by the config's head_dim.
  checkConfigTensors(config, input.tensors, input.source);

  // Tensors the converter adds (rope factors: Llama 3.1+ rope_freqs, Phi-3's LongRoPE), first.
  for (const x of (arch?.extraTensors?.(config) ?? []).reverse()) {
    const info: TensorInfo = { name: x.name, dtype: 'F32', shape: [x.values.length], offset: 0, byteLength: x.values.byteLength };
    entries.set(info.name, { info, src: info, widened: false, shift: 0, synth: x.values });
    tensors.unshift(info);
  }

  const entry = (name: string): Entry => {
    const e = entries.get(name);
    if (!e) {
      fail(ErrorCodes.TENSOR_NOT_FOUND, `[convert] ${input.source}: no tensor named "${String(name)}" in the GGUF view`, {
        file: input.source, tensor: String(name), expected: `one of the ${entries.size} GGUF tensor names of the checkpoint`,
      });
    }
    return e;
  };

  // FP8 sources are read as f32 with their scales applied; the view presents them as F32.
  const values = async (t: TensorInfo): Promise<TensorValues> => (isF8(t) ? { values: await input.readF32(t.name), dtype: 'f32' } : input.readValues(t.name));
  const raw = async (t: TensorInfo): Promise<Uint8Array> => (isF8(t) ? bytesOf(await input.readF32(t.name)) : input.readRaw(t.name));

  const readRows = input.readRows;
  const view: GgufView = {
    ...viewBase(input, tensors, (name) => entry(name).info),
    input,
    sourceName: (name) => entry(name).src.name,
    async readRaw(name) {
      const e = entry(name);
      if (e.synth) return new Uint8Array(e.synth.slice().buffer);
      if (e.derive) return bytesOf(e.derive.make(await values(e.src)).values);
      if (e.experts) {
        const parts = await Promise.all(e.experts.map(raw));
        const out = new Uint8Array(e.info.byteLength);
        parts.reduce((at, p) => (out.set(p, at), at + p.byteLength), 0);
        return out;
      }
      if (e.widened) {
        const f = vectorF32(await input.readValues(e.src.name), e.shift);
        return new Uint8Array(f.buffer, f.byteOffset, f.byteLength);
      }
      const r = await raw(e.src);
      if (e.heads === undefined) return r;
      const { rows } = rowGeometry(e.src.shape);
      return permuteRows(r, rows, rows ? r.byteLength / rows : 0, e.heads);
    },
    async readF32(name) {
      const e = entry(name);
      if (e.synth) return e.synth.slice();
      if (e.derive) return e.derive.make({ values: await input.readF32(e.src.name), dtype: 'f32' }).values as Float32Array;
      if (e.experts) return concatValues(await Promise.all(e.experts.map(async (x) => ({ values: await input.readF32(x.name), dtype: 'f32' as const })))).values as Float32Array;
      if (e.widened) return vectorF32(await input.readValues(e.src.name), e.shift);
      const f = await input.readF32(e.src.name);
      if (e.heads === undefined) return f;
      const { rows } = rowGeometry(e.src.shape);
      const out = permuteRows(new Uint8Array(f.buffer, f.byteOffset, f.byteLength), rows, rows ? f.byteLength / rows : 0, e.heads);
      return new Float32Array(out.buffer, 0, out.byteLength >> 2);
    },
    async readValues(name) {
      const e = entry(name);
      if (e.synth) return { values: e.synth.slice(), dtype: 'f32' };
      if (e.derive) return e.derive.make(await values(e.src));
      if (e.experts) return concatValues(await Promise.all(e.experts.map(values)));
      if (e.widened) return { values: vectorF32(await input.readValues(e.src.name), e.shift), dtype: 'f32' };
      const v = await values(e.src);
      return e.heads === undefined ? v : permuteValues(v, rowGeometry(e.src.shape).rows, e.heads);
    },
  };
  const locate = input.locate;
  if (locate) {
    // Only tensors passed through unchanged are stored as the view reads them.
    view.locate = (name, firstRow, rows) => {
      const e = entry(name);
      return e.widened || e.synth || e.experts || e.derive || e.heads !== undefined || isF8(e.src) ? undefined : locate.call(input, e.src.name, firstRow, rows);
    };
  }
  if (readRows) {
    view.readRows = async (name, firstRow, rows) => {
      const e = entry(name);
      const { rows: nrows, rowLen } = rowGeometry(e.info.shape);
      const n2 = e.info.shape.length <= 1 ? 1 : nrows;
      if (!Number.isSafeInteger(firstRow) || !Number.isSafeInteger(rows) || firstRow < 0 || rows < 0 || firstRow + rows > n2) {
        fail(ErrorCodes.BAD_INPUT, `[convert] ${input.source}: rows [${firstRow}, ${firstRow + rows}) are outside the ${n2} rows of "${name}"`, {
          file: input.source, tensor: name, value: [firstRow, rows], expected: `0 <= firstRow <= firstRow + rows <= ${n2}`,
        });
      }
      // 1-D tensors are a single row: read them whole.
      if (e.widened || e.info.shape.length <= 1) {
        const v = await view.readValues(name);
        return rows === 0 ? { values: v.values.subarray(0, 0), dtype: v.dtype } as TensorValues : v;
      }
      // A derived tensor is made whole (from a source of about its size), then cut.
      if (e.derive) {
        const v = await view.readValues(name);
        return { values: v.values.subarray(firstRow * rowLen, (firstRow + rows) * rowLen), dtype: v.dtype } as TensorValues;
      }
      if (e.experts && e.experts[0].shape.length === 1) {
        // A stack of vectors: one row per expert.
        const parts = await Promise.all(e.experts.slice(firstRow, firstRow + rows).map(values));
        return parts.length ? concatValues(parts) : { values: new Float32Array(0), dtype: 'f32' };
      }
      if (e.experts) {
        // Rows of the stack: expert e holds rows [e * per, (e + 1) * per).
        const per = e.experts[0].shape[0];
        const parts: TensorValues[] = [];
        for (let x = Math.floor(firstRow / per); x < e.experts.length && x * per < firstRow + rows; x++) {
          const a = Math.max(firstRow, x * per), b = Math.min(firstRow + rows, (x + 1) * per);
          parts.push(await readRows.call(input, e.experts[x].name, a - x * per, b - a));
        }
        return parts.length ? concatValues(parts) : { values: new Float32Array(0), dtype: 'f32' };
      }
      if (e.heads === undefined) return readRows.call(input, e.src.name, firstRow, rows);
      return permutedRows(e, nrows, rowLen, firstRow, rows);
    };
  }

  // Output rows [firstRow, firstRow + rows) of a permuted matrix. Within one head the rows needed
  // come from two contiguous source runs (the two halves), so a range costs at most two reads per head.
  async function permutedRows(e: Entry, nrows: number, rowLen: number, firstRow: number, rows: number): Promise<TensorValues> {
    const perHead = nrows / e.heads!;
    const parts: { from: number; n: number; v: TensorValues }[] = [];
    let dtype: TensorValues['dtype'] | undefined;
    for (let h = Math.floor(firstRow / perHead); rows > 0 && h * perHead < firstRow + rows; h++) {
      const lo = Math.max(firstRow, h * perHead), hi = Math.min(firstRow + rows, (h + 1) * perHead);
      for (let s = 0; s < 2; s++) {
        let a = Infinity, b = -Infinity;
        for (let to = lo; to < hi; to++) {
          if ((to - h * perHead) % 2 !== s) continue;
          const from = sourceRow(to, perHead);
          a = Math.min(a, from);
          b = Math.max(b, from);
        }
        if (a > b) continue;
        const v = await readRows!.call(input, e.src.name, a, b - a + 1);
        dtype = v.dtype;
        parts.push({ from: a, n: b - a + 1, v });
      }
    }
    const elem = dtype === 'f32' || dtype === undefined ? 4 : 2;
    const out = new Uint8Array(rows * rowLen * elem);
    const rowBytes = rowLen * elem;
    for (let to = firstRow; to < firstRow + rows; to++) {
      const from = sourceRow(to, perHead);
      const p = parts.find((x) => from >= x.from && from < x.from + x.n)!;
      const bytes = new Uint8Array(p.v.values.buffer, p.v.values.byteOffset, p.v.values.byteLength);
      out.set(bytes.subarray((from - p.from) * rowBytes, (from - p.from + 1) * rowBytes), (to - firstRow) * rowBytes);
    }
    return elem === 4
      ? { values: new Float32Array(out.buffer, 0, out.byteLength >> 2), dtype: 'f32' }
      : { values: new Uint16Array(out.buffer, 0, out.byteLength >> 1), dtype: dtype! };
  }

  return view;
}

/** Model types whose Hugging Face checkpoints llama.cpp loads as architecture "llama". */
export const LLAMA_GGUF_MODEL_TYPES: readonly string[] = GGUF_ARCHITECTURES.find((a) => a.name === 'llama')!.modelTypes;

/** Model types webquant writes as GGUF from Hugging Face checkpoints (llama, mistral, mixtral, smollm3, granite, qwen2, qwen2_moe, qwen3, qwen3_moe, olmo2, gemma, gemma2, gemma3_text, phi3, deepseek_v2, deepseek_v3, ...). */
export const GGUF_MODEL_TYPES: readonly string[] = GGUF_ARCHITECTURES.flatMap((a) => a.modelTypes);

/**
 * The converter's config from readConfig()'s result. Refuses (E_MODEL) model types webquant does
 * not write as GGUF (Gemma, Phi, ... have their own GGUF architectures and tensor sets).
 */
export function llamaConfigFrom(c: ModelConfig): LlamaConfig {
  if (!GGUF_MODEL_TYPES.includes(c.modelType)) {
    fail(ErrorCodes.MODEL, `[convert] model_type "${c.modelType}" (${c.architecture}) cannot be written as GGUF by webquant yet; supported: ${GGUF_MODEL_TYPES.join(', ')} (write .safetensors instead)`, {
      option: 'model_type', value: c.modelType, expected: GGUF_MODEL_TYPES,
    });
  }
  if (c.intermediateSize === undefined) {
    fail(ErrorCodes.CONFIG, `[convert] config.json has no "intermediate_size", which GGUF needs (llama.feed_forward_length)`, { option: 'intermediate_size' });
  }
  return {
    architectures: [c.architecture], model_type: c.modelType, hidden_size: c.hiddenSize, intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numLayers, num_attention_heads: c.numHeads, num_key_value_heads: c.numKvHeads, vocab_size: c.vocabSize,
    max_position_embeddings: c.maxPositions, rms_norm_eps: c.rmsNormEps, rope_theta: c.ropeTheta, tie_word_embeddings: c.tieWordEmbeddings, head_dim: c.headDim,
    head_dim_in_config: typeof c.raw.head_dim === 'number',
    ...optionalNumbers(c.raw, ['sliding_window', 'sliding_window_pattern', 'final_logit_softcapping', 'attn_logit_softcapping', 'partial_rotary_factor', 'original_max_position_embeddings', 'rope_local_base_freq',
      'embedding_multiplier', 'residual_multiplier', 'attention_multiplier', 'logits_scaling', 'num_local_experts', 'num_experts', 'num_experts_per_tok', 'moe_intermediate_size',
      'q_lora_rank', 'kv_lora_rank', 'qk_nope_head_dim', 'qk_rope_head_dim', 'v_head_dim', 'n_routed_experts', 'n_shared_experts', 'first_k_dense_replace', 'routed_scaling_factor',
      'n_group', 'topk_group', 'shared_expert_intermediate_size', 'decoder_sparse_step', 'swiglu_limit', 'layer_norm_epsilon', 'layer_norm_eps', 'rotary_pct', 'rotary_emb_base', 'norm_epsilon'] as const),
    ...(typeof c.raw.use_parallel_residual === 'boolean' ? { use_parallel_residual: c.raw.use_parallel_residual } : {}),
    ...(typeof c.raw.qk_layernorm === 'boolean' ? { qk_layernorm: c.raw.qk_layernorm } : {}),
    ...(Array.isArray(c.raw.layer_types) ? { layer_types: c.raw.layer_types as string[] } : {}),
    ...(Array.isArray(c.raw.mlp_only_layers) ? { mlp_only_layers: c.raw.mlp_only_layers as number[] } : {}),
    ...(typeof c.raw.norm_topk_prob === 'boolean' ? { norm_topk_prob: c.raw.norm_topk_prob } : {}),
    ...(typeof c.raw.scoring_func === 'string' ? { scoring_func: c.raw.scoring_func } : {}),
    ...(typeof c.raw.rope_scaling === 'object' && c.raw.rope_scaling !== null ? { rope_scaling: c.raw.rope_scaling as Record<string, unknown> } : {}),
  };
}

function optionalNumbers<K extends string>(raw: Record<string, unknown>, keys: readonly K[]): Partial<Record<K, number>> {
  const out: Partial<Record<K, number>> = {};
  for (const key of keys) if (typeof raw[key] === 'number') out[key] = raw[key] as number;
  return out;
}

/** Tokenizer keys of a GGUF written from a Hugging Face checkpoint. */
export type GgufTokenizer =
  /** No tokenizer beside the input: `tokenizer.ggml.model = "no_vocab"` (llama.cpp loads such a file). */
  | { kind: 'none' }
  /** A converted tokenizer (src/convert/tokenizer-files.ts): its `tokenizer.*` keys. */
  | { kind: 'vocab'; vocab: GgufVocab };

/**
 * GGUF key/value pairs for a Hugging Face input: the architecture's metadata (llamaMetadata or
 * qwen2Metadata), general.file_type (llama_ftype), general.quantization_version = 2
 * (GGML_QNT_VERSION) and the tokenizer keys described by `tokenizer`. With `general` (config.json,
 * generation_config.json and the tensors written), general.name becomes the converter's general.*
 * keys for the folder `name` (src/convert/general-metadata.ts).
 */
export function hfGgufMetadata(config: LlamaConfig, fileType: number, tokenizer: GgufTokenizer, name?: string, general?: Omit<GeneralSources, 'dirName'>): GgufWriteKV[] {
  const arch = ggufArchitecture(config);
  if (!arch) {
    fail(ErrorCodes.MODEL, `[convert] model_type "${String(config.model_type)}" has no GGUF architecture in webquant; supported: ${GGUF_MODEL_TYPES.join(', ')}`, { option: 'model_type', value: config.model_type, expected: GGUF_MODEL_TYPES });
  }
  let kv: GgufWriteKV[] = Object.entries(arch.metadata(config, name)).map(([key, v]) => ({ key, type: v.type, value: v.value }));
  // The converter's general.* keys (type, sampling defaults, name and its parts, size label) in
  // place of the plain general.name.
  if (general) {
    const g = generalMetadata({ dirName: name ?? 'webquant', ...general });
    kv = kv.flatMap((k) => (k.key === 'general.name' ? g : [k]));
  }
  kv.push({ key: 'general.file_type', type: 'u32', value: fileType });
  kv.push({ key: 'general.quantization_version', type: 'u32', value: 2 });
  if (tokenizer.kind === 'none') kv.push({ key: 'tokenizer.ggml.model', type: 'string', value: 'no_vocab' });
  else {
    const special = { ...tokenizer.vocab.special };
    for (const [typ, id] of Object.entries(arch.specialTokens ?? {}) as [SpecialTokenType, number][]) {
      if (special[typ] === undefined && id < tokenizer.vocab.tokens.length) special[typ] = id;
    }
    // The tokenizer files' add_bos / add_eos, where they state one, over the architecture's.
    const add = { ...arch.addTokens };
    for (const [typ, on] of Object.entries(tokenizer.vocab.add) as [AddTokenType, boolean | undefined][]) if (on !== undefined) add[typ] = on;
    kv.push(...vocabMetadata({ ...tokenizer.vocab, special, add }));
  }
  // Gemma's SentencePiece model adds no space before the text (convert_hf_to_gguf's Gemma3Model).
  if (arch.noSpacePrefix && tokenizer.kind === 'vocab' && tokenizer.vocab.model === 'llama') {
    kv.push({ key: 'tokenizer.ggml.add_space_prefix', type: 'bool', value: false });
  }
  return kv;
}

/** The inverse of permuteRows: interleaved (GGUF) rows back to the rotate-half (Hugging Face) order. */
export function unpermuteRows(src: Uint8Array, rows: number, rowBytes: number, heads: number): Uint8Array {
  if (rows % (2 * heads) !== 0) {
    fail(ErrorCodes.MODEL, `[convert] cannot un-permute ${rows} rows into ${heads} heads of pairs`, { value: rows, expected: `a multiple of ${2 * heads}` });
  }
  const out = new Uint8Array(src.length);
  const perHead = rows / heads;
  for (let to = 0; to < rows; to++) {
    const from = sourceRow(to, perHead);
    out.set(src.subarray(to * rowBytes, (to + 1) * rowBytes), from * rowBytes);
  }
  return out;
}
