// webquant public API.
export { quantize, dequantize, dequantizeInto, type QuantizeOptions, type QuantizedTensor, type DequantizeOptions, type Backend } from './quantize.js';
export { formats, getFormat } from './formats/registry.js';
export type { FormatSpec, ResolvedOptions, Layout } from './formats/types.js';
export { errorMetrics, type ErrorMetrics } from './metrics.js';
export { WebquantError, ErrorCodes, isSerializedError, type ErrorCode, type SerializedError } from './errors.js';
export { loadKernels, configureWasm, hasSimd, type WasmBuild } from './kernels/loader.js';
export { f32ToF16, f16ToF32, f32ToBf16, bf16ToF32 } from './util/half.js';
export * from './io/index.js';
export * from './plan/index.js';
export * from './pipeline/index.js';
export { ggufView, hfGgufMetadata, llamaConfigFrom, unpermuteRows, LLAMA_GGUF_MODEL_TYPES, type GgufView, type GgufViewOptions, type GgufTokenizer } from './convert/hf-view.js';
export { evaluate, logSoftmax, type EvaluateOptions, type EvaluateResult, type EvaluateProgress, type NllStats, type LayerError, type ModelInput } from './eval/evaluate.js';
export { LlamaModel, llamaConfig, checkpointWeights, llamaTensorNames, type WeightSource, type ForwardOptions } from './eval/llama.js';
export { readTokens, splitDocuments, BOS } from './eval/tokens.js';
export { quantizedWeights, type QuantizedWeightsOptions } from './eval/quantized.js';
export * from './serve/index.js';
export { setBackendPreference, webgpuEvents, gpuState, type WebgpuWarning, type GpuInfo } from './webgpu/index.js';
export type { TensorBackend, TensorDequantizeOptions } from './quantize.js';
