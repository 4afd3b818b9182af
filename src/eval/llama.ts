// Reference Llama-family forward pass in plain TypeScript, used to measure what quantization cost.
//
// Numerics: weights and activations are stored as float32 (Float32Array); every dot product,
// norm, softmax and rotation is computed in float64 JS numbers and rounded to float32 when stored.
// A float32 x float32 product is exact in float64, so a dot product differs from an exact one only
// by float64 summation error; this keeps the result within 1e-5 of a float64 forward on stories260K
// (dev NLL 1.554213 vs the reference 1.55421) while storing no more than a float32 engine would.
//
// A window of tokens goes through the layers as a batch (causal attention inside the window), so
// each weight value is loaded once per 8 positions: 9 loads per 8 multiply-adds instead of 16,
// which measured 1.4 vs 0.55 GMAC/s for stories260K's shapes in V8 against a one-vector matvec.
// A WeightSource's matvec hook still sees one activation vector per call, which is what a
// quantized-weight kernel wants to multiply.
import { ErrorCodes, fail } from '../errors.js';
import { checkShape, gpt2Like, layerNormEps, layerPrefix, moeTensorNames, type Dims, type LlamaConfig } from './config.js';
import { familyView, languageModelName } from '../convert/arch/index.js';
import type { Checkpoint } from '../io/checkpoint.js';
import { mlaProject, mlaWeights, yarnAttentionFactor, yarnFactors, yarnMscale, type MlaWeights } from './mla.js';
import { attention } from './attention.js';
import { loadKernels, type Kernels } from '../kernels/loader.js';
import { matmulExact } from './matmul.js';

export { llamaConfig, llamaTensorNames, layerPrefix, type LlamaConfig, type GemmaOptions } from './config.js';

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

interface LayerWeights {
  /** Norms of the attention input and of the FFN input (none in OLMo 2). */
  inNorm?: Float32Array; ffnNorm?: Float32Array;
  /** q and k norms (qk_norm): per head, or over the whole projection (OLMo 2). */
  qNorm?: Float32Array; kNorm?: Float32Array;
  /** Gemma: norms of the attention output and of the FFN output. */
  attnOutNorm?: Float32Array; ffnOutNorm?: Float32Array;
  /** q/k/v biases (qkv_bias). */
  qBias?: Float32Array; kBias?: Float32Array; vBias?: Float32Array;
  /** Separate projections, or Phi-3's fused ones (qkv: q, k, v rows; gateUp: gate, up rows). */
  q?: Linear; k?: Linear; v?: Linear; gate?: Linear; up?: Linear;
  qkv?: Linear; gateUp?: Linear;
  o: Linear; down?: Linear;
  /** gpt-oss, GPT-2: the attention output's bias; gpt-oss: each head's sink logit. */
  oBias?: Float32Array; sinks?: Float32Array;
  /** GPT-2: the LayerNorms' biases, the fused q/k/v projection's and the FFN's. */
  inNormBias?: Float32Array; ffnNormBias?: Float32Array; qkvBias?: Float32Array; upBias?: Float32Array; downBias?: Float32Array;
  /** A MoE FFN instead of gate/up/down: the router and each expert's matrices (gpt-oss: and biases). */
  router?: Linear;
  experts?: Expert[];
  /** gpt-oss: added to the router's logits. */
  routerLogitBias?: Float32Array;
  /** DeepSeek: the router's correction bias (V3) and the shared experts; Qwen2-MoE: its shared expert and the gate of its output. */
  routerBias?: Float32Array;
  shared?: { gate: Linear; up: Linear; down: Linear };
  sharedGate?: Linear;
  /** DeepSeek's latent attention instead of q/k/v. */
  mla?: MlaWeights;
}

interface Expert {
  gate: Linear; up: Linear; down: Linear;
  gateBias?: Float32Array; upBias?: Float32Array; downBias?: Float32Array;
}

async function getChecked(src: WeightSource, name: string, length: number, shape: string): Promise<Float32Array> {
  const w = await src.get(name);
  if (!(w instanceof Float32Array)) {
    fail(ErrorCodes.MODEL, `[llama] weight source returned ${Object.prototype.toString.call(w)} for ${name}; expected a Float32Array`, { tensor: name, expected: 'Float32Array' });
  }
  if (w.length !== length) {
    fail(ErrorCodes.MODEL, `[llama] ${name} has ${w.length} values but the config needs ${shape} = ${length}`, { tensor: name, value: w.length, expected: length });
  }
  return w;
}

const hasHook = (src: WeightSource) => typeof src.matmul === 'function' || typeof src.matvec === 'function' || typeof src.observe === 'function';

async function linear(src: WeightSource, name: string, rows: number, cols: number): Promise<Linear> {
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
function exactLinear(w: Float32Array, rows: number, cols: number, k: Kernels): Linear {
  return { apply: (x, n, out) => matmulExact(k, w, rows, cols, x, n, out) };
}

export class LlamaModel {

  private constructor(
    readonly config: LlamaConfig,
    readonly dims: Dims,
    private readonly embed: Float32Array,
    private readonly layers: LayerWeights[],
    private readonly finalNorm: Float32Array,
    private readonly head: Linear,
    /** The LayerNorm families: the final LayerNorm's bias; GPT-2: the learned positions; Phi-2: the head's bias. */
    private readonly ln: { positions?: Float32Array; finalNormBias: Float32Array; headBias?: Float32Array } | undefined,
    /** The attention products' wasm (an instance of their own: its memory holds one layer's keys and values). */
    private readonly kernels: Kernels,
  ) {}

  static async load(config: LlamaConfig, source: WeightSource): Promise<LlamaModel> {
    const d = checkShape(config);
    const embed = await getChecked(source, 'model.embed_tokens.weight', d.vocab * d.dim, `[${d.vocab}, ${d.dim}]`);
    const layers: LayerWeights[] = [];
    // Gemma's RMSNorm multiplies by 1 + w (in float32, as Gemma3RMSNorm).
    const gemma = config.gemma;
    const norm = async (name: string, n: number) => {
      const w = await getChecked(source, name, n, `[${n}]`);
      return gemma ? w.map((v) => v + 1) : w;
    };
    const vec = (name: string, n: number) => getChecked(source, name, n, `[${n}]`);
    for (let i = 0; i < d.layers; i++) {
      const p = layerPrefix(i);
      if (gpt2Like(config)) {
        const qkvRows = d.qDim + 2 * d.kvDim;
        layers.push({
          inNorm: await vec(`${p}input_layernorm.weight`, d.dim), inNormBias: await vec(`${p}input_layernorm.bias`, d.dim),
          ...(config.phi2 || config.starcoder2 ? {
            q: await linear(source, `${p}self_attn.q_proj.weight`, d.qDim, d.dim), qBias: await vec(`${p}self_attn.q_proj.bias`, d.qDim),
            k: await linear(source, `${p}self_attn.k_proj.weight`, d.kvDim, d.dim), kBias: await vec(`${p}self_attn.k_proj.bias`, d.kvDim),
            v: await linear(source, `${p}self_attn.v_proj.weight`, d.kvDim, d.dim), vBias: await vec(`${p}self_attn.v_proj.bias`, d.kvDim),
          } : {
            qkv: await linear(source, `${p}self_attn.qkv_proj.weight`, qkvRows, d.dim), qkvBias: await vec(`${p}self_attn.qkv_proj.bias`, qkvRows),
          }),
          ...(config.phi2 ? {} : {
            ffnNorm: await vec(`${p}post_attention_layernorm.weight`, d.dim), ffnNormBias: await vec(`${p}post_attention_layernorm.bias`, d.dim),
          }),
          o: await linear(source, `${p}self_attn.o_proj.weight`, d.dim, d.attDim), oBias: await vec(`${p}self_attn.o_proj.bias`, d.dim),
          up: await linear(source, `${p}mlp.up_proj.weight`, d.ffn, d.dim), upBias: await vec(`${p}mlp.up_proj.bias`, d.ffn),
          down: await linear(source, `${p}mlp.down_proj.weight`, d.dim, d.ffn), downBias: await vec(`${p}mlp.down_proj.bias`, d.dim),
        });
        continue;
      }
      const mla = config.mla;
      if (mla) {
        const moe = config.moe?.deepseek && i >= config.moe.deepseek.denseLayers ? config.moe : undefined;
        layers.push({
          inNorm: await norm(`${p}input_layernorm.weight`, d.dim),
          mla: await mlaWeights(mla, d.heads, d.dim, p, (name, rows, cols) => linear(source, name, rows, cols), norm),
          o: await linear(source, `${p}self_attn.o_proj.weight`, d.dim, d.attDim),
          ffnNorm: await norm(`${p}post_attention_layernorm.weight`, d.dim),
          ...(moe ? await moeWeights(source, moe, p, d.dim, false) : {
            gate: await linear(source, `${p}mlp.gate_proj.weight`, d.ffn, d.dim),
            up: await linear(source, `${p}mlp.up_proj.weight`, d.ffn, d.dim),
            down: await linear(source, `${p}mlp.down_proj.weight`, d.dim, d.ffn),
          }),
        });
        continue;
      }
      layers.push({
        ...(config.olmo2 ? {
          ...(config.qk_norm ? { qNorm: await norm(`${p}self_attn.q_norm.weight`, d.qDim), kNorm: await norm(`${p}self_attn.k_norm.weight`, d.kvDim) } : {}),
          attnOutNorm: await norm(`${p}post_attention_layernorm.weight`, d.dim),
          ffnOutNorm: await norm(`${p}post_feedforward_layernorm.weight`, d.dim),
        } : { inNorm: await norm(`${p}input_layernorm.weight`, d.dim), ...(config.stablelm ? { inNormBias: await vec(`${p}input_layernorm.bias`, d.dim) } : {}) }),
        ...(config.phi3 ? {
          qkv: await linear(source, `${p}self_attn.qkv_proj.weight`, d.qDim + 2 * d.kvDim, d.dim),
          gateUp: await linear(source, `${p}mlp.gate_up_proj.weight`, 2 * d.ffn, d.dim),
        } : {
          q: await linear(source, `${p}self_attn.q_proj.weight`, d.qDim, d.dim),
          k: await linear(source, `${p}self_attn.k_proj.weight`, d.kvDim, d.dim),
          v: await linear(source, `${p}self_attn.v_proj.weight`, d.kvDim, d.dim),
          ...(config.moe ? {} : {
            gate: await linear(source, `${p}mlp.gate_proj.weight`, d.ffn, d.dim),
            up: await linear(source, `${p}mlp.up_proj.weight`, d.ffn, d.dim),
          }),
        }),
        ...(config.qkv_bias ? {
          qBias: await getChecked(source, `${p}self_attn.q_proj.bias`, d.qDim, `[${d.qDim}]`),
          kBias: await getChecked(source, `${p}self_attn.k_proj.bias`, d.kvDim, `[${d.kvDim}]`),
          vBias: await getChecked(source, `${p}self_attn.v_proj.bias`, d.kvDim, `[${d.kvDim}]`),
        } : {}),
        ...(config.qk_norm && !config.olmo2 ? {
          qNorm: await norm(`${p}self_attn.q_norm.weight`, config.qk_norm_whole ? d.qDim : d.headDim),
          kNorm: await norm(`${p}self_attn.k_norm.weight`, config.qk_norm_whole ? d.kvDim : d.headDim),
        } : {}),
        o: await linear(source, `${p}self_attn.o_proj.weight`, d.dim, d.attDim),
        ...(config.gptOss ? {
          oBias: await getChecked(source, `${p}self_attn.o_proj.bias`, d.dim, `[${d.dim}]`),
          sinks: await getChecked(source, `${p}self_attn.sinks`, d.heads, `[${d.heads}]`),
        } : {}),
        ...(gemma && gemma.version > 1 ? {
          attnOutNorm: await norm(`${p}post_attention_layernorm.weight`, d.dim),
          ffnNorm: await norm(`${p}pre_feedforward_layernorm.weight`, d.dim),
          ffnOutNorm: await norm(`${p}post_feedforward_layernorm.weight`, d.dim),
        } : config.olmo2 ? {} : {
          ffnNorm: await norm(`${p}post_attention_layernorm.weight`, d.dim),
          ...(config.stablelm ? { ffnNormBias: await vec(`${p}post_attention_layernorm.bias`, d.dim) } : {}),
        }),
        ...(config.moe ? await moeWeights(source, config.moe, p, d.dim, config.gptOss !== undefined) : { down: await linear(source, `${p}mlp.down_proj.weight`, d.dim, d.ffn) }),
      });
    }
    const finalNorm = await norm('model.norm.weight', d.dim);
    let head: Linear;
    if (config.tie_word_embeddings && !hasHook(source)) {
      head = exactLinear(embed, d.vocab, d.dim, await loadKernels('auto', 'attention'));
    } else {
      head = await linear(source, config.tie_word_embeddings ? 'model.embed_tokens.weight' : 'lm_head.weight', d.vocab, d.dim);
    }
    const ln = layerNormEps(config) !== undefined ? {
      ...(config.gpt2 ? { positions: await getChecked(source, 'model.embed_positions.weight', config.gpt2.positions * d.dim, `[${config.gpt2.positions}, ${d.dim}]`) } : {}),
      finalNormBias: await vec('model.norm.bias', d.dim),
      ...(config.phi2 && !config.tie_word_embeddings ? { headBias: await vec('lm_head.bias', d.vocab) } : {}),
    } : undefined;
    return new LlamaModel(config, d, embed, layers, finalNorm, head, ln, await loadKernels('auto', 'attention'));
  }

  /**
   * Runs a window of tokens (positions 0..n-1, causal) and returns the next-token logits of every
   * position, [n, vocab]. The returned array and the arrays passed to onLayer belong to the model
   * and are overwritten by the next call.
   */
  forward(tokens: ArrayLike<number>, opts: ForwardOptions = {}): Float32Array {
    const d = this.dims;
    const n = tokens.length;
    if (n === 0) return new Float32Array(0);
    for (let t = 0; t < n; t++) {
      const tok = tokens[t];
      if (!Number.isInteger(tok) || tok < 0 || tok >= d.vocab) {
        fail(ErrorCodes.BAD_INPUT, `[llama] token id ${tok} at position ${t} is outside the vocabulary [0, ${d.vocab})`, { index: t, value: tok, expected: `0..${d.vocab - 1}` });
      }
    }
    const gemma = this.config.gemma;
    // Phi-3's LongRoPE: the short factors within the original context, the long ones beyond.
    const lr = this.config.phi3?.longrope;
    const yarn = this.config.yarn;
    const ropeFactors = lr ? (n > lr.original ? lr.long : lr.short) : yarn ? (this.yarn ??= yarnFactors(yarn, this.config.rope_theta, this.rotaryDims)) : this.config.rope_factors;
    const ropeScale = lr?.attnFactor ?? (yarn ? yarnAttentionFactor(yarn) : 1);
    const global = this.rope(this.config.rope_theta, n, ropeFactors, ropeScale);
    const local = gemma ? this.rope(gemma.localRopeTheta, n) : global;
    const rot = this.rotaryDims;
    const mla = this.config.mla;
    const ws = this.workspace(n);
    const { x, xb, xb2, q, k, v, att, g, u, fused, logits } = ws;
    const eps = this.config.rms_norm_eps;
    for (let t = 0; t < n; t++) x.set(this.embed.subarray(tokens[t] * d.dim, (tokens[t] + 1) * d.dim), t * d.dim);
    // The LayerNorm families (GPT-2, GPT-NeoX, Phi-2, StarCoder2, StableLM); all but StableLM also have biased
    // projections and an ungated GELU FFN.
    const ln = this.ln;
    const ungated = gpt2Like(this.config);
    const neox = this.config.neox;
    if (ln?.positions) {
      const max = this.config.gpt2!.positions;
      if (n > max) fail(ErrorCodes.BAD_INPUT, `[llama] ${n} positions are more than the ${max} GPT-2 has learned (n_positions)`, { value: n, expected: `<= ${max}` });
      for (let i = 0; i < n * d.dim; i++) x[i] += ln.positions![i];
    }
    // LayerNorm (a norm with a bias) or RMSNorm.
    const lnEps = layerNormEps(this.config) ?? 0;
    // Phi-2: attention and the FFN both read the block's one LayerNorm (xb), outputs added together.
    const phi2 = this.config.phi2 !== undefined;
    const norm = (src: Float32Array, w: Float32Array, b: Float32Array | undefined, out: Float32Array) =>
      (b ? layerNorm(src, n, d.dim, w, b, lnEps, out) : rmsNorm(src, n, d.dim, w, eps, out));
    const xn = x.subarray(0, n * d.dim);
    const granite = this.config.granite;
    if (gemma || granite) {
      const scale = gemma ? Math.fround(Math.sqrt(d.dim)) : granite!.embedding;
      for (let i = 0; i < n * d.dim; i++) x[i] *= scale;
    }
    const attnScale = granite ? granite.attention : (yarn ? yarnMscale(yarn.factor, yarn.mscaleAllDim) ** 2 : 1) / Math.sqrt(gemma ? gemma.queryPreAttnScalar : d.headDim);
    const residual = granite?.residual ?? 1;

    for (let l = 0; l < d.layers; l++) {
      const L = this.layers[l];
      if (L.inNorm) norm(x, L.inNorm, L.inNormBias, xb);
      else xb.set(x.subarray(0, n * d.dim));
      if (L.mla) {
        mlaProject(L.mla, mla!, d, xb, n, global.cos, global.sin, q, k, v);
      } else if (L.qkv) {
        L.qkv.apply(xb, n, fused);
        if (L.qkvBias) addBias(fused, n, L.qkvBias);
        splitRows(fused, n, [[q, d.qDim], [k, d.kvDim], [v, d.kvDim]]);
      } else {
        L.q!.apply(xb, n, q);
        L.k!.apply(xb, n, k);
        L.v!.apply(xb, n, v);
      }
      if (L.qBias) { addBias(q, n, L.qBias); addBias(k, n, L.kBias!); addBias(v, n, L.vBias!); }
      // In place: each head's sum of squares is taken before its values are overwritten.
      // Per head (Qwen3, Gemma 3), or over each position's whole q and k (OLMo 2).
      if (L.qNorm) L.qNorm.length === d.headDim ? rmsNorm(q, n * d.heads, d.headDim, L.qNorm, eps, q) : rmsNorm(q, n, d.qDim, L.qNorm, eps, q);
      if (L.kNorm) L.kNorm.length === d.headDim ? rmsNorm(k, n * d.kvHeads, d.headDim, L.kNorm, eps, k) : rmsNorm(k, n, d.kvDim, L.kNorm, eps, k);
      const sliding = gemma?.sliding[l] === true;
      const oss = this.config.gptOss;
      const window = sliding ? gemma!.slidingWindow : oss?.sliding[l] ? oss.window : this.config.starcoder2?.window ?? n;
      const r = sliding ? local : global;
      if (!this.config.no_rope?.[l] && !mla && !ln?.positions) {
        rope(q, n, d.heads, d.headDim, rot, r.cos, r.sin);
        rope(k, n, d.kvHeads, d.headDim, rot, r.cos, r.sin);
      }
      attention(this.kernels, { q, k, v, n, d, scale: attnScale, window, cap: gemma?.attnLogitSoftcapping, sinks: L.sinks, att });
      L.o.apply(att, n, xb2);
      if (L.oBias) addBias(xb2, n, L.oBias);
      if (L.attnOutNorm) rmsNorm(xb2, n, d.dim, L.attnOutNorm, eps, xb2);
      // GPT-NeoX's parallel residual: the FFN reads the block's input, not input + attention.
      if (neox?.parallel) norm(x, L.ffnNorm!, L.ffnNormBias, xb);
      for (let i = 0; i < n * d.dim; i++) x[i] += xb2[i] * residual;

      if (neox?.parallel || phi2) {
        // xb already holds the FFN's input.
      } else if (L.ffnNorm) norm(x, L.ffnNorm, L.ffnNormBias, xb);
      else xb.set(x.subarray(0, n * d.dim));
      if (ungated) {
        L.up!.apply(xb, n, u);
        addBias(u, n, L.upBias!);
        const gelu = neox?.exactGelu ? geluErf : geluTanh;
        for (let i = 0; i < n * d.ffn; i++) u[i] = gelu(u[i]);
        L.down!.apply(u, n, xb2);
        addBias(xb2, n, L.downBias!);
      } else if (L.router) {
        moeFfn(L, this.config.moe!, xb, n, d.dim, xb2, this.config.gptOss);
      } else {
        if (L.gateUp) {
          L.gateUp.apply(xb, n, fused);
          splitRows(fused, n, [[g, d.ffn], [u, d.ffn]]);
        } else {
          L.gate!.apply(xb, n, g);
          L.up!.apply(xb, n, u);
        }
        for (let i = 0; i < n * d.ffn; i++) g[i] = (gemma ? geluTanh(g[i]) : silu(g[i])) * u[i];
        L.down!.apply(g, n, xb2);
      }
      if (L.ffnOutNorm) rmsNorm(xb2, n, d.dim, L.ffnOutNorm, eps, xb2);
      for (let i = 0; i < n * d.dim; i++) x[i] += xb2[i] * residual;
      opts.onLayer?.(l, xn);
    }
    if (opts.logits === false) return logits.subarray(0, 0);
    norm(x, this.finalNorm, ln?.finalNormBias, xb);
    const out = logits.subarray(0, n * d.vocab);
    this.head.apply(xb, n, out);
    if (ln?.headBias) addBias(out, n, ln.headBias);
    const cap = gemma?.finalLogitSoftcapping;
    if (cap) for (let i = 0; i < out.length; i++) out[i] = cap * Math.tanh(out[i] / cap);
    if (granite) for (let i = 0; i < out.length; i++) out[i] /= granite.logits;
    return out;
  }

  // cos/sin of pos * theta^(-2i/rot) / factor_i for i < rot/2 (rot: the rotated dimensions of a
  // head), times `mscale`, in float64 like the reference forward; one table per base and factors
  // (Gemma 3's local layers, Phi-3's short and long factors have their own).
  // Keyed by the factors array (the config's own, so one object per set) and the base and scale.
  private yarn?: Float32Array;
  /** Rotated dims per head: MLA's rope dims, Phi-3's partial rotary, or all. */
  private get rotaryDims(): number {
    return this.config.mla?.rope ?? this.config.phi3?.rotaryDims ?? this.config.neox?.rotaryDims ?? this.config.phi2?.rotaryDims ?? this.config.stablelm?.rotaryDims ?? this.dims.headDim;
  }

  private ropes = new Map<Float32Array | undefined, Map<string, { cos: Float64Array; sin: Float64Array }>>();
  private rope(theta: number, n: number, factors?: Float32Array, mscale = 1): { cos: Float64Array; sin: Float64Array } {
    const rot = this.rotaryDims;
    const half = rot / 2;
    const key = `${theta} ${mscale}`;
    let tables = this.ropes.get(factors);
    if (!tables) this.ropes.set(factors, (tables = new Map()));
    const have = tables.get(key);
    if (have && have.cos.length >= n * half) return have;
    const cos = new Float64Array(n * half), sin = new Float64Array(n * half);
    for (let i = 0; i < half; i++) {
      const invFreq = 1 / Math.pow(theta, (2 * i) / rot) / (factors ? factors[i] : 1);
      for (let p = 0; p < n; p++) {
        cos[p * half + i] = Math.cos(p * invFreq) * mscale;
        sin[p * half + i] = Math.sin(p * invFreq) * mscale;
      }
    }
    const r = { cos, sin };
    tables.set(key, r);
    return r;
  }

  private ws?: Workspace;
  private workspace(n: number): Workspace {
    if (this.ws && this.ws.capacity >= n) return this.ws;
    const d = this.dims;
    const f = (per: number) => new Float32Array(n * per);
    this.ws = {
      capacity: n, x: f(d.dim), xb: f(d.dim), xb2: f(d.dim), q: f(d.qDim), k: f(d.kvDim), v: f(d.kvHeads * d.vHeadDim),
      att: f(d.attDim), g: f(d.ffn), u: f(d.ffn), logits: f(d.vocab),
      fused: this.config.phi3 || this.config.gpt2 || this.config.neox ? f(Math.max(d.qDim + 2 * d.kvDim, 2 * d.ffn)) : new Float32Array(0),
    };
    return this.ws;
  }
}

export interface ForwardOptions {
  /** Called after each layer with the residual stream [n, hidden_size] (valid during the call only). */
  onLayer?: (layer: number, hidden: Float32Array) => void;
  /** false: stop after the last layer and return no logits (an importance-matrix run). */
  logits?: boolean;
}

interface Workspace {
  capacity: number;
  x: Float32Array; xb: Float32Array; xb2: Float32Array; q: Float32Array; k: Float32Array; v: Float32Array;
  att: Float32Array; g: Float32Array; u: Float32Array; logits: Float32Array;
  /** Output of a fused projection (Phi-3), before it is split. */
  fused: Float32Array;
}

/** A MoE layer's router and experts, read in moeTensorNames' order. */
async function moeWeights(source: WeightSource, moe: NonNullable<LlamaConfig['moe']>, prefix: string, dim: number, biased: boolean): Promise<Pick<LayerWeights, 'router' | 'experts' | 'routerBias' | 'routerLogitBias' | 'shared' | 'sharedGate'>> {
  const names = moeTensorNames(moe, prefix, biased);
  const ds = moe.deepseek;
  const router = await linear(source, names[0], moe.experts, dim);
  const routerBias = ds?.bias ? await getChecked(source, names[1], moe.experts, `[${moe.experts}]`) : undefined;
  const routerLogitBias = biased ? await getChecked(source, names[1], moe.experts, `[${moe.experts}]`) : undefined;
  const first = ds?.bias || biased ? 2 : 1;
  const per = biased ? 6 : 3;
  const swiglu = async ([g, u, dn]: string[], width: number) => ({ gate: await linear(source, g, width, dim), up: await linear(source, u, width, dim), down: await linear(source, dn, dim, width) });
  const experts: Expert[] = [];
  for (let e = 0; e < moe.experts; e++) {
    const at = first + per * e;
    const ex: Expert = await swiglu(names.slice(at, at + 3), moe.ffn);
    if (biased) {
      ex.gateBias = await getChecked(source, names[at + 3], moe.ffn, `[${moe.ffn}]`);
      ex.upBias = await getChecked(source, names[at + 4], moe.ffn, `[${moe.ffn}]`);
      ex.downBias = await getChecked(source, names[at + 5], dim, `[${dim}]`);
    }
    experts.push(ex);
  }
  const width = ds?.shared || moe.gatedShared;
  const shared = width ? await swiglu(names.slice(first + 3 * moe.experts, first + 3 * moe.experts + 3), width) : undefined;
  const sharedGate = moe.gatedShared ? await linear(source, names[first + 3 * moe.experts + 3], 1, dim) : undefined;
  return { router, experts, ...(routerBias ? { routerBias } : {}), ...(routerLogitBias ? { routerLogitBias } : {}), ...(shared ? { shared } : {}), ...(sharedGate ? { sharedGate } : {}) };
}

/**
 * The experts DeepSeek's router picks from probabilities p (sigmoid or softmax of the scores):
 * by p plus the correction bias, within the best groups when the config groups experts (others
 * count as 0, as the Hugging Face code masks them), the `used` best, the lower index first on a tie.
 */
export function deepseekPick(p: Float64Array, moe: NonNullable<LlamaConfig['moe']>, bias: Float32Array | undefined): number[] {
  const E = moe.experts, g = moe.deepseek?.groups;
  const choice = Float64Array.from(p, (x, e) => x + (bias ? bias[e] : 0));
  const order = (xs: ArrayLike<number>, n: number) => Array.from({ length: xs.length }, (_, i) => i).sort((a, b) => xs[b] - xs[a] || a - b).slice(0, n);
  if (g) {
    const per = E / g.count;
    const groupScore = Array.from({ length: g.count }, (_, i) => {
      const s = Array.from(choice.subarray(i * per, (i + 1) * per)).sort((a, b) => b - a);
      return g.by === 'max' ? s[0] : s[0] + (s[1] ?? 0);
    });
    const keep = new Set(order(groupScore, g.used));
    for (let e = 0; e < E; e++) if (!keep.has(Math.floor(e / per))) choice[e] = 0;
  }
  return order(choice, moe.used);
}

/**
 * The MoE FFN of n positions: softmax of the router's scores (float64), the `used` most likely
 * experts (the lower index first on a tie), their probabilities renormalised to sum 1 (unless
 * moe.unnormalized), and the sum of their SwiGLU outputs so weighted, into out [n, dim].
 */
function moeFfn(L: LayerWeights, moe: NonNullable<LlamaConfig['moe']>, x: Float32Array, n: number, dim: number, out: Float32Array, oss?: LlamaConfig['gptOss']): void {
  const E = moe.experts;
  const scores = new Float32Array(n * E);
  L.router!.apply(x, n, scores);
  if (L.routerLogitBias) addBias(scores, n, L.routerLogitBias);
  const g = new Float32Array(moe.ffn), u = new Float32Array(moe.ffn), y = new Float32Array(dim);
  const p = new Float64Array(E);
  out.fill(0, 0, n * dim);
  const ds = moe.deepseek;
  // The shared experts' width has buffers of its own.
  const sharedWidth = ds?.shared || moe.gatedShared || 0;
  const sg = new Float32Array(sharedWidth), su = new Float32Array(sharedWidth), gateOut = new Float32Array(1);
  const swiglu = (ex: Expert, xt: Float32Array, width: number, w: number, o: number) => {
    const [gg, uu] = width === moe.ffn ? [g, u] : [sg, su];
    ex.gate.apply(xt, 1, gg);
    ex.up.apply(xt, 1, uu);
    if (ex.gateBias) addBias(gg, 1, ex.gateBias);
    if (ex.upBias) addBias(uu, 1, ex.upBias);
    if (oss) {
      for (let i = 0; i < width; i++) {
        const a = Math.min(gg[i], oss.limit), b = Math.min(Math.max(uu[i], -oss.limit), oss.limit);
        gg[i] = a * sigmoid(oss.alpha * a) * (b + 1);
      }
    } else {
      for (let i = 0; i < width; i++) gg[i] = silu(gg[i]) * uu[i];
    }
    ex.down.apply(gg, 1, y);
    if (ex.downBias) addBias(y, 1, ex.downBias);
    for (let i = 0; i < dim; i++) out[o + i] += w * y[i];
  };
  for (let t = 0; t < n; t++) {
    let sum = 0;
    if (ds?.gating === 'sigmoid') {
      // Unnormalised sigmoid weights stay as they are (sum 1).
      for (let e = 0; e < E; e++) p[e] = sigmoid(scores[t * E + e]);
      sum = 1;
    } else {
      let max = -Infinity;
      for (let e = 0; e < E; e++) max = Math.max(max, scores[t * E + e]);
      for (let e = 0; e < E; e++) sum += (p[e] = Math.exp(scores[t * E + e] - max));
    }
    const pick = ds ? deepseekPick(p, moe, L.routerBias) : Array.from({ length: E }, (_, e) => e).sort((a, b) => p[b] - p[a] || a - b).slice(0, moe.used);
    const total = moe.unnormalized ? sum : pick.reduce((a, e) => a + p[e], 0);
    const xt = x.subarray(t * dim, (t + 1) * dim);
    for (const e of pick) swiglu(L.experts![e], xt, moe.ffn, (p[e] / total) * (ds?.scale ?? 1), t * dim);
    // Qwen2-MoE scales its shared expert by sigmoid(shared_expert_gate . x).
    if (L.sharedGate) L.sharedGate.apply(xt, 1, gateOut);
    if (L.shared) swiglu(L.shared, xt, sharedWidth, L.sharedGate ? sigmoid(gateOut[0]) : 1, t * dim);
  }
}

/** Splits n rows of concatenated parts (row t: part 0, part 1, ...) into one array per part. */
function splitRows(src: Float32Array, n: number, parts: [Float32Array, number][]): void {
  const width = parts.reduce((a, [, w]) => a + w, 0);
  for (let t = 0; t < n; t++) {
    let at = t * width;
    for (const [dst, w] of parts) {
      dst.set(src.subarray(at, at + w), t * w);
      at += w;
    }
  }
}

const silu = (a: number) => a / (1 + Math.exp(-a));
const sigmoid = (a: number) => 1 / (1 + Math.exp(-a));

/** x[t, i] += b[i] for n rows of b.length values. */
function addBias(x: Float32Array, n: number, b: Float32Array): void {
  for (let t = 0, o = 0; t < n; t++, o += b.length) for (let i = 0; i < b.length; i++) x[o + i] += b[i];
}
// GELU, exact: x * Phi(x) (torch's "gelu"), with erf to float64 precision.
const geluErf = (a: number) => 0.5 * a * (1 + erf(a / Math.SQRT2));

/**
 * erf to about 1e-15: its Maclaurin series below 2.5 (terms alternate and shrink fast there), and
 * 1 - erfc from erfc's continued fraction above.
 */
export function erf(x: number): number {
  const ax = Math.abs(x);
  if (ax < 2.5) {
    let term = ax, sum = ax;
    for (let k = 1; k < 60; k++) {
      term *= (-ax * ax) / k;
      const t = term / (2 * k + 1);
      sum += t;
      if (Math.abs(t) < 1e-17 * Math.abs(sum)) break;
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }
  // erfc(x) = exp(-x^2) / sqrt(pi) * 1 / (x + (1/2) / (x + 1 / (x + (3/2) / (x + 2 / (x + ...))))).
  let f = ax;
  for (let k = 60; k >= 1; k--) f = ax + (k / 2) / f;
  return Math.sign(x) * (1 - Math.exp(-ax * ax) / Math.sqrt(Math.PI) / f);
}

// GELU, tanh approximation (gelu_pytorch_tanh).
const geluTanh = (a: number) => 0.5 * a * (1 + Math.tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));

/** LayerNorm over each of n rows: (x - mean) / sqrt(var + eps) * w + b, statistics in float64. */
export function layerNorm(x: Float32Array, n: number, dim: number, w: Float32Array, b: Float32Array, eps: number, out: Float32Array): void {
  for (let t = 0, o = 0; t < n; t++, o += dim) {
    let mean = 0;
    for (let i = 0; i < dim; i++) mean += x[o + i];
    mean /= dim;
    let v = 0;
    for (let i = 0; i < dim; i++) v += (x[o + i] - mean) ** 2;
    const inv = 1 / Math.sqrt(v / dim + eps);
    for (let i = 0; i < dim; i++) out[o + i] = (x[o + i] - mean) * inv * w[i] + b[i];
  }
}

export function rmsNorm(x: Float32Array, n: number, dim: number, w: Float32Array, eps: number, out: Float32Array): void {
  for (let t = 0, o = 0; t < n; t++, o += dim) {
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += x[o + i] * x[o + i];
    const inv = 1 / Math.sqrt(ss / dim + eps);
    for (let i = 0; i < dim; i++) out[o + i] = x[o + i] * inv * w[i];
  }
}

// Hugging Face rotate-half layout: dimension i pairs with i + rot/2 within the first `rot`
// dimensions of each head (all of them but for Phi-3's partial rotary); the rest pass unrotated.
function rope(v: Float32Array, n: number, heads: number, headDim: number, rot: number, cos: Float64Array, sin: Float64Array): void {
  const half = rot / 2;
  for (let t = 0; t < n; t++) {
    const c0 = t * half;
    for (let h = 0; h < heads; h++) {
      const o = (t * heads + h) * headDim;
      for (let i = 0; i < half; i++) {
        const a = v[o + i], b = v[o + i + half];
        const c = cos[c0 + i], s = sin[c0 + i];
        v[o + i] = a * c - b * s;
        v[o + i + half] = b * c + a * s;
      }
    }
  }
}
