// Node file sink on top of src/io/node.ts's atomic file: the output goes to a partial file beside
// the target that is renamed over it only once complete; abort() (or any failure) removes the
// partial file and leaves the target as it was. Besides appending, it lets pipeline workers write
// their results straight into the partial file at their offsets (`positional`).
//
// Not flushed to disk before the rename unless `durable`: the rename alone already makes the
// output appear whole or not at all, and a killed run leaves nothing under the target name (and
// resumes from its cache). A flush adds only survival of a power loss or OS crash in the seconds
// after the run, at the price of waiting for the disk: this VM's disk takes 0.4-0.6 GB/s while two
// Q8_0 workers produce 0.6-0.9 GB/s of output, so the flushed run measures the disk, not the
// pipeline. Like llama.cpp's quantize and safetensors' save_file, the default leaves the writeback
// to the OS, which also throttles writers if dirty pages pile up.
import { createAtomicFile } from '../io/node.js';
import type { PositionalTarget, Sink } from './sink.js';

export interface FileSinkOptions {
  /** fsync the output before renaming it into place (default false, see above). */
  durable?: boolean;
}

export async function fileSink(path: string, opts: FileSinkOptions = {}): Promise<Sink & { positional: PositionalTarget }> {
  const file = await createAtomicFile(path, { durable: opts.durable ?? false });
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
