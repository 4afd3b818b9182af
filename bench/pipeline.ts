// npm run bench:pipeline — end-to-end streaming quantization of a large synthetic checkpoint.
// Generates Llama-shaped BF16 safetensors (32 layers, 4.37 GB; and an 8-layer 1.3 GB one to show
// that peak memory does not grow with the model), quantizes each to Q4_K and Q8_0 with 1 and 2
// workers, each run in its own process so that peak RSS (VmHWM from /proc) belongs to that run.
// Every configuration runs --reps times, the repetitions interleaved (so that a change in the
// machine's load touches every configuration alike); the table shows medians, and the ratios are
// of medians from the same invocation ("speedup per round": the median of each round's ratio, the
// round's runs being back to back). Prints wall time, GB of input per second, the
// single-thread kernel throughput for the same work (median of 3 calls on one FFN matrix, measured
// in the same process after the run), the kernel throughput of as many threads as workers running
// that call at once (what a shared machine gives that many threads at the time: a control for the
// load), CPU seconds (all threads) per GB of input against the kernel's own (what the pipeline
// costs beyond the kernel; other processes' load hardly changes it), how the workers spent the
// run (share of workers x wall running, runnable but waiting for a CPU, and without work; Linux
// schedstat), the workers' CPU seconds and the share of it spent in the kernel (their reads and
// writes), the CPU seconds of the process's other threads (pipeline thread, GC, libuv), the
// shortest wall time that CPU allows on this machine's cores (the busiest worker's CPU, or the
// process's CPU over the cores if more) and, for several workers, the one-worker wall time over
// that floor: the most speedup the measured CPU leaves room for. Also peak RSS (the highest of
// the repetitions). Each run is bench/pipeline-child.mjs,
// which first reads the input once so that it is in the page cache (see there).
// Options: --dir D (default /tmp/webquant-bench), --layers 32,8, --formats q4_k,q8_0,
// --workers 1,2, --budget MiB (default 256), --reps N (default 3), --io workers,main (worker I/O
// as by default, or everything through the main thread: workerIo false), --pool cold,warm (cold,
// the default: the run starts its own pool, whose workers start inside the timed run, as a
// one-off `webquant quantize` does; warm: the pool's workers are started before the timer and the
// run is given the pool, as a page or a server that quantizes several checkpoints keeps one),
// --keep (keep the files).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadavg } from 'node:os';
import { arg, median, table, writeJson } from './util.js';
import { writeLlamaCheckpoint } from './llama-checkpoint.js';

// FFN 7168 (3.1x hidden, as Llama 3) makes the 32-layer file 4.37 GB = 4.07 GiB: at least 4 GB in either unit.
const HIDDEN = 2304, FFN = 7168, HEADS = 18, KV_HEADS = 6, VOCAB = 32000;

interface Run { wall: number; inBytes: number; gbps: number; kernelGBs: number; kernelAllGBs: number; cpuPerGB: number; kernelCpuPerGB: number; workerCpu: number; workerWait: number; workerIdle: number; workerSys: number; otherCpu: number; wallFloor: number; peakRssMB: number; peakInFlightMB: number }

async function main(): Promise<void> {
  const dir = arg('dir', '/tmp/webquant-bench');
  const layerSizes = arg('layers', '32,8').split(',').map(Number);
  const fmts = arg('formats', 'q4_k,q8_0').split(',');
  const workerCounts = arg('workers', '1,2').split(',').map(Number);
  const ios = arg('io', 'workers').split(',');
  const pools = arg('pool', 'cold').split(',');
  const budget = Number(arg('budget', '256'));
  const reps = Number(arg('reps', '3'));
  mkdirSync(dir, { recursive: true });
  const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');
  const loads = [load()];
  const rows: (string | number)[][] = [];
  const results: unknown[] = [];
  for (const layers of layerSizes) {
    const path = `${dir}/synthetic-${layers}L.safetensors`;
    if (!existsSync(path)) {
      console.error(`generating ${path} ...`);
      await writeLlamaCheckpoint(path, { hidden: HIDDEN, ffn: FFN, heads: HEADS, kvHeads: KV_HEADS, vocab: VOCAB, layers, tied: false });
    }
    const configs = fmts.flatMap((format) => ios.flatMap((io) => pools.flatMap((pool) => workerCounts.map((workers) => ({ format, io, pool, workers, runs: [] as Run[] })))));
    for (let rep = 0; rep < reps; rep++) {
      for (const c of configs) {
        // Plain node, not tsx: under tsx's loader every worker thread takes ~0.3 s more to start.
        const out = execFileSync(process.execPath, [fileURLToPath(new URL('./pipeline-child.mjs', import.meta.url)), path, c.format, String(c.workers), String(budget), c.io, c.pool], { encoding: 'utf8', maxBuffer: 1 << 20 });
        const r: Run = JSON.parse(out.trim().split('\n').pop()!);
        c.runs.push(r);
        results.push({ layers, format: c.format, workers: c.workers, io: c.io, pool: c.pool, budgetMB: budget, rep, ...r });
        console.error(`${layers}L ${c.format} ${c.io} I/O ${c.pool} pool x${c.workers} #${rep + 1}: ${r.wall.toFixed(2)} s`);
      }
      loads.push(load());
    }
    for (const c of configs.filter((x) => x.runs.length)) {
      const m = (f: (r: Run) => number) => median(c.runs.map(f));
      const one = configs.find((x) => x.format === c.format && x.io === c.io && x.pool === c.pool && x.workers === 1);
      const gbps = m((r) => r.gbps), kernel = m((r) => r.kernelGBs);
      const speedup = c.workers > 1 && one ? gbps / median(one.runs.map((r) => r.gbps)) : NaN;
      // Each round runs the configurations back to back: a round's ratio sees one machine state.
      const roundSpeedup = c.workers > 1 && one ? median(c.runs.map((r, i) => r.gbps / one.runs[i].gbps)) : NaN;
      const all = m((r) => r.kernelAllGBs);
      const cpu = m((r) => r.cpuPerGB), kcpu = m((r) => r.kernelCpuPerGB);
      const share = (f: (r: Run) => number) => m((r) => f(r) / (r.wall * c.workers));
      rows.push([`${(c.runs[0].inBytes / 1e9).toFixed(2)} GB (${layers}L)`, c.format, c.io, c.pool, c.workers, m((r) => r.wall), gbps, kernel, gbps / (kernel * c.workers), all, gbps / all, speedup, roundSpeedup, cpu, kcpu / cpu,
        share((r) => r.workerCpu), share((r) => r.workerWait), share((r) => r.workerIdle),
        m((r) => r.workerCpu), m((r) => r.workerSys / r.workerCpu), m((r) => r.otherCpu), m((r) => r.wallFloor), c.workers > 1 && one ? median(one.runs.map((r) => r.wall)) / m((r) => r.wallFloor) : NaN,
        Math.max(...c.runs.map((r) => r.peakRssMB)), m((r) => r.peakInFlightMB)]);
    }
    if (!process.argv.includes('--keep')) rmSync(path, { force: true });
  }
  console.log(`\nwebquant pipeline, BF16 safetensors in (in the page cache), file out, budget ${budget} MiB in flight; medians of ${reps} interleaved runs, peak RSS the highest`);
  console.log(`load average (1, 5, 15 min) at the start and after each round: ${loads.join(' | ')}\n`);
  console.log(table(['input', 'format', 'I/O', 'pool', 'workers', 'wall s', 'GB/s in', 'kernel GB/s (1 thread)', 'vs kernel x workers', 'kernel GB/s (all threads at once)', 'vs that', 'speedup vs 1', 'speedup per round', 'CPU s per GB', 'kernel CPU / CPU', 'workers running', 'waiting for a CPU', 'without work', 'worker CPU s', 'of it in the OS', 'other threads CPU s', 'CPU floor s', 'speedup the CPU allows', 'peak RSS MB', 'peak in flight MB'], rows));
  writeJson('bench/results/pipeline.json', { date: new Date().toISOString(), reps, loads, results });
}

await main();
