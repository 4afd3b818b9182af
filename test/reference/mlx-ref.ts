// Plain-TypeScript reference of the `mlx` format, written from MLX's published rules (see
// assembly/int/mlx.ts) as MLX lays them out: codes packed per u32 word (2/4/8 bits: code k of a
// word at bit k*bits) or per 3 / 5 bytes (3, 5 and 6 bits: 8, 8 and 4 codes, lowest bits first),
// scales and biases in the scale dtype, one per group.
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from '../../src/util/half.js';

const fr = Math.fround;

export interface MlxOpts { bits: number; groupSize: number; scaleDtype: 'bf16' | 'f16' | 'f32' }

/** round() of Metal and CUDA: half away from zero. */
function roundAway(v: number): number {
  const a = Math.floor(Math.abs(v) + 0.5);
  // Math.abs(v) + 0.5 is exact in float64 for any float32 v, so floor gives the true rounding.
  return v < 0 ? -a : a;
}

/** MLX's scale and bias of one group (f32 operations). */
export function mlxGroupParams(x: Float32Array, bits: number): { scale: number; bias: number } {
  const nBins = (1 << bits) - 1;
  let wMin = Infinity;
  let wMax = 0;
  for (const v of x) {
    wMin = Math.min(wMin, v);
    wMax = Math.max(wMax, v);
  }
  let scale = Math.max(fr(fr(wMax - wMin) / nBins), fr(1e-7));
  const side = Math.abs(wMin) > Math.abs(wMax);
  if (!side) scale = -scale;
  const edge = side ? wMin : wMax;
  const q0 = roundAway(fr(edge / scale));
  let bias = 0;
  if (q0 !== 0) {
    scale = fr(edge / q0);
    bias = edge;
  }
  return { scale, bias };
}

function storeScale(v: number, d: MlxOpts['scaleDtype']): number[] {
  if (d === 'f32') return [...new Uint8Array(new Float32Array([v]).buffer)];
  const h = d === 'bf16' ? f32ToBf16(v) : f32ToF16(v);
  return [h & 0xff, h >> 8];
}

function packGroup(codes: number[], bits: number): number[] {
  const out: number[] = [];
  if (32 % bits === 0) {
    const per = 32 / bits;
    for (let w = 0; w < codes.length; w += per) {
      let word = 0;
      for (let k = 0; k < per; k++) word = (word | (codes[w + k] << (k * bits))) >>> 0;
      out.push(word & 0xff, (word >>> 8) & 0xff, (word >>> 16) & 0xff, word >>> 24);
    }
    return out;
  }
  const per = bits === 6 ? 4 : 8;
  const bytes = (per * bits) / 8;
  for (let w = 0; w < codes.length; w += per) {
    let v = 0n;
    for (let k = 0; k < per; k++) v |= BigInt(codes[w + k]) << BigInt(k * bits);
    for (let b = 0; b < bytes; b++) out.push(Number((v >> BigInt(8 * b)) & 0xffn));
  }
  return out;
}

/** The format's bytes: codes of every row, then scales, then biases (the registry's sections). */
export function mlxQuantizeRef(x: Float32Array, rowLen: number, o: MlxOpts): Uint8Array {
  const codes: number[] = [], scales: number[] = [], biases: number[] = [];
  const nBins = (1 << o.bits) - 1;
  for (let g = 0; g < x.length; g += o.groupSize) {
    const xs = x.subarray(g, g + o.groupSize);
    const { scale, bias } = mlxGroupParams(xs, o.bits);
    const q = [...xs].map((v) => Math.min(Math.max(roundAway(fr(fr(v - bias) / scale)), 0), nBins));
    codes.push(...packGroup(q, o.bits));
    scales.push(...storeScale(scale, o.scaleDtype));
    biases.push(...storeScale(bias, o.scaleDtype));
  }
  void rowLen;
  return Uint8Array.from([...codes, ...scales, ...biases]);
}

/** Dequantized values (f32: scale * q + bias) of mlxQuantizeRef's bytes, decoded as MLX reads them. */
export function mlxDequantizeRef(data: Uint8Array, n: number, o: MlxOpts): Float32Array {
  const groups = n / o.groupSize;
  const codeBytes = (n * o.bits) / 8;
  const sb = o.scaleDtype === 'f32' ? 4 : 2;
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const scaleAt = (base: number, k: number) => (o.scaleDtype === 'f32' ? dv.getFloat32(base + 4 * k, true)
    : o.scaleDtype === 'bf16' ? bf16ToF32(dv.getUint16(base + 2 * k, true)) : f16ToF32(dv.getUint16(base + 2 * k, true)));
  const out = new Float32Array(n);
  const mask = (1 << o.bits) - 1;
  for (let k = 0; k < groups; k++) {
    const s = scaleAt(codeBytes, k), b = scaleAt(codeBytes + groups * sb, k);
    const start = (k * o.groupSize * o.bits) / 8;
    for (let i = 0; i < o.groupSize; i++) {
      // bit i*bits of the group's little-endian stream (MLX's words and byte packs read alike)
      const bit = i * o.bits;
      const lo = data[start + (bit >> 3)] | ((data[start + (bit >> 3) + 1] ?? 0) << 8);
      const q = (lo >> (bit & 7)) & mask;
      out[k * o.groupSize + i] = fr(fr(s * q) + b);
    }
  }
  return out;
}
