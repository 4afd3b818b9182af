// What the page does with a checkpoint, without the DOM: open it (dropped files or a URL read with
// Range requests), make the plan and container as `webquant quantize` would (src/pipeline/prepare.ts:
// the CLI writes the same bytes for the same input), and run the pipeline on a pool of Web Workers.
import {
  browserStore, createPool, fromBlob, openCheckpoint, quantizeCheckpoint, readConfig, ErrorCodes, WebquantError,
  type PipelineResult, type ProgressEvent, type Sink, type WasmBuild,
} from '../../src/index.js';
import { openUrlInput, prepareOutput, type InputBundle, type PreparedOutput } from '../../src/pipeline/prepare.js';
import { openSafetensorsIndex } from '../../src/io/safetensors.js';
import { isLaterGgufSplit } from '../../src/io/gguf.js';
import { safetensorsOptions } from '../../src/io/config.js';
import { WASM } from './wasm.js';
import { BESIDE_FILE_NAMES, type TokenizerFiles } from '../../src/convert/tokenizer-files.js';

export { prepareOutput as prepare, type ContainerKind } from '../../src/pipeline/prepare.js';

export type InputSpec = { url: string } | { files: File[] };

/** The URL field's text as an absolute http(s) URL (a path is taken relative to the page). */
export function checkUrl(text: string): string {
  let url: URL | undefined;
  try {
    url = /\s/.test(text) ? undefined : new URL(text, location.href);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) {
    throw new WebquantError(ErrorCodes.BAD_INPUT, `[demo] the URL field holds "${text}", which is not an http(s) URL of a checkpoint (such as https://huggingface.co/<repo>/resolve/main/model.safetensors)`, {
      option: 'url', value: text, expected: 'an http: or https: URL',
    });
  }
  return url.toString();
}

/** The input's checkpoint and what lies beside it; `signal` aborts the URL requests on Cancel. */
export async function openInput(spec: InputSpec, signal?: AbortSignal): Promise<InputBundle> {
  if ('url' in spec) return openUrlInput(checkUrl(spec.url), { signal });
  const files = spec.files;
  // A sharded checkpoint: its model.safetensors.index.json and the shards it names, dropped together.
  const index = files.find((f) => /\.safetensors\.index\.json$/i.test(f.name));
  // A split GGUF's files count as one checkpoint, its first file.
  const models = files.filter((f) => /\.(safetensors|gguf)$/i.test(f.name) && !isLaterGgufSplit(f.name));
  if (!models.length && files.some((f) => isLaterGgufSplit(f.name))) {
    throw new WebquantError(ErrorCodes.BAD_INPUT, `[demo] the chosen files are splits of a GGUF without its first file (-00001-of-...): choose all of them`, {
      value: files.map((f) => f.name), expected: 'every file of the split GGUF',
    });
  }
  // Without an index, two checkpoints are two inputs: quantizing one of them silently is a guess.
  if (!index && models.length > 1) {
    throw new WebquantError(ErrorCodes.BAD_INPUT, `[demo] ${models.length} checkpoints were chosen together (${models.map((f) => f.name).join(', ')}): choose one, or a sharded checkpoint's model.safetensors.index.json with its shards`, {
      value: models.map((f) => f.name), expected: ['one *.safetensors or *.gguf', 'model.safetensors.index.json with its shards'],
    });
  }
  const model = index ?? models[0];
  if (!model) {
    throw new WebquantError(ErrorCodes.BAD_INPUT, `[demo] no .safetensors, .gguf or model.safetensors.index.json among the chosen files (${files.map((f) => f.name).join(', ')})`, {
      value: files.map((f) => f.name), expected: ['*.safetensors', '*.gguf', 'model.safetensors.index.json'],
    });
  }
  const cfg = files.find((f) => f.name === 'config.json');
  const config = cfg ? await readConfig(fromBlob(cfg)) : undefined;
  // config.json's FP8 block size (quantization_config) is needed to read FP8 weights.
  const opts = safetensorsOptions(config);
  const byName = new Map(files.map((f) => [f.name, f]));
  const shard = (name: string) => {
    const f = byName.get(name);
    if (!f) {
      throw new WebquantError(ErrorCodes.BAD_INPUT, `[demo] ${model.name} names the shard "${name}", which is not among the chosen files: choose every file of the checkpoint together`, {
        file: name, value: [...byName.keys()], expected: name,
      });
    }
    return fromBlob(f);
  };
  // A dropped file has no folder (unless a folder was chosen): its stem (less a dtype suffix) names the model.
  const folder = (model as File & { webkitRelativePath?: string }).webkitRelativePath?.split('/').slice(-2, -1)[0];
  return {
    // A split GGUF: choose all its files; the first is opened, the others found by name.
    checkpoint: index ? await openSafetensorsIndex(fromBlob(index), shard, opts) : await openCheckpoint(fromBlob(model), { ...opts, splits: shard }),
    name: folder || model.name.replace(/\.safetensors\.index\.json$/i, '').replace(/\.(safetensors|gguf)$/i, '').replace(/\.(bf16|f16|f32)$/i, ''),
    config,
    tokenizer: Object.fromEntries(files.filter((f) => (BESIDE_FILE_NAMES as readonly string[]).includes(f.name)).map((f) => [f.name, fromBlob(f)])) as TokenizerFiles,
  };
}

export interface RunOptions {
  sink: Sink;
  workers?: number;
  /** Input plus output bytes between reading and writing; larger tensors go in row chunks. */
  maxInFlightBytes?: number;
  /** Keep finished units in the browser's storage so that a cancelled run resumes. */
  resumable?: boolean;
  signal?: AbortSignal;
  onProgress?: (e: ProgressEvent) => void;
  /** Told which kernel build the workers run, before the first tensor. */
  onBuild?: (build: KernelBuild) => void;
}

/** What a pool worker quantized with: a wasm build, or WebGPU where the worker prefers it. */
export type KernelBuild = WasmBuild | 'webgpu';

/** Runs the pipeline on its own pool of Web Workers; the pool is gone when this returns. */
export async function runJob(job: PreparedOutput, o: RunOptions): Promise<PipelineResult & { build: KernelBuild }> {
  const pool = await createPool({ size: o.workers, wasm: WASM });
  try {
    // One row through a worker says which build the workers picked (and warms one up).
    const probe = await pool.quantize({ values: new Float32Array(32) }, { format: 'q8_0', rowLength: 32, dtype: 'f32', name: 'probe' });
    o.onBuild?.(probe.backend);
    const result = await quantizeCheckpoint({
      input: job.input, plan: job.plan, sink: o.sink, container: job.container, pool, signal: o.signal, onProgress: o.onProgress,
      maxInFlightBytes: o.maxInFlightBytes, resume: o.resumable ? browserStore() : undefined, importance: job.importance,
    });
    return { ...result, build: probe.backend };
  } finally {
    await pool.terminate();
  }
}
