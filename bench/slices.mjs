// npm run bench:slices — one large tensor whose layout has a tensor-level section computed from
// its values (double quantization, a per-tensor scale), quantized from a file into a file. Such a
// tensor is cut into slices: one worker calibrates over the whole tensor (reading it chunk by
// chunk), then the workers quantize slices that share the calibration. Under the default 256 MiB
// budget the slices are the pipeline's largest units (32 MiB of input and output); under 8 MiB
// they are small enough for the budget. Prints units, the pipeline's peak bytes in flight and the
// wall time (median of --reps runs, default 5, the two budgets interleaved) with the pool's
// workers started beforehand.
//   node bench/slices.mjs [--rows 32768] [--cols 2048] [--reps 5] [--workers 1,2] [--keep]
// Plain JavaScript on dist/ (run `npm run build` first; the npm script does).
import { existsSync, mkdirSync, openSync, rmSync, writeSync, closeSync } from 'node:fs';

const dist = (p) => new URL(`../dist/${p}`, import.meta.url).href;
const { quantizeCheckpoint, openSafetensors, createPool } = await import(dist('index.js'));
const { fromPath } = await import(dist('io/node.js'));
const { fileSink } = await import(dist('pipeline/node.js'));

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const rows = Number(arg('rows', '32768'));
const cols = Number(arg('cols', '2048'));
const reps = Number(arg('reps', '5'));
const workerCounts = arg('workers', '1,2').split(',').map(Number);
const dir = '/tmp/webquant-bench';
mkdirSync(dir, { recursive: true });
const input = `${dir}/slices-${rows}x${cols}.safetensors`;
const output = `${dir}/slices-out.safetensors`;
const name = 'model.layers.0.mlp.up_proj.weight';

// BF16 values of a small normal-ish spread, written block by block (no buffer of the whole).
if (!existsSync(input)) {
  const n = rows * cols;
  const json = JSON.stringify({ [name]: { dtype: 'BF16', shape: [rows, cols], data_offsets: [0, n * 2] } });
  const header = Buffer.from(json.padEnd(Math.ceil(json.length / 8) * 8, ' '));
  const fd = openSync(input, 'w');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(header.length));
  writeSync(fd, len);
  writeSync(fd, header);
  const block = new Uint16Array(1 << 20);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  let s = 1;
  for (let done = 0; done < n; done += block.length) {
    const m = Math.min(block.length, n - done);
    for (let i = 0; i < m; i++) {
      s = (s * 1103515245 + 12345) >>> 0;
      f[0] = ((s >>> 8) / 2 ** 24 - 0.5) * 0.1 * (1 + ((done + i) % 7));
      block[i] = u[0] >>> 16;
    }
    writeSync(fd, block.subarray(0, m));
  }
  closeSync(fd);
}

const schemes = {
  'nf4 double-quantized': { format: 'nf4', doubleQuant: true },
  'bnb_nf4 double-quantized': { format: 'bnb_nf4', doubleQuant: true },
  'int8 per tensor': { format: 'int8', granularity: 'tensor' },
  'fp8_e4m3 per tensor': { format: 'fp8_e4m3', granularity: 'tensor' },
};

// One pool per worker count, its workers started before any timing (a pool starts a worker when
// a task first needs it: a tensor that runs whole would otherwise start one worker where slices
// start them all, and a single-tensor run would time the start-ups).
const pools = new Map();
for (const workers of workerCounts) {
  const pool = await createPool({ size: workers });
  await Promise.all(Array.from({ length: workers }, () => pool.quantize({ values: new Float32Array(4 * 256) }, { format: 'q8_0', rowLength: 256 })));
  pools.set(workers, pool);
}

async function run(scheme, workers, budget) {
  const src = fromPath(input);
  try {
    const ck = await openSafetensors(src);
    const t0 = performance.now();
    const r = await quantizeCheckpoint({ input: ck, plan: [{ name, scheme }], sink: await fileSink(output), pool: pools.get(workers), maxInFlightBytes: budget });
    return { ms: performance.now() - t0, peak: r.peakInFlightBytes, chunks: r.tensors[0].chunks };
  } finally {
    await src.close();
  }
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const mib = (b) => (b / 2 ** 20).toFixed(1);
const kib = (b) => (b / 1024).toFixed(1);
console.log(`one ${rows} x ${cols} BF16 tensor (${mib(rows * cols * 2)} MiB), ${reps} runs each, medians`);
console.log('| format | workers | 256 MiB budget: units | peak KiB | ms | 8 MiB budget: units | peak KiB | ms |');
console.log('|---|---|---|---|---|---|---|---|');
for (const [label, scheme] of Object.entries(schemes)) {
  for (const workers of workerCounts) {
    const wide = [], small = [];
    for (let i = 0; i < reps; i++) {
      wide.push(await run(scheme, workers, 256 << 20));
      small.push(await run(scheme, workers, 8 << 20));
    }
    const row = (rs) => `${rs[0].chunks} | ${kib(Math.max(...rs.map((r) => r.peak)))} | ${median(rs.map((r) => r.ms)).toFixed(0)}`;
    console.log(`| ${label} | ${workers} | ${row(wide)} | ${row(small)} |`);
  }
}
for (const pool of pools.values()) await pool.terminate();
rmSync(output, { force: true });
if (!process.argv.includes('--keep')) rmSync(input, { force: true });
