// Host mirror of the kernel argument struct (assembly/common.ts). A test checks the constants.
export const ARGS_BYTES = 64;
export const A = {
  IMATRIX: 0,
  SCRATCH: 4,
  GROUP: 8,
  BITS: 12,
  CALIB: 16,
  P0: 20,
  P1: 24,
  ITERS: 28,
  SCALES: 32,
  BIASES: 36,
  AUX: 40,
  FLAGS: 44,
  TSCALE: 48,
  TBIAS: 52,
  ROW0: 56,
} as const;

export const SrcType = { f32: 0, f16: 1, bf16: 2 } as const;
export type DType = keyof typeof SrcType;

export const CALIBRATIONS = {
  default: 0,
  absmax: 1,
  minmax: 2,
  fixed: 3,
  clip: 4,
  percentile: 5,
  mse: 6,
  hqq: 7,
  mlx: 8,
} as const;
export type CalibrationName = keyof typeof CALIBRATIONS;

export const FLAGS = { doubleQuant: 1, perTensor: 2, perChannel: 4, scaleBf16: 8, scaleF32: 16 } as const;

export interface KernelArgs {
  imatrix?: number;
  scratch?: number;
  group?: number;
  bits?: number;
  calib?: number;
  p0?: number;
  p1?: number;
  iters?: number;
  scales?: number;
  biases?: number;
  aux?: number;
  flags?: number;
  tscale?: number;
  tbias?: number;
}

export function writeArgs(mem: ArrayBuffer, at: number, a: KernelArgs): void {
  const v = new DataView(mem, at, ARGS_BYTES);
  for (let i = 0; i < ARGS_BYTES; i += 4) v.setUint32(i, 0, true);
  v.setUint32(A.IMATRIX, a.imatrix ?? 0, true);
  v.setUint32(A.SCRATCH, a.scratch ?? 0, true);
  v.setInt32(A.GROUP, a.group ?? 0, true);
  v.setInt32(A.BITS, a.bits ?? 0, true);
  v.setInt32(A.CALIB, a.calib ?? 0, true);
  v.setFloat32(A.P0, a.p0 ?? 0, true);
  v.setFloat32(A.P1, a.p1 ?? 0, true);
  v.setInt32(A.ITERS, a.iters ?? 0, true);
  v.setUint32(A.SCALES, a.scales ?? 0, true);
  v.setUint32(A.BIASES, a.biases ?? 0, true);
  v.setUint32(A.AUX, a.aux ?? 0, true);
  v.setInt32(A.FLAGS, a.flags ?? 0, true);
  v.setFloat32(A.TSCALE, a.tscale ?? 0, true);
  v.setFloat32(A.TBIAS, a.tbias ?? 0, true);
}

/**
 * Sets the tensor row of the next call's first row in written args (writeArgs leaves it 0): the
 * kernels of layouts whose blocks are numbered across rows (double quantization of nf4 / fp4,
 * bnb_nf4 / bnb_fp4) need it per chunk.
 */
export function setRow0(mem: ArrayBuffer, at: number, row0: number): void {
  new DataView(mem, at + A.ROW0, 4).setInt32(0, row0, true);
}
