// Integer family: symmetric int2..int8 (AQT style: int8, int4, intsym) and affine int2..int8 (MLX
// style: affine). Math, bit packing and calibrations are documented in assembly/int/*.ts.
import type { KernelArgs } from '../kernels/args.js';
import { moduleName, type FormatSpec, type ResolvedOptions, type Section, type TensorContext } from './types.js';

/** Reduction ops of intsym_reduce (mirror of the wasm exports INTSYM_OP_*, checked by a test). */
export const INTSYM_OPS = { INTSYM_OP_ABSMAX: 1, INTSYM_OP_RADIX: 2, INTSYM_OP_MSE: 3 } as const;
const OP_ABSMAX = INTSYM_OPS.INTSYM_OP_ABSMAX;
const OP_RADIX = INTSYM_OPS.INTSYM_OP_RADIX;
const OP_MSE = INTSYM_OPS.INTSYM_OP_MSE;
/** ctx.reduce writes into the arena's aux region (tensor sections + 64 bytes), so the histogram has 8 bins. */
const RADIX_WIDTH = 3;

const f32 = Math.fround;

/** Elements per block: whole groups, or (per channel / tensor) rows that fill whole code bytes. */
function symBlock(o: ResolvedOptions): number {
  if (o.granularity === 'group') return o.groupSize;
  return 8 / gcd(8, o.bits);
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/** MSE grid ratio j of N (assembly/int/calib.ts gridRatio). */
export function gridRatio(j: number, steps: number): number {
  return f32(1 - (0.8 * j) / steps);
}

/** Nearest rank of the p-th percentile among n values (assembly/int/calib.ts percentileRank). */
export function percentileRank(p: number, n: number): number {
  const k = Math.ceil((f32(p) * n) / 100);
  return k < 1 ? 1 : k > n ? n : k;
}

/** Exact k-th smallest |x| over the tensor, as f32, by radix passes of intsym_reduce. */
async function tensorPercentile(ctx: TensorContext, p: number): Promise<number> {
  const n = ctx.nrows * ctx.rowLen;
  let rank = percentileRank(p, n);
  let prefix = 0;
  for (let shift = 31 - RADIX_WIDTH; shift > -RADIX_WIDTH; shift -= RADIX_WIDTH) {
    const sh = Math.max(shift, 0);
    const width = shift + RADIX_WIDTH - sh;
    const out = await ctx.reduce('intsym_reduce', 16 + 4 * (1 << RADIX_WIDTH), (v) => {
      v.setInt32(0, OP_RADIX, true);
      v.setUint32(4, prefix, true);
      v.setUint32(8, sh, true);
      v.setUint32(12, width, true);
    });
    let below = 0;
    for (let bin = 0; bin < 1 << width; bin++) {
      const c = out.getUint32(16 + 4 * bin, true);
      if (below + c >= rank) {
        prefix = (prefix | (bin << sh)) >>> 0;
        rank -= below;
        break;
      }
      below += c;
    }
  }
  const v = new DataView(new ArrayBuffer(4));
  v.setUint32(0, prefix, true);
  return v.getFloat32(0, true);
}

async function tensorAbsmax(ctx: TensorContext): Promise<number> {
  const out = await ctx.reduce('intsym_reduce', 8, (v) => v.setInt32(0, OP_ABSMAX, true));
  return out.getFloat32(4, true);
}

/** Per-tensor scale: the same rules as the kernel's groupScale, over the whole tensor. */
async function symPrepare(ctx: TensorContext): Promise<Partial<KernelArgs>> {
  const o = ctx.opts;
  if (o.granularity !== 'tensor') return {};
  const c = o.calibration;
  const qmax = 2 ** (o.bits - 1) - 1;
  if (c.method === 'fixed') return { tscale: f32(f32(f32(c.scale!) * f32(c.max!)) / qmax) };
  if (c.method === 'percentile') return { tscale: f32((await tensorPercentile(ctx, c.percentile!)) / qmax) };
  const amax = await tensorAbsmax(ctx);
  if (c.method === 'clip') return { tscale: f32(f32(f32(c.ratio!) * amax) / qmax) };
  if (c.method !== 'mse' || amax === 0) return { tscale: f32(amax / qmax) };
  const steps = c.iterations!;
  let best = Infinity;
  let bestS = f32(amax / qmax);
  for (let j0 = 0; j0 < steps; j0 += 4) {
    const trial = [0, 1, 2, 3].map((l) => f32(f32(gridRatio(Math.min(j0 + l, steps - 1), steps) * amax) / qmax));
    const out = await ctx.reduce('intsym_reduce', 56, (v) => {
      v.setInt32(0, OP_MSE, true);
      trial.forEach((s, l) => v.setFloat32(8 + 4 * l, s, true));
    });
    for (let l = 0; l < 4 && j0 + l < steps; l++) {
      const e = out.getFloat64(24 + 8 * l, true);
      if (e < best) {
        best = e;
        bestS = trial[l];
      }
    }
  }
  return { tscale: bestS };
}

const SYM_CALIBRATIONS = ['absmax', 'clip', 'percentile', 'mse', 'fixed'] as const;

function sym(name: string, bits: readonly number[], defaults: FormatSpec['defaults'], description: string): FormatSpec {
  return {
    name,
    family: 'int',
    description,
    kernel: 'intsym',
    blockSize: symBlock,
    calibrations: SYM_CALIBRATIONS,
    importance: true,
    bits,
    groupSizes: [32, 64, 128, 256],
    granularities: ['tensor', 'channel', 'group'],
    defaults,
    rowSections(rowLen, o): Section[] {
      const codes = { name: 'codes', bytes: (rowLen * o.bits) / 8 };
      if (o.granularity === 'tensor') return [codes];
      if (o.granularity === 'channel') return [codes, { name: 'scales', bytes: 4 }];
      return [codes, { name: 'scales', bytes: (rowLen / o.groupSize) * 4 }];
    },
    tensorSections: (_n, _r, o) => (o.granularity === 'tensor' ? [{ name: 'scale', bytes: 4 }] : []),
    prepare: symPrepare,
  };
}

export const intFormats: FormatSpec[] = [
  sym('int8', [8], { bits: 8, granularity: 'channel', groupSize: 128 }, 'int8 symmetric, f32 scale per channel (or tensor / group)'),
  sym('int4', [4], { bits: 4, granularity: 'group', groupSize: 128 }, 'int4 symmetric, f32 scale per group of 128 (or tensor / channel)'),
  sym('intsym', [2, 3, 4, 5, 6, 7, 8], { bits: 8, granularity: 'channel', groupSize: 128 }, 'int2..int8 symmetric, f32 scales per tensor, channel or group'),
  {
    name: 'affine',
    family: 'int',
    description: 'int2..int8 affine (MLX): f16 scale and bias per group of 32/64/128',
    kernel: 'affine',
    blockSize: (o) => o.groupSize,
    calibrations: ['minmax', 'hqq'],
    importance: true,
    bits: [2, 3, 4, 5, 6, 8],
    groupSizes: [32, 64, 128],
    granularities: ['group'],
    defaults: { bits: 4, groupSize: 64, granularity: 'group' },
    rowSections: (rowLen, o) => [
      { name: 'codes', bytes: (rowLen * o.bits) / 8 },
      { name: 'scales', bytes: (rowLen / o.groupSize) * 2 },
      { name: 'biases', bytes: (rowLen / o.groupSize) * 2 },
    ],
  },
  {
    name: 'mlx',
    family: 'int',
    description: "MLX's affine quantizer (mx.quantize, mlx_lm convert -q): scale and bias per group of 32/64/128 in bf16 (or f16 / f32), written under MLX's names",
    // affine's kernels with its `mlx` calibration (assembly/int/mlx.ts)
    kernel: 'affine',
    blockSize: (o) => o.groupSize,
    calibrations: ['mlx'],
    importance: false,
    bits: [2, 3, 4, 5, 6, 8],
    groupSizes: [32, 64, 128],
    granularities: ['group'],
    scaleDtypes: ['bf16', 'f16', 'f32'],
    defaults: { bits: 4, groupSize: 64, granularity: 'group' },
    rowSections: (rowLen, o) => {
      const scale = (rowLen / o.groupSize) * (o.scaleDtype === 'f32' ? 4 : 2);
      return [{ name: 'codes', bytes: (rowLen * o.bits) / 8 }, { name: 'scales', bytes: scale }, { name: 'biases', bytes: scale }];
    },
    // MLX's checkpoint layout: `<module>.weight` the codes as U32 words, `<module>.scales` and
    // `<module>.biases` in the scale dtype (mlx_lm quantizes a module whose `.scales` it finds).
    safetensorsEntries: {
      codes: { name: (n) => n, dtype: () => 'U32', shape: (s, o) => [...s.slice(0, -1), (s[s.length - 1] * o.bits) / 32] },
      scales: { name: (n) => `${moduleName(n)}.scales`, dtype: mlxScaleDtype, shape: (s, o) => [...s.slice(0, -1), s[s.length - 1] / o.groupSize] },
      biases: { name: (n) => `${moduleName(n)}.biases`, dtype: mlxScaleDtype, shape: (s, o) => [...s.slice(0, -1), s[s.length - 1] / o.groupSize] },
    },
  },
];

function mlxScaleDtype(o: ResolvedOptions): string {
  return o.scaleDtype === 'f32' ? 'F32' : o.scaleDtype === 'f16' ? 'F16' : 'BF16';
}
