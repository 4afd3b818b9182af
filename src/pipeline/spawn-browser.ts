// Spawning pool workers in browsers (module Web Workers). Everything else about the pool is shared.
import type { Spawner, WorkerHandle } from './pool.js';

export function browserSpawner(workerUrl?: string | URL): Spawner {
  return {
    defaultSize: () => (typeof navigator !== 'undefined' && navigator.hardwareConcurrency) || 4,
    spawn(): WorkerHandle {
      // Written out literally so that bundlers (Vite, webpack 5) find and emit the worker module.
      const w = workerUrl === undefined
        ? new Worker(new URL('./worker-browser.js', import.meta.url), { type: 'module' })
        : new Worker(workerUrl, { type: 'module' });
      let dead = false;
      let exitListener: ((e: Error) => void) | undefined;
      // An uncaught error (or a failed module load) ends the worker as far as the pool is concerned.
      w.addEventListener('error', (ev: ErrorEvent) => {
        if (dead) return;
        dead = true;
        ev.preventDefault();
        w.terminate();
        exitListener?.(new Error(ev.message || 'worker error'));
      });
      return {
        endpoint: w,
        onExit(cb) { exitListener = cb; },
        async terminate() {
          dead = true;
          w.terminate();
        },
      };
    },
  };
}
