// src/edge/worker.ts in workerd (Cloudflare's runtime, from the `workerd` npm package) on
// loopback: the wasm kernels arrive as imported modules, the pool runs in the isolate's one
// thread, and the streamed output must be byte-identical to `webquant quantize` on Node.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { build } from 'esbuild';
import { buildSafetensors, f32Bytes, randomValues, ROOT } from '../pipeline/helpers.js';
import { SHARED } from '../helpers/shared.js';
import { cliImatrix, cliQuantize, cliReference, firstDifference, STORIES_BF16, STORIES_CONFIG } from '../helpers/quantize-ref.js';
import { dirRoute, startRouteServer, type DemoServer } from '../browser/server.js';
import { splitGguf } from '../helpers/gguf-split.js';
import { openGguf } from '../../src/io/gguf.js';
import { fromBuffer } from '../../src/io/source.js';


const WORKERD = join(ROOT, 'node_modules/.bin/workerd');

/**
 * A POST written on a socket: the headers, then `chunks` (no end), and the response's status and
 * JSON error once the server answers (it may close without reading the rest).
 */
function rawPost(base: string, path: string, headers: Record<string, string>, chunks: Buffer[] = []): Promise<{ status: number; error: { code: string; message: string; details: { option?: string } } }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(port), hostname);
    let got = Buffer.alloc(0);
    sock.on('error', () => undefined); // writes after the server closed: the answer is what counts
    sock.on('data', (d) => { got = Buffer.concat([got, d]); });
    sock.on('close', () => {
      const text = got.toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      if (split < 0) return reject(new Error(`no HTTP answer: ${JSON.stringify(text.slice(0, 200))}`));
      const head = text.slice(0, split);
      let body = text.slice(split + 4);
      if (/transfer-encoding:\s*chunked/i.test(head)) {
        let out = '';
        for (let at = 0; ;) {
          const eol = body.indexOf('\r\n', at);
          const n = parseInt(body.slice(at, eol), 16);
          if (!n) break;
          out += body.slice(eol + 2, eol + 2 + n);
          at = eol + 2 + n + 2;
        }
        body = out;
      }
      resolve({ status: Number(head.split(' ')[1]), error: (JSON.parse(body) as { error: never }).error });
    });
    sock.write(`POST ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nConnection: close\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`);
    for (const c of chunks) sock.write(c);
  });
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

/** One ES module for workerd; the two .wasm imports stay imports of wasm modules beside it. */
async function bundle(dir: string): Promise<void> {
  await build({
    entryPoints: [join(ROOT, 'src/edge/worker.ts')],
    outfile: join(dir, 'worker.js'),
    bundle: true, format: 'esm', platform: 'browser', conditions: ['workerd', 'worker', 'browser'], target: 'es2022', logLevel: 'silent',
    plugins: [{
      name: 'wasm-modules',
      setup(b) { b.onResolve({ filter: /\.wasm$/ }, (a) => ({ path: `./${basename(a.path)}`, external: true })); },
    }],
  });
  for (const f of ['webquant-simd.wasm', 'webquant-scalar.wasm']) copyFileSync(join(ROOT, 'build', f), join(dir, f));
  writeFileSync(join(dir, 'config.capnp'), `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .webquant),
    # The checkpoints of this test are served on loopback, which the default "internet" refuses.
    (name = "internet", network = (allow = ["public", "local"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "main")],
);
const webquant :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed "worker.js"),
    (name = "webquant-simd.wasm", wasm = embed "webquant-simd.wasm"),
    (name = "webquant-scalar.wasm", wasm = embed "webquant-scalar.wasm"),
  ],
  compatibilityDate = "2025-09-01",
  # Small enough that a test posts past it; the stories checkpoints (0.5-1 MB) stay under it.
  bindings = [(name = "MAX_BODY_BYTES", text = "1100000")],
);
`);
}

let tmp = '';
let files: DemoServer | undefined;
let workerd: ChildProcess | undefined;
let edge = '';
let log = '';
const refs = new Map<string, Promise<Buffer>>();
const reference = (preset: string, ext: 'gguf' | 'safetensors') => {
  if (!refs.has(preset)) refs.set(preset, cliReference(tmp, preset, ext));
  return refs.get(preset)!;
};

beforeAll(async () => {
  expect(existsSync(WORKERD), 'workerd is a devDependency: run npm install').toBe(true);
  tmp = mkdtempSync(join(tmpdir(), 'webquant-edge-'));
  await bundle(tmp);
  files = await startRouteServer([dirRoute('/models/', join(SHARED, 'models'))]);
  const port = await freePort();
  workerd = spawn(WORKERD, ['serve', join(tmp, 'config.capnp'), '--socket-addr', `http=127.0.0.1:${port}`], { cwd: tmp, stdio: ['ignore', 'pipe', 'pipe'] });
  workerd.stdout!.on('data', (d) => { log += d; });
  workerd.stderr!.on('data', (d) => { log += d; });
  edge = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (workerd.exitCode !== null) throw new Error(`workerd exited (${workerd.exitCode}): ${log}`);
    if (await fetch(`${edge}/`).then((r) => r.ok, () => false)) break;
    if (i > 300) throw new Error(`workerd did not answer on ${edge}: ${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
});

afterAll(async () => {
  await Promise.allSettled(refs.values());
  if (workerd && workerd.exitCode === null) {
    const exited = new Promise((r) => workerd!.once('exit', r));
    workerd.kill('SIGTERM');
    await exited;
  }
  await files?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

async function bytesOf(res: Response): Promise<Buffer> {
  return Buffer.from(await res.arrayBuffer());
}

describe('Cloudflare Worker in workerd', () => {
  it('lists the presets', async () => {
    const r = await fetch(`${edge}/`);
    const body = (await r.json()) as { presets: { name: string }[] };
    expect(body.presets.map((p) => p.name)).toContain('q8_0');
  });

  it('streams GGUF q8_0 of a checkpoint read by URL, identical to the CLI', async () => {
    const want = reference('q8_0', 'gguf');
    const url = `${files!.origin}/models/stories260K/model.bf16.safetensors`;
    const res = await fetch(`${edge}/quantize?preset=q8_0&url=${encodeURIComponent(url)}`, { method: 'POST' });
    expect(res.status, log).toBe(200);
    expect(res.headers.get('x-webquant-kernels')).toBe('wasm-simd');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="stories260K-q8_0.gguf"');
    expect(firstDifference(await bytesOf(res), await want)).toBe(-1);
  });

  it('takes an uploaded checkpoint (multipart) and writes the same safetensors nf4 as the CLI', async () => {
    const want = reference('nf4', 'safetensors');
    const form = new FormData();
    form.set('checkpoint', new Blob([readFileSync(STORIES_BF16)]), 'model.bf16.safetensors');
    form.set('config', new Blob([readFileSync(STORIES_CONFIG)]), 'config.json');
    const res = await fetch(`${edge}/quantize?preset=nf4`, { method: 'POST', body: form });
    expect(res.status, log).toBe(200);
    expect(firstDifference(await bytesOf(res), await want)).toBe(-1);
  });

  it('takes a split GGUF as several "checkpoint" files of the form: the bytes of the CLI on the whole file', async () => {
    // The F32 GGUF is past this Worker's MAX_BODY_BYTES: its Q4_0 (as a file to requantize) is not.
    const gguf = join(tmp, 'stories-q4_0.gguf');
    await cliQuantize(join(SHARED, 'models/stories260K/tinyllamas-stories-260k-f32.gguf'), gguf, 'q4_0');
    const want = await cliQuantize(gguf, join(tmp, 'split-ref.gguf'), 'q8_0');
    const files = await splitGguf(await openGguf(fromBuffer(new Uint8Array(readFileSync(gguf)), gguf)), 'stories', [12]);
    const form = new FormData();
    for (const [name, bytes] of files) form.append('checkpoint', new Blob([bytes]), name);
    const res = await fetch(`${edge}/quantize?preset=q8_0`, { method: 'POST', body: form });
    expect(res.status, log).toBe(200);
    expect(firstDifference(await bytesOf(res), want)).toBe(-1);
    // Without its second file: 400 naming it.
    const one = new FormData();
    one.append('checkpoint', new Blob([files.get('stories-00001-of-00002.gguf')!]), 'stories-00001-of-00002.gguf');
    const bad = await fetch(`${edge}/quantize?preset=q8_0`, { method: 'POST', body: one });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/send stories-00002-of-00002\.gguf as another "checkpoint" file/);
  });

  it('takes an importance matrix by URL or as a form file: the bytes of webquant quantize --imatrix', async () => {
    const im = join(tmp, 'imatrix.gguf');
    await cliImatrix(join(SHARED, 'eval/tinystories_dev.tokens.u16'), im, 6);
    const want = await cliReference(tmp, 'iq4_nl', 'gguf', im);
    const served = await startRouteServer([dirRoute('/models/', join(SHARED, 'models')), dirRoute('/im/', tmp)]);
    try {
      const url = `${served.origin}/models/stories260K/model.bf16.safetensors`;
      const res = await fetch(`${edge}/quantize?preset=iq4_nl&url=${encodeURIComponent(url)}&imatrix=${encodeURIComponent(`${served.origin}/im/imatrix.gguf`)}`, { method: 'POST' });
      expect(res.status, log).toBe(200);
      expect(firstDifference(await bytesOf(res), want)).toBe(-1);
    } finally {
      await served.close();
    }
    const form = new FormData();
    form.set('checkpoint', new Blob([readFileSync(STORIES_BF16)]), 'model.bf16.safetensors');
    form.set('config', new Blob([readFileSync(STORIES_CONFIG)]), 'config.json');
    form.set('imatrix', new Blob([readFileSync(im)]), 'imatrix.gguf');
    const res = await fetch(`${edge}/quantize?preset=iq4_nl&name=stories260K`, { method: 'POST', body: form });
    expect(res.status, log).toBe(200);
    // Posted without tokenizer files or a folder name, as the URL case: only general.name could differ.
    expect(firstDifference(await bytesOf(res), want)).toBe(-1);
  });

  it('writes the model card posted as README.md: the bytes of the CLI on a folder holding it', async () => {
    const dir = join(tmp, 'card', 'stories260K');
    mkdirSync(dir, { recursive: true });
    const card = '---\nlicense: mit\nlanguage: [en]\nbase_model: karpathy/tinyllamas\ndatasets: roneneldan/TinyStories\n---\n';
    copyFileSync(STORIES_BF16, join(dir, 'model.safetensors'));
    copyFileSync(STORIES_CONFIG, join(dir, 'config.json'));
    writeFileSync(join(dir, 'README.md'), card);
    const want = await cliQuantize(dir, join(tmp, 'card.gguf'), 'q8_0');
    const m = (await openGguf(fromBuffer(new Uint8Array(want), 'card.gguf'))).metadata;
    expect([m['general.license'], m['general.dataset.0.repo_url']]).toEqual(['mit', 'https://huggingface.co/roneneldan/TinyStories']);
    const form = new FormData();
    form.set('checkpoint', new Blob([readFileSync(STORIES_BF16)]), 'model.safetensors');
    form.set('config', new Blob([readFileSync(STORIES_CONFIG)]), 'config.json');
    form.set('README.md', new Blob([card]), 'README.md');
    const res = await fetch(`${edge}/quantize?preset=q8_0&name=stories260K`, { method: 'POST', body: form });
    expect(res.status, log).toBe(200);
    expect(firstDifference(await bytesOf(res), want)).toBe(-1);
  });

  it('answers 400 with the WebquantError code for a bad input or plan', async () => {
    const truncated = await fetch(`${edge}/quantize?preset=nf4`, { method: 'POST', body: readFileSync(STORIES_BF16).subarray(0, 4096) });
    expect(truncated.status).toBe(400);
    expect(((await truncated.json()) as { error: { code: string } }).error.code).toBe('E_ST_HEADER_PAST_END');
    // GGUF from safetensors needs config.json, which a raw body cannot bring.
    const noConfig = await fetch(`${edge}/quantize?preset=q8_0`, { method: 'POST', body: readFileSync(STORIES_BF16) });
    expect(noConfig.status).toBe(400);
    expect(((await noConfig.json()) as { error: { code: string } }).error.code).toBe('E_CONFIG');
    const unknown = await fetch(`${edge}/quantize?preset=q9_9`, { method: 'POST', body: readFileSync(STORIES_BF16) });
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('E_UNKNOWN_PRESET');
  });

  it('answers a client mistake with 400 and its WebquantError, never 500, and keeps a chosen name out of header syntax', async () => {
    const small = buildSafetensors([{ name: 'model.layers.0.mlp.up_proj.weight', dtype: 'F32', shape: [64, 64], data: f32Bytes(randomValues(64 * 64, 3)) }]);
    const post = (query: string, init: RequestInit = {}) => fetch(`${edge}/quantize?${query}`, { method: 'POST', body: small, ...init });
    const error = async (r: Response) => ({ status: r.status, ...((await r.json()) as { error: { code: string; details: { option?: string } } }).error });

    const get = await fetch(`${edge}/quantize?preset=nf4`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect(await error(await post('preset=nf4&url=not%20a%20url'))).toMatchObject({ status: 400, code: 'E_BAD_OPTION', details: { option: 'url' } });
    expect(await error(await post('preset=nf4&url=file%3A%2F%2F%2Fetc%2Fpasswd'))).toMatchObject({ status: 400, code: 'E_BAD_OPTION', details: { option: 'url' } });
    expect(await error(await post('preset=nf4&imatrix=zzz'))).toMatchObject({ status: 400, code: 'E_BAD_OPTION', details: { option: 'imatrix' } });
    const multipart = { headers: { 'content-type': 'multipart/form-data; boundary=xyz' }, body: '--xyz\r\nContent-Disposition: form-data; name="checkpoint"; filename="a"\r\n\r\nabc' };
    expect(await error(await post('preset=nf4', multipart))).toMatchObject({ status: 400, code: 'E_BAD_INPUT', details: { option: 'body' } });
    expect(await error(await post(`preset=nf4&name=${encodeURIComponent('a\r\nSet-Cookie: x=1')}`))).toMatchObject({ status: 400, code: 'E_BAD_OPTION', details: { option: 'name' } });
    // A webquant output whose quantization metadata is not an object (read as values before quantizing).
    const meta = buildSafetensors([{ name: 'p', dtype: 'F32', shape: [2, 8], data: f32Bytes(randomValues(16, 4)) }], { 'webquant.quantization': 'null' });
    expect(await error(await post('preset=nf4', { body: meta }))).toMatchObject({ status: 400, code: 'E_BAD_INPUT' });

    const named = await post(`preset=nf4&name=${encodeURIComponent('../a"b; x=y/模型')}`);
    expect(named.status, log).toBe(200);
    expect(named.headers.get('content-disposition')).toBe(`attachment; filename=".._a_b_ x=y___-nf4.safetensors"; filename*=UTF-8''.._a%22b%3B%20x%3Dy_%E6%A8%A1%E5%9E%8B-nf4.safetensors`);
    expect((await named.arrayBuffer()).byteLength).toBeGreaterThan(64 * 64 / 2);
  });

  it('refuses a posted body past MAX_BODY_BYTES with 413 (declared or streamed), and answers an upstream failure with 502', async () => {
    const error = async (r: Response) => ({ status: r.status, ...((await r.json()) as { error: { code: string; message: string; details: { option?: string } } }).error });
    // A declared length past the cap is refused before any of the body is read: the request is
    // sent without its body (fetch would fail writing a body the server never reads).
    const declared = await rawPost(edge, '/quantize?preset=nf4', { 'Content-Length': String(2 << 20) });
    expect(declared).toMatchObject({ status: 413, error: { code: 'E_BAD_INPUT', details: { option: 'body' } } });
    expect(declared.error.message).toContain('1100000');
    expect(declared.error.message).toContain('?url=');
    const form = await rawPost(edge, '/quantize?preset=nf4', { 'Content-Type': 'multipart/form-data; boundary=x', 'Content-Length': String(2 << 20) });
    expect(form).toMatchObject({ status: 413, error: { details: { option: 'body' } } });
    // Chunked, with no length: refused once what was read passes the cap (18 x 64 KiB, never ended).
    const chunk = Buffer.concat([Buffer.from(`${(64 << 10).toString(16)}\r\n`), Buffer.alloc(64 << 10), Buffer.from('\r\n')]);
    const chunked = await rawPost(edge, '/quantize?preset=nf4', { 'Transfer-Encoding': 'chunked' }, Array(18).fill(chunk));
    expect(chunked).toMatchObject({ status: 413, error: { code: 'E_BAD_INPUT', details: { option: 'body' } } });
    expect(chunked.error.message).toContain('more than');
    // Under the cap, a streamed body is read whole and quantized.
    const bf16 = readFileSync(STORIES_BF16);
    const ok = await fetch(`${edge}/quantize?preset=nf4`, {
      method: 'POST', duplex: 'half', body: new ReadableStream<Uint8Array>({ start(c) { c.enqueue(bf16.subarray(0, 1000)); c.enqueue(bf16.subarray(1000)); c.close(); } }),
    } as RequestInit);
    expect(ok.status, log).toBe(200);
    expect((await ok.arrayBuffer()).byteLength).toBeGreaterThan(100_000);
    // The checkpoint's server failing is not the client's mistake.
    const gone = await error(await fetch(`${edge}/quantize?preset=nf4&url=${encodeURIComponent(`${files!.origin}/models/nope.safetensors`)}`, { method: 'POST' }));
    expect(gone).toMatchObject({ status: 502, code: 'E_IO' });
  });

  it('errors the stream when a tensor fails after the response started', async () => {
    const v = randomValues(64 * 64, 7);
    v[100] = NaN;
    const bad = buildSafetensors([{ name: 'model.layers.0.mlp.up_proj.weight', dtype: 'F32', shape: [64, 64], data: f32Bytes(v) }]);
    const res = await fetch(`${edge}/quantize?preset=nf4`, { method: 'POST', body: bad });
    expect(res.status).toBe(200);
    await expect(res.arrayBuffer()).rejects.toThrow();
  });
});
