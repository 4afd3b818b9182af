// The cases behind test/cli/fixtures/llama-quantize-files.json (bench/llama-quantize-files.ts runs
// llama-quantize on them and records the SHA-256 of each file it writes; test/cli/llama-quantize-
// files.test.ts runs `webquant quantize` with the same options and compares). Small models of
// bench/preset-model.ts (gqa 2 and gqa 1, fused attn_qkv, a hybrid, MoE) with their importance matrices.
import type { PresetModelSize } from '../../bench/preset-model.js';

export const MODELS: Record<string, PresetModelSize> = {
  gqa2: { kvHeads: 2, hidden: 256, ffn: 512, layers: 8, heads: 4 },
  gqa1: { kvHeads: 4, hidden: 256, ffn: 512, layers: 8, heads: 4 },
  // attn_qkv (which llama.cpp's attn_v rules cover; gqa 4, known from the keys only), biases and a tied output.
  qkv: { kvHeads: 1, hidden: 256, ffn: 512, layers: 8, heads: 4, fusedQkv: true, tied: true, biases: true },
  // Attention in 6 of 16 blocks and no FFN in two: llama.cpp's counters are not block numbers.
  // With tensors llama-quantize exempts or files under token_embd (LFM2, Mamba-1, Gemma 3n).
  hybrid: { kvHeads: 1, hidden: 256, ffn: 512, layers: 16, heads: 4, attnLayers: [2, 5, 8, 10, 12, 14], ffnLayers: [0, 1, 2, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15], extras: true },
  // 8 experts (llama.cpp's Mixtral rules), and 4 experts over 16 blocks (its ffn_down counter in the IQ1 / IQ2 ftypes).
  moe8: { kvHeads: 2, hidden: 256, ffn: 512, layers: 4, heads: 4, experts: 8 },
  moe4: { kvHeads: 4, hidden: 256, ffn: 512, layers: 16, heads: 4, experts: 4 },
};

export interface FileCase {
  model: keyof typeof MODELS;
  /** llama-quantize's type name, which `--preset` takes as well. */
  preset: string;
  /** Options both tools take alike; `imatrix.gguf` is the model's importance matrix, in the working directory. */
  options: string[];
  /** The input split by llama-gguf-split --split-max-tensors n (with --keep-split). */
  splitInput?: number;
  /** The input is the output of this earlier case (a quantized GGUF quantized again). */
  from?: number;
}

const IM = ['--imatrix', 'imatrix.gguf'];
export const CASES: FileCase[] = [
  ...['Q4_0', 'Q4_K_M', 'IQ4_NL', 'Q3_K_S', 'Q6_K'].map((preset) => ({ model: 'gqa2' as const, preset, options: [] })),
  ...['Q4_0', 'Q5_1', 'Q8_0', 'Q2_K', 'Q2_K_S', 'Q3_K_M', 'Q4_K_S', 'Q5_K_M', 'IQ4_XS', 'IQ3_XXS', 'IQ3_XS', 'IQ2_XS', 'IQ1_M', 'TQ2_0']
    .map((preset) => ({ model: 'gqa2' as const, preset, options: IM })),
  ...['Q3_K_M', 'Q2_K_S', 'IQ3_XS', 'IQ4_XS'].map((preset) => ({ model: 'gqa1' as const, preset, options: IM })),
  { model: 'gqa2', preset: 'Q3_K_M', options: ['--tensor-type', 'attn_v=q8_0', '--tensor-type', 'FFN_UP=q5_K', '--output-tensor-type', 'q5_K', '--pure'] },
  { model: 'gqa2', preset: 'Q4_K_S', options: ['--override-kv', 'foo.bar=int:-5', '--override-kv', 'general.name=str:tiny', '--token-embedding-type', 'q6_K', '--leave-output-tensor'] },
  { model: 'gqa2', preset: 'IQ4_NL', options: [...IM, '--exclude-weights', 'ffn'] },
  { model: 'gqa2', preset: 'Q4_0', options: [...IM, '--include-weights', 'attn_'] },
  { model: 'gqa2', preset: 'Q4_K_M', options: ['--keep-split'], splitInput: 30 },
  { model: 'gqa2', preset: 'IQ4_XS', options: [...IM, '--keep-split'], splitInput: 25 },
  { model: 'gqa2', preset: 'Q4_K_M', options: ['--prune-layers', '3'] },
  { model: 'gqa2', preset: 'Q5_K_M', options: ['--prune-layers', '7,0'] },
  { model: 'gqa2', preset: 'Q2_K_S', options: [...IM, '--prune-layers', '6'] },
  { model: 'gqa1', preset: 'IQ3_XS', options: [...IM, '--prune-layers', '1,2'] },
  { model: 'gqa2', preset: 'Q4_K_M', options: ['--prune-layers', '2', '--keep-split'], splitInput: 30 },
  // Patterns claiming some layers' attn_v / ffn tensors: llama.cpp's counters skip them.
  { model: 'gqa2', preset: 'Q3_K_M', options: ['--tensor-type', 'blk\\.0\\.attn_v=q5_0'] },
  { model: 'gqa2', preset: 'Q4_K_S', options: ['--tensor-type', 'blk\\.[13]\\.ffn_down=q8_0'] },
  { model: 'gqa2', preset: 'Q5_K_M', options: ['--tensor-type', 'blk\\.7\\.ffn_down=q4_0', '--tensor-type', 'blk\\.4\\.attn_v=q4_0'] },
  { model: 'gqa2', preset: 'IQ3_XS', options: [...IM, '--tensor-type', 'blk\\.2\\.ffn_up=q4_0', '--tensor-type', 'blk\\.5\\.ffn_gate=q4_0'] },
  // Quantized again: the Q6_K, Q4_K_M and IQ4_XS files above (tensors already in the target type are copied).
  { model: 'gqa2', preset: 'Q4_K_M', options: ['--allow-requantize'], from: 4 },
  { model: 'gqa2', preset: 'Q6_K', options: ['--allow-requantize'], from: 1 },
  { model: 'gqa2', preset: 'Q3_K_S', options: ['--allow-requantize'], from: 13 },
  ...['Q4_K_M', 'Q3_K_M', 'Q5_K_M', 'Q2_K', 'Q4_K_S', 'IQ3_M'].map((preset) => ({ model: 'qkv' as const, preset, options: [] })),
  ...['Q4_K_M', 'Q4_K_S', 'Q3_K_M', 'IQ4_NL'].map((preset) => ({ model: 'hybrid' as const, preset, options: [] })),
  { model: 'hybrid', preset: 'IQ3_XS', options: IM },
  { model: 'hybrid', preset: 'Q4_0', options: ['--token-embedding-type', 'q8_0'] },
  { model: 'hybrid', preset: 'Q5_K_M', options: ['--tensor-type', 'blk\\.5\\.attn_v=q8_0', '--tensor-type', 'blk\\.1\\.ffn_down=q8_0'] },
  ...['Q4_K_M', 'Q3_K_L', 'IQ3_M'].map((preset) => ({ model: 'moe8' as const, preset, options: [] })),
  { model: 'moe4', preset: 'Q4_K_M', options: [] },
  { model: 'moe4', preset: 'IQ2_XS', options: IM },
];

/** Each case's recorded files: name (relative to the output prefix) and SHA-256. */
export type FileHashes = { name: string; sha256: string; bytes: number }[];
