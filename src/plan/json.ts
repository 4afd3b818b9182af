// Plans as data: checking and normalizing plans given in code, webquant's JSON form, and
// MaxText's mixed-precision file.
import { ErrorCodes, fail } from '../errors.js';
import { parseJson } from '../io/json.js';
import { compilePattern, type NamePattern } from './regex.js';
import { ROLES, type Role } from './roles.js';
import { LAYER_SELECTORS, PROTECT_CLASSES, type LayerSelector, type Plan, type PlanRule, type ProtectClass, type Scheme, type SchemeOrKeep } from './types.js';

function planError(message: string, details: { option?: string; value?: unknown; expected?: unknown; index?: number } = {}): never {
  fail(ErrorCodes.PLAN, `[plan] ${message}`, details);
}

/**
 * "/src/flags" or a bare source -> a pattern matched in linear time (plan/regex.ts): plans come
 * from files and requests, and a backtracking RegExp can hang on one tensor name.
 */
export function parseRegex(s: string, what: string): NamePattern {
  const m = /^\/(.*)\/([dgimsuy]*)$/s.exec(s);
  return m ? compilePattern(m[1], m[2], what) : compilePattern(s, '', what);
}

function regexToString(r: RegExp): string {
  return `/${r.source}/${r.flags.replace(/[gy]/g, '')}`;
}

const RULE_KEYS = ['match', 'fullmatch', 'role', 'kind', 'layers', 'layerCount', 'override', 'nExperts', 'minGqa', 'minExperts', 'importance', 'modelType', 'scheme', 'fallback', 'optional', 'note'];
const SCHEME_KEYS = ['format', 'groupSize', 'bits', 'calibration', 'granularity', 'doubleQuant', 'scaleDtype'] as const;

function normScheme(s: unknown, where: string): SchemeOrKeep {
  if (s === 'keep' || s === null) return 'keep';
  if (typeof s === 'string') return { format: s };
  if (typeof s !== 'object' || s === undefined || Array.isArray(s)) {
    return planError(`${where}: a scheme must be "keep", a format name or {format, groupSize?, bits?, calibration?, granularity?, doubleQuant?, scaleDtype?}`, { option: where, value: s });
  }
  const o = s as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!(SCHEME_KEYS as readonly string[]).includes(k)) planError(`${where}: unknown scheme field "${k}"`, { option: `${where}.${k}`, value: o[k], expected: SCHEME_KEYS });
  }
  if (typeof o.format !== 'string' || o.format === '') planError(`${where}: scheme needs a format name`, { option: `${where}.format`, value: o.format });
  const out: Scheme = { format: (o.format as string).toLowerCase() };
  for (const k of ['groupSize', 'bits'] as const) {
    if (o[k] !== undefined) {
      if (typeof o[k] !== 'number') planError(`${where}.${k} must be a number`, { option: `${where}.${k}`, value: o[k] });
      out[k] = o[k] as number;
    }
  }
  if (o.calibration !== undefined) out.calibration = structuredCloneJson(o.calibration) as Scheme['calibration'];
  if (o.granularity !== undefined) out.granularity = o.granularity as Scheme['granularity'];
  if (o.doubleQuant !== undefined) out.doubleQuant = !!o.doubleQuant;
  if (o.scaleDtype !== undefined) out.scaleDtype = o.scaleDtype as Scheme['scaleDtype'];
  return out;
}

function structuredCloneJson<T>(v: T): T {
  return v === undefined ? v : JSON.parse(JSON.stringify(v));
}

export function asList<T>(v: T | T[] | undefined): T[] | undefined {
  return v === undefined ? undefined : Array.isArray(v) ? v : [v];
}

const PLAN_KEYS = ['name', 'description', 'default', 'rules', 'skip', 'protect', 'fileType', 'requireImportance'];

/** Checks and copies a plan given in code (RegExp allowed in `match` and `skip`) or parsed from JSON. */
export function normalizePlan(input: unknown): Plan {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) planError('a plan must be an object', { value: input });
  const p = input as Record<string, unknown>;
  for (const k of Object.keys(p)) {
    if (!PLAN_KEYS.includes(k)) planError(`unknown plan field "${k}"`, { option: k, expected: PLAN_KEYS });
  }
  const plan: Plan = {
    default: p.default === undefined ? 'keep' : normScheme(p.default, 'default'),
    rules: [],
    skip: [],
  };
  if (p.name !== undefined) plan.name = String(p.name);
  if (p.description !== undefined) plan.description = String(p.description);
  if (p.fileType !== undefined) {
    if (!Number.isInteger(p.fileType)) planError('fileType must be an integer llama_ftype', { option: 'fileType', value: p.fileType });
    plan.fileType = p.fileType as number;
  }
  if (p.requireImportance !== undefined) {
    const l = p.requireImportance;
    if (!Array.isArray(l) || !l.every((x) => typeof x === 'string')) planError('requireImportance must be a list of format names', { option: 'requireImportance', value: l });
    plan.requireImportance = (l as string[]).map((x) => x.toLowerCase());
  }
  if (p.rules !== undefined && !Array.isArray(p.rules)) planError('rules must be an array', { option: 'rules', value: p.rules });
  ((p.rules as unknown[] | undefined) ?? []).forEach((r, i) => {
    const where = `rules[${i}]`;
    if (typeof r !== 'object' || r === null) planError(`${where} must be an object`, { option: where, value: r, index: i });
    const o = r as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      if (!RULE_KEYS.includes(k)) {
        planError(`${where}: unknown field "${k}"`, { option: `${where}.${k}`, index: i, expected: RULE_KEYS });
      }
    }
    const rule: PlanRule = { scheme: normScheme(o.scheme, `${where}.scheme`) };
    if (o.match !== undefined) {
      if (o.match instanceof RegExp) rule.match = regexToString(o.match);
      else if (typeof o.match === 'string') { parseRegex(o.match, `${where}.match`); rule.match = o.match; }
      else planError(`${where}.match must be a regular expression string`, { option: `${where}.match`, value: o.match, index: i });
    }
    if (o.fullmatch) rule.fullmatch = true;
    if (o.role !== undefined) {
      const roles = asList(o.role) as unknown[];
      for (const x of roles) {
        if (!ROLES.includes(x as Role)) planError(`${where}.role: unknown role ${JSON.stringify(x)}`, { option: `${where}.role`, value: x, expected: ROLES, index: i });
      }
      rule.role = Array.isArray(o.role) ? [...(o.role as Role[])] : (o.role as Role);
    }
    if (o.kind !== undefined) {
      const kinds = asList(o.kind) as unknown[];
      if (kinds.some((x) => typeof x !== 'string')) planError(`${where}.kind must be a string or strings`, { option: `${where}.kind`, value: o.kind, index: i });
      rule.kind = Array.isArray(o.kind) ? [...(o.kind as string[])] : (o.kind as string);
    }
    if (o.layers !== undefined) {
      const l = o.layers;
      const ok = (LAYER_SELECTORS as readonly unknown[]).includes(l) || (Array.isArray(l) && l.every((x) => Number.isInteger(x) && x >= 0));
      if (!ok) planError(`${where}.layers must be ${LAYER_SELECTORS.map((x) => `"${x}"`).join(', ')} or a list of layer indices`, { option: `${where}.layers`, value: l, index: i, expected: LAYER_SELECTORS });
      rule.layers = Array.isArray(l) ? [...(l as number[])] : (l as LayerSelector);
    }
    if (o.layerCount !== undefined) {
      if (o.layerCount !== 'llama' && o.layerCount !== 'llama-raw') planError(`${where}.layerCount must be "llama" or "llama-raw"`, { option: `${where}.layerCount`, value: o.layerCount, index: i, expected: ['llama', 'llama-raw'] });
      if (o.layers === undefined) planError(`${where}.layerCount needs "layers"`, { option: `${where}.layerCount`, value: o.layerCount, index: i });
      rule.layerCount = o.layerCount as 'llama' | 'llama-raw';
    }
    if (o.override !== undefined) {
      if (typeof o.override !== 'boolean') planError(`${where}.override must be true or false`, { option: `${where}.override`, value: o.override, index: i });
      if (o.override) rule.override = true;
    }
    for (const k of ['nExperts', 'minGqa', 'minExperts'] as const) {
      if (o[k] === undefined) continue;
      if (!(typeof o[k] === 'number' && (o[k] as number) > 0)) planError(`${where}.${k} must be a positive number`, { option: `${where}.${k}`, value: o[k], index: i });
      rule[k] = o[k] as number;
    }
    if (o.importance !== undefined) {
      if (typeof o.importance !== 'boolean') planError(`${where}.importance must be true (only with an importance matrix) or false (only without)`, { option: `${where}.importance`, value: o.importance, index: i });
      rule.importance = o.importance as boolean;
    }
    if (o.modelType !== undefined) {
      if (typeof o.modelType !== 'string') planError(`${where}.modelType must be a string (llama.cpp's size class, "70B")`, { option: `${where}.modelType`, value: o.modelType, index: i });
      rule.modelType = o.modelType as string;
    }
    if (o.fallback !== undefined) {
      if (typeof o.fallback !== 'string' || !o.fallback) planError(`${where}.fallback must be a format name (written when the scheme's block does not divide the rows)`, { option: `${where}.fallback`, value: o.fallback, index: i });
      rule.fallback = o.fallback as string;
    }
    if (o.optional) rule.optional = true;
    if (o.note !== undefined) rule.note = String(o.note);
    if (rule.match === undefined && rule.role === undefined && rule.kind === undefined && rule.layers === undefined && rule.nExperts === undefined && rule.minGqa === undefined && rule.minExperts === undefined && rule.importance === undefined && rule.modelType === undefined) {
      planError(`${where} has no condition (match, role, kind, layers, nExperts, minGqa, minExperts, importance or modelType); use "default" for a catch-all`, { option: where, index: i });
    }
    plan.rules.push(rule);
  });
  if (p.skip !== undefined && !Array.isArray(p.skip)) planError('skip must be an array of names or "/regex/"', { option: 'skip', value: p.skip });
  ((p.skip as unknown[] | undefined) ?? []).forEach((s, i) => {
    if (s instanceof RegExp) plan.skip.push(regexToString(s));
    else if (typeof s === 'string') { if (s.startsWith('/')) parseRegex(s, `skip[${i}]`); plan.skip.push(s); }
    else planError(`skip[${i}] must be a tensor name or "/regex/"`, { option: `skip[${i}]`, value: s, index: i });
  });
  if (p.protect !== undefined) {
    if (!Array.isArray(p.protect) || p.protect.some((x) => !PROTECT_CLASSES.includes(x as ProtectClass))) {
      planError(`protect must be a list of ${PROTECT_CLASSES.join(', ')}`, { option: 'protect', value: p.protect, expected: PROTECT_CLASSES });
    }
    plan.protect = [...(p.protect as ProtectClass[])];
  }
  return plan;
}

/** The plan as plain JSON data (webquant's own form); planFromJSON(planToJSON(p)) equals normalizePlan(p). */
export function planToJSON(plan: Plan): Record<string, unknown> {
  const p = normalizePlan(plan);
  const out: Record<string, unknown> = {};
  if (p.name !== undefined) out.name = p.name;
  if (p.description !== undefined) out.description = p.description;
  if (p.fileType !== undefined) out.fileType = p.fileType;
  if (p.requireImportance !== undefined) out.requireImportance = p.requireImportance;
  out.default = p.default;
  out.rules = p.rules;
  out.skip = p.skip;
  if (p.protect !== undefined) out.protect = p.protect;
  return structuredCloneJson(out);
}

export function planToJSONString(plan: Plan, indent = 2): string {
  return JSON.stringify(planToJSON(plan), null, indent);
}

/**
 * Reads a plan from JSON (a string or parsed data) in either form:
 * - webquant's: `{"default": scheme|"keep", "rules": [{"match", "role", "kind", "layers", "scheme"}], "skip": [...], "protect": [...]}`
 * - MaxText's mixed-precision file: `{"__default__": {"w_bits": 8}, "<regex>": {"w_bits": 4, "w_scale": 0.9, "tile_size": 128}}`
 *   (see fromMaxText for the mapping).
 */
export function planFromJSON(json: string | unknown): Plan {
  let data: unknown = json;
  if (typeof json === 'string') {
    try {
      data = parseJson(json);
    } catch (e) {
      planError(`plan is not valid JSON (${(e as Error).message})`, { value: json.slice(0, 80) });
    }
  }
  if (isMaxTextConfig(data)) return fromMaxText(data as Record<string, MaxTextLayerConfig>);
  return normalizePlan(data);
}

export interface MaxTextLayerConfig {
  w_bits?: number | null;
  a_bits?: number | null;
  w_scale?: number;
  a_scale?: number;
  tile_size?: number;
}

const MAXTEXT_KEYS = ['w_bits', 'a_bits', 'w_scale', 'a_scale', 'tile_size'];

function isMaxTextConfig(d: unknown): boolean {
  if (typeof d !== 'object' || d === null || Array.isArray(d)) return false;
  const o = d as Record<string, unknown>;
  if ('rules' in o || 'default' in o) return false;
  const vals = Object.values(o);
  return '__default__' in o || (vals.length > 0 && vals.every((v) => typeof v === 'object' && v !== null && Object.keys(v).every((k) => MAXTEXT_KEYS.includes(k))));
}

/**
 * MaxText `quantization=intmp` config -> Plan. MaxText compiles each key with re.fullmatch against a
 * module path ("decoder/layers/mlp/wi_0"), lets the *last* matching key win, and fills missing fields
 * from `__default__`. Mapping (weights only; a_bits / a_scale describe activations and are ignored):
 * - w_bits null/absent -> "keep"; 8 -> int8; 4 -> int4; any other n -> intsym with bits n
 * - tile_size -1/absent -> granularity "channel" (one scale per output row); N -> groupSize N
 * - w_scale < 1 -> calibration {method: "clip", ratio: w_scale} (AQT's AbsMaxCalibration(scale));
 *   1 -> the format's default calibration
 * Keys become rules in reverse order (first match wins here) with `fullmatch`, which also tries the
 * module path of the tensor name (without ".weight", "/" or "." as separator).
 */
export function fromMaxText(cfg: Record<string, MaxTextLayerConfig>): Plan {
  const base: MaxTextLayerConfig = { w_bits: null, w_scale: 1, tile_size: -1, ...(cfg.__default__ ?? {}) };
  const toScheme = (c: MaxTextLayerConfig, key: string): SchemeOrKeep => {
    for (const k of Object.keys(c)) {
      if (!MAXTEXT_KEYS.includes(k)) planError(`MaxText config "${key}": unknown field "${k}"`, { option: `${key}.${k}`, expected: MAXTEXT_KEYS });
    }
    const m = { ...base, ...c };
    if (m.w_bits === null || m.w_bits === undefined) return 'keep';
    if (!Number.isInteger(m.w_bits) || m.w_bits < 1) planError(`MaxText config "${key}": w_bits must be a positive integer`, { option: `${key}.w_bits`, value: m.w_bits });
    const s: Scheme = m.w_bits === 8 ? { format: 'int8' } : m.w_bits === 4 ? { format: 'int4' } : { format: 'intsym', bits: m.w_bits };
    const tile = m.tile_size ?? -1;
    if (tile === -1) s.granularity = 'channel';
    else {
      if (!Number.isInteger(tile) || tile <= 0) planError(`MaxText config "${key}": tile_size must be -1 or a positive integer`, { option: `${key}.tile_size`, value: tile });
      s.granularity = 'group';
      s.groupSize = tile;
    }
    const ws = m.w_scale ?? 1;
    if (!(typeof ws === 'number' && ws > 0 && ws <= 1)) planError(`MaxText config "${key}": w_scale must be in (0, 1]`, { option: `${key}.w_scale`, value: ws });
    if (ws < 1) s.calibration = { method: 'clip', ratio: ws };
    return s;
  };
  const rules: PlanRule[] = [];
  for (const key of Object.keys(cfg).reverse()) {
    if (key === '__default__') continue;
    parseRegex(key, `MaxText key`);
    rules.push({ match: key, fullmatch: true, scheme: toScheme(cfg[key], key), note: `MaxText "${key}"` });
  }
  return { name: 'maxtext', default: toScheme({}, '__default__'), rules, skip: [] };
}
