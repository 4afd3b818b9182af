// `webquant inspect <file|url>`: what a checkpoint holds and what each preset would make of it.
import { ggufView, llamaConfigFrom } from '../convert/hf-view.js';
import type { GgufCheckpoint } from '../io/gguf.js';
import { detectRole } from '../plan/roles.js';
import { resolvePlan } from '../plan/plan.js';
import { llamaHparams } from '../plan/llama-hparams.js';
import { listPresets } from '../plan/presets.js';
import { estimatePlan } from '../plan/estimate.js';
import type { TensorDesc } from '../plan/types.js';
import { WebquantError } from '../errors.js';
import { openInput } from './input.js';
import { fmtBytes, fmtNum, table, toJSON, type CliIO } from './io.js';

export interface InspectArgs {
  input: string;
  json?: boolean;
  /** Print every tensor (default: the first 40 and a count). */
  all?: boolean;
}

interface PresetSize {
  preset: string;
  container: 'gguf' | 'safetensors';
  bytes?: number;
  bpw?: number;
  exact?: boolean;
  /** Why the preset does not apply. */
  error?: string;
  warnings: number;
}

/** A metadata value for display: arrays and long strings summarised. */
function summarizeValue(v: unknown): unknown {
  if (Array.isArray(v)) {
    const head = v.slice(0, 4).map((x) => (typeof x === 'string' && x.length > 24 ? `${x.slice(0, 24)}...` : x));
    return v.length <= 4 ? head : { length: v.length, first: head };
  }
  if (typeof v === 'string' && v.length > 200) return `${v.slice(0, 200)}... (${v.length} characters)`;
  return v;
}

function showValue(v: unknown): string {
  const s = summarizeValue(v);
  if (s && typeof s === 'object' && !Array.isArray(s)) {
    const o = s as { length: number; first: unknown[] };
    return `[${o.first.map((x) => toJSON(x)).join(', ')}, ...] (${o.length} items)`;
  }
  return typeof s === 'string' ? s : toJSON(s);
}

export async function inspectCommand(a: InspectArgs, io: CliIO): Promise<Record<string, unknown>> {
  const input = await openInput(a.input, io);
  try {
    const ck = input.checkpoint;
    const tensors = ck.tensors.map((t) => {
      const r = detectRole(t.name);
      return { name: t.name, dtype: t.dtype, shape: t.shape, role: r.role, kind: r.kind, layer: r.layer, bytes: t.byteLength, ...(t.file ? { file: t.file } : {}) };
    });
    const params = ck.tensors.reduce((x, t) => x + t.shape.reduce((p, d) => p * d, 1), 0);
    const bytes = ck.tensors.reduce((x, t) => x + t.byteLength, 0);
    const dtypes: Record<string, number> = {};
    for (const t of ck.tensors) dtypes[t.dtype] = (dtypes[t.dtype] ?? 0) + 1;
    const metadata: Record<string, unknown> = {};
    if (ck.format === 'gguf') {
      for (const kv of (ck as GgufCheckpoint).kv) metadata[kv.key] = summarizeValue(kv.value);
    } else {
      for (const [k, v] of Object.entries(ck.metadata)) metadata[k] = summarizeValue(v);
    }

    // GGUF presets see a safetensors Llama checkpoint as the converter would write it.
    let ggufTensors: readonly TensorDesc[] = ck.tensors;
    let viewNote: string | undefined;
    if (ck.format === 'safetensors' && input.config) {
      try {
        ggufTensors = ggufView(ck, llamaConfigFrom(input.config)).tensors;
      } catch (e) {
        if (!(e instanceof WebquantError)) throw e;
        viewNote = e.message;
      }
    }
    const presets: PresetSize[] = listPresets().map((p) => {
      const r = resolvePlan(p.plan, p.container === 'gguf' ? ggufTensors : ck.tensors, p.container === 'gguf' && ck.format === 'gguf' ? llamaHparams((k) => (ck as GgufCheckpoint).metadata[k]) : {});
      const warnings = r.problems.filter((x) => x.severity === 'warning').length;
      if (!r.ok) return { preset: p.name, container: p.container, error: r.problems.find((x) => x.severity === 'error')!.message, warnings };
      const est = estimatePlan(r);
      return { preset: p.name, container: p.container, bytes: est.bytes, bpw: est.bpw, exact: est.exact, warnings };
    });
    const config = input.config ? { file: input.configFile, ...Object.fromEntries(Object.entries(input.config).filter(([k]) => k !== 'raw')) } : undefined;
    const report = {
      command: 'inspect', file: input.file, format: ck.format, ...(ck.format === 'gguf' ? { version: (ck as GgufCheckpoint).version } : {}),
      fileBytes: input.size, ...(ck.format === 'gguf' && (ck as GgufCheckpoint).splits ? { splits: (ck as GgufCheckpoint).splits } : {}), tensorBytes: bytes, params, dtypes, tensors, metadata, config, presets,
      ...(viewNote ? { ggufViewError: viewNote } : {}),
      ...(input.configError ? { configError: input.configError.message } : {}),
    };
    if (a.json) return report;

    const w = (s: string) => io.stdout.write(s);
    w(`${input.file}\n`);
    w(`format: ${ck.format}${ck.format === 'gguf' ? ` v${(ck as GgufCheckpoint).version}` : ''}, ${tensors.length} tensors, ${params.toLocaleString('en-US')} parameters, ${fmtBytes(bytes)} of tensor data`);
    const splits = ck.format === 'gguf' ? (ck as GgufCheckpoint).splits : undefined;
    w(`${input.size !== undefined ? `, ${fmtBytes(input.size)} on disk` : ''}${splits ? ` in ${splits.length} split files` : ''}\n`);
    w(`dtypes: ${Object.entries(dtypes).map(([k, n]) => `${k} x${n}`).join(', ')}\n\n`);
    const shown = a.all ? tensors : tensors.slice(0, 40);
    w(table(['tensor', 'dtype', 'shape', 'role', 'bytes'], shown.map((t) => [t.name, t.dtype, `[${t.shape.join(', ')}]`, t.kind ? `${t.role}/${t.kind}` : t.role, fmtBytes(t.bytes)]), [4]));
    if (shown.length < tensors.length) w(`... ${tensors.length - shown.length} more (--all lists every tensor)\n`);
    const keys = Object.keys(metadata);
    w(`\nmetadata (${keys.length} keys)${keys.length ? ':' : ''}\n`);
    for (const k of keys) w(`  ${k} = ${showValue(metadata[k])}\n`);
    if (input.config) {
      const c = input.config;
      w(`\nconfig.json: ${c.architecture} (${c.modelType}): hidden ${c.hiddenSize}, ${c.numLayers} layers, ${c.numHeads} heads / ${c.numKvHeads} KV heads, head_dim ${c.headDim}, vocab ${c.vocabSize}` +
        `${c.intermediateSize ? `, ffn ${c.intermediateSize}` : ''}${c.tieWordEmbeddings ? ', tied embeddings' : ''}${c.torchDtype ? `, ${c.torchDtype}` : ''}\n`);
    }
    if (input.configError) w(`\nconfig.json could not be read: ${input.configError.message}\n`);
    if (viewNote) w(`\nGGUF presets use the tensor names as stored: ${viewNote}\n`);
    w(`\npreset sizes (tensor data):\n`);
    w(table(['preset', 'container', 'size', 'bpw', 'note'], presets.map((p) => [
      p.preset, p.container, p.bytes !== undefined ? fmtBytes(p.bytes) : '-', p.bpw !== undefined ? fmtNum(p.bpw, 2) : '-',
      p.error ?? (p.warnings ? `${p.warnings} warning${p.warnings > 1 ? 's' : ''}` : ''),
    ]), [2, 3]));
    return report;
  } finally {
    await input.close();
  }
}
