// Spawning pool workers on Node (worker_threads). Everything else about the pool is shared.
import { Worker } from 'node:worker_threads';
import { availableParallelism } from 'node:os';
import nodeEndpoint from 'comlink/dist/esm/node-adapter.mjs';
import type { Spawner, WorkerHandle } from './pool.js';

/** Worker threads alive now, across every pool of this process (tests check it drops to 0). */
const live = new Set<Worker>();
export function liveWorkerThreads(): number {
  return live.size;
}

/**
 * The parent's Node options less those that describe only its own entry script (`--input-type`,
 * `-e` / `--eval`, `-p` / `--print`, with their values): a worker inherits process.execArgv, and
 * Node refuses to start a worker file under --input-type (a script run as `node
 * --input-type=module -e ...` could not start one).
 */
export function workerExecArgv(argv: readonly string[] = process.execArgv): string[] {
  const own = new Set(['--input-type', '-e', '--eval', '-p', '--print']);
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (own.has(a)) i++;
    else if (!own.has(a.split('=')[0])) out.push(a);
  }
  return out;
}

export function nodeSpawner(workerUrl: string | URL = new URL('./worker-node.js', import.meta.url)): Spawner {
  return {
    defaultSize: () => availableParallelism(),
    spawn(): WorkerHandle {
      const w = new Worker(workerUrl instanceof URL ? workerUrl : new URL(workerUrl), { execArgv: workerExecArgv() });
      live.add(w);
      let terminating = false;
      let exitListener: ((e: Error) => void) | undefined;
      let lastError: Error | undefined;
      const exited = new Promise<void>((resolve) => w.once('exit', () => { live.delete(w); resolve(); }));
      w.on('error', (e) => { lastError = e; });
      w.on('exit', (code) => {
        if (!terminating) exitListener?.(lastError ?? new Error(`worker thread exited with code ${code}`));
      });
      return {
        endpoint: nodeEndpoint(w),
        // An idle worker must not keep the process alive; a busy one must, or an awaited result
        // could be lost to a process that thinks it has nothing left to do.
        setBusy(busy) { if (busy) w.ref(); else w.unref(); },
        onExit(cb) { exitListener = cb; },
        async terminate() {
          terminating = true;
          await w.terminate();
          await exited;
        },
      };
    },
  };
}
