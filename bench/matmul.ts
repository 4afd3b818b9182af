// npm run bench:matmul — LoadedTensor.matmul of a window of positions (as a prompt or the eval's
// forward multiplies them) on quantized rows, single thread, through the formats' batched kernels
// (<fmt>_matmul: every row decoded once for all positions, each result matvec's bits) against the
// same call made without them (<fmt>_matvec once per position for each chunk of rows, as before
// those kernels), alternating, medians. GMAC/s = rows * rowLength * positions / s.
// Options: --formats a,b --shapes 1536x576,576x1536,4096x4096 (formats whose block does not divide
// a shape's rows: --kshapes 1536x768,768x1536,4096x4096) --positions 512 --reps 5, --bits N and
// --group-size N (passed to every format, e.g. --formats affine --bits 3 --group-size 64)
import { formats as registry } from '../src/formats/registry.js';
import { resolveOptions } from '../src/options.js';
import { quantize } from '../src/quantize.js';
import { servedFromQuantized } from '../src/serve/index.js';
import { serveKernels } from '../src/serve/kernels.js';
import { arg, median, table } from './util.js';

const formats = arg('formats', 'q8_0,q4_0,q4_1,q5_0,q5_1,iq4_nl,q4_k,q5_k,q6_k,q2_k,q3_k,iq4_xs,nf4,fp4,int8,int4,affine,fp8_e4m3,bf16').split(',');
const parse = (list: string) => list.split(',').map((s) => s.split('x').map(Number));
const shapes = parse(arg('shapes', '1536x576,576x1536,4096x4096'));
const kshapes = parse(arg('kshapes', '1536x768,768x1536,4096x4096'));
const n = Number(arg('positions', '512'));
const reps = Number(arg('reps', '5'));
const extra = { ...(arg('bits', '') ? { bits: Number(arg('bits', '')) } : {}), ...(arg('group-size', '') ? { groupSize: Number(arg('group-size', '')) } : {}) };

// The serving kernels' instance, with the batched kernels hidden while `without` is set.
const k = await serveKernels('auto');
const has = k.has.bind(k);
let without = false;
k.has = (name: string) => (without && name.endsWith('_matmul') ? false : has(name));

const rows: string[][] = [];
for (const format of formats) {
  const spec = registry.get(format);
  const block = spec ? spec.blockSize(resolveOptions(spec, { format, ...extra })) : 1;
  for (const [r, c] of shapes.every(([, c]) => c % block === 0) ? shapes : kshapes) {
    const qt = await quantize(Float32Array.from({ length: r * c }, (_, i) => Math.sin(i * 0.37)), { format, rowLength: c, ...extra });
    const t = await servedFromQuantized(qt, {});
    const X = Float32Array.from({ length: n * c }, (_, i) => Math.cos(i * 0.11));
    const a: number[] = [], b: number[] = [];
    for (let i = 0; i < reps; i++) {
      let t0 = performance.now();
      const y1 = t.matmul(X, n);
      a.push(performance.now() - t0);
      without = true;
      t0 = performance.now();
      const y2 = t.matmul(X, n);
      b.push(performance.now() - t0);
      without = false;
      if (i === 0 && !Buffer.from(y1.buffer).equals(Buffer.from(y2.buffer))) throw new Error(`${format} ${r}x${c}: the batched kernel's result differs`);
    }
    const g = (ms: number) => ((r * c * n) / ms / 1e6).toFixed(2);
    rows.push([format, `${r} x ${c}`, g(median(a)), g(median(b)), (median(b) / median(a)).toFixed(2)]);
  }
}
console.log(`\nLoadedTensor.matmul of ${n} positions (${k.build}${Object.keys(extra).length ? `, ${JSON.stringify(extra)}` : ''}), GMAC/s, median of ${reps}; same bits both ways (checked):`);
console.log(table(['format', 'weight', 'batched kernel', 'matvec per position', 'ratio'], rows));
