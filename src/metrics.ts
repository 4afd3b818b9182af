// Error metrics between a tensor and its dequantized values.
export interface ErrorMetrics {
  rmse: number;
  maxAbsError: number;
  /** Signal-to-quantization-noise ratio in dB: 10 log10(sum x^2 / sum (x - y)^2). */
  sqnrDb: number;
  cosine: number;
  count: number;
}

export function newMetricsAccumulator(): Float64Array {
  return new Float64Array(6);
}

/** sums: [sum (x-y)^2, max |x-y|, sum x^2, sum y^2, sum xy, count] as the wasm kernel writes them. */
export function finishMetrics(s: Float64Array): ErrorMetrics {
  const [se, mx, sx, sy, sxy, n] = s;
  const denom = Math.sqrt(sx) * Math.sqrt(sy);
  return {
    rmse: n > 0 ? Math.sqrt(se / n) : 0,
    maxAbsError: mx,
    sqnrDb: se === 0 ? Infinity : 10 * Math.log10(sx / se),
    cosine: denom === 0 ? (sx === sy ? 1 : 0) : sxy / denom,
    count: n,
  };
}

/** Adds the sums of `from` to `into` (two parts of one comparison), as one accumulator would hold them. */
export function mergeMetrics(into: Float64Array, from: Float64Array): void {
  into[0] += from[0];
  into[1] = Math.max(into[1], from[1]);
  for (let i = 2; i < 6; i++) into[i] += from[i];
}

/** Metrics of two float arrays computed on the host (for callers that already hold both). */
export function errorMetrics(original: ArrayLike<number>, approx: ArrayLike<number>): ErrorMetrics {
  const s = newMetricsAccumulator();
  for (let i = 0; i < original.length; i++) {
    const x = original[i], y = approx[i], e = x - y;
    s[0] += e * e;
    s[1] = Math.max(s[1], Math.abs(e));
    s[2] += x * x;
    s[3] += y * y;
    s[4] += x * y;
  }
  s[5] = original.length;
  return finishMetrics(s);
}
