// bitsandbytes-style NF4/FP4, FP8 (E4M3, E5M2) and MXFP4 kernels.
export const BNB_FAMILY: i32 = 1;
