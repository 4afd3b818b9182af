// Picks the preset that fits a memory budget, from exact estimates when the tensor list is known
// and from a synthetic Llama-shaped model of the same parameter count otherwise.
import { ErrorCodes, fail } from '../errors.js';
import type { FormatSpec } from '../formats/types.js';
import { estimatePlan } from './estimate.js';
import { resolvePlan } from './plan.js';
import type { TensorDesc } from './types.js';
import { getPreset, listPresets, type Preset } from './presets.js';

export type RecommendTarget = 'quality' | 'size' | 'speed';

export interface RecommendInput {
  /** The model's tensors (exact estimates)... */
  tensors?: readonly TensorDesc[];
  /** ...or its stored size and parameter count (approximate estimates). */
  modelBytes?: number;
  paramCount?: number;
  /** Bytes the quantized weights may take. */
  memoryBudget: number;
  /**
   * 'quality' (default): the best-quality preset that fits; 'size': the smallest output;
   * 'speed': the cheapest weights to decode that fit. Ties go to quality, then to the larger output.
   */
  target?: RecommendTarget;
  /** Restrict to these preset names (default: every registered preset but the trainedOnly ones). */
  presets?: string[];
  container?: 'gguf' | 'safetensors';
  getFormat?: (name: string) => FormatSpec;
}

export interface Candidate {
  preset: string;
  bytes?: number;
  bpw?: number;
  fits: boolean;
  /** Why a preset was not considered (formats missing from the registry, plan errors). */
  unavailable?: string;
}

export interface Recommendation {
  preset: Preset;
  bytes: number;
  bpw: number;
  /** False for estimates from modelBytes/paramCount or with tensors of unknown size. */
  exact: boolean;
  reason: string;
  candidates: Candidate[];
}

/** A Llama-like tensor list with about `params` parameters, for estimates without the real list. */
export function syntheticModel(params: number, dtype = 'BF16'): TensorDesc[] {
  const vocab = 32000;
  // Width from a typical depth, rounded to a multiple of 256 (so K-quants see no fallback rows),
  // then the depth that brings the count closest (MHA, ffn ~ 8d/3): 4d² + 3·d·f per layer.
  const depth0 = params >= 3e9 ? 32 : params >= 5e8 ? 24 : params >= 5e7 ? 12 : 6;
  const d = Math.max(256, Math.round(Math.sqrt(params / (12 * depth0)) / 256) * 256);
  const f = Math.max(256, Math.round((8 * d) / 3 / 256) * 256);
  const layers = Math.max(1, Math.round((params - 2 * vocab * d) / (4 * d * d + 3 * d * f)));
  const t: TensorDesc[] = [{ name: 'model.embed_tokens.weight', shape: [vocab, d], dtype }];
  for (let i = 0; i < layers; i++) {
    const p = `model.layers.${i}`;
    t.push({ name: `${p}.input_layernorm.weight`, shape: [d], dtype });
    for (const x of ['q', 'k', 'v', 'o']) t.push({ name: `${p}.self_attn.${x}_proj.weight`, shape: [d, d], dtype });
    t.push({ name: `${p}.post_attention_layernorm.weight`, shape: [d], dtype });
    t.push({ name: `${p}.mlp.gate_proj.weight`, shape: [f, d], dtype });
    t.push({ name: `${p}.mlp.up_proj.weight`, shape: [f, d], dtype });
    t.push({ name: `${p}.mlp.down_proj.weight`, shape: [d, f], dtype });
  }
  t.push({ name: 'model.norm.weight', shape: [d], dtype }, { name: 'lm_head.weight', shape: [vocab, d], dtype });
  return t;
}

function dominantDtype(tensors: readonly TensorDesc[]): string {
  const count = new Map<string, number>();
  for (const t of tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    const d = t.dtype.toLowerCase();
    count.set(d, (count.get(d) ?? 0) + n);
  }
  return [...count.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? 'f32';
}

export function recommend(input: RecommendInput): Recommendation {
  const target = input.target ?? 'quality';
  if (!['quality', 'size', 'speed'].includes(target)) {
    fail(ErrorCodes.BAD_OPTION, `[recommend] target must be quality, size or speed but got ${String(target)}`, { option: 'target', value: target, expected: ['quality', 'size', 'speed'] });
  }
  if (!(Number.isFinite(input.memoryBudget) && input.memoryBudget > 0)) {
    fail(ErrorCodes.BAD_OPTION, `[recommend] memoryBudget must be a positive number of bytes but got ${String(input.memoryBudget)}`, { option: 'memoryBudget', value: input.memoryBudget });
  }
  let tensors = input.tensors;
  let scale = 1;
  let exact = true;
  if (!tensors) {
    const { modelBytes, paramCount } = input;
    if (!(Number.isFinite(paramCount) && paramCount! > 0 && Number.isFinite(modelBytes) && modelBytes! > 0)) {
      fail(ErrorCodes.BAD_OPTION, '[recommend] give either tensors or both modelBytes and paramCount (positive numbers)', { option: 'tensors', value: { modelBytes, paramCount } });
    }
    const perParam = modelBytes! / paramCount!;
    const dtype = perParam >= 3 ? 'F32' : perParam >= 1.5 ? 'BF16' : 'F8_E4M3';
    tensors = syntheticModel(paramCount!, dtype);
    const synth = tensors.reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0);
    scale = paramCount! / synth;
    exact = false;
  }
  const source = dominantDtype(tensors);
  const wanted = input.presets?.map((s) => getPreset(s).name);
  const pool = listPresets().filter((p) => (wanted ? wanted.includes(p.name) : !p.trainedOnly) && (!input.container || p.container === input.container));
  const candidates: Candidate[] = [];
  const fitting: { p: Preset; bytes: number; bpw: number; exact: boolean }[] = [];
  for (const p of pool) {
    const r = resolvePlan(p.plan, tensors, { getFormat: input.getFormat });
    if (!r.ok) {
      candidates.push({ preset: p.name, fits: false, unavailable: r.problems.find((x) => x.severity === 'error')!.message });
      continue;
    }
    const est = estimatePlan(r, { getFormat: input.getFormat });
    const bytes = Math.ceil(est.bytes * scale);
    const fits = bytes <= input.memoryBudget;
    candidates.push({ preset: p.name, bytes, bpw: est.bpw, fits });
    if (fits) fitting.push({ p, bytes, bpw: est.bpw, exact: exact && est.exact });
  }
  if (fitting.length === 0) {
    const avail = candidates.filter((c) => c.bytes !== undefined).sort((a, b) => a.bytes! - b.bytes!);
    const smallest = avail[0];
    fail(ErrorCodes.BUDGET, smallest
      ? `[recommend] no preset fits ${input.memoryBudget} bytes; the smallest, ${smallest.preset}, needs ${smallest.bytes} bytes`
      : `[recommend] no preset is available (${candidates.map((c) => `${c.preset}: ${c.unavailable}`).slice(0, 3).join('; ')})`, {
      option: 'memoryBudget', value: input.memoryBudget, expected: smallest ? `>= ${smallest.bytes}` : undefined,
    });
  }
  // A preset storing the source's own float type loses nothing: rank it above its twin.
  const quality = (p: Preset) => p.quality + (typeof p.plan.default === 'object' && p.plan.default.format === source ? 0.5 : 0);
  const key = (c: (typeof fitting)[number]): number[] =>
    target === 'quality' ? [quality(c.p), c.bytes, c.p.speed]
      : target === 'speed' ? [c.p.speed, quality(c.p), c.bytes]
        : [-c.bytes, quality(c.p), c.p.speed];
  fitting.sort((a, b) => {
    const ka = key(a), kb = key(b);
    for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return kb[i] - ka[i];
    return 0;
  });
  const best = fitting[0];
  const pct = ((100 * best.bytes) / input.memoryBudget).toFixed(1);
  const why = target === 'quality' ? 'the highest-quality preset that fits'
    : target === 'speed' ? 'the fastest-to-decode preset that fits' : 'the smallest output';
  return {
    preset: best.p,
    bytes: best.bytes,
    bpw: best.bpw,
    exact: best.exact,
    reason: `${best.p.name}: ${why} (${best.bytes} bytes, ${best.bpw.toFixed(3)} bpw, ${pct}% of the budget; ${fitting.length} of ${candidates.length} presets fit${exact ? '' : '; estimated from a synthetic model of the same parameter count'})`,
    candidates,
  };
}
