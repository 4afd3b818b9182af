// Deterministic test data: a seeded PRNG and the awkward rows every format must survive.
import { E4M3_TO_F32 } from '../../src/io/dtypes.js';

export function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s >>> 8) / 16777216;
  };
}

/** mulberry32: a seeded generator of uniform values in [0, 1). */
export function mulberry32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
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

/** A generated tensor: float32 values, or FP8 codes (dtype F8_E4M3). */
export type GenTensor = { name: string; dtype: string; shape: number[]; data: Float32Array | Uint8Array };

/**
 * The tensors as a DeepSeek-V3 checkpoint ships them: every projection of the layers (attention,
 * dense and expert FFNs) in FP8 E4M3 with a `_scale_inv` per `block` x `block` tile (its absmax /
 * 448, codes rounded to the nearest value), everything else as it was.
 */
export function fp8Weights(tensors: GenTensor[], block: number): GenTensor[] {
  const codes = [...E4M3_TO_F32.keys()].filter((c) => Number.isFinite(E4M3_TO_F32[c]));
  const nearest = (v: number) => codes.reduce((b, c) => (Math.abs(E4M3_TO_F32[c] - v) < Math.abs(E4M3_TO_F32[b] - v) ? c : b), 0);
  return tensors.flatMap((t) => {
    if (!/^model\.layers\.\d+\.(self_attn|mlp)\..*_proj\.weight$/.test(t.name)) return [t];
    const [rows, cols] = t.shape, x = t.data as Float32Array;
    const sr = Math.ceil(rows / block), sc = Math.ceil(cols / block);
    const scale = new Float32Array(sr * sc), q = new Uint8Array(rows * cols);
    for (let i = 0; i < x.length; i++) {
      const s = Math.floor(Math.floor(i / cols) / block) * sc + Math.floor((i % cols) / block);
      scale[s] = Math.max(scale[s], Math.abs(x[i]) / 448);
    }
    for (let i = 0; i < x.length; i++) q[i] = nearest(x[i] / scale[Math.floor(Math.floor(i / cols) / block) * sc + Math.floor((i % cols) / block)]);
    return [{ ...t, dtype: 'F8_E4M3', data: q }, { name: `${t.name}_scale_inv`, dtype: 'F32', shape: [sr, sc], data: scale }];
  });
}

/**
 * The tensors as NVIDIA's NVFP4 releases ship them: every projection whose rows are a multiple of
 * 16 as E2M1 codes (two per byte, the even element low) with an F8_E4M3 scale per 16 values and
 * one fp32 factor per tensor, ModelOpt-style (`<w>`, `<w>_scale`, `<w>_scale_2`) or
 * compressed-tensors-style (`<w>_packed`, `<w>_scale`, `<w>_global_scale`, a divisor).
 */
export function nvfp4Weights(tensors: GenTensor[], style: 'modelopt' | 'compressed-tensors'): GenTensor[] {
  const e2m1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6];
  const e4m3 = [...E4M3_TO_F32.keys()].filter((c) => c < 0x7f);
  const nearest = <T>(list: T[], value: (t: T) => number, v: number) => list.reduce((b, c) => (Math.abs(value(c) - v) < Math.abs(value(b) - v) ? c : b));
  return tensors.flatMap((t) => {
    if (!/^model\.layers\.\d+\.(self_attn|mlp)\..*_proj\.weight$/.test(t.name) || t.shape[1] % 16 !== 0) return [t];
    const [rows, cols] = t.shape, x = t.data as Float32Array;
    const amax = x.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
    const s2 = Math.fround(amax / (6 * 448));
    const scale = new Uint8Array(rows * cols / 16), packed = new Uint8Array(rows * cols / 2);
    for (let b = 0; b < scale.length; b++) {
      const bmax = x.subarray(b * 16, b * 16 + 16).reduce((a, v) => Math.max(a, Math.abs(v)), 0);
      scale[b] = nearest(e4m3, (c) => E4M3_TO_F32[c], bmax / 6 / s2);
      const s = E4M3_TO_F32[scale[b]] * s2;
      for (let j = 0; j < 16; j++) {
        const v = x[b * 16 + j];
        const m = s > 0 ? nearest([0, 1, 2, 3, 4, 5, 6, 7], (k) => e2m1[k], Math.abs(v) / s) : 0;
        const code = v < 0 && m ? m | 8 : m;
        packed[(b * 16 + j) >> 1] |= code << (j % 2 ? 4 : 0);
      }
    }
    const ct = style === 'compressed-tensors';
    return [
      { name: ct ? `${t.name}_packed` : t.name, dtype: 'U8', shape: [rows, cols / 2], data: packed },
      { name: `${t.name}_scale`, dtype: 'F8_E4M3', shape: [rows, cols / 16], data: scale },
      { name: `${t.name}${ct ? '_global_scale' : '_scale_2'}`, dtype: 'F32', shape: ct ? [1] : [], data: new Float32Array([ct ? 1 / s2 : s2]) },
    ];
  });
}

/**
 * `opts` with importance weights added when its format requires them (FormatSpec.requiresImportance:
 * IQ1_S, IQ2_XXS, IQ2_XS, as llama.cpp): seeded values in [0.5, 1.5), one per column.
 */
export function withImportance<T extends { format: string; rowLength: number; importance?: Float32Array }>(opts: T, spec: { requiresImportance?: boolean } | undefined): T {
  if (!spec?.requiresImportance || opts.importance) return opts;
  const u = lcg(opts.rowLength);
  return { ...opts, importance: Float32Array.from({ length: opts.rowLength }, () => 0.5 + u()) };
}
