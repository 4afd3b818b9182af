// A pool "worker" that runs in the calling thread, for runtimes without threads (Cloudflare
// Workers, where an isolate has one): the pool talks comlink to the same worker code as
// everywhere else (src/pipeline/worker.ts) through a pair of in-memory ports, so the pipeline needs
// no second code path. Nothing is cloned between the two ends: there is only one heap.
import type { Endpoint } from 'comlink';
import { Comlink } from '../pipeline/transfer.js';
import { createWorkerApi } from '../pipeline/worker.js';
import type { Spawner, WorkerHandle } from '../pipeline/pool.js';

type Listener = EventListenerOrEventListenerObject;

function portPair(): { ends: [Endpoint, Endpoint]; close(): void } {
  const sides = [new Set<Listener>(), new Set<Listener>()];
  const port = (mine: Set<Listener>, theirs: Set<Listener>): Endpoint => ({
    postMessage(data: unknown) {
      // Asynchronous like a real port: a reply never runs inside the call that sent the request.
      const ev = { data } as MessageEvent;
      setTimeout(() => { for (const l of [...theirs]) typeof l === 'function' ? l(ev) : l.handleEvent(ev); }, 0);
    },
    addEventListener(_type: string, l: Listener) { mine.add(l); },
    removeEventListener(_type: string, l: Listener) { mine.delete(l); },
  });
  return { ends: [port(sides[0], sides[1]), port(sides[1], sides[0])], close: () => sides.forEach((s) => s.clear()) };
}

export function inlineSpawner(): Spawner {
  return {
    defaultSize: () => 1,
    spawn(): WorkerHandle {
      const { ends: [pool, worker], close } = portPair();
      Comlink.expose(createWorkerApi(), worker);
      return {
        endpoint: pool,
        // An in-thread worker cannot die on its own: its errors are thrown back through comlink.
        onExit() {},
        async terminate() { close(); },
      };
    },
  };
}
