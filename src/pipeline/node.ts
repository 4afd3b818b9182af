// Node-only parts of the pipeline.
export { fileSink } from './sink-node.js';
export { dirStore } from './cache-node.js';
export { nodeSpawner, liveWorkerThreads } from './spawn-node.js';
