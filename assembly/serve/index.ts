// Serving kernels: y = W x directly on quantized rows (see common.ts for the ABI and tolerances).
// Formats without a fused kernel go through the host's generic path: <fmt>_dequantize on a group
// of rows into scratch, then serve_dot_rows.
export { MATVEC_REL_TOL, SIMD_SCALAR_REL_TOL, SERVE_Q8_ACT, serve_dot_rows, f32_matvec, f16_matvec, bf16_matvec, f16_matmul, bf16_matmul } from './common';
export * from './gguf';
export * from './gguf-matmul';
export * from './bnb';
export * from './int';
export { attn_scores, attn_values } from './attention';
export { f32_matmul_exact } from './matmul64';
export { q1_0_matvec, q2_0_matvec, tq2_0_matvec } from './lowbit';
