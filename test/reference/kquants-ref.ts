// Plain TypeScript Q2_K..Q6_K quantizers and dequantizers (spec §4, §5, §9–§11, §13, §14.3–§14.6,
// §15), written straight from the spec with Math.fround after every operation and plain
// sequential loops. Tests only: the wasm kernels (both builds) must equal these bytes.
import { f16ToF32, f32ToF16 } from '../../src/util/half.js';

const fr = Math.fround;
const F = new Float32Array(1);
const U = new Uint32Array(F.buffer);

/** fp32 -> fp16 bits (RNE); NaN is stored as x86's default NaN, 0xFE00 (spec §16.1). */
function h(v: number): number {
  return Number.isNaN(v) ? 0xfe00 : f32ToF16(v);
}

/** ggml nearest_int: the 1.5*2^23 bit trick, for every input (NaN -> 0, inf -> -4194304). */
export function nearestInt(v: number): number {
  F[0] = fr(v + 12582912);
  if (Number.isNaN(F[0])) return 0;
  return (U[0] & 0x7fffff) - 0x400000;
}

const clamp = (v: number, lo: number, hi: number) => Math.max(lo, Math.min(hi, v));
const EPS = fr(1e-15);
const NAN = NaN;

function absmax(x: Float32Array | number[], o: number, n: number): [number, number] {
  let amax = 0, max = 0;
  for (let i = 0; i < n; i++) {
    const a = Math.abs(x[o + i]);
    if (a > amax) { amax = a; max = x[o + i]; }
  }
  return [amax, max];
}

// §13.1
export function qx(n: number, nmax: number, x: ArrayLike<number>, o: number, w: ArrayLike<number>, wo: number, L: Uint8Array, lo: number): number {
  const [amax, max] = absmax(x as number[], o, n);
  if (amax < EPS) { L.fill(0, lo, lo + n); return 0; }
  const trial = (iscale: number): [number, number] => {
    let slx = 0, sl2 = 0;
    for (let i = 0; i < n; i++) {
      const l = clamp(nearestInt(fr(iscale * x[o + i])), -nmax, nmax - 1);
      slx = fr(slx + fr(fr(w[wo + i] * x[o + i]) * l));
      sl2 = fr(sl2 + fr(fr(w[wo + i] * l) * l));
    }
    return [slx, sl2];
  };
  let bestIs = fr(-nmax / max);
  const [slx0, sl20] = trial(bestIs);
  let scale = sl20 !== 0 ? fr(slx0 / sl20) : 0;
  let best = fr(scale * slx0);
  for (let is = -9; is <= 9; is++) {
    if (is === 0) continue;
    const iscale = fr(-fr(nmax + fr(fr(0.1) * is)) / max);
    const [slx, sl2] = trial(iscale);
    if (sl2 > 0 && fr(slx * slx) > fr(best * sl2)) {
      bestIs = iscale; scale = fr(slx / sl2); best = fr(scale * slx);
    }
  }
  for (let i = 0; i < n; i++) L[lo + i] = nmax + clamp(nearestInt(fr(bestIs * x[o + i])), -nmax, nmax - 1);
  return scale;
}

// §13.2
export function q3(n: number, nmax: number, x: Float32Array, o: number, L: Uint8Array, lo: number): number {
  const [amax, max] = absmax(x, o, n);
  if (amax < EPS) { L.fill(0, lo, lo + n); return 0; }
  const iscale = fr(-nmax / max);
  const l = new Int32Array(n);
  let sumlx = 0, suml2 = 0;
  for (let i = 0; i < n; i++) {
    const xi = x[o + i];
    l[i] = clamp(nearestInt(fr(iscale * xi)), -nmax, nmax - 1);
    const w = fr(xi * xi);
    sumlx = fr(sumlx + fr(fr(w * xi) * l[i]));
    suml2 = fr(suml2 + fr(fr(w * l[i]) * l[i]));
  }
  for (let itry = 0; itry < 5; itry++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      const xi = x[o + i];
      const w = fr(xi * xi);
      let slx = fr(sumlx - fr(fr(w * xi) * l[i]));
      if (slx > 0) {
        let sl2 = fr(suml2 - fr(fr(w * l[i]) * l[i]));
        const nl = clamp(nearestInt(fr(fr(xi * sl2) / slx)), -nmax, nmax - 1);
        if (nl !== l[i]) {
          slx = fr(slx + fr(fr(w * xi) * nl));
          sl2 = fr(sl2 + fr(fr(w * nl) * nl));
          if (sl2 > 0 && fr(fr(slx * slx) * suml2) > fr(fr(sumlx * sumlx) * sl2)) {
            l[i] = nl; sumlx = slx; suml2 = sl2; changed++;
          }
        }
      }
    }
    if (!changed) break;
  }
  for (let i = 0; i < n; i++) L[lo + i] = l[i] + nmax;
  return fr(sumlx / suml2);
}

// §13.3 (returns [scale, the_min])
export function qkx(n: number, nmax: number, x: Float32Array, o: number, w: Float32Array, L: Uint8Array, lo: number,
  rmin: number, rdelta: number, nstep: number, mad: boolean): [number, number] {
  let min = x[o], max = x[o];
  let sumW = w[0];
  let sumX = fr(sumW * x[o]);
  for (let i = 1; i < n; i++) {
    const xi = x[o + i];
    if (xi < min) min = xi;
    if (xi > max) max = xi;
    sumW = fr(sumW + w[i]);
    sumX = fr(sumX + fr(w[i] * xi));
  }
  if (min > 0) min = 0;
  if (max <= min) { L.fill(0, lo, lo + n); return [0, -min]; }
  let iscale = fr(nmax / fr(max - min));
  let scale = fr(1 / iscale);
  let best = 0;
  const err = (s: number, m: number, Lx: ArrayLike<number>, off: number) => {
    let e = 0;
    for (let i = 0; i < n; i++) {
      let diff = fr(fr(fr(s * Lx[off + i]) + m) - x[o + i]);
      diff = mad ? Math.abs(diff) : fr(diff * diff);
      e = fr(e + fr(w[i] * diff));
    }
    return e;
  };
  for (let i = 0; i < n; i++) L[lo + i] = clamp(nearestInt(fr(iscale * fr(x[o + i] - min))), 0, nmax);
  best = err(scale, min, L, lo);
  const aux = new Uint8Array(n);
  for (let is = 0; is <= nstep; is++) {
    iscale = fr(fr(fr(rmin + fr(rdelta * is)) + nmax) / fr(max - min));
    let sl = 0, sl2 = 0, sxl = 0;
    for (let i = 0; i < n; i++) {
      const l = clamp(nearestInt(fr(iscale * fr(x[o + i] - min))), 0, nmax);
      aux[i] = l;
      const wl = fr(w[i] * l);
      sl = fr(sl + wl);
      sl2 = fr(sl2 + fr(wl * l));
      sxl = fr(sxl + fr(wl * x[o + i]));
    }
    const D = fr(fr(sumW * sl2) - fr(sl * sl));
    if (D > 0) {
      let s = fr(fr(fr(sumW * sxl) - fr(sumX * sl)) / D);
      let m = fr(fr(fr(sl2 * sumX) - fr(sl * sxl)) / D);
      if (m > 0) { m = 0; s = fr(sxl / sl2); }
      const e = err(s, m, aux, 0);
      if (e < best) { L.set(aux, lo); best = e; scale = s; min = m; }
    }
  }
  return [scale, -min];
}

// §13.4
export function qp(n: number, nmax: number, x: Float32Array, L: Uint8Array, w: Float32Array): number {
  let max = 0;
  for (let i = 0; i < n; i++) max = max > x[i] ? max : x[i];
  if (max === 0) { L.fill(0); return 0; }
  let iscale = fr(nmax / max);
  for (let i = 0; i < n; i++) L[i] = nearestInt(fr(iscale * x[i])) & 0xff;
  const scale = fr(1 / iscale);
  let best = 0;
  for (let i = 0; i < n; i++) {
    const diff = fr(x[i] - fr(scale * L[i]));
    best = fr(best + fr(fr(w[i] * diff) * diff));
  }
  for (let is = -4; is <= 4; is++) {
    if (is === 0) continue;
    const iss = fr(fr(fr(fr(0.1) * is) + nmax) / max);
    const ss = fr(1 / iss);
    let mse = 0;
    for (let i = 0; i < n; i++) {
      const l = Math.min(nmax, nearestInt(fr(iss * x[i])));
      const diff = fr(x[i] - fr(ss * l));
      mse = fr(mse + fr(fr(w[i] * diff) * diff));
    }
    if (mse < best) { best = mse; iscale = iss; }
  }
  let sumlx = 0, suml2 = 0;
  for (let i = 0; i < n; i++) {
    const l = Math.min(nmax, nearestInt(fr(iscale * x[i])));
    L[i] = l & 0xff;
    sumlx = fr(sumlx + fr(fr(w[i] * x[i]) * l));
    suml2 = fr(suml2 + fr(fr(w[i] * l) * l));
  }
  for (let itry = 0; itry < 5; itry++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      let slx = fr(sumlx - fr(fr(w[i] * x[i]) * L[i]));
      let sl2 = fr(suml2 - fr(fr(w[i] * L[i]) * L[i]));
      if (slx > 0 && sl2 > 0) {
        const nl = Math.min(nmax, nearestInt(fr(fr(x[i] * sl2) / slx)));
        if (nl !== L[i]) {
          slx = fr(slx + fr(fr(w[i] * x[i]) * nl));
          sl2 = fr(sl2 + fr(fr(w[i] * nl) * nl));
          if (fr(fr(slx * slx) * suml2) > fr(fr(sumlx * sumlx) * sl2)) {
            L[i] = nl & 0xff; sumlx = slx; suml2 = sl2; changed++;
          }
        }
      }
    }
    if (!changed) break;
  }
  const r = fr(sumlx / suml2);
  return Number.isNaN(r) ? NAN : r;
}

function sumSq(x: Float32Array, o: number, n: number): number {
  let s = 0;
  for (let i = 0; i < n; i++) s = fr(s + fr(x[o + i] * x[o + i]));
  return s;
}

function pack2(L: Uint8Array, out: Uint8Array, at: number): void {
  for (let hh = 0; hh < 2; hh++) for (let l = 0; l < 32; l++) {
    const p = 128 * hh + l;
    out[at + 32 * hh + l] = L[p] | (L[p + 32] << 2) | (L[p + 64] << 4) | (L[p + 96] << 6);
  }
}

function setH(out: Uint8Array, at: number, bits: number): void {
  out[at] = bits & 0xff;
  out[at + 1] = bits >>> 8;
}
const getH = (b: Uint8Array, at: number) => f16ToF32(b[at] | (b[at + 1] << 8));

// ---- Q2_K (§9, §14.3) ----
export function q2kRef(x: Float32Array, rowLen: number, imat?: Float32Array): Uint8Array {
  const nrows = x.length / rowLen, nb = rowLen / 256;
  const out = new Uint8Array(nrows * nb * 84);
  const L = new Uint8Array(256), W = new Float32Array(16), sc = new Float32Array(16), mn = new Float32Array(16), sw = new Float32Array(16);
  for (let r = 0; r < nrows; r++) for (let b = 0; b < nb; b++) {
    const o = r * rowLen + b * 256, y = (r * nb + b) * 84;
    if (!imat) {
      let maxS = 0, maxM = 0;
      for (let j = 0; j < 16; j++) {
        for (let l = 0; l < 16; l++) W[l] = Math.abs(x[o + 16 * j + l]);
        [sc[j], mn[j]] = qkx(16, 3, x, o + 16 * j, W, L, 16 * j, -0.5, fr(0.1), 15, true);
        if (sc[j] > maxS) maxS = sc[j];
        if (mn[j] > maxM) maxM = mn[j];
      }
      if (maxS > 0) {
        const is = fr(15 / maxS);
        for (let j = 0; j < 16; j++) out[y + j] = nearestInt(fr(is * sc[j])) & 0xff;
        setH(out, y + 80, h(fr(maxS / 15)));
      }
      if (maxM > 0) {
        const is = fr(15 / maxM);
        for (let j = 0; j < 16; j++) out[y + j] = (out[y + j] | (nearestInt(fr(is * mn[j])) << 4)) & 0xff;
        setH(out, y + 82, h(fr(maxM / 15)));
      }
    } else {
      const sigma2 = fr(sumSq(x, o, 256) / 256);
      for (let j = 0; j < 16; j++) {
        let s = 0;
        for (let l = 0; l < 16; l++) {
          const v = x[o + 16 * j + l];
          W[l] = fr(imat[b * 256 + 16 * j + l] * fr(Math.sqrt(fr(sigma2 + fr(v * v)))));
          s = fr(s + W[l]);
        }
        sw[j] = s;
        [sc[j], mn[j]] = qkx(16, 3, x, o + 16 * j, W, L, 16 * j, fr(-0.9), fr(0.05), 36, false);
      }
      const Ls = new Uint8Array(16), Lm = new Uint8Array(16);
      setH(out, y + 80, h(qp(16, 15, sc, Ls, sw)));
      setH(out, y + 82, h(qp(16, 15, mn, Lm, sw)));
      for (let j = 0; j < 16; j++) out[y + j] = (Ls[j] | (Lm[j] << 4)) & 0xff;
    }
    const d = getH(out, y + 80), dmin = getH(out, y + 82);
    for (let j = 0; j < 16; j++) {
      const dj = fr(d * (out[y + j] & 15));
      if (dj === 0) continue;
      const mj = fr(dmin * (out[y + j] >> 4));
      for (let i = 0; i < 16; i++) L[16 * j + i] = clamp(nearestInt(fr(fr(x[o + 16 * j + i] + mj) / dj)), 0, 3);
    }
    pack2(L, out, y + 16);
  }
  return out;
}

// ---- Q3_K (§10, §14.4) ----
function q3Pack(scb: Uint8Array, y: number, j: number, l: number): void {
  if (j < 8) scb[y + j] = l & 15;
  else scb[y + j - 8] |= (l & 15) << 4;
  scb[y + 8 + (j % 4)] |= (l >> 4) << (2 * Math.floor(j / 4));
}
function q3Unpack(b: Uint8Array, y: number, j: number): number {
  const lo = j < 8 ? b[y + j] & 15 : b[y + j - 8] >> 4;
  return (lo | (((b[y + 8 + (j % 4)] >> (2 * Math.floor(j / 4))) & 3) << 4)) - 32;
}
export function q3kRef(x: Float32Array, rowLen: number, imat?: Float32Array): Uint8Array {
  const nrows = x.length / rowLen, nb = rowLen / 256;
  const out = new Uint8Array(nrows * nb * 110);
  const L = new Uint8Array(256), W = new Float32Array(16), sc = new Float32Array(16), sw = new Float32Array(16), Ls = new Uint8Array(16);
  for (let r = 0; r < nrows; r++) for (let b = 0; b < nb; b++) {
    const o = r * rowLen + b * 256, y = (r * nb + b) * 110;
    if (!imat) {
      let amax = 0, maxS = 0;
      for (let j = 0; j < 16; j++) {
        sc[j] = q3(16, 4, x, o + 16 * j, L, 16 * j);
        if (Math.abs(sc[j]) > amax) { amax = Math.abs(sc[j]); maxS = sc[j]; }
      }
      if (maxS !== 0) {
        const is = fr(-32 / maxS);
        for (let j = 0; j < 16; j++) {
          const l = (nearestInt(fr(is * sc[j])) << 24) >> 24;
          q3Pack(out, y + 96, j, clamp(l, -32, 31) + 32);
        }
        setH(out, y + 108, h(fr(1 / is)));
      }
    } else {
      const sigma2 = fr(fr(2 * sumSq(x, o, 256)) / 256);
      for (let j = 0; j < 16; j++) {
        let s = 0;
        for (let l = 0; l < 16; l++) {
          const v = x[o + 16 * j + l];
          W[l] = fr(imat[b * 256 + 16 * j + l] * fr(Math.sqrt(fr(sigma2 + fr(v * v)))));
          s = fr(s + W[l]);
        }
        sw[j] = s;
        sc[j] = qx(16, 4, x, o + 16 * j, W, 0, L, 16 * j);
      }
      const d = qx(16, 32, sc, 0, sw, 0, Ls, 0);
      for (let j = 0; j < 16; j++) q3Pack(out, y + 96, j, Ls[j]);
      setH(out, y + 108, h(d));
    }
    const d = getH(out, y + 108);
    for (let j = 0; j < 16; j++) {
      const dj = fr(d * q3Unpack(out, y + 96, j));
      if (dj === 0) continue;
      for (let i = 0; i < 16; i++) L[16 * j + i] = clamp(nearestInt(fr(x[o + 16 * j + i] / dj)), -4, 3) + 4;
    }
    for (let e = 0; e < 256; e++) if (L[e] > 3) { out[y + (e % 32)] |= 1 << Math.floor(e / 32); L[e] -= 4; }
    pack2(L, out, y + 32);
  }
  return out;
}

// ---- Q4_K / Q5_K (§4, §11, §14.5) ----
function k4Pack(b: Uint8Array, y: number, j: number, ls: number, lm: number): void {
  if (j < 4) { b[y + j] = ls; b[y + j + 4] = lm; } else {
    b[y + j + 4] = (ls & 15) | ((lm & 15) << 4);
    b[y + j - 4] |= (ls >> 4) << 6;
    b[y + j] |= (lm >> 4) << 6;
  }
}
export function k4Unpack(b: Uint8Array, y: number, j: number): [number, number] {
  if (j < 4) return [b[y + j] & 63, b[y + j + 4] & 63];
  return [(b[y + j + 4] & 15) | ((b[y + j - 4] >> 6) << 4), (b[y + j + 4] >> 4) | ((b[y + j] >> 6) << 4)];
}
function k45(x: Float32Array, rowLen: number, imat: Float32Array | undefined, nmax: number, bytes: number): Uint8Array {
  const nrows = x.length / rowLen, nb = rowLen / 256;
  const out = new Uint8Array(nrows * nb * bytes);
  const L = new Uint8Array(256), W = new Float32Array(32), sc = new Float32Array(8), mn = new Float32Array(8), sw = new Float32Array(8);
  for (let r = 0; r < nrows; r++) for (let b = 0; b < nb; b++) {
    const o = r * rowLen + b * 256, y = (r * nb + b) * bytes;
    if (!imat) {
      let maxS = 0, maxM = 0;
      for (let j = 0; j < 8; j++) {
        const av = fr(Math.sqrt(fr(sumSq(x, o + 32 * j, 32) / 32)));
        for (let l = 0; l < 32; l++) W[l] = fr(av + Math.abs(x[o + 32 * j + l]));
        [sc[j], mn[j]] = nmax === 15
          ? qkx(32, 15, x, o + 32 * j, W, L, 32 * j, -1, fr(0.1), 20, false)
          : qkx(32, 31, x, o + 32 * j, W, L, 32 * j, -0.5, fr(0.1), 15, false);
        if (sc[j] > maxS) maxS = sc[j];
        if (mn[j] > maxM) maxM = mn[j];
      }
      const iS = maxS > 0 ? fr(63 / maxS) : 0, iM = maxM > 0 ? fr(63 / maxM) : 0;
      for (let j = 0; j < 8; j++) {
        k4Pack(out, y + 4, j, Math.min(63, nearestInt(fr(iS * sc[j])) & 0xff), Math.min(63, nearestInt(fr(iM * mn[j])) & 0xff));
      }
      setH(out, y, h(fr(maxS / 63)));
      setH(out, y + 2, h(fr(maxM / 63)));
    } else {
      const sigma2 = fr(fr(2 * sumSq(x, o, 256)) / 256);
      for (let j = 0; j < 8; j++) {
        let s = 0;
        for (let l = 0; l < 32; l++) {
          const v = x[o + 32 * j + l];
          W[l] = fr(imat[b * 256 + 32 * j + l] * fr(Math.sqrt(fr(sigma2 + fr(v * v)))));
          s = fr(s + W[l]);
        }
        sw[j] = s;
        [sc[j], mn[j]] = qkx(32, nmax, x, o + 32 * j, W, L, 32 * j, fr(-0.9), fr(0.05), 36, false);
      }
      const Ls = new Uint8Array(8), Lm = new Uint8Array(8);
      const d = qp(8, 63, sc, Ls, sw), m = qp(8, 63, mn, Lm, sw);
      for (let j = 0; j < 8; j++) {
        if (nmax === 31) k4Pack(out, y + 4, j, Math.min(63, Ls[j]), Math.min(63, Lm[j]));
        else k4Pack(out, y + 4, j, Ls[j], Lm[j]);
      }
      setH(out, y, h(d));
      setH(out, y + 2, h(m));
    }
    const d = getH(out, y), dmin = getH(out, y + 2);
    for (let j = 0; j < 8; j++) {
      const [ls, lm] = k4Unpack(out, y + 4, j);
      const dj = fr(d * ls);
      if (dj === 0) continue;
      const mj = fr(dmin * lm);
      for (let i = 0; i < 32; i++) L[32 * j + i] = clamp(nearestInt(fr(fr(x[o + 32 * j + i] + mj) / dj)), 0, nmax);
    }
    if (nmax === 15) {
      for (let c = 0; c < 4; c++) for (let l = 0; l < 32; l++) out[y + 16 + 32 * c + l] = L[64 * c + l] | (L[64 * c + 32 + l] << 4);
    } else {
      for (let c = 0; c < 4; c++) for (let l = 0; l < 32; l++) {
        let l1 = L[64 * c + l], l2 = L[64 * c + 32 + l];
        if (l1 > 15) { l1 -= 16; out[y + 16 + l] |= 1 << (2 * c); }
        if (l2 > 15) { l2 -= 16; out[y + 16 + l] |= 2 << (2 * c); }
        out[y + 48 + 32 * c + l] = l1 | (l2 << 4);
      }
    }
  }
  return out;
}
export const q4kRef = (x: Float32Array, rowLen: number, imat?: Float32Array) => k45(x, rowLen, imat, 15, 144);
export const q5kRef = (x: Float32Array, rowLen: number, imat?: Float32Array) => k45(x, rowLen, imat, 31, 176);

// ---- Q6_K (§5, §14.6) ----
export function q6kRef(x: Float32Array, rowLen: number, imat?: Float32Array): Uint8Array {
  const nrows = x.length / rowLen, nb = rowLen / 256;
  const out = new Uint8Array(nrows * nb * 210);
  const L = new Uint8Array(256), W = new Float32Array(16), sc = new Float32Array(16);
  for (let r = 0; r < nrows; r++) for (let b = 0; b < nb; b++) {
    const o = r * rowLen + b * 256, y = (r * nb + b) * 210;
    let maxS = 0, maxA = 0;
    for (let j = 0; j < 16; j++) {
      if (imat) sc[j] = qx(16, 32, x, o + 16 * j, imat, b * 256 + 16 * j, L, 16 * j);
      else {
        for (let l = 0; l < 16; l++) W[l] = fr(x[o + 16 * j + l] * x[o + 16 * j + l]);
        sc[j] = qx(16, 32, x, o + 16 * j, W, 0, L, 16 * j);
      }
      if (Math.abs(sc[j]) > maxA) { maxA = Math.abs(sc[j]); maxS = sc[j]; }
    }
    if (maxA < EPS) continue;
    const is = fr(-128 / maxS);
    setH(out, y + 208, h(fr(1 / is)));
    for (let j = 0; j < 16; j++) out[y + 192 + j] = Math.min(127, nearestInt(fr(is * sc[j]))) & 0xff;
    const d = getH(out, y + 208);
    for (let j = 0; j < 16; j++) {
      const dj = fr(d * ((out[y + 192 + j] << 24) >> 24));
      if (dj === 0) continue;
      for (let i = 0; i < 16; i++) L[16 * j + i] = clamp(nearestInt(fr(x[o + 16 * j + i] / dj)), -32, 31) + 32;
    }
    for (let hh = 0; hh < 2; hh++) for (let l = 0; l < 32; l++) {
      const p = 128 * hh + l;
      const a = L[p], bq = L[p + 32], c = L[p + 64], e = L[p + 96];
      out[y + 64 * hh + l] = (a & 15) | ((c & 15) << 4);
      out[y + 64 * hh + 32 + l] = (bq & 15) | ((e & 15) << 4);
      out[y + 128 + 32 * hh + l] = (a >> 4) | ((bq >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6);
    }
  }
  return out;
}

export const kquantRefs: Record<string, (x: Float32Array, rowLen: number, imat?: Float32Array) => Uint8Array> = {
  q2_k: q2kRef, q3_k: q3kRef, q4_k: q4kRef, q5_k: q5kRef, q6_k: q6kRef,
};

// ---- Dequantization (§15), element by element straight from the layouts ----
export function dequantRef(fmt: string, data: Uint8Array, n: number): Float32Array {
  const y = new Float32Array(n);
  const nb = n / 256;
  const bytes = { q2_k: 84, q3_k: 110, q4_k: 144, q5_k: 176, q6_k: 210 }[fmt]!;
  for (let b = 0; b < nb; b++) {
    const o = b * bytes;
    for (let e = 0; e < 256; e++) {
      let v: number;
      if (fmt === 'q2_k') {
        const s = data[o + (e >> 4)];
        const q = (data[o + 16 + 32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
        v = fr(fr(getH(data, o + 80) * (s & 15)) * q) - fr(getH(data, o + 82) * (s >> 4));
      } else if (fmt === 'q3_k') {
        const low = (data[o + 32 + 32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
        const hb = (data[o + (e & 31)] >> (e >> 5)) & 1;
        v = fr(getH(data, o + 108) * q3Unpack(data, o + 96, e >> 4)) * (low - (hb ? 0 : 4));
      } else if (fmt === 'q4_k' || fmt === 'q5_k') {
        const c = e >> 6, t = (e >> 5) & 1, l = e & 31;
        const [ls, lm] = k4Unpack(data, o + 4, 2 * c + t);
        let q: number;
        if (fmt === 'q4_k') q = (data[o + 16 + 32 * c + l] >> (4 * t)) & 15;
        else q = ((data[o + 48 + 32 * c + l] >> (4 * t)) & 15) | (((data[o + 16 + l] >> (2 * c + t)) & 1) << 4);
        v = fr(fr(getH(data, o) * ls) * q) - fr(getH(data, o + 2) * lm);
      } else {
        const hh = e >> 7, r = e & 127, quarter = r >> 5, l = r & 31;
        const qlb = data[o + 64 * hh + l + (quarter & 1) * 32];
        const low = quarter < 2 ? qlb & 15 : qlb >> 4;
        const hi = (data[o + 128 + 32 * hh + l] >> (2 * quarter)) & 3;
        const sc = (data[o + 192 + (e >> 4)] << 24) >> 24;
        v = fr(getH(data, o + 208) * sc) * ((low | (hi << 4)) - 32);
      }
      y[b * 256 + e] = fr(v);
    }
  }
  return y;
}
