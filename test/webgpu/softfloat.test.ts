// The integer soft-float of src/webgpu/shaders/common.ts (f_add, f_mul, f_div, f_sqrt, h2f, f2h,
// nearest_int) on the device,
// against JavaScript's correctly rounded f32 results (f64 then fround: exact for products, and
// double rounding is harmless for +, *, / at 24 bits). Operands include subnormals, where
// SwiftShader's own f32 ops flush or contract (the reason the quantizers avoid them).
import { beforeAll, describe, expect, it } from 'vitest';
import { gpuState, type GpuContext } from '../../src/webgpu/device.js';
import { COMMON_WGSL, F32_OUT_WGSL } from '../../src/webgpu/shaders/common.js';

const N = 1 << 16;

const SHADER = COMMON_WGSL + F32_OUT_WGSL + /* wgsl */ `
@group(0) @binding(3) var<storage, read> bv: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * P.nx;
  if (i >= P.n) { return; }
  let a = src[i]; let b = bv[i];
  switch (P.flags) {
    case 0u: { dst[i] = h2f(i & 0xffffu); }
    case 1u: { dst[i] = f_div(a, b); }
    case 2u: { dst[i] = f_mul(a, b); }
    case 3u: { dst[i] = f_add(a, b); }
    case 4u: { dst[i] = f2h(a); }
    case 5u: { dst[i] = f_sqrt(a); }
    case 6u: { dst[i] = u32(nearest_int(a)); }
    default: { dst[i] = 0u; }
  }
}`;

async function run(gpu: GpuContext, op: number, a: Uint32Array, b: Uint32Array): Promise<Uint32Array> {
  const dev = gpu.device;
  const pipe = dev.createComputePipeline({ layout: 'auto', compute: { module: dev.createShaderModule({ code: SHADER }), entryPoint: 'main' } });
  const mk = (d: Uint32Array, usage: number) => {
    const x = dev.createBuffer({ size: d.byteLength, usage: usage | GPUBufferUsage.COPY_DST });
    dev.queue.writeBuffer(x, 0, d as Uint32Array<ArrayBuffer>);
    return x;
  };
  const bufs = [mk(a, GPUBufferUsage.STORAGE), dev.createBuffer({ size: N * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC }),
    mk(new Uint32Array([N, 0, 0, 64 * 1024, 0, 0, op, 0, 0, 0, 0, 0]), GPUBufferUsage.UNIFORM), mk(b, GPUBufferUsage.STORAGE)];
  const read = dev.createBuffer({ size: N * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const bg = dev.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: bufs.map((buffer, binding) => ({ binding, resource: { buffer } })) });
  const enc = dev.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipe);
  pass.setBindGroup(0, bg);
  pass.dispatchWorkgroups(N / 64 / 1024 > 1 ? 1024 : N / 64, Math.max(1, N / 64 / 1024));
  pass.end();
  enc.copyBufferToBuffer(bufs[1], 0, read, 0, N * 4);
  dev.queue.submit([enc.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const out = new Uint32Array(read.getMappedRange().slice(0));
  read.unmap();
  for (const x of [...bufs, read]) x.destroy();
  return out;
}

const F = new Float32Array(1);
const U = new Uint32Array(F.buffer);
const f = (u: number) => { U[0] = u; return F[0]; };
const bits = (v: number) => { F[0] = v; return U[0]; };
const isNaN32 = (u: number) => (u & 0x7fffffff) > 0x7f800000;

/** Operands: normals of every exponent, subnormals, zeros, infinities, NaN, near-equal pairs. */
function operands(seed: number): [Uint32Array, Uint32Array] {
  let s = seed;
  const r = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0);
  const a = new Uint32Array(N), b = new Uint32Array(N);
  const pick = (k: number) => {
    switch (k % 8) {
      case 0: return r() & 0x807fffff; // subnormal or zero
      case 1: return [0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x00000001, 0x7f7fffff, 0x00800000][r() % 8];
      default: return r() >>> 0 & 0xff7fffff; // never inf/NaN exponent
    }
  };
  for (let i = 0; i < N; i++) {
    a[i] = pick(r());
    b[i] = i % 16 === 3 ? (a[i] ^ (r() & 0x80000001)) >>> 0 : i % 16 === 5 ? (a[i] + (r() % 5) - 2) >>> 0 : pick(r());
  }
  return [a, b];
}

function mismatches(out: Uint32Array, a: Uint32Array, b: Uint32Array, op: (x: number, y: number) => number): string[] {
  const bad: string[] = [];
  for (let i = 0; i < N; i++) {
    // NaN results as x86: the first NaN operand quieted, else the default NaN (sign set)
    const r = bits(op(f(a[i]), f(b[i])));
    const want = !isNaN32(r) ? r : isNaN32(a[i]) ? (a[i] | 0x400000) >>> 0 : isNaN32(b[i]) ? (b[i] | 0x400000) >>> 0 : 0xffc00000;
    if (want !== out[i] && bad.length < 5) bad.push(`0x${a[i].toString(16)} , 0x${b[i].toString(16)}: want 0x${want.toString(16)} got 0x${out[i].toString(16)}`);
  }
  return bad;
}

describe('webgpu soft-float', () => {
  let gpu: GpuContext;
  beforeAll(async () => {
    const s = await gpuState();
    if (!s.ok) throw new Error(s.reason);
    gpu = s.gpu;
  });

  it('h2f decodes every fp16 exactly (subnormals, infinities, NaN payloads)', async () => {
    const out = await run(gpu, 0, new Uint32Array(N), new Uint32Array(N));
    for (let h = 0; h < N; h++) {
      const e = (h >> 10) & 31, m = h & 0x3ff, sign = h & 0x8000 ? 0x80000000 : 0;
      const want = e === 31 ? (sign | 0x7f800000 | (m << 13)) >>> 0 : bits((sign ? -1 : 1) * (e ? (1 + m / 1024) * 2 ** (e - 15) : m * 2 ** -24));
      if (out[h] !== want) expect(`h=0x${h.toString(16)} got 0x${out[h].toString(16)}`).toBe(`0x${want.toString(16)}`);
    }
  });

  it('f2h rounds to nearest even like Math.f16round-style reference', async () => {
    const [a] = operands(9);
    const out = await run(gpu, 4, a, a);
    const H = new Uint16Array(1);
    const toH = (u: number) => {
      const v = f(u);
      if (Number.isNaN(v)) return ((u >>> 16) & 0x8000) | 0x7e00;
      // exact reference through f64: nearest fp16, ties to even, overflow to inf
      const s = v < 0 || Object.is(v, -0) ? 0x8000 : 0;
      const x = Math.abs(v);
      if (x >= 65520) return s | 0x7c00;
      if (x < 2 ** -14) { const q = x / 2 ** -24; let r = Math.round(q); if (Math.abs(q - Math.trunc(q)) === 0.5 && r % 2) r--; return s | r; }
      const e = Math.floor(Math.log2(x));
      const ee = x >= 2 ** (e + 1) ? e + 1 : x < 2 ** e ? e - 1 : e;
      const q = x / 2 ** (ee - 10);
      let r = Math.round(q);
      if (q - Math.trunc(q) === 0.5 && r % 2) r--;
      if (r === 2048) return s | ((ee + 16) << 10);
      return s | ((ee + 15) << 10) | (r - 1024);
    };
    for (let i = 0; i < N; i++) {
      H[0] = toH(a[i]);
      if (out[i] !== H[0]) expect(`0x${a[i].toString(16)} -> 0x${out[i].toString(16)}`).toBe(`0x${a[i].toString(16)} -> 0x${H[0].toString(16)}`);
    }
  });

  it('f_sqrt is correctly rounded (f64 sqrt then fround is exact at 24 bits), specials as x86', async () => {
    const [a] = operands(77);
    expect(mismatches(await run(gpu, 5, a, a), a, a, (x) => Math.sqrt(x))).toEqual([]);
  });

  it("nearest_int is ggml's bit trick on every input (f32 add of 1.5*2^23)", async () => {
    const [a] = operands(5);
    const out = await run(gpu, 6, a, a);
    for (let i = 0; i < N; i++) {
      const t = isNaN32(a[i]) ? (a[i] | 0x400000) >>> 0 : bits(f(a[i]) + 12582912);
      const want = (((t & 0x7fffff) - 0x400000) >>> 0);
      if (out[i] !== want) expect(`nearest_int(0x${a[i].toString(16)}) = 0x${out[i].toString(16)}`).toBe(`0x${want.toString(16)}`);
    }
  });

  for (const [name, op, fn] of [['f_div', 1, (x: number, y: number) => x / y], ['f_mul', 2, (x: number, y: number) => x * y], ['f_add', 3, (x: number, y: number) => x + y]] as const) {
    it(`${name} is correctly rounded, subnormals and specials included`, async () => {
      const [a, b] = operands(op * 31 + 1);
      expect(mismatches(await run(gpu, op, a, b), a, b, fn)).toEqual([]);
    });
  }
});
