// Element types of checkpoint tensors and their conversion to f32 (host side; these are plain
// widenings, the wasm kernels are for quantized formats).
import { ErrorCodes, fail } from '../errors.js';

/** Bytes per element of the safetensors dtypes webquant reads. */
export const ST_DTYPE_SIZE: Readonly<Record<string, number>> = Object.freeze({
  F64: 8, F32: 4, F16: 2, BF16: 2, F8_E4M3: 1, F8_E5M2: 1,
  I64: 8, U64: 8, I32: 4, U32: 4, I16: 2, U16: 2, I8: 1, U8: 1, BOOL: 1,
});

/** Element size of a safetensors dtype, or undefined for an unknown one (own keys only). */
export function stDtypeSize(dtype: unknown): number | undefined {
  return typeof dtype === 'string' && Object.prototype.hasOwnProperty.call(ST_DTYPE_SIZE, dtype) ? ST_DTYPE_SIZE[dtype] : undefined;
}

export const FLOAT_DTYPES: ReadonlySet<string> = new Set(['F64', 'F32', 'F16', 'BF16', 'F8_E4M3', 'F8_E5M2']);

/**
 * Float dtypes that only readF32 / readRows give values of (f32, scales applied): F64, FP8, and
 * the NVFP4 weights a safetensors reader presents as F4_E2M1 (see safetensors.ts) and MLX's as
 * MLX_AFFINE (mlx.ts), and bitsandbytes' as BNB_4BIT / BNB_INT8 (bnb.ts).
 */
export const READ_AS_F32_DTYPES: ReadonlySet<string> = new Set(['F64', 'F8_E4M3', 'F8_E5M2', 'F4_E2M1', 'MLX_AFFINE', 'BNB_4BIT', 'BNB_INT8']);

/**
 * Of those, the ones whose companions (scales, biases, code books) the reader folded into the
 * weight: their stored bytes alone are not the tensor, so a tensor kept as it is is written as
 * its F32 values (FP8 and NVFP4 keep their scales beside them and are copied as stored).
 */
export const FOLDED_DTYPES: ReadonlySet<string> = new Set(['MLX_AFFINE', 'BNB_4BIT', 'BNB_INT8']);

function fp8Table(expBits: number, manBits: number, fn: boolean): Float32Array {
  const t = new Float32Array(256);
  const bias = (1 << (expBits - 1)) - 1;
  const emax = (1 << expBits) - 1;
  for (let b = 0; b < 256; b++) {
    const sign = b & 0x80 ? -1 : 1;
    const e = (b >> manBits) & emax;
    const m = b & ((1 << manBits) - 1);
    let v: number;
    if (fn) {
      // E4M3FN: no infinities; only S.1111.111 is NaN.
      if (e === emax && m === (1 << manBits) - 1) v = NaN;
      else if (e === 0) v = m * 2 ** (1 - bias - manBits);
      else v = (1 + m / (1 << manBits)) * 2 ** (e - bias);
    } else if (e === emax) v = m ? NaN : Infinity;
    else if (e === 0) v = m * 2 ** (1 - bias - manBits);
    else v = (1 + m / (1 << manBits)) * 2 ** (e - bias);
    t[b] = sign * v;
  }
  return t;
}

export const E4M3_TO_F32 = fp8Table(4, 3, true);
export const E5M2_TO_F32 = fp8Table(5, 2, false);

export function u16View(bytes: Uint8Array): Uint16Array {
  return bytes.byteOffset % 2 === 0 && bytes.buffer instanceof ArrayBuffer
    ? new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 1)
    : new Uint16Array(bytes.slice().buffer, 0, bytes.byteLength >> 1);
}

export function f32View(bytes: Uint8Array): Float32Array {
  return bytes.byteOffset % 4 === 0 && bytes.buffer instanceof ArrayBuffer
    ? new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 2)
    : new Float32Array(bytes.slice().buffer, 0, bytes.byteLength >> 2);
}

let f16Table: Float32Array | undefined;
function f16ToF32Table(): Float32Array {
  if (f16Table) return f16Table;
  const t = (f16Table = new Float32Array(65536));
  for (let h = 0; h < 65536; h++) {
    const s = h & 0x8000 ? -1 : 1;
    const e = (h >>> 10) & 0x1f;
    const m = h & 0x3ff;
    t[h] = e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
  }
  return t;
}

/**
 * Float tensor bytes (little-endian) as f32. `dtype` is a safetensors name or the GGUF names
 * F32/F16/BF16/F64. Always returns a fresh array (callers may keep or mutate it).
 */
export function floatBytesToF32(bytes: Uint8Array, dtype: string, what: string): Float32Array {
  switch (dtype) {
    case 'F32':
      return new Float32Array(bytes.slice().buffer);
    case 'F16': {
      const h = u16View(bytes);
      const out = new Float32Array(h.length);
      const t = f16ToF32Table();
      for (let i = 0; i < h.length; i++) out[i] = t[h[i]];
      return out;
    }
    case 'BF16': {
      const h = u16View(bytes);
      const out = new Float32Array(h.length);
      const o32 = new Uint32Array(out.buffer);
      for (let i = 0; i < h.length; i++) o32[i] = h[i] << 16;
      return out;
    }
    case 'F64': {
      const d = new Float64Array(bytes.slice().buffer);
      return Float32Array.from(d);
    }
    case 'F8_E4M3':
    case 'F8_E5M2': {
      const t = dtype === 'F8_E4M3' ? E4M3_TO_F32 : E5M2_TO_F32;
      const out = new Float32Array(bytes.length);
      for (let i = 0; i < bytes.length; i++) out[i] = t[bytes[i]];
      return out;
    }
    default:
      return fail(ErrorCodes.UNSUPPORTED_DTYPE, `[io] ${what}: dtype ${dtype} cannot be read as float (read it raw)`, {
        tensor: what, value: dtype, expected: ['F64', 'F32', 'F16', 'BF16', 'F8_E4M3', 'F8_E5M2'],
      });
  }
}
