// Size estimates: exact against quantize() for every format the registry has, and by hand for
// llama.cpp's Q4_K_M mixture on stories260K.
import { describe, expect, it } from 'vitest';
import { quantize } from '../../src/quantize.js';
import { layoutOf, type FormatSpec } from '../../src/formats/types.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';
import { estimatePlan, getPreset, listPresets, resolvePlan, type Plan, type Scheme, type TensorDesc, type ResolvedPlan } from '../../src/plan/index.js';
import { fixtureLookup, formats, stories260K } from './fixtures.js';
import { withImportance } from '../helpers/data.js';

function lcgValues(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 2 ** 32 - 0.5) * 0.2;
  }
  return out;
}

/** Option variants a format's registry entry admits: defaults, each bits, group size and granularity. */
function variants(spec: FormatSpec): Scheme[] {
  const v: Scheme[] = [{ format: spec.name }];
  for (const bits of spec.bits ?? []) v.push({ format: spec.name, bits });
  for (const groupSize of spec.groupSizes ?? []) v.push({ format: spec.name, groupSize, ...(spec.granularities?.includes('group') ? { granularity: 'group' as const } : {}) });
  for (const granularity of spec.granularities ?? []) v.push({ format: spec.name, granularity });
  if (spec.doubleQuant) v.push({ format: spec.name, doubleQuant: true });
  return v;
}

/** Quantizes every planned tensor; returns actual output bytes per tensor (kept: stored F32 bytes). */
async function actualBytes(r: ResolvedPlan, notBuilt: Set<string>): Promise<number[] | undefined> {
  const out: number[] = [];
  let seed = 1;
  for (const t of r.tensors) {
    if (t.scheme === 'keep') { out.push(t.params * 4); continue; }
    try {
      const qt = await quantize(lcgValues(t.params, seed++), withImportance({ ...t.scheme, rowLength: t.rowLength, name: t.name }, formats.get(t.scheme.format)));
      expect(qt.layout).toEqual(layoutOf(formats.get(t.scheme.format)!, t.rows, t.rowLength, t.options!));
      out.push(qt.data.length);
    } catch (e) {
      // A registry entry whose kernel is not in the current wasm build yet cannot be measured.
      if (e instanceof WebquantError && e.code === ErrorCodes.WASM_LOAD) { notBuilt.add(t.scheme.format); return undefined; }
      throw e;
    }
  }
  return out;
}

describe('estimatePlan', () => {
  it('equals quantize() output sizes for every registry format and option variant', async () => {
    const checked = new Set<string>();
    const notBuilt = new Set<string>();
    const tensors: TensorDesc[] = [
      { name: 'model.layers.0.mlp.up_proj.weight', shape: [3, 1024], dtype: 'F32' },
      { name: 'model.layers.0.mlp.experts.1.down_proj.weight', shape: [5, 512], dtype: 'F32' },
      // 3-D (fused experts): rows = 2 * 3
      { name: 'blk.0.ffn_gate_exps.weight', shape: [2, 3, 768], dtype: 'F32' },
      // rows of 96 and 64 push several formats onto their fallbacks
      { name: 'model.layers.0.self_attn.q_proj.weight', shape: [4, 96], dtype: 'F32' },
      { name: 'model.layers.0.self_attn.k_proj.weight', shape: [2, 64], dtype: 'F32' },
      { name: 'model.norm.weight', shape: [64], dtype: 'F32' },
    ];
    for (const spec of formats.values()) {
      for (const scheme of variants(spec)) {
        const plan: Plan = { default: scheme, rules: [], skip: [] };
        const r = resolvePlan(plan, tensors, { importance: !!(spec.requiresImportance || spec.planRequiresImportance) });
        if (!r.ok) {
          // Only a fallback target missing from the registry may stop a valid variant.
          for (const p of r.problems.filter((x) => x.severity === 'error')) expect(p.code, p.message).toBe(ErrorCodes.UNKNOWN_FORMAT);
          continue;
        }
        const est = estimatePlan(r);
        expect(est.exact).toBe(true);
        const got = await actualBytes(r, notBuilt);
        if (!got) continue;
        expect(est.perTensor.map((t) => t.bytes), JSON.stringify(scheme)).toEqual(got);
        expect(est.bytes).toBe(got.reduce((a, b) => a + b, 0));
        checked.add(spec.name);
      }
    }
    expect([...checked]).toEqual(expect.arrayContaining(['q8_0', 'q4_0']));
    // Every registered format with a built kernel was measured.
    expect([...formats.keys()].filter((f) => !checked.has(f) && !notBuilt.has(f))).toEqual([]);
  });

  it('equals the sum of quantize() outputs for whole presets on stories260K', async () => {
    const notBuilt = new Set<string>();
    let n = 0;
    const plans: Plan[] = [
      ...listPresets().map((p) => p.plan),
      // Always measurable: Q8_0 with the 172-wide rows left alone.
      { default: { format: 'q8_0' }, rules: [], skip: ['/down_proj/'] },
    ];
    for (const plan of plans) {
      const r = resolvePlan(plan, stories260K());
      if (!r.ok) continue;
      const got = await actualBytes(r, notBuilt);
      if (!got) continue;
      const est = estimatePlan(r);
      expect(est.perTensor.map((t) => t.bytes), plan.name).toEqual(got);
      n++;
    }
    expect(n).toBeGreaterThan(0);
  });

  it("q4_k_m on stories260K: llama.cpp's mixture byte for byte", () => {
    const r = resolvePlan(getPreset('q4_k_m').plan, stories260K(), { getFormat: fixtureLookup() });
    const est = estimatePlan(r, { getFormat: fixtureLookup() });
    // embed (tied -> Q6_K -> Q8_0): 512 rows x 68 bytes
    const embed = 512 * 68;
    // per layer: q, o Q5_0 64x44; k Q5_0 32x44; v Q5_0 32x44 or Q8_0 32x68 (layers 2, 4);
    // gate, up Q5_0 172x44; down F16 64x172x2; two F32 norms 64x4
    const layer = (more: boolean) => 2 * 64 * 44 + 32 * 44 + (more ? 32 * 68 : 32 * 44) + 2 * 172 * 44 + 64 * 172 * 2 + 2 * 64 * 4;
    const want = embed + 3 * layer(false) + 2 * layer(true) + 64 * 4;
    expect(want).toBe(267168);
    expect(est.bytes).toBe(want);
    expect(est.params).toBe(260032);
    expect(est.bpw).toBeCloseTo((8 * want) / 260032, 12);
    expect(est.inputBytes).toBe(260032 * 4);
    expect(est.byRole.norm).toEqual({ tensors: 11, params: 704, bytes: 2816, bpw: 32 });
    expect(est.byRole.embedding).toEqual({ tensors: 1, params: 32768, bytes: embed, bpw: 8.5 });
    expect(est.byFormat.f16).toEqual({ tensors: 5, params: 5 * 11008, bytes: 5 * 22016, bpw: 16 });
    expect(est.byFormat.q8_0.tensors).toBe(3);
    expect(est.quantized.bytes + est.kept.bytes).toBe(est.bytes);
    expect(Object.values(est.byRole).reduce((a, b) => a + b!.bytes, 0)).toBe(est.bytes);
  });

  it('K-quant and 32-block bits per weight come out at the spec values', () => {
    const lookup = fixtureLookup();
    const bpw = (format: string) => estimatePlan(resolvePlan({ default: { format }, rules: [], skip: [] }, [{ name: 'w', shape: [4, 4096], dtype: 'BF16' }], { getFormat: lookup }), { getFormat: lookup }).bpw;
    expect(bpw('q8_0')).toBe(8.5);
    expect(bpw('q4_0')).toBe(4.5);
    expect(bpw('q2_k')).toBe(2.625);
    expect(bpw('q3_k')).toBe(3.4375);
    expect(bpw('q4_k')).toBe(4.5);
    expect(bpw('q5_k')).toBe(5.5);
    expect(bpw('q6_k')).toBe(6.5625);
    expect(bpw('iq4_xs')).toBe(4.25);
  });

  it('tensors of unknown size make the estimate inexact instead of wrong', () => {
    const r = resolvePlan({ default: { format: 'no_such' }, rules: [], skip: [] }, [
      { name: 'w', shape: [4, 64], dtype: 'F32' },
      { name: 'x', shape: [4], dtype: 'WEIRD' },
    ]);
    const est = estimatePlan(r);
    expect(est.exact).toBe(false);
    expect(est.unknown).toEqual(['w', 'x']);
  });
});
