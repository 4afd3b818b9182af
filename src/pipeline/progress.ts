// Progress of a pipeline run, delivered to a callback and to async iterators alike.
import type { ErrorMetrics } from '../metrics.js';

export interface TensorProgress {
  type: 'tensor';
  name: string;
  role?: string;
  /** Transformer block, when the tensor belongs to one. */
  layer?: number;
  /** Position in processing order, and the number of tensors. */
  index: number;
  count: number;
  /** Format name, or 'keep' for tensors copied unchanged. */
  format: string;
  /** Taken from the resume cache instead of being computed. */
  cached: boolean;
  /** Input bytes of this tensor and its output bytes. */
  bytes: number;
  outputBytes: number;
  /** Input bytes finished so far (this tensor included) and in all. */
  bytesDone: number;
  bytesTotal: number;
  elapsedMs: number;
  /** Input bytes per second computed in this run (cached tensors excluded). */
  throughput: number;
  /** Estimated time left at that throughput; undefined until something was computed. */
  etaMs?: number;
  /** Error metrics of the finished tensor (when `metrics` is on). Row-chunked tensors: see pipeline.ts. */
  metrics?: ErrorMetrics;
}

export interface LayerProgress {
  type: 'layer';
  /** Block index; undefined for the tensors outside blocks (embeddings first, the rest last). */
  layer?: number;
  group: string;
  tensors: number;
  bytesDone: number;
  bytesTotal: number;
  elapsedMs: number;
  throughput: number;
  etaMs?: number;
}

/** Something the run worked around; the output is unaffected. */
export interface WarningProgress {
  type: 'warning';
  /**
   * 'gpu-lost': the GPU lane's device failed; its unit was redone on wasm (src/pipeline/gpu-lane.ts).
   * 'replaced': input tensors named as the output names a quantized tensor's sections (the scales
   * of an NVFP4 weight quantized again) were left out (one event for the run).
   */
  kind: 'gpu-lost' | 'replaced';
  message: string;
  tensor?: string;
}

export type ProgressEvent = TensorProgress | LayerProgress | WarningProgress;

/** Every event is kept (one per tensor and layer), so each iterator sees the run from its start. */
export class ProgressLog implements AsyncIterable<ProgressEvent> {
  private readonly events: ProgressEvent[] = [];
  private wakers: (() => void)[] = [];
  private end: { error?: unknown } | undefined;

  push(e: ProgressEvent): void {
    this.events.push(e);
    this.wake();
  }

  finish(error?: unknown): void {
    this.end = error === undefined ? {} : { error };
    this.wake();
  }

  private wake(): void {
    const w = this.wakers;
    this.wakers = [];
    for (const f of w) f();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<ProgressEvent> {
    let i = 0;
    for (;;) {
      while (i < this.events.length) yield this.events[i++];
      if (this.end) {
        if ('error' in this.end) throw this.end.error;
        return;
      }
      await new Promise<void>((r) => this.wakers.push(r));
    }
  }
}
