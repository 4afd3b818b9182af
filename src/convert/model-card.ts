// The model card (README.md's YAML front matter) of a Hugging Face checkpoint, read as llama.cpp's
// converter reads it (gguf-py Metadata.load_model_card and apply_metadata_heuristic): license,
// tags, languages, base models and datasets, and the name fields a card may state. Runtimes and
// model hubs show these keys; a GGUF without them looks unlicensed and unattributed.
//
// gguf-py parses the front matter with PyYAML's safe_load, i.e. YAML 1.1 ("no" is false, "on" is
// true, "010" is octal); the `yaml` package's 1.1 schema reads it the same. Where the converter
// would stop with a Python exception (a value of the wrong type, YAML it cannot parse), webquant
// leaves the value out and says so in a warning: a card is not worth failing a conversion for.
import { parse } from 'yaml';
import { isJsonObject } from '../io/json.js';
import type { ByteSource } from '../io/source.js';
import { idToTitle, modelIdComponents } from './model-names.js';

export type ModelCard = Record<string, unknown>;

/** A README.md larger than this is not read (the front matter sits at its top). */
const MAX_CARD_BYTES = 16 << 20;

/**
 * The YAML text of a model card's front matter as gguf-py cuts it: the first line must be exactly
 * "---" (a byte-order mark or a blank line before it means no front matter), and it runs to the
 * next "---" line or the end. Lines split as Python's str.splitlines splits them.
 */
export function frontMatter(text: string): string | undefined {
  const lines = text.split(/\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/);
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  if (lines.length === 0 || lines[0] !== '---') return undefined;
  const end = lines.indexOf('---', 1);
  const yaml = lines.slice(1, end < 0 ? undefined : end).join('\n') + '\n';
  // gguf-py's two repairs: a list item "no" (Norwegian) kept a string, tabs as two spaces.
  return yaml.replaceAll('- no\n', '- "no"\n').replaceAll('\t', '  ');
}

/** The card's front matter as a mapping, or undefined (no front matter, not a mapping, not YAML: see warnings). */
export function parseModelCard(bytes: Uint8Array, file: string, warnings: string[] = []): ModelCard | undefined {
  let text: string;
  try {
    // A byte-order mark stays (Python's utf-8 codec keeps it, so such a card has no front matter).
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    warnings.push(`${file}: not UTF-8 text, so its model card (license, tags, base models) is not written`);
    return undefined;
  }
  const yaml = frontMatter(text);
  if (yaml === undefined) return undefined;
  let data: unknown;
  try {
    data = parse(yaml, { version: '1.1', uniqueKeys: false, maxAliasCount: 1000 });
  } catch (e) {
    warnings.push(`${file}: the front matter is not YAML (${(e as Error).message.split('\n')[0]}), so its model card (license, tags, base models) is not written`);
    return undefined;
  }
  return isJsonObject(data) && !(data instanceof Date) ? data : undefined;
}

/** README.md of a checkpoint's folder, parsed (undefined when absent or holding no card). */
export async function readModelCard(src: ByteSource | undefined, warnings: string[] = []): Promise<ModelCard | undefined> {
  if (!src) return undefined;
  const size = await src.size();
  if (size > MAX_CARD_BYTES) {
    warnings.push(`${src.name}: ${size} bytes is larger than a model card is read (${MAX_CARD_BYTES}), so its keys are not written`);
    return undefined;
  }
  return parseModelCard(await src.read(0, size), src.name, warnings);
}

/** A base model or dataset entry: the GGUF fields gguf-py writes for it, in its order. */
export const ENTRY_FIELDS = ['name', 'author', 'version', 'organization', 'description', 'url', 'doi', 'uuid', 'repo_url'] as const;
export type CardEntry = Partial<Record<(typeof ENTRY_FIELDS)[number], unknown>>;

/** What a card says of the model, before the name heuristics of config.json and the folder fill the gaps. */
export interface CardFields {
  name?: unknown; author?: unknown; version?: unknown; organization?: unknown; description?: unknown;
  finetune?: unknown; basename?: unknown; size_label?: unknown;
  source_url?: unknown; source_doi?: unknown; source_uuid?: unknown; source_repo_url?: unknown;
  license?: unknown; license_name?: unknown; license_link?: unknown;
  base_models?: CardEntry[]; datasets?: CardEntry[]; tags?: unknown[]; languages?: unknown[];
}

/** A Hub id ("org/name") or URL as a base model / dataset entry, as gguf-py describes it. */
function entryFromId(id: string, totalParams: number): CardEntry {
  const e: CardEntry = {};
  let hubId: string | undefined;
  if (/^(?:https?|ssh):\/\//.test(id)) {
    e.repo_url = id;
    // Only a plain https://huggingface.co/<org>/<name> URL is taken apart (gguf-py's pattern).
    if (id.includes('huggingface.co')) hubId = /^https?:\/\/huggingface.co\/([^/]+\/[^/]+)$/.exec(id)?.[1];
    if (hubId === undefined) return e;
  }
  const c = modelIdComponents(hubId ?? id, totalParams);
  if (c.full !== undefined) e.name = idToTitle(c.full);
  if (c.org !== undefined) e.organization = idToTitle(c.org);
  if (c.version !== undefined) e.version = c.version;
  if (hubId === undefined && c.org !== undefined && c.full !== undefined) e.repo_url = `https://huggingface.co/${c.org}/${c.full}`;
  return e;
}

/** The entries of base_model / datasets: one per string or mapping; anything else counts as an empty one. */
function entries(card: ModelCard, keys: readonly string[], totalParams: number, what: string, warnings: string[]): CardEntry[] | undefined {
  if (!keys.some((k) => k in card)) return undefined;
  // The first key present wins, even when its value is null (gguf-py's nested dict.get).
  const value = card[keys.find((k) => k in card)!];
  const list = typeof value === 'string' ? [value] : Array.isArray(value) ? value : [];
  return list.map((v) => {
    if (typeof v === 'string') return entryFromId(v, totalParams);
    if (isJsonObject(v)) return { ...v };
    warnings.push(`model card: ${what} entry ${JSON.stringify(v)} is neither a name nor a mapping: written as an empty entry`);
    return {};
  });
}

/** gguf-py's model card heuristics, in its order (a field keeps the first key that sets it). */
export function cardFields(card: ModelCard, totalParams: number, warnings: string[] = []): CardFields {
  const f: CardFields = {};
  const use = (field: keyof CardFields, key: string) => {
    if (key in card && (f[field] === undefined || f[field] === null)) (f as Record<string, unknown>)[field] = card[key];
  };
  const plain = ['name', 'author', 'version', 'organization', 'description', 'finetune', 'basename', 'size_label'] as const;
  const source = [['source_url', 'url'], ['source_doi', 'doi'], ['source_uuid', 'uuid'], ['source_repo_url', 'repo_url']] as const;
  for (const k of plain) use(k, k);
  for (const [field, key] of source) use(field, key);
  for (const k of plain) use(k, `model_${k}`);
  for (const [field, key] of source) use(field, `model_${key}`);
  use('name', 'model_name');
  use('author', 'model_creator');
  use('basename', 'model_type');
  f.base_models = entries(card, ['base_model', 'base_models', 'base_model_sources'], totalParams, 'base_model', warnings);
  f.datasets = entries(card, ['datasets', 'dataset', 'dataset_sources'], totalParams, 'datasets', warnings);
  use('license', 'license');
  use('license_name', 'license_name');
  use('license_link', 'license_link');
  // Arrays gather every key that states them.
  const gather = (field: 'tags' | 'languages', keys: readonly string[]) => {
    for (const k of keys) {
      const v = card[k];
      if (v === undefined || v === null) continue;
      const cur = f[field] ?? [];
      if (typeof v === 'string') cur.push(v);
      else if (Array.isArray(v)) cur.push(...(v as unknown[]));
      f[field] = cur;
    }
  };
  gather('tags', ['tags', 'pipeline_tag']);
  gather('languages', ['languages', 'language']);
  return f;
}
