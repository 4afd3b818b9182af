// How gguf-py (llama.cpp's converter library) reads a model's name: a Hub id or folder name split
// into name, organization, basename, fine-tune, version and size label, titles, and parameter counts
// rounded for size labels. Python's string and number formatting rules are spelled out where they
// differ from JavaScript's, so that the keys written are the converter's to the byte.

export interface NameParts { full?: string; org?: string; basename?: string; finetune?: string; version?: string; sizeLabel?: string }

const isUpperCased = (c: string) => c !== c.toLowerCase() && c === c.toUpperCase();
const isLowerCased = (c: string) => c !== c.toUpperCase() && c === c.toLowerCase();
const isCased = (c: string) => c.toLowerCase() !== c.toUpperCase();

/** Python's str.title(): a letter after a non-letter is upper-cased, the others lower-cased. */
function pyTitle(w: string): string {
  let out = '', prevCased = false;
  for (const c of w) {
    out += isCased(c) ? (prevCased ? c.toLowerCase() : c.toUpperCase()) : c;
    prevCased = isCased(c);
  }
  return out;
}

/** Python's str.islower(): some cased letter, and none upper-case. */
const pyIsLower = (w: string) => [...w].some(isLowerCased) && ![...w].some(isUpperCased);

/** gguf-py's id_to_title: dashes to spaces, all-lower-case words title-cased unless versions or numbers. */
export function idToTitle(s: string): string {
  return s.trim().replace(/-/g, ' ').split(/\s+/).filter(Boolean)
    .map((w) => (pyIsLower(w) && !/^(v\d+(?:\.\d+)*|\d.*)$/.test(w) ? pyTitle(w) : w)).join(' ');
}

/** Python's float() of a size such as "7" or "1.5"; NaN where Python would raise. */
const pyFloat = (s: string) => (/^\s*[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?\s*$/i.test(s) ? Number(s) : NaN);

/**
 * gguf-py's Metadata.get_model_id_components: a Hub id or folder name ("org/Qwen2.5-7B-Instruct")
 * split into its name, organization, basename, fine-tune, version and size label. A size that is far
 * from `totalParams` (e.g. "32k") is read as part of the fine-tune (a context length).
 */
export function modelIdComponents(id: string | undefined, totalParams: number): NameParts {
  if (id === undefined) return {};
  if (id.includes(' ')) return { full: id };
  const slash = id.indexOf('/');
  let org: string | undefined = slash >= 0 ? id.slice(0, slash) : undefined;
  const full = slash >= 0 ? id.slice(slash + 1) : id;
  if (org !== undefined && org.startsWith('.')) org = undefined;
  const parts = full.split('-').filter((p) => p.length > 0);
  const types = parts.map(() => new Set<'basename' | 'size_label' | 'finetune' | 'version' | 'type'>());
  parts.forEach((p, i) => {
    if (/^(v|iter)?\d+(\.\d+)*$/i.test(p)) types[i].add('version');
    else if (/^(?:i?q\d(?:_\w)*|b?fp?(?:16|32))$/i.test(p)) {
      types[i].add('type');
      parts[i] = p.toUpperCase();
    } else if (i > 0 && /^(?:(?:A|\d+x)?\d+(?:[._]\d+)?[KMBT]\d?|small|mini|medium|large|x?xl)$/i.test(p)) {
      let part = p.replace(/_/g, '.');
      // bloom-7b1: 7.1b
      if (/\d$/.test(part)) part = part.slice(0, -2) + '.' + part[part.length - 1] + part[part.length - 2];
      if (part.length > 1 && /\d/.test(part[part.length - 2]) && 'kmbt'.includes(part[part.length - 1])) part = part.slice(0, -1) + part[part.length - 1].toUpperCase();
      if (totalParams !== 0) {
        const label = pyFloat(part.slice(0, -1)) * Math.pow(1000, ' KMBT'.indexOf(part[part.length - 1]));
        if (!Number.isNaN(label) && totalParams > 0 && Math.abs(label - totalParams) > Math.floor((7 * totalParams) / 8)) {
          types[i].add('finetune');
          part = part.slice(0, -1) + part[part.length - 1].toLowerCase();
        }
      }
      if (types[i].size === 0) types[i].add('size_label');
      parts[i] = part;
    } else if (i > 0 && /^(?:chat|instruct|vision|lora)$/i.test(p)) types[i].add('finetune');
  });
  // Word sizes ("small") are dropped when a numbered one is present.
  if (parts.some((p, i) => types[i].has('size_label') && /\d/.test(p))) {
    parts.forEach((p, i) => { if (types[i].has('size_label') && /^\p{L}+$/u.test(p)) types[i].delete('size_label'); });
  }
  let atStart = true;
  parts.forEach((p, i) => {
    const t = types[i];
    if (atStart && ((t.size === 0 && /^\p{L}/u.test(p)) || t.has('version'))) t.add('basename');
    else {
      atStart = false;
      if (t.size === 0) t.add('finetune');
    }
  });
  for (let i = parts.length - 1; i >= 0; i--) {
    if (types[i].has('basename') && types[i].size > 1) types[i].delete('basename');
    else break;
  }
  const join = (keep: (i: number) => boolean) => parts.filter((_, i) => keep(i)).join('-') || undefined;
  let basename = join((i) => types[i].has('basename'));
  const sizeLabel = [...new Set(parts.filter((_, i) => types[i].has('size_label')))].join('-') || undefined;
  const finetune = join((i) => types[i].has('finetune'));
  const version = join((i) => types[i].has('version') && !types[i].has('basename'));
  if (sizeLabel === undefined && finetune === undefined && version === undefined) basename = undefined;
  return { full, org, basename, finetune, version, sizeLabel };
}

/** Python's round(): halves to even. */
const roundHalfEven = (x: number) => {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
};

/**
 * Python's f"{x:.{digits}f}" for x >= 0: the exact binary value rounded half to even (toFixed rounds
 * a tie up: 0.125 to "0.13" where Python writes "0.12"). toFixed(100) is exact for the magnitudes
 * met here (x >= 2^-30 has at most 82 fractional digits).
 */
function pyFixed(x: number, digits: number): string {
  const exact = BigInt(x.toFixed(100).replace('.', ''));
  const unit = 10n ** BigInt(100 - digits);
  let q = exact / unit;
  const r = exact % unit, half = unit / 2n;
  if (r > half || (r === half && q % 2n === 1n)) q++;
  const t = q.toString().padStart(digits + 1, '0');
  return digits ? `${t.slice(0, -digits)}.${t.slice(-digits)}` : t;
}

/** gguf-py's model_weight_count_rounded_notation: 260K, 7.2B, 1.5T (two significant digits at least). */
export function roundedCount(n: number, minDigits = 2): string {
  const [scaled, suffix] = n > 1e12 ? [n * 1e-12, 'T'] : n > 1e9 ? [n * 1e-9, 'B'] : n > 1e6 ? [n * 1e-6, 'M'] : [n * 1e-3, 'K'];
  const fix = Math.max(minDigits - String(roundHalfEven(scaled)).replace(/^0+/, '').length, 0);
  return `${pyFixed(scaled, fix)}${suffix}`;
}
