// bitsandbytes-style NF4/FP4 (with optional double quantization), FP8 (E4M3, E5M2) and MXFP4 kernels.
export * from './bnb4';
export { bnb4_absmax_sum } from './dq';
export * from './fp8';
export * from './mxfp4';
