// The architectures webquant writes as GGUF from Hugging Face checkpoints: one entry each (model
// types, q/k layout, tensor names, metadata keys), which drives the converter, the config checks
// and the forward's choice of model; and the views that present every family under Llama-style
// tensor names.
import { ErrorCodes, fail } from '../../errors.js';
import type { Checkpoint } from '../../io/checkpoint.js';
import type { AddTokenType, SpecialTokenType } from '../gguf-vocab.js';
import { gptOssView, isGptOssCheckpoint } from '../gpt-oss.js';
import { gpt2View, isGpt2Checkpoint } from '../gpt2.js';
import { gptNeoxView, isGptNeoxCheckpoint } from '../gpt-neox.js';
import { isMlxSwitchCheckpoint, mlxSwitchView } from '../mlx-switch.js';
import { isPhi2Checkpoint, phi2View } from '../phi2.js';
import { DEEPSEEK_LAYER_NAMES, deepseek2Metadata, deepseekKvB, type DerivedTensor } from './deepseek.js';
import { GEMMA_LAYER_NAMES, gemma2Metadata, gemma3Metadata, gemmaMetadata } from './gemma.js';
import { GPT2_LAYER_NAMES, PHI2_LAYER_NAMES, STABLELM_LAYER_NAMES, gpt2Metadata, gptNeoxMetadata, phi2Metadata, stablelmMetadata, starcoder2Metadata } from './layernorm.js';
import { GLOBAL_NAMES, LAYER, LAYER_NAMES, graniteMetadata, languageModelName, llama3RopeFactors, llamaMetadata, type GgufValue, type LlamaConfig } from './llama.js';
import { phi3LongRope, phi3Metadata } from './phi3.js';
import { GPT_OSS_LAYER_NAMES, QWEN2MOE_LAYER_NAMES, gptOssMetadata, olmoeMetadata, qwen2Metadata, qwen2MoeMetadata, qwen3Metadata, qwen3MoeMetadata, qwenMetadata } from './qwen.js';

/** A GGUF architecture webquant writes from Hugging Face checkpoints. */
export interface GgufArchitecture {
  /** general.architecture, and the prefix of its keys. */
  name: 'llama' | 'smollm3' | 'granite' | 'qwen2' | 'qwen2moe' | 'qwen3' | 'qwen3moe' | 'olmo2' | 'olmoe' | 'gemma' | 'gemma2' | 'gemma3' | 'phi3' | 'deepseek2' | 'gpt-oss' | 'gpt2' | 'gptneox' | 'phi2' | 'stablelm' | 'starcoder2';
  /** config.json model_type values written as this architecture. */
  modelTypes: readonly string[];
  /** q_proj/k_proj rows are permuted to llama.cpp's interleaved rope layout. */
  permuteQK: boolean;
  /**
   * Added to every `*norm.weight` tensor (in its stored dtype, then widened to F32, as the
   * converter does): Gemma's RMSNorm multiplies by 1 + w, llama.cpp's by w.
   */
  normShift?: number;
  metadata(cfg: LlamaConfig, name?: string): Record<string, GgufValue>;
  /** Tensors the converter adds that the checkpoint does not hold (rope factors), F32. */
  extraTensors?(cfg: LlamaConfig): { name: string; values: Float32Array }[];
  /** Layer tensor names, when not Llama's (LAYER_NAMES). */
  layerNames?: Readonly<Record<string, string>>;
  /** lm_head is dropped: llama.cpp runs the tied embedding (Gemma 2's converter). */
  dropsLmHead?: true;
  /** May be a multimodal checkpoint: the language model's tensors are prefixed, the vision ones left out. */
  multimodal?: true;
  /** A SentencePiece vocabulary gets add_space_prefix = false (Gemma's). */
  noSpacePrefix?: true;
  /**
   * Special tokens the converter sets by id when the tokenizer files name none of that type (Gemma
   * 1's end of turn, 107); written only where the vocabulary has that id.
   */
  specialTokens?: Readonly<Partial<Record<SpecialTokenType, number>>>;
  /** add_bos / add_eos the converter writes before the tokenizer files' own (Phi-2: no BOS). */
  addTokens?: Readonly<Partial<Record<AddTokenType, boolean>>>;
  /**
   * The tensors a layer tensor (its name after `model.layers.N.`) becomes instead of itself, when
   * the converter reshapes it (DeepSeek's kv_b_proj split into attn_k_b and attn_v_b).
   */
  derived?(layerTensor: string, shape: readonly number[], cfg: LlamaConfig): DerivedTensor[] | undefined;
  /** Layers numbered num_hidden_layers and up are not part of the model (DeepSeek-V3's multi-token prediction). */
  extraLayers?: 'drop';
}

/**
 * A checkpoint of a family that stores its tensors otherwise (gpt-oss's packed experts, GPT-2's
 * Conv1D layers, GPT-NeoX's q/k/v by head, Phi-2's and StarCoder2's names, mlx_lm's stacked
 * experts) under the Llama-style
 * names the converter and the forward read; any other checkpoint as it is. Each family is known by
 * tensor names only it has. GPT-NeoX's needs the head count (its q, k and v rows are grouped by head).
 */
export function familyView(input: Checkpoint, cfg?: Pick<LlamaConfig, 'num_attention_heads'>): Checkpoint {
  if (isGptOssCheckpoint(input)) return gptOssView(input);
  if (isGpt2Checkpoint(input)) return gpt2View(input);
  if (cfg && isGptNeoxCheckpoint(input)) return gptNeoxView(input, cfg.num_attention_heads);
  if (isPhi2Checkpoint(input)) return phi2View(input);
  if (isMlxSwitchCheckpoint(input)) return mlxSwitchView(input);
  return input;
}

/** One entry per architecture: model types, q/k layout and metadata keys. */
export const GGUF_ARCHITECTURES: readonly GgufArchitecture[] = [
  {
    // Mixtral is Llama with MoE layers (expert_count, expert_used_count; experts merged).
    name: 'llama', modelTypes: ['llama', 'mistral', 'mixtral'], permuteQK: true, metadata: llamaMetadata,
    extraTensors: (cfg) => {
      const f = llama3RopeFactors(cfg.rope_scaling, cfg.rope_theta ?? 10000, cfg.head_dim ?? cfg.hidden_size / cfg.num_attention_heads);
      return f ? [{ name: 'rope_freqs.weight', values: f }] : [];
    },
  },
  { name: 'granite', modelTypes: ['granite'], permuteQK: true, metadata: graniteMetadata },
  // SmolLM3: Llama with every 4th layer without rope (llama.cpp fixes the step at 4).
  { name: 'smollm3', modelTypes: ['smollm3'], permuteQK: true, metadata: (cfg, name) => llamaMetadata(cfg, name, 'smollm3') },
  { name: 'qwen2', modelTypes: ['qwen2'], permuteQK: false, metadata: qwen2Metadata },
  { name: 'qwen2moe', modelTypes: ['qwen2_moe'], permuteQK: false, layerNames: QWEN2MOE_LAYER_NAMES, metadata: qwen2MoeMetadata },
  { name: 'qwen3', modelTypes: ['qwen3'], permuteQK: false, metadata: qwen3Metadata },
  { name: 'qwen3moe', modelTypes: ['qwen3_moe'], permuteQK: false, metadata: qwen3MoeMetadata },
  // OLMo 2: norms after attention and after the FFN only, q/k norms over the whole projection;
  // the converter's TextModel keys, as Qwen's, under olmo2.
  { name: 'olmo2', modelTypes: ['olmo2'], permuteQK: false, layerNames: GEMMA_LAYER_NAMES, metadata: (cfg, name = 'webquant') => qwenMetadata('olmo2', cfg, name) },
  // OLMoE: Llama's names, q/k norms over the whole projections, Qwen-MoE's experts.
  { name: 'olmoe', modelTypes: ['olmoe'], permuteQK: false, metadata: olmoeMetadata },
  // Gemma (1): Llama's layer and norm names, norms + 1, the tied head only.
  { name: 'gemma', modelTypes: ['gemma'], permuteQK: false, normShift: 1, dropsLmHead: true, noSpacePrefix: true, specialTokens: { eot: 107 }, metadata: gemmaMetadata },
  { name: 'gemma2', modelTypes: ['gemma2'], permuteQK: false, normShift: 1, layerNames: GEMMA_LAYER_NAMES, dropsLmHead: true, noSpacePrefix: true, metadata: gemma2Metadata },
  {
    name: 'phi3', modelTypes: ['phi3'], permuteQK: false, metadata: phi3Metadata,
    extraTensors: (cfg) => {
      const lr = phi3LongRope(cfg);
      return lr ? [{ name: 'rope_factors_long.weight', values: lr.long }, { name: 'rope_factors_short.weight', values: lr.short }] : [];
    },
  },
  {
    name: 'deepseek2', modelTypes: ['deepseek_v2', 'deepseek_v3'], permuteQK: false, layerNames: { ...LAYER_NAMES, ...DEEPSEEK_LAYER_NAMES }, extraLayers: 'drop', metadata: deepseek2Metadata,
    derived: (t, shape, cfg) => (t === 'self_attn.kv_b_proj.weight' ? deepseekKvB(cfg, shape) : undefined),
  },
  // gpt-oss: read through gpt-oss.ts (experts unpacked, router renamed); no q/k permutation (NeoX rope).
  { name: 'gpt-oss', modelTypes: ['gpt_oss'], permuteQK: false, layerNames: GPT_OSS_LAYER_NAMES, metadata: gptOssMetadata },
  // GPT-2: read through gpt2.ts (Conv1D weights transposed); LayerNorms with biases, learned positions.
  { name: 'gpt2', modelTypes: ['gpt2'], permuteQK: false, layerNames: GPT2_LAYER_NAMES, metadata: gpt2Metadata },
  // StableLM: Llama's names and layout, LayerNorms with biases, partial NeoX rotary.
  { name: 'stablelm', modelTypes: ['stablelm'], permuteQK: false, layerNames: STABLELM_LAYER_NAMES, metadata: stablelmMetadata },
  // StarCoder2: read through phi2.ts (c_fc, c_proj renamed); LayerNorms and every projection biased.
  { name: 'starcoder2', modelTypes: ['starcoder2'], permuteQK: false, layerNames: PHI2_LAYER_NAMES, metadata: starcoder2Metadata },
  // Phi-1/1.5/2: read through phi2.ts (renamed); one LayerNorm feeds attention and the FFN.
  { name: 'phi2', modelTypes: ['phi'], permuteQK: false, layerNames: PHI2_LAYER_NAMES, addTokens: { bos: false }, metadata: phi2Metadata },
  // GPT-NeoX (Pythia): read through gpt-neox.ts (q, k and v regrouped); GPT-2's layer names then apply.
  {
    name: 'gptneox', modelTypes: ['gpt_neox'], permuteQK: false, layerNames: GPT2_LAYER_NAMES, metadata: gptNeoxMetadata,
  },
  // Gemma3ForCausalLM (the text-only 270M and 1B); the multimodal checkpoints' text_config says
  // gemma3_text too (readConfig merges it over the top level).
  {
    name: 'gemma3', modelTypes: ['gemma3_text'], permuteQK: false, normShift: 1, layerNames: GEMMA_LAYER_NAMES, multimodal: true, noSpacePrefix: true,
    metadata: gemma3Metadata,
  },
];

/** The architecture of a config's model_type (undefined: not one webquant writes as GGUF). */
export function ggufArchitecture(cfg: Pick<LlamaConfig, 'model_type'>): GgufArchitecture | undefined {
  return GGUF_ARCHITECTURES.find((a) => a.modelTypes.includes(cfg.model_type ?? 'llama'));
}

/**
 * GGUF name of an HF tensor of architecture `arch` (default llama), or undefined for tensors GGUF
 * does not store (rotary caches).
 */
export function ggufTensorName(hf: string, arch = 'llama'): string | undefined {
  const a = GGUF_ARCHITECTURES.find((x) => x.name === arch);
  if (a?.dropsLmHead && hf === 'lm_head.weight') return undefined;
  if (a?.multimodal) {
    // The vision tower and the projector of a multimodal checkpoint are not part of the text GGUF
    // (llama.cpp's converter writes them to a separate mmproj file).
    if (/^(?:model\.)?(?:vision_tower|multi_modal_projector)\./.test(hf)) return undefined;
    hf = languageModelName(hf);
  }
  if (hf in GLOBAL_NAMES) return GLOBAL_NAMES[hf];
  const m = LAYER.exec(hf);
  if (m) {
    if (m[2].endsWith('rotary_emb.inv_freq')) return undefined;
    const t = (a?.layerNames ?? LAYER_NAMES)[m[2]];
    if (t) return `blk.${m[1]}.${t}`;
  }
  if (hf.endsWith('rotary_emb.inv_freq')) return undefined;
  return fail(ErrorCodes.MODEL, `[gguf] no GGUF name for tensor "${hf}" of a Llama-family checkpoint`, { tensor: hf, expected: 'model.embed_tokens / model.layers.N.* / model.norm / lm_head' });
}
