// Running the CLI in tests: in-process through main() with captured output, or as a child process
// through bin/webquant.js. Both need the compiled tree (dist/): pool workers are worker_threads,
// which cannot run the TypeScript sources vitest transforms. The tree is rebuilt when a source is
// newer than dist/cli/main.js, under a lock so that parallel test files build it once.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll } from 'vitest';
import { main } from '../../src/cli/main.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const BIN = join(ROOT, 'bin/webquant.js');
const MAIN_JS = join(ROOT, 'dist/cli/main.js');

function newestSource(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newestSource(p) : e.name.endsWith('.ts') ? statSync(p).mtimeMs : 0);
  }
  return t;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Builds dist/ (and build/*.wasm when missing) unless it is newer than every source file. */
export async function ensureBuilt(): Promise<void> {
  const fresh = () => existsSync(MAIN_JS) && statSync(MAIN_JS).mtimeMs >= newestSource(join(ROOT, 'src'))
    && existsSync(join(ROOT, 'build/webquant-simd.wasm')) && existsSync(join(ROOT, 'build/webquant-scalar.wasm'));
  if (fresh()) return;
  mkdirSync(join(ROOT, '.cache'), { recursive: true });
  const lock = join(ROOT, '.cache/cli-build.lock');
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      // Another test file is building; a lock older than 10 minutes is left over from a killed run.
      if (existsSync(lock) && Date.now() - statSync(lock).mtimeMs > 600_000) rmSync(lock, { recursive: true, force: true });
      await sleep(500);
      if (fresh()) return;
    }
  }
  try {
    if (fresh()) return;
    const wasm = existsSync(join(ROOT, 'build/webquant-simd.wasm')) && existsSync(join(ROOT, 'build/webquant-scalar.wasm'));
    // `npm run build` is asbuild + tsc; the kernels are only rebuilt when missing (they are what
    // every other test runs as well), the TypeScript always.
    const [cmd, ...args] = wasm ? ['npx', 'tsc', '-p', 'tsconfig.build.json'] : ['npm', 'run', 'build'];
    await new Promise<void>((resolve, reject) => {
      execFile(cmd, args, { cwd: ROOT, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
        // tsc emits even with type errors elsewhere in the tree; what matters is that main.js exists.
        if (err && !existsSync(MAIN_JS)) reject(new Error(`build failed: ${stdout}${stderr}`));
        else resolve();
      });
    });
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

export const workerUrl = () => pathToFileURL(join(ROOT, 'dist/pipeline/worker-node.js'));

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** main() in-process with captured output; `tty` makes stdout look like a terminal. */
export async function cli(argv: string[], opts: { cwd: string; tty?: boolean; env?: Record<string, string>; signal?: AbortSignal; onStdout?: (s: string) => void } = { cwd: ROOT }): Promise<CliRun> {
  let stdout = '', stderr = '';
  const code = await main(argv, {
    stdout: { write: (s: string) => { stdout += s; opts.onStdout?.(s); }, isTTY: opts.tty, columns: 100 },
    stderr: { write: (s: string) => { stderr += s; } },
    cwd: opts.cwd,
    env: opts.env ?? {},
    workerUrl: workerUrl(),
    forwardWorkerUrl: pathToFileURL(join(ROOT, 'dist/cli/forward-worker.js')),
    signal: opts.signal,
  });
  return { code, stdout, stderr };
}

/** bin/webquant.js as a child process. */
export function cliProcess(argv: string[], opts: { cwd: string; env?: Record<string, string> }): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...argv], { cwd: opts.cwd, env: { ...process.env, ...opts.env }, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

const temps: string[] = [];
// Registered from this module, the hook runs after every test of each file that imports it.
afterAll(() => { for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true }); });

export function tempDir(tag: string): string {
  const d = mkdtempSync(join(tmpdir(), `webquant-${tag}-`));
  temps.push(d);
  return d;
}

export function sha(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}
