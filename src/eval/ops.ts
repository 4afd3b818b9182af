// The forward's elementwise and per-row operations, in float64 and stored as float32: norms,
// activations, biases and the rotary embedding.
/** Splits n rows of concatenated parts (row t: part 0, part 1, ...) into one array per part. */
export function splitRows(src: Float32Array, n: number, parts: [Float32Array, number][]): void {
  const width = parts.reduce((a, [, w]) => a + w, 0);
  for (let t = 0; t < n; t++) {
    let at = t * width;
    for (const [dst, w] of parts) {
      dst.set(src.subarray(at, at + w), t * w);
      at += w;
    }
  }
}

export const silu = (a: number) => a / (1 + Math.exp(-a));
export const sigmoid = (a: number) => 1 / (1 + Math.exp(-a));

/** x[t, i] += b[i] for n rows of b.length values. */
export function addBias(x: Float32Array, n: number, b: Float32Array): void {
  for (let t = 0, o = 0; t < n; t++, o += b.length) for (let i = 0; i < b.length; i++) x[o + i] += b[i];
}
// GELU, exact: x * Phi(x) (torch's "gelu"), with erf to float64 precision.
export const geluErf = (a: number) => 0.5 * a * (1 + erf(a / Math.SQRT2));

/**
 * erf to about 1e-15: its Maclaurin series below 2.5 (terms alternate and shrink fast there), and
 * 1 - erfc from erfc's continued fraction above.
 */
export function erf(x: number): number {
  const ax = Math.abs(x);
  if (ax < 2.5) {
    let term = ax, sum = ax;
    for (let k = 1; k < 60; k++) {
      term *= (-ax * ax) / k;
      const t = term / (2 * k + 1);
      sum += t;
      if (Math.abs(t) < 1e-17 * Math.abs(sum)) break;
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }
  // erfc(x) = exp(-x^2) / sqrt(pi) * 1 / (x + (1/2) / (x + 1 / (x + (3/2) / (x + 2 / (x + ...))))).
  let f = ax;
  for (let k = 60; k >= 1; k--) f = ax + (k / 2) / f;
  return Math.sign(x) * (1 - Math.exp(-ax * ax) / Math.sqrt(Math.PI) / f);
}

// GELU, tanh approximation (gelu_pytorch_tanh).
export const geluTanh = (a: number) => 0.5 * a * (1 + Math.tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));

/** LayerNorm over each of n rows: (x - mean) / sqrt(var + eps) * w + b, statistics in float64. */
export function layerNorm(x: Float32Array, n: number, dim: number, w: Float32Array, b: Float32Array, eps: number, out: Float32Array): void {
  for (let t = 0, o = 0; t < n; t++, o += dim) {
    let mean = 0;
    for (let i = 0; i < dim; i++) mean += x[o + i];
    mean /= dim;
    let v = 0;
    for (let i = 0; i < dim; i++) v += (x[o + i] - mean) ** 2;
    const inv = 1 / Math.sqrt(v / dim + eps);
    for (let i = 0; i < dim; i++) out[o + i] = (x[o + i] - mean) * inv * w[i] + b[i];
  }
}

export function rmsNorm(x: Float32Array, n: number, dim: number, w: Float32Array, eps: number, out: Float32Array): void {
  for (let t = 0, o = 0; t < n; t++, o += dim) {
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += x[o + i] * x[o + i];
    const inv = 1 / Math.sqrt(ss / dim + eps);
    for (let i = 0; i < dim; i++) out[o + i] = x[o + i] * inv * w[i];
  }
}

// Hugging Face rotate-half layout: dimension i pairs with i + rot/2 within the first `rot`
// dimensions of each head (all of them but for Phi-3's partial rotary); the rest pass unrotated.
export function rope(v: Float32Array, n: number, heads: number, headDim: number, rot: number, cos: Float64Array, sin: Float64Array): void {
  const half = rot / 2;
  for (let t = 0; t < n; t++) {
    const c0 = t * half;
    for (let h = 0; h < heads; h++) {
      const o = (t * heads + h) * headDim;
      for (let i = 0; i < half; i++) {
        const a = v[o + i], b = v[o + i + half];
        const c = cos[c0 + i], s = sin[c0 + i];
        v[o + i] = a * c - b * s;
        v[o + i + half] = b * c + a * s;
      }
    }
  }
}
