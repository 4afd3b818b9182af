import { beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { SHARED, hasShared } from '../helpers/shared.js';
import { cli, ensureBuilt, ROOT, tempDir } from './helpers.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import type { GgufCheckpoint } from '../../src/io/gguf.js';
import { listPresets } from '../../src/plan/presets.js';

const DIR = join(SHARED, 'models/stories260K');
const FILES = ['model.safetensors', 'model.bf16.safetensors', 'tinyllamas-stories-260k-f32.gguf'];

describe.skipIf(!hasShared)('webquant inspect', () => {
  beforeAll(async () => {
    await ensureBuilt();
  }, 300_000);

  it('describes the three stories260K files (text)', async () => {
    for (const f of FILES) {
      const r = await cli(['inspect', join(DIR, f), '--all'], { cwd: ROOT });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toBe('');
      const gguf = f.endsWith('.gguf');
      expect(r.stdout).toContain(gguf ? 'format: gguf v1, 48 tensors' : 'format: safetensors, 47 tensors');
      expect(r.stdout).toContain(gguf ? '292,800 parameters' : '260,032 parameters'); // the GGUF file stores the tied head twice
      // tensor table: name, dtype, shape, role, bytes
      const row = gguf ? /^blk\.0\.attn_q\.weight\s+F32\s+\[64, 64\]\s+attention\/q\s+16\.0 KiB$/m
        : f.includes('bf16') ? /^model\.layers\.0\.self_attn\.q_proj\.weight\s+BF16\s+\[64, 64\]\s+attention\/q\s+8\.00 KiB$/m
          : /^model\.layers\.0\.self_attn\.q_proj\.weight\s+F32\s+\[64, 64\]\s+attention\/q\s+16\.0 KiB$/m;
      expect(r.stdout).toMatch(row);
      expect(r.stdout).toMatch(gguf ? /tokenizer\.ggml\.tokens = \[.*\] \(512 items\)/ : /format = pt/);
      expect(r.stdout).toContain('config.json: LlamaForCausalLM (llama): hidden 64, 5 layers, 8 heads / 4 KV heads');
      expect(r.stdout).toMatch(/^q4_k_m\s+gguf\s+\S+ KiB\s+\d+\.\d\d/m);
      expect(r.stdout).toMatch(/^nf4\s+safetensors\s+\S+ KiB/m);
    }
  });

  it('--json: tensors with roles and bytes, metadata, config, every preset size', async () => {
    for (const f of FILES) {
      const r = await cli(['inspect', join(DIR, f), '--json'], { cwd: ROOT });
      expect(r.code, r.stderr).toBe(0);
      const j = JSON.parse(r.stdout);
      expect(j.format).toBe(f.endsWith('.gguf') ? 'gguf' : 'safetensors');
      expect(j.fileBytes).toBe(statSync(join(DIR, f)).size);
      expect(j.tensors).toHaveLength(f.endsWith('.gguf') ? 48 : 47);
      const t = j.tensors.find((x: { name: string }) => /(attn_k|k_proj)\.weight$/.test(x.name));
      expect(t).toMatchObject({ shape: [32, 64], role: 'attention', kind: 'k', layer: 0 });
      expect(j.tensorBytes).toBe(j.tensors.reduce((a: number, x: { bytes: number }) => a + x.bytes, 0));
      expect(j.config).toMatchObject({ architecture: 'LlamaForCausalLM', numKvHeads: 4, tieWordEmbeddings: true });
      expect(j.presets).toHaveLength(listPresets().length);
      for (const p of j.presets) {
        expect(p.error, p.preset).toBeUndefined();
        expect(p.bytes).toBeGreaterThan(0);
      }
      const size = (n: string) => j.presets.find((p: { preset: string }) => p.preset === n).bytes;
      expect(size('q4_0')).toBeLessThan(size('q8_0'));
      expect(size('q8_0')).toBeLessThan(size('f16'));
      if (f.endsWith('.gguf')) expect(j.metadata['tokenizer.ggml.tokens']).toMatchObject({ length: 512 });
    }
  });

  it('reads a URL with range requests (config.json beside it included), for inspect and quantize', async () => {
    let ranges = 0;
    const server: Server = createServer((req, res) => {
      const file = join(DIR, decodeURIComponent((req.url ?? '/').slice(1)));
      let body: Buffer;
      try { body = readFileSync(file); } catch { res.writeHead(404).end(); return; }
      const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
      if (req.method === 'HEAD') { res.writeHead(200, { 'content-length': body.byteLength }).end(); return; }
      if (!m) { res.writeHead(200, { 'content-length': body.byteLength }).end(body); return; }
      ranges++;
      const a = Number(m[1]), b = Math.min(Number(m[2]), body.byteLength - 1);
      res.writeHead(206, { 'content-range': `bytes ${a}-${b}/${body.byteLength}`, 'content-length': b - a + 1 }).end(body.subarray(a, b + 1));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const port = (server.address() as { port: number }).port;
      const r = await cli(['inspect', `http://127.0.0.1:${port}/model.safetensors`, '--json'], { cwd: ROOT });
      expect(r.code, r.stderr).toBe(0);
      const j = JSON.parse(r.stdout);
      expect(j.tensors).toHaveLength(47);
      expect(j.config.hiddenSize).toBe(64);
      expect(ranges).toBeGreaterThan(0);
      const tmp = tempDir('url');
      const q = await cli(['quantize', `http://127.0.0.1:${port}/model.safetensors`, '-o', 'url.gguf', '--preset', 'q4_0'], { cwd: tmp });
      expect(q.code, q.stderr).toBe(0);
      const l = await cli(['quantize', join(DIR, 'model.safetensors'), '-o', 'local.gguf', '--preset', 'q4_0'], { cwd: tmp });
      expect(l.code, l.stderr).toBe(0);
      const [u, v] = (await Promise.all(['url.gguf', 'local.gguf'].map((f) => openCheckpoint(fromBuffer(new Uint8Array(readFileSync(join(tmp, f)))))))) as GgufCheckpoint[];
      expect(u.metadata['general.name']).toBe('Model');
      expect(v.metadata['general.name']).toBe('stories260K');
      expect(u.kv.filter((x) => x.key !== 'general.name')).toEqual(v.kv.filter((x) => x.key !== 'general.name'));
      for (const t of v.tensors) expect(Buffer.from(await u.readRaw(t.name)).equals(Buffer.from(await v.readRaw(t.name))), t.name).toBe(true);
      const missing = await cli(['inspect', `http://127.0.0.1:${port}/nope.gguf`], { cwd: ROOT });
      expect(missing.code).toBe(2);
      expect(missing.stderr).toMatch(/^webquant: \[io\] .*HTTP 404/);
    } finally {
      server.close();
    }
  });

  it('lists presets with bits per weight', async () => {
    const r = await cli(['presets', '--json'], { cwd: ROOT });
    expect(r.code).toBe(0);
    const list = JSON.parse(r.stdout);
    expect(list.map((p: { name: string }) => p.name)).toContain('q4_k_m');
    const bpw = (n: string) => list.find((p: { name: string }) => p.name === n).bpw;
    expect(bpw('q8_0')).toBeCloseTo(8.5, 1);
    expect(bpw('q4_k_m')).toBeGreaterThan(4.5);
    expect(bpw('q4_k_m')).toBeLessThan(5.5);
    const t = await cli(['presets'], { cwd: ROOT });
    expect(t.stdout).toMatch(/^q4_k_m\s+gguf\s+4\.\d\d\s+llama\.cpp's Q4_K_M/m);
    const help = await cli(['--help'], { cwd: ROOT });
    expect(help.stdout).toMatch(/inspect .*\n.*quantize .*\n.*presets /);
    const qh = await cli(['quantize', '--help'], { cwd: ROOT });
    expect(qh.stdout).toContain('--imatrix <file>');
  });
});
