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
import { ggufSplitName } from '../io/gguf.js';
import { createAtomicFile } from '../io/node.js';
import { splitSink, type PositionalTarget, type Sink } from './sink.js';

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

/**
 * A split GGUF's files beside `path` (`model.gguf` gives `model-00001-of-00003.gguf`, ...), each
 * written atomically as by fileSink; `paths` lists them once the pipeline has said how many.
 */
export function splitFileSink(path: string, opts: FileSinkOptions = {}): { sink: Sink; paths: () => string[] } {
  let paths: string[] = [];
  const sink = splitSink(async (i, n) => {
    if (i === 0) paths = splitPaths(path, n);
    return fileSink(paths[i], opts);
  });
  return { sink, paths: () => [...paths] };
}

/** The `count` files a split output named `path` (`model.gguf`) is written to. */
export function splitPaths(path: string, count: number): string[] {
  const prefix = path.replace(/\.gguf$/i, '');
  return Array.from({ length: count }, (_, i) => ggufSplitName(prefix, i, count));
}
