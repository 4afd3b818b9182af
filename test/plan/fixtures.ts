// Tensor lists and a format lookup for plan tests. The lookup describes block geometry only
// (shared/spec §17 table), so plan logic is tested for every GGUF type whether or not its kernel
// has landed in the registry yet; tests against the real registry live beside these.
import { formats, getFormat } from '../../src/formats/registry.js';
import type { FormatSpec } from '../../src/formats/types.js';
import type { TensorDesc } from '../../src/plan/index.js';
import { ErrorCodes, fail } from '../../src/errors.js';

const GGUF_GEOMETRY: [string, number, number, number][] = [
  ['q4_0', 2, 32, 18], ['q4_1', 3, 32, 20], ['q5_0', 6, 32, 22], ['q5_1', 7, 32, 24], ['q8_0', 8, 32, 34],
  ['q2_k', 10, 256, 84], ['q3_k', 11, 256, 110], ['q4_k', 12, 256, 144], ['q5_k', 13, 256, 176], ['q6_k', 14, 256, 210],
  ['iq4_nl', 20, 32, 18], ['iq4_xs', 23, 256, 136], ['f16', 1, 1, 2], ['bf16', 30, 1, 2],
  ['iq2_xxs', 16, 256, 66], ['iq2_xs', 17, 256, 74], ['iq3_xxs', 18, 256, 98], ['iq1_s', 19, 256, 50], ['iq3_s', 21, 256, 110],
  ['iq2_s', 22, 256, 82], ['iq1_m', 29, 256, 56], ['tq1_0', 34, 256, 54], ['tq2_0', 35, 256, 66],
];

function geometrySpec(name: string, type: number, blockSize: number, typeSize: number): FormatSpec {
  return {
    name, family: 'gguf', description: `${name} geometry (test fixture)`, kernel: name,
    ggml: { type, blockSize, typeSize }, blockSize: () => blockSize, calibrations: ['default'], importance: false,
    rowSections: (rowLen) => [{ name: 'data', bytes: (rowLen / blockSize) * typeSize }],
  };
}

/** A non-GGUF format with group / channel granularity, for the generic fallback. */
const grp: FormatSpec = {
  name: 'grp', family: 'int', description: 'group format (test fixture)', kernel: 'grp',
  blockSize: (o) => (o.granularity === 'group' ? o.groupSize : 1), calibrations: ['absmax'], importance: false,
  groupSizes: [32, 64, 128], granularities: ['group', 'channel'], defaults: { groupSize: 128, granularity: 'group', bits: 4 },
  rowSections: (rowLen, o) => [{ name: 'codes', bytes: rowLen / 2 }, { name: 'scales', bytes: o.granularity === 'group' ? (rowLen / o.groupSize) * 4 : 4 }],
};
/** Group-only (no channel granularity). */
const grpOnly: FormatSpec = { ...grp, name: 'grponly', granularities: ['group'] };

export function fixtureLookup(opts: { without?: string[] } = {}): (name: string) => FormatSpec {
  const m = new Map<string, FormatSpec>();
  for (const [n, t, b, s] of GGUF_GEOMETRY) if (!opts.without?.includes(n)) m.set(n, geometrySpec(n, t, b, s));
  m.set('grp', grp);
  m.set('grponly', grpOnly);
  return (name: string) => {
    const f = m.get(String(name).toLowerCase());
    if (f) return f;
    // Everything else (int family, bnb, ...) from the real registry, refusing what it refuses.
    if (opts.without?.includes(String(name).toLowerCase())) {
      return fail(ErrorCodes.UNKNOWN_FORMAT, `[quantize] unknown format "${name}" (fixture)`, { option: 'format', value: name });
    }
    return getFormat(name);
  };
}

export { formats };

/** stories260K as its safetensors header lists it (tied embeddings, dim 64, hidden 172, 5 layers, vocab 512). */
export function stories260K(): TensorDesc[] {
  const t: TensorDesc[] = [{ name: 'model.embed_tokens.weight', shape: [512, 64], dtype: 'F32' }];
  for (let i = 0; i < 5; i++) {
    const p = `model.layers.${i}`;
    t.push(
      { name: `${p}.input_layernorm.weight`, shape: [64], dtype: 'F32' },
      { name: `${p}.mlp.down_proj.weight`, shape: [64, 172], dtype: 'F32' },
      { name: `${p}.mlp.gate_proj.weight`, shape: [172, 64], dtype: 'F32' },
      { name: `${p}.mlp.up_proj.weight`, shape: [172, 64], dtype: 'F32' },
      { name: `${p}.post_attention_layernorm.weight`, shape: [64], dtype: 'F32' },
      { name: `${p}.self_attn.k_proj.weight`, shape: [32, 64], dtype: 'F32' },
      { name: `${p}.self_attn.o_proj.weight`, shape: [64, 64], dtype: 'F32' },
      { name: `${p}.self_attn.q_proj.weight`, shape: [64, 64], dtype: 'F32' },
      { name: `${p}.self_attn.v_proj.weight`, shape: [32, 64], dtype: 'F32' },
    );
  }
  t.push({ name: 'model.norm.weight', shape: [64], dtype: 'F32' });
  return t;
}

/**
 * A small DeepSeek-V3-shaped MoE: layer 0 dense, layers 1..3 MoE with 4 routed experts, one shared
 * expert, a router with score-correction bias, MLA attention; untied lm_head. BF16.
 */
export function deepseekMoE(): TensorDesc[] {
  const H = 512, heads = 4, nope = 64, rope = 64, vdim = 128, qLora = 256, kvLora = 256, ffn = 1024, moeFfn = 256, E = 4, L = 4, V = 1024;
  const t: TensorDesc[] = [{ name: 'model.embed_tokens.weight', shape: [V, H], dtype: 'BF16' }];
  for (let i = 0; i < L; i++) {
    const p = `model.layers.${i}`;
    t.push(
      { name: `${p}.input_layernorm.weight`, shape: [H], dtype: 'BF16' },
      { name: `${p}.self_attn.q_a_proj.weight`, shape: [qLora, H], dtype: 'BF16' },
      { name: `${p}.self_attn.q_a_layernorm.weight`, shape: [qLora], dtype: 'BF16' },
      { name: `${p}.self_attn.q_b_proj.weight`, shape: [heads * (nope + rope), qLora], dtype: 'BF16' },
      { name: `${p}.self_attn.kv_a_proj_with_mqa.weight`, shape: [kvLora + rope, H], dtype: 'BF16' },
      { name: `${p}.self_attn.kv_a_layernorm.weight`, shape: [kvLora], dtype: 'BF16' },
      { name: `${p}.self_attn.kv_b_proj.weight`, shape: [heads * (nope + vdim), kvLora], dtype: 'BF16' },
      { name: `${p}.self_attn.o_proj.weight`, shape: [H, heads * vdim], dtype: 'BF16' },
      { name: `${p}.post_attention_layernorm.weight`, shape: [H], dtype: 'BF16' },
    );
    if (i === 0) {
      t.push(
        { name: `${p}.mlp.gate_proj.weight`, shape: [ffn, H], dtype: 'BF16' },
        { name: `${p}.mlp.up_proj.weight`, shape: [ffn, H], dtype: 'BF16' },
        { name: `${p}.mlp.down_proj.weight`, shape: [H, ffn], dtype: 'BF16' },
      );
      continue;
    }
    t.push({ name: `${p}.mlp.gate.weight`, shape: [E, H], dtype: 'BF16' }, { name: `${p}.mlp.gate.e_score_correction_bias`, shape: [E], dtype: 'F32' });
    for (let e = 0; e < E; e++) {
      t.push(
        { name: `${p}.mlp.experts.${e}.gate_proj.weight`, shape: [moeFfn, H], dtype: 'BF16' },
        { name: `${p}.mlp.experts.${e}.up_proj.weight`, shape: [moeFfn, H], dtype: 'BF16' },
        { name: `${p}.mlp.experts.${e}.down_proj.weight`, shape: [H, moeFfn], dtype: 'BF16' },
      );
    }
    t.push(
      { name: `${p}.mlp.shared_experts.gate_proj.weight`, shape: [moeFfn, H], dtype: 'BF16' },
      { name: `${p}.mlp.shared_experts.up_proj.weight`, shape: [moeFfn, H], dtype: 'BF16' },
      { name: `${p}.mlp.shared_experts.down_proj.weight`, shape: [H, moeFfn], dtype: 'BF16' },
    );
  }
  t.push({ name: 'model.norm.weight', shape: [H], dtype: 'BF16' }, { name: 'lm_head.weight', shape: [V, H], dtype: 'BF16' });
  return t;
}
