// The package's Node entry (`webquant/node`), imported by name as a user's script would: a file
// read by path, written through the atomic file sink with a resume store in a directory, gives
// the bytes of the same run into a Blob, and a second run resumes every unit.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from './pipeline/helpers.js';
import { SHARED } from './helpers/shared.js';
import { workerExecArgv } from '../src/pipeline/spawn-node.js';

const dir = mkdtempSync(join(tmpdir(), 'webquant-node-entry-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const script = `
import { openCheckpoint, quantizeCheckpoint, blobSink } from 'webquant';
import { fromPath, fileSink, dirStore } from 'webquant/node';
const [model, out, cache] = process.argv.slice(1);
const ck = await openCheckpoint(fromPath(model));
const plan = ck.tensors.map((t) => ({ name: t.name, scheme: t.shape.length === 2 && t.shape[1] % 32 === 0 ? { format: 'q8_0' } : 'keep' }));
const runs = [];
for (let i = 0; i < 2; i++) {
  const r = await quantizeCheckpoint({ input: ck, plan, sink: await fileSink(out), workers: 2, resume: dirStore(cache), keepResumeData: true });
  runs.push(r.resumedUnits);
}
const b = blobSink();
await quantizeCheckpoint({ input: ck, plan, sink: b.sink, workers: 1 });
const blob = new Uint8Array(await (await b.blob()).arrayBuffer());
process.stdout.write(JSON.stringify({ runs, blob: Buffer.from(blob).toString('base64') }));
`;

describe('webquant/node', () => {
  it('fromPath, fileSink and dirStore by package name: the bytes of a Blob run, resumed the second time', () => {
    const out = join(dir, 'out.safetensors');
    const got = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script, join(SHARED, 'models/stories260K/model.bf16.safetensors'), out, join(dir, 'cache')], { cwd: ROOT, encoding: 'utf8' }));
    const file = readFileSync(out);
    expect(file.byteLength).toBeGreaterThan(100_000);
    expect(Buffer.from(got.blob, 'base64').equals(file)).toBe(true);
    expect(got.runs[0]).toBe(0);
    expect(got.runs[1]).toBeGreaterThan(10);
  });

  it('workers get the parent\'s Node options without those of its entry script', () => {
    expect(workerExecArgv(['--input-type=module', '-e', 'x()', '--max-old-space-size=4096'])).toEqual(['--max-old-space-size=4096']);
    expect(workerExecArgv(['--input-type', 'module', '--eval', 'x()', '--enable-source-maps'])).toEqual(['--enable-source-maps']);
    expect(workerExecArgv(['-p', '1', '--no-warnings', '--print=2'])).toEqual(['--no-warnings']);
    expect(workerExecArgv([])).toEqual([]);
  });
});
