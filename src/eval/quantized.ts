// The forward's WeightSource over a quantized checkpoint (a webquant safetensors output or a GGUF):
// quantized matrices multiplied by the serving kernels (src/serve), norms and embeddings
// dequantized; a GGUF is read through its llama.cpp tensor names with the q/k rows put back into
// the Hugging Face order the forward expects (where the converter permuted them: llama, not
// qwen), MoE experts served from their layer's stack, and DeepSeek's kv_b_proj rebuilt. What
// `webquant eval` and the demo page's Worker use, in any runtime (no Node module here).
import { ErrorCodes, fail } from '../errors.js';
import { familyView, ggufArchitecture, ggufExpertSlot, ggufTensorName, permuteHeads, type GgufArchitecture } from '../convert/arch/index.js';
import { deepseekKvBJoin } from '../convert/arch/deepseek.js';
import { unpermuteRows } from '../convert/hf-view.js';
import { numel, type Checkpoint, type TensorInfo } from '../io/checkpoint.js';
import { openQuantized, weightSource, type LoadedTensor, type OpenQuantizedOptions, type QuantizedModel, type QuantizedWeightSource } from '../serve/index.js';
import { checkpointWeights, llamaTensorNames, matmulF32, type LlamaConfig, type WeightSource } from './llama.js';
import { checkTensors } from './config.js';

const f32 = (b: Uint8Array) => new Float32Array(b.buffer, b.byteOffset, b.byteLength >> 2);

// DeepSeek's kv_b_proj, which a GGUF holds as attn_k_b and attn_v_b.
const KV_B = /^model\.layers\.(\d+)\.self_attn\.kv_b_proj\.weight$/;

/**
 * The GGUF tensors holding a Hugging Face tensor the forward reads: its own, the stack of an
 * expert's MoE layer, or DeepSeek's attn_k_b and attn_v_b for kv_b_proj.
 */
function storedAs(hf: string, cfg: LlamaConfig, arch: GgufArchitecture | undefined): string[] {
  const slot = ggufExpertSlot(hf);
  if (slot) return [slot.name];
  const kvb = cfg.mla && KV_B.exec(hf);
  if (kvb) return [`blk.${kvb[1]}.attn_k_b.weight`, `blk.${kvb[1]}.attn_v_b.weight`];
  return [ggufTensorName(hf, arch?.name) ?? hf];
}

/** The forward's (Hugging Face) tensor names over a GGUF candidate's weight source. */
function ggufAsHf(ws: QuantizedWeightSource, cfg: LlamaConfig, arch: GgufArchitecture | undefined, kvb: Map<string, Float32Array>): WeightSource {
  const gguf = (hf: string) => ggufTensorName(hf, arch?.name) ?? hf;
  // Only architectures whose q/k rows the converter permutes (llama) are put back.
  const heads = (hf: string) => ((arch?.permuteQK ?? true) ? permuteHeads(hf, cfg) : undefined);
  // Norms the converter shifted (Gemma: 1 + w) go back to the checkpoint's meaning.
  const shift = arch?.normShift ?? 0;
  // One expert: its rows of the layer's stack [experts, rows, cols].
  const experts = new Map<string, LoadedTensor | undefined>();
  const expert = (hf: string): LoadedTensor | undefined => {
    if (!experts.has(hf)) {
      const slot = ggufExpertSlot(hf);
      const stack = slot && ws.held(slot.name);
      const per = stack ? stack.info.rows / stack.info.shape[0] : 0;
      experts.set(hf, stack && stack.rows(slot.expert * per, per));
    }
    return experts.get(hf);
  };
  const matmul = (hf: string, x: Float32Array, n: number): Float32Array => {
    const joined = kvb.get(hf);
    if (joined) {
      const cols = cfg.mla!.kvLora, y = new Float32Array(n * (joined.length / cols));
      matmulF32(joined, joined.length / cols, cols, x, n, y);
      return y;
    }
    const e = expert(hf);
    if (e) return e.matmul(x, n);
    const y = ws.matmul(gguf(hf), x, n);
    const h = heads(hf);
    if (h === undefined) return y;
    // Y is [n, rows]: put each output vector's elements back in Hugging Face row order.
    const rows = y.length / n;
    const out = new Float32Array(y.length);
    for (let b = 0; b < n; b++) {
      const v = y.subarray(b * rows, (b + 1) * rows);
      out.set(f32(unpermuteRows(new Uint8Array(v.buffer, v.byteOffset, v.byteLength), rows, 4, h)), b * rows);
    }
    return out;
  };
  return {
    matmul,
    matvec: (hf, x) => matmul(hf, x, 1),
    async get(hf) {
      const joined = kvb.get(hf);
      if (joined) return joined.slice();
      const e = expert(hf);
      if (e) return e.dequantize();
      const w = await ws.get(gguf(hf));
      if (shift && hf.endsWith('norm.weight')) return w.map((v) => v - shift);
      const h = heads(hf);
      if (h === undefined) return w;
      // q_proj / k_proj weights have hidden_size columns; their biases are single values per row.
      const cols = hf.endsWith('.bias') ? 1 : cfg.hidden_size;
      return f32(unpermuteRows(new Uint8Array(w.buffer, w.byteOffset, w.byteLength), w.length / cols, cols * 4, h));
    },
  };
}

export interface QuantizedWeightsOptions {
  /** Names the original in the error for a missing tensor (default 'the original'). */
  original?: string;
  /** Passed to openQuantized (backend, caches). */
  serve?: OpenQuantizedOptions;
}

/**
 * The served tensors of `q` under their stored names: the quantized ones as their dequantized F32
 * values, the others as the checkpoint stores them (gpt-oss's kept MXFP4 blocks and scales stay
 * U8, for its view to decode).
 */
function servedValues(q: QuantizedModel, ckpt: Checkpoint): Checkpoint {
  const quantized = new Set(q.tensors.filter((t) => t.quantized).map((t) => t.name));
  const tensors: TensorInfo[] = q.tensors.map((t) => (quantized.has(t.name)
    ? { name: t.name, dtype: 'F32', shape: t.shape.slice(), offset: 0, byteLength: 4 * numel(t.shape) }
    : ckpt.tensor(t.name)));
  const byName = new Map(tensors.map((t) => [t.name, t]));
  const info = (name: string) => byName.get(name) ?? fail(ErrorCodes.TENSOR_NOT_FOUND, `[eval] ${ckpt.source} has no tensor "${name}"`, { file: ckpt.source, tensor: name });
  const readF32 = (name: string) => (info(name), quantized.has(name) ? q.tensor(name).dequantize() : ckpt.readF32(name));
  return {
    format: ckpt.format, source: ckpt.source, metadata: ckpt.metadata, tensors,
    tensor: info,
    readF32,
    readValues: async (name) => (quantized.has(info(name).name) ? { values: await readF32(name), dtype: 'f32' } : ckpt.readValues(name)),
    readRaw: async (name) => (quantized.has(info(name).name) ? new Uint8Array((await readF32(name)).buffer) : ckpt.readRaw(name)),
  };
}

/**
 * The quantized checkpoint `ckpt` as the forward's WeightSource for a model of `config`. Every
 * tensor the forward needs must be there (E_TENSOR_NOT_FOUND naming it otherwise); the matrices
 * are read up front (weightSource). A GGUF's MoE experts are served from their layer's stack, and
 * DeepSeek's kv_b_proj is put back together from attn_k_b and attn_v_b (dequantized: the forward
 * multiplies by it in float32).
 */
export async function quantizedWeights(ckpt: Checkpoint, config: LlamaConfig, opts: QuantizedWeightsOptions = {}): Promise<WeightSource> {
  const isGguf = ckpt.format === 'gguf';
  const q = await openQuantized(ckpt, opts.serve);
  // A safetensors output of a family stored otherwise (GPT-2's Conv1D, GPT-NeoX's heads, Phi-2's
  // and StarCoder2's names) keeps the original's names and layouts: its dequantized values go
  // through the same view as the original's.
  if (!isGguf) {
    const values = servedValues(q, ckpt);
    if (familyView(values, config) !== values) return checkpointWeights(values, config);
  }
  const arch = ggufArchitecture({ model_type: config.model_type });
  const missing = (n: string) => fail(ErrorCodes.TENSOR_NOT_FOUND, `[eval] ${ckpt.source} has no tensor "${n}"; is it a quantization of ${opts.original ?? 'the original'}?`, { file: ckpt.source, tensor: n });
  // The config's last layer first: its names are listed for every configured layer.
  const lastLayer = isGguf ? `blk.${config.num_hidden_layers - 1}.` : `model.layers.${config.num_hidden_layers - 1}.`;
  if (!q.tensors.some((t) => t.name.startsWith(lastLayer))) missing(`${lastLayer}*`);
  const hfNames = llamaTensorNames(config);
  const want = [...new Set(hfNames.flatMap((n) => (isGguf ? storedAs(n, config, arch) : [n])))];
  for (const n of want) if (!q.has(n)) missing(n);
  // The shapes the config gives them, as the original's are checked (experts' stacks: below).
  checkTensors(config, hfNames.flatMap((n) => {
    const s = isGguf ? storedAs(n, config, arch) : [n];
    return s.length === 1 && !ggufExpertSlot(n) ? [{ name: n, shape: q.tensor(s[0]).info.shape, stored: s[0] }] : [];
  }), ckpt.source);
  const stacks = new Set(isGguf ? hfNames.map((n) => ggufExpertSlot(n)?.name).filter((n) => n !== undefined) : []);
  for (const n of stacks) {
    const { shape } = q.tensor(n).info;
    // Matrices [experts, rows, cols], or gpt-oss's bias vectors [experts, n].
    if (shape.length !== (n.endsWith('.bias') ? 2 : 3) || shape[0] !== config.moe?.experts) {
      fail(ErrorCodes.MODEL, `[eval] ${ckpt.source}: "${n}" has shape [${shape}], not a stack of the config's ${config.moe?.experts} experts`, { file: ckpt.source, tensor: n, value: shape, expected: `[${config.moe?.experts}, rows, cols]` });
    }
  }
  const matrices = want.filter((n) => q.tensor(n).info.shape.length === 2 || stacks.has(n));
  const ws = await weightSource(q, { names: matrices });
  if (!isGguf) return ws;
  const kvb = new Map<string, Float32Array>();
  const mla = config.mla;
  if (mla) {
    for (const hf of hfNames) {
      if (!KV_B.test(hf)) continue;
      const [k, v] = storedAs(hf, config, arch);
      kvb.set(hf, deepseekKvBJoin(config.num_attention_heads, mla.nope, mla.v, mla.kvLora, await ws.get(k), await ws.get(v)));
    }
  }
  return ggufAsHf(ws, config, arch, kvb);
}
