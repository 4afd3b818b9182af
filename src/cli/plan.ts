// From command-line options to a plan: a preset, a single format, a plan file, or a plan file
// whose rules go before a preset's / format's.
import { ErrorCodes, fail } from '../errors.js';
import { parseJson } from '../io/json.js';
import { formats, getFormat, ggufFormatByType } from '../formats/registry.js';
import { ggmlType } from '../io/ggml-types.js';
import { resolveOptions, type CalibrationOption, type FormatOptions } from '../options.js';
import { getPreset, LLAMA_FTYPE, type Preset } from '../plan/presets.js';
import { planFromJSON } from '../plan/json.js';
import type { Plan, PlanRule } from '../plan/types.js';

export interface PlanChoice {
  plan: Plan;
  /** What the plan came from, for the report. */
  label: string;
  preset?: Preset;
  /** Container the preset / format is meant for, when it says. */
  container?: 'gguf' | 'safetensors';
  /** GGUF general.file_type. */
  fileType?: number;
}

/**
 * The llama_ftype llama.cpp's loader guesses for a file whose tensors are mostly of one type
 * (llama_model_loader): K types map to their _M mixture.
 */
const FTYPE_OF_FORMAT: Record<string, number> = {
  f16: LLAMA_FTYPE.MOSTLY_F16, bf16: LLAMA_FTYPE.MOSTLY_BF16, q4_0: LLAMA_FTYPE.MOSTLY_Q4_0, q4_1: LLAMA_FTYPE.MOSTLY_Q4_1,
  q5_0: LLAMA_FTYPE.MOSTLY_Q5_0, q5_1: LLAMA_FTYPE.MOSTLY_Q5_1, q8_0: LLAMA_FTYPE.MOSTLY_Q8_0, q2_k: LLAMA_FTYPE.MOSTLY_Q2_K,
  q3_k: LLAMA_FTYPE.MOSTLY_Q3_K_M, q4_k: LLAMA_FTYPE.MOSTLY_Q4_K_M, q5_k: LLAMA_FTYPE.MOSTLY_Q5_K_M, q6_k: LLAMA_FTYPE.MOSTLY_Q6_K,
  iq4_nl: LLAMA_FTYPE.MOSTLY_IQ4_NL, iq4_xs: LLAMA_FTYPE.MOSTLY_IQ4_XS, tq1_0: LLAMA_FTYPE.MOSTLY_TQ1_0, tq2_0: LLAMA_FTYPE.MOSTLY_TQ2_0,
  iq2_xxs: LLAMA_FTYPE.MOSTLY_IQ2_XXS, iq2_xs: LLAMA_FTYPE.MOSTLY_IQ2_XS, iq2_s: LLAMA_FTYPE.MOSTLY_IQ2_S, iq3_xxs: LLAMA_FTYPE.MOSTLY_IQ3_XXS,
  iq3_s: LLAMA_FTYPE.MOSTLY_IQ3_S, iq1_s: LLAMA_FTYPE.MOSTLY_IQ1_S, iq1_m: LLAMA_FTYPE.MOSTLY_IQ1_M,
  nvfp4_gguf: LLAMA_FTYPE.MOSTLY_NVFP4, q1_0: LLAMA_FTYPE.MOSTLY_Q1_0, q2_0: LLAMA_FTYPE.MOSTLY_Q2_0,
};

export function fileTypeOfFormat(format: string): number | undefined {
  return FTYPE_OF_FORMAT[format.toLowerCase()];
}

/** `--calibration`: a name ("mse"), MaxText's "fixed,<scale>,<max>", "clip,0.9", or a JSON object. */
function parseCalibration(s: string): CalibrationOption {
  if (!s.trim().startsWith('{')) return s;
  try {
    return parseJson(s) as CalibrationOption;
  } catch (e) {
    return fail(ErrorCodes.BAD_CALIBRATION, `[cli] --calibration is not valid JSON (${(e as Error).message})`, { option: 'calibration', value: s });
  }
}

export interface PlanArgs {
  preset?: string;
  format?: string;
  groupSize?: number;
  bits?: number;
  calibration?: string;
  /** --scale-dtype (mlx). */
  scaleDtype?: string;
  /** --double-quant (nf4, fp4, bnb_nf4, bnb_fp4). */
  doubleQuant?: boolean;
  /** Text of a --rules file and its name. */
  rules?: { text: string; file: string };
  /** llama-quantize's overrides: --tensor-type regex=type (repeatable), --output-tensor-type, --token-embedding-type. */
  tensorTypes?: string[];
  outputTensorType?: string;
  tokenEmbeddingType?: string;
  /** --leave-output-tensor: the output head (by name, not a tied embedding) stays as stored. */
  leaveOutputTensor?: boolean;
  /** --pure: the preset's own rules are dropped. */
  pure?: boolean;
}

/**
 * A type named as llama-quantize takes it ("q4_K", "Q8_0", "mxfp4"): the GGUF format writing that
 * ggml type, else the registry format of that name.
 */
function ggmlFormat(name: string, option: string): string {
  const n = name.trim().toLowerCase();
  const g = ggmlType(n);
  const spec = g && ggufFormatByType(g.id);
  if (spec) return spec.name;
  if (formats.has(n)) return n;
  return fail(ErrorCodes.UNKNOWN_FORMAT, `[cli] --${option}: unknown type "${name}"; valid: ${[...formats.values()].filter((f) => f.ggml).map((f) => f.ggml!.name ?? f.name).join(', ')}`, {
    option, value: name, expected: [...formats.keys()],
  });
}

/**
 * llama-quantize's overrides as plan rules, in its order of precedence: the output head left as
 * stored, the token embedding's type, the output head's, then the --tensor-type patterns (first
 * match wins); `tied` is the rule giving a tied token embedding the output type, which llama.cpp
 * decides after the patterns (and not at all with --pure).
 */
function overrideRules(a: PlanArgs): { first: PlanRule[]; tied: PlanRule[] } {
  const first: PlanRule[] = [];
  const head = '(?:^|[./])(?:output|lm_head|embed_out)\\.weight$';
  if (a.leaveOutputTensor) first.push({ role: 'output', match: head, scheme: 'keep', optional: true, note: '--leave-output-tensor' });
  if (a.tokenEmbeddingType !== undefined) {
    first.push({ role: 'embedding', kind: 'token', scheme: { format: ggmlFormat(a.tokenEmbeddingType, 'token-embedding-type') }, optional: true, note: '--token-embedding-type' });
  }
  const out = a.outputTensorType !== undefined ? ggmlFormat(a.outputTensorType, 'output-tensor-type') : undefined;
  if (out) first.push({ role: 'output', match: head, scheme: { format: out }, optional: true, note: '--output-tensor-type' });
  for (const tt of a.tensorTypes ?? []) {
    const eq = tt.lastIndexOf('=');
    if (eq <= 0 || eq === tt.length - 1) {
      fail(ErrorCodes.BAD_OPTION, `[cli] --tensor-type "${tt}": expected <regex>=<type>, e.g. "attn_v=q8_0"`, { option: 'tensor-type', value: tt, expected: '<regex>=<type>' });
    }
    // llama-quantize lowercases the pattern (tensor names are lower case).
    first.push({ match: tt.slice(0, eq).toLowerCase(), scheme: { format: ggmlFormat(tt.slice(eq + 1), 'tensor-type') }, override: true, note: `--tensor-type ${tt}` });
  }
  const tied: PlanRule[] = out && !a.pure ? [{ role: 'output', scheme: { format: out }, optional: true, note: '--output-tensor-type (tied token embedding)' }] : [];
  return { first, tied };
}

/** The plan of `c` with the overrides of `a` around its rules (and without the preset's with --pure). */
function withOverrides(c: PlanChoice, a: PlanArgs): PlanChoice {
  const o = overrideRules(a);
  if (!o.first.length && !o.tied.length && !a.pure) return c;
  // A preset's rules come after a plan file's (chooseBase).
  const own = a.pure ? c.plan.rules.slice(0, c.plan.rules.length - (c.preset?.plan.rules.length ?? 0)) : c.plan.rules;
  const flags = [a.pure && '--pure', ...o.first.map((r) => r.note!.split(' ')[0])].filter(Boolean);
  return { ...c, plan: { ...c.plan, rules: [...o.first, ...o.tied, ...own] }, label: `${c.label} + ${[...new Set(flags)].join(' ')}` };
}

export function choosePlan(a: PlanArgs): PlanChoice {
  return withOverrides(chooseBase(a), a);
}

function chooseBase(a: PlanArgs): PlanChoice {
  if (a.preset !== undefined && a.format !== undefined) {
    fail(ErrorCodes.BAD_OPTION, '[cli] quantize: give either --preset or --format, not both', { option: 'preset', value: [a.preset, a.format] });
  }
  if (a.format === undefined && (a.groupSize !== undefined || a.bits !== undefined || a.calibration !== undefined || a.scaleDtype !== undefined || a.doubleQuant !== undefined)) {
    fail(ErrorCodes.BAD_OPTION, '[cli] quantize: --group-size, --bits, --calibration, --scale-dtype and --double-quant go with --format', { option: 'format' });
  }
  let base: PlanChoice | undefined;
  if (a.preset !== undefined) {
    const p = getPreset(a.preset);
    base = { plan: p.plan, label: `preset ${p.name}`, preset: p, container: p.container, fileType: p.fileType };
  } else if (a.format !== undefined) {
    const spec = getFormat(a.format);
    const scheme: FormatOptions = { format: spec.name };
    if (a.groupSize !== undefined) scheme.groupSize = a.groupSize;
    if (a.bits !== undefined) scheme.bits = a.bits;
    if (a.calibration !== undefined) scheme.calibration = parseCalibration(a.calibration);
    if (a.scaleDtype !== undefined) scheme.scaleDtype = a.scaleDtype as FormatOptions['scaleDtype'];
    if (a.doubleQuant !== undefined) scheme.doubleQuant = a.doubleQuant;
    // Options wrong for the format are wrong for every tensor: one message, before any file is read.
    resolveOptions(spec, scheme);
    base = {
      plan: { name: spec.name, default: scheme, rules: [], skip: [] },
      label: `format ${spec.name}`,
      container: spec.ggml ? undefined : 'safetensors',
      fileType: fileTypeOfFormat(spec.name),
    };
  }
  if (!a.rules) {
    if (!base) {
      fail(ErrorCodes.BAD_OPTION, '[cli] quantize: say how to quantize with --preset <name>, --format <format> or --rules <plan.json> (see `webquant presets`)', {
        option: 'preset', expected: ['--preset', '--format', '--rules'],
      });
    }
    return base;
  }
  let raw: unknown;
  try {
    raw = parseJson(a.rules.text);
  } catch (e) {
    fail(ErrorCodes.PLAN, `[plan] ${a.rules.file} is not valid JSON (${(e as Error).message})`, { file: a.rules.file, option: 'rules' });
  }
  let file: Plan;
  try {
    file = planFromJSON(raw);
  } catch (e) {
    if (e instanceof Error) e.message = `${e.message} (in ${a.rules.file})`;
    throw e;
  }
  if (!base) return { plan: file, label: `rules ${a.rules.file}`, fileType: file.fileType };
  const has = (k: string) => typeof raw === 'object' && raw !== null && k in raw;
  const maxText = has('__default__');
  const plan: Plan = {
    ...base.plan,
    name: `${base.plan.name ?? 'plan'}+${file.name ?? 'rules'}`,
    rules: [...file.rules, ...base.plan.rules],
    skip: [...base.plan.skip, ...file.skip],
    default: has('default') || maxText ? file.default : base.plan.default,
    protect: has('protect') ? file.protect : base.plan.protect,
  };
  return { ...base, plan, label: `${base.label} + rules ${a.rules.file}`, fileType: file.fileType ?? base.fileType };
}
