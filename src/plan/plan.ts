// Resolving a plan against a tensor list: which tensor gets which registry format, with
// llama-quantize's policy for what is never quantized and for rows a format's block does not
// divide (shared/spec §17).
import { ErrorCodes, WebquantError, fail, type ErrorCode } from '../errors.js';
import { getFormat as registryGetFormat } from '../formats/registry.js';
import type { FormatSpec, ResolvedOptions, ScaleDtype } from '../formats/types.js';
import { resolveOptions } from '../options.js';
import { isGgmlBlockType } from '../io/ggml-types.js';
import { READ_AS_F32_DTYPES } from '../io/dtypes.js';
import { asList, normalizePlan, parseRegex } from './json.js';
import { compilePattern, type NamePattern } from './regex.js';
import { detectRole, useMoreBits, type Role } from './roles.js';
import { llamaPositions } from './llama-counters.js';
import {
  DEFAULT_PROTECT, type LayerSelector, type Plan, type PlanProblem, type PlannedTensor, type PlanRule, type ProtectClass,
  type ResolvedPlan, type ResolveOptions, type Scheme, type SchemeOrKeep, type Severity, type TensorDesc,
} from './types.js';

// Float dtypes, and the quantized ones readers present as values (READ_AS_F32_DTYPES: NVFP4, MLX, bitsandbytes).
const FLOAT_DTYPES = new Set(['f64', 'f32', 'f16', 'bf16', 'float64', 'float32', 'float16', 'bfloat16', 'f8_e4m3', 'f8_e5m2', 'f8_e4m3fn', 'float8_e4m3fn', 'float8_e5m2', ...[...READ_AS_F32_DTYPES].map((d) => d.toLowerCase())]);
const INT_DTYPES = /^(?:i|u|int|uint)(?:8|16|32|64)$|^bool$/;

type DtypeClass = 'float' | 'int' | 'unknown';

const SCALE_DTYPE_OF: Readonly<Record<string, ScaleDtype>> = { F32: 'f32', F16: 'f16', BF16: 'bf16' };

function formatHasScaleDtype(lookup: (name: string) => FormatSpec, format: string, d: ScaleDtype): boolean {
  try {
    return !!lookup(format).scaleDtypes?.includes(d);
  } catch {
    return false; // an unknown format: validation reports it
  }
}
function dtypeClass(dtype: string): DtypeClass {
  const d = dtype.toLowerCase();
  if (FLOAT_DTYPES.has(d) || isGgmlBlockType(d)) return 'float';
  if (INT_DTYPES.test(d)) return 'int';
  return 'unknown';
}

/**
 * llama-quantize's fallbacks when ne[0] is not a multiple of a type's block (§17): the next type
 * is tried, then F16. Types not listed go to F16 directly, and webquant says so: the 32-value
 * ones (Q8_0, Q4_0, ...) as a September 2026 llama-quantize does (b4747 aborted), Q1_0 where
 * that release aborts ("no tensor type fallback is defined").
 */
export const GGUF_FALLBACK: Readonly<Record<string, string>> = Object.freeze({
  q4_k: 'q5_0', q5_k: 'q5_1', q6_k: 'q8_0', q2_k: 'iq4_nl', q3_k: 'iq4_nl', iq4_xs: 'iq4_nl',
  tq1_0: 'q4_0', tq2_0: 'q4_0', q2_0: 'q4_0', iq3_xxs: 'iq4_nl', iq3_s: 'iq4_nl', iq1_s: 'iq4_nl', iq1_m: 'iq4_nl',
  iq2_xxs: 'iq4_nl', iq2_xs: 'iq4_nl', iq2_s: 'iq4_nl',
});

interface Compiled {
  rule: PlanRule;
  index: number;
  re?: NamePattern;
  /** `re` anchored at both ends, for fullmatch rules. */
  full?: NamePattern;
  roles?: Set<Role>;
  kinds?: Set<string>;
  layers?: LayerSelector;
  hits: number;
  bad?: string;
  desc?: string;
}

function compileRule(rule: PlanRule, index: number): Compiled {
  const c: Compiled = { rule, index, hits: 0 };
  if (rule.match !== undefined) {
    try {
      c.re = parseRegex(rule.match, `rules[${index}].match`);
      if (rule.fullmatch) c.full = compilePattern(`^(?:${c.re.source})$`, c.re.flags, `rules[${index}].match`);
    } catch (e) {
      c.bad = (e as Error).message;
    }
  }
  if (rule.role !== undefined) c.roles = new Set(asList(rule.role));
  if (rule.kind !== undefined) c.kinds = new Set(asList(rule.kind));
  if (rule.layers !== undefined) c.layers = rule.layers;
  return c;
}

function inferExperts(entries: PlannedTensor[]): number {
  let n = 0;
  for (const e of entries) {
    if (e.role !== 'expert') continue;
    if (e.expert !== undefined) n = Math.max(n, e.expert + 1);
    else if (e.shape.length === 3) n = Math.max(n, e.shape[0]);
  }
  return n;
}

function inferGqa(entries: PlannedTensor[]): number | undefined {
  const q = new Map<number, number>();
  const k = new Map<number, number>();
  for (const e of entries) {
    if (e.role !== 'attention' || e.layer === undefined || e.shape.length !== 2) continue;
    if (e.kind === 'q') q.set(e.layer, e.shape[0]);
    if (e.kind === 'k') k.set(e.layer, e.shape[0]);
  }
  for (const [layer, rows] of [...q.entries()].sort((a, b) => a[0] - b[0])) {
    const kr = k.get(layer);
    if (kr) return rows / kr;
  }
  return undefined;
}

function fullMatches(anchored: NamePattern, name: string): boolean {
  const module = name.replace(/\.weight$/, '');
  return [name, module, name.replace(/\./g, '/'), module.replace(/\./g, '/')].some((s) => anchored.test(s));
}

function describeRule(c: Compiled): string {
  const r = c.rule;
  const parts: string[] = [];
  if (r.match !== undefined) parts.push(`${r.fullmatch ? 'fullmatch' : 'match'} ${r.match}`);
  if (r.role !== undefined) parts.push(`role ${asList(r.role)!.join('|')}`);
  if (r.kind !== undefined) parts.push(`kind ${asList(r.kind)!.join('|')}`);
  if (r.layers !== undefined) parts.push(`layers ${Array.isArray(r.layers) ? r.layers.join(',') : r.layers}`);
  if (r.nExperts !== undefined) parts.push(`${r.nExperts} experts`);
  if (r.minGqa !== undefined) parts.push(`gqa >= ${r.minGqa}`);
  if (r.minExperts !== undefined) parts.push(`>= ${r.minExperts} experts`);
  if (r.importance !== undefined) parts.push(r.importance ? 'with an importance matrix' : 'without an importance matrix');
  if (r.modelType !== undefined) parts.push(`${r.modelType} models`);
  if (r.note) parts.push(r.note);
  return `rule ${c.index} (${parts.join(', ')})`;
}

export function schemeLabel(s: SchemeOrKeep): string {
  if (s === 'keep') return 'keep';
  const extra: string[] = [];
  if (s.bits !== undefined) extra.push(`bits ${s.bits}`);
  if (s.groupSize !== undefined) extra.push(`g${s.groupSize}`);
  if (s.granularity !== undefined) extra.push(s.granularity);
  if (s.calibration !== undefined) extra.push(typeof s.calibration === 'string' ? s.calibration : s.calibration.method);
  if (s.doubleQuant) extra.push('double quant');
  if (s.scaleDtype !== undefined) extra.push(`${s.scaleDtype} scales`);
  return extra.length ? `${s.format} (${extra.join(', ')})` : s.format;
}

const FFN_ROLES: ReadonlySet<string> = new Set(['ffn', 'expert', 'shared_expert']);

function layerSelected(sel: LayerSelector, layer: number | undefined, nLayers: number): boolean {
  if (layer === undefined) return false;
  if (Array.isArray(sel)) return sel.includes(layer);
  if (sel === 'use_more_bits') return useMoreBits(layer, nLayers);
  if (sel === 'middle_three_quarters') return layer >= Math.floor(nLayers / 8) && layer < Math.floor((7 * nLayers) / 8);
  return layer < Math.floor(nLayers / (sel === 'first_sixteenth' ? 16 : 8));
}

function protectedClass(t: PlannedTensor, protect: Set<ProtectClass>): ProtectClass | undefined {
  if (protect.has('norm') && t.role === 'norm') return 'norm';
  if (protect.has('router') && t.role === 'router') return 'router';
  if (protect.has('bias') && t.role === 'bias') return 'bias';
  if (protect.has('1d') && t.shape.length < 2) return '1d';
  if (protect.has('position') && t.role === 'embedding' && t.kind !== 'token') return 'position';
  if (protect.has('embedding') && t.role === 'embedding' && t.kind === 'token') return 'embedding';
  if (protect.has('non_weight') && !t.name.endsWith('weight')) return 'non_weight';
  return undefined;
}

/**
 * Applies a plan to a tensor list. Never throws for problems of individual tensors: each one is an
 * entry in `problems` (severity error / warning / info) naming the tensor, and `ok` is false when
 * any is an error. Decision order per tensor: skip list, quantization side tensors, protected classes,
 * rules (first match), default; then dtype checks, option validation (the registry's
 * resolveOptions) and the row-length fallback chain.
 */
export function resolvePlan(planInput: Plan, tensors: readonly TensorDesc[], opts: ResolveOptions = {}): ResolvedPlan {
  const plan = normalizePlan(planInput);
  const lookup = opts.getFormat ?? registryGetFormat;
  const problems: PlanProblem[] = [];
  const problem = (severity: Severity, code: ErrorCode, message: string, where: { tensor?: string; rule?: number } = {}) =>
    problems.push({ severity, code, message, ...where });

  const compiled = plan.rules.map(compileRule);
  for (const c of compiled) if (c.bad) problem('error', ErrorCodes.PLAN, `[plan] ${c.bad}`, { rule: c.index });
  const skipNames = new Set<string>();
  const skipRes: { src: string; re: NamePattern }[] = [];
  for (const s of plan.skip) {
    if (s.startsWith('/') && /\/[a-z]*$/.test(s) && s.length > 1) skipRes.push({ src: s, re: parseRegex(s, 'skip') });
    else skipNames.add(s);
  }
  const protect = new Set(plan.protect ?? DEFAULT_PROTECT);

  const entries: PlannedTensor[] = tensors.map((t) => {
    const shape = [...t.shape].map(Number);
    const rowLength = shape.length ? shape[shape.length - 1] : 1;
    const params = shape.reduce((a, b) => a * b, 1);
    const rows = rowLength > 0 ? params / rowLength : 0;
    return { name: t.name, shape, dtype: t.dtype, ...detectRole(t.name), rows, rowLength, params, scheme: 'keep', reason: '' };
  });
  const maxLayer = entries.reduce((m, e) => (e.layer !== undefined && e.layer > m ? e.layer : m), -1);
  const nLayers = opts.nLayers ?? maxLayer + 1;
  const nExperts = opts.nExperts ?? inferExperts(entries);
  const gqa = opts.gqa ?? inferGqa(entries);
  const modelType = opts.modelType === null ? undefined : opts.modelType ?? (nLayers === 80 && gqa !== undefined && gqa > 1 ? '70B' : undefined);
  // llama.cpp: without an output tensor the token embedding doubles as the output head.
  const hasOutput = entries.some((e) => e.role === 'output');
  if (!hasOutput) for (const e of entries) if (e.role === 'embedding' && e.kind === 'token') e.tied = true;

  /** Why the rules never see `e` (skip list, side tensor, protected class), or undefined. */
  const exempt = (e: PlannedTensor): string | undefined => {
    if (skipNames.has(e.name)) return `skip "${e.name}"`;
    const sk = skipRes.find((s) => s.re.test(e.name));
    if (sk) return `skip ${sk.src}`;
    if (e.role === 'other' && e.kind === 'quant_aux') return 'quantization side tensor of a quantized checkpoint';
    const pc = protectedClass(e, protect);
    return pc ? `protected: ${pc}` : undefined;
  };
  let positions: ReturnType<typeof llamaPositions> | undefined;
  const matches = (c: Compiled, e: PlannedTensor): boolean => {
    if (c.bad) return false;
    if (c.re && !(c.full ? fullMatches(c.full, e.name) : c.re.test(e.name))) return false;
    if (c.roles && !c.roles.has(e.role) && !(e.tied && c.roles.has('output'))) return false;
    if (c.kinds && !(e.kind !== undefined && c.kinds.has(e.kind))) return false;
    if (c.layers) {
      const at = c.rule.layerCount && positions?.[c.rule.layerCount === 'llama' ? 'llama' : 'raw'].get(e.name);
      const of = opts.ffnLayers !== undefined && FFN_ROLES.has(e.role) ? opts.ffnLayers : nLayers;
      if (!(at ? layerSelected(c.layers, at.index, at.of) : layerSelected(c.layers, e.layer, of))) return false;
    }
    if (c.rule.nExperts !== undefined && c.rule.nExperts !== nExperts) return false;
    if (c.rule.minGqa !== undefined && !(gqa !== undefined && gqa >= c.rule.minGqa)) return false;
    if (c.rule.minExperts !== undefined && !(nExperts !== undefined && nExperts >= c.rule.minExperts)) return false;
    if (c.rule.importance !== undefined && c.rule.importance !== !!opts.importance) return false;
    if (c.rule.modelType !== undefined && c.rule.modelType !== modelType) return false;
    return true;
  };
  if (compiled.some((c) => c.rule.layerCount && c.rule.layers)) {
    // Tensors an override rule takes (llama-quantize's --tensor-type) are not counted.
    const overrides = compiled.filter((c) => c.rule.override);
    const claimed = new Set(entries.filter((e) => exempt(e) === undefined && overrides.some((c) => matches(c, e))).map((e) => e.name));
    positions = llamaPositions(entries, { nExperts, blocks: opts.ffnLayers ?? nLayers, claimed });
  }

  // Validation is per (scheme, row length); big MoE checkpoints repeat both thousands of times.
  const optCache = new Map<string, { spec: FormatSpec; o: ResolvedOptions } | { err: WebquantError }>();
  const validate = (s: Scheme) => {
    const key = JSON.stringify(s);
    let v = optCache.get(key);
    if (!v) {
      try {
        const spec = lookup(s.format);
        v = { spec, o: resolveOptions(spec, s) };
      } catch (e) {
        if (!(e instanceof WebquantError)) throw e;
        v = { err: e };
      }
      optCache.set(key, v);
    }
    return v;
  };

  for (const e of entries) {
    // 1-2. skip list, side tensors, protected classes
    const why = exempt(e);
    if (why) { e.reason = why; continue; }
    // 3. rules, then the default
    let chosen: SchemeOrKeep = plan.default;
    e.rule = -1;
    e.reason = 'default';
    for (const c of compiled) {
      if (!matches(c, e)) continue;
      c.hits++;
      chosen = c.rule.scheme;
      e.rule = c.index;
      e.reason = (c.desc ??= describeRule(c));
      break;
    }
    e.scheme = chosen;
    if (chosen === 'keep') continue;
    // 4. dtype
    const dc = dtypeClass(e.dtype);
    if (dc !== 'float') {
      problem(dc === 'int' ? 'info' : 'warning', ErrorCodes.UNSUPPORTED_DTYPE,
        `[plan] ${e.name}: dtype ${e.dtype} is ${dc === 'int' ? 'an integer type' : 'not a float type webquant reads'}; kept as stored instead of ${schemeLabel(chosen)}`, { tensor: e.name });
      e.reason += `; kept: dtype ${e.dtype}`;
      e.scheme = 'keep';
      continue;
    }
    // 5. options and row length. MLX keeps scales in the weights' dtype: a scheme of a format with
    // a scale dtype that leaves it open takes the tensor's (F32, F16, BF16; others the default).
    const sd = SCALE_DTYPE_OF[e.dtype];
    if (sd && chosen.scaleDtype === undefined && formatHasScaleDtype(lookup, chosen.format, sd)) e.scheme = chosen = { ...chosen, scaleDtype: sd };
    resolveScheme(e, chosen, validate, !!opts.strict, !!opts.importance, problem, e.rule >= 0 ? plan.rules[e.rule].fallback : undefined, plan.requireImportance);
  }

  for (const c of compiled) {
    if (!c.bad && c.hits === 0 && !c.rule.optional) {
      const roles = asList(c.rule.role) ?? [];
      const shielded = roles.filter((r) => (r === 'norm' || r === 'router' || r === 'bias' || r === 'embedding') && protect.has(r as ProtectClass));
      const hint = shielded.length ? ` (role ${shielded.join(', ')} is protected by the plan; remove it from "protect" to let rules decide)` : '';
      problem('warning', ErrorCodes.PLAN, `[plan] ${describeRule(c)} matches no tensor${hint}`, { rule: c.index });
    }
  }
  const ok = !problems.some((p) => p.severity === 'error');
  return { plan, tensors: entries, problems, ok, nLayers, nExperts, gqa, ...(modelType ? { modelType } : {}), fileType: plan.fileType };
}

type Validate = (s: Scheme) => { spec: FormatSpec; o: ResolvedOptions } | { err: WebquantError };
type ProblemFn = (severity: Severity, code: ErrorCode, message: string, where?: { tensor?: string; rule?: number }) => void;

function resolveScheme(e: PlannedTensor, chosen: Scheme, validate: Validate, strict: boolean, importance: boolean, problem: ProblemFn, fallback?: string, planRequires?: string[]): void {
  settleScheme(e, chosen, validate, strict, problem, fallback);
  // On the scheme that stays (a row-length fallback may need no importance matrix), as llama-quantize checks.
  if (e.error || e.scheme === 'keep') return;
  const v = validate(e.scheme);
  if ('err' in v || importance) return;
  // llama-quantize's tensor_requires_imatrix: token_embd and output are exempt unless the kernel itself needs one.
  const exempt = e.role === 'output' || e.tied || (e.role === 'embedding' && e.kind === 'token');
  const byFormat = v.spec.requiresImportance || (v.spec.planRequiresImportance && !exempt);
  const byPlan = !exempt && !!planRequires?.includes(v.spec.name);
  if (byFormat || byPlan) {
    const what = `${v.spec.name} needs an importance matrix${byFormat ? '' : ' in this plan'}`;
    e.error = what;
    problem('error', ErrorCodes.BAD_OPTION, `[plan] ${e.name}: ${schemeLabel(e.scheme)} (${e.reason}): ${what} (llama-quantize refuses it without one): give one (--imatrix), or choose another format`, { tensor: e.name, rule: e.rule });
  }
}

function settleScheme(e: PlannedTensor, chosen: Scheme, validate: Validate, strict: boolean, problem: ProblemFn, fallback?: string): void {
  const v = validate(chosen);
  if ('err' in v) {
    e.error = v.err.message;
    problem('error', v.err.code, `[plan] ${e.name}: ${schemeLabel(chosen)} (${e.reason}): ${v.err.message}`, { tensor: e.name, rule: e.rule });
    return;
  }

  const block = v.spec.blockSize(v.o);
  if (e.rowLength > 0 && e.rowLength % block === 0) {
    e.options = v.o;
    return;
  }
  const why = `row length ${e.rowLength} is not a multiple of the ${v.spec.name} block size ${block}`;
  if (strict) {
    e.error = why;
    problem('error', ErrorCodes.ROW_LENGTH, `[plan] ${e.name}: ${why} (strict: no fallback)`, { tensor: e.name, rule: e.rule });
    return;
  }
  const chain: string[] = [];
  const fits = (s: Scheme): { spec: FormatSpec; o: ResolvedOptions } | 'invalid' | 'nofit' => {
    const w = validate(s);
    if ('err' in w) return 'invalid';
    return e.rowLength % w.spec.blockSize(w.o) === 0 ? w : 'nofit';
  };
  const settle = (s: SchemeOrKeep, w: { o: ResolvedOptions } | undefined, note: string, severity: Severity = 'warning') => {
    e.fallback = { from: chosen, chain, why };
    e.scheme = s;
    if (w) e.options = w.o;
    e.reason += `; fallback ${schemeLabel(s)}: ${why}`;
    problem(severity, ErrorCodes.ROW_LENGTH, `[plan] ${e.name}: ${why}; using ${schemeLabel(s)}${note}`, { tensor: e.name, rule: e.rule });
  };
  // The F16 end of llama.cpp's chain; where the registry has no f16 the source values are kept.
  const toF16 = (note: string) => {
    const f16 = fits({ format: 'f16' });
    chain.push('f16');
    if (f16 !== 'invalid' && f16 !== 'nofit') settle({ format: 'f16' }, f16, note);
    else settle('keep', undefined, `${note} (no f16 format in the registry: kept as stored)`);
  };

  if (v.spec.family === 'gguf' || v.spec.ggml) {
    const next = fallback ?? GGUF_FALLBACK[v.spec.name];
    if (next) {
      chain.push(next);
      const f = fits({ format: next });
      if (f === 'invalid') {
        e.error = `fallback format ${next} is not usable: ${(validate({ format: next }) as { err: WebquantError }).err.message}`;
        problem('error', ErrorCodes.UNKNOWN_FORMAT, `[plan] ${e.name}: ${why}; llama.cpp's fallback ${next} is not available: ${e.error}`, { tensor: e.name, rule: e.rule });
        return;
      }
      if (f !== 'nofit') { settle({ format: next }, f, ' (llama.cpp fallback)'); return; }
      toF16(` (llama.cpp fallback ${v.spec.name} -> ${next} -> f16)`);
      return;
    }
    toF16(` (llama-quantize has no fallback for ${v.spec.name} and refuses this tensor)`);
    return;
  }
  // Other families: a smaller group size the row length allows, then per-channel scales, then keep.
  const cands: Scheme[] = [];
  const sizes = [...(v.spec.groupSizes ?? [])].filter((g) => g < (v.o.groupSize || Infinity)).sort((a, b) => b - a);
  for (const g of sizes) cands.push({ ...chosen, groupSize: g });
  if (v.spec.granularities?.includes('channel') && v.o.granularity !== 'channel') {
    const { groupSize: _g, ...rest } = chosen;
    cands.push({ ...rest, granularity: 'channel' });
  }
  for (const c of cands) {
    chain.push(schemeLabel(c));
    const f = fits(c);
    if (f !== 'invalid' && f !== 'nofit') { settle(c, f, ''); return; }
  }
  chain.push('keep');
  settle('keep', undefined, ' (kept as stored)');
}

/** Throws WebquantError(E_PLAN) listing every error of a resolved plan. */
export function assertPlanOk(r: ResolvedPlan): void {
  const errors = r.problems.filter((p) => p.severity === 'error');
  if (errors.length === 0) return;
  const first = errors[0];
  fail(ErrorCodes.PLAN, `[plan] ${errors.length} error(s): ${errors.slice(0, 5).map((p) => p.message.replace(/^\[plan\] /, '')).join('; ')}${errors.length > 5 ? '; ...' : ''}`, {
    tensor: first.tensor, value: errors.map((p) => p.tensor ?? `rule ${p.rule}`),
  });
}
