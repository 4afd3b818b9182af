// Presets: the registry of named plans, llama.cpp's mixtures on stories260K (rows of 64 and 172,
// neither a multiple of 256, 172 not even of 32) and a DeepSeek-shaped MoE.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { estimatePlan, getPreset, listPresets, registerPreset, resolvePlan, LLAMA_FTYPE, type PlannedTensor, type ResolvedPlan, type TensorDesc } from '../../src/plan/index.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';
import { SHARED, hasShared } from '../helpers/shared.js';
import { deepseekMoE, fixtureLookup, formats, stories260K } from './fixtures.js';

const lookup = fixtureLookup();
const fmtOf = (t: PlannedTensor) => (t.scheme === 'keep' ? 'keep' : t.scheme.format);
const table = (r: ResolvedPlan) => Object.fromEntries(r.tensors.map((t) => [t.name, fmtOf(t)]));

/** Every format a preset can end up using, fallbacks included. */
function formatsOf(r: ResolvedPlan): Set<string> {
  const s = new Set<string>();
  for (const t of r.tensors) {
    if (t.scheme !== 'keep') s.add(t.scheme.format);
    if (t.fallback) { s.add(t.fallback.from.format); for (const c of t.fallback.chain) s.add(c.split(' ')[0]); }
  }
  return s;
}

describe('preset registry', () => {
  it('has the built-in presets, with llama_ftype ids for GGUF ones', () => {
    const names = listPresets().map((p) => p.name);
    for (const n of ['q8_0', 'q4_0', 'q4_k_m', 'q6_k', 'iq4_nl', 'int8', 'int4w', 'nf4', 'fp4', 'fp8', 'mxfp4', 'nvfp4', 'hqq4', 'adaptive', 'f16', 'bf16']) {
      expect(names).toContain(n);
    }
    expect(getPreset('q8_0').fileType).toBe(7);
    expect(getPreset('q4_0').fileType).toBe(2);
    expect(getPreset('Q4_K_M').fileType).toBe(15);
    expect(getPreset('q6_k').fileType).toBe(18);
    expect(getPreset('iq4_nl').fileType).toBe(25);
    expect(getPreset('f16').fileType).toBe(LLAMA_FTYPE.MOSTLY_F16);
    expect(getPreset('q4_k_m').plan.fileType).toBe(15);
    expect(getPreset('int8').fileType).toBeUndefined();
    expect(getPreset('q4_k_m').description).toMatch(/use_more_bits/);
    // Shared and immutable.
    expect(Object.isFrozen(getPreset('q4_k_m').plan.rules[0])).toBe(true);
    expect(() => { (getPreset('q4_k_m').plan.rules as unknown[]).push({}); }).toThrow(TypeError);
  });

  it("llama-quantize's alias names: Q3_K, Q4_K and Q5_K are the _M mixtures", () => {
    for (const [alias, name] of [['Q3_K', 'q3_k_m'], ['q4_k', 'q4_k_m'], ['Q5_K', 'q5_k_m']]) expect(getPreset(alias)).toBe(getPreset(name));
    expect(getPreset('Q2_K_S').fileType).toBe(21);
    expect(getPreset('IQ3_XS').fileType).toBe(22);
  });

  it('getPreset refuses unknown names with the list of valid ones', () => {
    let err: unknown;
    try { getPreset('q3_k_xl'); } catch (e) { err = e; }
    expect(err).toBeInstanceOf(WebquantError);
    expect((err as WebquantError).code).toBe(ErrorCodes.UNKNOWN_PRESET);
    expect((err as WebquantError).details.expected).toEqual(listPresets().map((p) => p.name));
    expect((err as WebquantError).message).toMatch(/valid presets: .*q4_k_m/);
  });

  it('registerPreset adds presets, refuses duplicates unless replace, checks the plan', () => {
    registerPreset({ name: 'test_only_q8', description: 'all q8_0', container: 'gguf', quality: 1, speed: 1, plan: { default: { format: 'q8_0' }, rules: [], skip: [] } });
    expect(getPreset('test_only_q8').plan).toMatchObject({ name: 'test_only_q8', default: { format: 'q8_0' } });
    expect(() => registerPreset({ ...getPreset('test_only_q8') })).toThrow(/exists/);
    registerPreset({ ...getPreset('test_only_q8'), description: 'replaced' }, { replace: true });
    expect(getPreset('test_only_q8').description).toBe('replaced');
    expect(() => registerPreset({ name: 'bad', description: '', container: 'gguf', quality: 1, speed: 1, plan: { default: 'q8_0', rules: [{ scheme: 'q8_0' }], skip: [] } as never })).toThrow(WebquantError);
  });
});

describe('presets on stories260K', () => {
  const tensors = stories260K();

  it('the tensor list matches the real safetensors header', () => {
    const file = join(SHARED, 'models/stories260K/model.safetensors');
    expect(hasShared && existsSync(file)).toBe(true);
    const b = readFileSync(file);
    const n = Number(b.readBigUInt64LE(0));
    const header = JSON.parse(b.subarray(8, 8 + n).toString('utf8'));
    const real = Object.entries(header).filter(([k]) => k !== '__metadata__').map(([name, v]) => ({ name, shape: (v as { shape: number[] }).shape, dtype: (v as { dtype: string }).dtype }));
    expect(real).toEqual(tensors);
  });

  it("q4_k_m = llama.cpp's decisions: Q4_K->Q5_0 on 64-wide rows, F16 on 172-wide rows, Q6_K->Q8_0 on layers 2 and 4", () => {
    const r = resolvePlan(getPreset('q4_k_m').plan, tensors, { getFormat: lookup });
    expect(r.ok).toBe(true);
    expect(r.nLayers).toBe(5);
    const t = table(r);
    // Tied embeddings: token_embd is the output tensor -> Q6_K -> (64 % 256) Q8_0.
    expect(t['model.embed_tokens.weight']).toBe('q8_0');
    for (let i = 0; i < 5; i++) {
      const p = `model.layers.${i}`;
      const more = i === 2 || i === 4;
      expect(t[`${p}.self_attn.q_proj.weight`]).toBe('q5_0');
      expect(t[`${p}.self_attn.k_proj.weight`]).toBe('q5_0');
      expect(t[`${p}.self_attn.o_proj.weight`]).toBe('q5_0');
      expect(t[`${p}.self_attn.v_proj.weight`], p).toBe(more ? 'q8_0' : 'q5_0');
      expect(t[`${p}.mlp.gate_proj.weight`]).toBe('q5_0');
      expect(t[`${p}.mlp.up_proj.weight`]).toBe('q5_0');
      // 172 columns: Q6_K->Q8_0 or Q4_K->Q5_0 do not divide either: F16.
      expect(t[`${p}.mlp.down_proj.weight`]).toBe('f16');
      expect(r.tensors.find((x) => x.name === `${p}.mlp.down_proj.weight`)!.fallback!.from.format).toBe(more ? 'q6_k' : 'q4_k');
      expect(t[`${p}.input_layernorm.weight`]).toBe('keep');
    }
    expect(t['model.norm.weight']).toBe('keep');
    expect(r.problems.every((p) => p.severity === 'warning' && p.code === ErrorCodes.ROW_LENGTH)).toBe(true);
    expect(r.fileType).toBe(15);
  });

  it('q8_0 / q4_0 / q6_k / iq4_nl', () => {
    const q8 = table(resolvePlan(getPreset('q8_0').plan, tensors, { getFormat: lookup }));
    expect(q8['model.embed_tokens.weight']).toBe('q8_0');
    expect(q8['model.layers.0.mlp.gate_proj.weight']).toBe('q8_0');
    expect(q8['model.layers.0.mlp.down_proj.weight']).toBe('f16');
    const q4 = table(resolvePlan(getPreset('q4_0').plan, tensors, { getFormat: lookup }));
    expect(q4['model.embed_tokens.weight']).toBe('q8_0');
    expect(q4['model.layers.3.self_attn.v_proj.weight']).toBe('q4_0');
    expect(q4['model.layers.3.mlp.down_proj.weight']).toBe('f16');
    const q6 = table(resolvePlan(getPreset('q6_k').plan, tensors, { getFormat: lookup }));
    expect(q6['model.layers.1.self_attn.q_proj.weight']).toBe('q8_0');
    expect(q6['model.layers.1.mlp.down_proj.weight']).toBe('f16');
    const iq = resolvePlan(getPreset('iq4_nl').plan, tensors, { getFormat: lookup });
    // 5 layers: first eighth is empty, so no Q5_K ffn_down.
    expect(table(iq)['model.layers.0.mlp.down_proj.weight']).toBe('f16');
    expect(table(iq)['model.layers.0.mlp.up_proj.weight']).toBe('iq4_nl');
  });

  it("IQ / TQ presets: the tied embedding (output) Q5_K goes to Q8_0 on 64-wide rows as llama.cpp's output branch does, not Q5_1; the rest falls back to IQ4_NL / Q4_0, F16 on 172-wide rows", () => {
    for (const name of ['iq2_xxs', 'iq2_xs', 'iq2_s', 'iq2_m', 'iq1_s', 'iq1_m', 'iq3_xxs', 'iq3_s', 'iq3_m', 'tq1_0', 'tq2_0']) {
      const r = resolvePlan(getPreset(name).plan, tensors, { getFormat: lookup, importance: true });
      expect(r.ok, name).toBe(true);
      const t = table(r);
      const embd = r.tensors.find((x) => x.name === 'model.embed_tokens.weight')!;
      expect(t['model.embed_tokens.weight'], name).toBe('q8_0');
      expect(embd.fallback!.from.format, name).toBe(['iq3_s', 'iq3_m', 'tq1_0', 'tq2_0'].includes(name) ? 'q6_k' : 'q5_k');
      expect(t['model.layers.1.mlp.up_proj.weight'], name).toBe(name.startsWith('tq') ? 'q4_0' : 'iq4_nl');
      expect(t['model.layers.1.mlp.down_proj.weight'], name).toBe('f16');
    }
  });

  it('q2_0 fits 64-wide rows (falls back to Q4_0, then F16, on 172); q1_0 needs 128 and goes to F16 directly', () => {
    const q2 = resolvePlan(getPreset('q2_0').plan, tensors, { getFormat: lookup });
    expect(q2.ok).toBe(true);
    expect(getPreset('q2_0').fileType).toBe(41);
    const t2 = table(q2);
    expect(t2['model.layers.1.mlp.up_proj.weight']).toBe('q2_0');
    expect(t2['model.layers.1.mlp.down_proj.weight']).toBe('f16');
    expect(q2.tensors.find((x) => x.name === 'model.layers.1.mlp.down_proj.weight')!.fallback!.chain[0]).toMatch(/^q4_0/);
    expect(t2['model.embed_tokens.weight']).toBe('q8_0'); // tied: the output's Q6_K, which 64 does not fit
    const q1 = resolvePlan(getPreset('q1_0').plan, tensors, { getFormat: lookup });
    expect(q1.ok).toBe(true);
    expect(getPreset('q1_0').fileType).toBe(40);
    const up = q1.tensors.find((x) => x.name === 'model.layers.1.mlp.up_proj.weight')!;
    expect(fmtOf(up)).toBe('f16');
    expect(up.fallback!.from.format).toBe('q1_0');
  });

  it('int4w / hqq4 / int8 / adaptive (non-GGUF fallbacks: smaller groups, then channel, then keep)', () => {
    const i4 = resolvePlan(getPreset('int4w').plan, tensors, { getFormat: lookup });
    const byName = (r: ResolvedPlan, n: string) => r.tensors.find((x) => x.name === n)!;
    expect(byName(i4, 'model.layers.0.mlp.gate_proj.weight').scheme).toEqual({ format: 'int4', groupSize: 64 });
    expect(byName(i4, 'model.layers.0.mlp.down_proj.weight').scheme).toEqual({ format: 'int4', granularity: 'channel' });
    expect(byName(i4, 'model.embed_tokens.weight').scheme).toBe('keep');
    const hqq = resolvePlan(getPreset('hqq4').plan, tensors, { getFormat: lookup });
    expect(byName(hqq, 'model.layers.0.mlp.gate_proj.weight').scheme).toEqual({ format: 'affine', bits: 4, groupSize: 64, calibration: 'hqq' });
    expect(byName(hqq, 'model.layers.0.mlp.down_proj.weight').scheme).toBe('keep');
    const i8 = resolvePlan(getPreset('int8').plan, tensors, { getFormat: lookup });
    expect(i8.ok).toBe(true);
    expect(i8.problems).toEqual([]);
    expect(i8.tensors.filter((t) => t.scheme !== 'keep').length).toBe(35);
    const ad = resolvePlan(getPreset('adaptive').plan, tensors, { getFormat: lookup });
    expect(byName(ad, 'model.layers.0.self_attn.q_proj.weight').scheme).toEqual({ format: 'int8', granularity: 'channel' });
    expect(byName(ad, 'model.layers.0.mlp.up_proj.weight').scheme).toEqual({ format: 'int4', groupSize: 64 });
  });

  it('every preset resolves against the real registry, or fails only on formats it does not have yet', () => {
    for (const p of listPresets()) {
      const r = resolvePlan(p.plan, tensors);
      const errors = r.problems.filter((x) => x.severity === 'error');
      for (const e of errors) {
        expect(e.code, `${p.name}: ${e.message}`).toBe(ErrorCodes.UNKNOWN_FORMAT);
        expect(e.tensor).toBeDefined();
      }
      const missing = [...formatsOf(r)].filter((f) => f !== 'keep' && !formats.has(f));
      expect(errors.length === 0, `${p.name}: missing ${missing.join(',')}`).toBe(missing.length === 0 || missing.every((f) => f === 'f16'));
    }
  });
});

describe('presets on a DeepSeek-style MoE', () => {
  const tensors = deepseekMoE();

  it('q4_k_m: experts quantized, ffn_down of use_more_bits layers Q6_K, router / norms kept, lm_head Q6_K', () => {
    const r = resolvePlan(getPreset('q4_k_m').plan, tensors, { getFormat: lookup });
    expect(r.ok).toBe(true);
    expect(r.problems).toEqual([]);
    const t = table(r);
    // 4 layers: n/8 = 0, 7n/8 = 3 -> layers 2 and 3 get more bits.
    for (const i of [1, 2, 3]) {
      const p = `model.layers.${i}.mlp`;
      const more = i >= 2;
      for (let e = 0; e < 4; e++) {
        expect(t[`${p}.experts.${e}.gate_proj.weight`]).toBe('q4_k');
        expect(t[`${p}.experts.${e}.up_proj.weight`]).toBe('q4_k');
        expect(t[`${p}.experts.${e}.down_proj.weight`]).toBe(more ? 'q6_k' : 'q4_k');
      }
      expect(t[`${p}.shared_experts.down_proj.weight`]).toBe(more ? 'q6_k' : 'q4_k');
      expect(t[`${p}.gate.weight`]).toBe('keep');
      expect(t[`${p}.gate.e_score_correction_bias`]).toBe('keep');
    }
    expect(t['model.layers.0.mlp.down_proj.weight']).toBe('q4_k');
    expect(t['model.layers.2.self_attn.q_a_layernorm.weight']).toBe('keep');
    // kv_b is attn_v-like (llama.cpp's attn_kv_b): the third of four, a use_more_bits one.
    expect(t['model.layers.2.self_attn.kv_b_proj.weight']).toBe('q6_k');
    expect(t['model.embed_tokens.weight']).toBe('q4_k');
    expect(t['lm_head.weight']).toBe('q6_k');
    const routers = r.tensors.filter((x) => x.role === 'router');
    expect(routers.length).toBe(6);
    expect(routers.every((x) => x.reason === 'protected: router')).toBe(true);
  });

  it('int4w / adaptive / nf4: experts quantized, router, norms, embeddings and lm_head kept', () => {
    for (const name of ['int4w', 'adaptive', 'nf4', 'mxfp4', 'nvfp4']) {
      const r = resolvePlan(getPreset(name).plan, tensors, { getFormat: lookup });
      for (const x of r.tensors) {
        const keep = ['router', 'norm', 'embedding', 'output'].includes(x.role) || x.shape.length < 2;
        expect(x.scheme === 'keep', `${name} ${x.name}`).toBe(keep);
      }
      if (name === 'adaptive') {
        expect(r.ok).toBe(true);
        const byName = (n: string) => r.tensors.find((x) => x.name === n)!.scheme;
        expect(byName('model.layers.1.mlp.experts.2.down_proj.weight')).toEqual({ format: 'int4', groupSize: 128 });
        expect(byName('model.layers.1.mlp.shared_experts.up_proj.weight')).toEqual({ format: 'int4', groupSize: 128 });
        expect(byName('model.layers.1.self_attn.kv_b_proj.weight')).toEqual({ format: 'int8', granularity: 'channel' });
      }
    }
  });
});

describe("llama.cpp's shape-dependent tweaks", () => {
  /** GGUF-named model: 8 layers, d = 512, 8 query heads per 2 KV heads (gqa 4), optional fused experts. */
  const ggufModel = (experts: number): TensorDesc[] => {
    const t: TensorDesc[] = [{ name: 'token_embd.weight', shape: [1000, 512], dtype: 'F16' }];
    for (let i = 0; i < 8; i++) {
      t.push(
        { name: `blk.${i}.attn_norm.weight`, shape: [512], dtype: 'F32' },
        { name: `blk.${i}.attn_q.weight`, shape: [512, 512], dtype: 'F16' },
        { name: `blk.${i}.attn_k.weight`, shape: [128, 512], dtype: 'F16' },
        { name: `blk.${i}.attn_v.weight`, shape: [128, 512], dtype: 'F16' },
        { name: `blk.${i}.attn_output.weight`, shape: [512, 512], dtype: 'F16' },
      );
      if (experts) {
        t.push(
          { name: `blk.${i}.ffn_gate_inp.weight`, shape: [experts, 512], dtype: 'F32' },
          { name: `blk.${i}.ffn_gate_exps.weight`, shape: [experts, 1024, 512], dtype: 'F16' },
          { name: `blk.${i}.ffn_down_exps.weight`, shape: [experts, 512, 1024], dtype: 'F16' },
        );
      } else {
        t.push({ name: `blk.${i}.ffn_down.weight`, shape: [512, 1024], dtype: 'F16' });
      }
    }
    t.push({ name: 'output_norm.weight', shape: [512], dtype: 'F32' }, { name: 'output.weight', shape: [1000, 512], dtype: 'F16' });
    return t;
  };

  it('8-expert models: attn_v / attn_k Q8_0, attn_output Q5_K (Q4_K_M); fused experts counted from their shape', () => {
    const r = resolvePlan(getPreset('q4_k_m').plan, ggufModel(8), { getFormat: lookup });
    expect(r.nExperts).toBe(8);
    expect(r.gqa).toBe(4);
    const t = table(r);
    for (let i = 0; i < 8; i++) {
      expect(t[`blk.${i}.attn_v.weight`]).toBe('q8_0');
      expect(t[`blk.${i}.attn_k.weight`]).toBe('q8_0');
      expect(t[`blk.${i}.attn_output.weight`]).toBe('q5_k');
      expect(t[`blk.${i}.attn_q.weight`]).toBe('q4_k');
      expect(t[`blk.${i}.ffn_gate_inp.weight`]).toBe('keep');
      // 8 layers: use_more_bits = 0, 7 and (i - 1) % 3 == 2 -> 3, 6
      expect(t[`blk.${i}.ffn_down_exps.weight`], `layer ${i}`).toBe([0, 3, 6, 7].includes(i) ? 'q6_k' : 'q4_k');
    }
    expect(t['output.weight']).toBe('q6_k');
    expect(t['token_embd.weight']).toBe('q4_k');
    // Q4_0 keeps attn_output but still bumps attn_v / attn_k.
    const q4 = table(resolvePlan(getPreset('q4_0').plan, ggufModel(8), { getFormat: lookup }));
    expect([q4['blk.0.attn_v.weight'], q4['blk.0.attn_k.weight'], q4['blk.0.attn_output.weight']]).toEqual(['q8_0', 'q8_0', 'q4_0']);
    // A 4-expert model gets none of this.
    const r4 = table(resolvePlan(getPreset('q4_k_m').plan, ggufModel(4), { getFormat: lookup }));
    expect([r4['blk.1.attn_v.weight'], r4['blk.1.attn_k.weight'], r4['blk.1.attn_output.weight']]).toEqual(['q4_k', 'q4_k', 'q4_k']);
  });

  it('IQ4_NL: attn_v Q5_K when n_gqa >= 4; ffn_down Q5_K on the first eighth of layers', () => {
    const t = table(resolvePlan(getPreset('iq4_nl').plan, ggufModel(0), { getFormat: lookup }));
    expect(t['blk.3.attn_v.weight']).toBe('q5_k');
    expect(t['blk.3.attn_k.weight']).toBe('iq4_nl');
    expect(t['blk.0.ffn_down.weight']).toBe('q5_k');
    expect(t['blk.1.ffn_down.weight']).toBe('iq4_nl');
    const noGqa = table(resolvePlan(getPreset('iq4_nl').plan, ggufModel(0), { getFormat: lookup, gqa: 1 }));
    expect(noGqa['blk.3.attn_v.weight']).toBe('iq4_nl');
  });

  /**
   * llama.cpp's llama_tensor_get_type for these ftypes, transcribed as a table of decisions
   * (output Q6_K, then the name branches in llama.cpp's order; no Falcon, no 70B bump), to check
   * the presets' rules against on dense and 8-expert models of 16 and 80 layers (80 with GQA:
   * llama.cpp's 70B class), with and without an importance matrix, at gqa 4 and 1.
   */
  function llamaCppType(ftype: string, name: string, nLayers: number, gqa: number, nExperts: number, imatrix: boolean, is70B: boolean): string {
    const base: Record<string, string> = {
      q2_k: 'q2_k', q2_k_s: 'q2_k', iq3_xs: 'iq3_s', q3_k_s: 'q3_k', q3_k_m: 'q3_k', q3_k_l: 'q3_k', q4_k_s: 'q4_k', q4_k_m: 'q4_k', q5_k_s: 'q5_k', q5_k_m: 'q5_k', q4_0: 'q4_0', q4_1: 'q4_1', q5_0: 'q5_0', q5_1: 'q5_1', iq4_nl: 'iq4_nl', iq4_xs: 'iq4_xs',
      iq2_xxs: 'iq2_xxs', iq2_xs: 'iq2_xs', iq2_s: 'iq2_xs', iq2_m: 'iq2_s', iq1_s: 'iq1_s', iq1_m: 'iq1_m', iq3_xxs: 'iq3_xxs', iq3_s: 'iq3_s', iq3_m: 'iq3_s',
      tq1_0: 'tq1_0', tq2_0: 'tq2_0', q1_0: 'q1_0', q2_0: 'q2_0',
    };
    const more = (i: number, n: number) => i < Math.floor(n / 8) || i >= Math.floor(7 * n / 8) || (i - Math.floor(n / 8)) % 3 === 2;
    const layer = Number(/^blk\.(\d+)\./.exec(name)?.[1] ?? -1);
    const lowIq = ['iq2_xxs', 'iq2_xs', 'iq2_s', 'iq2_m', 'iq1_s', 'iq1_m'].includes(ftype);
    // category_is_attn_v: the fused attn_qkv and attn_kv_b take attn_v's branch.
    const attnV = ['attn_qkv.weight', 'attn_kv_b.weight', 'attn_v.weight'].some((x) => name.includes(x));
    let t = base[ftype];
    if (name === 'output.weight') return lowIq || ftype === 'iq3_xxs' ? 'q5_k' : 'q6_k';
    if (name === 'token_embd.weight') {
      if (['iq2_xxs', 'iq2_xs', 'iq1_s', 'iq1_m'].includes(ftype)) return 'q2_k';
      if (['iq2_s', 'iq2_m', 'iq3_xxs'].includes(ftype)) return 'iq3_s';
      if (['tq1_0', 'tq2_0', 'q2_0'].includes(ftype)) return 'q4_k';
      return t;
    }
    if (lowIq) {
      const s2 = ftype === 'iq2_s' || ftype === 'iq2_m';
      if (attnV) return gqa >= 4 || nExperts >= 4 ? 'q4_k' : s2 ? 'iq3_s' : 'q2_k';
      if (nExperts === 8 && name.includes('attn_k.weight')) return 'q4_k';
      if (name.includes('ffn_down')) return layer < Math.floor(nLayers / 8) ? (s2 ? 'iq3_s' : 'q2_k') : t;
      if (name.includes('attn_output.weight')) {
        if (nExperts === 8) return 'q5_k';
        if (ftype === 'iq1_s' || ftype === 'iq1_m') return 'iq2_xxs';
        if (s2) return 'iq3_s';
      }
      return t;
    }
    if (attnV) {
      if (ftype === 'iq3_xxs') t = gqa >= 4 ? 'q4_k' : !imatrix ? 'iq3_s' : 'iq3_xxs';
      else if (ftype === 'iq3_s' && gqa >= 4) t = 'q4_k';
      else if (ftype === 'iq3_m') t = 'q4_k';
      else if (ftype === 'q2_k') t = gqa >= 4 ? 'q4_k' : 'q3_k';
      else if (ftype === 'q2_k_s' && gqa >= 4) t = 'q4_k';
      else if (ftype === 'iq3_xs' && gqa >= 4) t = 'q4_k';
      else if (ftype === 'q3_k_m') t = layer < 2 ? 'q5_k' : 'q4_k';
      else if (ftype === 'q3_k_l') t = 'q5_k';
      else if ((ftype === 'iq4_nl' || ftype === 'iq4_xs') && gqa >= 4) t = 'q5_k';
      else if ((ftype === 'q4_k_m' || ftype === 'q5_k_m') && more(layer, nLayers)) t = 'q6_k';
      else if (ftype === 'q4_k_s' && layer < 4) t = 'q5_k';
      if (is70B && (t === 'q3_k' || t === 'q4_k')) t = 'q5_k';
      if (nExperts === 8) t = 'q8_0';
    } else if (name.includes('attn_k.weight')) {
      if (nExperts === 8) t = 'q8_0';
      else if (ftype === 'iq3_xs') t = 'iq3_xxs';
      else if (ftype === 'iq3_xxs') t = 'iq2_s';
    } else if (name.includes('attn_q.weight')) {
      if (ftype === 'iq3_xs') t = 'iq3_xxs';
      else if (ftype === 'iq3_xxs') t = 'iq2_s';
    } else if (name.includes('ffn_up') || name.includes('ffn_gate')) {
      if (ftype === 'iq3_xs' && layer >= Math.floor(nLayers / 8) && layer < Math.floor(7 * nLayers / 8)) t = 'iq3_xxs';
    } else if (name.includes('ffn_down')) {
      if (ftype === 'q2_k_s') { if (layer < Math.floor(nLayers / 8)) t = 'q4_k'; }
      else if (ftype === 'iq3_xxs' && !imatrix) t = layer < Math.floor(nLayers / 8) ? 'q4_k' : 'q3_k';
      else if (ftype === 'iq3_m' && (layer < Math.floor(nLayers / 8) || (nExperts === 8 && more(layer, nLayers)))) t = 'q4_k';
      else if (ftype === 'q2_k') t = 'q3_k';
      else if (ftype === 'q3_k_m') t = layer < Math.floor(nLayers / 16) ? 'q5_k' : 'q4_k';
      else if (ftype === 'q3_k_l') t = 'q5_k';
      else if (ftype === 'q4_k_m') { if (more(layer, nLayers)) t = 'q6_k'; }
      else if (layer < Math.floor(nLayers / 8) && (ftype === 'iq4_nl' || ftype === 'iq4_xs') && !imatrix) t = 'q5_k';
      else if (ftype === 'q5_k_m' && more(layer, nLayers)) t = 'q6_k';
      else if (ftype === 'q4_k_s' && layer < Math.floor(nLayers / 8)) t = 'q5_k';
      else if ((ftype === 'q4_0' || ftype === 'q5_0') && imatrix && layer < Math.floor(nLayers / 8)) t = ftype === 'q4_0' ? 'q4_1' : 'q5_1';
    } else if (name.includes('attn_output.weight')) {
      if (nExperts === 8) {
        if (['q2_k', 'iq3_xs', 'q3_k_s', 'q3_k_m', 'iq4_nl', 'q4_k_s', 'q4_k_m', 'iq4_xs', 'iq3_xxs', 'iq3_s', 'iq3_m'].includes(ftype)) t = 'q5_k';
      } else if (ftype === 'q2_k') t = 'q3_k';
      else if (ftype === 'iq3_xxs') t = 'iq3_s';
      else if (ftype === 'iq3_m') t = 'q4_k';
      else if (ftype === 'q3_k_m') t = 'q4_k';
      else if (ftype === 'q3_k_l') t = 'q5_k';
    }
    return t;
  }

  it("every llama.cpp K/legacy/IQ preset assigns llama_tensor_get_type's types (dense, fused qkv and 8-expert models; 16 or 80 layers; imatrix or not; gqa 4 or 1)", () => {
    const model = (experts: number, fused: boolean, layers: number): TensorDesc[] => {
      const t: TensorDesc[] = [{ name: 'token_embd.weight', shape: [1000, 512], dtype: 'F16' }];
      for (let i = 0; i < layers; i++) {
        t.push({ name: `blk.${i}.attn_norm.weight`, shape: [512], dtype: 'F32' });
        if (fused) t.push({ name: `blk.${i}.attn_qkv.weight`, shape: [768, 512], dtype: 'F16' });
        else t.push({ name: `blk.${i}.attn_q.weight`, shape: [512, 512], dtype: 'F16' }, { name: `blk.${i}.attn_k.weight`, shape: [128, 512], dtype: 'F16' }, { name: `blk.${i}.attn_v.weight`, shape: [128, 512], dtype: 'F16' });
        t.push({ name: `blk.${i}.attn_output.weight`, shape: [512, 512], dtype: 'F16' });
        if (experts) {
          t.push({ name: `blk.${i}.ffn_gate_inp.weight`, shape: [experts, 512], dtype: 'F32' }, { name: `blk.${i}.ffn_down_exps.weight`, shape: [experts, 512, 1024], dtype: 'F16' });
          // Fused gate / up stacks (gpt-oss style) on odd layers: llama.cpp files them under ffn_gate.
          if (i % 2) t.push({ name: `blk.${i}.ffn_gate_up_exps.weight`, shape: [experts, 2048, 512], dtype: 'F16' });
          else t.push({ name: `blk.${i}.ffn_gate_exps.weight`, shape: [experts, 1024, 512], dtype: 'F16' }, { name: `blk.${i}.ffn_up_exps.weight`, shape: [experts, 1024, 512], dtype: 'F16' });
        } else t.push({ name: `blk.${i}.ffn_gate.weight`, shape: [1024, 512], dtype: 'F16' }, { name: `blk.${i}.ffn_up.weight`, shape: [1024, 512], dtype: 'F16' }, { name: `blk.${i}.ffn_down.weight`, shape: [512, 1024], dtype: 'F16' });
      }
      t.push({ name: 'output_norm.weight', shape: [512], dtype: 'F32' }, { name: 'output.weight', shape: [1000, 512], dtype: 'F16' });
      return t;
    };
    const ftypes = ['q2_k', 'q2_k_s', 'iq3_xs', 'q3_k_s', 'q3_k_m', 'q3_k_l', 'q4_k_s', 'q4_k_m', 'q5_k_s', 'q5_k_m', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'iq4_nl', 'iq4_xs',
      'iq3_m', 'iq3_s', 'iq3_xxs', 'iq2_m', 'iq2_s', 'iq2_xs', 'iq2_xxs', 'iq1_m', 'iq1_s', 'tq1_0', 'tq2_0', 'q1_0', 'q2_0'];
    const seen = new Set<string>();
    for (const ftype of ftypes) {
      const p = getPreset(ftype);
      expect(p.fileType, ftype).toBe(LLAMA_FTYPE[`MOSTLY_${ftype.toUpperCase()}` as keyof typeof LLAMA_FTYPE]);
      for (const [experts, fused, layers] of [[0, false, 16], [0, true, 16], [8, false, 16], [0, false, 80], [8, false, 80]] as const) {
        for (const gqa of [4, 1]) {
          for (const importance of [false, true]) {
            const r = resolvePlan(p.plan, model(experts, fused, layers), { getFormat: lookup, gqa, importance });
            // llama-quantize's tensor_requires_imatrix: Q2_K in a Q2_K_S file (but token_embd).
            const refused = (t: PlannedTensor) => ftype === 'q2_k_s' && !importance && t.name !== 'token_embd.weight' && fmtOf(t) === 'q2_k';
            expect(r.problems.filter((x) => x.severity === 'error').map((x) => x.tensor), ftype).toEqual(r.tensors.filter(refused).map((t) => t.name));
            if (ftype === 'q2_k_s' && !importance) expect(r.tensors.some(refused)).toBe(true);
            const is70B = layers === 80 && gqa > 1;
            expect(r.modelType).toBe(is70B ? '70B' : undefined);
            for (const t of r.tensors) {
              const want = t.shape.length < 2 || t.name.includes('ffn_gate_inp') ? 'keep' : llamaCppType(ftype, t.name, layers, gqa, experts, importance, is70B);
              expect(fmtOf(t), `${ftype} experts=${experts} fused=${fused} layers=${layers} gqa=${gqa} imatrix=${importance}: ${t.name}`).toBe(want);
              seen.add(`${ftype}:${want}`);
            }
          }
        }
      }
    }
    // The table above reaches every bump it describes.
    for (const k of ['q2_k:q4_k', 'q2_k:q3_k', 'q2_k:q5_k', 'q3_k_s:q5_k', 'q3_k_m:q5_k', 'q3_k_m:q4_k', 'q3_k_l:q5_k', 'q4_k_s:q5_k', 'q5_k_m:q6_k', 'q4_0:q4_1', 'q5_0:q5_1', 'iq4_xs:q5_k', 'q4_k_m:q5_k',
      'iq3_m:q4_k', 'iq3_m:q5_k', 'iq3_m:q8_0', 'iq3_s:q4_k', 'iq3_s:q5_k', 'iq3_xxs:iq2_s', 'iq3_xxs:iq3_s', 'iq3_xxs:q3_k', 'iq3_xxs:q4_k', 'iq3_xxs:q5_k',
      'iq2_m:iq3_s', 'iq2_m:q4_k', 'iq2_s:iq3_s', 'iq2_xs:q2_k', 'iq2_xxs:q2_k', 'iq2_xxs:q4_k', 'iq1_m:iq2_xxs', 'iq1_s:iq2_xxs', 'iq1_s:q5_k', 'tq1_0:q4_k', 'q2_0:q4_k', 'q2_0:q8_0', 'q1_0:q6_k', 'q1_0:q8_0',
      'q2_k_s:q4_k', 'q2_k_s:q5_k', 'q2_k_s:q8_0', 'iq3_xs:iq3_xxs', 'iq3_xs:q4_k', 'iq3_xs:q5_k', 'iq3_xs:q6_k']) expect(seen.has(k), k).toBe(true);
  });

  it('GGUF presets skip the 2-D tensors llama-quantize never touches', () => {
    const r = resolvePlan(getPreset('q4_k_m').plan, [{ name: 'blk.0.ssm_conv1d.weight', shape: [4, 1024], dtype: 'F32' }], { getFormat: lookup });
    expect(r.tensors[0].scheme).toBe('keep');
    expect(r.tensors[0].reason).toMatch(/^skip /);
  });
});

describe('scale', () => {
  it('resolves and estimates a DeepSeek-V3-sized list (61 layers x 256 experts)', () => {
    const t: TensorDesc[] = [];
    for (let i = 0; i < 61; i++) {
      t.push({ name: `model.layers.${i}.mlp.gate.weight`, shape: [256, 7168], dtype: 'BF16' });
      for (let e = 0; e < 256; e++) {
        t.push(
          { name: `model.layers.${i}.mlp.experts.${e}.gate_proj.weight`, shape: [2048, 7168], dtype: 'F8_E4M3' },
          { name: `model.layers.${i}.mlp.experts.${e}.up_proj.weight`, shape: [2048, 7168], dtype: 'F8_E4M3' },
          { name: `model.layers.${i}.mlp.experts.${e}.down_proj.weight`, shape: [7168, 2048], dtype: 'F8_E4M3' },
          { name: `model.layers.${i}.mlp.experts.${e}.down_proj.weight_scale_inv`, shape: [56, 16], dtype: 'F32' },
        );
      }
    }
    const r = resolvePlan(getPreset('q4_k_m').plan, t, { getFormat: lookup });
    const est = estimatePlan(r, { getFormat: lookup });
    expect(r.ok).toBe(true);
    expect(r.nExperts).toBe(256);
    expect(r.tensors.filter((x) => x.kind === 'quant_aux').every((x) => x.scheme === 'keep')).toBe(true);
    expect(est.byRole.expert!.tensors).toBe(61 * 256 * 3);
  });
});
