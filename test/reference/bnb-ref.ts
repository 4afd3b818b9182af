// Plain TypeScript reference quantizers for the bnb/fp8/mx family, written from the published
// definitions rather than from the kernels: NF4/FP4 follow bitsandbytes' decision trees literally,
// FP8 and E2M1 rounding search the format's value grid (ties to the even code) instead of using bit
// tricks, and the dynamic map is evaluated from its formula with exact rationals. Every f32
// operation of the kernels is mirrored with Math.fround (a double op then fround equals the f32 op
// for + - * /). Output: the registry layout, row sections stacked row after row, then tensor sections.
const f = Math.fround;

/** Decimal literal -> nearest f32, rounded once (as a C compiler reads `0.0397...f`). */
export function decimalToF32(s: string): number {
  const neg = s.startsWith('-');
  const [ip, fp = ''] = (neg ? s.slice(1) : s).split('.');
  const N = BigInt(ip + fp);
  const D = 10n ** BigInt(fp.length);
  if (N === 0n) return neg ? -0 : 0;
  const atLeast = (e: number) => (e >= 0 ? N >= D << BigInt(e) : N << BigInt(-e) >= D);
  let e = 0;
  while (atLeast(e + 1)) e++;
  while (!atLeast(e)) e--;
  const sh = 23 - e;
  const num = sh >= 0 ? N << BigInt(sh) : N;
  const den = sh >= 0 ? D : D << BigInt(-sh);
  let q = num / den;
  const r = num % den;
  if (2n * r > den || (2n * r === den && (q & 1n) === 1n)) q++;
  const v = Number(q) * 2 ** (e - 23);
  return neg ? -v : v;
}

const dec = (a: string[]) => a.map(decimalToF32);

// bitsandbytes csrc/kernels.cu: nf4_dequantization_lut and the dQuantizeNF4 tree constants.
export const NF4_VALUES = dec(['-1.0', '-0.6961928009986877', '-0.5250730514526367', '-0.39491748809814453', '-0.28444138169288635',
  '-0.18477343022823334', '-0.09105003625154495', '0.0', '0.07958029955625534', '0.16093020141124725', '0.24611230194568634',
  '0.33791524171829224', '0.44070982933044434', '0.5626170039176941', '0.7229568362236023', '1.0']);
const NT = dec(['-0.8480964004993439', '-0.6106329262256622', '-0.4599952697753906', '-0.33967943489551544', '-0.23460740596055984',
  '-0.13791173323988914', '-0.045525018125772476', '0.03979014977812767', '0.1202552504837513', '0.2035212516784668',
  '0.2920137718319893', '0.3893125355243683', '0.5016634166240692', '0.6427869200706482', '0.8614784181118011']);
// fp4_dequantization_lut (3-bit magnitude code -> value) and the dQuantizeFP4 tree constants.
const FP4_LUT = dec(['0.0', '0.005208333333', '0.66666667', '1.0', '0.33333333', '0.5', '0.16666667', '0.25']);
export const FP4_VALUES = [...FP4_LUT, ...FP4_LUT.map((v) => -v)];
const FT = dec(['0.00260417', '0.0859375', '0.20833333', '0.29166667', '0.4166667', '0.583333', '0.8333333']);

/** bitsandbytes dQuantizeNF4, branch for branch. */
export function nf4Code(x: number): number {
  if (x > NT[7]) {
    if (x > NT[11]) {
      if (x > NT[13]) return x > NT[14] ? 0b1111 : 0b1110;
      return x > NT[12] ? 0b1101 : 0b1100;
    }
    if (x > NT[9]) return x > NT[10] ? 0b1011 : 0b1010;
    return x > NT[8] ? 0b1001 : 0b1000;
  }
  if (x > NT[3]) {
    if (x > NT[5]) return x > NT[6] ? 0b0111 : 0b0110;
    return x > NT[4] ? 0b0101 : 0b0100;
  }
  if (x > NT[1]) return x > NT[2] ? 0b0011 : 0b0010;
  return x > NT[0] ? 0b0001 : 0b0000;
}

/** bitsandbytes dQuantizeFP4, branch for branch. */
export function fp4Code(x: number): number {
  const sign = x < 0 ? 0b1000 : 0;
  const a = Math.abs(x);
  if (a > FT[3]) {
    if (a > FT[5]) return (a > FT[6] ? 0b011 : 0b010) + sign;
    return (a > FT[4] ? 0b101 : 0b100) + sign;
  }
  if (a > FT[1]) return (a > FT[2] ? 0b111 : 0b110) + sign;
  return (a > FT[0] ? 0b001 : 0b000) + sign;
}

/** bitsandbytes create_dynamic_map(signed=True): exact entries rounded once to f32, sorted. */
export const DYNAMIC_MAP: number[] = (() => {
  const v: number[] = [0, 1];
  for (let i = 0; i < 7; i++) {
    for (let k = 0; k < 2 ** i; k++) {
      // 10^(i-6) * (b_k + b_(k+1)) / 2 with b = linspace(0.1, 1, 2^i + 1), as one exact fraction
      // (numerator and denominator are exact doubles, so one division rounds it correctly).
      const m = f((2 ** (i + 1) + 18 * k + 9) / (2 ** (i + 1) * 10 ** (7 - i)));
      v.push(m, -m);
    }
  }
  return v.sort((a, b) => a - b);
})();
const DYN_MID = DYNAMIC_MAP.slice(0, 255).map((d, k) => f((d + DYNAMIC_MAP[k + 1]) / 2));

export function dynCode(v: number): number {
  let c = 0;
  for (let k = 0; k < 255; k++) if (v > DYN_MID[k]) c++;
  return c;
}

export interface RefOptions {
  groupSize?: number;
  doubleQuant?: boolean;
  granularity?: 'channel' | 'tensor';
  calibration?: { method: 'absmax' | 'clip' | 'fixed'; ratio?: number; scale?: number; max?: number };
}

function absmaxOf(x: Float32Array, from: number, n: number): number {
  let m = 0;
  for (let i = from; i < from + n; i++) m = Math.max(m, Math.abs(x[i]));
  return m;
}

/** Output bytes of nf4/fp4 in the registry layout. */
export function refQuantize4(fmt: 'nf4' | 'fp4', x: Float32Array, nrows: number, rowLen: number, o: RefOptions = {}): Uint8Array {
  const gs = o.groupSize ?? 64;
  const nb = rowLen / gs;
  const code = fmt === 'nf4' ? nf4Code : fp4Code;
  const codes = new Uint8Array(nrows * rowLen / 2);
  const am = new Float32Array(nrows * nb);
  for (let r = 0; r < nrows; r++) {
    for (let b = 0; b < nb; b++) {
      const at = r * rowLen + b * gs;
      const s = absmaxOf(x, at, gs);
      am[r * nb + b] = s;
      const inv = s !== 0 ? f(1 / s) : 0;
      const div = inv === Infinity;
      for (let i = 0; i < gs; i += 2) {
        const va = div ? f(x[at + i] / s) : f(x[at + i] * inv);
        const vb = div ? f(x[at + i + 1] / s) : f(x[at + i + 1] * inv);
        codes[(at + i) / 2] = (code(va) << 4) | code(vb);
      }
    }
  }
  if (!o.doubleQuant) return concat(codes, new Uint8Array(am.buffer));
  const dq = refFlatDoubleQuant(am);
  return concat(codes, dq.codes, new Uint8Array(dq.nested.buffer), new Uint8Array(new Float32Array([dq.offset]).buffer));
}

/**
 * bitsandbytes' own double quantization of a tensor's block absmax values `am` (flattened, row
 * major): offset = their mean (summed in f64, rounded once to f32), then groups of 256 over the
 * whole array, each with its absmax of |a - offset| and 8-bit codes of the signed dynamic map.
 */
export function refFlatDoubleQuant(am: Float32Array): { codes: Uint8Array; nested: Float32Array; offset: number } {
  let sum = 0;
  for (let i = 0; i < am.length; i++) sum += am[i];
  const offset = f(sum / am.length);
  const codes = new Uint8Array(am.length);
  const nested = new Float32Array(Math.ceil(am.length / 256));
  for (let g = 0; g < nested.length; g++) {
    const from = g * 256, to = Math.min(am.length, from + 256);
    let gmax = 0;
    for (let b = from; b < to; b++) gmax = Math.max(gmax, Math.abs(f(am[b] - offset)));
    nested[g] = gmax;
    const inv = gmax !== 0 ? f(1 / gmax) : 0;
    for (let b = from; b < to; b++) {
      const d = f(am[b] - offset);
      codes[b] = dynCode(inv === Infinity ? f(d / gmax) : f(d * inv));
    }
  }
  return { codes, nested, offset };
}

export function refDequantize4(fmt: 'nf4' | 'fp4', data: Uint8Array, nrows: number, rowLen: number, o: RefOptions = {}): Float32Array {
  const gs = o.groupSize ?? 64;
  const nb = rowLen / gs;
  const table = fmt === 'nf4' ? NF4_VALUES : FP4_VALUES;
  const codes = data.subarray(0, nrows * rowLen / 2);
  let scales: Float32Array;
  if (!o.doubleQuant) {
    scales = f32view(data, nrows * rowLen / 2, nrows * nb);
  } else {
    const q = data.subarray(nrows * rowLen / 2, nrows * rowLen / 2 + nrows * nb);
    const a2 = f32view(data, nrows * rowLen / 2 + nrows * nb, Math.ceil((nrows * nb) / 256));
    const offset = f32view(data, data.length - 4, 1)[0];
    scales = Float32Array.from(q, (c, b) => f(f(DYNAMIC_MAP[c] * a2[b >> 8]) + offset));
  }
  const out = new Float32Array(nrows * rowLen);
  for (let i = 0; i < out.length; i++) {
    const c = i % 2 === 0 ? codes[i >> 1] >> 4 : codes[i >> 1] & 15;
    out[i] = f(table[c] * scales[Math.floor(i / gs)]);
  }
  return out;
}

// ---- FP8 and E2M1: nearest value on the format's grid, ties to the even code ----------------

interface Grid { values: number[]; codes: number[] }

function fp8Value(code: number, expBits: number, manBits: number): number {
  const bias = 2 ** (expBits - 1) - 1;
  const e = (code >> manBits) & (2 ** expBits - 1);
  const m = code & (2 ** manBits - 1);
  return e === 0 ? m * 2 ** (1 - bias - manBits) : (1 + m / 2 ** manBits) * 2 ** (e - bias);
}

function grid(maxCode: number, expBits: number, manBits: number): Grid {
  const codes = Array.from({ length: maxCode + 1 }, (_, c) => c);
  return { codes, values: codes.map((c) => fp8Value(c, expBits, manBits)) };
}

export const FP8 = {
  fp8_e4m3: { fmax: 448, grid: grid(0x7e, 4, 3), expBits: 4, manBits: 3 },
  fp8_e5m2: { fmax: 57344, grid: grid(0x7b, 5, 2), expBits: 5, manBits: 2 },
} as const;
const E2M1 = grid(7, 2, 1);

function nearestOnGrid(a: number, g: Grid): number {
  const v = g.values;
  if (a >= v[v.length - 1]) return g.codes[v.length - 1];
  let hi = 1;
  while (v[hi] < a) hi++;
  const lo = hi - 1;
  const dl = a - v[lo];
  const dh = v[hi] - a;
  if (dl < dh) return g.codes[lo];
  if (dh < dl) return g.codes[hi];
  return g.codes[lo] % 2 === 0 ? g.codes[lo] : g.codes[hi];
}

const signBit = (y: number) => (y < 0 || Object.is(y, -0) ? 1 : 0);

export function refQuantizeFp8(fmt: keyof typeof FP8, x: Float32Array, nrows: number, rowLen: number, o: RefOptions = {}): Uint8Array {
  const { fmax, grid: g } = FP8[fmt];
  const cal = o.calibration ?? { method: 'absmax' };
  const tensor = o.granularity === 'tensor';
  const clampMax = cal.method === 'fixed' ? f(cal.max!) : Infinity;
  const scaleOf = (amax: number) => {
    if (cal.method === 'fixed') return f(cal.scale!);
    if (cal.method === 'clip') return f(f(amax * f(cal.ratio!)) / fmax);
    return f(amax / fmax);
  };
  const codes = new Uint8Array(nrows * rowLen);
  const scales = new Float32Array(nrows);
  const tscale = tensor ? scaleOf(absmaxOf(x, 0, x.length)) : 0;
  for (let r = 0; r < nrows; r++) {
    const s = tensor ? tscale : scaleOf(absmaxOf(x, r * rowLen, rowLen));
    scales[r] = s;
    const inv = s !== 0 ? f(1 / s) : 0;
    for (let i = r * rowLen; i < (r + 1) * rowLen; i++) {
      const xc = Math.max(Math.min(x[i], clampMax), -clampMax);
      const y = inv === Infinity ? f(xc / s) : f(xc * inv);
      codes[i] = nearestOnGrid(Math.min(Math.abs(y), fmax), g) | (signBit(y) << 7);
    }
  }
  return tensor ? concat(codes, new Uint8Array(new Float32Array([tscale]).buffer)) : concat(codes, new Uint8Array(scales.buffer));
}

export function refDequantizeFp8(fmt: keyof typeof FP8, data: Uint8Array, nrows: number, rowLen: number, o: RefOptions = {}): Float32Array {
  const { expBits, manBits } = FP8[fmt];
  const tensor = o.granularity === 'tensor';
  const scales = tensor ? f32view(data, nrows * rowLen, 1) : f32view(data, nrows * rowLen, nrows);
  const out = new Float32Array(nrows * rowLen);
  for (let i = 0; i < out.length; i++) {
    const c = data[i];
    const m = c & 0x7f;
    let v: number;
    if (fmt === 'fp8_e4m3' && m === 0x7f) v = NaN;
    else if (fmt === 'fp8_e5m2' && m >= 0x7c) v = m === 0x7c ? Infinity : NaN;
    else v = fp8Value(m, expBits, manBits);
    if (c & 0x80) v = -v;
    out[i] = f(v * scales[tensor ? 0 : Math.floor(i / rowLen)]);
  }
  return out;
}

export function refQuantizeMxfp4(x: Float32Array, nrows: number, rowLen: number): Uint8Array {
  const nblocks = (nrows * rowLen) / 32;
  const out = new Uint8Array(nblocks * 17);
  for (let b = 0; b < nblocks; b++) {
    const amax = absmaxOf(x, b * 32, 32);
    // floor(log2(amax)) by exact comparison with powers of two; amax = 0 -> clamped below.
    let e = -160;
    if (amax > 0) {
      e = 0;
      while (2 ** e > amax) e--;
      while (2 ** (e + 1) <= amax) e++;
    }
    e = Math.max(e - 2, -127);
    out[b * 17] = e + 127;
    const nib = (y: number) => nearestOnGrid(Math.min(Math.abs(y), 6), E2M1) | (signBit(y) << 3);
    for (let j = 0; j < 16; j++) {
      const lo = nib(f(x[b * 32 + j] * 2 ** -e));
      const hi = nib(f(x[b * 32 + j + 16] * 2 ** -e));
      out[b * 17 + 1 + j] = lo | (hi << 4);
    }
  }
  return out;
}

export function refDequantizeMxfp4(data: Uint8Array, nrows: number, rowLen: number): Float32Array {
  const out = new Float32Array(nrows * rowLen);
  for (let b = 0; b < out.length / 32; b++) {
    const e = data[b * 17];
    const s = e === 255 ? NaN : 2 ** (e - 127);
    for (let j = 0; j < 16; j++) {
      const byte = data[b * 17 + 1 + j];
      for (const [c, at] of [[byte & 15, j], [byte >> 4, j + 16]]) {
        const v = E2M1.values[c & 7] * s;
        out[b * 32 + at] = c & 8 ? -v : v;
      }
    }
  }
  return out;
}

// NVFP4 as NVIDIA ModelOpt quantizes (NVFP4QTensor): per-tensor scale_2 = amax / (6 * 448), block
// scale amax / (6 * scale_2) (1 where 0) cast to E4M3, y = x / (e4m3 * scale_2), then the code by
// counting the E2M1 bounds below |y| (searchsorted), plus one on the bounds 0.75, 1.75 and 3.5,
// and 8 for y < 0. Codes of all rows, then scales of all rows, then scale_2 (f32).
const E2M1_BOUNDS = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5];
const E2M1_UP = [0.75, 1.75, 3.5];

export function refQuantizeNvfp4(x: Float32Array): Uint8Array {
  const gs = f(absmaxOf(x, 0, x.length) / 2688);
  const d6 = f(6 * gs);
  const codes = new Uint8Array(x.length / 2);
  const scales = new Uint8Array(x.length / 16);
  for (let b = 0; b < scales.length; b++) {
    let sc = 0x38;
    let denom = 0;
    if (gs !== 0) {
      let s = f(absmaxOf(x, b * 16, 16) / d6);
      if (s === 0) s = 1;
      sc = nearestOnGrid(Math.min(s, 448), FP8.fp8_e4m3.grid);
      denom = f(fp8Value(sc, 4, 3) * gs);
    }
    scales[b] = sc;
    for (let j = 0; j < 16; j++) {
      const v = x[b * 16 + j];
      let c: number;
      if (denom === 0) c = gs === 0 ? 0 : v < 0 ? 15 : 7; // x / 0
      else {
        const y = f(v / denom);
        const a = Math.abs(y);
        c = E2M1_BOUNDS.filter((t) => t < a).length + (E2M1_UP.includes(a) ? 1 : 0) + (y < 0 ? 8 : 0);
      }
      codes[(b * 16 + j) >> 1] |= c << (4 * (j & 1));
    }
  }
  return concat(codes, scales, new Uint8Array(new Float32Array([gs]).buffer));
}

export function refDequantizeNvfp4(data: Uint8Array, n: number): Float32Array {
  const gs = f32view(data, n / 2 + n / 16, 1)[0];
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const c = (data[i >> 1] >> (4 * (i & 1))) & 15;
    const s = f(fp8Value(data[n / 2 + (i >> 4)], 4, 3) * gs);
    const v = fp8Value(c & 7, 2, 1);
    out[i] = f((c & 8 ? -v : v) * s);
  }
  return out;
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}

function f32view(data: Uint8Array, at: number, n: number): Float32Array {
  return new Float32Array(data.slice(at, at + 4 * n).buffer);
}
