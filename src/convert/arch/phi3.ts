// Phi-3 / 3.5 / 4-mini as llama.cpp's phi3: fused qkv and gate_up projections (kept fused),
// partial rotary dimensions and LongRoPE's per-frequency factors (written as tensors).
import { ErrorCodes, fail } from '../../errors.js';
import { llamaMetadata, type GgufValue, type LlamaConfig } from './llama.js';

/** Phi-3's rotated dimensions per head: int(partial_rotary_factor * hidden_size) // heads, as the converter. */
export function phi3RopeDims(cfg: Pick<LlamaConfig, 'partial_rotary_factor' | 'hidden_size' | 'num_attention_heads'>): number {
  return Math.floor(Math.trunc((cfg.partial_rotary_factor ?? 1) * cfg.hidden_size) / cfg.num_attention_heads);
}

/**
 * Phi-3's LongRoPE (rope_scaling type "longrope" or "su"): the long and short per-frequency factors
 * (rope_dims/2 each) and the factor cos and sin are scaled by, sqrt(1 + ln(s)/ln(original)) with
 * s = max_position_embeddings / original_max_position_embeddings (1 when s <= 1). undefined without.
 */
export function phi3LongRope(cfg: LlamaConfig): { long: Float32Array; short: Float32Array; attnFactor: number } | undefined {
  const rs = cfg.rope_scaling;
  if (!rs) return undefined;
  const type = String(rs.rope_type ?? rs.type ?? '').toLowerCase();
  if (type !== 'longrope' && type !== 'su') {
    return fail(ErrorCodes.CONFIG, `[gguf] config.json: Phi-3 rope_scaling type "${type}" is not supported; expected "longrope" or "su"`, { option: 'rope_scaling', value: rs, expected: ['longrope', 'su'] });
  }
  const dims = phi3RopeDims(cfg);
  const factors = (key: string) => {
    const v = rs[key];
    if (!Array.isArray(v) || v.length !== dims / 2 || !v.every((x) => typeof x === 'number' && Number.isFinite(x))) {
      fail(ErrorCodes.CONFIG, `[gguf] config.json: rope_scaling.${key} must be ${dims / 2} numbers (rope dimensions / 2)`, { option: `rope_scaling.${key}`, value: Array.isArray(v) ? v.length : v, expected: dims / 2 });
    }
    return Float32Array.from(v as number[]);
  };
  const orig = cfg.original_max_position_embeddings;
  if (!orig || !cfg.max_position_embeddings) {
    fail(ErrorCodes.CONFIG, '[gguf] config.json: LongRoPE needs "max_position_embeddings" and "original_max_position_embeddings"', { option: 'original_max_position_embeddings', value: orig });
  }
  const scale = cfg.max_position_embeddings! / orig!;
  return { long: factors('long_factor'), short: factors('short_factor'), attnFactor: scale > 1 ? Math.sqrt(1 + Math.log(scale) / Math.log(orig!)) : 1 };
}

/**
 * The `general.*` and `phi3.*` keys llama.cpp reads for a Phi-3 model (convert_hf_to_gguf's
 * Phi3MiniModel): Phi-3 mini/medium, Phi-3.5-mini, Phi-4-mini.
 */
export function phi3Metadata(cfg: LlamaConfig, name = 'webquant'): Record<string, GgufValue> {
  const llama = llamaMetadata(cfg, name);
  const k = (key: string) => `phi3.${key}`;
  if (!cfg.max_position_embeddings || !cfg.original_max_position_embeddings) {
    fail(ErrorCodes.CONFIG, '[gguf] config.json: a Phi-3 model needs "max_position_embeddings" and "original_max_position_embeddings"', { option: 'original_max_position_embeddings', value: cfg.original_max_position_embeddings });
  }
  const dims = phi3RopeDims(cfg), headDim = cfg.hidden_size / cfg.num_attention_heads;
  if (dims < 2 || dims % 2 !== 0 || dims > headDim) {
    fail(ErrorCodes.CONFIG, `[gguf] config.json: partial_rotary_factor ${cfg.partial_rotary_factor ?? 1} rotates ${dims} of ${headDim} dimensions per head; expected an even number from 2 to ${headDim}`, { option: 'partial_rotary_factor', value: cfg.partial_rotary_factor });
  }
  const md: Record<string, GgufValue> = {
    'general.architecture': { type: 'string', value: 'phi3' },
    'general.name': llama['general.name'],
    [k('context_length')]: { type: 'u32', value: cfg.max_position_embeddings! },
    [k('rope.scaling.original_context_length')]: { type: 'u32', value: cfg.original_max_position_embeddings! },
    [k('embedding_length')]: { type: 'u32', value: cfg.hidden_size },
    [k('feed_forward_length')]: { type: 'u32', value: cfg.intermediate_size },
    [k('block_count')]: { type: 'u32', value: cfg.num_hidden_layers },
    [k('attention.head_count')]: { type: 'u32', value: cfg.num_attention_heads },
    [k('attention.head_count_kv')]: { type: 'u32', value: cfg.num_key_value_heads ?? cfg.num_attention_heads },
    [k('attention.layer_norm_rms_epsilon')]: { type: 'f32', value: cfg.rms_norm_eps ?? 1e-5 },
    [k('rope.dimension_count')]: { type: 'u32', value: phi3RopeDims(cfg) },
    [k('rope.freq_base')]: { type: 'f32', value: cfg.rope_theta ?? 10000 },
    // 0 tells Phi-4 (no window) from the other Phi-3 models, as the converter writes it.
    [k('attention.sliding_window')]: { type: 'u32', value: cfg.sliding_window ?? 0 },
  };
  const lr = phi3LongRope(cfg);
  if (lr) md[k('rope.scaling.attn_factor')] = { type: 'f32', value: lr.attnFactor };
  return md;
}
