// npx tsx bench/profile-kernel.ts <format> [--rows N] [--reps N] [--dequant] — where one kernel's
// time goes: V8's sampling profiler over repeated calls of the SIMD build's quantizer (or
// dequantizer) on resident weight-like rows, self time per wasm function, named from
// build/webquant-simd.wat (the wasm carries no name section). One warm-up call first, so one-time
// table builds (IQ grids, neighbour lists) show only in proportion to --reps.
import { readFileSync } from 'node:fs';
import { Session, type Profiler } from 'node:inspector/promises';
import { formats } from '../src/formats/registry.js';
import { loadKernels } from '../src/kernels/loader.js';
import { IMPORTANCE, kernelOnlyArgs, Resident, ROW } from './resident.js';
import { arg, table, weightData } from './util.js';

const name = process.argv[2];
const f = formats.get(name ?? '');
if (!f) throw new Error(`usage: profile-kernel.ts <format> [--rows N] [--reps N] [--dequant]; unknown format ${name}`);
const rows = Number(arg('rows', '16'));
const reps = Number(arg('reps', '20'));
const dequant = process.argv.includes('--dequant');
const data = weightData(rows * ROW);
const k = await loadKernels('wasm-simd', 'bench');
const extra = await kernelOnlyArgs(f, k, data);
if (!extra) throw new Error(`${name}: needs host steps; the kernels alone cannot run it`);
const r = new Resident(k, f, rows, data, extra, f.requiresImportance ? IMPORTANCE : undefined);
const run = () => (dequant ? r.dequantize(rows) : r.quantize(rows));
r.quantize(rows);
run();

const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: 100 });
await session.post('Profiler.start');
const t0 = performance.now();
for (let i = 0; i < reps; i++) run();
const ms = (performance.now() - t0) / reps;
const { profile } = (await session.post('Profiler.stop')) as { profile: Profiler.Profile };
session.disconnect();

const names = [...readFileSync(new URL('../build/webquant-simd.wat', import.meta.url), 'utf8').matchAll(/^ \(func \$(\S+)/gm)].map((m) => m[1]);
const byId = new Map(profile.nodes.map((n) => [n.id, n.callFrame.functionName]));
const self = new Map<string, number>();
let wasm = 0;
for (const id of profile.samples ?? []) {
  const fn = byId.get(id) ?? '';
  const m = /wasm-function\[(\d+)\]/.exec(fn);
  if (!m) continue;
  const label = names[Number(m[1])] ?? fn;
  self.set(label, (self.get(label) ?? 0) + 1);
  wasm++;
}
console.log(`${name} ${dequant ? 'dequantize' : 'quantize'}: ${ms.toFixed(2)} ms per call of ${rows} x ${ROW} values (${reps} calls, SIMD build)\n`);
const top = [...self].sort((a, b) => b[1] - a[1]).filter(([, n]) => n / wasm >= 0.01);
console.log(table(['wasm function (self time)', 'share of wasm samples'], top.map(([fn, n]) => [fn, `${((100 * n) / wasm).toFixed(1)}%`])));
