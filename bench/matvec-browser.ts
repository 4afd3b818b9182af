// npm run bench:matvec-browser — webquant's serving matvec against llama.cpp's WebAssembly build
// (@wllama/wllama, which needs a browser: Web Workers, JSPI) in the same headless Chromium session.
//
// llama.cpp has no single-matmul entry point in wllama, so it runs synthetic Llama GGUF models
// (bench/synthetic-llama.ts) whose layers are made of matrices of the target shape and type, twice:
// with L1 and L2 layers. Its per-token decode time comes from its own streamed timings (median of
// the per-token deltas of one completion); (t(L2) - t(L1)) / (L2 - L1) is then the time of one
// layer, with everything that is paid once per token cancelled: embedding lookup, output norm,
// the 259 x hidden output matmul, sampling, the server loop, the worker's messaging. What remains
// besides the layer's 7 matrix-vector products is O(hidden) work per layer (2 RMS norms, RoPE, a
// SiLU, 2 residual adds, the f32 -> int8 activation quantization that is part of llama.cpp's
// quantized matmul) and attention (flash attention off, so over the 2 + tokens KV cells in use
// only: K and V reads of 2 * 4096 * positions f16 values, about 0.2 MB at 10 positions against
// 38-190 MB of weights):
// all counted as llama.cpp's matvec time, so its GB/s here is a slight underestimate (the table's
// "layer" columns compare with webquant computing the very same 7 matrices, the fairest figure).
//
// webquant runs on the same GGUF bytes (the small model, opened with openQuantized(fromBlob(...)))
// in the page's main thread, SIMD build: "resident" = the fused kernel on weights kept in wasm
// memory (bench/matvec-resident.ts; what llama.cpp does too), with f32 activations and with int8
// activations ('q8', llama.cpp's own scheme: x quantized per 32 or 256 values, integer dots);
// "api" = LoadedTensor.matvec of openQuantized, which copies the weights into wasm memory in 4 MiB
// chunks on every call.
//
// Rounds alternate one completion of each model and every webquant matvec; figures are medians
// over rounds, ratios medians of per-round ratios. GB/s = bytes of quantized weights streamed per
// second, GFLOP/s = 2 * weights per second.
// Options: --formats q8_0,q4_0 --shapes 4096x4096,4096x11008 --layers 1,4 --tokens 8 --rounds 5,10
//          --budget ms (per case, after the minimum rounds) --reps 5 --ctx 128 (llama.cpp n_ctx) --json path
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import { quantize } from '../src/quantize.js';
import { syntheticLlama, type SyntheticModel } from './synthetic-llama.js';
import type { CaseRequest, CaseResult } from './matvec-browser-page.js';
import { arg, median, table, weightData, writeJson } from './util.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CHROMIUM = '/usr/bin/chromium';
const WLLAMA = join(ROOT, 'node_modules/@wllama/wllama/esm');
const formats = arg('formats', 'q8_0,q4_0,q4_k,q6_k,iq4_nl').split(',').filter(Boolean);
const shapes = arg('shapes', '4096x4096,4096x11008').split(',').map((s) => s.split('x').map(Number) as [number, number]);
const layers = arg('layers', '1,4').split(',').map(Number) as [number, number];
const tokens = Number(arg('tokens', '8'));
const [minRounds, maxRounds] = arg('rounds', '5,10').split(',').map(Number);
const budget = Number(arg('budget', '15000'));
const reps = Number(arg('reps', '5'));
const jsonPath = arg('json', 'bench/results/matvec-browser.json');
if (!(layers.length === 2 && layers[0] >= 1 && layers[1] > layers[0])) throw new Error(`--layers must be two counts, the second larger: ${layers}`);
if (!existsSync(CHROMIUM)) {
  console.error(`${CHROMIUM} is missing: this benchmark runs llama.cpp-wasm (@wllama/wllama) in Debian's chromium (apt-get install -y chromium)`);
  process.exit(1);
}

// ---- the page and what it fetches ---------------------------------------------------------------
const bundle = await build({
  entryPoints: [join(ROOT, 'bench/matvec-browser-page.ts')], bundle: true, format: 'esm', platform: 'browser', target: 'es2022',
  write: false, external: ['/wllama/*'], logLevel: 'error',
});
const PAGE_JS = bundle.outputFiles[0].contents;
const PAGE = '<!doctype html><title>webquant vs llama.cpp-wasm</title><script type="module" src="/page.js"></script>';
const models = new Map<string, SyntheticModel>();

async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = decodeURIComponent(req.url?.split('?')[0] ?? '/');
  const type = (t: string) => res.setHeader('Content-Type', t);
  if (url === '/') { type('text/html'); res.end(PAGE); return; }
  if (url === '/page.js') { type('text/javascript'); res.end(PAGE_JS); return; }
  const m = url.startsWith('/m/') ? models.get(url.slice(3)) : undefined;
  if (m) {
    // written on the fly: only the quantized matrix it repeats is held in memory
    type('application/octet-stream');
    res.setHeader('Content-Length', String(m.totalBytes));
    for await (const c of m.stream()) if (!res.write(c)) await once(res, 'drain');
    res.end();
    return;
  }
  const [dir, rel] = url.startsWith('/wllama/') ? [WLLAMA, url.slice(8)] : url.startsWith('/build/') ? [join(ROOT, 'build'), url.slice(7)] : ['', ''];
  const file = normalize(join(dir, rel));
  if (!dir || !file.startsWith(dir) || !existsSync(file)) { res.statusCode = 404; res.end(); return; }
  type(file.endsWith('.js') ? 'text/javascript' : file.endsWith('.wasm') ? 'application/wasm' : 'application/octet-stream');
  res.end(await readFile(file));
}

const server = createServer((req, res) => { serve(req, res).catch((e) => { console.error(e); res.destroy(); }); }).listen(0, '127.0.0.1');
await once(server, 'listening');
const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run'] });
const page = await browser.newPage();
page.on('pageerror', (e) => console.error('page:', e.message));
page.on('console', (m) => { if (m.type() === 'error') console.error('page:', m.text()); });
await page.goto(`${base}/?ctx=${arg("ctx", "128")}`);
await page.waitForFunction(() => (globalThis as { ready?: boolean }).ready === true);

// ---- cases ----------------------------------------------------------------------------------------
interface Row { format: string; shape: string; model: SyntheticModel; r: CaseResult }
const rows: Row[] = [];
const t0 = performance.now();
try {
  for (const [rowsN, rowLen] of shapes) {
    const w = weightData(rowsN * rowLen, 12345 + rowsN + rowLen);
    for (const format of formats) {
      const qt = await quantize(w, { format, rowLength: rowLen });
      const small = syntheticLlama(qt, layers[0]);
      const large = syntheticLlama(qt, layers[1]);
      const key = `${format}-${rowsN}x${rowLen}`;
      models.set(`${key}-small.gguf`, small);
      models.set(`${key}-large.gguf`, large);
      const req: CaseRequest = {
        models: [`/m/${key}-small.gguf`, `/m/${key}-large.gguf`], tensors: small.layerMatrices.map((m) => m.name),
        tokens, minRounds, maxRounds, budgetMs: budget, reps,
      };
      const r = await page.evaluate((q) => (globalThis as unknown as { runCase: (q: CaseRequest) => Promise<CaseResult> }).runCase(q), req);
      models.clear();
      rows.push({ format, shape: `${rowsN}x${rowLen}`, model: small, r });
      console.error(`${key}: ${r.llamaTokenMs[0].length} rounds, llama.cpp ${median(r.llamaTokenMs[0]).toFixed(1)} / ${median(r.llamaTokenMs[1]).toFixed(1)} ms per token `
        + `(${layers[0]} / ${layers[1]} layers), setup ${(r.loadMs / 1e3).toFixed(1)} s, ${((performance.now() - t0) / 1e3).toFixed(0)} s so far`);
    }
  }
} finally {
  await browser.close();
  server.close();
}

// ---- figures --------------------------------------------------------------------------------------
const perRound = (r: CaseResult, f: (i: number) => number) => r.llamaTokenMs[0].map((_, i) => f(i));
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const fmtRatio = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '-');
const shapeRows: (string | number)[][] = [];
const layerRows: (string | number)[][] = [];
const results = rows.map(({ format, shape, model, r }) => {
  const dL = layers[1] - layers[0];
  const llamaLayer = perRound(r, (i) => (r.llamaTokenMs[1][i] - r.llamaTokenMs[0][i]) / dL);
  const layerBytes = sum(r.weightBytes);
  const targetBytes = r.weightBytes[0];
  const layerF32 = perRound(r, (i) => sum(r.residentF32Ms.map((t) => t[i])));
  const layerQ8 = perRound(r, (i) => sum(r.residentQ8Ms.map((t) => t[i])));
  const gbs = (bytes: number, ms: number) => bytes / ms / 1e6;
  const llamaGBs = median(llamaLayer.map((t) => gbs(layerBytes, t)));
  const tgt = { f32: median(r.residentF32Ms[0]), q8: median(r.residentQ8Ms[0]), apiF32: median(r.apiF32Ms), apiQ8: median(r.apiQ8Ms) };
  // throughput ratios per round: webquant GB/s on the target shape over llama.cpp's per-layer GB/s
  const shapeRatio = (ms: number[]) => median(llamaLayer.map((t, i) => gbs(targetBytes, ms[i]) / gbs(layerBytes, t)));
  const layerRatio = (ms: number[]) => median(llamaLayer.map((t, i) => t / ms[i]));
  const ratios = { f32: shapeRatio(r.residentF32Ms[0]), q8: shapeRatio(r.residentQ8Ms[0]), apiF32: shapeRatio(r.apiF32Ms), apiQ8: shapeRatio(r.apiQ8Ms) };
  const layer = { llamaMs: median(llamaLayer), f32Ms: median(layerF32), q8Ms: median(layerQ8), ratioF32: layerRatio(layerF32), ratioQ8: layerRatio(layerQ8) };
  const targetWeights = model.layerMatrices[0].shape[0] * model.layerMatrices[0].shape[1];
  const gflops = (weights: number, ms: number) => (2 * weights) / ms / 1e6;
  shapeRows.push([format, shape, gbs(targetBytes, tgt.f32), gbs(targetBytes, tgt.q8), gflops(targetWeights, tgt.q8),
    `${gbs(targetBytes, tgt.apiF32).toFixed(2)} / ${gbs(targetBytes, tgt.apiQ8).toFixed(2)}`,
    llamaGBs, gflops(model.layerWeights, layer.llamaMs), `${fmtRatio(ratios.f32)} / ${fmtRatio(ratios.q8)}`, `${fmtRatio(ratios.apiF32)} / ${fmtRatio(ratios.apiQ8)}`]);
  layerRows.push([format, shape, (layerBytes / 2 ** 20).toFixed(1), `${((100 * model.targetWeights) / model.layerWeights).toFixed(0)} %`,
    layer.llamaMs, `${median(r.llamaTokenMs[0]).toFixed(1)} / ${median(r.llamaTokenMs[1]).toFixed(1)}`, layer.f32Ms, layer.q8Ms,
    `${fmtRatio(layer.ratioF32)} / ${fmtRatio(layer.ratioQ8)}`, String(r.llamaTokenMs[0].length)]);
  return {
    format, shape, rounds: r.llamaTokenMs[0].length, layers, tokens, weightBytesPerTensor: r.weightBytes, layerMatrices: model.layerMatrices,
    layerWeights: model.layerWeights, targetShareOfLayer: model.targetWeights / model.layerWeights,
    llamaTokenMs: r.llamaTokenMs, llamaPromptMs: r.llamaPromptMs, llamaLayerMs: llamaLayer, llamaLayerGBs: llamaGBs,
    webquantTargetMs: tgt, webquantTargetGBs: { f32: gbs(targetBytes, tgt.f32), q8: gbs(targetBytes, tgt.q8), apiF32: gbs(targetBytes, tgt.apiF32), apiQ8: gbs(targetBytes, tgt.apiQ8) },
    webquantOverLlamaGBs: ratios, layer, apiVsResidentMaxRel: r.apiVsResident, raw: r,
  };
});

const env = rows[0]?.r;
console.log(`\nwebquant serving matvec vs llama.cpp-wasm (@wllama/wllama ${JSON.parse(readFileSync(join(ROOT, 'node_modules/@wllama/wllama/package.json'), 'utf8')).version}), one thread each, in ${env?.userAgent.match(/Chrome\/[\d.]+/)?.[0] ?? 'Chromium'} (headless), `
  + `crossOriginIsolated ${env?.crossOriginIsolated}; ${availableParallelism()} CPUs, load average ${loadavg().map((l) => l.toFixed(2)).join(' ')} at the end.`);
console.log('What is compared: webquant = ONE matvec y = W x on the shape (weights resident in wasm memory; x in f32, or int8 per 32 "q8" as llama.cpp');
console.log('quantizes x itself for these types: Q8_0 per 32, Q8_K per 256); api = openQuantized\'s LoadedTensor.matvec (copies the weights in per call);');
console.log(`llama.cpp = a FULL decode step of synthetic Llama models made of that shape: per-layer time = (t/token at ${layers[1]} layers - t/token at ${layers[0]}) / ${layers[1] - layers[0]},`);
console.log('which cancels per-token fixed costs (embedding, output matmul, sampling, server loop) but keeps the O(hidden) per-layer ops');
console.log(`(norms, RoPE, SiLU, adds, attention without flash attention over <= ${2 + tokens} positions) inside llama.cpp's figure; its GB/s = layer weight bytes / layer time.`);
console.log('Ratios (> 1: webquant faster) = median over alternating rounds of webquant GB/s / llama.cpp GB/s. GFLOP/s = 2 * weights / s.\n');
console.log(table(['format', 'shape', 'webquant GB/s (f32 x)', 'webquant GB/s (q8 x)', 'GFLOP/s (q8 x)', 'api GB/s f32 / q8', 'llama.cpp-wasm GB/s', 'llama.cpp GFLOP/s', 'ratio f32 / q8', 'ratio api f32 / q8'], shapeRows));
console.log('\nSame work on both sides: the 7 matrices of one layer (q, k, v, o, gate, up, down of bench/synthetic-llama.ts), llama.cpp\'s per-layer');
console.log('time against the sum of webquant\'s resident matvecs on the same tensors (ratio = llama.cpp time / webquant time, > 1: webquant faster).\n');
console.log(table(['format', 'shape', 'layer MiB', 'target share', 'llama.cpp ms/layer', `llama.cpp ms/token (${layers[0]} / ${layers[1]} layers)`, 'webquant ms f32 x', 'webquant ms q8 x', 'ratio f32 / q8', 'rounds'], layerRows));
const differ = results.filter((r) => r.apiVsResidentMaxRel.some((x) => x !== 0));
console.log(differ.length
  ? `\napi and resident y differ (max |dy| / max |y|, f32 / q8): ${differ.map((r) => `${r.format} ${r.shape} ${r.apiVsResidentMaxRel.map((x) => x.toExponential(1)).join(' / ')}`).join('; ')}`
  : '\napi and resident kernels gave bit-identical y in every case (f32 and q8 activations).');
writeJson(jsonPath, { date: new Date().toISOString(), node: process.version, cpus: availableParallelism(), loadavg: loadavg(), userAgent: env?.userAgent, crossOriginIsolated: env?.crossOriginIsolated, options: { formats, shapes, layers, tokens, minRounds, maxRounds, budget, reps }, results });
console.log(`written ${jsonPath} (${((performance.now() - t0) / 1e3).toFixed(0)} s)`);
