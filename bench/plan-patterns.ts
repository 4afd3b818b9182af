// Plan patterns: webquant's linear-time matcher (src/plan/regex.ts) against the platform's
// RegExp on a DeepSeek-V3-sized list of tensor names, samples alternating, medians printed; then
// one pattern that backtracks exponentially, on the matcher only.
//   npm run bench:plan-patterns
import { compilePattern } from '../src/plan/regex.js';
import { median } from './stats.js';

const names: string[] = [];
for (let l = 0; l < 61; l++) {
  for (const p of ['self_attn.q_a_proj', 'self_attn.kv_a_proj_with_mqa', 'self_attn.o_proj', 'input_layernorm']) names.push(`model.layers.${l}.${p}.weight`);
  for (let e = 0; e < 256; e++) for (const p of ['gate', 'up', 'down']) names.push(`model.layers.${l}.mlp.experts.${e}.${p}_proj.weight`);
}

const PATTERNS: [string, string][] = [
  ['(?:ssm_conv1d|time_mix_first|time_mix_w1|time_mix_w2|time_mix_decay_w1|time_mix_decay_w2|time_mix_lerp_fused|attn_rel_b)\\.weight$', ''],
  ['layers\\.\\d+\\.mlp\\.experts\\.\\d+\\.(gate|up)_proj', ''],
  ['^model\\.layers\\.(?:[0-9]|1[0-9])\\..*DOWN', 'i'],
  ['\\bo_proj\\b', ''],
];

const time = (test: (s: string) => boolean) => {
  const t = performance.now();
  let hits = 0;
  for (const n of names) if (test(n)) hits++;
  return { ms: performance.now() - t, hits };
};

console.log(`${names.length} names, 9 samples per cell (median ms)`);
console.log('| pattern | webquant | RegExp | ratio | matches |');
console.log('|---|---|---|---|---|');
for (const [src, flags] of PATTERNS) {
  const ours = compilePattern(src, flags, 'bench');
  const native = new RegExp(src, flags);
  const a: number[] = [];
  const b: number[] = [];
  let hits = 0;
  for (let k = 0; k < 10; k++) {
    const x = time((s) => ours.test(s));
    const y = time((s) => native.test(s));
    if (x.hits !== y.hits) throw new Error(`/${src}/${flags}: ${x.hits} matches against RegExp's ${y.hits}`);
    hits = x.hits;
    if (k > 0) { a.push(x.ms); b.push(y.ms); } // the first sample builds the matcher's cache
  }
  const ma = median(a), mb = median(b);
  console.log(`| \`/${src.length > 48 ? src.slice(0, 45) + '...' : src}/${flags}\` | ${ma.toFixed(1)} | ${mb.toFixed(1)} | ${(ma / mb).toFixed(1)}x | ${hits} |`);
}
const evil = compilePattern('^(a+)+$', '', 'bench');
const t = performance.now();
const r = evil.test('a'.repeat(5000) + '!');
console.log(`/^(a+)+$/ on 5000 a's and "!": ${r}, ${(performance.now() - t).toFixed(1)} ms (a backtracking engine takes ~2^5000 steps)`);
