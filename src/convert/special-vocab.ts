// Special tokens, BPE merges, add-BOS/EOS flags and chat template from the JSON files beside a
// checkpoint, in the order gguf-py's SpecialVocab reads them (the first source to name an id
// wins): tokenizer.json's post_processor, tokenizer_config.json's `<type>_token` looked up among
// tokenizer.json's added_tokens, then config.json's `<type>_token_id`. webquant adds two later
// fallbacks that only fill gaps: special_tokens_map.json (as transformers merges it into the
// tokenizer config) and generation_config.json's ids.
import { ErrorCodes, fail } from '../errors.js';
import type { AddTokenType, NamedChatTemplate, SpecialTokenType } from './gguf-vocab.js';

export type Json = Record<string, unknown>;
export const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface SpecialVocabInput {
  tokenizerJson?: Json;
  tokenizerConfig?: Json;
  specialTokensMap?: Json;
  /** config.json (ModelConfig.raw). */
  config?: Json;
  generationConfig?: Json;
  /** chat_template.jinja, or chat_template.json's chat_template, used when tokenizer_config.json has none. */
  chatTemplateFile?: unknown;
  /** Ids at or past this are skipped with a warning (SentencePiece vocabularies). */
  nVocab?: number;
  loadMerges: boolean;
  /** File names for messages. */
  names: { tokenizerJson: string; tokenizerConfig: string };
}

export interface SpecialVocab {
  merges?: string[];
  special: Partial<Record<SpecialTokenType, number>>;
  add: Partial<Record<AddTokenType, boolean>>;
  chatTemplate?: string | NamedChatTemplate[];
  warnings: string[];
}

/** The text of a `<type>_token` entry: a string or an AddedToken object with `content`. */
export function tokenContent(entry: unknown): string | undefined {
  if (typeof entry === 'string') return entry;
  if (isObj(entry) && typeof entry.content === 'string') return entry.content;
  return undefined;
}

export interface AddedToken {
  id: number;
  content: string;
  special: boolean;
  normalized?: boolean;
}

/** tokenizer.json's added_tokens, validated. */
export function addedTokens(tj: Json | undefined, file: string): AddedToken[] {
  const list = tj?.added_tokens;
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) fail(ErrorCodes.TOKENIZER, `[tokenizer] ${file}: "added_tokens" must be a list`, { file, option: 'added_tokens', expected: 'a list of {id, content}' });
  return (list as unknown[]).map((t, i) => {
    if (!isObj(t) || !Number.isSafeInteger(t.id) || (t.id as number) < 0 || typeof t.content !== 'string') {
      return fail(ErrorCodes.TOKENIZER, `[tokenizer] ${file}: added_tokens[${i}] must have an integer "id" >= 0 and a string "content"`, { file, option: 'added_tokens', index: i, value: t, expected: '{id, content}' });
    }
    return { id: t.id as number, content: t.content, special: t.special === true, normalized: typeof t.normalized === 'boolean' ? t.normalized : undefined };
  });
}

/** model.merges as "left right" strings; spaces inside a pair's parts become U+0120 as gguf-py writes them. */
function readMerges(tj: Json, file: string): string[] | undefined {
  const merges = isObj(tj.model) ? tj.model.merges : undefined;
  if (!Array.isArray(merges) || merges.length === 0) return undefined;
  return merges.map((m, i) => {
    if (typeof m === 'string') return m;
    if (Array.isArray(m) && m.length === 2 && typeof m[0] === 'string' && typeof m[1] === 'string') {
      return m.map((p: string) => p.replaceAll(' ', '\u0120')).join(' ');
    }
    return fail(ErrorCodes.TOKENIZER, `[tokenizer] ${file}: model.merges[${i}] is neither "a b" nor ["a", "b"]`, { file, option: 'model.merges', index: i, value: m, expected: '"a b" or ["a", "b"]' });
  });
}

const BASE_TYPES: SpecialTokenType[] = ['bos', 'eos', 'unk', 'sep', 'pad', 'cls', 'mask'];

export function specialVocab(inp: SpecialVocabInput): SpecialVocab {
  const out: SpecialVocab = { special: {}, add: {}, warnings: [] };
  const types = [...BASE_TYPES];
  const set = (typ: SpecialTokenType, id: unknown, from: string) => {
    if (typeof id !== 'number' || !Number.isInteger(id)) return;
    if (id < 0) fail(ErrorCodes.TOKENIZER, `[tokenizer] ${from}: the ${typ} token id ${id} is negative`, { file: from, option: `${typ}_token_id`, value: id, expected: '>= 0' });
    if (inp.nVocab !== undefined && id >= inp.nVocab) {
      out.warnings.push(`${from}: the ${typ} token id ${id} is outside the ${inp.nVocab}-token vocabulary; not written`);
      return;
    }
    if (!(typ in out.special)) out.special[typ] = id;
  };

  const tj = inp.tokenizerJson;
  if (tj && inp.loadMerges) out.merges = readMerges(tj, inp.names.tokenizerJson);
  const added = addedTokens(tj, inp.names.tokenizerJson);
  // The named special tokens: tokenizer_config.json's, then special_tokens_map.json's for the rest.
  const tc: Json | undefined = inp.tokenizerConfig || inp.specialTokensMap ? { ...inp.specialTokensMap, ...inp.tokenizerConfig } : undefined;

  if (tj) {
    let bos = tokenContent(tc?.bos_token), cls = tokenContent(tc?.cls_token), eos = tokenContent(tc?.eos_token), sep = tokenContent(tc?.sep_token);
    if (!bos && cls && tc) tc.bos_token = bos = cls;
    if (!eos && sep && tc) tc.eos_token = eos = sep;
    const pp = tj.post_processor;
    const processors: unknown[] = isObj(pp) ? (Array.isArray(pp.processors) ? pp.processors : [pp]) : [];
    for (const p of processors) {
      if (!isObj(p)) continue;
      if (p.type === 'RobertaProcessing') {
        out.add.bos = true; out.add.eos = true; out.add.sep = true;
        continue;
      }
      // As gguf-py: a simple reading of TemplateProcessing's "single" template (a special token
      // first means add BOS, one last means add EOS); unusual templates are not understood.
      if (p.type !== 'TemplateProcessing' || !Array.isArray(p.single) || p.single.length <= 1) continue;
      const specialId = (x: unknown) => (isObj(x) && isObj(x.SpecialToken) && typeof x.SpecialToken.id === 'string' ? x.SpecialToken.id : undefined);
      const first = specialId(p.single[0]);
      if (first) {
        if (!tc) bos = first;
        out.add.bos = first === bos || first === cls;
        if (!out.add.bos) out.warnings.push(`${inp.names.tokenizerJson}: unknown leading special token ${JSON.stringify(first)} in TemplateProcessing`);
      }
      const last = specialId(p.single[p.single.length - 1]);
      if (last) {
        if (!tc) eos = last;
        else if (last !== eos) {
          // The template ends with another token than eos_token: that one is EOS, the old one end-of-turn.
          const slot = !types.includes('eot') ? 'eot' : !types.includes('eom') ? 'eom' : undefined;
          if (slot) { types.push(slot); tc[`${slot}_token`] = eos; }
          tc.eos_token = eos = last;
        }
        out.add.eos = last === eos;
      }
    }
  }

  if (tc) {
    const ct = tc.chat_template ?? inp.chatTemplateFile;
    if (typeof ct === 'string') out.chatTemplate = ct;
    else if (Array.isArray(ct) && ct.every((c) => isObj(c) && typeof c.name === 'string' && typeof c.template === 'string')) {
      out.chatTemplate = (ct as Json[]).map((c) => ({ name: c.name as string, template: c.template as string }));
    } else if (ct !== undefined && ct !== null) out.warnings.push(`${inp.names.tokenizerConfig}: chat_template is neither a string nor a list of {name, template}; not written`);
    for (const typ of types) {
      const flag = tc[`add_${typ}_token`];
      if (typeof flag === 'boolean' && (typ === 'bos' || typ === 'eos' || typ === 'sep')) out.add[typ] = flag;
      const content = tokenContent(tc[`${typ}_token`]);
      if (content === undefined) continue;
      set(typ, added.find((a) => a.content === content)?.id, inp.names.tokenizerConfig);
    }
  }
  for (const [cfg, from] of [[inp.config, 'config.json'], [inp.generationConfig, 'generation_config.json']] as const) {
    if (!cfg) continue;
    for (const typ of types) set(typ, cfg[`${typ}_token_id`], from);
  }
  return out;
}
