// Node file sink on top of src/io/node.ts's atomic file: the output goes to a partial file beside
// the target that is renamed over it only once complete and flushed; abort() (or any failure)
// removes the partial file and leaves the target as it was. Besides appending, it lets pipeline
// workers write their results straight into the partial file at their offsets (`positional`).
import { createAtomicFile } from '../io/node.js';
import type { PositionalTarget, Sink } from './sink.js';

export async function fileSink(path: string): Promise<Sink & { positional: PositionalTarget }> {
  const file = await createAtomicFile(path);
  let end = 0;
  return {
    async write(chunk) {
      const at = end;
      end += chunk.byteLength;
      await file.writeAt(chunk, at);
    },
    close: () => file.commit(),
    abort: () => file.discard(),
    positional: {
      path: file.partial,
      writeAt: (bytes, offset) => file.writeAt(bytes, offset),
      wrote: (n) => file.wrote(n),
    },
  };
}
