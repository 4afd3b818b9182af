// Tokenizer files for the runtimes without a file system: found beside a URL (one Range probe per
// name), or handed over as Blobs in InputBundle.tokenizer (the demo page, the Worker). prepareOutput
// converts them only when it writes GGUF from a Hugging Face checkpoint.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SHARED, hasShared } from '../helpers/shared.js';
import { openUrlInput, prepareOutput, tokenizerFilesBesideUrl } from '../../src/pipeline/prepare.js';
import { fromBlob, fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { readConfig } from '../../src/io/config.js';
import { WebquantError } from '../../src/errors.js';
import { byteLevelTokenizer, llamaPieces, spModel } from './tokenizer-fixtures.js';

const DIR = join(SHARED, 'models/stories260K');

/** A fetch that serves `files` with Range support and 404s everything else; it records the paths asked for. */
function rangeFetch(files: Record<string, Uint8Array>, asked: string[]): typeof fetch {
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const path = new URL(String(input)).pathname;
    asked.push(path);
    const body = files[path];
    if (!body) return new Response(null, { status: 404 });
    const m = /bytes=(\d+)-(\d*)/.exec(new Headers(init?.headers).get('range') ?? '');
    const start = m ? Number(m[1]) : 0;
    const end = m && m[2] ? Math.min(Number(m[2]), body.length - 1) : body.length - 1;
    return new Response(body.slice(start, end + 1), { status: 206, headers: { 'content-range': `bytes ${start}-${end}/${body.length}` } });
  }) as typeof fetch;
}

/** The GGUF metadata a prepared container will write (its id records it). */
const containerKeys = (id: string) => JSON.parse(id.slice(id.indexOf('{'))).metadata as { key: string; value: unknown }[];

describe.skipIf(!hasShared)('tokenizer files beside a URL and as Blobs', () => {
  const enc = (o: unknown) => new TextEncoder().encode(JSON.stringify(o));
  const files = {
    '/m/model.safetensors': new Uint8Array(readFileSync(join(DIR, 'model.safetensors'))),
    '/m/config.json': new Uint8Array(readFileSync(join(DIR, 'config.json'))),
    '/m/tokenizer.json': enc(byteLevelTokenizer({ added: [{ content: '<|begin_of_text|>', special: true }], bosTemplate: '<|begin_of_text|>' })),
    '/m/tokenizer_config.json': enc({ bos_token: '<|begin_of_text|>' }),
  };

  it('finds the files that exist beside a URL and converts them for GGUF', async () => {
    const asked: string[] = [];
    const fetch = rangeFetch(files, asked);
    const found = await tokenizerFilesBesideUrl('http://host/m/model.safetensors', { fetch });
    expect(Object.keys(found).sort()).toEqual(['tokenizer.json', 'tokenizer_config.json']);
    expect(new Set(asked.filter((p) => p.startsWith('/m/token'))).size).toBe(3); // tokenizer.json, tokenizer.model, tokenizer_config.json
    const bundle = await openUrlInput('http://host/m/model.safetensors', { fetch });
    const job = await prepareOutput(bundle, { preset: 'q8_0' });
    const md = containerKeys(job.container.id);
    const get = (k: string) => md.find((e) => e.key === k)?.value;
    expect(get('tokenizer.ggml.model')).toBe('gpt2');
    expect(get('tokenizer.ggml.pre')).toBe('llama-bpe');
    expect((get('tokenizer.ggml.tokens') as string[]).length).toBe(512);
    expect(get('tokenizer.ggml.bos_token_id')).toBe(266);
    expect(job.warnings.join()).not.toMatch(/no_vocab/);
  });

  it('a server that answers every path with an HTML page: the files beside the URL are taken as absent', async () => {
    const page = new TextEncoder().encode('\n<!DOCTYPE html><html><body>app</body></html>');
    const html = { '/m/model.safetensors': files['/m/model.safetensors'] } as Record<string, Uint8Array>;
    for (const f of ['config.json', 'tokenizer.json', 'tokenizer.model', 'tokenizer_config.json']) html[`/m/${f}`] = page;
    const bundle = await openUrlInput('http://host/m/model.safetensors', { fetch: rangeFetch(html, []) });
    expect(bundle.config).toBeUndefined(); // was E_CONFIG "not JSON"
    expect(Object.keys(bundle.tokenizer ?? {})).toEqual([]);
    expect(bundle.checkpoint.tensors.length).toBeGreaterThan(0);
  });

  it('takes Blobs; no tokenizer is a warning and no_vocab; safetensors output never reads them', async () => {
    const base = {
      checkpoint: await openCheckpoint(fromBuffer(files['/m/model.safetensors'], 'model.safetensors')),
      name: 'stories', config: await readConfig(fromBuffer(files['/m/config.json'], 'config.json')),
    };
    const blob = (b: Uint8Array, name: string) => fromBlob(new Blob([b]), name);
    const spm = await prepareOutput({ ...base, tokenizer: { 'tokenizer.model': blob(spModel(llamaPieces(['▁a', '▁b'])), 'tokenizer.model') } }, { preset: 'q8_0' });
    const md = containerKeys(spm.container.id);
    expect(md.find((e) => e.key === 'tokenizer.ggml.model')?.value).toBe('llama');
    expect((md.find((e) => e.key === 'tokenizer.ggml.tokens')?.value as string[]).slice(0, 3)).toEqual(['<unk>', '<s>', '</s>']);
    // config.json's bos/eos ids (1, 2).
    expect(md.find((e) => e.key === 'tokenizer.ggml.eos_token_id')?.value).toBe(2);

    const none = await prepareOutput(base, { preset: 'q8_0' });
    expect(containerKeys(none.container.id).find((e) => e.key === 'tokenizer.ggml.model')?.value).toBe('no_vocab');
    expect(none.warnings.join()).toMatch(/no_vocab/);

    const broken = { ...base, tokenizer: { 'tokenizer.json': blob(new TextEncoder().encode('{'), 'tokenizer.json') } };
    await expect(prepareOutput(broken, { preset: 'nf4' })).resolves.toMatchObject({ kind: 'safetensors' });
    const e = await prepareOutput(broken, { preset: 'q8_0' }).catch((x) => x);
    expect(e).toBeInstanceOf(WebquantError);
    expect((e as WebquantError).code).toBe('E_TOKENIZER');
    expect((e as WebquantError).details.file).toBe('tokenizer.json');
  });
});
