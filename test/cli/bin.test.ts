// The no-argument sample run and bin/webquant.js as a child process (the built dist/ tree).
import { beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readdirSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SHARED, hasShared } from '../helpers/shared.js';
import { spawn } from 'node:child_process';
import { BIN, cli, cliProcess, ensureBuilt, sha, tempDir } from './helpers.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import type { GgufCheckpoint } from '../../src/io/gguf.js';
import { sampleCheckpoint, SAMPLE_CONFIG } from '../../src/sample.js';

beforeAll(async () => {
  await ensureBuilt();
}, 300_000);

describe('webquant with no arguments', () => {
  it('writes the sample model and a q4_k_m GGUF with identical bytes on every run, in-process or not', async () => {
    const a = tempDir('sample-a'), b = tempDir('sample-b');
    const r1 = await cli([], { cwd: a });
    expect(r1.code, r1.stderr).toBe(0);
    expect(r1.stdout).toMatch(/^total\s+30\/39\s/m);
    expect(r1.stdout).toContain('no_vocab');
    const files = ['config.json', 'model.safetensors', 'model-q4_k_m.gguf'];
    expect(readdirSync(join(a, 'webquant-sample')).sort()).toEqual([...files].sort());
    const first = files.map((f) => sha(join(a, 'webquant-sample', f)));
    const r2 = await cli([], { cwd: a });
    expect(r2.code).toBe(0);
    expect(files.map((f) => sha(join(a, 'webquant-sample', f)))).toEqual(first);
    const r1w = await cli(['--workers', '1'], { cwd: a });
    expect(r1w.code).toBe(0);
    expect(files.map((f) => sha(join(a, 'webquant-sample', f)))).toEqual(first);
    const r3 = await cliProcess([], { cwd: b });
    expect(r3.code, r3.stderr).toBe(0);
    expect(r3.stderr).toBe('');
    expect(files.map((f) => sha(join(b, 'webquant-sample', f)))).toEqual(first);

    const g = (await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(join(a, 'webquant-sample/model-q4_k_m.gguf')))))) as GgufCheckpoint;
    expect(g.metadata['general.file_type']).toBe(15);
    expect([g.metadata['general.name'], g.metadata['general.basename'], g.metadata['general.finetune']]).toEqual(['Webquant Sample', undefined, undefined]);
    const types = Object.fromEntries(['Q4_K', 'Q6_K', 'F32'].map((t) => [t, g.tensors.filter((x) => x.dtype === t).length]));
    // 4 layers: use_more_bits picks layers 2 and 3 for attn_v / ffn_down; output.weight Q6_K.
    expect(types).toEqual({ Q4_K: 25, Q6_K: 5, F32: 9 });
    const st = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(join(a, 'webquant-sample/model.safetensors')))));
    const want = sampleCheckpoint();
    expect(st.tensors.map((t) => t.name)).toEqual(want.map((t) => t.name));
    const emb = await st.readValues('model.embed_tokens.weight');
    expect(Buffer.from(emb.values.buffer).equals(Buffer.from(want[0].data.buffer))).toBe(true);
    expect(JSON.parse(readFileSync(join(a, 'webquant-sample/config.json'), 'utf8'))).toEqual(SAMPLE_CONFIG);
  });
});

describe('cancellation', () => {
  it('an aborted run exits 130 and leaves the previous output in place, with no partial file', async () => {
    const dir = tempDir('abort');
    expect((await cli([], { cwd: dir })).code).toBe(0);
    const out = join(dir, 'webquant-sample/model-q4_k_m.gguf');
    const before = sha(out);
    const ac = new AbortController();
    const r = await cli(['quantize', 'webquant-sample', '-o', out, '--preset', 'q4_0', '-j', '1'], {
      cwd: dir, signal: ac.signal, onStdout: (s) => { if (s.startsWith('[ 2/')) ac.abort(new Error('test')); },
    });
    expect(r.code).toBe(130);
    expect(r.stderr).toMatch(/aborted.*E_ABORTED/);
    expect(sha(out)).toBe(before);
    expect(readdirSync(join(dir, 'webquant-sample')).filter((f) => f.includes('.partial-'))).toEqual([]);
  });
});

describe('signals', () => {
  it.each([['SIGTERM', 143], ['SIGHUP', 129], ['SIGINT', 130]] as const)('%s mid-run cancels it: exit %i, no partial file, the previous output untouched', async (signal, code) => {
    const dir = tempDir('signal');
    expect((await cli([], { cwd: dir })).code).toBe(0);
    const out = join(dir, 'webquant-sample/out.safetensors');
    const args = ['quantize', 'webquant-sample', '-o', out, '--format', 'affine', '--bits', '4', '-j', '1'];
    expect((await cli(args, { cwd: dir })).code).toBe(0);
    const before = sha(out);
    // HQQ with many iterations: a second or more after the first tensors, so the signal lands mid-run.
    const child = spawn(process.execPath, [BIN, ...args, '--calibration', '{"method":"hqq","iterations":1000}'], { cwd: dir });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (/^\[ ?2\//m.test(stdout) && !child.killed) child.kill(signal);
    });
    child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
    const exit = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    expect(child.killed, stdout).toBe(true);
    expect(exit, stderr).toBe(code);
    expect(stderr).toMatch(/E_ABORTED/);
    expect(sha(out)).toBe(before);
    expect(readdirSync(join(dir, 'webquant-sample')).filter((f) => f.includes('.partial-'))).toEqual([]);
  }, 60_000);
});

describe.skipIf(!hasShared)('bin/webquant.js', () => {
  const MODEL = join(SHARED, 'models/stories260K/model.safetensors');

  it('quantizes, reports JSON and exits 0', async () => {
    const tmp = tempDir('bin');
    const r = await cliProcess(['quantize', MODEL, '-o', 'out.gguf', '--preset', 'q8_0', '--json'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const rep = JSON.parse(r.stdout);
    expect(rep.output).toBe(join(tmp, 'out.gguf'));
    expect(rep.totals.fileBytes).toBe(readFileSync(join(tmp, 'out.gguf')).byteLength);
    // stderr is progress only: JSON lines.
    for (const line of r.stderr.trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
  });

  it('bad input: exit 2, one line without a stack; WEBQUANT_DEBUG=1 adds the stack', async () => {
    const tmp = tempDir('bin-bad');
    writeFileSync(join(tmp, 'trunc.gguf'), readFileSync(join(SHARED, 'models/stories260K/tinyllamas-stories-260k-f32.gguf')).subarray(0, 100_000));
    const r = await cliProcess(['quantize', 'trunc.gguf', '-o', 'x.gguf', '--preset', 'q4_0'], { cwd: tmp });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^webquant: \[gguf\] .*\(E_GGUF_TRUNCATED\)\n$/);
    const d = await cliProcess(['quantize', 'trunc.gguf', '-o', 'x.gguf', '--preset', 'q4_0'], { cwd: tmp, env: { WEBQUANT_DEBUG: '1' } });
    expect(d.code).toBe(2);
    expect(d.stderr).toMatch(/E_GGUF_TRUNCATED\)\nWebquantError: .*\n\s+at /);
    const u = await cliProcess(['frobnicate'], { cwd: tmp });
    expect(u.code).toBe(2);
    expect(u.stderr).toMatch(/unknown command "frobnicate"; valid commands: inspect, quantize, presets/);
    expect(existsSync(join(tmp, 'x.gguf'))).toBe(false);
    expect(readdirSync(tmp)).toEqual(['trunc.gguf']);
  });
});
