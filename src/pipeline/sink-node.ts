// Node file sink on top of src/io/node.ts's writeFileAtomic: the output goes to a partial file
// beside the target that is renamed over it only once complete and flushed; abort() (or any
// failure) removes the partial file and leaves the target as it was.
import { writeFileAtomic } from '../io/node.js';
import type { Sink } from './sink.js';

export async function fileSink(path: string): Promise<Sink> {
  const ac = new AbortController();
  // A one-slot channel from write() to the writer's async iteration: write() resolves once the
  // writer has taken the chunk, so at most one chunk waits here.
  let offered: { chunk: Uint8Array; taken: () => void } | undefined;
  let wantNext: (() => void) | undefined;
  let ended = false;
  async function* chunks(): AsyncGenerator<Uint8Array> {
    for (;;) {
      while (!offered && !ended) await new Promise<void>((r) => { wantNext = r; });
      if (!offered) return;
      const o = offered;
      offered = undefined;
      o.taken();
      yield o.chunk;
    }
  }
  const done = writeFileAtomic(path, chunks(), { signal: ac.signal });
  done.catch(() => undefined);
  // Made once, outside write(): a closure created inside write() would share its context, which
  // holds the chunk, and the pending `done` would keep every written chunk alive until the end.
  const endedEarly = done.then(() => { throw new Error('[pipeline] file sink already finished'); });
  endedEarly.catch(() => undefined);
  const poke = () => { const w = wantNext; wantNext = undefined; w?.(); };
  return {
    async write(chunk) {
      // Sink contract: a written chunk is never modified afterwards, so it needs no copy.
      const taken = new Promise<void>((r) => { offered = { chunk, taken: r }; });
      poke();
      await Promise.race([taken, endedEarly]);
    },
    async close() {
      ended = true;
      poke();
      await done;
    },
    async abort(reason) {
      ac.abort(reason);
      ended = true;
      offered = undefined;
      poke();
      await done.catch(() => undefined);
    },
  };
}
