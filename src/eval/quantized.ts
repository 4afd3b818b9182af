// The forward's WeightSource over a quantized checkpoint (a webquant safetensors output or a GGUF):
// quantized matrices multiplied by the serving kernels (src/serve), norms and embeddings
// dequantized; a GGUF is read through its llama.cpp tensor names with the q/k rows put back into
// the Hugging Face order the forward expects (where the converter permuted them: llama, not qwen). What `webquant eval` and the demo page's Worker use,
// in any runtime (no Node module here).
import { ErrorCodes, fail } from '../errors.js';
import { ggufArchitecture, ggufTensorName, permuteHeads, type GgufArchitecture } from '../convert/llama-gguf.js';
import { unpermuteRows } from '../convert/hf-view.js';
import type { Checkpoint } from '../io/checkpoint.js';
import { openQuantized, weightSource, type OpenQuantizedOptions, type QuantizedWeightSource } from '../serve/index.js';
import { llamaTensorNames, type LlamaConfig, type WeightSource } from './llama.js';

const f32 = (b: Uint8Array) => new Float32Array(b.buffer, b.byteOffset, b.byteLength >> 2);

/** The forward's (Hugging Face) tensor names over a GGUF candidate's weight source. */
function ggufAsHf(ws: QuantizedWeightSource, cfg: LlamaConfig, arch: GgufArchitecture | undefined): WeightSource {
  const gguf = (hf: string) => ggufTensorName(hf, arch?.name) ?? hf;
  // Only architectures whose q/k rows the converter permutes (llama) are put back.
  const heads = (hf: string) => ((arch?.permuteQK ?? true) ? permuteHeads(hf, cfg) : undefined);
  // Norms the converter shifted (Gemma: 1 + w) go back to the checkpoint's meaning.
  const shift = arch?.normShift ?? 0;
  return {
    async get(hf) {
      const w = await ws.get(gguf(hf));
      if (shift && hf.endsWith('norm.weight')) return w.map((v) => v - shift);
      const h = heads(hf);
      if (h === undefined) return w;
      // q_proj / k_proj weights have hidden_size columns; their biases are single values per row.
      const cols = hf.endsWith('.bias') ? 1 : cfg.hidden_size;
      return f32(unpermuteRows(new Uint8Array(w.buffer, w.byteOffset, w.byteLength), w.length / cols, cols * 4, h));
    },
    matvec(hf, x) {
      const y = ws.matvec(gguf(hf), x);
      const h = heads(hf);
      return h === undefined ? y : f32(unpermuteRows(new Uint8Array(y.buffer, y.byteOffset, y.byteLength), y.length, 4, h));
    },
    matmul(hf, x, n) {
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
 * The quantized checkpoint `ckpt` as the forward's WeightSource for a model of `config`. Every
 * tensor the forward needs must be there (E_TENSOR_NOT_FOUND naming it otherwise); the matrices
 * are read up front (weightSource).
 */
export async function quantizedWeights(ckpt: Checkpoint, config: LlamaConfig, opts: QuantizedWeightsOptions = {}): Promise<WeightSource> {
  const isGguf = ckpt.format === 'gguf';
  if (config.moe && isGguf) {
    fail(ErrorCodes.MODEL, `[eval] ${ckpt.source}: a GGUF stores a MoE layer's experts stacked, which the reference forward cannot read yet; evaluate a safetensors output of the same plan instead`, { file: ckpt.source, option: 'model_type', value: config.model_type });
  }
  const q = await openQuantized(ckpt, opts.serve);
  const arch = ggufArchitecture({ model_type: config.model_type });
  const want = llamaTensorNames(config).map((n) => (isGguf ? ggufTensorName(n, arch?.name) ?? n : n));
  for (const n of want) {
    if (!q.has(n)) {
      fail(ErrorCodes.TENSOR_NOT_FOUND, `[eval] ${ckpt.source} has no tensor "${n}"; is it a quantization of ${opts.original ?? 'the original'}?`, { file: ckpt.source, tensor: n });
    }
  }
  const matrices = want.filter((n) => q.tensor(n).info.shape.length === 2);
  const ws = await weightSource(q, { names: matrices });
  return isGguf ? ggufAsHf(ws, config, arch) : ws;
}
