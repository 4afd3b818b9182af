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
import { checkShape, gpt2Like, layerNormEps, layerPrefix, type Dims, type LlamaConfig } from './config.js';
import { mlaProject, mlaWeights, yarnAttentionFactor, yarnFactors, yarnMscale, type MlaWeights } from './mla.js';
import { attention } from './attention.js';
import { loadKernels, type Kernels } from '../kernels/loader.js';
import { moeFfn, moeWeights, type MoeWeights } from './moe.js';
import { addBias, geluErf, geluTanh, layerNorm, rmsNorm, rope, silu, splitRows } from './ops.js';
import { exactLinear, getChecked, hasHook, linear, type Linear, type WeightSource } from './weights.js';

export { llamaConfig, llamaTensorNames, layerPrefix, type LlamaConfig, type GemmaOptions } from './config.js';
export { checkpointWeights, matmulF32, type Linear, type WeightSource } from './weights.js';
export { deepseekPick } from './moe.js';

interface LayerWeights extends MoeWeights {
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
  /** A MoE FFN instead of gate/up/down: MoeWeights' router and experts (gpt-oss: and biases). */
  /** DeepSeek's latent attention instead of q/k/v. */
  mla?: MlaWeights;
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
