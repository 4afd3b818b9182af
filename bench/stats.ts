// The parts of ./util.ts that run in a browser too (bench/matvec-browser-page.ts): no Node imports.

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * `n` samples of each of two measurements, taken alternately (a, b, then b, a, ...) so that a
 * change in the machine's load falls on both; sample i of each belongs to pair i.
 */
export function alternate(n: number, a: () => number, b: () => number): { a: number[]; b: number[] } {
  const as: number[] = [], bs: number[] = [];
  for (let i = 0; i < n; i++) {
    if (i % 2 === 0) { as.push(a()); bs.push(b()); } else { bs.push(b()); as.push(a()); }
  }
  return { a: as, b: bs };
}

/** Weight-like test data: the sum of two seeded uniforms (a bell around 0, std about 0.008). */
export function weightData(n: number, seed = 12345): Float32Array {
  const v = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const a = (s >>> 8) / 16777216;
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    v[i] = 0.02 * (a + (s >>> 8) / 16777216 - 1);
  }
  return v;
}
