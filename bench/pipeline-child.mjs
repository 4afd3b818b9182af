// One configuration of bench/pipeline.ts in its own process (peak RSS is then this run's):
//   node bench/pipeline-child.mjs <input.safetensors> <format> <workers> <budget MiB> <workers|main> [cold|warm]
// Plain JavaScript on dist/, run by plain node: under tsx's loader every worker thread takes
// ~0.3 s longer to start, which the real CLI does not pay. Prints one JSON line (see pipeline.ts).
import { closeSync, openSync, readdirSync, readFileSync, readSync, rmSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';

const dist = (p) => new URL(`../dist/${p}`, import.meta.url).href;
const ROW = 2304; // the generated checkpoint's hidden size: the FFN matrix's row length

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const [input, format, workersArg, budget, io, poolMode = 'cold'] = process.argv.slice(2);
const workers = Number(workersArg);
const lib = await import(dist('index.js'));
const { fromPath } = await import(dist('io/node.js'));
const { fileSink } = await import(dist('pipeline/node.js'));
const { quantizeWith } = await import(dist('quantize.js'));

// The input goes into the page cache first, as right after a download: this VM evicts file
// pages unused for a minute (DAMON proactive reclaim), and a run would otherwise measure the disk,
// whose queue it also shares with its own output's writeback.
const warm0 = performance.now();
{
  const fd = openSync(input, 'r');
  const buf = new Uint8Array(4 << 20); // one small buffer: the warm-up must not show in peak RSS
  while (readSync(fd, buf, 0, buf.length, null) > 0);
  closeSync(fd);
}
const warmS = (performance.now() - warm0) / 1000;

const src = fromPath(input);
const ck = await lib.openCheckpoint(src);
const plan = lib.resolvePlan({ default: { format }, rules: [], skip: [] }, ck.tensors.map((t) => ({ name: t.name, shape: t.shape, dtype: t.dtype })));
const outPath = `${input}.${format}.out`;

// Linux schedstat of every thread of this process: CPU time and time spent runnable but waiting
// for a CPU (ns). Sampled while the run lasts, since the worker threads end with it. A thread
// first seen after the run began started during it: all its time counts (from zero). The sampler
// shares the cores with the run it measures, so it is kept cheap: each thread's file stays open
// and is re-read with one pread (a seq_file regenerates at offset 0).
// Each thread's /proc stat adds its CPU time in the kernel (stime, clock ticks of 10 ms): for the
// workers, the system calls that read the input and write the output.
// warm: the pool is made and its workers started before the timer (a pool starts a worker when a
// task finds none idle: one small task each, all at once), and the run is given it.
let warmPool;
if (poolMode === 'warm') {
  warmPool = await lib.createPool({ size: workers });
  await Promise.all(Array.from({ length: workers }, () => warmPool.quantize({ values: new Float32Array(4 * 256) }, { format, rowLength: 256 })));
}

const threads = new Map();
const fds = new Map();
const statBuf = Buffer.alloc(512);
let started = false;
const readAt0 = (fd) => {
  try { return readSync(fd, statBuf, 0, statBuf.length, 0); } catch { return 0; }
};
const sample = () => {
  for (const t of readdirSync('/proc/self/task')) {
    if (!fds.has(t) && !threads.has(t)) try { fds.set(t, [openSync(`/proc/self/task/${t}/schedstat`, 'r'), openSync(`/proc/self/task/${t}/stat`, 'r')]); } catch { /* ended */ }
  }
  for (const [t, [fd, sfd]] of fds) {
    let n = readAt0(fd);
    if (n === 0) { fds.delete(t); for (const f of [fd, sfd]) try { closeSync(f); } catch { /* already gone */ } continue; } // the thread ended
    const [cpu, wait] = statBuf.toString('latin1', 0, n).split(' ').map(Number);
    n = readAt0(sfd);
    const line = statBuf.toString('latin1', 0, n);
    // Fields after the ")" that closes the thread's name: state is the 1st, stime the 13th.
    const sys = n ? Number(line.slice(line.lastIndexOf(')') + 2).split(' ')[12]) * 1e7 : 0;
    const prev = threads.get(t);
    threads.set(t, { first: prev?.first ?? (started ? { cpu: 0, wait: 0, sys: 0 } : { cpu, wait, sys }), cpu, wait, sys: n ? sys : prev?.sys ?? 0 });
  }
  started = true;
};
sample();
const sampler = setInterval(sample, 20);
const cpu0 = process.cpuUsage();
const t0 = performance.now();
const res = await lib.quantizeCheckpoint({ input: ck, plan, sink: await fileSink(outPath), workers, pool: warmPool, maxInFlightBytes: Number(budget) << 20, metrics: false, workerIo: io === 'workers' });
const wall = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
clearInterval(sampler);
sample();
await warmPool?.terminate();
// The pool's workers are the threads that ran longest (the kernels dominate): their CPU time, and
// how long they were ready to run but had no CPU (other processes' load, or the pipeline's own
// threads); the rest of workers x wall they had no work (start-up, waiting for input or budget).
const busiest = [...threads.values()].map((v) => ({ cpu: (v.cpu - v.first.cpu) / 1e9, wait: (v.wait - v.first.wait) / 1e9, sys: (v.sys - v.first.sys) / 1e9 })).sort((a, b) => b.cpu - a.cpu).slice(0, workers);
const workerCpu = busiest.reduce((a, b) => a + b.cpu, 0), workerWait = busiest.reduce((a, b) => a + b.wait, 0);
const workerSys = busiest.reduce((a, b) => a + b.sys, 0);
// The shortest wall time this CPU allows on this machine's cores: no worker can finish before its
// own CPU time has run, and all the process's threads share the cores.
const procCpu = (cpu.user + cpu.system) / 1e6;
const wallFloor = Math.max(busiest[0]?.cpu ?? 0, procCpu / availableParallelism());
const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
rmSync(outPath, { force: true });

// Kernel-only rate for the same work: one FFN matrix on this thread, same input dtype.
const k = await lib.loadKernels('auto');
const vals = await ck.readValues('model.layers.0.mlp.gate_proj.weight');
await src.close();
const opts = { format, rowLength: ROW, dtype: vals.dtype };
await quantizeWith(k, vals.values, opts);
const times = [];
const kcpu0 = process.cpuUsage();
for (let i = 0; i < 3; i++) {
  const t1 = performance.now();
  await quantizeWith(k, vals.values, opts);
  times.push((performance.now() - t1) / 1000);
}
const kcpu = process.cpuUsage(kcpu0);
const kernelGBs = vals.values.byteLength / median(times) / 1e9;
// CPU seconds per GB of input: unlike wall time, hardly touched by other processes' load.
const kernelCpuPerGB = (kcpu.user + kcpu.system) / 1e6 / ((3 * vals.values.byteLength) / 1e9);

// What the machine gives `workers` threads right now: the same call on every thread at once.
const pool = await lib.createPool({ size: workers });
const together = async () => {
  const copies = Array.from({ length: workers }, () => vals.values.slice());
  const t = performance.now();
  await Promise.all(copies.map((values) => pool.quantize({ values }, opts)));
  return (performance.now() - t) / 1000;
};
await together();
const concurrent = [];
for (let i = 0; i < 3; i++) concurrent.push(await together());
await pool.terminate();
const kernelAllGBs = (vals.values.byteLength * workers) / median(concurrent) / 1e9;

const inBytes = statSync(input).size;
console.log(JSON.stringify({
  wall, warmS, inBytes, gbps: inBytes / wall / 1e9, kernelGBs, kernelAllGBs,
  cpuPerGB: (cpu.user + cpu.system) / 1e6 / (inBytes / 1e9), kernelCpuPerGB,
  workerCpu, workerWait, workerIdle: Math.max(0, workers * wall - workerCpu - workerWait),
  workerSys, otherCpu: Math.max(0, procCpu - workerCpu), wallFloor,
  peakRssMB: hwm ? Number(hwm[1]) / 1024 : NaN, peakInFlightMB: res.peakInFlightBytes / 2 ** 20, bytesWritten: res.bytesWritten,
}));
process.exit(0);
