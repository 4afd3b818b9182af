// Byte builders for crafting (valid and broken) checkpoint files in tests.
import { expect } from 'vitest';
import { WebquantError, type ErrorCode } from '../../src/errors.js';

export class Bytes {
  private out: number[] = [];
  get length() { return this.out.length; }
  u8(v: number) { this.out.push(v & 0xff); return this; }
  u32(v: number) { const b = new Uint8Array(4); new DataView(b.buffer).setUint32(0, v >>> 0, true); return this.raw(b); }
  i32(v: number) { const b = new Uint8Array(4); new DataView(b.buffer).setInt32(0, v, true); return this.raw(b); }
  u64(v: number | bigint) { const b = new Uint8Array(8); new DataView(b.buffer).setBigUint64(0, BigInt(v), true); return this.raw(b); }
  i64(v: number | bigint) { const b = new Uint8Array(8); new DataView(b.buffer).setBigInt64(0, BigInt(v), true); return this.raw(b); }
  f32(v: number) { const b = new Uint8Array(4); new DataView(b.buffer).setFloat32(0, v, true); return this.raw(b); }
  raw(b: ArrayLike<number>) { for (let i = 0; i < b.length; i++) this.out.push(b[i]); return this; }
  zeros(n: number) { for (let i = 0; i < n; i++) this.out.push(0); return this; }
  /** A GGUF string: u64 length (u32 in v1) and the bytes. */
  str(s: string | Uint8Array, v1 = false) {
    const b = typeof s === 'string' ? new TextEncoder().encode(s) : s;
    if (v1) this.u32(b.length); else this.u64(b.length);
    return this.raw(b);
  }
  padTo(align: number) { while (this.out.length % align) this.out.push(0); return this; }
  bytes() { return new Uint8Array(this.out); }
}

/** A safetensors file from a header (object or raw text) and a data section. */
export function stFile(header: unknown, data: Uint8Array | number = 0, opts: { rawText?: string; lengthOverride?: bigint } = {}): Uint8Array {
  const text = opts.rawText ?? JSON.stringify(header);
  const h = new TextEncoder().encode(text);
  const d = typeof data === 'number' ? new Uint8Array(data) : data;
  const out = new Uint8Array(8 + h.length + d.length);
  new DataView(out.buffer).setBigUint64(0, opts.lengthOverride ?? BigInt(h.length), true);
  out.set(h, 8);
  out.set(d, 8 + h.length);
  return out;
}

export async function expectCode(p: Promise<unknown> | (() => unknown), code: ErrorCode): Promise<WebquantError> {
  let err: unknown;
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    err = e;
  }
  expect(err, `expected ${code}`).toBeInstanceOf(WebquantError);
  expect((err as WebquantError).code).toBe(code);
  return err as WebquantError;
}

/** Deterministic pseudo-random floats. */
export function randomF32(n: number, seed = 1): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 2 ** 32 - 0.5) * 4;
  }
  return out;
}

export function bytesOf(v: ArrayBufferView): Uint8Array {
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}
