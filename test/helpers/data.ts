// Deterministic test data: a seeded PRNG and the awkward rows every format must survive.
export function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s >>> 8) / 16777216;
  };
}

export function gaussian(n: number, seed: number, sigma = 1): Float32Array {
  const u = lcg(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const a = Math.max(u(), 1e-12), b = u();
    out[i] = sigma * Math.sqrt(-2 * Math.log(a)) * Math.cos(2 * Math.PI * b);
  }
  return out;
}

/** Rows of `rowLen` values: random, weight-like, outliers, zeros, constants, tiny values, ties. */
export function edgeRows(rowLen: number, seed = 7): { name: string; values: Float32Array }[] {
  const u = lcg(seed);
  const row = (f: (i: number) => number) => Float32Array.from({ length: rowLen }, (_, i) => f(i));
  return [
    { name: 'uniform', values: row(() => 2 * u() - 1) },
    { name: 'gaussian', values: gaussian(rowLen, seed + 1, 0.02) },
    { name: 'positive', values: row(() => 0.5 + u()) },
    { name: 'magnitudes', values: row((i) => (2 * u() - 1) * 2 ** (((i >> 5) % 17) - 8)) },
    { name: 'zeros', values: new Float32Array(rowLen) },
    { name: 'outlier', values: row((i) => (i === Math.min(1000, rowLen - 1) ? 5000 : 0.05 * (2 * u() - 1))) },
    { name: 'fp16-subnormal', values: row(() => 1e-5 * (2 * u() - 1)) },
    { name: 'fp32-denormal', values: row(() => 1e-39 * (2 * u() - 1)) },
    { name: 'constant', values: row(() => 0.3) },
    { name: 'negative-constant', values: row(() => -1.75) },
    { name: 'ties', values: row((i) => { const j = i % 32; const v = j === 0 ? 127 : j - 16 + 0.5; return (i >> 5) & 1 ? -v : v; }) },
    { name: 'sparse', values: row(() => (u() < 0.9 ? 0 : 2 * u() - 1)) },
  ];
}

/** Exact bf16 / f16 encodings of float values (for dtype-equivalence tests). */
export function toBf16Exact(values: Float32Array): { bits: Uint16Array; widened: Float32Array } {
  const u32 = new Uint32Array(values.buffer.slice(values.byteOffset, values.byteOffset + values.byteLength));
  const bits = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) bits[i] = u32[i] >>> 16; // truncation: exact bf16 values
  const w = new Uint32Array(values.length);
  for (let i = 0; i < values.length; i++) w[i] = bits[i] << 16;
  return { bits, widened: new Float32Array(w.buffer) };
}
