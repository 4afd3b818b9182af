// The positions llama-quantize's layer rules see. llama_tensor_get_type does not read a tensor's
// block number for attn_v or for a dense model's FFN: it counts the tensors of that category in the
// order it quantizes them, and divides by the count of attn_v-like tensors (attn_v, and also the
// fused attn_qkv and DeepSeek's attn_kv_b) or by the block count. In a model with attention or an
// FFN in only some blocks (LFM2, Qwen3-Next, Nemotron-H, a pruned model) those numbers are not
// block numbers, so rules marked `layerCount` use these instead.

/** llama-quantize's tensor categories that have counters, by name as tensor_get_category tells them. */
export type LlamaCounted = 'attn_v' | 'ffn_up' | 'ffn_gate' | 'ffn_down';

export function llamaCategory(name: string): LlamaCounted | undefined {
  if (name === 'output.weight' || name === 'token_embd.weight' || name === 'per_layer_token_embd.weight') return undefined;
  if (name.includes('attn_qkv.weight') || name.includes('attn_kv_b.weight') || name.includes('attn_v.weight')) return 'attn_v';
  if (name.includes('attn_k.weight') || name.includes('attn_q.weight') || name.includes('attn_output.weight')) return undefined;
  if (name.includes('ffn_up')) return 'ffn_up';
  if (name.includes('ffn_gate')) return 'ffn_gate';
  if (name.includes('ffn_down')) return 'ffn_down';
  return undefined;
}

/** What a layer selector sees for one tensor: `index` of `of`. */
export interface LayerPosition {
  index: number;
  of: number;
}

export interface CounterInput {
  name: string;
  /** Row-major (GGUF ne reversed). */
  shape: readonly number[];
  /** Block number (blk.N). */
  layer?: number;
}

/**
 * The part of tensor_allows_quantization that can exempt a counted category: only tensors it
 * lets through reach llama_tensor_get_type and advance a counter (ffn_gate_inp, a router, is
 * named like ffn_gate; ggml_n_dims ignores trailing dimensions of 1).
 */
function reachesCounters(t: CounterInput): boolean {
  let dims = t.shape.length;
  while (dims > 1 && t.shape[t.shape.length - dims] === 1) dims--;
  return dims >= 2 && t.name.endsWith('weight') && !t.name.includes('_norm.weight') && !t.name.includes('ffn_gate_inp.weight');
}

/**
 * Each counted tensor's position for rules with `layerCount` 'llama' (llama.cpp's layer_info:
 * attn_v by its counter over n_attention_wv; the FFN by its block with more than one expert, else
 * by its counter, over the block count) and 'llama-raw' (the counter always: the IQ1 / IQ2
 * ftypes' ffn_down). Tensors go in llama-quantize's order: those outside the blocks by name, then
 * block by block, by name. Tensors a --tensor-type pattern claims (`claimed`) skip the counters,
 * as llama-quantize decides them before llama_tensor_get_type; n_attention_wv counts them still.
 */
export function llamaPositions(tensors: readonly CounterInput[], o: { nExperts: number; blocks: number; claimed?: ReadonlySet<string> }): { llama: Map<string, LayerPosition>; raw: Map<string, LayerPosition> } {
  const inOrder = tensors.filter((t) => llamaCategory(t.name) !== undefined)
    .sort((a, b) => (a.layer ?? -1) - (b.layer ?? -1) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  // init_quantize_state_counters counts by name over every tensor.
  const attnV = inOrder.filter((t) => llamaCategory(t.name) === 'attn_v').length;
  const next: Record<LlamaCounted, number> = { attn_v: 0, ffn_up: 0, ffn_gate: 0, ffn_down: 0 };
  const llama = new Map<string, LayerPosition>(), raw = new Map<string, LayerPosition>();
  for (const t of inOrder) {
    if (!reachesCounters(t) || o.claimed?.has(t.name)) continue;
    const cat = llamaCategory(t.name)!;
    const i = next[cat]++;
    if (cat === 'attn_v') {
      llama.set(t.name, { index: i, of: attnV });
      raw.set(t.name, { index: i, of: attnV });
    } else {
      llama.set(t.name, { index: o.nExperts > 1 && t.layer !== undefined ? t.layer : i, of: o.blocks });
      raw.set(t.name, { index: i, of: o.blocks });
    }
  }
  return { llama, raw };
}
