// Plan patterns: the linear-time matcher against the platform's RegExp on random patterns and
// names, patterns that make a backtracking engine take exponential time, and what is refused.
import { mulberry32 } from '../helpers/data.js';
import { describe, expect, it } from 'vitest';
import { compilePattern, MAX_DFA_INTS, MAX_PATTERN_STATES } from '../../src/plan/regex.js';
import { resolvePlan, normalizePlan, fromMaxText, type TensorDesc } from '../../src/plan/index.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';

const rng = mulberry32;

const ATOMS = ['a', 'b', 'A', '.', '_', '1', '\\.', '[ab]', '[^a]', '[a-c_]', '\\d', '\\w', '\\W', '\\s', '[\\d.]', '-', '\\n'];
const ASSERTS = ['^', '$', '\\b', '\\B'];
const QUANTS = ['', '', '', '*', '+', '?', '{2}', '{1,}', '{0,2}', '{1,3}', '*?', '+?', '??', '{2,}?'];

function randomPattern(r: () => number, depth: number): string {
  const n = 1 + Math.floor(r() * 4);
  let out = '';
  for (let k = 0; k < n; k++) {
    const x = r();
    let atom: string;
    if (x < 0.12) { out += ASSERTS[Math.floor(r() * ASSERTS.length)]; continue; }
    if (x < 0.3 && depth < 3) {
      const open = ['(', '(?:', '(?<g' + depth + k + '>'][Math.floor(r() * 3)];
      const alts = [randomPattern(r, depth + 1)];
      while (r() < 0.35) alts.push(r() < 0.15 ? '' : randomPattern(r, depth + 1));
      atom = open + alts.join('|') + ')';
    } else atom = ATOMS[Math.floor(r() * ATOMS.length)];
    out += atom + QUANTS[Math.floor(r() * QUANTS.length)];
  }
  return out;
}

const NAME_CHARS = 'abAB_.1-\n ';
function randomName(r: () => number): string {
  const n = Math.floor(r() * 12);
  let s = '';
  for (let k = 0; k < n; k++) s += NAME_CHARS[Math.floor(r() * NAME_CHARS.length)];
  return s;
}

describe('plan patterns (linear-time matcher)', () => {
  it('agrees with RegExp on random patterns, flags and names', () => {
    const r = rng(20261123);
    const flagSets = ['', 'i', 'm', 's', 'u', 'im', 'su', 'imsu'];
    let cases = 0;
    let hits = 0;
    for (let p = 0; p < 1500; p++) {
      const src = (r() < 0.5 ? randomPattern(r, 0) : randomPattern(r, 0) + '|' + randomPattern(r, 0));
      const flags = flagSets[Math.floor(r() * flagSets.length)];
      let native: RegExp;
      try { native = new RegExp(src, flags); } catch { continue; }
      const ours = compilePattern(src, flags, 'x');
      for (let k = 0; k < 20; k++) {
        const name = randomName(r);
        const want = native.test(name);
        expect(ours.test(name), `/${src}/${flags} on ${JSON.stringify(name)}`).toBe(want);
        cases++;
        if (want) hits++;
      }
    }
    // Both answers occur often: the comparison is not won by always saying false (or true).
    expect(cases).toBeGreaterThan(20000);
    expect(hits / cases).toBeGreaterThan(0.2);
    expect(hits / cases).toBeLessThan(0.8);
  });

  it('agrees with RegExp on tensor-name patterns', () => {
    const names = [
      'model.layers.0.self_attn.q_proj.weight', 'model.layers.12.mlp.down_proj.weight', 'blk.3.ffn_down.weight',
      'model.embed_tokens.weight', 'lm_head.weight', 'model.layers.7.mlp.experts.31.up_proj.weight', 'token_embd.weight',
      'Model.Layers.1.Self_Attn.K_Proj.Weight', 'decoder/layers_3/mlp/wi_0/kernel',
    ];
    const patterns: [string, string][] = [
      ['self_attn\\.(q|k)_proj', ''], ['SELF_ATTN\\.[qk]_proj', 'i'], ['^model\\.layers\\.(?:[0-9]|1[0-1])\\.', ''],
      ['layers\\.\\d+\\.mlp\\.(?:experts\\.\\d+\\.)?(up|down)_proj\\.weight$', ''], ['(?<blk>blk)\\.\\d{1,2}\\.ffn_(down|up)', ''],
      ['\\bweight\\b', ''], ['.*mlp.*', ''], ['layers_\\d/mlp', ''],
      ['^[^.]+\\.weight$', ''], ['\\p{Lu}\\p{Ll}+\\.', 'u'], ['embed|token_embd|lm_head', ''],
    ];
    for (const [src, flags] of patterns) {
      const native = new RegExp(src, flags);
      const ours = compilePattern(src, flags, 'x');
      for (const n of names) expect(ours.test(n), `/${src}/${flags} on ${n}`).toBe(native.test(n));
    }
  });

  it('follows JavaScript on case folding, Unicode and surrogate pairs', () => {
    const cases: [string, string, string][] = [
      ['k', 'iu', '\u212a'], ['k', 'i', '\u212a'], ['\\w', 'iu', '\u017f'], ['\\bs', 'iu', '\u017f'], ['^.$', '', '😀'],
      ['^.$', 'u', '😀'], ['^\\uD83D\\uDE00$', 'u', '😀'], ['^\\u{1F600}$', 'u', '😀'], ['😀+', 'u', '😀😀'],
      ['^[😀]$', '', '😀'], ['^[😀]$', 'u', '😀'], ['\\p{Script=Greek}', 'u', 'Ωmega'], ['ß', 'i', 'SS'], ['É', 'i', 'é'],
      ['a.b', '', 'a\nb'], ['a.b', 's', 'a\nb'], ['^b', 'm', 'a\nb'], ['a$', 'm', 'a\nb'], ['^b', '', 'a\nb'],
      ['\\x41\\u0042\\cJ', '', 'AB\n'], ['\\c1', '', '\\c1'], ['[\\b]', '', '\b'], ['a{,2}', '', 'a{,2}'], ['x]', '', 'x]'],
      ['[]', '', 'a'], ['[^]', '', '\n'], ['\\k', '', 'k'], ['()', '', ''], ['(?:)*', '', 'a'], ['(a*)*b', '', 'aaab'],
    ];
    for (const [src, flags, name] of cases) {
      expect(compilePattern(src, flags, 'x').test(name), `/${src}/${flags} on ${JSON.stringify(name)}`).toBe(new RegExp(src, flags).test(name));
    }
  });

  it('answers patterns that backtrack exponentially at once', () => {
    const name = 'a'.repeat(5000) + '!';
    // A backtracking engine needs ~2^n steps for each of these on n a's then a mismatch.
    expect(compilePattern('^(a+)+$', '', 'x').test(name)).toBe(false);
    expect(compilePattern('^(a|a)*$', '', 'x').test(name)).toBe(false);
    expect(compilePattern('^(a|aa)+$', '', 'x').test(name)).toBe(false);
    expect(compilePattern('(.*a){30}!x', '', 'x').test(name)).toBe(false);
    expect(compilePattern('^(a+)+!$', '', 'x').test(name)).toBe(true);
    expect(compilePattern('(.*a){30}!', '', 'x').test(name)).toBe(true);
    expect(compilePattern('(?:(?:){1000000000}){1000000000}a', '', 'x').test('a')).toBe(true);
  });

  it('stays right once its cache of state sets is full', () => {
    // 2^23 reachable sets of ~25 states: the cache fills and later steps are computed each time.
    const src = '(a|b)*a(a|b){22}x';
    const ours = compilePattern(src, '', 'x');
    const native = new RegExp(src);
    const r = rng(7);
    let wrong = 0;
    let hits = 0;
    for (let k = 0; k < 6000; k++) {
      let s = '';
      for (let j = 0; j < 80; j++) s += r() < 0.5 ? 'a' : 'b';
      if (r() < 0.5) s += 'x';
      const want = native.test(s);
      if (ours.test(s) !== want) wrong++;
      if (want) hits++;
    }
    expect(wrong).toBe(0);
    expect(hits).toBeGreaterThan(1000);
    expect((ours as unknown as { dfaInts: number }).dfaInts).toBeGreaterThan(MAX_DFA_INTS - 64);
  });

  it('refuses what has no linear-time form, oversized and invalid patterns, naming the field', () => {
    const bad: [string, string, RegExp][] = [
      ['(a)\\1', '', /backreference/], ['(?<n>a)\\k<n>', '', /backreference/], ['\\01', '', /octal/],
      ['a(?=b)', '', /lookaround/], ['a(?!b)', '', /lookaround/], ['(?<=a)b', '', /lookaround/], ['(?<!a)b', '', /lookaround/],
      ['(?:a{200}){200}', '', /too large/], ['('.repeat(300) + ')'.repeat(300), '', /deep/],
      ['(', '', /not a valid regular expression/], ['a{2,1}', '', /not a valid regular expression/],
      ['\\p{Nope}', 'u', /not a valid regular expression/],
    ];
    for (const [src, flags, message] of bad) {
      let err: unknown;
      try { compilePattern(src, flags, 'rules[3].match'); } catch (e) { err = e; }
      expect(err, src.slice(0, 40)).toBeInstanceOf(WebquantError);
      expect((err as WebquantError).code).toBe(ErrorCodes.PLAN);
      expect((err as WebquantError).details.option).toBe('rules[3].match');
      expect((err as WebquantError).message).toMatch(message);
    }
    expect(() => compilePattern('a{' + (MAX_PATTERN_STATES - 10) + '}', '', 'x')).not.toThrow();
  });

  it('plans use it for rules, fullmatch rules, skip entries and MaxText keys', () => {
    const long = 'model.layers.0.' + 'a'.repeat(60) + '.weight';
    const tensors: TensorDesc[] = [
      { name: long, shape: [64, 64], dtype: 'F32' },
      { name: 'model.layers.0.mlp.up_proj.weight', shape: [64, 64], dtype: 'F32' },
      { name: 'model.layers.0.self_attn.o_proj.weight', shape: [64, 64], dtype: 'F32' },
    ];
    const r = resolvePlan({
      default: 'q8_0',
      rules: [{ match: '(a+)+\\.x$', scheme: 'q4_0' }, { match: '(?:\\w+\\.)*(up|down)_proj\\.weight', fullmatch: true, scheme: 'q4_1' }],
      skip: ['/(\\w+)+o_proj\\.bias$/', '/(a|a)+\\.weight$/'],
    }, tensors);
    expect(r.tensors[0].reason).toBe('skip /(a|a)+\\.weight$/');
    expect(r.tensors[1].rule).toBe(1);
    expect(r.tensors[0].scheme).toBe('keep');
    expect(r.tensors[1].scheme).toMatchObject({ format: 'q4_1' });
    expect(r.tensors[2].scheme).toMatchObject({ format: 'q8_0' });
    expect(() => normalizePlan({ default: 'q8_0', rules: [{ match: '(a)\\1', scheme: 'q4_0' }] })).toThrow(/backreference/);
    expect(() => fromMaxText({ __default__: { w_bits: 8 }, 'a(?=b)': { w_bits: 4 } })).toThrow(/lookaround/);
    const mt = resolvePlan(fromMaxText({ __default__: { w_bits: 8 }, '.*(up|down)_proj.*': { w_bits: 4 } }), tensors);
    expect(mt.tensors[1].scheme).toMatchObject({ format: 'int4' });
    expect(mt.tensors[2].scheme).toMatchObject({ format: 'int8' });
  });
});
