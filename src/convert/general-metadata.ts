// The `general.*` keys llama.cpp's converter (convert_hf_to_gguf.py with gguf-py's Metadata) writes
// about a model, so that a GGUF from webquant names and sizes a model as one from llama.cpp does:
// general.type, the sampling defaults of generation_config.json, the name and its parts (basename,
// size label, fine-tune, version, organization) read from the model card, config.json's
// `_name_or_path` and the folder name, the size label counted from the tensors written when the
// name gives none, and the model card's license, base models, datasets, tags and languages.
// Runtimes show these (llama.cpp's model description, LM Studio, Ollama) and read the sampling keys
// as their defaults.
import { ErrorCodes, fail } from '../errors.js';
import { isJsonObject } from '../io/json.js';
import type { GgufWriteKV } from '../io/gguf-writer.js';
import { cardFields, ENTRY_FIELDS, type CardEntry, type CardFields, type ModelCard } from './model-card.js';
import { idToTitle, modelIdComponents, roundedCount } from './model-names.js';

export interface GeneralSources {
  /** The folder (or Hub repository) the checkpoint came from. */
  dirName: string;
  /** config.json, parsed. */
  config?: Record<string, unknown>;
  /** generation_config.json, parsed, when one came with the checkpoint. */
  generation?: Record<string, unknown>;
  /** The tensors written: GGUF names and shapes (outermost dimension first). */
  tensors: readonly { name: string; shape: readonly number[] }[];
  /** The model card: README.md's front matter, parsed (src/convert/model-card.ts). */
  card?: ModelCard;
  /** Receives a line for each card value left out. */
  warnings?: string[];
  /** The converter's --metadata file: GGUF keys that replace what was derived (see validateOverride). */
  override?: MetadataOverride;
}

/** A metadata override file, parsed: convert_hf_to_gguf.py's --metadata. */
export interface MetadataOverride {
  /** The file's name, for errors. */
  file: string;
  values: Record<string, unknown>;
}

// The keys gguf-py's Metadata.load takes from an override file: strings, the sampling defaults,
// two lists of strings and two lists of entries. Others (general.license among them) it ignores.
const OVERRIDE_STRINGS = [
  'general.name', 'general.author', 'general.version', 'general.organization', 'general.finetune', 'general.basename',
  'general.description', 'general.quantized_by', 'general.size_label', 'general.license.name', 'general.license.link',
  'general.url', 'general.doi', 'general.uuid', 'general.repo_url',
  'general.source.url', 'general.source.doi', 'general.source.uuid', 'general.source.repo_url',
] as const;
const OVERRIDE_LISTS = { 'general.tags': 'string', 'general.languages': 'string', 'general.base_models': 'entry', 'general.datasets': 'entry' } as const;

type Validated = Map<string, string | number | string[] | CardEntry[] | null>;

/**
 * Checks an override file's values as gguf-py would write them (a wrong type fails there, inside
 * the writer): strings, integers or floats for the sampling keys, lists of strings, lists of
 * objects with string fields. null removes the key (general.name and general.size_label then fall
 * back to the folder name and the tensors' count, as the converter does). Keys the converter does
 * not read get a line in `warnings`.
 */
function validateOverride(o: MetadataOverride, warnings: string[]): Validated {
  const out: Validated = new Map();
  const bad = (key: string, expected: string): never => fail(ErrorCodes.BAD_INPUT, `[convert] ${o.file}: "${key}" must be ${expected} but is ${JSON.stringify(o.values[key])}`, { file: o.file, option: key, value: o.values[key], expected });
  if (!isJsonObject(o.values)) {
    fail(ErrorCodes.BAD_INPUT, `[convert] ${o.file}: a metadata override file is a JSON object of GGUF keys`, { file: o.file, expected: '{"general.name": "...", ...}' });
  }
  const sampling = new Map(SAMPLING.map(([k, , t]) => [`general.sampling.${k}`, t]));
  for (const [key, v] of Object.entries(o.values)) {
    const isString = (OVERRIDE_STRINGS as readonly string[]).includes(key);
    if (v === null && (isString || sampling.has(key) || key in OVERRIDE_LISTS)) {
      out.set(key, null);
    } else if (isString) {
      if (typeof v !== 'string') bad(key, 'a string');
      out.set(key, v as string);
    } else if (sampling.has(key)) {
      const t = sampling.get(key)!;
      if (!samplingValue(t, v)) bad(key, t === 'string' ? 'a string' : t === 'i32' ? 'a 32-bit integer' : 'a finite number');
      out.set(key, v as string | number);
    } else if (key in OVERRIDE_LISTS) {
      const kind = OVERRIDE_LISTS[key as keyof typeof OVERRIDE_LISTS];
      if (!Array.isArray(v)) bad(key, kind === 'string' ? 'a list of strings' : 'a list of objects');
      const list = v as unknown[];
      if (kind === 'string') {
        if (!list.every((x) => typeof x === 'string')) bad(key, 'a list of strings');
      } else if (!list.every((e) => isJsonObject(e) && ENTRY_FIELDS.every((f) => (e as CardEntry)[f] === undefined || typeof (e as CardEntry)[f] === 'string'))) {
        bad(key, `a list of objects whose fields (${ENTRY_FIELDS.join(', ')}) are strings`);
      }
      out.set(key, list as string[] | CardEntry[]);
    } else {
      warnings.push(`${o.file}: "${key}" is not a key llama.cpp's converter reads from a metadata file; left out (--override-kv sets any key)`);
    }
  }
  return out;
}

/**
 * The parameter count of the tensors written and their size label (gguf-py's size_label over
 * GGUFWriter's counts): "<experts>x<one expert's share plus the rest>" for MoE models, else the total.
 */
function parameterCount(tensors: GeneralSources['tensors']): { total: number; label?: string } {
  let total = 0, shared = 0, expert = 0, expertSum = 0, expertTensors = 0;
  for (const t of tensors) {
    const size = t.shape.reduce((a, b) => a * b, 1);
    if (t.name.includes('_exps.') && t.shape.length >= 3) {
      const count = t.shape[t.shape.length - (t.name.includes('.bias') ? 2 : 3)];
      expert += Math.floor(size / count);
      expertSum += count;
      expertTensors++;
    } else shared += size;
    total += size;
  }
  if (total <= 0) return { total };
  const experts = expertTensors > 0 ? Math.floor(expertSum / expertTensors) : 0;
  return { total, label: experts > 0 ? `${experts}x${roundedCount(shared + expert)}` : roundedCount(total) };
}

/** The size label of the tensors written (see parameterCount). */
export const sizeLabel = (tensors: GeneralSources['tensors']): string | undefined => parameterCount(tensors).label;

/** generation_config.json keys llama.cpp reads as sampling defaults: GGUF key, file keys, integer or float. */
type SamplingType = 'i32' | 'f32' | 'string';
const SAMPLING: readonly [string, readonly string[], SamplingType][] = [
  ['sequence', ['sequence'], 'string'],
  ['top_k', ['top_k'], 'i32'],
  ['top_p', ['top_p'], 'f32'],
  ['min_p', ['min_p'], 'f32'],
  ['xtc_probability', ['xtc_probability'], 'f32'],
  ['xtc_threshold', ['xtc_threshold'], 'f32'],
  ['temp', ['temperature'], 'f32'],
  ['penalty_last_n', ['penalty_last_n'], 'i32'],
  ['penalty_repeat', ['penalty_repeat', 'repetition_penalty'], 'f32'],
  ['mirostat', ['mirostat'], 'i32'],
  ['mirostat_tau', ['mirostat_tau'], 'f32'],
  ['mirostat_eta', ['mirostat_eta'], 'f32'],
];

/** Whether v has the GGUF type of a sampling key (gguf-py's writer fails on any other). */
const samplingValue = (type: SamplingType, v: unknown): v is string | number =>
  type === 'string' ? typeof v === 'string' : type === 'i32' ? Number.isInteger(v) && Math.abs(v as number) < 2 ** 31 : typeof v === 'number' && Number.isFinite(v);

/** A card value the converter writes as a string: strings only (gguf-py would fail on others). */
function cardString(v: unknown, what: string, warnings: string[]): string | undefined {
  if (v === undefined || v === null || typeof v === 'string') return v ?? undefined;
  warnings.push(`model card: ${what} ${JSON.stringify(v)} is not a string: left out`);
  return undefined;
}

/** A card list written as a GGUF array of strings: its strings (an empty list is not written). */
function cardStrings(v: unknown[] | undefined, what: string, warnings: string[]): string[] | undefined {
  if (v === undefined) return undefined;
  const kept = v.filter((x): x is string => typeof x === 'string');
  if (kept.length < v.length) warnings.push(`model card: ${what} ${JSON.stringify(v.filter((x) => typeof x !== 'string'))} ${v.length - kept.length === 1 ? 'is not a string' : 'are not strings'}: left out`);
  return kept.length ? kept : undefined;
}

/**
 * The `general.*` keys of a GGUF written from a Hugging Face checkpoint, in the converter's order
 * (gguf-py's set_gguf_meta_model): general.type, general.sampling.*, the name and its parts, the
 * card's license, source, base models, datasets, tags and languages. The card's own fields come
 * first, then config.json's `_name_or_path`, then the folder name. Values of the wrong type in
 * generation_config.json or the card are left out (with a warning in `warnings` for the card).
 */
export function generalMetadata(s: GeneralSources): GgufWriteKV[] {
  const warnings = s.warnings ?? [];
  const kv: GgufWriteKV[] = [{ key: 'general.type', type: 'string', value: 'model' }];
  const ov = s.override ? validateOverride(s.override, warnings) : new Map() as Validated;
  for (const [key, from, type] of SAMPLING) {
    const name = `general.sampling.${key}`;
    const v = ov.has(name) ? ov.get(name) : from.map((f) => s.generation?.[f]).find((x) => x !== undefined && x !== null);
    if (samplingValue(type, v)) kv.push({ key: name, type, value: v });
  }
  // The total weighs sizes found in names (a far one is a context length, not a size).
  const { total: totalParams, label: tensorsLabel } = parameterCount(s.tensors);
  const card = s.card ? cardFields(s.card, totalParams, warnings) : {};
  const str = (what: keyof CardFields) => cardString(card[what], what, warnings);
  const fields = {
    name: str('name'), author: str('author'), organization: str('organization'), basename: str('basename'), finetune: str('finetune'),
    version: str('version'), description: str('description'), sizeLabel: str('size_label'),
  };
  const fill = (id: string | undefined) => {
    const c = modelIdComponents(id, totalParams);
    fields.name ??= c.full !== undefined ? idToTitle(c.full) : undefined;
    fields.organization ??= c.org !== undefined ? idToTitle(c.org) : undefined;
    fields.basename ??= c.basename;
    fields.finetune ??= c.finetune;
    fields.version ??= c.version;
    fields.sizeLabel ??= c.sizeLabel;
  };
  // A Hub id ("meta-llama/Llama-3.1-8B"), not a path on someone's disk.
  const nameOrPath = s.config?._name_or_path;
  if (typeof nameOrPath === 'string' && (nameOrPath.match(/\//g) ?? []).length <= 1) fill(nameOrPath);
  fill(s.dirName);
  // The override file replaces what the card and the names gave, before the two fallbacks.
  const over = <T>(key: string, v: T | undefined): T | undefined => (ov.has(key) ? (ov.get(key) as T | null) ?? undefined : v);
  fields.name = over('general.name', fields.name);
  fields.sizeLabel = over('general.size_label', fields.sizeLabel);
  const put = (key: string, v: string | undefined) => {
    const w = key === 'general.name' || key === 'general.size_label' ? v : over(key, v);
    if (w !== undefined) kv.push({ key, type: 'string', value: w });
  };
  put('general.name', fields.name ?? s.dirName);
  put('general.author', fields.author);
  put('general.version', fields.version);
  put('general.organization', fields.organization);
  put('general.finetune', fields.finetune);
  put('general.basename', fields.basename);
  put('general.description', fields.description);
  put('general.quantized_by', undefined);
  put('general.size_label', fields.sizeLabel ?? tensorsLabel);
  // A list of licenses is written joined by commas.
  const license = Array.isArray(card.license) && card.license.every((l) => typeof l === 'string') ? card.license.join(',') : str('license');
  put('general.license', license);
  put('general.license.name', str('license_name'));
  put('general.license.link', str('license_link'));
  for (const key of ['general.url', 'general.doi', 'general.uuid', 'general.repo_url']) put(key, undefined);
  put('general.source.url', str('source_url'));
  put('general.source.doi', str('source_doi'));
  put('general.source.uuid', str('source_uuid'));
  put('general.source.repo_url', str('source_repo_url'));
  for (const [list, prefix] of [[over('general.base_models', card.base_models), 'base_model'], [over('general.datasets', card.datasets), 'dataset']] as const) {
    if (!list) continue;
    kv.push({ key: `general.${prefix}.count`, type: 'u32', value: list.length });
    list.forEach((e, i) => {
      for (const f of ENTRY_FIELDS) put(`general.${prefix}.${i}.${f}`, cardString(e[f], `${prefix} ${i} ${f}`, warnings));
    });
  }
  for (const [what, key] of [['tags', 'general.tags'], ['languages', 'general.languages']] as const) {
    const v = over(key, cardStrings(card[what], what, warnings));
    if (v) kv.push({ key, type: 'array', itemType: 'string', value: v });
  }
  return kv;
}
