// The package's Node-only entry, `webquant/node`: files as byte sources, the atomic file sink,
// the resume store in a directory and the worker_threads spawner. Apart from the main entry so
// that browsers, bundlers and Workers never see node:* imports.
export { fromPath, type FileSource } from './io/node.js';
export { fileSink, splitFileSink, type FileSinkOptions } from './pipeline/sink-node.js';
export { dirStore } from './pipeline/cache-node.js';
export { nodeSpawner, liveWorkerThreads } from './pipeline/spawn-node.js';
