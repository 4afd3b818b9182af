// bitsandbytes-style NF4/FP4 (with optional double quantization) and LLM.int8, FP8 (E4M3, E5M2), MXFP4 and NVFP4 kernels.
export * from './bnb4';
// DYN: bitsandbytes' signed dynamic map, the nested quant map bnb_nf4 / bnb_fp4 write.
export { DYN, bnb4_absmax_sum, bnb4_nested_absmax } from './dq';
export * from './fp8';
export * from './int8';
export * from './mxfp4';
export * from './nvfp4';
