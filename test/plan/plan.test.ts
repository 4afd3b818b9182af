// Rules, skip lists, protection, JSON forms (webquant's and MaxText's), validation and the
// llama.cpp fallback chain.
import { describe, expect, it } from 'vitest';
import {
  resolvePlan, planFromJSON, planToJSON, planToJSONString, normalizePlan, fromMaxText, assertPlanOk, listPresets,
  type Plan, type PlannedTensor, type PlanRule, type ResolvedPlan, type TensorDesc,
} from '../../src/plan/index.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';
import { fixtureLookup, formats } from './fixtures.js';

const llama = (layers = 2, d = 256, f = 512): TensorDesc[] => {
  const t: TensorDesc[] = [{ name: 'model.embed_tokens.weight', shape: [1000, d], dtype: 'BF16' }];
  for (let i = 0; i < layers; i++) {
    const p = `model.layers.${i}`;
    t.push({ name: `${p}.input_layernorm.weight`, shape: [d], dtype: 'BF16' });
    for (const x of ['q', 'k', 'v', 'o']) t.push({ name: `${p}.self_attn.${x}_proj.weight`, shape: [d, d], dtype: 'BF16' });
    t.push({ name: `${p}.mlp.gate_proj.weight`, shape: [f, d], dtype: 'BF16' }, { name: `${p}.mlp.up_proj.weight`, shape: [f, d], dtype: 'BF16' });
    t.push({ name: `${p}.mlp.down_proj.weight`, shape: [d, f], dtype: 'BF16' });
  }
  t.push({ name: 'model.norm.weight', shape: [d], dtype: 'BF16' }, { name: 'lm_head.weight', shape: [1000, d], dtype: 'BF16' });
  return t;
};

const by = (r: ResolvedPlan, name: string): PlannedTensor => {
  const t = r.tensors.find((x) => x.name === name);
  if (!t) throw new Error(`no ${name}`);
  return t;
};
const fmt = (r: ResolvedPlan, name: string) => {
  const s = by(r, name).scheme;
  return s === 'keep' ? 'keep' : s.format;
};
const lookup = fixtureLookup();

describe('rules', () => {
  it('first matching rule wins; the default takes the rest', () => {
    const plan: Plan = {
      default: { format: 'q4_k' },
      rules: [
        { match: 'q_proj', scheme: { format: 'q8_0' } },
        { role: 'attention', scheme: { format: 'q6_k' } },
      ],
      skip: [],
    };
    const r = resolvePlan(plan, llama(), { getFormat: lookup });
    expect(r.ok).toBe(true);
    expect(fmt(r, 'model.layers.0.self_attn.q_proj.weight')).toBe('q8_0');
    expect(by(r, 'model.layers.0.self_attn.q_proj.weight').rule).toBe(0);
    expect(by(r, 'model.layers.0.self_attn.q_proj.weight').reason).toMatch(/^rule 0 \(match q_proj\)/);
    expect(fmt(r, 'model.layers.0.self_attn.k_proj.weight')).toBe('q6_k');
    expect(by(r, 'model.layers.1.self_attn.o_proj.weight').rule).toBe(1);
    expect(fmt(r, 'model.layers.1.mlp.up_proj.weight')).toBe('q4_k');
    expect(by(r, 'model.layers.1.mlp.up_proj.weight').reason).toBe('default');
    expect(by(r, 'model.layers.1.mlp.up_proj.weight').rule).toBe(-1);
    // Swapped: the role rule now claims q_proj first.
    const r2 = resolvePlan({ ...plan, rules: [plan.rules[1], plan.rules[0]] }, llama(), { getFormat: lookup });
    expect(fmt(r2, 'model.layers.0.self_attn.q_proj.weight')).toBe('q6_k');
    // ...and rule 1 never fires: a warning names it.
    expect(r2.problems).toContainEqual(expect.objectContaining({ severity: 'warning', code: ErrorCodes.PLAN, rule: 1 }));
  });

  it('conditions combine: role + kind + layers', () => {
    const plan: Plan = {
      default: { format: 'q4_k' },
      rules: [{ role: ['ffn'], kind: 'down', layers: [1], scheme: { format: 'q8_0' } }],
      skip: [],
    };
    const r = resolvePlan(plan, llama(3), { getFormat: lookup });
    expect(fmt(r, 'model.layers.1.mlp.down_proj.weight')).toBe('q8_0');
    expect(fmt(r, 'model.layers.0.mlp.down_proj.weight')).toBe('q4_k');
    expect(fmt(r, 'model.layers.1.mlp.up_proj.weight')).toBe('q4_k');
    expect(r.nLayers).toBe(3);
  });

  it('skip lists (exact names and /regex/) beat rules; protected classes beat rules', () => {
    const plan: Plan = {
      default: { format: 'q8_0' },
      rules: [{ match: '.', scheme: { format: 'q4_0' } }],
      skip: ['model.layers.0.mlp.up_proj.weight', '/layers\\.1\\..*_proj/'],
    };
    const r = resolvePlan(plan, llama(), { getFormat: lookup });
    expect(by(r, 'model.layers.0.mlp.up_proj.weight')).toMatchObject({ scheme: 'keep', reason: 'skip "model.layers.0.mlp.up_proj.weight"' });
    expect(by(r, 'model.layers.1.self_attn.q_proj.weight')).toMatchObject({ scheme: 'keep', reason: 'skip /layers\\.1\\..*_proj/' });
    expect(fmt(r, 'model.layers.0.mlp.gate_proj.weight')).toBe('q4_0');
    // Defaults: norms, 1-D tensors and embeddings stay; the output head follows the rules.
    expect(by(r, 'model.norm.weight')).toMatchObject({ scheme: 'keep', reason: 'protected: norm' });
    expect(by(r, 'model.embed_tokens.weight')).toMatchObject({ scheme: 'keep', reason: 'protected: embedding' });
    expect(fmt(r, 'lm_head.weight')).toBe('q4_0');
    // Dropping 'embedding' from protect lets the rules decide.
    const r2 = resolvePlan({ ...plan, protect: ['norm', 'router', 'bias', '1d', 'position'] }, llama(), { getFormat: lookup });
    expect(fmt(r2, 'model.embed_tokens.weight')).toBe('q4_0');
  });

  it('routers, router biases, biases and 1-D tensors are never quantized by default', () => {
    const t: TensorDesc[] = [
      { name: 'model.layers.3.mlp.gate.weight', shape: [64, 256], dtype: 'BF16' },
      { name: 'model.layers.3.mlp.gate.e_score_correction_bias', shape: [64], dtype: 'F32' },
      { name: 'model.layers.3.self_attn.q_proj.bias', shape: [256], dtype: 'BF16' },
      { name: 'transformer.wpe.weight', shape: [1024, 256], dtype: 'F32' },
      { name: 'some.scale', shape: [256], dtype: 'F32' },
    ];
    const r = resolvePlan({ default: { format: 'q8_0' }, rules: [], skip: [] }, t, { getFormat: lookup });
    expect(r.tensors.map((x) => x.reason)).toEqual(['protected: router', 'protected: router', 'protected: bias', 'protected: position', 'protected: 1d']);
  });

  it('a rule that names a protected role warns with a hint', () => {
    const r = resolvePlan({ default: 'keep', rules: [{ role: 'embedding', scheme: { format: 'q8_0' } }], skip: [] }, llama(), { getFormat: lookup });
    const w = r.problems.find((p) => p.rule === 0)!;
    expect(w.severity).toBe('warning');
    expect(w.message).toMatch(/matches no tensor .*embedding is protected/);
    // optional rules stay silent
    const r2 = resolvePlan({ default: 'keep', rules: [{ role: 'embedding', scheme: { format: 'q8_0' }, optional: true }], skip: [] }, llama(), { getFormat: lookup });
    expect(r2.problems).toEqual([]);
  });

  it('a tied token embedding takes the output rules', () => {
    const t = llama().filter((x) => x.name !== 'lm_head.weight');
    const plan: Plan = { default: { format: 'q4_k' }, rules: [{ role: 'output', scheme: { format: 'q6_k' } }], skip: [], protect: ['norm', '1d'] };
    const r = resolvePlan(plan, t, { getFormat: lookup });
    expect(by(r, 'model.embed_tokens.weight')).toMatchObject({ tied: true, role: 'embedding', scheme: { format: 'q6_k' } });
    const r2 = resolvePlan(plan, llama(), { getFormat: lookup });
    expect(by(r2, 'model.embed_tokens.weight').tied).toBeUndefined();
    expect(fmt(r2, 'model.embed_tokens.weight')).toBe('q4_k');
    expect(fmt(r2, 'lm_head.weight')).toBe('q6_k');
  });
});

describe('validation', () => {
  it('a format that needs an importance matrix (iq1_s) is an error without one, naming the tensor; fine with one', () => {
    const plan: Plan = { default: { format: 'q8_0' }, rules: [{ role: 'ffn', scheme: { format: 'iq1_s' } }], skip: [] };
    const without = resolvePlan(plan, llama(1));
    expect(without.ok).toBe(false);
    const errs = without.problems.filter((p) => p.severity === 'error');
    expect(errs.map((p) => p.tensor).sort()).toEqual(['model.layers.0.mlp.down_proj.weight', 'model.layers.0.mlp.gate_proj.weight', 'model.layers.0.mlp.up_proj.weight']);
    for (const p of errs) expect(p).toMatchObject({ code: ErrorCodes.BAD_OPTION, message: expect.stringContaining('importance matrix') });
    const withIt = resolvePlan(plan, llama(1), { importance: true });
    expect(withIt.ok).toBe(true);
    expect(fmt(withIt, 'model.layers.0.mlp.up_proj.weight')).toBe('iq1_s');
    // llama-quantize's wider rule: IQ3_XXS / IQ2_S / IQ1_M quantize without one, but a plan needs one
    // for every tensor but token_embd and output (which llama-quantize exempts).
    const wide = resolvePlan({ default: { format: 'iq3_xxs' }, rules: [], skip: [] }, llama(1));
    expect(wide.problems.filter((p) => p.severity === 'error').map((p) => p.tensor).sort())
      .toEqual(llama(1).filter((t) => t.shape.length === 2 && !/embed_tokens|lm_head/.test(t.name)).map((t) => t.name).sort());
    expect(resolvePlan({ default: { format: 'iq3_xxs' }, rules: [], skip: [] }, llama(1), { importance: true }).ok).toBe(true);
    // A tensor whose rows fall back (96 is no multiple of 256: IQ4_NL, as llama.cpp) needs none.
    const narrow = resolvePlan(plan, llama(1, 256, 96));
    expect(fmt(narrow, 'model.layers.0.mlp.down_proj.weight')).toBe('iq4_nl');
    expect(narrow.problems.filter((p) => p.severity === 'error').map((p) => p.tensor).sort()).toEqual(['model.layers.0.mlp.gate_proj.weight', 'model.layers.0.mlp.up_proj.weight']);
  });

  it('unknown formats and bad options are errors naming the tensor, with the registry codes', () => {
    const plan: Plan = {
      default: { format: 'q8_0' },
      rules: [
        { role: 'attention', kind: 'q', scheme: { format: 'no_such_format' } },
        { role: 'attention', kind: 'k', scheme: { format: 'q8_0', bits: 3 } },
        { role: 'attention', kind: 'v', scheme: { format: 'q8_0', calibration: 'hqq' } },
      ],
      skip: [],
    };
    const r = resolvePlan(plan, llama(1), { getFormat: lookup });
    expect(r.ok).toBe(false);
    const p = (name: string) => r.problems.find((x) => x.tensor === name)!;
    expect(p('model.layers.0.self_attn.q_proj.weight')).toMatchObject({ severity: 'error', code: ErrorCodes.UNKNOWN_FORMAT });
    expect(p('model.layers.0.self_attn.k_proj.weight')).toMatchObject({ severity: 'error', code: ErrorCodes.BAD_OPTION });
    expect(p('model.layers.0.self_attn.v_proj.weight')).toMatchObject({ severity: 'error', code: ErrorCodes.BAD_CALIBRATION });
    expect(by(r, 'model.layers.0.self_attn.q_proj.weight').error).toMatch(/unknown format "no_such_format"/);
    expect(by(r, 'model.layers.0.self_attn.q_proj.weight').options).toBeUndefined();
    expect(() => assertPlanOk(r)).toThrow(WebquantError);
    try { assertPlanOk(r); } catch (e) { expect((e as WebquantError).code).toBe(ErrorCodes.PLAN); }
  });

  it('the real registry refuses names it does not have, and accepts the ones it has', () => {
    const r = resolvePlan({ default: { format: 'q8_0' }, rules: [{ role: 'ffn', scheme: { format: 'not_yet_a_format' } }], skip: [] }, llama(1));
    expect(r.problems.filter((x) => x.severity === 'error').map((x) => x.tensor)).toEqual([
      'model.layers.0.mlp.gate_proj.weight', 'model.layers.0.mlp.up_proj.weight', 'model.layers.0.mlp.down_proj.weight',
    ]);
    expect(by(r, 'model.layers.0.self_attn.q_proj.weight').options).toMatchObject({ calibration: { method: 'default' } });
  });

  it('integer tensors are kept (reported); FP8 and GGUF-quantized sources are float inputs', () => {
    const t: TensorDesc[] = [
      { name: 'model.layers.0.self_attn.q_proj.weight', shape: [256, 256], dtype: 'I64' },
      { name: 'model.layers.0.self_attn.k_proj.weight', shape: [256, 256], dtype: 'F8_E4M3' },
      { name: 'blk.0.attn_v.weight', shape: [256, 256], dtype: 'Q4_K' },
      { name: 'model.layers.0.self_attn.o_proj.weight', shape: [256, 256], dtype: 'COMPLEX64' },
    ];
    const r = resolvePlan({ default: { format: 'q8_0' }, rules: [], skip: [] }, t, { getFormat: lookup });
    expect(r.ok).toBe(true);
    expect(fmt(r, t[0].name)).toBe('keep');
    expect(r.problems.find((p) => p.tensor === t[0].name)).toMatchObject({ severity: 'info', code: ErrorCodes.UNSUPPORTED_DTYPE });
    expect(fmt(r, t[1].name)).toBe('q8_0');
    expect(fmt(r, t[2].name)).toBe('q8_0');
    expect(fmt(r, t[3].name)).toBe('keep');
    expect(r.problems.find((p) => p.tensor === t[3].name)).toMatchObject({ severity: 'warning', code: ErrorCodes.UNSUPPORTED_DTYPE });
  });

  it('malformed plans throw E_PLAN with the offending field', () => {
    const bad: [unknown, string][] = [
      [{ default: 'q8_0', rules: [{ scheme: 'q8_0' }] }, 'rules[0]'],
      [{ default: 'q8_0', rules: [{ match: '(', scheme: 'q8_0' }] }, 'rules[0].match'],
      [{ default: 'q8_0', rules: [{ role: 'attn', scheme: 'q8_0' }] }, 'rules[0].role'],
      [{ default: 'q8_0', rules: [{ role: 'ffn', layers: 'some', scheme: 'q8_0' }] }, 'rules[0].layers'],
      [{ default: { format: 'q8_0', bitz: 4 } }, 'default.bitz'],
      [{ default: 'q8_0', protect: ['norms'] }, 'protect'],
      [{ default: 'q8_0', extra: 1 }, 'extra'],
      [{ default: 'q8_0', rules: [{ role: 'ffn', minExperts: 0, scheme: 'q8_0' }] }, 'rules[0].minExperts'],
      [{ default: 'q8_0', rules: [{ role: 'ffn', fallback: 8, scheme: 'q8_0' }] }, 'rules[0].fallback'],
      [{ default: 'q8_0', requireImportance: 'q2_k' }, 'requireImportance'],
      [{ default: 'q8_0', requireImportance: [2] }, 'requireImportance'],
      [{ default: 'q8_0', rules: [{ role: 'ffn', layers: [0], layerCount: 'block', scheme: 'q8_0' }] }, 'rules[0].layerCount'],
      [{ default: 'q8_0', rules: [{ role: 'ffn', layerCount: 'llama', scheme: 'q8_0' }] }, 'rules[0].layerCount'],
      [{ default: 'q8_0', rules: [{ role: 'ffn', override: 'yes', scheme: 'q8_0' }] }, 'rules[0].override'],
    ];
    for (const [p, option] of bad) {
      let err: unknown;
      try { normalizePlan(p); } catch (e) { err = e; }
      expect(err, option).toBeInstanceOf(WebquantError);
      expect((err as WebquantError).code).toBe(ErrorCodes.PLAN);
      expect((err as WebquantError).details.option).toBe(option);
    }
    expect(() => planFromJSON('{not json')).toThrow(/not valid JSON/);
  });
});

describe('JSON', () => {
  it('minExperts and fallback: read from JSON, kept, and applied', () => {
    const plan = normalizePlan({ default: 'q8_0', rules: [{ role: 'expert', minExperts: 4, scheme: 'q4_k', fallback: 'q8_0' }] });
    expect(plan.rules[0]).toMatchObject({ minExperts: 4, fallback: 'q8_0' });
    expect(planFromJSON(planToJSONString(plan)).rules[0]).toMatchObject({ minExperts: 4, fallback: 'q8_0' });
    const moe = (n: number): TensorDesc[] => [{ name: 'blk.0.ffn_up_exps.weight', shape: [n, 96, 256], dtype: 'F16' }, { name: 'blk.0.ffn_down_exps.weight', shape: [n, 256, 96], dtype: 'F16' }];
    const r = resolvePlan(plan, moe(4), { getFormat: lookup });
    // q4_k fits 256-wide rows; 96-wide rows take the rule's fallback (q8_0), not llama.cpp's q5_0
    expect([fmt(r, 'blk.0.ffn_up_exps.weight'), fmt(r, 'blk.0.ffn_down_exps.weight')]).toEqual(['q4_k', 'q8_0']);
    expect([fmt(resolvePlan(plan, moe(2), { getFormat: lookup }), 'blk.0.ffn_up_exps.weight')]).toEqual(['q8_0']);
  });

  it('round trips webquant plans, RegExp objects included', () => {
    const plan = {
      name: 'mine',
      description: 'test',
      fileType: 15,
      default: { format: 'q4_k' },
      rules: [
        { match: /self_attn\.(q|k)_proj/i, scheme: { format: 'q8_0' } },
        { role: ['ffn', 'expert'], kind: 'down', layers: 'use_more_bits', scheme: { format: 'q6_k' }, optional: true, note: 'x' },
        { match: 'mlp', fullmatch: true, scheme: 'keep' },
        { role: 'attention', scheme: { format: 'affine', bits: 4, groupSize: 64, calibration: { method: 'hqq', iterations: 10 } } },
      ],
      skip: ['lm_head.weight', /norm/],
      protect: ['norm', '1d'],
    } as unknown as Plan;
    const json = planToJSONString(plan);
    const back = planFromJSON(json);
    expect(back).toEqual(normalizePlan(plan));
    expect(planToJSON(back)).toEqual(JSON.parse(json));
    expect(back.rules[0].match).toBe('/self_attn\\.(q|k)_proj/i');
    expect(back.skip[1]).toBe('/norm/');
    // The same decisions before and after the trip.
    const a = resolvePlan(plan, llama(), { getFormat: lookup });
    const b = resolvePlan(back, llama(), { getFormat: lookup });
    expect(b.tensors.map((t) => [t.name, t.scheme, t.reason])).toEqual(a.tensors.map((t) => [t.name, t.scheme, t.reason]));
    expect(fmt(a, 'model.layers.0.self_attn.K_PROJ.weight'.replace('K_PROJ', 'k_proj'))).toBe('q8_0');
  });

  it('requireImportance: read from JSON, kept, and an error without an importance matrix except on token_embd / output', () => {
    const plan = planFromJSON(JSON.stringify({ default: { format: 'q2_k' }, requireImportance: ['Q2_K'], rules: [{ match: 'ffn_down', scheme: { format: 'q4_k' } }] }));
    expect(plan.requireImportance).toEqual(['q2_k']);
    expect(planFromJSON(planToJSONString(plan)).requireImportance).toEqual(['q2_k']);
    const t: TensorDesc[] = ['token_embd', 'blk.0.attn_q', 'blk.0.ffn_down', 'output'].map((n) => ({ name: `${n}.weight`, shape: [256, 256], dtype: 'F16' }));
    const without = resolvePlan(plan, t, { getFormat: lookup });
    expect(without.problems.filter((p) => p.severity === 'error').map((p) => p.tensor)).toEqual(['blk.0.attn_q.weight']);
    expect(without.problems[0].message).toMatch(/q2_k needs an importance matrix in this plan/);
    expect(resolvePlan(plan, t, { getFormat: lookup, importance: true }).ok).toBe(true);
  });

  it("layers 'middle_three_quarters' selects floor(n/8) <= layer < floor(7n/8)", () => {
    const plan = normalizePlan({ default: { format: 'q8_0' }, rules: [{ role: 'ffn', layers: 'middle_three_quarters', scheme: { format: 'q4_0' } }] });
    for (const n of [4, 9, 16, 17]) {
      const t: TensorDesc[] = Array.from({ length: n }, (_, i) => ({ name: `blk.${i}.ffn_up.weight`, shape: [64, 64], dtype: 'F16' }));
      const got = resolvePlan(plan, t, { getFormat: lookup }).tensors.filter((x) => x.scheme !== 'keep' && x.scheme.format === 'q4_0').map((x) => x.layer);
      const want = Array.from({ length: n }, (_, i) => i).filter((i) => i >= Math.floor(n / 8) && i < Math.floor((7 * n) / 8));
      expect(got, `n = ${n}`).toEqual(want);
    }
  });

  it("layerCount 'llama' counts attn_v-like and dense FFN tensors as llama-quantize does; 'llama-raw' counts expert ones too", () => {
    // Attention (attn_v, or the fused attn_qkv) in blocks 1, 3 and 5 only; an FFN in every block
    // but 2. Biases are not counted.
    const t: TensorDesc[] = [];
    for (let i = 0; i < 8; i++) {
      if (i === 1 || i === 5) t.push({ name: `blk.${i}.attn_v.weight`, shape: [64, 64], dtype: 'F16' });
      if (i === 3) t.push({ name: `blk.${i}.attn_qkv.weight`, shape: [192, 64], dtype: 'F16' }, { name: `blk.${i}.attn_qkv.bias`, shape: [192], dtype: 'F32' });
      if (i !== 2) t.push({ name: `blk.${i}.ffn_down.weight`, shape: [64, 64], dtype: 'F16' }, { name: `blk.${i}.ffn_down.bias`, shape: [64], dtype: 'F32' });
    }
    // Two dense blocks, then MoE ones (4 experts and a shared one); routers are not counted.
    const moe: TensorDesc[] = [];
    for (let i = 0; i < 6; i++) {
      if (i < 2) moe.push({ name: `blk.${i}.ffn_down.weight`, shape: [64, 64], dtype: 'F16' });
      else moe.push({ name: `blk.${i}.ffn_gate_inp.weight`, shape: [4, 64], dtype: 'F32' }, { name: `blk.${i}.ffn_down_exps.weight`, shape: [4, 64, 64], dtype: 'F16' }, { name: `blk.${i}.ffn_down_shexp.weight`, shape: [64, 64], dtype: 'F16' });
    }
    const picked = (rules: PlanRule[], list = t) => resolvePlan(normalizePlan({ default: 'q8_0', rules }), list, { getFormat: lookup })
      .tensors.filter((x) => x.scheme !== 'keep' && x.scheme.format === 'q4_0').map((x) => x.name);
    const v: PlanRule = { role: 'attention', kind: ['v', 'qkv'], layers: [1], scheme: { format: 'q4_0' } };
    expect(picked([v])).toEqual(['blk.1.attn_v.weight']);
    // The second attn_v-like tensor is block 3's attn_qkv; claimed by an override rule (as by
    // llama-quantize's --tensor-type), it leaves its place to block 5.
    expect(picked([{ ...v, layerCount: 'llama' }])).toEqual(['blk.3.attn_qkv.weight']);
    const claim: PlanRule = { match: 'blk\\.3\\.attn_qkv', override: true, scheme: { format: 'q8_0' } };
    expect(picked([claim, { ...v, layerCount: 'llama' }])).toEqual(['blk.5.attn_v.weight']);
    // Without `override` the same rule decides the tensor but leaves the count alone.
    expect(picked([{ ...claim, override: false }, { ...v, layerCount: 'llama' }])).toEqual([]);
    // use_more_bits over the 3 attn_v-like tensors (i >= floor(21/8) = 2): the last one.
    expect(picked([{ ...v, layers: 'use_more_bits', layerCount: 'llama' }])).toEqual(['blk.5.attn_v.weight']);
    // Dense FFN tensors by their count: blocks 3 and 5 are the third and fifth.
    const down: PlanRule = { role: ['ffn', 'expert', 'shared_expert'], kind: 'down', layers: [2, 4], scheme: { format: 'q4_0' } };
    expect(picked([down])).toEqual(['blk.4.ffn_down.weight']);
    expect(picked([{ ...down, layerCount: 'llama' }])).toEqual(['blk.3.ffn_down.weight', 'blk.5.ffn_down.weight']);
    // With experts, by block ('llama'), or by the count of every ffn_down ('llama-raw').
    expect(picked([{ ...down, layerCount: 'llama' }], moe)).toEqual(['blk.2.ffn_down_exps.weight', 'blk.2.ffn_down_shexp.weight', 'blk.4.ffn_down_exps.weight', 'blk.4.ffn_down_shexp.weight']);
    expect(picked([{ ...down, layerCount: 'llama-raw' }], moe)).toEqual(['blk.2.ffn_down_exps.weight', 'blk.3.ffn_down_exps.weight']);
  });

  it('round trips every preset', () => {
    for (const p of listPresets()) expect(planFromJSON(planToJSONString(p.plan)), p.name).toEqual(p.plan);
  });

  it("maps MaxText's mixed-precision file (fullmatch, last key wins, __default__ inherited)", () => {
    const cfg = {
      __default__: { w_bits: 8 },
      '.*mlp.*': { w_bits: 4 },
      'model/layers/\\d+/mlp/down_proj': { w_scale: 0.9, tile_size: 128 },
      '.*self_attn/q_proj': { w_bits: 2, tile_size: 64 },
      '.*self_attn/k_proj': { w_bits: null },
    };
    const plan = planFromJSON(JSON.stringify(cfg));
    expect(plan.default).toEqual({ format: 'int8', granularity: 'channel' });
    // Reverse order: the last MaxText key is our first rule.
    expect(plan.rules.map((r) => r.match)).toEqual(['.*self_attn/k_proj', '.*self_attn/q_proj', 'model/layers/\\d+/mlp/down_proj', '.*mlp.*']);
    expect(plan.rules.map((r) => r.scheme)).toEqual([
      'keep',
      { format: 'intsym', bits: 2, granularity: 'group', groupSize: 64 },
      // inherits w_bits 8 from __default__, not 4 from the earlier key (MaxText fills from the default only)
      { format: 'int8', granularity: 'group', groupSize: 128, calibration: { method: 'clip', ratio: 0.9 } },
      { format: 'int4', granularity: 'channel' },
    ]);
    expect(plan.rules.every((r) => r.fullmatch)).toBe(true);
    const r = resolvePlan(plan, llama(1, 256, 512));
    expect(by(r, 'model.layers.0.mlp.down_proj.weight').scheme).toEqual(plan.rules[2].scheme);
    expect(by(r, 'model.layers.0.mlp.up_proj.weight').scheme).toEqual(plan.rules[3].scheme);
    expect(by(r, 'model.layers.0.self_attn.q_proj.weight').scheme).toEqual(plan.rules[1].scheme);
    expect(by(r, 'model.layers.0.self_attn.k_proj.weight').scheme).toBe('keep');
    expect(by(r, 'model.layers.0.self_attn.v_proj.weight').scheme).toEqual(plan.default);
    // fullmatch: ".*mlp" alone would not claim "...mlp.up_proj.weight".
    const r2 = resolvePlan(fromMaxText({ __default__: { w_bits: 8 }, '.*mlp': { w_bits: 4 } }), llama(1));
    expect(by(r2, 'model.layers.0.mlp.up_proj.weight').rule).toBe(-1);
    // With the int family registered the MaxText plan validates end to end.
    if (['int8', 'int4', 'intsym'].every((f) => formats.has(f))) {
      expect(r.ok).toBe(true);
      expect(by(r, 'model.layers.0.mlp.down_proj.weight').options).toMatchObject({ bits: 8, groupSize: 128, granularity: 'group', calibration: { method: 'clip', ratio: 0.9 } });
    }
    // No __default__: unmatched layers are not quantized (MaxText's w_bits None).
    expect(fromMaxText({ '.*': { w_bits: 4 } }).default).toBe('keep');
    expect(() => fromMaxText({ x: { w_bits: 4, w_scale: 1.5 } })).toThrow(/w_scale/);
  });
});

describe('fallbacks when the row length is not a multiple of the block', () => {
  const rows = (name: string, n: number): TensorDesc => ({ name, shape: [8, n], dtype: 'F32' });
  const one = (format: string, n: number, strict = false, getFormat = lookup) =>
    resolvePlan({ default: { format }, rules: [], skip: [] }, [rows('model.layers.0.mlp.up_proj.weight', n)], { strict, getFormat });

  it("follows llama-quantize's chain: Q4_K->Q5_0, Q5_K->Q5_1, Q6_K->Q8_0, Q2_K/Q3_K/IQ4_XS->IQ4_NL, then F16", () => {
    const cases: [string, number, string][] = [
      ['q4_k', 256, 'q4_k'], ['q4_k', 64, 'q5_0'], ['q4_k', 172, 'f16'],
      ['q5_k', 64, 'q5_1'], ['q5_k', 172, 'f16'],
      ['q6_k', 64, 'q8_0'], ['q6_k', 172, 'f16'],
      ['q2_k', 64, 'iq4_nl'], ['q3_k', 96, 'iq4_nl'], ['iq4_xs', 64, 'iq4_nl'], ['iq4_xs', 172, 'f16'],
      // 32-value types have no llama.cpp fallback (llama-quantize aborts): F16 directly.
      ['q8_0', 172, 'f16'], ['q4_0', 172, 'f16'], ['iq4_nl', 100, 'f16'],
    ];
    for (const [format, n, want] of cases) {
      const r = one(format, n);
      const t = r.tensors[0];
      expect(t.scheme === 'keep' ? 'keep' : t.scheme.format, `${format} @ ${n}`).toBe(want);
      expect(r.ok).toBe(true);
      if (want !== format) {
        expect(t.fallback?.from).toEqual({ format });
        expect(t.fallback?.chain.at(-1)).toBe(want);
        expect(r.problems).toEqual([expect.objectContaining({ severity: 'warning', code: ErrorCodes.ROW_LENGTH, tensor: t.name })]);
        expect(t.options).toBeDefined();
      } else {
        expect(t.fallback).toBeUndefined();
      }
    }
    expect(one('q8_0', 172).problems[0].message).toMatch(/llama-quantize has no fallback for q8_0/);
    expect(one('q4_k', 172).tensors[0].fallback?.chain).toEqual(['q5_0', 'f16']);
  });

  it('strict: an error entry instead of a fallback', () => {
    const r = one('q4_k', 64, true);
    expect(r.ok).toBe(false);
    expect(r.tensors[0]).toMatchObject({ scheme: { format: 'q4_k' }, error: expect.stringMatching(/row length 64 is not a multiple of the q4_k block size 256/) });
    expect(r.problems).toEqual([expect.objectContaining({ severity: 'error', code: ErrorCodes.ROW_LENGTH, tensor: 'model.layers.0.mlp.up_proj.weight' })]);
  });

  it('without f16 in the registry the F16 step keeps the source values', () => {
    const r = one('q4_k', 172, false, fixtureLookup({ without: ['f16'] }));
    expect(r.tensors[0].scheme).toBe('keep');
    expect(r.tensors[0].fallback?.chain).toEqual(['q5_0', 'f16']);
    expect(r.problems[0].message).toMatch(/no f16 format in the registry/);
  });

  it('a fallback target missing from the registry is an error, not a silent skip', () => {
    const r = one('q4_k', 64, false, fixtureLookup({ without: ['q5_0'] }));
    expect(r.ok).toBe(false);
    expect(r.problems[0]).toMatchObject({ severity: 'error', code: ErrorCodes.UNKNOWN_FORMAT });
    expect(r.problems[0].message).toMatch(/fallback q5_0 is not available/);
  });

  it('other families: a smaller group, then per-channel scales, then keep', () => {
    expect(one('grp', 64).tensors[0].scheme).toEqual({ format: 'grp', groupSize: 64 });
    expect(one('grp', 96).tensors[0].scheme).toEqual({ format: 'grp', groupSize: 32 });
    expect(one('grp', 172).tensors[0].scheme).toEqual({ format: 'grp', granularity: 'channel' });
    expect(one('grponly', 172).tensors[0].scheme).toBe('keep');
    expect(one('grponly', 172).tensors[0].fallback?.chain).toEqual(['grponly (g64)', 'grponly (g32)', 'keep']);
  });

  it('the real registry: q4_k falls back as far as the registry allows', () => {
    expect(formats.has('q4_k')).toBe(true);
    const r = resolvePlan({ default: { format: 'q4_k' }, rules: [], skip: [] }, [rows('model.layers.0.mlp.up_proj.weight', 64)]);
    const t = r.tensors[0];
    if (formats.has('q5_0')) expect(t.scheme).toEqual({ format: 'q5_0' });
    else expect(r.problems[0]).toMatchObject({ severity: 'error', code: ErrorCodes.UNKNOWN_FORMAT });
  });
});

describe('scale dtype of formats that store one (mlx)', () => {
  it("takes the tensor's dtype where the scheme leaves it open, as MLX stores scales in the weights' dtype", () => {
    const t: TensorDesc[] = [
      { name: 'a.weight', shape: [8, 64], dtype: 'F32' }, { name: 'b.weight', shape: [8, 64], dtype: 'F16' },
      { name: 'c.weight', shape: [8, 64], dtype: 'BF16' }, { name: 'd.weight', shape: [8, 64], dtype: 'F8_E4M3' },
    ];
    const r = resolvePlan({ default: { format: 'mlx' }, rules: [{ match: '^c\\.', scheme: { format: 'mlx', scaleDtype: 'f32' } }], skip: [] }, t);
    expect(r.tensors.map((x) => x.options?.scaleDtype)).toEqual(['f32', 'f16', 'f32', 'bf16']);
    expect(r.tensors.map((x) => (x.scheme as { scaleDtype?: string }).scaleDtype)).toEqual(['f32', 'f16', 'f32', undefined]);
    // formats without a scale dtype are left as they are
    const q = resolvePlan({ default: { format: 'q8_0' }, rules: [], skip: [] }, t);
    expect(q.tensors.every((x) => x.scheme !== 'keep' && !('scaleDtype' in x.scheme))).toBe(true);
  });
});
