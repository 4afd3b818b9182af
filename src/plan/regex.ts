// Plan patterns (rule `match`, `skip` entries, MaxText keys) matched in linear time.
//
// A plan may come from a file or a request, and a backtracking engine can take exponential time on
// patterns such as `(a+)+$` or `(.*a){20}`: one tensor name would hang the run. Patterns are
// checked by the platform's RegExp (so the syntax and its messages are JavaScript's), then
// compiled here to an NFA that is run as a set of states over the name (Thompson's construction):
// time is at most (name length) x (pattern states), and the sets met are cached as a lazily built
// DFA (bounded) whose steps are keyed by the character read and the class of the next one (all
// that anchors look at), so a plan's thousands of names cost an array lookup per character.
// Character-level atoms (a class, `\w`, `\p{L}`, `.`, a letter under `i`) are decided by the
// platform's RegExp on one character at a time, so case folding and Unicode properties follow
// JavaScript exactly; only the structure (sequence, alternation, repetition, anchors) is ours. Backreferences and lookarounds have no linear-time
// form and are refused.
import { ErrorCodes, fail } from '../errors.js';

/** What plans need of a regular expression: RegExp's own `source`, `flags` and `test`. */
export interface NamePattern {
  readonly source: string;
  readonly flags: string;
  test(name: string): boolean;
}

/** Pattern states after counted repetitions (`{n,m}`) are expanded; more are refused. */
export const MAX_PATTERN_STATES = 20_000;
/** Groups within groups; the parser and the construction recurse once per level. */
const MAX_GROUP_DEPTH = 256;
/** State numbers held by a pattern's cache of state sets (4 MiB); past it, sets are not cached. */
export const MAX_DFA_INTS = 1 << 20;

type Node =
  | { t: 'atom'; pred: (c: number) => boolean }
  | { t: 'assert'; a: '^' | '$' | 'b' | 'B' }
  | { t: 'seq'; items: Node[] }
  | { t: 'alt'; alts: Node[] }
  | { t: 'rep'; body: Node; min: number; max: number };

const CHAR = 0;
const SPLIT = 1;
const ASSERT = 2;
const MATCH = 3;

interface State {
  kind: number;
  out: number;
  out2: number;
  pred?: (c: number) => boolean;
  a?: string;
}

function refuse(what: string, source: string, message: string): never {
  fail(ErrorCodes.PLAN, `[plan] ${what}: ${JSON.stringify(source)} ${message}`, { option: what, value: source });
}

const isLineTerminator = (c: number) => c === 10 || c === 13 || c === 0x2028 || c === 0x2029;

class Parser {
  private i = 0;
  private depth = 0;
  private readonly unicode: boolean;
  private readonly ignoreCase: boolean;
  private readonly atomFlags: string;
  private readonly namedGroups: boolean;

  constructor(private readonly src: string, flags: string, private readonly what: string) {
    this.unicode = flags.includes('u');
    this.ignoreCase = flags.includes('i');
    this.atomFlags = flags.replace(/[^isu]/g, '');
    this.namedGroups = /\(\?<[^=!]/.test(src);
  }

  parse(): Node {
    const n = this.alternation();
    // The platform accepted the pattern, so only an unbalanced ')' could be left, and it would not have.
    if (this.i !== this.src.length) refuse(this.what, this.src, `could not be read at offset ${this.i}`);
    return n;
  }

  private alternation(): Node {
    const alts = [this.sequence()];
    while (this.src[this.i] === '|') {
      this.i++;
      alts.push(this.sequence());
    }
    return alts.length === 1 ? alts[0] : { t: 'alt', alts };
  }

  private sequence(): Node {
    const items: Node[] = [];
    while (this.i < this.src.length && this.src[this.i] !== '|' && this.src[this.i] !== ')') {
      items.push(this.quantified(this.atom()));
    }
    return items.length === 1 ? items[0] : { t: 'seq', items };
  }

  private quantified(atom: Node): Node {
    const s = this.src;
    let min: number;
    let max: number;
    const c = s[this.i];
    if (c === '*') { min = 0; max = Infinity; this.i++; }
    else if (c === '+') { min = 1; max = Infinity; this.i++; }
    else if (c === '?') { min = 0; max = 1; this.i++; }
    else {
      const m = c === '{' ? /^\{(\d+)(,(\d*))?\}/.exec(s.slice(this.i)) : null;
      if (!m) return atom;
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
      this.i += m[0].length;
    }
    if (s[this.i] === '?') this.i++; // lazy: the same set of names
    return { t: 'rep', body: atom, min, max };
  }

  private atom(): Node {
    const s = this.src;
    const c = s[this.i];
    if (c === '(') {
      if (s.startsWith('(?=', this.i) || s.startsWith('(?!', this.i) || s.startsWith('(?<=', this.i) || s.startsWith('(?<!', this.i)) {
        refuse(this.what, s, 'uses a lookaround, which plan patterns do not support (they are matched in linear time)');
      }
      if (s.startsWith('(?:', this.i)) this.i += 3;
      else if (s.startsWith('(?<', this.i)) this.i = s.indexOf('>', this.i) + 1;
      else this.i++;
      if (++this.depth > MAX_GROUP_DEPTH) refuse(this.what, s, `nests groups more than ${MAX_GROUP_DEPTH} deep`);
      const inner = this.alternation();
      this.depth--;
      this.i++; // ')'
      return inner;
    }
    if (c === '^' || c === '$') {
      this.i++;
      return { t: 'assert', a: c };
    }
    if (c === '\\') {
      const e = s[this.i + 1];
      if (e === 'b' || e === 'B') {
        this.i += 2;
        return { t: 'assert', a: e };
      }
      if (e >= '1' && e <= '9' || e === '0' && /[0-9]/.test(s[this.i + 2] ?? '') || e === 'k' && (this.unicode || this.namedGroups)) {
        refuse(this.what, s, 'uses a backreference or an octal escape, which plan patterns do not support (they are matched in linear time)');
      }
      if (e === 'c' && !/[A-Za-z]/.test(s[this.i + 2] ?? '')) {
        this.i++; // Annex B: a lone "\c" is a backslash, then "c" read on its own
        return this.single('\\\\');
      }
      const len = this.escapeLength();
      this.i += len;
      return this.single(s.slice(this.i - len, this.i));
    }
    if (c === '[') {
      let j = this.i + 1;
      if (s[j] === '^') j++;
      while (s[j] !== ']') j += s[j] === '\\' ? 2 : 1;
      const text = s.slice(this.i, j + 1);
      this.i = j + 1;
      return this.single(text);
    }
    const cp = this.unicode ? s.codePointAt(this.i)! : s.charCodeAt(this.i);
    const len = cp > 0xffff ? 2 : 1;
    const text = s.slice(this.i, this.i + len);
    this.i += len;
    if (c === '.' || this.ignoreCase) return this.single(text === '.' ? '.' : escapeLiteral(text));
    return { t: 'atom', pred: (x) => x === cp };
  }

  /** Length of the escape at `i` (the platform has checked it is well formed). */
  private escapeLength(): number {
    const s = this.src;
    const e = s[this.i + 1];
    const rest = s.slice(this.i + 2);
    if (e === 'x') return /^[0-9a-fA-F]{2}/.test(rest) ? 4 : 2;
    if (e === 'u') {
      if (this.unicode && rest[0] === '{') return 3 + rest.indexOf('}');
      if (this.unicode && /^[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}/.test(rest)) return 12; // a surrogate pair
      return /^[0-9a-fA-F]{4}/.test(rest) ? 6 : 2;
    }
    if ((e === 'p' || e === 'P') && this.unicode) return 3 + rest.indexOf('}');
    if (e === 'c') return 3;
    if (this.unicode && s.codePointAt(this.i + 1)! > 0xffff) return 3;
    return 2;
  }

  /** An atom matching one character as the platform's RegExp decides it for `text`. */
  private single(text: string): Node {
    const re = new RegExp(`^(?:${text})$`, this.atomFlags);
    const ascii = new Uint8Array(128); // 0 not asked yet, 1 no, 2 yes
    const seen = new Map<number, boolean>();
    const unicode = this.unicode;
    return {
      t: 'atom',
      pred: (x) => {
        if (x < 128) {
          if (ascii[x] === 0) ascii[x] = re.test(String.fromCharCode(x)) ? 2 : 1;
          return ascii[x] === 2;
        }
        let r = seen.get(x);
        if (r === undefined) {
          r = re.test(unicode ? String.fromCodePoint(x) : String.fromCharCode(x));
          seen.set(x, r);
        }
        return r;
      },
    };
  }
}

function onlyEmpty(n: Node): boolean {
  switch (n.t) {
    case 'atom': return false;
    case 'assert': return false;
    case 'seq': return n.items.every(onlyEmpty);
    case 'alt': return n.alts.every(onlyEmpty);
    case 'rep': return n.max === 0 || onlyEmpty(n.body);
  }
}

function escapeLiteral(ch: string): string {
  return ch.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
}

interface DState {
  list: Int32Array;
  /**
   * Steps taken from this set by an ASCII character c followed by a character of class k
   * (NEXT_*): at index 4c + k, made when first needed. Anchors look only at the character before
   * (the one read) and the class of the one after, so a step is a function of (set, c, k).
   */
  next?: (DState | typeof MATCHED | undefined)[];
  cached: boolean;
}
/** Classes of the character after a position, all that \b, \B, $ and the m flag ask of it. */
const NEXT_END = 0, NEXT_WORD = 1, NEXT_LINE = 2, NEXT_OTHER = 3;
const MATCHED = Symbol('matched');

class Program implements NamePattern {
  private readonly states: State[] = [];
  private readonly start: number;
  private readonly marks: Int32Array;
  private generation = 0;
  /** Sets of CHAR states met so far (a lazily built DFA), by their sorted list. */
  private readonly dfa = new Map<string, DState>();
  private dfaInts = 0;
  /** The sets before a name's first character, by the class of that character. */
  private readonly first: (DState | typeof MATCHED | undefined)[] = [];
  private readonly stack: number[] = [];
  private readonly unicode: boolean;
  private readonly multiline: boolean;
  private readonly wordExtra: boolean;

  constructor(readonly source: string, readonly flags: string, root: Node, private readonly what: string) {
    this.unicode = flags.includes('u');
    this.multiline = flags.includes('m');
    // With u and i, \w and \b also count U+017F and U+212A (they fold to s and k).
    this.wordExtra = this.unicode && flags.includes('i');
    const match = this.add({ kind: MATCH, out: -1, out2: -1 });
    this.start = this.build(root, match);
    this.marks = new Int32Array(this.states.length).fill(-1);
    for (let c = 0; c < 128; c++) this.asciiClass[c] = this.nextClass(c);
  }

  private add(s: State): number {
    if (this.states.length >= MAX_PATTERN_STATES) {
      refuse(this.what, this.source, `is too large once its counted repetitions are expanded (more than ${MAX_PATTERN_STATES} states)`);
    }
    this.states.push(s);
    return this.states.length - 1;
  }

  /** Builds `n` in front of state `next` and returns its entry state. */
  private build(n: Node, next: number): number {
    switch (n.t) {
      case 'atom': return this.add({ kind: CHAR, out: next, out2: -1, pred: n.pred });
      case 'assert': return this.add({ kind: ASSERT, out: next, out2: -1, a: n.a });
      case 'seq': {
        let s = next;
        for (let k = n.items.length - 1; k >= 0; k--) s = this.build(n.items[k], s);
        return s;
      }
      case 'alt': {
        let s = this.build(n.alts[n.alts.length - 1], next);
        for (let k = n.alts.length - 2; k >= 0; k--) s = this.add({ kind: SPLIT, out: this.build(n.alts[k], next), out2: s });
        return s;
      }
      case 'rep': {
        // Repeating what matches only the empty string adds nothing (and `(?:){1e15}` must not loop).
        if (n.max === 0 || onlyEmpty(n.body)) return next;
        let s = next;
        if (n.max === Infinity) {
          const loop = this.add({ kind: SPLIT, out: -1, out2: next });
          this.states[loop].out = this.build(n.body, loop);
          s = loop;
        } else {
          for (let k = n.min; k < n.max; k++) s = this.add({ kind: SPLIT, out: this.build(n.body, s), out2: next });
        }
        for (let k = 0; k < n.min; k++) s = this.build(n.body, s);
        return s;
      }
    }
  }

  private isWord(c: number): boolean {
    return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || (this.wordExtra && (c === 0x17f || c === 0x212a));
  }

  /** nextClass of each ASCII character. */
  private readonly asciiClass = new Uint8Array(128);

  private nextClass(c: number): number {
    return c < 0 ? NEXT_END : this.isWord(c) ? NEXT_WORD : isLineTerminator(c) ? NEXT_LINE : NEXT_OTHER;
  }

  /** Whether anchor `a` holds between `prev` and a character of class `next` (-1 / NEXT_END: the name's ends). */
  private holds(a: string, prev: number, next: number): boolean {
    switch (a) {
      case '^': return prev < 0 || (this.multiline && isLineTerminator(prev));
      case '$': return next === NEXT_END || (this.multiline && next === NEXT_LINE);
      default: {
        const edge = (prev >= 0 && this.isWord(prev)) !== (next === NEXT_WORD);
        return a === 'b' ? edge : !edge;
      }
    }
  }

  /** Adds the states reachable from `s` without reading a character; true once MATCH is reached. */
  private close(list: number[], s: number, prev: number, next: number): boolean {
    const stack = this.stack;
    stack.length = 0;
    stack.push(s);
    while (stack.length) {
      const k = stack.pop()!;
      if (this.marks[k] === this.generation) continue;
      this.marks[k] = this.generation;
      const st = this.states[k];
      if (st.kind === MATCH) return true;
      if (st.kind === CHAR) list.push(k);
      else if (st.kind === SPLIT) stack.push(st.out2, st.out);
      else if (this.holds(st.a!, prev, next)) stack.push(st.out);
    }
    return false;
  }

  /** The cached state for a set of CHAR states, or a fresh uncached one once the cache is full. */
  private intern(list: number[]): DState {
    const sorted = Int32Array.from(list).sort();
    const key = sorted.join(',');
    let d = this.dfa.get(key);
    if (d) return d;
    const cached = this.dfaInts + sorted.length <= MAX_DFA_INTS;
    d = { list: sorted, cached };
    if (cached) {
      this.dfa.set(key, d);
      this.dfaInts += sorted.length;
    }
    return d;
  }

  /** The set after reading `c` followed by a character of class `next`, or MATCHED. */
  private step(cur: DState, c: number, next: number): DState | typeof MATCHED {
    const list: number[] = [];
    this.generation++;
    for (let j = 0; j < cur.list.length; j++) {
      const st = this.states[cur.list[j]];
      if (st.pred!(c) && this.close(list, st.out, c, next)) return MATCHED;
    }
    // A search, not an anchored match: a match may also start after this character.
    if (this.close(list, this.start, c, next)) return MATCHED;
    return this.intern(list);
  }

  test(name: string): boolean {
    // Without the u flag a name is read by UTF-16 unit, straight from the string.
    let text: number[] | undefined;
    if (this.unicode) {
      text = [];
      for (const ch of name) text.push(ch.codePointAt(0)!);
    }
    const n = text ? text.length : name.length;
    const classes = this.asciiClass;
    let d = n === 0 ? -1 : text ? text[0] : name.charCodeAt(0);
    const k0 = d < 0 ? NEXT_END : d < 128 ? classes[d] : this.nextClass(d);
    let first = this.first[k0];
    if (first === undefined) {
      const list: number[] = [];
      this.generation++;
      first = this.close(list, this.start, -1, k0) ? MATCHED : this.intern(list);
      this.first[k0] = first;
    }
    let cur: DState | typeof MATCHED = first;
    for (let pos = 0; pos < n && cur !== MATCHED; pos++) {
      const c = d;
      d = pos + 1 >= n ? -1 : text ? text[pos + 1] : name.charCodeAt(pos + 1);
      const k = d < 0 ? NEXT_END : d < 128 ? classes[d] : this.nextClass(d);
      let nx = c < 128 && cur.next ? cur.next[4 * c + k] : undefined;
      if (nx === undefined) {
        nx = this.step(cur, c, k);
        if (c < 128 && cur.cached && (nx === MATCHED || nx.cached)) this.remember(cur, 4 * c + k, nx);
      }
      cur = nx;
    }
    return cur === MATCHED;
  }

  /** Stores a step in `from`'s table (512 slots, counted in the cache's budget like the sets). */
  private remember(from: DState, slot: number, to: DState | typeof MATCHED): void {
    if (!from.next) {
      if (this.dfaInts + 512 > MAX_DFA_INTS) return;
      this.dfaInts += 512;
      from.next = new Array(512).fill(undefined);
    }
    from.next[slot] = to;
  }
}

/**
 * Compiles a JavaScript regular expression for plan matching. `what` names the plan field in
 * errors. The syntax is checked by the platform first; flags g and y are ignored.
 */
export function compilePattern(source: string, flags: string, what: string): NamePattern {
  const f = flags.replace(/[gyd]/g, '');
  try {
    new RegExp(source, f);
  } catch (e) {
    refuse(what, source, `is not a valid regular expression (${(e as Error).message})`);
  }
  if (f.includes('v')) refuse(what, source, 'uses the v flag, which plan patterns do not support');
  return new Program(source, f, new Parser(source, f, what).parse(), what);
}
