// Kill a pipeline process mid-run, start it again with the same resume directory, and compare
// the output with an uninterrupted run's bytes.
import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { compiledTree, sameBytes, syntheticModel } from './helpers.js';

interface ChildRun { lines: string[]; code: number | null; signal: NodeJS.Signals | null }

function runChild(args: string[], killAfterComputed?: number): Promise<ChildRun> {
  const script = join(compiledTree(), 'test/pipeline/fixtures/resume-child.js');
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  let computed = 0;
  createInterface({ input: child.stdout }).on('line', (l) => {
    lines.push(l);
    if (l.startsWith('tensor ') && !l.includes(' keep ') && ++computed === killAfterComputed) child.kill('SIGKILL');
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code !== 0 && signal === null) reject(new Error(`child failed (${code}): ${stderr}`));
      else resolve({ lines, code, signal });
    });
  });
}

describe('resume after a kill', () => {
  it('continues from the cache and writes the bytes of an uninterrupted run', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wq-resume-'));
    const input = join(dir, 'in.safetensors');
    writeFileSync(input, syntheticModel(10).bytes);

    const refOut = join(dir, 'ref.safetensors');
    const ref = await runChild([input, refOut, join(dir, 'cache-ref'), '0']);
    expect(ref.code).toBe(0);
    expect(ref.lines.at(-1)).toMatch(/^done \d+ resumed 0$/);

    const out = join(dir, 'out.safetensors');
    const cache = join(dir, 'cache');
    const killed = await runChild([input, out, cache, '40'], 6);
    expect(killed.signal).toBe('SIGKILL');
    expect(existsSync(out)).toBe(false);
    const total = ref.lines.filter((l) => l.startsWith('tensor ')).length;
    expect(killed.lines.filter((l) => l.startsWith('tensor ')).length).toBeLessThan(total);

    const resumed = await runChild([input, out, cache, '0']);
    expect(resumed.code).toBe(0);
    const cachedLines = resumed.lines.filter((l) => l.endsWith(' cached'));
    expect(cachedLines.length).toBeGreaterThanOrEqual(6);
    expect(resumed.lines.some((l) => l.endsWith(' computed') && !l.includes(' keep '))).toBe(true);
    expect(Number(/resumed (\d+)/.exec(resumed.lines.at(-1)!)![1])).toBeGreaterThanOrEqual(6);
    expect(sameBytes(new Uint8Array(readFileSync(out)), new Uint8Array(readFileSync(refOut)))).toBe(true);
    // A successful run clears its resume data.
    expect(readdirSync(cache)).toEqual([]);
  });
});
