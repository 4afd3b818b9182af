// The config.json a runtime needs beside a safetensors output it can load: the input's, plus MLX's
// "quantization" entry for mlx tensors (mlx_lm.load) or transformers' bitsandbytes
// quantization_config for bnb_nf4 / bnb_fp4 tensors (from_pretrained). Shared by the CLI's folder
// output and the demo page, which offers the file for download.
import { bnbQuantizationConfig } from './bnb.js';
import { mlxQuantizationConfig } from './mlx.js';
import type { PlannedTensor } from '../plan/types.js';

export interface RuntimeConfig {
  /** The config to write, or undefined when no tensor needs an entry. */
  config?: Record<string, unknown>;
  /** Which runtime reads the entry, for notes. */
  runtime?: 'mlx' | 'bitsandbytes';
  /** What that runtime will not load (tensors in other formats, mixed NF4 and FP4). */
  warnings: string[];
}

export function runtimeConfig(input: Record<string, unknown>, tensors: readonly PlannedTensor[]): RuntimeConfig {
  const mlx = mlxQuantizationConfig(tensors);
  if (mlx) {
    const other = tensors.filter((t) => t.scheme !== 'keep' && t.scheme.format !== 'mlx');
    const warnings = other.length
      ? [`${other.length} tensors are quantized in other formats than mlx (${other.slice(0, 2).map((t) => t.name).join(', ')}${other.length > 2 ? ', ...' : ''}): MLX cannot load those`]
      : [];
    return { config: { ...input, quantization: mlx, quantization_config: mlx }, runtime: 'mlx', warnings };
  }
  const bnb = bnbQuantizationConfig(tensors);
  if (bnb.config) return { config: { ...input, quantization_config: bnb.config }, runtime: 'bitsandbytes', warnings: bnb.warning ? [bnb.warning] : [] };
  return { warnings: [] };
}
