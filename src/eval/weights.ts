// Where the forward's weights come from (a WeightSource: original tensors, or a quantized
// checkpoint through its hooks) and the Linear each projection becomes: the source's batched or
// one-vector hook, or float32 weights multiplied exactly in wasm (matmul.ts).
import { ErrorCodes, fail } from '../errors.js';
import { familyView, languageModelName } from '../convert/arch/index.js';
import type { Checkpoint } from '../io/checkpoint.js';
import { loadKernels, type Kernels } from '../kernels/loader.js';
import type { LlamaConfig } from './config.js';
import { matmulExact } from './matmul.js';

/** Where weights come from: original tensors, or a quantized checkpoint. Row-major [rows, cols]. */
export interface WeightSource {
  get(name: string): Promise<Float32Array>;
  /**
   * Optional y = W x for a 2-D weight (x has cols values, y has rows), so quantized weights can be
   * multiplied without dequantizing them whole. Used for every projection and the output head
   * (model.embed_tokens.weight when tied) when present; norms and the embedding table are always
   * read with get().
   */
  matvec?(name: string, x: Float32Array): Float32Array;
  /**
   * Optional batched form, preferred over matvec when present: x is [n, cols] (n positions of one
   * window), the result [n, rows]. Saves a call (and a kernel launch) per position.
   */
  matmul?(name: string, x: Float32Array, n: number): Float32Array;
  /**
   * Optional: sees the input of every projection and of the output head before it is multiplied,
   * x [n, cols] (an importance-matrix collector, see imatrix.ts). Must not change x.
   */
  observe?(name: string, x: Float32Array, n: number, cols: number): void;
}

/**
 * A WeightSource over a Checkpoint from src/io (or anything else with readF32). The language model
 * of a multimodal checkpoint (Gemma 3 4B and up) is read under its prefixed names (see
 * languageModelName) when its tensor list holds them; the families familyView knows through it.
 */
export function checkpointWeights(input: { readF32(name: string): Promise<Float32Array>; tensors?: readonly { name: string }[] }, config?: Pick<LlamaConfig, 'num_attention_heads'>): WeightSource {
  // gpt-oss's packed experts, GPT-2's Conv1D layers, GPT-NeoX's q/k/v by head (which needs the
  // config): under the Llama-style names the forward reads.
  const ckpt = 'tensor' in input ? familyView(input as Checkpoint, config) : input;
  // The prefix the stored embedding has in place of "model.", applied to every model.* name.
  const embed = 'embed_tokens.weight';
  const names = ckpt.tensors ?? [];
  const stored = names.some((t) => t.name === `model.${embed}`) ? undefined : names.find((t) => languageModelName(t.name) === `model.${embed}`)?.name;
  const prefix = stored?.slice(0, -embed.length);
  return { get: (name) => ckpt.readF32(prefix && name.startsWith('model.') ? prefix + name.slice('model.'.length) : name) };
}

/**
 * Y[t, r] = sum_c W[r, c] X[t, c] for n positions: W is [rows, cols], X is [n, cols], Y is [n, rows].
 * float64 accumulation, left to right over c, rounded to float32 on store.
 */
export function matmulF32(w: Float32Array, rows: number, cols: number, x: Float32Array, n: number, y: Float32Array): void {
  let t = 0;
  // Eight positions share each weight load: 9 loads per 8 multiply-adds instead of 16.
  for (; t + 8 <= n; t += 8) {
    const x0 = t * cols, c2 = 2 * cols, c3 = 3 * cols, c4 = 4 * cols, c5 = 5 * cols, c6 = 6 * cols, c7 = 7 * cols;
    for (let r = 0, base = 0; r < rows; r++, base += cols) {
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
      for (let c = 0, i = x0; c < cols; c++, i++) {
        const wv = w[base + c];
        s0 += wv * x[i]; s1 += wv * x[i + cols]; s2 += wv * x[i + c2]; s3 += wv * x[i + c3];
        s4 += wv * x[i + c4]; s5 += wv * x[i + c5]; s6 += wv * x[i + c6]; s7 += wv * x[i + c7];
      }
      const o = t * rows + r;
      y[o] = s0; y[o + rows] = s1; y[o + 2 * rows] = s2; y[o + 3 * rows] = s3;
      y[o + 4 * rows] = s4; y[o + 5 * rows] = s5; y[o + 6 * rows] = s6; y[o + 7 * rows] = s7;
    }
  }
  for (; t + 4 <= n; t += 4) {
    const x0 = t * cols, c2 = 2 * cols, c3 = 3 * cols;
    for (let r = 0, base = 0; r < rows; r++, base += cols) {
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (let c = 0, i = x0; c < cols; c++, i++) {
        const wv = w[base + c];
        s0 += wv * x[i]; s1 += wv * x[i + cols]; s2 += wv * x[i + c2]; s3 += wv * x[i + c3];
      }
      const o = t * rows + r;
      y[o] = s0; y[o + rows] = s1; y[o + 2 * rows] = s2; y[o + 3 * rows] = s3;
    }
  }
  for (; t < n; t++) {
    const x0 = t * cols;
    for (let r = 0, base = 0; r < rows; r++, base += cols) {
      let s0 = 0;
      for (let c = 0; c < cols; c++) s0 += w[base + c] * x[x0 + c];
      y[t * rows + r] = s0;
    }
  }
}

export interface Linear {
  /** Y = X W^T for n positions. */
  apply(x: Float32Array, n: number, out: Float32Array): void;
}

export async function getChecked(src: WeightSource, name: string, length: number, shape: string): Promise<Float32Array> {
  const w = await src.get(name);
  if (!(w instanceof Float32Array)) {
    fail(ErrorCodes.MODEL, `[llama] weight source returned ${Object.prototype.toString.call(w)} for ${name}; expected a Float32Array`, { tensor: name, expected: 'Float32Array' });
  }
  if (w.length !== length) {
    fail(ErrorCodes.MODEL, `[llama] ${name} has ${w.length} values but the config needs ${shape} = ${length}`, { tensor: name, value: w.length, expected: length });
  }
  return w;
}

export const hasHook = (src: WeightSource) => typeof src.matmul === 'function' || typeof src.matvec === 'function' || typeof src.observe === 'function';

export async function linear(src: WeightSource, name: string, rows: number, cols: number): Promise<Linear> {
  const inner = await multiply(src, name, rows, cols);
  if (typeof src.observe !== 'function') return inner;
  const see = src.observe.bind(src);
  return { apply: (x, n, out) => { see(name, x.subarray(0, n * cols), n, cols); inner.apply(x, n, out); } };
}

async function multiply(src: WeightSource, name: string, rows: number, cols: number): Promise<Linear> {
  if (typeof src.matmul === 'function') {
    const mm = src.matmul.bind(src);
    return {
      apply(x, n, out) {
        const y = mm(name, x.subarray(0, n * cols), n);
        if (y.length !== n * rows) {
          fail(ErrorCodes.MODEL, `[llama] matmul(${name}) of ${n} positions returned ${y.length} values; expected ${n * rows}`, { tensor: name, value: y.length, expected: n * rows });
        }
        out.set(y);
      },
    };
  }
  if (typeof src.matvec === 'function') {
    const mv = src.matvec.bind(src);
    return {
      apply(x, n, out) {
        for (let t = 0; t < n; t++) {
          const y = mv(name, x.subarray(t * cols, (t + 1) * cols));
          if (y.length !== rows) {
            fail(ErrorCodes.MODEL, `[llama] matvec(${name}) returned ${y.length} values; expected ${rows}`, { tensor: name, value: y.length, expected: rows });
          }
          out.set(y, t * rows);
        }
      },
    };
  }
  const w = await getChecked(src, name, rows * cols, `[${rows}, ${cols}]`);
  return exactLinear(w, rows, cols, await loadKernels('auto', 'attention'));
}

/** W as float32 values: matmulF32's bits, computed in wasm (matmul.ts). */
export function exactLinear(w: Float32Array, rows: number, cols: number, k: Kernels): Linear {
  return { apply: (x, n, out) => matmulExact(k, w, rows, cols, x, n, out) };
}
