// The pipeline's GPU lane: a WebGPU device quantizing units beside the wasm workers, both taking
// units from one queue (whichever is free takes the next unit it can run). GPU work is
// asynchronous, so the lane is driven from the thread that runs the pipeline and costs no worker.
//
// Bytes: a unit goes to the lane only when its format and options have a WebGPU quantizer that
// gives the wasm bytes (every one does; src/webgpu/kernels.ts marks any that would not as
// `inexact`), so the output is the wasm-only run's byte for byte, whichever lane ran each unit.
// Metrics of a lane unit come from the GPU's (bit-exact) dequantization with f64 sums on the host:
// equal to the workers' up to the order of the f64 additions.
// Device loss (or out-of-memory, or a failed readback): the lane drops out for the rest of the
// run with a 'warning' progress event, and its unit goes back to the head of the queue, to be
// redone by the workers from its first row.
import { planTensor, type QuantizedTensor, type QuantizeOptions, type TensorBackend } from '../quantize.js';
import { GPU_FORMATS, gpuUnsupported, quantKernel } from '../webgpu/kernels.js';
import { GpuFailure, gpuQuantize } from '../webgpu/run.js';
import { selectLaneDevice } from '../webgpu/backend.js';
import type { GpuContext } from '../webgpu/device.js';
import { abortedError, type PoolTask, type WorkerPool } from './pool.js';
import type { ProgressEvent } from './progress.js';

/** What the pipeline hands its units to: the worker pool, or the pool with a GPU lane. */
export interface Lanes {
  quantize(task: PoolTask, opts: QuantizeOptions): Promise<QuantizedTensor>;
}

export interface GpuLaneOptions {
  /**
   * 'auto' adds the lane when quantize() would pick the GPU (an opted-in, non-emulated device:
   * src/webgpu/backend.ts), 'webgpu' always (an error without a device), a wasm build never.
   */
  backend?: TensorBackend;
  preferGpu?: boolean;
  emit(e: ProgressEvent): void;
}

/** The pool itself when there is no GPU lane to add. */
export async function withGpuLane(pool: WorkerPool, o: GpuLaneOptions): Promise<Lanes> {
  const gpu = await selectLaneDevice(o.backend, o.preferGpu);
  return gpu ? new GpuLane(pool, gpu, o.emit) : pool;
}

interface Pending {
  task: PoolTask;
  opts: QuantizeOptions;
  /** Has a byte-identical WebGPU quantizer (and the lane has not failed on it). */
  gpu: boolean;
  resolve(q: QuantizedTensor): void;
  reject(e: unknown): void;
}

class GpuLane implements Lanes {
  private readonly queue: Pending[] = [];
  /** Units handed to the pool and not settled: at most one per worker, the rest wait here. */
  private atWorkers = 0;
  private gpuBusy = false;
  private lost = false;
  private readonly watched = new Set<AbortSignal>();

  constructor(private readonly pool: WorkerPool, private readonly gpu: GpuContext, private readonly emit: (e: ProgressEvent) => void) {}

  quantize(task: PoolTask, opts: QuantizeOptions): Promise<QuantizedTensor> {
    return new Promise<QuantizedTensor>((resolve, reject) => {
      if (task.signal?.aborted) return reject(abortedError(`quantizing ${opts.name ?? 'tensor'}`, task.signal.reason));
      this.watch(task.signal);
      this.queue.push({ task, opts, gpu: this.runsOnGpu(task, opts), resolve, reject });
      this.pump();
    });
  }

  private runsOnGpu(task: PoolTask, opts: QuantizeOptions): boolean {
    // A unit the workers read or write themselves never comes here (pipeline.ts keeps I/O on this
    // thread while a lane runs); should one come, the workers take it.
    if (!task.values || task.range || task.out) return false;
    try {
      const p = planTensor(task.values, opts);
      const f = GPU_FORMATS[p.spec.name];
      const imp = !!opts.importance && p.spec.importance;
      return !!f && !gpuUnsupported(p.spec.name, p.o, 'quantize', imp) && !quantKernel(f, imp)!.inexact;
    } catch {
      return false; // invalid options or input: the workers report the error as in a wasm-only run
    }
  }

  /** One listener per signal (a run shares one across its units): queued units reject on abort. */
  private watch(signal: AbortSignal | undefined): void {
    if (!signal || this.watched.has(signal)) return;
    this.watched.add(signal);
    signal.addEventListener('abort', () => {
      for (let i = this.queue.length - 1; i >= 0; i--) {
        const p = this.queue[i];
        if (p.task.signal !== signal) continue;
        this.queue.splice(i, 1);
        p.reject(abortedError(`quantizing ${p.opts.name ?? 'tensor'}`, signal.reason));
      }
    }, { once: true });
  }

  private pump(): void {
    if (!this.gpuBusy && !this.lost) {
      const i = this.queue.findIndex((p) => p.gpu);
      if (i >= 0) void this.runGpu(this.queue.splice(i, 1)[0]);
    }
    while (this.atWorkers < this.pool.size && this.queue.length > 0) {
      const p = this.queue.shift()!;
      this.atWorkers++;
      this.pool.quantize(p.task, p.opts).then(p.resolve, p.reject).finally(() => {
        this.atWorkers--;
        this.pump();
      });
    }
  }

  private async runGpu(p: Pending): Promise<void> {
    this.gpuBusy = true;
    const name = p.opts.name ?? 'tensor';
    try {
      const values = p.task.values!;
      const qt = await gpuQuantize(this.gpu, values, p.opts, planTensor(values, p.opts), 'throw');
      if (p.task.signal?.aborted) p.reject(abortedError(`quantizing ${name}`, p.task.signal.reason));
      else p.resolve(qt);
    } catch (e) {
      if (!(e instanceof GpuFailure)) {
        p.reject(e);
      } else {
        this.lost = true;
        p.gpu = false;
        this.queue.unshift(p);
        this.emit({
          type: 'warning', kind: 'gpu-lost', tensor: name,
          message: `[pipeline] the WebGPU lane dropped out (${e.message}) while quantizing "${name}": that tensor is redone on wasm and the rest of the run uses the workers only`,
        });
      }
    } finally {
      this.gpuBusy = false;
      this.pump();
    }
  }
}
