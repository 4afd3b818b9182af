// From a plan to units of work: processing order (embeddings, blocks by index, the rest), output
// sizes from the registry layout, and the cut of tensors larger than the memory budget into row
// chunks (see pipeline.ts for why only some formats may be cut).
import { isGgmlBlockType } from '../io/ggml-types.js';
import { FOLDED_DTYPES, READ_AS_F32_DTYPES } from '../io/dtypes.js';
import { ErrorCodes, WebquantError } from '../errors.js';
import { getFormat } from '../formats/registry.js';
import { cutsByRows, layoutOf, type FormatSpec, type Layout, type PreparedArgs, type ResolvedOptions } from '../formats/types.js';
import { resolveOptions, type FormatOptions } from '../options.js';
import type { ErrorMetrics } from '../metrics.js';
import { valuesDtypeOf, type Checkpoint, type TensorInfo, type TensorValues } from '../io/checkpoint.js';
import { detectRole } from '../plan/roles.js';
import type { OutputTensor } from './container.js';

/** Dtypes whose rows a safetensors reader gives as f32 (SafetensorsCheckpoint.readRows). */
const ROWS_F32_DTYPES: ReadonlySet<string> = new Set([...READ_AS_F32_DTYPES].filter((d) => d !== 'F64'));

/** One tensor of a resolved plan (what src/plan's resolvePlan gives per tensor). */
export interface PlannedTensor {
  name: string;
  role?: string;
  scheme: FormatOptions | 'keep';
}

/** resolvePlan()'s result (src/plan) or just its tensors. */
export type PlanInput = Iterable<PlannedTensor> | { tensors: readonly (PlannedTensor & { error?: string })[]; ok?: boolean; problems?: readonly { severity: string; message: string; tensor?: string }[] };

/** Reads `rows` rows from `firstRow` of a float tensor, as readValues would (F32/F16/BF16). */
export type RowReader = (info: TensorInfo, firstRow: number, rows: number) => Promise<TensorValues>;

export interface Job {
  index: number;
  info: TensorInfo;
  role?: string;
  layer?: number;
  group: string;
  out: OutputTensor;
  /** Quantized only. */
  spec?: FormatSpec;
  scheme?: FormatOptions;
  rowLen: number;
  nrows: number;
  /** Bytes per element of the values sent to the workers. */
  elemBytes: number;
  /** readValues (F32/F16/BF16) or readF32 (everything else). */
  readAs: 'values' | 'f32';
  units: Unit[];
  /** Cut into slices that share one calibration of the whole tensor (see buildJobs). */
  sliced?: boolean;
  /** A sliced job's calibration, computed when its first slice is sent. */
  prepared?: Promise<PreparedArgs>;
  /** Without ranged reads: the whole tensor, read once for all its chunks. */
  whole?: Promise<TensorValues>;
  chunksRead?: number;
}

export interface Unit {
  job: Job;
  chunk: number;
  r0: number;
  rows: number;
  cost: number;
  id: string;
}

export interface UnitResult {
  /** Empty when the worker wrote the output into the file itself (`written`). */
  data: Uint8Array;
  metrics?: ErrorMetrics;
  cached: boolean;
  written?: boolean;
}

/**
 * Largest unit (input plus output bytes) a tensor that may be cut is cut into. The workers finish
 * together only to within about one unit: the last units decide how long one worker waits for the
 * other at the end. Units of 32 MiB take ~25 ms with Q8_0 (a 32000 x 2304 BF16 vocabulary matrix
 * went as two ~100 ms halves at the very end, one per worker); sending ahead (pool.ts) hides the
 * cost of more units.
 */
const UNIT_BYTES = 32 << 20;

const GROUP_FIRST = -1;
const GROUP_LAST = Number.MAX_SAFE_INTEGER;

function planError(name: string, e: unknown): never {
  if (e instanceof WebquantError) {
    throw new WebquantError(e.code, `[pipeline] tensor "${name}": ${e.message}`, { ...e.details, tensor: name });
  }
  throw e;
}

function compareKeys(a: readonly (number | string)[], b: readonly (number | string)[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  }
  return a.length - b.length;
}

function groupOf(name: string, role: string | undefined): { layer?: number; order: number; group: string } {
  const r = detectRole(name);
  if (r.layer !== undefined) return { layer: r.layer, order: r.layer, group: `layer ${r.layer}` };
  if ((role ?? r.role) === 'embedding') return { order: GROUP_FIRST, group: 'embeddings' };
  return { order: GROUP_LAST, group: 'other' };
}

/** Jobs in processing order (embeddings, blocks by index, the rest; file order within each). */
function planEntries(plan: PlanInput): Iterable<PlannedTensor> {
  if (!('tensors' in plan)) return plan;
  const errors = (plan.problems ?? []).filter((p) => p.severity === 'error');
  const bad = plan.tensors.find((t) => t.error);
  if (plan.ok === false || errors.length || bad) {
    const first = errors[0] ?? { message: bad!.error!, tensor: bad!.name };
    throw new WebquantError(ErrorCodes.PLAN, `[pipeline] the plan has errors; first: ${first.message}`, { tensor: first.tensor, value: errors.map((e) => e.message) });
  }
  return plan.tensors;
}

/**
 * A tensor with a zero dimension ([0, 64], [0], ne = [0, 1, 1, 1]): safetensors and GGUF both allow
 * it. It has no values to quantize and no row to read or cut, so it is kept as stored (zero bytes)
 * whatever the plan says: a layout of zero rows would still need tensor sections (scales of no
 * values) that no calibration can fill.
 */
export function isEmptyTensor(t: { shape: readonly number[] }): boolean {
  return t.shape.includes(0);
}

/**
 * `perMatrix`: tensors [matrices, rows, cols] whose units must each stay within one matrix (a MoE
 * tensor with one importance vector per expert): cut at every matrix boundary as well.
 */
export function buildJobs(input: Checkpoint, plan: PlanInput, budget: number, poolSize: number, perMatrix: ReadonlySet<string> = new Set(),
  claims?: (name: string, format: string) => string[], onReplaced?: (dropped: string[]) => void, streamed: (name: string) => boolean = () => false,
  orderOf?: (name: string) => readonly (number | string)[]): Job[] {
  const byName = new Map<string, PlannedTensor>();
  for (const p of planEntries(plan)) {
    input.tensor(p.name); // unknown names fail here, naming the tensor
    byName.set(p.name, p);
  }
  // Input tensors the output names after a quantized tensor's sections (its old scales) are left out.
  const dropped = new Set<string>();
  const exists = new Set(input.tensors.map((t) => t.name));
  for (const p of byName.values()) {
    if (p.scheme === 'keep' || !claims || isEmptyTensor(input.tensor(p.name))) continue;
    let names: string[];
    try {
      names = claims(p.name, p.scheme.format);
    } catch {
      continue; // an unknown format is reported below, naming the tensor
    }
    // Only kept ones: a claimed name that is itself quantized stays and collides (a writer error).
    const gone = names.filter((n) => exists.has(n) && (byName.get(n)?.scheme ?? 'keep') === 'keep');
    for (const n of gone) dropped.add(n);
  }
  if (dropped.size) onReplaced?.([...dropped]);
  const order = input.tensors.filter((info) => !dropped.has(info.name)).map((info, i) => {
    const p = byName.get(info.name);
    return { info, p, i, g: groupOf(info.name, p?.role), k: orderOf?.(info.name) ?? [] };
  });
  // The container's order first (Container.order: llama-quantize's for GGUF from GGUF).
  order.sort((a, b) => compareKeys(a.k, b.k) || a.g.order - b.g.order || a.i - b.i);
  return order.map(({ info, p, g }, index) => {
    const empty = isEmptyTensor(info);
    if (empty && p && p.scheme !== 'keep') {
      try {
        getFormat(p.scheme.format); // kept, but a plan naming no format is still wrong
      } catch (e) {
        planError(info.name, e);
      }
    }
    const scheme = p && p.scheme !== 'keep' && !empty ? p.scheme : undefined;
    const base = { index, info, role: p?.role, layer: g.layer, group: g.group, units: [] as Unit[] };
    const stored = { F32: 4, F16: 2, BF16: 2 }[info.dtype];
    if (!scheme) {
      // A kept float tensor larger than the budget is copied in row chunks too (ranged reads).
      const rowLen = info.shape.length ? info.shape[info.shape.length - 1] : 1;
      const nrows = rowLen > 0 ? info.shape.reduce((a, b) => a * b, 1) / rowLen : 0;
      // A folded MLX / bitsandbytes weight is kept as its F32 values: its stored bytes lack the
      // folded scales (dtypes.ts); its rows come decoded from readRows.
      const folded = FOLDED_DTYPES.has(info.dtype);
      const elem = folded ? 4 : stored;
      const byteLength = folded ? rowLen * nrows * 4 : info.byteLength;
      const perRow = rowLen * (elem ?? 0);
      const job: Job = {
        ...base, rowLen, nrows, elemBytes: elem ?? 0, readAs: folded ? 'f32' : 'values',
        out: { name: info.name, kind: 'keep', inputDtype: folded ? 'F32' : info.dtype, shape: info.shape.slice(), byteLength },
      };
      if (elem === undefined || byteLength <= budget || nrows <= 1 || perRow * nrows !== byteLength) {
        job.units.push({ job, chunk: 0, r0: 0, rows: 0, cost: byteLength, id: `${index}` });
      } else {
        const rows = Math.max(1, Math.floor(budget / perRow));
        for (let r0 = 0, c = 0; r0 < nrows; r0 += rows, c++) {
          const n = Math.min(rows, nrows - r0);
          job.units.push({ job, chunk: c, r0, rows: n, cost: n * perRow, id: `${index}.${r0}+${n}` });
        }
      }
      return job;
    }
    if (stored === undefined && !READ_AS_F32_DTYPES.has(info.dtype) && !isGgmlBlockType(info.dtype)) {
      throw new WebquantError(ErrorCodes.PLAN, `[pipeline] tensor "${info.name}" is ${info.dtype}, which cannot be quantized (plan it as 'keep')`, { tensor: info.name, value: info.dtype, expected: 'a float tensor' });
    }
    let spec: FormatSpec, o: ResolvedOptions, layout: Layout;
    const rowLen = info.shape.length ? info.shape[info.shape.length - 1] : 1;
    const numel = info.shape.reduce((a, b) => a * b, 1);
    const nrows = rowLen > 0 ? numel / rowLen : 0;
    try {
      spec = getFormat(scheme.format);
      o = resolveOptions(spec, scheme);
      const block = spec.blockSize(o);
      if (rowLen <= 0 || rowLen % block !== 0) {
        throw new WebquantError(ErrorCodes.ROW_LENGTH, `[quantize] row length ${rowLen} is not a multiple of the ${spec.name} block size ${block}`, { option: 'rowLength', value: rowLen, expected: `a multiple of ${block}` });
      }
      layout = layoutOf(spec, nrows, rowLen, o);
    } catch (e) {
      planError(info.name, e);
    }
    const elemBytes = stored ?? 4;
    const job: Job = {
      ...base, spec, scheme, rowLen, nrows, elemBytes, readAs: stored ? 'values' : 'f32',
      out: { name: info.name, kind: 'quantized', inputDtype: info.dtype, shape: info.shape.slice(), byteLength: layout.bytes, format: spec.name, options: o, layout },
    };
    const perRow = rowLen * elemBytes + layout.sections.reduce((a, s) => a + s.perRow, 0);
    const whole = nrows * perRow + layout.sections.filter((s) => s.perRow === 0).reduce((a, s) => a + s.bytes, 0);
    // Values that only readF32 gives (FP8, NVFP4, MLX, bitsandbytes) are cut where the input reads
    // their rows as f32 (readRows); F64 and GGUF quantized inputs have no ranged form.
    const rowsF32 = stored === undefined && ROWS_F32_DTYPES.has(info.dtype) && typeof (input as { readRows?: unknown }).readRows === 'function';
    // Layouts without tensor sections that depend on the values are cut (prepare / finish only
    // work on those, see FormatSpec): int8 per channel, nf4 without double quantization, fp8 per
    // row, bitsandbytes' layouts (their constant sections are written once), ... The others
    // (per-tensor scales, double quantization) are cut into slices where the workers read the
    // stored values themselves chunk by chunk: one of them calibrates over the whole tensor first
    // (QuantizeOptions.prepareOnly), then every slice quantizes its rows with that calibration.
    const rowsCut = cutsByRows(layout);
    const chunkable = rowsCut ? stored !== undefined || rowsF32 : stored !== undefined && streamed(info.name);
    // Cut a tensor into row chunks when it exceeds one worker's share of the budget (so that it
    // fits, and so that all workers share a large tensor instead of one taking it alone) or
    // UNIT_BYTES (see there).
    const cap = Math.min(budget / poolSize, UNIT_BYTES);
    // Rows of one matrix of a tensor whose units may not span two.
    const period = perMatrix.has(info.name) && info.shape.length === 3 ? info.shape[1] : nrows;
    if (perMatrix.has(info.name) && (info.shape.length !== 3 || !chunkable || !rowsCut)) {
      throw new WebquantError(ErrorCodes.PLAN, `[pipeline] tensor "${info.name}" ${info.dtype}[${info.shape}] cannot be quantized one matrix at a time (per-matrix importance needs a 3-D F32/F16/BF16 tensor)`, { tensor: info.name, value: info.shape, expected: '[matrices, rows, cols]' });
    }
    if ((whole <= cap || !chunkable || nrows <= 1) && period === nrows) {
      job.units.push({ job, chunk: 0, r0: 0, rows: nrows, cost: whole, id: `${index}` });
    } else {
      // Small enough that every worker can hold a chunk within the budget.
      const rows = Math.min(period, Math.max(1, Math.floor(cap / perRow)));
      for (let r0 = 0, c = 0; r0 < nrows; c++) {
        const n = Math.min(rows, nrows - r0, period - (r0 % period));
        // The id names the rows, so a resumed run that cuts differently never mixes chunks up.
        job.units.push({ job, chunk: c, r0, rows: n, cost: n * perRow, id: `${index}.${r0}+${n}` });
        r0 += n;
      }
      // The first slice carries the tensor sections (the same in every slice) and costs them.
      if (!rowsCut) {
        job.sliced = true;
        job.units[0].cost += whole - nrows * perRow;
      }
    }
    return job;
  });
}

/**
 * Whether a unit's result holds the tensor sections: a whole tensor's, and a sliced tensor's
 * first slice (every slice computes the same ones); other chunks give their rows only.
 */
export function bringsTensorSections(job: Job, chunk: number): boolean {
  return job.units.length === 1 || (!!job.sliced && chunk === 0);
}

/** Output bytes per row of a quantized job (its row sections). */
export function rowBytes(job: Job): number {
  return job.out.layout!.sections.reduce((a, s) => a + s.perRow, 0);
}

/** The dtype the workers get a quantized job's values in (what its constant sections record). */
export function valuesDtype(job: Job): TensorValues['dtype'] {
  return (job.readAs === 'values' && valuesDtypeOf(job.info.dtype)) || 'f32';
}

export function combineMetrics(parts: (ErrorMetrics | undefined)[]): ErrorMetrics | undefined {
  if (parts.some((m) => !m)) return undefined;
  const ms = parts as ErrorMetrics[];
  if (ms.length === 1) return ms[0];
  let se = 0, sx = 0, n = 0, mx = 0, cos = 0, sxKnown = true;
  for (const m of ms) {
    const e = m.rmse * m.rmse * m.count;
    se += e;
    n += m.count;
    mx = Math.max(mx, m.maxAbsError);
    cos += m.cosine * m.count;
    if (Number.isFinite(m.sqnrDb)) sx += e * 10 ** (m.sqnrDb / 10);
    else if (e !== 0) sxKnown = false;
    else sxKnown = false;
  }
  return {
    rmse: n > 0 ? Math.sqrt(se / n) : 0,
    maxAbsError: mx,
    sqnrDb: se === 0 ? Infinity : sxKnown ? 10 * Math.log10(sx / se) : NaN,
    cosine: n > 0 ? cos / n : 1,
    count: n,
  };
}

// JSON has no Infinity (sqnrDb of an exact tensor): metrics are cached with numbers as strings.
export function encodeMetrics(m: ErrorMetrics | undefined): Record<string, string> | null {
  return m ? Object.fromEntries(Object.entries(m).map(([k, v]) => [k, String(v)])) : null;
}

export function decodeMetrics(m: unknown): ErrorMetrics | undefined {
  return m && typeof m === 'object' ? (Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Number(v)])) as unknown as ErrorMetrics) : undefined;
}
