// The demo page (web/). `npm run dev:web` serves it from the sources; `npm run build:web` bundles
// it into dist-web/ with the wasm kernels as hashed assets and the pool worker as its own chunk.
import { defineConfig, type Plugin } from 'vite';

/**
 * src/kernels/loader.ts's default wasm URL has a variable part, which Vite turns into a glob over
 * build/: everything there (the .wat text dump, a debug build) would ship with the page. The page
 * hands both kernel builds to configureWasm (web/src/job.ts), so the rest is dropped.
 */
function onlyKernelBuilds(): Plugin {
  return {
    name: 'webquant-only-kernel-builds',
    apply: 'build',
    generateBundle(_options, bundle) {
      for (const [name, out] of Object.entries(bundle)) {
        if (out.type === 'asset' && /\/webquant-(?!simd-|scalar-)[^/]*$|\.wat$/.test(name)) delete bundle[name];
      }
    },
  };
}

export default defineConfig({
  root: 'web',
  // Relative asset URLs: the built page works from any sub-path of a static host.
  base: './',
  plugins: [onlyKernelBuilds()],
  build: {
    outDir: '../dist-web',
    emptyOutDir: true,
    target: 'es2022',
  },
  // The pool worker imports code shared with the page (and loads the kernels with a dynamic
  // import), which needs module workers; Vite's default IIFE worker bundles cannot split code.
  worker: { format: 'es', plugins: () => [onlyKernelBuilds()] },
  // Pre-bundled before the first page load, so that finding it later (e.g. from the worker)
  // never makes the dev server reload the page mid-run.
  optimizeDeps: { include: ['comlink'] },
  server: { host: '127.0.0.1' },
  preview: { host: '127.0.0.1' },
});
