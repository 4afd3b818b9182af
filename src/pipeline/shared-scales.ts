// One per-tensor scale for the tensors a runtime fuses into one matrix. vLLM and TensorRT-LLM
// load q/k/v (and gate/up, and an expert's w1/w3) as one GEMM with a single NVFP4 scale_2, and
// ModelOpt's export makes those tensors' scale_2 equal (their largest) for that reason; a file
// with three different ones would be read with the largest for all three. So before a layer's
// tensors are quantized, the absolute maximum of each grouped tensor is read (in row chunks) and
// each group gets the scale of its largest, passed to the workers as `tensorScale`.
import type { Checkpoint } from '../io/checkpoint.js';
import { bf16ToF32, f16ToF32 } from '../util/half.js';
import type { Job, RowReader } from './jobs.js';

const FUSED: Record<string, string> = { q_proj: 'qkv', k_proj: 'qkv', v_proj: 'qkv', gate_proj: 'gate_up', up_proj: 'gate_up', w1: 'w13', w3: 'w13' };

/** The fused matrix a Hugging Face weight belongs to ("<prefix>qkv"), or undefined. */
export function fusedGroup(name: string): string | undefined {
  const m = /^(.*\.)(q_proj|k_proj|v_proj|gate_proj|up_proj|w1|w3)\.weight$/.exec(name);
  return m ? m[1] + FUSED[m[2]] : undefined;
}

function absmax(v: Float32Array | Uint16Array, dtype: string): number {
  if (v instanceof Float32Array) {
    let m = 0;
    for (let i = 0; i < v.length; i++) { const a = Math.abs(v[i]); if (a > m || a !== a) m = a; }
    return m;
  }
  // Half formats: the largest magnitude has the largest bits (NaN and inf above every finite).
  let b = 0;
  for (let i = 0; i < v.length; i++) b = Math.max(b, v[i] & 0x7fff);
  return dtype === 'bf16' ? bf16ToF32(b) : f16ToF32(b);
}

async function tensorAbsmax(input: Checkpoint, job: Job, readRows: RowReader | undefined, chunkBytes: number, signal: AbortSignal): Promise<number> {
  if (job.readAs === 'f32') return absmax(await input.readF32(job.info.name), 'f32');
  if (!readRows || job.nrows <= 1) {
    const all = await input.readValues(job.info.name);
    return absmax(all.values, all.dtype);
  }
  const rows = Math.max(1, Math.floor(chunkBytes / (job.rowLen * job.elemBytes)));
  let m = 0;
  for (let r0 = 0; r0 < job.nrows; r0 += rows) {
    if (signal.aborted) throw signal.reason;
    const c = await readRows(job.info, r0, Math.min(rows, job.nrows - r0));
    const a = absmax(c.values, c.dtype);
    if (a > m || a !== a) m = a;
  }
  return m;
}

/**
 * The tensorScale of each quantized tensor whose format shares its scale and that has a fused
 * partner with the same format and options, its input scale aside (undefined for any other). A group's members are read
 * (in row chunks of at most `chunkBytes`) when the first of them is asked for, i.e. when the
 * pipeline reaches their layer: progress goes on layer by layer, and the members are read again
 * for quantization right after, from the page cache for a file.
 */
export function sharedScales(input: Checkpoint, jobs: Job[], readRows: RowReader | undefined, chunkBytes: number, signal: AbortSignal): (job: Job) => Promise<number | undefined> {
  const groups = new Map<string, Job[]>();
  const groupOf = new Map<Job, Job[]>();
  for (const j of jobs) {
    const g = j.out.kind === 'quantized' && j.spec?.sharedScale ? fusedGroup(j.info.name) : undefined;
    if (!g) continue;
    // Members read one input, so their input scales agree when calibrated; a runtime takes the largest anyway.
    const key = `${g}\u0000${j.out.format}\u0000${JSON.stringify({ ...j.out.options, inputScale: undefined })}`;
    const members = groups.get(key) ?? [];
    if (!groups.has(key)) groups.set(key, members);
    members.push(j);
    groupOf.set(j, members);
  }
  const scales = new Map<Job[], Promise<number | undefined>>();
  const compute = async (members: Job[]): Promise<number | undefined> => {
    let amax = 0;
    for (const j of members) {
      const a = await tensorAbsmax(input, j, readRows, chunkBytes, signal);
      if (a > amax || a !== a) amax = a;
    }
    // A NaN or infinity: no shared scale; the kernels refuse that tensor, naming the index.
    return Number.isFinite(amax) ? members[0].spec!.sharedScale!.of(amax) : undefined;
  };
  return (job) => {
    const members = groupOf.get(job);
    if (!members || members.length < 2) return Promise.resolve(undefined);
    let p = scales.get(members);
    if (!p) scales.set(members, (p = compute(members)));
    return p;
  };
}
