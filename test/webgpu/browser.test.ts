// The WebGPU kernels in headless Chromium (navigator.gpu on SwiftShader, flags from
// ../shared/README.md), against the wasm kernels in the same page. Chromium is required: without
// /usr/bin/chromium this test fails.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { chromium, type Browser } from 'playwright-core';
import { startRouteServer, type DemoServer, type Route } from '../browser/server.js';
import { ROOT } from '../pipeline/helpers.js';
import type { PageReport } from './browser-entry.js';

const CHROMIUM = '/usr/bin/chromium';
const FLAGS = [
  '--no-sandbox', '--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-vulkan=swiftshader', '--use-webgpu-adapter=swiftshader',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run',
];

let browser: Browser | undefined;
let server: DemoServer | undefined;

const file = (path: string, type: string, body: () => Uint8Array | string): Route => async (req, res) => {
  if (req.url?.split('?')[0] !== path) return false;
  res.setHeader('Content-Type', type);
  res.end(body());
  return true;
};

beforeAll(async () => {
  const bundle = await build({
    entryPoints: [join(ROOT, 'test/webgpu/browser-entry.ts')], bundle: true, format: 'esm', write: false, platform: 'browser', target: 'es2022',
  });
  const js = bundle.outputFiles[0].text;
  server = await startRouteServer([
    file('/', 'text/html', () => '<!doctype html><meta charset="utf-8"><script type="module" src="/bundle.js"></script>'),
    file('/bundle.js', 'text/javascript', () => js),
    file('/simd.wasm', 'application/wasm', () => readFileSync(join(ROOT, 'build/webquant-simd.wasm'))),
    file('/scalar.wasm', 'application/wasm', () => readFileSync(join(ROOT, 'build/webquant-scalar.wasm'))),
  ]);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

it('WebGPU kernels in Chromium give the wasm bytes', async () => {
  const page = await browser!.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${server!.origin}/`);
  await page.waitForFunction(() => typeof (globalThis as { webgpuParity?: unknown }).webgpuParity === 'function');
  const report = (await page.evaluate(() => (globalThis as unknown as { webgpuParity: () => Promise<unknown> }).webgpuParity())) as PageReport;
  expect(errors).toEqual([]);
  expect(report.cpuEmulated).toBe(true);
  expect(report.results.length).toBe(28);
  for (const r of report.results) {
    expect(r.backend, r.name).toBe('webgpu');
    expect([r.name, r.quantDiff, r.dequantDiff]).toEqual([r.name, 0, 0]);
  }
}, 120_000);
