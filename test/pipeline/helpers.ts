// Worker threads cannot run the TypeScript sources that vitest transforms, so the tests transpile
// src/ (and the fixtures) once per test process into .cache/ and start workers from there.
import ts from 'typescript';
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function walk(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

let compiled: string | undefined;

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Directory holding src/ and test/pipeline/fixtures/ as JavaScript (ESM), with build/ linked in. */
export function compiledTree(): string {
  if (compiled) return compiled;
  const base = join(ROOT, '.cache', 'pipeline-test');
  // Trees of test processes that are gone are removed (each process has its own, by pid).
  for (const d of existsSync(base) ? readdirSync(base) : []) {
    if (!alive(Number(d))) rmSync(join(base, d), { recursive: true, force: true });
  }
  const out = join(base, String(process.pid));
  rmSync(out, { recursive: true, force: true });
  for (const file of [...walk(join(ROOT, 'src')), ...walk(join(ROOT, 'test/pipeline/fixtures'))]) {
    const js = ts.transpileModule(readFileSync(file, 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
      fileName: file,
    }).outputText;
    const dest = join(out, relative(ROOT, file)).replace(/\.ts$/, '.js');
    mkdirSync(dirname(dest), { recursive: true });
    writeFileSync(dest, js);
  }
  writeFileSync(join(out, 'package.json'), '{"type":"module"}\n');
  // src/kernels/loader.js finds the wasm at ../../build relative to itself.
  if (!existsSync(join(out, 'build'))) symlinkSync(join(ROOT, 'build'), join(out, 'build'));
  compiled = out;
  return out;
}

export function compiledUrl(rel: string): URL {
  return pathToFileURL(join(compiledTree(), rel));
}

/** Deterministic pseudo-random values (LCG), scaled like weights. */
export function randomValues(n: number, seed: number): Float32Array {
  const v = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    v[i] = ((s / 2 ** 32) - 0.5) * 0.2 * (1 + (i % 7));
  }
  return v;
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

export interface SynthTensor {
  name: string;
  dtype: 'F32' | 'F16' | 'I32';
  shape: number[];
  data: Uint8Array;
}

/** safetensors bytes, built here so the tests do not depend on a writer under test elsewhere. */
export function buildSafetensors(tensors: SynthTensor[], metadata: Record<string, string> = {}): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let at = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [at, at + t.data.byteLength] };
    at += t.data.byteLength;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const hlen = (json.byteLength + 7) & ~7;
  const out = new Uint8Array(8 + hlen + at).fill(0x20, 8, 8 + hlen);
  new DataView(out.buffer).setBigUint64(0, BigInt(hlen), true);
  out.set(json, 8);
  let p = 8 + hlen;
  for (const t of tensors) { out.set(t.data, p); p += t.data.byteLength; }
  return out;
}

export function f32Bytes(v: Float32Array): Uint8Array {
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

/**
 * A small model: embeddings, `layers` blocks of attention/FFN weights (F32 and F16) with norms,
 * and an output head, in safetensors' alphabetical order (so layer 10 comes before layer 2).
 */
export function syntheticModel(layers: number, dim = 128, ffn = 256): { tensors: SynthTensor[]; bytes: Uint8Array } {
  const t: SynthTensor[] = [];
  let seed = 1;
  const f32 = (name: string, shape: number[]) => t.push({ name, dtype: 'F32', shape, data: f32Bytes(randomValues(shape.reduce((a, b) => a * b, 1), seed++)) });
  const f16 = (name: string, shape: number[]) => {
    const v = randomValues(shape.reduce((a, b) => a * b, 1), seed++);
    const h = new Uint16Array(v.length);
    // Round-trip through a DataView-free f16 conversion: keep magnitudes small and exact.
    for (let i = 0; i < v.length; i++) h[i] = f16bits(v[i]);
    t.push({ name, dtype: 'F16', shape, data: new Uint8Array(h.buffer) });
  };
  f32('model.embed_tokens.weight', [64, dim]);
  for (let l = 0; l < layers; l++) {
    const p = `model.layers.${l}`;
    f32(`${p}.input_layernorm.weight`, [dim]);
    f32(`${p}.self_attn.q_proj.weight`, [dim, dim]);
    f16(`${p}.self_attn.k_proj.weight`, [dim / 2, dim]);
    f32(`${p}.mlp.up_proj.weight`, [ffn, dim]);
    f16(`${p}.mlp.down_proj.weight`, [dim, ffn]);
  }
  f32('model.norm.weight', [dim]);
  f32('lm_head.weight', [64, dim]);
  t.push({ name: 'model.position_ids', dtype: 'I32', shape: [4], data: new Uint8Array(new Int32Array([0, 1, 2, 3]).buffer) });
  t.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { tensors: t, bytes: buildSafetensors(t, { format: 'pt' }) };
}

function f16bits(x: number): number {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer)[0];
  const sign = (u >>> 16) & 0x8000;
  const e = ((u >>> 23) & 0xff) - 127 + 15;
  const m = u & 0x7fffff;
  if (e <= 0) return sign; // tiny values flush to zero: fine for synthetic data
  return sign | (e << 10) | (m >>> 13);
}
