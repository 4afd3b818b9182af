// The checkpoint's tensors against its config.json, before anything is converted or run.
import { ErrorCodes, fail } from '../../errors.js';
import { EXPERT, LAYER, languageModelName, type LlamaConfig } from './llama.js';
import { ggufArchitecture } from './registry.js';

/** The config.json fields checkConfigTensors compares with the tensors. */
export type ShapeConfig = Pick<LlamaConfig, 'model_type' | 'hidden_size' | 'intermediate_size' | 'num_hidden_layers' | 'num_attention_heads' | 'num_key_value_heads'
  | 'vocab_size' | 'head_dim' | 'head_dim_in_config' | 'moe_intermediate_size' | 'kv_lora_rank'>;

/** A tensor under its Llama-style name; `stored`: the name it has in the file, when another (a GGUF's). */
export interface ConfigTensor { name: string; shape: readonly number[]; stored?: string }

/** A dimension a config implies: its size and how config.json gives it (for the error). */
type ConfigDim = { size: number; keys: string[]; how: string };

/**
 * Refuses a config.json that contradicts the checkpoint's tensors (Llama-style names, as
 * familyView presents every family): the layer count (the last configured layer must be stored,
 * and no layer beyond it unless the architecture drops those, as DeepSeek-V3's multi-token
 * prediction), the embedding and head [vocab_size, hidden_size], and the attention and FFN
 * matrices' shapes from the head counts, head_dim and intermediate_size (the experts':
 * moe_intermediate_size when set). llama.cpp refuses such a GGUF or computes garbage with it,
 * and the forward reads the config's sizes. Only the tensors' list is read, never their data, and
 * nothing is enumerated from the config's counts, so a huge count costs nothing. DeepSeek's MLA
 * projections are shaped by its ranks and left to its own checks. E_TENSOR_NOT_FOUND for a missing
 * last layer, E_MODEL for a shape, naming the config key, the tensor and both values.
 */
export function checkConfigTensors(cfg: ShapeConfig, tensors: readonly ConfigTensor[], source: string, scope = 'convert'): void {
  const n = cfg.num_hidden_layers;
  let stored = 0, last: string | undefined;
  for (const t of tensors) {
    const m = LAYER.exec(languageModelName(t.name));
    if (m && Number(m[1]) + 1 > stored) [stored, last] = [Number(m[1]) + 1, m[2]];
  }
  if (n > stored) {
    const tensor = `model.layers.${n - 1}.${last ?? 'input_layernorm.weight'}`;
    fail(ErrorCodes.TENSOR_NOT_FOUND, `[${scope}] ${source}: config.json num_hidden_layers = ${n}, but there is no tensor "${tensor}": the checkpoint stores ${stored} layers`, {
      file: source, tensor, option: 'num_hidden_layers', value: n, expected: stored,
    });
  }
  if (n < stored && ggufArchitecture(cfg)?.extraLayers !== 'drop') {
    const tensor = `model.layers.${stored - 1}.${last}`;
    fail(ErrorCodes.MODEL, `[${scope}] ${source}: config.json num_hidden_layers = ${n}, but the checkpoint stores ${stored} layers ("${tensor}")`, {
      file: source, tensor, option: 'num_hidden_layers', value: n, expected: stored,
    });
  }
  const heads = cfg.num_attention_heads, kvHeads = cfg.num_key_value_heads ?? heads;
  const headDim = cfg.head_dim ?? cfg.hidden_size / heads;
  const hdKey = (cfg.head_dim_in_config ?? cfg.head_dim !== undefined) ? 'head_dim' : 'hidden_size / num_attention_heads';
  const hidden: ConfigDim = { size: cfg.hidden_size, keys: ['hidden_size'], how: `hidden_size ${cfg.hidden_size}` };
  const vocab: ConfigDim = { size: cfg.vocab_size, keys: ['vocab_size'], how: `vocab_size ${cfg.vocab_size}` };
  const q: ConfigDim = { size: heads * headDim, keys: ['num_attention_heads', 'head_dim'], how: `num_attention_heads ${heads} x head dim ${headDim} (${hdKey})` };
  const kv: ConfigDim = { size: kvHeads * headDim, keys: ['num_key_value_heads', 'head_dim'], how: `num_key_value_heads ${kvHeads} x head dim ${headDim} (${hdKey})` };
  const qkv: ConfigDim = { size: (heads + 2 * kvHeads) * headDim, keys: ['num_attention_heads', 'num_key_value_heads', 'head_dim'], how: `(num_attention_heads ${heads} + 2 x num_key_value_heads ${kvHeads}) x head dim ${headDim} (${hdKey})` };
  const ffn: ConfigDim = { size: cfg.intermediate_size, keys: ['intermediate_size'], how: `intermediate_size ${cfg.intermediate_size}` };
  const ffn2: ConfigDim = { size: 2 * cfg.intermediate_size, keys: ['intermediate_size'], how: `2 x intermediate_size ${cfg.intermediate_size}` };
  const expertKey = cfg.moe_intermediate_size !== undefined ? 'moe_intermediate_size' : 'intermediate_size';
  const eff = cfg.moe_intermediate_size ?? cfg.intermediate_size;
  const expert: ConfigDim = { size: eff, keys: [expertKey], how: `${expertKey} ${eff}` };
  const mla = cfg.kv_lora_rank !== undefined || ggufArchitecture(cfg)?.name === 'deepseek2';
  const layerShapes: Record<string, ConfigDim[]> = {
    ...(mla ? {} : {
      'self_attn.q_proj.weight': [q, hidden], 'self_attn.o_proj.weight': [hidden, q],
      'self_attn.k_proj.weight': [kv, hidden], 'self_attn.v_proj.weight': [kv, hidden],
    }),
    'self_attn.qkv_proj.weight': [qkv, hidden],
    'mlp.gate_proj.weight': [ffn, hidden], 'mlp.up_proj.weight': [ffn, hidden], 'mlp.down_proj.weight': [hidden, ffn],
    'mlp.gate_up_proj.weight': [ffn2, hidden],
  };
  const expertShapes: Record<string, ConfigDim[]> = { w1: [expert, hidden], w3: [expert, hidden], gate_proj: [expert, hidden], up_proj: [expert, hidden], w2: [hidden, expert], down_proj: [hidden, expert] };
  for (const t of tensors) {
    const name = languageModelName(t.name);
    const m = LAYER.exec(name);
    const x = m ? EXPERT.exec(name) : undefined;
    const want = name === 'model.embed_tokens.weight' || name === 'lm_head.weight' ? [vocab, hidden]
      : x ? (x[6] ?? 'weight') === 'weight' ? expertShapes[x[3] ?? x[5]] : undefined
      : m && Number(m[1]) < n ? layerShapes[m[2]] : undefined;
    if (!want) continue;
    const expected = `[${want.map((d) => d.size).join(', ')}]`;
    if (t.shape.length !== want.length) {
      fail(ErrorCodes.MODEL, `[${scope}] ${source}: "${t.stored ?? t.name}" is [${t.shape.join(', ')}], but config.json needs a matrix ${expected} (${want.map((d) => d.how).join(', ')})`, {
        file: source, tensor: t.stored ?? t.name, value: t.shape, expected,
      });
    }
    const i = want.findIndex((d, k) => t.shape[k] !== d.size);
    if (i < 0) continue;
    const bad = want[i];
    fail(ErrorCodes.MODEL, `[${scope}] ${source}: "${t.stored ?? t.name}" is [${t.shape.join(', ')}], but config.json's ${bad.how} needs ${expected}: dimension ${i} is ${t.shape[i]}, not ${bad.size}`, {
      file: source, tensor: t.stored ?? t.name, option: bad.keys.join(', '), value: bad.size, expected: t.shape[i],
    });
  }
}
