// What llama-quantize's per-ftype rules read from the model's hyper-parameters rather than from
// its tensors: n_gqa (n_head / n_head_kv of layer 0, integer division), n_expert and the size
// class (LLM_TYPE_70B, which each architecture's loader decides). Read from the GGUF keys the
// model is loaded with (the input's, --override-kv's applied), so a fused attn_qkv or an MLA
// model gets the same answer as llama.cpp. Resolved by resolvePlan's caller (ResolveOptions).
import type { ResolveOptions } from './types.js';

/** One GGUF key's value as the readers give it (arrays as arrays). */
export type KeyValue = unknown;

const first = (v: KeyValue): number | undefined => {
  const x = Array.isArray(v) ? v[0] : v;
  return typeof x === 'number' ? x : typeof x === 'bigint' ? Number(x) : undefined;
};

/**
 * gqa, nExperts and modelType for resolvePlan from GGUF keys (`get(key)`); a fact the keys do
 * not give is left out, for resolvePlan to infer from the tensors.
 */
export function llamaHparams(get: (key: string) => KeyValue): Pick<ResolveOptions, 'gqa' | 'nExperts' | 'modelType'> {
  const arch = get('general.architecture');
  if (typeof arch !== 'string') return {};
  const k = (key: string) => get(`${arch}.${key}`);
  const nHead = first(k('attention.head_count'));
  const nHeadKv = first(k('attention.head_count_kv')) ?? nHead;
  const nLayer = first(k('block_count'));
  const nExpert = first(k('expert_count')) ?? 0;
  const out: Pick<ResolveOptions, 'gqa' | 'nExperts' | 'modelType'> = { nExperts: nExpert };
  if (nHead !== undefined && nHeadKv !== undefined) out.gqa = nHeadKv === 0 ? 0 : Math.floor(nHead / nHeadKv);
  // The loaders that answer LLM_TYPE_70B (llama: 80 layers of grouped-query attention, and not
  // with 8 experts, which are 8x7B / 8x22B; qwen2, deci, olmo: 80 layers; jais2: 68).
  const is70B = arch === 'llama' ? nExpert !== 8 && nLayer === 80 && nHead !== nHeadKv
    : ['qwen2', 'deci', 'olmo'].includes(arch) ? nLayer === 80
      : arch === 'jais2' ? nLayer === 68 : false;
  out.modelType = is70B ? '70B' : null;
  return out;
}
