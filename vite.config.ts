// The demo page (web/). `npm run dev:web` serves it from the sources; `npm run build:web` bundles
// it into dist-web/ with the wasm kernels as hashed assets and the pool worker as its own chunk.
import { defineConfig } from 'vite';

export default defineConfig({
  root: 'web',
  // Relative asset URLs: the built page works from any sub-path of a static host.
  base: './',
  build: {
    outDir: '../dist-web',
    emptyOutDir: true,
    target: 'es2022',
  },
  // The pool worker imports code shared with the page (and loads the kernels with a dynamic
  // import), which needs module workers; Vite's default IIFE worker bundles cannot split code.
  worker: { format: 'es' },
  // Pre-bundled before the first page load, so that finding it later (e.g. from the worker)
  // never makes the dev server reload the page mid-run.
  optimizeDeps: { include: ['comlink'] },
  server: { host: '127.0.0.1' },
  preview: { host: '127.0.0.1' },
});
