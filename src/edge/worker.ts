// Cloudflare Worker: quantizes a checkpoint at the edge and streams the result back.
//
//   POST /quantize?preset=q8_0&url=https://…/model.safetensors   read by URL with Range requests
//                                                                (config.json beside it, for GGUF)
//   POST /quantize?preset=nf4        multipart/form-data: `checkpoint` (+ `config` for GGUF output;
//                                    tokenizer files, generation_config.json and README.md by name)
//   POST /quantize?format=int4&name=tiny       raw body: the checkpoint itself (no config.json, so
//                                              safetensors output, or GGUF from a GGUF input)
//   ...&imatrix=https://…/imatrix.gguf          an importance matrix (llama.cpp's .dat or GGUF
//                                              imatrix) by URL, or as the form's `imatrix` file
//
// The response body is the GGUF or safetensors file, written as the pipeline produces it (bytes
// identical to `webquant quantize`'s for the same input and plan). Problems found before the first
// byte (bad input, unknown preset, plan errors) answer 400 with {error: {code, message, details}};
// a failure later errors the stream. Workers cannot compile WebAssembly from bytes, so both kernel
// builds are imported as modules (compiled at upload) and handed to configureWasm. An isolate has
// one thread: the pool's single worker runs in it (inline-spawner.ts). A posted body is held in
// memory (128 MB per isolate), up to 64 MiB (the MAX_BODY_BYTES variable; 413 past it): large
// checkpoints should be given by URL. Upstream failures (E_IO) answer 502, this Worker's own 500.
import simd from '../../build/webquant-simd.wasm';
import scalar from '../../build/webquant-scalar.wasm';
import { ErrorCodes, WebquantError } from '../errors.js';
import { configureWasm, type WasmBuild, type WasmSource } from '../kernels/loader.js';
import { fromBlob, fromBuffer, fromUrl, type ByteSource } from '../io/source.js';
import { readImatrix } from '../io/imatrix.js';
import { openCheckpoint } from '../io/open.js';
import { readConfig, safetensorsOptions } from '../io/config.js';
import { quantizeCheckpoint } from '../pipeline/pipeline.js';
import { WorkerPool } from '../pipeline/pool.js';
import { readableStreamSink } from '../pipeline/sink.js';
import { openUrlInput, prepareOutput, type ContainerKind, type InputBundle } from '../pipeline/prepare.js';
import { BESIDE_FILE_NAMES, type TokenizerFiles } from '../convert/tokenizer-files.js';
import { listPresets } from '../plan/presets.js';
import { inlineSpawner } from './inline-spawner.js';

const WASM: Record<WasmBuild, WasmSource> = { 'wasm-simd': simd, wasm: scalar };
configureWasm(WASM);

/** Input plus output bytes between reading and writing: well inside an isolate's 128 MB. */
const MAX_IN_FLIGHT = 24 << 20;

interface ExecutionContext {
  waitUntil(p: Promise<unknown>): void;
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body, null, 2), { status, headers: { 'content-type': 'application/json; charset=utf-8', ...headers } });
}

/** Errors whose fault is not the client's request: the upstream server's (502) or this Worker's (500). */
const SERVER_STATUS: Readonly<Record<string, number>> = {
  [ErrorCodes.IO]: 502,
  [ErrorCodes.WASM_LOAD]: 500, [ErrorCodes.WORKER]: 500, [ErrorCodes.WORKER_CRASHED]: 500, [ErrorCodes.WRITER]: 500, [ErrorCodes.CACHE]: 500,
};
/** A status chosen where the error was raised (413 for a body past the cap). */
const statusOf = new WeakMap<WebquantError, number>();

function errorResponse(e: unknown): Response {
  if (e instanceof WebquantError) {
    return json(statusOf.get(e) ?? SERVER_STATUS[e.code] ?? 400, { error: { code: e.code, message: e.message, details: e.details } });
  }
  return json(500, { error: { message: e instanceof Error ? e.message : String(e) } });
}

/** Another file of a split GGUF among the form's "checkpoint" files. */
function formSplit(parts: unknown[], name: string): ByteSource {
  const f = parts.find((p) => p instanceof Blob && (p as Blob & { name?: string }).name === name);
  if (!f) {
    throw new WebquantError(ErrorCodes.BAD_INPUT, `[edge] the checkpoint is split: send ${name} as another "checkpoint" file of the form`, {
      option: 'checkpoint', value: parts.map((p) => (p as { name?: string })?.name), expected: name,
    });
  }
  return fromBlob(f as Blob, name);
}

/** Tokenizer files posted as form fields named like the files ("tokenizer.json", ...; "tokenizer" = tokenizer.json). */
function formTokenizer(form: FormData): TokenizerFiles {
  const files: TokenizerFiles = {};
  for (const name of BESIDE_FILE_NAMES) {
    const v = (form.get(name) ?? (name === 'tokenizer.json' ? form.get('tokenizer') : null)) as unknown;
    if (v instanceof Blob) files[name] = fromBlob(v, name);
  }
  return files;
}

/** An http(s) URL given as query parameter `option`, or undefined when absent (E_BAD_OPTION for anything else). */
function urlParam(q: URLSearchParams, option: string): string | undefined {
  const v = q.get(option);
  if (!v) return undefined;
  let protocol = '';
  try {
    protocol = new URL(v).protocol;
  } catch {
    // reported below
  }
  if (protocol !== 'http:' && protocol !== 'https:') {
    throw new WebquantError(ErrorCodes.BAD_OPTION, `[edge] ${option} must be an absolute http(s) URL but is "${v.slice(0, 200)}"`, { option, value: v.slice(0, 200), expected: 'an http:// or https:// URL' });
  }
  return v;
}

/**
 * Content-Disposition for a file name that a client chose (RFC 6266): no directories; the quoted
 * filename keeps printable ASCII other than quote, backslash, % and ;, and a name with anything
 * else also gets filename* (RFC 8187) with the whole name.
 */
function contentDisposition(fileName: string): string {
  const name = fileName.replace(/[/\\]/g, '_');
  const ascii = name.replace(/[^\x20-\x7e]|["%;\\]/g, '_');
  if (ascii === name) return `attachment; filename="${name}"`;
  const encoded = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

const stem = (file: string) => file.replace(/\.(safetensors|gguf)$/i, '').replace(/\.(bf16|f16|f32)$/i, '');

/** Bytes a posted body may have (it is held in memory): 64 MiB unless the MAX_BODY_BYTES variable says otherwise. */
const DEFAULT_MAX_BODY = 64 << 20;

export interface Env {
  /** A positive integer: the largest posted body this Worker takes (a raw checkpoint or a form). */
  MAX_BODY_BYTES?: string;
}

function maxBodyBytes(env: Env | undefined): number {
  const v = env?.MAX_BODY_BYTES;
  if (v === undefined) return DEFAULT_MAX_BODY;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new WebquantError(ErrorCodes.BAD_OPTION, `[edge] the Worker variable MAX_BODY_BYTES must be a positive integer but is "${v}"`, { option: 'MAX_BODY_BYTES', value: v, expected: 'a positive integer' });
  }
  return n;
}

function tooLarge(bytes: number, cap: number, known: boolean): never {
  const e = new WebquantError(ErrorCodes.BAD_INPUT, `[edge] the posted body is ${known ? '' : 'more than '}${bytes} bytes, more than the ${cap} this Worker holds in memory: give a large checkpoint by URL (?url=)`, {
    option: 'body', value: bytes, expected: `at most ${cap} bytes`,
  });
  statusOf.set(e, 413);
  throw e;
}

/** The body's Content-Length, refused past `cap` before anything is read; undefined when not declared. */
function declaredLength(req: Request, cap: number): number | undefined {
  const declared = req.headers.get('content-length');
  if (declared === null) return undefined;
  if (Number(declared) > cap) tooLarge(Number(declared), cap, true);
  return Number(declared);
}

/** The posted body, refused past `cap` bytes: by its Content-Length, or while reading a body sent without one. */
async function readBody(req: Request, cap: number): Promise<Uint8Array<ArrayBuffer>> {
  // A declared length within the cap: the platform reads the body in one buffer.
  if (declaredLength(req, cap) !== undefined || !req.body) return new Uint8Array(await req.arrayBuffer());
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > cap) {
      await reader.cancel().catch(() => undefined);
      tooLarge(total, cap, false);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks.splice(0)) { out.set(c, at); at += c.byteLength; }
  return out;
}

/** The checkpoint, and the importance matrix's source if one was given (URL or form field). */
async function requestInput(req: Request, q: URLSearchParams, cap: number): Promise<InputBundle & { imatrix?: ByteSource }> {
  const imUrl = urlParam(q, 'imatrix');
  const imatrix = imUrl ? fromUrl(imUrl) : undefined;
  const url = urlParam(q, 'url');
  if (url) return { ...(await openUrlInput(url)), imatrix };
  const type = req.headers.get('content-type') ?? '';
  if (type.startsWith('multipart/form-data')) {
    let form: FormData;
    // With a Content-Length within the cap the platform parses the body itself (one copy); a
    // form sent without one is read under the cap first.
    const body = declaredLength(req, cap) === undefined ? await readBody(req, cap) : undefined;
    try {
      form = await (body ? new Response(body, { headers: { 'content-type': type } }) : req).formData();
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      throw new WebquantError(ErrorCodes.BAD_INPUT, `[edge] the multipart/form-data body cannot be read: ${why}`, { option: 'body', value: why, expected: 'multipart/form-data with a "checkpoint" file' });
    }
    const im = form.get('imatrix') as unknown;
    // A split GGUF comes as several "checkpoint" files: the first is opened, the others found by name.
    const parts = form.getAll('checkpoint') as unknown[];
    const file = parts[0];
    if (!(file instanceof Blob)) {
      throw new WebquantError(ErrorCodes.BAD_INPUT, '[edge] the form has no "checkpoint" file', { option: 'checkpoint', expected: 'a .safetensors or .gguf file' });
    }
    const cfg = form.get('config') as unknown;
    const name = q.get('name') ?? stem((file as Blob & { name?: string }).name ?? 'model');
    const config = cfg instanceof Blob ? await readConfig(fromBlob(cfg, 'config.json')) : undefined;
    return {
      checkpoint: await openCheckpoint(fromBlob(file, (file as Blob & { name?: string }).name ?? name), { ...safetensorsOptions(config), splits: (f) => formSplit(parts, f) }),
      name,
      config,
      tokenizer: formTokenizer(form),
      imatrix: im instanceof Blob ? fromBlob(im, (im as Blob & { name?: string }).name ?? 'imatrix') : imatrix,
    };
  }
  const body = await readBody(req, cap);
  const name = q.get('name') ?? 'model';
  return { checkpoint: await openCheckpoint(fromBuffer(body, name)), name, imatrix };
}

async function quantizeRequest(req: Request, env: Env | undefined, ctx: ExecutionContext): Promise<Response> {
  const q = new URL(req.url).searchParams;
  const container = q.get('container');
  if (container !== null && container !== 'gguf' && container !== 'safetensors') {
    throw new WebquantError(ErrorCodes.BAD_OPTION, `[edge] container must be "gguf" or "safetensors" but is "${container}"`, { option: 'container', value: container, expected: ['gguf', 'safetensors'] });
  }
  const name = q.get('name');
  // It becomes GGUF general.name and part of a header.
  if (name !== null && /[\x00-\x1f\x7f-\x9f]/.test(name)) {
    throw new WebquantError(ErrorCodes.BAD_OPTION, `[edge] name must not contain control characters but is ${JSON.stringify(name.slice(0, 200))}`, { option: 'name', value: name.slice(0, 200), expected: 'a name without control characters' });
  }
  const what = { preset: q.get('preset') ?? undefined, format: q.get('format') ?? undefined };
  const input = await requestInput(req, q, maxBodyBytes(env));
  const imatrix = input.imatrix ? { matrix: await readImatrix(input.imatrix), file: input.imatrix.name } : undefined;
  const job = await prepareOutput(input, what, (container ?? undefined) as ContainerKind | undefined, { imatrix });
  // Made before the pool and the run start: nothing after them may throw and leave the run writing to no one.
  const headers = new Headers({
    'content-type': 'application/octet-stream',
    'content-disposition': contentDisposition(job.fileName),
    'x-webquant-plan': job.label,
  });

  const pool = new WorkerPool(inlineSpawner(), { wasm: WASM });
  let build: WasmBuild;
  try {
    // One row through the pool says which kernel build runs here (and loads it before the stream starts).
    build = (await pool.quantize({ values: new Float32Array(32) }, { format: 'q8_0', rowLength: 32, dtype: 'f32', name: 'probe' })).backend as WasmBuild; // the pool runs wasm only
  } catch (e) {
    await pool.terminate();
    throw e;
  }
  headers.set('x-webquant-kernels', build);
  const { sink, stream } = readableStreamSink();
  const run = quantizeCheckpoint({ input: job.input, plan: job.plan, container: job.container, sink, pool, maxInFlightBytes: MAX_IN_FLIGHT, importance: job.importance });
  ctx.waitUntil(run.done.then(() => undefined, () => undefined).finally(() => pool.terminate()));
  return new Response(stream, { headers });
}

export default {
  async fetch(req: Request, env: Env | undefined, ctx: ExecutionContext): Promise<Response> {
    const path = new URL(req.url).pathname;
    if (path === '/quantize') {
      if (req.method !== 'POST') return json(405, { error: { message: 'POST a checkpoint (or ?url=) to /quantize' } }, { allow: 'POST' });
      try {
        return await quantizeRequest(req, env, ctx);
      } catch (e) {
        return errorResponse(e);
      }
    }
    if (path === '/' && req.method === 'GET') {
      return json(200, { usage: 'POST /quantize?preset=<name>[&url=<checkpoint URL>][&container=gguf|safetensors][&imatrix=<imatrix URL>]', presets: listPresets().map((p) => ({ name: p.name, container: p.container, description: p.description })) });
    }
    return json(404, { error: { message: `no route ${req.method} ${path}` } });
  },
};
