// Integer formats: symmetric int2..int8 (AQT style) and affine int2..int8 (MLX style), with their
// calibration searches (calib.ts, hqq.ts) and the shared bit packing (pack.ts).
export * from './sym';
export * from './affine';
