// GGUF block types (bit-exact with llama.cpp's ggml_quantize_chunk, spec: shared/spec).
export * from './q8_0';
export * from './q4_0';
export { Q2_K_BLOCK, Q2_K_BYTES, q2_k_quantize, q2_k_dequantize } from './q2_k';
export { Q3_K_BLOCK, Q3_K_BYTES, q3_k_quantize, q3_k_dequantize } from './q3_k';
export { Q4_K_BLOCK, Q4_K_BYTES, q4_k_quantize, q4_k_dequantize } from './q4_k';
export { Q5_K_BLOCK, Q5_K_BYTES, q5_k_quantize, q5_k_dequantize } from './q5_k';
export { Q6_K_BLOCK, Q6_K_BYTES, q6_k_quantize, q6_k_dequantize } from './q6_k';
export { Q4_1_BLOCK, Q4_1_BYTES, q4_1_quantize, q4_1_dequantize } from './q4_1';
export { Q5_0_BLOCK, Q5_0_BYTES, q5_0_quantize, q5_0_dequantize } from './q5_0';
export { Q5_1_BLOCK, Q5_1_BYTES, q5_1_quantize, q5_1_dequantize } from './q5_1';
export { IQ4_NL_BLOCK, IQ4_NL_BYTES, iq4_nl_quantize, iq4_nl_dequantize } from './iq4_nl';
export { IQ4_XS_BLOCK, IQ4_XS_BYTES, iq4_xs_quantize, iq4_xs_dequantize } from './iq4_xs';
export { F16_BLOCK, F16_BYTES, BF16_BLOCK, BF16_BYTES, f16_quantize, f16_dequantize, bf16_quantize, bf16_dequantize } from './f16';
export { MXFP4_GGUF_BLOCK, MXFP4_GGUF_BYTES, mxfp4_gguf_quantize, mxfp4_gguf_dequantize } from './mxfp4';
export { NVFP4_GGUF_BLOCK, NVFP4_GGUF_BYTES, nvfp4_gguf_quantize, nvfp4_gguf_dequantize } from './nvfp4';
export { TQ1_0_BLOCK, TQ1_0_BYTES, tq1_0_quantize, tq1_0_dequantize } from './tq1_0';
export { TQ2_0_BLOCK, TQ2_0_BYTES, tq2_0_quantize, tq2_0_dequantize } from './tq2_0';
export { IQ3_XXS_BLOCK, IQ3_XXS_BYTES, iq3_xxs_quantize, iq3_xxs_dequantize } from './iq3_xxs';
export { IQ3_S_BLOCK, IQ3_S_BYTES, iq3_s_quantize, iq3_s_dequantize } from './iq3_s';
export { IQ1_S_BLOCK, IQ1_S_BYTES, iq1_s_quantize, iq1_s_dequantize } from './iq1_s';
export { IQ1_M_BLOCK, IQ1_M_BYTES, iq1_m_quantize, iq1_m_dequantize } from './iq1_m';
// Read only (no quantizer): the sub-4-bit IQ types, for GGUF input.
export { IQ2_XXS_BLOCK, IQ2_XXS_BYTES, iq2_xxs_dequantize } from './iq2_xxs';
export { IQ2_XS_BLOCK, IQ2_XS_BYTES, iq2_xs_dequantize } from './iq2_xs';
export { IQ2_S_BLOCK, IQ2_S_BYTES, iq2_s_dequantize } from './iq2_s';
