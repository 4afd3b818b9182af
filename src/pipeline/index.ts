// The streaming pipeline, for every runtime. Node-only pieces (fileSink, dirStore,
// nodeSpawner, liveWorkerThreads) are exported from ./node.js; browser stores from ./cache-browser.js.
export { quantizeCheckpoint, planOutput, DEFAULT_MAX_IN_FLIGHT, type QuantizeCheckpointOptions, type PipelineRun, type PipelineResult, type TensorReport, type PlannedTensor as PipelineTensor, type PlanInput, type RowReader } from './pipeline.js';
export type { ProgressEvent, TensorProgress, LayerProgress, WarningProgress } from './progress.js';
export { createPool, WorkerPool, type PoolOptions, type PoolTask, type Spawner, type WorkerHandle } from './pool.js';
export type { WorkerApi, WorkerInit, WorkerResult, WorkerQuantizeOptions } from './worker.js';
export { rowReader } from './rows.js';
export { readableStreamSink, blobSink, opfsSink, splitSink, type Sink } from './sink.js';
export { safetensorsContainer, ggufContainer, type Container, type ContainerPlan, type ContainerEntry, type OutputTensor, type GgufContainerOptions, type GgufSplit, type OrderKey } from './container.js';
export { runKey, type ResumeStore, type CachedUnit, type RunIdentity } from './cache.js';
export { browserStore, opfsStore, indexedDbStore } from './cache-browser.js';
