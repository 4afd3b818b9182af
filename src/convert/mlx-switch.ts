// MLX MoE checkpoints (mlx_lm's own names) seen with the names the MoE converters and the forward
// already read. mlx_lm keeps a layer's experts stacked in one SwitchGLU: `<p>.switch_mlp.gate_proj`,
// `up_proj` and `down_proj`, each a [experts, rows, cols] weight (quantized as one MLX weight, or
// float) and optionally a [experts, rows] bias; its sanitize() builds them from Hugging Face's
// `mlp.experts.E.{gate,up,down}_proj` (Qwen-MoE, OLMoE, DeepSeek) and from Mixtral's
// `block_sparse_moe.experts.E.{w1,w3,w2}`. This view presents expert e of each stack under those
// names again: rows [e * rows, (e + 1) * rows) of the stack, read through the input's own row reads
// (an MLX weight is decoded there). Everything else passes through.
import { ErrorCodes, fail } from '../errors.js';
import { numel, tensorBytes, viewBase, type Checkpoint, type TensorInfo, type TensorValues } from '../io/checkpoint.js';
import { floatBytesToF32 } from '../io/dtypes.js';

const SWITCH = /^(model\.layers\.\d+\.)(mlp|block_sparse_moe)\.switch_mlp\.(gate_proj|up_proj|down_proj)\.(weight|bias)$/;
/** Mixtral's names of the three projections. */
const MIXTRAL = { gate_proj: 'w1', up_proj: 'w3', down_proj: 'w2' } as const;
const FLOAT = new Set(['F32', 'F16', 'BF16']);

/** Expert e of a stack: its rows [e * rows, (e + 1) * rows) (a bias: its values). */
interface Slice { src: TensorInfo; e: number; rows: number }

/** True when `input` holds mlx_lm's stacked experts. */
export function isMlxSwitchCheckpoint(input: Checkpoint): boolean {
  return input.tensors.some((t) => SWITCH.test(t.name));
}

export function mlxSwitchView(input: Checkpoint): Checkpoint {
  const bad = (t: string, why: string, value?: unknown): never =>
    fail(ErrorCodes.MODEL, `[mlx] ${input.source}: "${t}" ${why}`, { file: input.source, tensor: t, value });
  const made = new Map<string, { info: TensorInfo; slice?: Slice }>();
  const tensors: TensorInfo[] = [];
  for (const t of input.tensors) {
    const m = SWITCH.exec(t.name);
    if (!m) {
      made.set(t.name, { info: t });
      tensors.push(t);
      continue;
    }
    const [, p, block, proj, part] = m;
    const bias = part === 'bias';
    if (t.shape.length !== (bias ? 2 : 3) || t.shape.some((d) => d <= 0)) {
      bad(t.name, `has shape [${t.shape}]; expected [experts, ${bias ? 'rows' : 'rows, cols'}]`, t.shape);
    }
    if (bias && !FLOAT.has(t.dtype)) bad(t.name, `is ${t.dtype}; expected F32, F16 or BF16`, t.dtype);
    const [E, rows] = t.shape;
    const name = (e: number) => `${p}${block}.experts.${e}.${block === 'block_sparse_moe' ? MIXTRAL[proj as keyof typeof MIXTRAL] : proj}.${part}`;
    for (let e = 0; e < E; e++) {
      // A float stack's slices keep its dtype (their bytes are a slice of its bytes); a quantized
      // one's are its decoded values.
      const shape = t.shape.slice(1);
      const dtype = FLOAT.has(t.dtype) ? t.dtype : 'F32';
      const info: TensorInfo = { name: name(e), dtype, shape, offset: 0, byteLength: numel(shape) * (dtype === 'F32' ? 4 : 2) };
      if (made.has(info.name)) bad(t.name, `gives "${info.name}", which the checkpoint also holds`);
      made.set(info.name, { info, slice: { src: t, e, rows: bias ? 1 : rows } });
      tensors.push(info);
    }
  }

  const entry = (name: string) => made.get(name) ?? fail(ErrorCodes.TENSOR_NOT_FOUND, `[mlx] ${input.source}: no tensor named "${name}"`, { file: input.source, tensor: name });
  const rowsOf = (info: TensorInfo) => (info.shape.length > 1 ? info.shape[0] : 1);
  const inputRows = (name: string, r0: number, n: number) => {
    if (!input.readRows) fail(ErrorCodes.BAD_INPUT, `[mlx] ${input.source} reads no row ranges`, { file: input.source, tensor: name });
    return input.readRows!(name, r0, n);
  };
  /** Rows [r0, r0 + n) of an expert, as the input reads the stack's rows (a bias: one row). */
  const sliceRows = async (s: Slice, r0: number, n: number): Promise<TensorValues> => {
    const v = await inputRows(s.src.name, s.e * s.rows + r0, n);
    return FLOAT.has(s.src.dtype) || v.dtype === 'f32' ? v : { values: floatValues(v, s.src.name), dtype: 'f32' };
  };
  const floatValues = (v: TensorValues, name: string): Float32Array =>
    v.dtype === 'f32' ? (v.values as Float32Array) : floatBytesToF32(new Uint8Array(v.values.buffer, v.values.byteOffset, v.values.byteLength), v.dtype === 'f16' ? 'F16' : 'BF16', name);
  const whole = (name: string) => {
    const { info, slice } = entry(name);
    return sliceRows(slice!, 0, rowsOf(info));
  };
  // The stored bytes of a float stack's expert.
  const sliceBytes = (s: Slice, info: TensorInfo) => tensorBytes(input, s.src.name, s.e * info.byteLength, info.byteLength);

  const view: Checkpoint = {
    ...viewBase(input, tensors, (name) => entry(name).info),
    async readRaw(name) {
      const { info, slice } = entry(name);
      if (!slice) return input.readRaw(name);
      if (FLOAT.has(slice.src.dtype)) return sliceBytes(slice, info);
      const v = floatValues(await whole(name), name);
      return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    },
    async readF32(name) {
      const { slice } = entry(name);
      if (!slice) return input.readF32(name);
      return floatValues(await whole(name), name);
    },
    async readValues(name): Promise<TensorValues> {
      const { slice } = entry(name);
      if (!slice) return input.readValues(name);
      return whole(name);
    },
    async readRows(name, firstRow, rows): Promise<TensorValues> {
      const { info, slice } = entry(name);
      if (!slice) return inputRows(name, firstRow, rows);
      const total = rowsOf(info);
      if (!Number.isSafeInteger(firstRow) || !Number.isSafeInteger(rows) || firstRow < 0 || rows < 0 || firstRow + rows > total) {
        fail(ErrorCodes.BAD_INPUT, `[mlx] ${input.source}: rows [${firstRow}, ${firstRow + rows}) are outside the ${total} rows of "${name}"`, { file: input.source, tensor: name, value: [firstRow, rows] });
      }
      return sliceRows(slice, firstRow, rows);
    },
    locate(name, firstRow, rows) {
      const { slice } = entry(name);
      if (!slice) return input.locate?.(name, firstRow, rows);
      // A float stack's expert rows are rows of the stack; a decoded one's have no stored bytes.
      return FLOAT.has(slice.src.dtype) && slice.rows > 1 ? input.locate?.(slice.src.name, slice.e * slice.rows + firstRow, rows) : undefined;
    },
    ...(input.readBytes ? {
      readBytes: (name: string, at: number, length: number) => {
        const { info, slice } = entry(name);
        if (!slice) return input.readBytes!(name, at, length);
        if (!FLOAT.has(slice.src.dtype)) return fail(ErrorCodes.BAD_INPUT, `[mlx] "${name}" is decoded; it has no stored bytes`, { tensor: name });
        return input.readBytes!(slice.src.name, slice.e * info.byteLength + at, length);
      },
    } : {}),
  };
  return view;
}
