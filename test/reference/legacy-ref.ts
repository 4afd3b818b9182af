// Plain-TypeScript reference of the GGUF legacy and IQ4 quantizers (spec gguf-block-formats.md
// §2, §3, §6, §7, §8, §12, §13.1, §13.3, §13.5, §14, §15), written as literally as possible with
// every fp32 operation rounded by Math.fround (a double result rounded to float is the correctly
// rounded float result for + - * / sqrt). Used only by tests, as the oracle for the wasm kernels.
const fr = Math.fround;
const fbuf = new Float32Array(1);
const ubuf = new Uint32Array(fbuf.buffer);

export function bitsOf(f: number): number {
  fbuf[0] = f;
  return ubuf[0];
}
export function fromBits(u: number): number {
  ubuf[0] = u >>> 0;
  return fbuf[0];
}

/** fp32 -> fp16 bits by exact arithmetic: round to nearest even, subnormals, inf, NaN -> sign|0x7E00. */
export function toF16(f: number): number {
  const sign = (bitsOf(f) >>> 16) & 0x8000;
  if (Number.isNaN(f)) return sign | 0x7e00;
  const a = Math.abs(f);
  if (a === Infinity) return sign | 0x7c00;
  if (a === 0) return sign;
  let e = Math.floor(Math.log2(a));
  while (2 ** e > a) e--;
  while (2 ** (e + 1) <= a) e++;
  if (e < -14) e = -14;
  const q = 2 ** (e - 10);
  const m = a / q;
  let r = Math.floor(m);
  const frac = m - r;
  if (frac > 0.5 || (frac === 0.5 && r % 2 === 1)) r++;
  if (r === 2048) {
    e++;
    r = 1024;
  }
  if (e > 15) return sign | 0x7c00;
  if (r < 1024) return sign | r;
  return sign | ((e + 15) << 10) | (r - 1024);
}

/** x86 default NaN (0/0) stored as fp16: 0xFE00 (spec §16.1, §16.2). */
export function toF16x86(f: number): number {
  return Number.isNaN(f) ? 0xfe00 : toF16(f);
}

export function fromF16(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 31;
  const m = h & 1023;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1024 + m) * 2 ** (e - 25);
}

/** fp32 -> bf16: nearest even on the value (carry into the exponent gives inf), NaN -> quiet, sign kept. */
export function toBf16(f: number): number {
  const b = bitsOf(f);
  if (Number.isNaN(f)) return ((b >>> 16) | 0x40) & 0xffff;
  let hi = b >>> 16;
  const lo = b & 0xffff;
  if (lo > 0x8000 || (lo === 0x8000 && hi & 1)) hi++;
  return hi & 0xffff;
}

export function nearestInt(v: number): number {
  const t = fr(v + 12582912);
  return (bitsOf(t) & 0x7fffff) - 0x400000;
}

export function truncX86(v: number): number {
  return Math.abs(v) < 2147483648 ? Math.trunc(v) : 0;
}

const FLT_MAX = fromBits(0x7f7fffff);
const EPS = fr(1e-15);
export const KVALUES = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

function absmax(x: Float32Array | number[], o: number, n: number): [number, number] {
  let amax = 0;
  let max = 0;
  for (let i = 0; i < n; i++) {
    const ax = Math.abs(x[o + i]);
    if (ax > amax) {
      amax = ax;
      max = x[o + i];
    }
  }
  return [amax, max];
}

function put16(y: Uint8Array, at: number, v: number): void {
  y[at] = v & 255;
  y[at + 1] = (v >>> 8) & 255;
}
function put32(y: Uint8Array, at: number, v: number): void {
  for (let k = 0; k < 4; k++) y[at + k] = (v >>> (8 * k)) & 255;
}

function packNibbles(L: ArrayLike<number>, y: Uint8Array, at: number): void {
  for (let j = 0; j < 16; j++) y[at + j] = (L[j] & 15) | ((L[j + 16] & 15) << 4);
}
function pack5(L: ArrayLike<number>, y: Uint8Array, at: number): void {
  let qh = 0;
  for (let j = 0; j < 16; j++) {
    qh |= ((L[j] & 0x10) >> 4) << j;
    qh |= ((L[j + 16] & 0x10) >> 4) << (j + 16);
    y[at + 4 + j] = (L[j] & 15) | ((L[j + 16] & 15) << 4);
  }
  put32(y, at, qh >>> 0);
}

// ---- §13.1 QX, §13.3 QKX, §13.5 IQ4 search --------------------------------------------------

export function makeQx(n: number, nmax: number, x: ArrayLike<number>, L: Uint8Array, w: ArrayLike<number>): number {
  let amax = 0;
  let max = 0;
  for (let i = 0; i < n; i++) {
    const ax = Math.abs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < EPS) {
    L.fill(0, 0, n);
    return 0;
  }
  let iscale = fr(-nmax / max);
  let sumlx = 0;
  let suml2 = 0;
  for (let i = 0; i < n; i++) {
    const l = Math.max(-nmax, Math.min(nmax - 1, nearestInt(fr(iscale * x[i]))));
    L[i] = l + nmax;
    sumlx = fr(sumlx + fr(fr(w[i] * x[i]) * l));
    suml2 = fr(suml2 + fr(fr(w[i] * l) * l));
  }
  let scale = suml2 !== 0 ? fr(sumlx / suml2) : 0;
  let best = fr(scale * sumlx);
  for (let is = -9; is <= 9; is++) {
    if (is === 0) continue;
    iscale = fr(-fr(nmax + fr(fr(0.1) * is)) / max);
    sumlx = 0;
    suml2 = 0;
    for (let i = 0; i < n; i++) {
      const l = Math.max(-nmax, Math.min(nmax - 1, nearestInt(fr(iscale * x[i]))));
      sumlx = fr(sumlx + fr(fr(w[i] * x[i]) * l));
      suml2 = fr(suml2 + fr(fr(w[i] * l) * l));
    }
    if (suml2 > 0 && fr(sumlx * sumlx) > fr(best * suml2)) {
      for (let i = 0; i < n; i++) L[i] = nmax + Math.max(-nmax, Math.min(nmax - 1, nearestInt(fr(iscale * x[i]))));
      scale = fr(sumlx / suml2);
      best = fr(scale * sumlx);
    }
  }
  return scale;
}

/** Returns [scale, the_min]. */
export function makeQkx(n: number, nmax: number, x: ArrayLike<number>, w: ArrayLike<number>, L: Uint8Array,
  rmin: number, rdelta: number, nstep: number): [number, number] {
  let min = x[0];
  let max = x[0];
  let sumW = w[0];
  let sumX = fr(sumW * x[0]);
  for (let i = 1; i < n; i++) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sumW = fr(sumW + w[i]);
    sumX = fr(sumX + fr(w[i] * x[i]));
  }
  if (min > 0) min = 0;
  if (max <= min) {
    L.fill(0, 0, n);
    return [0, -min];
  }
  let iscale = fr(nmax / fr(max - min));
  let scale = fr(1 / iscale);
  let best = 0;
  for (let i = 0; i < n; i++) {
    const l = Math.max(0, Math.min(nmax, nearestInt(fr(iscale * fr(x[i] - min)))));
    L[i] = l;
    const diff = fr(fr(fr(scale * l) + min) - x[i]);
    best = fr(best + fr(w[i] * fr(diff * diff)));
  }
  const Laux = new Uint8Array(n);
  for (let is = 0; is <= nstep; is++) {
    iscale = fr(fr(fr(rmin + fr(rdelta * is)) + nmax) / fr(max - min));
    let sumL = 0;
    let sumL2 = 0;
    let sumXL = 0;
    for (let i = 0; i < n; i++) {
      const l = Math.max(0, Math.min(nmax, nearestInt(fr(iscale * fr(x[i] - min)))));
      Laux[i] = l;
      sumL = fr(sumL + fr(w[i] * l));
      sumL2 = fr(sumL2 + fr(fr(w[i] * l) * l));
      sumXL = fr(sumXL + fr(fr(w[i] * l) * x[i]));
    }
    const D = fr(fr(sumW * sumL2) - fr(sumL * sumL));
    if (D > 0) {
      let s = fr(fr(fr(sumW * sumXL) - fr(sumX * sumL)) / D);
      let m = fr(fr(fr(sumL2 * sumX) - fr(sumL * sumXL)) / D);
      if (m > 0) {
        m = 0;
        s = fr(sumXL / sumL2);
      }
      let mad = 0;
      for (let i = 0; i < n; i++) {
        const diff = fr(fr(fr(s * Laux[i]) + m) - x[i]);
        mad = fr(mad + fr(w[i] * fr(diff * diff)));
      }
      if (mad < best) {
        L.set(Laux.subarray(0, n));
        best = mad;
        scale = s;
        min = m;
      }
    }
  }
  return [scale, -min];
}

/** best_index of spec §6, binary search as written there. */
export function bestIndex(v: number): number {
  if (v <= KVALUES[0]) return 0;
  if (v >= KVALUES[15]) return 15;
  let ml = 0;
  let mu = 15;
  while (mu - ml > 1) {
    const mav = (ml + mu) >> 1;
    if (v < KVALUES[mav]) mu = mav;
    else ml = mav;
  }
  return fr(v - KVALUES[mu - 1]) < fr(KVALUES[mu] - v) ? mu - 1 : mu;
}

/** §13.5 with ntry = 7: returns the fp32 scale (the caller handled below-eps). */
export function iq4Search(x: ArrayLike<number>, w: ArrayLike<number>, max: number): number {
  const pass = (id: number): [number, number] => {
    let sumqx = 0;
    let sumq2 = 0;
    for (let j = 0; j < 32; j++) {
      const q = KVALUES[bestIndex(fr(id * x[j]))];
      sumqx = fr(sumqx + fr(fr(w[j] * q) * x[j]));
      sumq2 = fr(sumq2 + fr(fr(w[j] * q) * q));
    }
    return [sumqx, sumq2];
  };
  let d = fr(-max / -127);
  let [sumqx, sumq2] = pass(fr(1 / d));
  d = fr(sumqx / sumq2);
  let best = fr(d * sumqx);
  for (let t = -7; t <= 7; t++) {
    [sumqx, sumq2] = pass(fr((t - 127) / max));
    if (sumq2 > 0 && fr(sumqx * sumqx) > fr(best * sumq2)) {
      d = fr(sumqx / sumq2);
      best = fr(d * sumqx);
    }
  }
  return d;
}

// ---- quantizers: one row (n values) -> GGUF bytes ---------------------------------------------

function sigmaRow(x: Float32Array): number {
  let s = 0;
  for (let i = 0; i < x.length; i++) s = fr(s + fr(x[i] * x[i]));
  return fr(s / x.length);
}
function weightsOf(x: ArrayLike<number>, o: number, qw: Float32Array, sigma2: number, n: number): number[] {
  const w: number[] = [];
  for (let j = 0; j < n; j++) w.push(fr(qw[o + j] * fr(Math.sqrt(fr(sigma2 + fr(x[o + j] * x[o + j]))))));
  return w;
}

export function q4_0(x: Float32Array, qw?: Float32Array): Uint8Array {
  const nb = x.length / 32;
  const y = new Uint8Array(nb * 18);
  const sigma2 = qw ? sigmaRow(x) : 0;
  const L = new Uint8Array(32);
  for (let b = 0; b < nb; b++) {
    const o = b * 32;
    if (qw) {
      const d = makeQx(32, 8, x.subarray(o, o + 32), L, weightsOf(x, o, qw, sigma2, 32));
      put16(y, b * 18, toF16(d));
    } else {
      const [, max] = absmax(x, o, 32);
      const d = fr(max / -8);
      const id = d !== 0 ? fr(1 / d) : 0;
      put16(y, b * 18, toF16(d));
      for (let j = 0; j < 32; j++) L[j] = Math.min(15, truncX86(fr(fr(x[o + j] * id) + 8.5)));
    }
    packNibbles(L, y, b * 18 + 2);
  }
  return y;
}

function minmaxRef(x: Float32Array, o: number): [number, number] {
  let min = FLT_MAX;
  let max = -FLT_MAX;
  for (let j = 0; j < 32; j++) {
    const v = x[o + j];
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return [min, max];
}

function q_1(x: Float32Array, qw: Float32Array | undefined, nmax: number): Uint8Array {
  const five = nmax === 31;
  const bs = five ? 24 : 20;
  const nb = x.length / 32;
  const y = new Uint8Array(nb * bs);
  const sigma2 = qw ? sigmaRow(x) : 0;
  const L = new Uint8Array(32);
  for (let b = 0; b < nb; b++) {
    const o = b * 32;
    if (qw) {
      const [d, theMin] = makeQkx(32, nmax, x.subarray(o, o + 32), weightsOf(x, o, qw, sigma2, 32), L, fr(-0.9), fr(0.05), 36);
      put16(y, b * bs, toF16(d));
      put16(y, b * bs + 2, toF16(-theMin));
    } else {
      const [min, max] = minmaxRef(x, o);
      const d = fr(fr(max - min) / nmax);
      const id = d !== 0 ? fr(1 / d) : 0;
      put16(y, b * bs, toF16(d));
      put16(y, b * bs + 2, toF16(min));
      for (let j = 0; j < 32; j++) {
        const q = truncX86(fr(fr(fr(x[o + j] - min) * id) + 0.5));
        L[j] = five ? q & 0xff : Math.min(15, q);
      }
    }
    if (five) pack5(L, y, b * bs + 4);
    else packNibbles(L, y, b * bs + 4);
  }
  return y;
}
export const q4_1 = (x: Float32Array, qw?: Float32Array) => q_1(x, qw, 15);
export const q5_1 = (x: Float32Array, qw?: Float32Array) => q_1(x, qw, 31);

export function q5_0(x: Float32Array, qw?: Float32Array): Uint8Array {
  const nb = x.length / 32;
  const y = new Uint8Array(nb * 22);
  const sigma2 = qw ? sigmaRow(x) : 0;
  const L = new Uint8Array(32);
  for (let b = 0; b < nb; b++) {
    const o = b * 32;
    if (qw) {
      const d = makeQx(32, 16, x.subarray(o, o + 32), L, weightsOf(x, o, qw, sigma2, 32));
      put16(y, b * 22, toF16(d));
    } else {
      const [, max] = absmax(x, o, 32);
      const d = fr(max / -16);
      const id = d !== 0 ? fr(1 / d) : 0;
      put16(y, b * 22, toF16(d));
      for (let j = 0; j < 32; j++) L[j] = Math.min(31, truncX86(fr(fr(x[o + j] * id) + 16.5)));
    }
    pack5(L, y, b * 22 + 2);
  }
  return y;
}

function iq4Weights(x: Float32Array, o: number, n: number, qw: Float32Array | undefined, sigma2: number): number[] {
  if (qw) return weightsOf(x, o, qw, sigma2, n);
  const w: number[] = [];
  for (let j = 0; j < n; j++) w.push(fr(x[o + j] * x[o + j]));
  return w;
}

export function iq4_nl(x: Float32Array, qw?: Float32Array): Uint8Array {
  const nb = x.length / 32;
  const y = new Uint8Array(nb * 18);
  for (let b = 0; b < nb; b++) {
    const o = b * 32;
    let s = 0;
    for (let j = 0; j < 32; j++) s = fr(s + fr(x[o + j] * x[o + j]));
    const sigma2 = fr(s * fr(2 / 32));
    const [amax, max] = absmax(x, o, 32);
    let d = 0;
    if (amax >= EPS) {
      d = iq4Search(x.subarray(o, o + 32), iq4Weights(x, o, 32, qw, sigma2), max);
    }
    put16(y, b * 18, toF16x86(d));
    const id = d !== 0 ? fr(1 / d) : 0; // C's `d ? 1/d : 0` takes 1/d for NaN: index 15
    const L: number[] = [];
    for (let j = 0; j < 32; j++) L.push(bestIndex(fr(id * x[o + j])));
    packNibbles(L, y, b * 18 + 2);
  }
  return y;
}

export function iq4_xs(x: Float32Array, qw?: Float32Array): Uint8Array {
  const nb = x.length / 256;
  const y = new Uint8Array(nb * 136);
  for (let b = 0; b < nb; b++) {
    const o = b * 256;
    let s = 0;
    for (let j = 0; j < 256; j++) s = fr(s + fr(x[o + j] * x[o + j]));
    const sigma2 = fr(s * fr(2 / 256));
    const scales: number[] = [];
    let maxScale = 0;
    let amaxScale = 0;
    for (let ib = 0; ib < 8; ib++) {
      const ob = o + 32 * ib;
      const [amax, max] = absmax(x, ob, 32);
      if (amax < EPS) {
        scales.push(0);
        continue;
      }
      const w = iq4Weights(x, ob, 32, qw, sigma2);
      const d = iq4Search(x.subarray(ob, ob + 32), w, max);
      scales.push(d);
      if (Math.abs(d) > amaxScale) {
        amaxScale = Math.abs(d);
        maxScale = d;
      }
    }
    const d = fr(-maxScale / 32);
    put16(y, b * 136, toF16(d));
    const id = d !== 0 ? fr(1 / d) : 0;
    let sh = 0;
    const sl = [0, 0, 0, 0];
    for (let ib = 0; ib < 8; ib++) {
      let l = nearestInt(fr(id * scales[ib]));
      l = Math.max(-32, Math.min(31, l));
      const dl = fr(d * l);
      const idl = dl !== 0 ? fr(1 / dl) : 0;
      const L: number[] = [];
      for (let j = 0; j < 32; j++) L.push(bestIndex(fr(idl * x[o + 32 * ib + j])));
      packNibbles(L, y, b * 136 + 8 + 16 * ib);
      l += 32;
      if (ib % 2 === 0) sl[ib >> 1] = l & 15;
      else sl[ib >> 1] |= (l & 15) << 4;
      sh |= (l >> 4) << (2 * ib);
    }
    put16(y, b * 136 + 2, sh);
    for (let k = 0; k < 4; k++) y[b * 136 + 4 + k] = sl[k];
  }
  return y;
}

export const quantizers: Record<string, (x: Float32Array, qw?: Float32Array) => Uint8Array> = {
  q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs,
  f16: (x) => { const y = new Uint8Array(x.length * 2); for (let i = 0; i < x.length; i++) put16(y, 2 * i, toF16(x[i])); return y; },
  bf16: (x) => { const y = new Uint8Array(x.length * 2); for (let i = 0; i < x.length; i++) put16(y, 2 * i, toBf16(x[i])); return y; },
};

// ---- §15 dequantization -------------------------------------------------------------------------

const h16 = (y: Uint8Array, at: number) => y[at] | (y[at + 1] << 8);
const u32 = (y: Uint8Array, at: number) => (y[at] | (y[at + 1] << 8) | (y[at + 2] << 16) | (y[at + 3] << 24)) >>> 0;
function nib(y: Uint8Array, at: number, e: number): number {
  return e < 16 ? y[at + e] & 15 : y[at + e - 16] >> 4;
}

export function dequantize(fmt: string, y: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  if (fmt === 'f16') { for (let i = 0; i < n; i++) out[i] = fromF16(h16(y, 2 * i)); return out; }
  if (fmt === 'bf16') { for (let i = 0; i < n; i++) out[i] = fromBits(h16(y, 2 * i) << 16); return out; }
  if (fmt === 'iq4_xs') {
    for (let b = 0; b < n / 256; b++) {
      const at = b * 136;
      const d = fromF16(h16(y, at));
      const sh = h16(y, at + 2);
      for (let ib = 0; ib < 8; ib++) {
        const ls = ((y[at + 4 + (ib >> 1)] >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4);
        const dl = fr(d * (ls - 32));
        for (let j = 0; j < 32; j++) out[b * 256 + 32 * ib + j] = fr(dl * KVALUES[nib(y, at + 8 + 16 * ib, j)]);
      }
    }
    return out;
  }
  const bs = { q4_0: 18, q4_1: 20, q5_0: 22, q5_1: 24, iq4_nl: 18 }[fmt]!;
  for (let b = 0; b < n / 32; b++) {
    const at = b * bs;
    const d = fromF16(h16(y, at));
    for (let j = 0; j < 32; j++) {
      let v: number;
      if (fmt === 'q4_0') v = fr((nib(y, at + 2, j) - 8) * d);
      else if (fmt === 'iq4_nl') v = fr(d * KVALUES[nib(y, at + 2, j)]);
      else if (fmt === 'q4_1') v = fr(fr(nib(y, at + 4, j) * d) + fromF16(h16(y, at + 2)));
      else if (fmt === 'q5_0') v = fr((nib(y, at + 6, j) + (((u32(y, at + 2) >>> j) & 1) << 4) - 16) * d);
      else v = fr(fr((nib(y, at + 8, j) + (((u32(y, at + 4) >>> j) & 1) << 4)) * d) + fromF16(h16(y, at + 2)));
      out[b * 32 + j] = v;
    }
  }
  return out;
}
