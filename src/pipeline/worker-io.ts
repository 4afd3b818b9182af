// Worker I/O: which units the pool's workers read and write themselves, so that tensor bytes need
// not pass through the thread that runs the pipeline (on a small machine that thread's copies,
// fresh buffers and page faults cost as much as a fast kernel).
//
// Reading: where the checkpoint can say where a unit's stored values are (Checkpoint.locate) and
// its source can be described to another thread (ByteSource.ref: a file path, a Blob, a URL),
// the worker is sent that range instead of the values.
// Writing: where the sink is a file that workers can write (Sink.positional, Node's fileSink) and
// the unit's rows can be quantized apart from the rest of its tensor (a layout whose tensor-level
// sections are constant, or a sliced tensor), the worker is sent the file offset of its part of
// each row section: every offset follows from the container plan. Tensor sections come back in
// the result (they are small) and are written here. Kept tensors are then copied here through one
// small reused buffer, at their offsets too.
// Memory: a unit holds its input in memory between reading and quantizing unless a worker reads
// it from a file or a Blob chunk by chunk into wasm memory, and its output until it is written
// unless the worker writes it; `held` is what remains, what the pipeline's budget counts. A URL
// range is read in blocks too, but a unit's block (up to 8 MiB, one request) is held whole, so
// its input is counted.
import type { Checkpoint, TensorValues } from '../io/checkpoint.js';
import type { ByteSource, SourceRef } from '../io/source.js';
import { cutsByRows, tensorSectionsOf } from '../formats/types.js';
import type { ContainerPlan } from './container.js';
import { bringsTensorSections, isEmptyTensor, type Job, type Unit, type UnitResult } from './jobs.js';
import { ErrorCodes, WebquantError } from '../errors.js';
import type { PositionalTarget } from './sink.js';
import type { WorkerOutput, WorkerRange } from './worker.js';

/** Buffer of the raw copies of kept tensors into a positional sink. */
const COPY_CHUNK = 4 << 20;

export interface WorkerIoOptions {
  input: Checkpoint;
  layoutPlan: ContainerPlan;
  /** Let workers read where the input allows. */
  reads: boolean;
  /** The sink's positional side, when the workers may write into it. */
  target?: PositionalTarget;
  signal: AbortSignal;
  /** The sources' references (shared with streamedTensors, so each source is asked once). */
  refOf: SourceRefs;
}

/** How one unit is read and written. */
export interface Route {
  /** Stored values a worker reads itself, of this dtype. */
  range?: WorkerRange;
  dtype?: TensorValues['dtype'];
  /** Where a worker writes the output itself. */
  out?: WorkerOutput;
  /** A kept unit that copyKept() copies into the target. */
  copy: boolean;
  /** Bytes of input and output held in memory between reading and writing. */
  held: number;
}

export interface WorkerIo {
  target?: PositionalTarget;
  route(u: Unit): Promise<Route>;
  /** The stored range of a whole sliced tensor, for its calibration (prepareOnly). */
  wholeRange(job: Job): Promise<{ range: WorkerRange; dtype: TensorValues['dtype'] }>;
  /** Copies a kept unit whose route says `copy` into the target (result `written`). */
  copyKept(u: Unit): Promise<UnitResult>;
}

/** References whose ranges a worker reads in chunks small enough not to count (worker.ts). */
const STREAMED: ReadonlySet<SourceRef['kind']> = new Set(['file', 'blob']);

/** Each source's reference for the workers (ByteSource.ref), asked once per source and run. */
export type SourceRefs = (src: ByteSource) => Promise<SourceRef | undefined>;

export function sourceRefs(): SourceRefs {
  const refs = new Map<ByteSource, Promise<SourceRef | undefined>>();
  return (src) => {
    let ref = refs.get(src);
    if (!ref) refs.set(src, (ref = src.ref ? src.ref() : Promise.resolve(undefined)));
    return ref;
  };
}

/**
 * The tensors whose values the pool's workers would read themselves block by block (a file, Blob
 * or URL range): a layout with tensor sections computed from the values can then be cut into
 * slices (jobs.ts), its calibration running once over the whole in a worker. From a URL such a
 * tensor is fetched twice (the calibration, then the slices), which only tensors larger than a
 * worker's share of the budget pay: smaller ones stay whole.
 */
export async function streamedTensors(input: Checkpoint, reads: boolean, refOf: SourceRefs): Promise<(name: string) => boolean> {
  const locate = input.locate?.bind(input);
  if (!reads || !locate) return () => false;
  const names = new Set<string>();
  for (const t of input.tensors) {
    if (isEmptyTensor(t)) continue; // no row to locate; kept whole (buildJobs)
    const at = locate(t.name, 0, 1);
    if (at && (await refOf(at.source))) names.add(t.name);
  }
  return (name) => names.has(name);
}

export function workerIo({ input, layoutPlan, reads, target, signal, refOf }: WorkerIoOptions): WorkerIo {
  const locate = input.locate?.bind(input);

  // File offset of every container entry: the header, then each entry's bytes and padding.
  const entryAt: number[][] = [];
  for (let i = 0, pos = layoutPlan.header.byteLength; i < layoutPlan.entries.length; i++) {
    entryAt.push(layoutPlan.entries[i].map((e) => { pos += e.before?.byteLength ?? 0; const at = pos; pos += e.byteLength + e.padAfter; return at; }));
  }

  let copyBuffer: Uint8Array | undefined;
  // One copy after another, like this thread's reads.
  let copying: Promise<unknown> = Promise.resolve();

  const rangeOf = async (job: Job, r0: number, rows: number): Promise<{ range: WorkerRange; dtype: TensorValues['dtype'] } | undefined> => {
    if (!reads || !locate || job.readAs !== 'values') return undefined;
    const at = locate(job.info.name, r0, rows);
    const source = at && (await refOf(at.source));
    return source && { range: { source, offset: at.offset, length: at.length }, dtype: at.dtype };
  };

  const outputOf = ({ job, r0 }: Unit): WorkerOutput | undefined => {
    const layout = job.out.layout;
    if (!target || !layout || !(cutsByRows(layout) || job.sliced)) return undefined;
    // Tensor sections (after the row sections) come back in the result and are written here.
    const rowSecs = layout.sections.filter((sec) => sec.perRow > 0);
    return { path: target.path, at: rowSecs.map((sec, i) => entryAt[job.index][i] + sec.perRow * r0) };
  };

  /** The stored range of a kept unit, when it can be copied into the target here. */
  const keptRange = (u: Unit) => {
    const { job } = u;
    const whole = job.units.length === 1;
    const at = target && locate?.(job.info.name, u.r0, whole ? job.nrows : u.rows);
    return at?.source.readInto && at.length === (whole ? job.info.byteLength : u.cost) ? at : undefined;
  };

  return {
    target,

    async route(u) {
      if (u.job.out.kind === 'keep') {
        const copy = !!keptRange(u);
        return { copy, held: copy ? 0 : u.cost };
      }
      const r = await rangeOf(u.job, u.r0, u.rows);
      const out = outputOf(u);
      const input = u.rows * u.job.rowLen * u.job.elemBytes;
      // Written by the worker, only the tensor sections come back (tensorSectionsOf).
      const back = out && bringsTensorSections(u.job, u.chunk) ? tensorSectionsOf(u.job.out.layout!).bytes : 0;
      const held = (r && STREAMED.has(r.range.source.kind) ? 0 : input) + (out ? back : u.cost - input);
      return { range: r?.range, dtype: r?.dtype, out, copy: false, held };
    },

    async wholeRange(job) {
      const r = await rangeOf(job, 0, job.nrows);
      if (!r) throw new WebquantError(ErrorCodes.BAD_INPUT, `[pipeline] tensor "${job.info.name}" was cut into slices but its workers cannot read it`, { tensor: job.info.name });
      return r;
    },

    copyKept(u) {
      const at = keptRange(u)!;
      const src = at.source;
      const dst = entryAt[u.job.index][0] + u.r0 * u.job.rowLen * u.job.elemBytes;
      const copy = copying.then(async (): Promise<UnitResult> => {
        copyBuffer ??= new Uint8Array(COPY_CHUNK);
        for (let done = 0; done < at.length; done += COPY_CHUNK) {
          if (signal.aborted) throw signal.reason;
          const part = copyBuffer.subarray(0, Math.min(COPY_CHUNK, at.length - done));
          await src.readInto!(part, at.offset + done);
          await target!.writeAt(part, dst + done);
        }
        return { data: new Uint8Array(0), cached: false, written: true };
      });
      copying = copy.catch(() => undefined);
      return copy;
    },
  };
}
