// gpt-oss checkpoints (model_type gpt_oss) seen with the names the MoE converters and the forward
// already read: each expert as Qwen-MoE's mlp.experts.E.{gate,up,down}_proj.{weight,bias}, the
// router as mlp.gate.{weight,bias}. Facts from the released checkpoints and transformers' GptOss:
// - experts.gate_up_proj holds gate and up interleaved: output row 2f is gate row f, 2f + 1 up row f
//   (the bias likewise); llama.cpp's converter splits them the same way;
// - as released (MXFP4), a matrix is `_blocks` [E, rows, cols/32, 16] (byte i: element 2i in the
//   low nibble, 2i + 1 in the high) and `_scales` [E, rows, cols/32] (E8M0, 2^(s-127)); an element
//   is E2M1(nibble) * 2^(s-127) (0, 0.5, 1, 1.5, 2, 3, 4, 6, then the same negated);
// - dequantized (BF16) releases store gate_up_proj as [E, hidden, 2 * ffn] and down_proj as
//   [E, ffn, hidden] (inputs first), which this view transposes.
// Decoded experts are F32; a row range reads only its rows' bytes. Everything else passes through.
import { ErrorCodes, fail } from '../errors.js';
import { numel, tensorBytes, viewBase, type Checkpoint, type TensorInfo, type TensorValues } from '../io/checkpoint.js';
import { floatBytesToF32 } from '../io/dtypes.js';

const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];
const EXPERTS = /^(model\.layers\.\d+\.mlp\.)experts\.(gate_up_proj|down_proj)(_blocks|_scales|_bias)?$/;
const ROUTER = /^(model\.layers\.\d+\.mlp\.)router\.(weight|bias)$/;

/** How a presented tensor is made. */
type Made =
  | { kind: 'alias'; src: string }
  /** Rows start, start + step, ... of expert e of an MXFP4 matrix (blocks, scales). */
  | { kind: 'mx'; blocks: TensorInfo; scales: string; e: number; start: number; step: number }
  /** Expert e of a [E, in, out] matrix, transposed, output rows start, start + step, ... */
  | { kind: 'dense'; src: TensorInfo; e: number; start: number; step: number }
  /** Values start, start + step, ... of row e of a [E, n] bias. */
  | { kind: 'bias'; src: TensorInfo; e: number; start: number; step: number };

/** True when `input` holds gpt-oss's packed experts or router (the names transformers saves). */
export function isGptOssCheckpoint(input: Checkpoint): boolean {
  return input.tensors.some((t) => EXPERTS.test(t.name) || ROUTER.test(t.name));
}

export function gptOssView(input: Checkpoint): Checkpoint {
  const bad = (t: string, why: string, value?: unknown): never =>
    fail(ErrorCodes.MODEL, `[gpt-oss] ${input.source}: "${t}" ${why}`, { file: input.source, tensor: t, value });
  const made = new Map<string, { info: TensorInfo; how: Made }>();
  const tensors: TensorInfo[] = [];
  const add = (name: string, shape: number[], dtype: string, how: Made) => {
    const info: TensorInfo = { name, dtype, shape, offset: 0, byteLength: numel(shape) * (dtype === 'F32' ? 4 : 2) };
    made.set(name, { info, how });
    tensors.push(info);
  };
  const has = new Set(input.tensors.map((t) => t.name));
  const floatDtype = (t: TensorInfo) => (['F32', 'F16', 'BF16'].includes(t.dtype) ? t : bad(t.name, `is ${t.dtype}; expected F32, F16 or BF16`, t.dtype));
  for (const t of input.tensors) {
    const r = ROUTER.exec(t.name);
    if (r) {
      add(`${r[1]}gate.${r[2]}`, t.shape, t.dtype, { kind: 'alias', src: t.name });
      continue;
    }
    const m = EXPERTS.exec(t.name);
    if (!m) {
      add(t.name, t.shape, t.dtype, { kind: 'alias', src: t.name });
      continue;
    }
    const [, p, which, part] = m;
    const gateUp = which === 'gate_up_proj';
    // The presented (name, first row, row step) of each half: gate and up interleaved, or down.
    const halves: [string, number, number][] = gateUp ? [['gate_proj', 0, 2], ['up_proj', 1, 2]] : [['down_proj', 0, 1]];
    if (part === '_scales') {
      if (!has.has(`${p}experts.${which}_blocks`)) bad(t.name, `has no ${which}_blocks beside it`);
      continue;
    }
    if (part === '_bias') {
      floatDtype(t);
      if (t.shape.length !== 2 || t.shape[1] % halves.length !== 0) bad(t.name, `has shape [${t.shape}]; expected [experts, ${gateUp ? '2 * ffn' : 'hidden'}]`, t.shape);
      for (let e = 0; e < t.shape[0]; e++) {
        for (const [h, start, step] of halves) add(`${p}experts.${e}.${h}.bias`, [t.shape[1] / halves.length], 'F32', { kind: 'bias', src: t, e, start, step });
      }
      continue;
    }
    if (part === '_blocks') {
      const scales = `${p}experts.${which}_scales`;
      const s = has.has(scales) ? input.tensor(scales) : bad(t.name, `has no ${which}_scales beside it`);
      const [E, rows, nb, sixteen] = t.shape;
      if (t.dtype !== 'U8' || s.dtype !== 'U8' || t.shape.length !== 4 || sixteen !== 16 || s.shape.join() !== [E, rows, nb].join() || rows % halves.length !== 0) {
        bad(t.name, `(${t.dtype} [${t.shape}]) and its scales (${s.dtype} [${s.shape}]) are not MXFP4 blocks [experts, rows, cols/32, 16] U8 and scales [experts, rows, cols/32] U8`, t.shape);
      }
      for (let e = 0; e < E; e++) {
        for (const [h, start, step] of halves) add(`${p}experts.${e}.${h}.weight`, [rows / halves.length, nb * 32], 'F32', { kind: 'mx', blocks: t, scales, e, start, step });
      }
      continue;
    }
    // Dequantized releases: [E, in, out].
    floatDtype(t);
    if (t.shape.length !== 3 || t.shape[2] % halves.length !== 0) bad(t.name, `has shape [${t.shape}]; expected [experts, in, out]`, t.shape);
    for (let e = 0; e < t.shape[0]; e++) {
      for (const [h, start, step] of halves) add(`${p}experts.${e}.${h}.weight`, [t.shape[2] / halves.length, t.shape[1]], 'F32', { kind: 'dense', src: t, e, start, step });
    }
  }

  const entry = (name: string) => made.get(name) ?? fail(ErrorCodes.TENSOR_NOT_FOUND, `[gpt-oss] ${input.source}: no tensor named "${name}"`, { file: input.source, tensor: name });
  const bytes = (src: string, at: number, length: number) => tensorBytes(input, src, at, length);

  /** Rows [r0, r0 + n) of a decoded tensor. */
  async function rowsOf(info: TensorInfo, how: Exclude<Made, { kind: 'alias' }>, r0: number, n: number): Promise<Float32Array> {
    const cols = info.shape.length === 2 ? info.shape[1] : 1;
    const out = new Float32Array(n * cols);
    if (how.kind === 'bias') {
      const per = how.src.shape[1], es = how.src.dtype === 'F32' ? 4 : 2;
      const row = floatBytesToF32(await bytes(how.src.name, how.e * per * es, per * es), how.src.dtype, how.src.name);
      for (let i = 0; i < n; i++) out[i] = row[how.start + (r0 + i) * how.step];
      return out;
    }
    if (how.kind === 'dense') {
      // Expert e is [in, out]: presented row f is column start + f * step.
      const [, inn, outn] = how.src.shape, es = how.src.dtype === 'F32' ? 4 : 2;
      const m = floatBytesToF32(await bytes(how.src.name, how.e * inn * outn * es, inn * outn * es), how.src.dtype, how.src.name);
      for (let i = 0; i < n; i++) {
        const c = how.start + (r0 + i) * how.step;
        for (let j = 0; j < inn; j++) out[i * cols + j] = m[j * outn + c];
      }
      return out;
    }
    const [, rows, nb] = how.blocks.shape;
    // Source rows of expert e: start + r * step; read the span they lie in.
    const first = how.e * rows + how.start + r0 * how.step;
    const span = n === 0 ? 0 : (n - 1) * how.step + 1;
    const q = await bytes(how.blocks.name, first * nb * 16, span * nb * 16);
    const s = await bytes(how.scales, first * nb, span * nb);
    for (let i = 0; i < n; i++) {
      const sr = i * how.step;
      for (let b = 0; b < nb; b++) {
        const scale = 2 ** (s[sr * nb + b] - 127);
        const qb = (sr * nb + b) * 16, o = i * cols + b * 32;
        for (let j = 0; j < 16; j++) {
          const byte = q[qb + j];
          out[o + 2 * j] = E2M1[byte & 15] * scale;
          out[o + 2 * j + 1] = E2M1[byte >> 4] * scale;
        }
      }
    }
    return out;
  }

  // Rows of a decoded matrix; a bias vector's values count as its rows.
  const decodedRows = (name: string) => entry(name).info.shape[0];

  const view: Checkpoint = {
    ...viewBase(input, tensors, (name) => entry(name).info),
    async readRaw(name) {
      const { info, how } = entry(name);
      if (how.kind === 'alias') return input.readRaw(how.src);
      const v = await rowsOf(info, how, 0, decodedRows(name));
      return new Uint8Array(v.buffer);
    },
    async readF32(name) {
      const { info, how } = entry(name);
      if (how.kind === 'alias') return input.readF32(how.src);
      return rowsOf(info, how, 0, decodedRows(name));
    },
    async readValues(name): Promise<TensorValues> {
      const { info, how } = entry(name);
      if (how.kind === 'alias') return input.readValues(how.src);
      return { values: await rowsOf(info, how, 0, decodedRows(name)), dtype: 'f32' };
    },
    async readRows(name, firstRow, rows): Promise<TensorValues> {
      const { info, how } = entry(name);
      if (how.kind === 'alias') {
        if (!input.readRows) fail(ErrorCodes.BAD_INPUT, `[gpt-oss] ${input.source} reads no row ranges`, { file: input.source, tensor: name });
        return input.readRows!(how.src, firstRow, rows);
      }
      const total = decodedRows(name);
      if (!Number.isSafeInteger(firstRow) || !Number.isSafeInteger(rows) || firstRow < 0 || rows < 0 || firstRow + rows > total) {
        fail(ErrorCodes.BAD_INPUT, `[gpt-oss] ${input.source}: rows [${firstRow}, ${firstRow + rows}) are outside the ${total} rows of "${name}"`, { file: input.source, tensor: name, value: [firstRow, rows] });
      }
      return { values: await rowsOf(info, how, firstRow, rows), dtype: 'f32' };
    },
    locate(name, firstRow, rows) {
      const { how } = entry(name);
      return how.kind === 'alias' ? input.locate?.(how.src, firstRow, rows) : undefined;
    },
    ...(input.readBytes ? {
      readBytes: (name: string, at: number, length: number) => {
        const { how } = entry(name);
        return how.kind === 'alias' ? input.readBytes!(how.src, at, length) : fail(ErrorCodes.BAD_INPUT, `[gpt-oss] "${name}" is decoded; it has no stored bytes`, { tensor: name });
      },
    } : {}),
  };
  return view;
}
