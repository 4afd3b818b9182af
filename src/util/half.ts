// Host-side half-precision conversions (round to nearest even), matching assembly/common.ts.
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function f32ToF16(v: number): number {
  f32[0] = v;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const ax = x & 0x7fffffff;
  if (ax > 0x7f800000) return sign | 0x7e00;
  if (ax >= 0x477ff000) return sign | 0x7c00;
  if (ax >= 0x38800000) return sign | (((ax + 0xfff + ((ax >>> 13) & 1)) - 0x38000000) >>> 13);
  if (ax < 0x33000000) return sign;
  const e = ax >>> 23;
  const mant = (ax & 0x7fffff) | 0x800000;
  const drop = 126 - e;
  const half = 1 << (drop - 1);
  let r = mant >>> drop;
  const rem = mant & ((1 << drop) - 1);
  if (rem > half || (rem === half && (r & 1) !== 0)) r++;
  return sign | r;
}

export function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

export function f32ToBf16(v: number): number {
  f32[0] = v;
  const x = u32[0];
  if ((x & 0x7fffffff) > 0x7f800000) return ((x >>> 16) | 0x40) & 0xffff;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

export function bf16ToF32(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0];
}
