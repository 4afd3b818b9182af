// recommend(): the preset that fits a memory budget.
import { describe, expect, it } from 'vitest';
import { estimatePlan, getPreset, recommend, resolvePlan, syntheticModel } from '../../src/plan/index.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';
import { fixtureLookup, stories260K } from './fixtures.js';

const getFormat = fixtureLookup();
const tensors = stories260K();
const getPresetQuality = (name: string) => getPreset(name).quality;
const size = (preset: string) => estimatePlan(resolvePlan(getPreset(preset).plan, tensors, { getFormat }), { getFormat }).bytes;

describe('recommend', () => {
  it('quality: the best preset that fits; the budget decides between Q8_0, Q6_K, Q5_K_M and Q4_K_M', () => {
    const gguf = { tensors, getFormat, container: 'gguf' as const };
    // Everything fits: F16 (or BF16) is the best quality there is.
    expect(['f16', 'bf16']).toContain(recommend({ ...gguf, memoryBudget: 10e6 }).preset.name);
    const q8 = size('q8_0');
    const q4km = size('q4_k_m');
    const q5km = size('q5_k_m');
    expect(recommend({ ...gguf, memoryBudget: q8 }).preset.name).toBe('q8_0');
    const mid = recommend({ ...gguf, memoryBudget: q8 - 1 });
    // Q6_K falls back to Q8_0 on every 64-wide row of this model, so it is the same size: the next
    // is Q5_K_M (Q5_K -> Q5_1 here).
    expect(mid.preset.name).toBe('q5_k_m');
    expect(mid.bytes).toBe(q5km);
    expect(mid.exact).toBe(true);
    expect(mid.reason).toMatch(new RegExp(`^q5_k_m: the highest-quality preset that fits \\(${q5km} bytes`));
    expect(mid.candidates.find((c) => c.preset === 'q8_0')).toMatchObject({ fits: false, bytes: q8 });
    expect(recommend({ ...gguf, memoryBudget: q5km - 1 }).preset.name).not.toBe('q5_k_m');
    const low = recommend({ ...gguf, memoryBudget: q4km });
    expect(low.bytes).toBeLessThanOrEqual(q4km);
    expect(getPresetQuality(low.preset.name)).toBeGreaterThanOrEqual(getPresetQuality('q4_k_m'));
    expect(recommend({ ...gguf, memoryBudget: q4km - 1 }).bytes).toBeLessThan(q4km);
  });

  it('size and speed targets', () => {
    const gguf = { tensors, getFormat, container: 'gguf' as const, memoryBudget: 10e6 };
    const small = recommend({ ...gguf, target: 'size' });
    expect(small.bytes).toBe(Math.min(...small.candidates.filter((c) => c.bytes !== undefined).map((c) => c.bytes!)));
    // Q4_0 and IQ4_NL tie on size here; quality breaks the tie.
    expect(small.preset.name).toBe('iq4_nl');
    expect(recommend({ ...gguf, target: 'speed' }).preset.name).toBe('q8_0');
  });

  it('leaves out the presets for checkpoints trained ternary or binary unless they are named', () => {
    const gguf = { tensors, getFormat, container: 'gguf' as const, memoryBudget: 10e6 };
    const trainedOnly = ['tq1_0', 'tq2_0', 'q1_0', 'q2_0'];
    expect(trainedOnly.every((n) => getPreset(n).trainedOnly)).toBe(true);
    const all = recommend({ ...gguf, target: 'size' });
    expect(all.candidates.map((c) => c.preset).filter((n) => trainedOnly.includes(n))).toEqual([]);
    // Named, Q2_0 fits this model's 64-wide rows and is the smallest.
    const named = recommend({ ...gguf, target: 'size', presets: ['q2_0', 'q4_0', 'iq4_nl'] });
    expect(named.preset.name).toBe('q2_0');
    expect(named.bytes).toBeLessThan(all.bytes);
  });

  it('throws E_BUDGET when nothing fits, naming the smallest option', () => {
    let err: unknown;
    try { recommend({ tensors, getFormat, memoryBudget: 1000 }); } catch (e) { err = e; }
    expect(err).toBeInstanceOf(WebquantError);
    expect((err as WebquantError).code).toBe(ErrorCodes.BUDGET);
    expect((err as WebquantError).message).toMatch(/no preset fits 1000 bytes; the smallest, \w+, needs \d+ bytes/);
    expect(() => recommend({ tensors, memoryBudget: -1 })).toThrow(/memoryBudget/);
    expect(() => recommend({ memoryBudget: 1e9 })).toThrow(/modelBytes and paramCount/);
    expect(() => recommend({ tensors, memoryBudget: 1e9, target: 'fast' as never })).toThrow(/target/);
  });

  it('from modelBytes + paramCount: a 7B BF16 model in 5 GB gets a 4-bit mixture', () => {
    const r = recommend({ modelBytes: 14e9, paramCount: 7e9, memoryBudget: 4.5e9, getFormat, container: 'gguf' });
    expect(r.preset.name).toBe('q4_k_m');
    expect(r.exact).toBe(false);
    expect(r.bpw).toBeGreaterThan(4.5);
    expect(r.bpw).toBeLessThan(5.2);
    expect(r.bytes).toBeLessThanOrEqual(4.5e9);
    expect(r.reason).toMatch(/synthetic model/);
    // 5 GB: Q5_K_M (about 5.7 bpw, as llama.cpp's 7B Q5_K_M files) fits.
    const r5 = recommend({ modelBytes: 14e9, paramCount: 7e9, memoryBudget: 5e9, getFormat, container: 'gguf' });
    expect(r5.preset.name).toBe('q5_k_m');
    expect(r5.bpw).toBeGreaterThan(5.5);
    expect(r5.bpw).toBeLessThan(5.8);
    // 8 GB: Q8_0 (7.4 GB) fits.
    expect(recommend({ modelBytes: 14e9, paramCount: 7e9, memoryBudget: 8e9, getFormat, container: 'gguf' }).preset.name).toBe('q8_0');
  });

  it('the synthetic model has about the requested parameter count', () => {
    for (const p of [1e8, 1.1e9, 7e9, 70e9]) {
      const n = syntheticModel(p).reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0);
      expect(Math.abs(n - p) / p).toBeLessThan(0.1);
    }
  });

  it('presets whose formats are missing are listed as unavailable, not recommended', () => {
    const r = recommend({ tensors, memoryBudget: 10e6, getFormat: fixtureLookup({ without: ['f16', 'bf16'] }), presets: ['f16', 'bf16', 'q8_0'] });
    expect(r.preset.name).toBe('q8_0');
    expect(r.candidates.find((c) => c.preset === 'f16')!.unavailable).toMatch(/unknown format "f16"/);
  });
});
