// The demo page on 127.0.0.1, served by Vite from the sources (as `npm run dev:web` does) or
// bundled by `vite build` and served as static files (as `npm run build:web` ships it), plus the
// files the browser test reads by URL: ../shared/models with Range support, and bad inputs.
import { open, stat } from 'node:fs/promises';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join, normalize } from 'node:path';
import { build, createServer, preview, type Plugin } from 'vite';
import { ROOT } from '../pipeline/helpers.js';

export type Route = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

/** Serves the bytes of `body()` under `path`, honouring a single `Range: bytes=a-b` like a CDN. */
export function bytesRoute(path: string, body: () => Promise<Uint8Array> | Uint8Array): Route {
  return async (req, res) => {
    if (req.url?.split('?')[0] !== path) return false;
    sendRange(req, res, await body());
    return true;
  };
}

/** A request as a route saw it; `referer` tells a Web Worker's fetch (the worker script) from the page's. */
export interface RequestRecord { url: string; range?: string; referer?: string }

/**
 * Files under `dir` at `prefix` (no listing, no escaping the directory), each answer `delayMs`
 * late; every request is appended to `log` when given.
 */
export function dirRoute(prefix: string, dir: string, delayMs = 0, log?: RequestRecord[]): Route {
  return async (req, res) => {
    const url = req.url?.split('?')[0] ?? '';
    if (!url.startsWith(prefix)) return false;
    log?.push({ url, range: req.headers.range, referer: req.headers.referer });
    if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
    const file = normalize(join(dir, decodeURIComponent(url.slice(prefix.length))));
    if (!file.startsWith(dir) || !(await stat(file).then((s) => s.isFile(), () => false))) {
      res.statusCode = 404;
      res.end();
      return true;
    }
    const fh = await open(file);
    try {
      sendRange(req, res, new Uint8Array(await fh.readFile()));
    } finally {
      await fh.close();
    }
    return true;
  };
}

function sendRange(req: IncomingMessage, res: ServerResponse, body: Uint8Array): void {
  res.setHeader('Accept-Ranges', 'bytes');
  res.setHeader('Content-Type', 'application/octet-stream');
  res.setHeader('Cache-Control', 'no-store');
  const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
  let start = 0, end = body.byteLength - 1;
  if (m) {
    start = Number(m[1]);
    end = m[2] === '' ? end : Math.min(Number(m[2]), end);
    if (start > end) {
      res.statusCode = 416;
      res.setHeader('Content-Range', `bytes */${body.byteLength}`);
      res.end();
      return;
    }
    res.statusCode = 206;
    res.setHeader('Content-Range', `bytes ${start}-${end}/${body.byteLength}`);
  }
  res.setHeader('Content-Length', String(end - start + 1));
  res.end(req.method === 'HEAD' ? undefined : body.subarray(start, end + 1));
}

function routes(list: Route[]): Plugin {
  const use = (server: { middlewares: { use(f: (req: IncomingMessage, res: ServerResponse, next: (e?: unknown) => void) => void): void } }) => {
    server.middlewares.use((req, res, next) => {
      (async () => {
        for (const r of list) if (await r(req, res)) return;
        next();
      })().catch(next);
    });
  };
  return { name: 'webquant-test-routes', configureServer: use, configurePreviewServer: use };
}

export interface DemoServer {
  origin: string;
  close(): Promise<void>;
}

function originOf(http: { address(): ReturnType<import('node:net').Server['address']> } | null | undefined): string {
  const addr = http?.address();
  if (!addr || typeof addr === 'string') throw new Error('the Vite server has no TCP address');
  return `http://127.0.0.1:${addr.port}`;
}

/** `mode` 'dev': Vite's dev server on the sources; 'build': `vite build` into `outDir`, served statically. */
export async function startDemoServer(mode: 'dev' | 'build', extra: Route[], outDir: string): Promise<DemoServer> {
  const common = {
    configFile: join(ROOT, 'vite.config.ts'),
    root: join(ROOT, 'web'),
    logLevel: 'warn' as const,
    clearScreen: false,
    // Its own cache: a test must not race a developer's `npm run dev:web` over node_modules/.vite.
    cacheDir: join(ROOT, '.cache', 'vite-browser-test'),
  };
  if (mode === 'dev') {
    const server = await createServer({
      ...common,
      server: { host: '127.0.0.1', port: 0, strictPort: false, hmr: false, watch: null },
      plugins: [routes(extra)],
    });
    await server.listen();
    return { origin: originOf(server.httpServer), close: () => server.close() };
  }
  await build({ ...common, build: { outDir, emptyOutDir: true } });
  const server = await preview({
    ...common,
    build: { outDir },
    preview: { host: '127.0.0.1', port: 0, strictPort: false },
    plugins: [routes(extra)],
  });
  return { origin: originOf(server.httpServer), close: () => server.close() };
}

/** Just the routes, on a plain Node HTTP server (for runtimes that fetch from it, e.g. workerd). */
export async function startRouteServer(list: Route[]): Promise<DemoServer> {
  const server = createHttpServer((req, res) => {
    (async () => {
      for (const r of list) if (await r(req, res)) return;
      res.statusCode = 404;
      res.end();
    })().catch(() => { res.statusCode = 500; res.end(); });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: originOf(server), close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
