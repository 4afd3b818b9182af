// The config.json a runtime needs beside a safetensors output it can load: the input's, plus MLX's
// "quantization" entry for mlx tensors (mlx_lm.load), transformers' bitsandbytes
// quantization_config for bnb_nf4 / bnb_fp4 / bnb_int8 tensors (from_pretrained), or ModelOpt's
// for nvfp4 tensors (vLLM, SGLang). An input entry that describes the input's own quantization
// (an FP8 or NVFP4 release, an MLX model) is dropped when the output has none and keeps none of
// the input's FP8 / FP4 tensors as they were: it would make a runtime read the output's plain or
// webquant-format tensors as that scheme. Shared by the CLI's folder output and the demo page,
// which offers the file for download.
import { moduleName } from '../formats/types.js';
import type { PlannedTensor } from '../plan/types.js';

export interface RuntimeConfig {
  /** The config to write, or undefined when no tensor needs an entry. */
  config?: Record<string, unknown>;
  /** Which runtime reads the entry, for notes. */
  runtime?: 'mlx' | 'bitsandbytes' | 'modelopt';
  /** What that runtime will not load (tensors in other formats, mixed NF4 and FP4). */
  warnings: string[];
}

export function runtimeConfig(input: Record<string, unknown>, tensors: readonly PlannedTensor[]): RuntimeConfig {
  const mlx = mlxQuantizationConfig(tensors);
  if (mlx) {
    const other = tensors.filter((t) => t.scheme !== 'keep' && t.scheme.format !== 'mlx');
    const warnings = other.length ? [`${other.length} tensors are quantized in other formats than mlx (${someNames(other)}): MLX cannot load those`] : [];
    return { config: { ...input, quantization: mlx, quantization_config: mlx }, runtime: 'mlx', warnings };
  }
  // The input's entries go: the output's own replaces quantization_config, and "quantization" is MLX's.
  const { quantization: mlxEntry, quantization_config: inputEntry, ...rest } = input;
  const bnb = bnbQuantizationConfig(tensors);
  if (bnb.config) return { config: { ...rest, quantization_config: bnb.config }, runtime: 'bitsandbytes', warnings: bnb.warning ? [bnb.warning] : [] };
  const modelopt = modeloptQuantizationConfig(tensors);
  if (modelopt.config) return { config: { ...rest, quantization_config: modelopt.config }, runtime: 'modelopt', warnings: modelopt.warning ? [modelopt.warning] : [] };
  // Kept FP8 / FP4 weights are copied as stored, with their scales, so the input's entry still describes them.
  const stillQuantized = tensors.some((t) => t.scheme === 'keep' && /^F(?:8_E4M3|8_E5M2|4_E2M1)$/.test(t.dtype));
  if ((inputEntry === undefined && mlxEntry === undefined) || stillQuantized) return { warnings: [] };
  const what = (inputEntry as { quant_method?: unknown } | undefined)?.quant_method ?? (inputEntry !== undefined ? 'quantization_config' : 'MLX "quantization"');
  return {
    config: rest,
    warnings: [`config.json: the input's ${typeof what === 'string' ? `"${what}"` : 'quantization'} entry is left out, since the output's tensors are not in that scheme`],
  };
}

/**
 * MLX's "quantization" entry of config.json for the tensors written in the `mlx` format: the most
 * common (group_size, bits) as the default, and an entry per module that differs (mlx_lm gives a
 * module listed there its own settings, and quantizes every other module whose .scales it finds).
 */
export function mlxQuantizationConfig(tensors: readonly PlannedTensor[]): Record<string, unknown> | undefined {
  const mlx = tensors.filter((t) => t.scheme !== 'keep' && t.scheme.format === 'mlx' && t.options);
  if (!mlx.length) return undefined;
  const key = (t: PlannedTensor) => `${t.options!.groupSize}/${t.options!.bits}`;
  const counts = new Map<string, number>();
  for (const t of mlx) counts.set(key(t), (counts.get(key(t)) ?? 0) + 1);
  const top = [...counts].reduce((a, b) => (b[1] > a[1] ? b : a))[0];
  const [groupSize, bits] = top.split('/').map(Number);
  const q: Record<string, unknown> = { group_size: groupSize, bits };
  for (const t of mlx) if (key(t) !== top) q[moduleName(t.name)] = { group_size: t.options!.groupSize, bits: t.options!.bits };
  return q;
}

/** The first two names of a list, for warnings: "a, b, ...". */
const someNames = (ts: readonly PlannedTensor[]) => `${ts.slice(0, 2).map((t) => t.name).join(', ')}${ts.length > 2 ? ', ...' : ''}`;

const LINEAR_ROLES = new Set(['attention', 'ffn', 'expert', 'shared_expert', 'output', 'router']);

/** Linear modules (`<m>` of `<m>.weight`) the plan kept: a runtime must be told not to expect them quantized. */
function keptLinear(tensors: readonly PlannedTensor[]): string[] {
  return tensors
    .filter((t) => t.scheme === 'keep' && t.shape.length === 2 && LINEAR_ROLES.has(t.role) && t.name.endsWith('.weight'))
    .map((t) => moduleName(t.name));
}

/**
 * config.json's quantization_config for a model whose linear weights are nvfp4 (ModelOpt's
 * layout): ModelOpt's own form for config.json (quant_method "modelopt", "ignore" for the
 * modules left unquantized, one config group for every Linear). With an input scale on every
 * nvfp4 weight (calibrated activations) quant_algo is "NVFP4", which runtimes run as W4A4;
 * otherwise it is ModelOpt's weight-only "W4A16_NVFP4", served with bf16 activations, since
 * "NVFP4" would make them divide activations by an `input_scale` they would not find.
 */
export function modeloptQuantizationConfig(tensors: readonly PlannedTensor[]): { config?: Record<string, unknown>; warning?: string } {
  const nvfp4 = tensors.filter((t) => t.scheme !== 'keep' && t.scheme.format === 'nvfp4');
  if (!nvfp4.length) return {};
  const other = tensors.filter((t) => t.scheme !== 'keep' && t.scheme.format !== 'nvfp4');
  const scaled = nvfp4.filter((t) => t.scheme !== 'keep' && t.scheme.inputScale !== undefined).length;
  const w4a4 = scaled === nvfp4.length;
  const fp4 = { type: 'float', num_bits: 4, group_size: 16, dynamic: false };
  // A tied head has no tensor of its own but is still a Linear to the runtime (vLLM's lm_head),
  // which would expect it quantized: ModelOpt's releases always list it.
  const ignore = keptLinear(tensors);
  if (!ignore.includes('lm_head') && !nvfp4.some((t) => moduleName(t.name) === 'lm_head')) ignore.push('lm_head');
  const warnings: string[] = [];
  if (other.length) warnings.push(`${other.length} tensors are quantized in other formats than nvfp4 (${someNames(other)}): ModelOpt runtimes cannot load those`);
  if (scaled && !w4a4) warnings.push(`${scaled} of ${nvfp4.length} nvfp4 tensors have an input scale: the model is described as weight-only (W4A16_NVFP4), and runtimes ignore those scales`);
  return {
    config: {
      quant_method: 'modelopt', quant_algo: w4a4 ? 'NVFP4' : 'W4A16_NVFP4', group_size: 16, kv_cache_scheme: null,
      config_groups: { group_0: { targets: ['Linear'], weights: fp4, input_activations: w4a4 ? fp4 : null } },
      ignore,
      producer: { name: 'webquant' },
    },
    warning: warnings.length ? warnings.join('; ') : undefined,
  };
}

/**
 * config.json's quantization_config for a model whose linear weights are bnb_nf4 / bnb_fp4 (what
 * transformers' BitsAndBytesConfig writes for load_in_4bit) or bnb_int8 (load_in_8bit). Linear
 * weights the plan kept are listed in llm_int8_skip_modules, or transformers would expect them
 * quantized.
 */
export function bnbQuantizationConfig(tensors: readonly PlannedTensor[]): { config?: Record<string, unknown>; warning?: string } {
  const isBnb = (t: PlannedTensor) => t.scheme !== 'keep' && /^bnb_(?:nf4|fp4|int8)$/.test(t.scheme.format);
  const q = tensors.filter(isBnb);
  if (!q.length) return {};
  const formatOf = (t: PlannedTensor) => (t.scheme as { format: string }).format;
  const four = q.filter((t) => formatOf(t) !== 'bnb_int8');
  const eight = four.length === 0;
  const types = [...new Set(four.map((t) => formatOf(t).slice(4)))];
  const other = tensors.filter((t) => t.scheme !== 'keep' && !isBnb(t));
  const skip = keptLinear(tensors);
  const dtype = { BF16: 'bfloat16', F16: 'float16', F32: 'float32' }[q[0].dtype] ?? 'bfloat16';
  const doubleQuant = !eight && !!four[0].options?.doubleQuant;
  const warnings: string[] = [];
  if (!eight && four.length < q.length) warnings.push(`both 4-bit and LLM.int8 weights: transformers loads one of load_in_4bit and load_in_8bit (load_in_4bit; ${q.length - four.length} int8 weights will not load)`);
  if (types.length > 1) warnings.push(`both NF4 and FP4 weights: transformers takes one bnb_4bit_quant_type (${types[0]})`);
  // Each weight's quant state says whether it is double-quantized, so mixed files load; the flag
  // only tells transformers how to quantize weights it is given unquantized.
  if (four.some((t) => !!t.options?.doubleQuant !== doubleQuant)) warnings.push(`some 4-bit weights are double-quantized and some not: bnb_4bit_use_double_quant is ${doubleQuant} (that of ${four[0].name})`);
  if (other.length) warnings.push(`${other.length} tensors are quantized in formats bitsandbytes does not load (${someNames(other)})`);
  return {
    config: {
      quant_method: 'bitsandbytes', load_in_4bit: !eight, load_in_8bit: eight,
      // BitsAndBytesConfig's defaults where a field does not apply (an 8-bit config still lists the 4-bit ones).
      bnb_4bit_quant_type: types[0] ?? 'fp4', bnb_4bit_use_double_quant: doubleQuant, bnb_4bit_compute_dtype: eight ? 'float32' : dtype, bnb_4bit_quant_storage: 'uint8',
      llm_int8_skip_modules: skip, llm_int8_threshold: 6.0, llm_int8_has_fp16_weight: false, llm_int8_enable_fp32_cpu_offload: false,
    },
    warning: warnings.length ? warnings.join('; ') : undefined,
  };
}
