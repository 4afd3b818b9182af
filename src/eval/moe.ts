// The MoE FFN of the reference forward: reading a layer's router and experts, the router's choice
// (softmax or DeepSeek's sigmoid with groups and a correction bias) and the weighted sum of the
// chosen experts' SwiGLU (gpt-oss: clamped, with biases), plus the shared experts.
import { moeTensorNames, type LlamaConfig } from './config.js';
import { addBias, sigmoid, silu } from './ops.js';
import { getChecked, linear, type Linear, type WeightSource } from './weights.js';

export interface Expert {
  gate: Linear; up: Linear; down: Linear;
  gateBias?: Float32Array; upBias?: Float32Array; downBias?: Float32Array;
}


/** A MoE layer's weights (the forward's LayerWeights has these beside its attention's). */
export interface MoeWeights {
  router?: Linear;
  experts?: Expert[];
  /** gpt-oss: added to the router's logits. */
  routerLogitBias?: Float32Array;
  /** DeepSeek: the router's correction bias (V3) and the shared experts; Qwen2-MoE: its shared expert and the gate of its output. */
  routerBias?: Float32Array;
  shared?: { gate: Linear; up: Linear; down: Linear };
  sharedGate?: Linear;
}

/** A MoE layer's router and experts, read in moeTensorNames' order. */
export async function moeWeights(source: WeightSource, moe: NonNullable<LlamaConfig['moe']>, prefix: string, dim: number, biased: boolean): Promise<MoeWeights> {
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
export function moeFfn(L: MoeWeights, moe: NonNullable<LlamaConfig['moe']>, x: Float32Array, n: number, dim: number, out: Float32Array, oss?: LlamaConfig['gptOss']): void {
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
