// Q5_K (spec §11): 256 values per 176-byte block: fp16 d, fp16 dmin, 12 bytes of 6-bit scales
// and mins packed as Q4_K's, qh[32] (bit 4 of each code), qs[128] (its low 4 bits). The
// quantizer is Q4_K's with nmax 31 and its own QKX parameters (q4_k.ts generates both).
import { k4Dequant, k4Quant } from './q4_k.js';

export const Q5_K_DEQUANT = k4Dequant(true);
export const Q5_K_QUANT = k4Quant(31);
