// bitsandbytes-style NF4/FP4, FP8 (E4M3FN, E5M2), OCP MXFP4 and ModelOpt's NVFP4. Layouts and
// rounding rules are documented beside the kernels: assembly/bnb/bnb4.ts, dq.ts, fp8.ts, mxfp4.ts, nvfp4.ts.
import { moduleName, type FormatSpec, type PreparedArgs, type ResolvedOptions, type Section, type TensorContext } from './types.js';
import type { KernelArgs } from '../kernels/args.js';
import { numel } from '../io/checkpoint.js';
import { ErrorCodes, fail } from '../errors.js';

const GROUP_SIZES = [32, 64, 128, 256] as const;

/** transformers' names of the input dtypes, as a bitsandbytes quant state records them. */
const TORCH_DTYPE = { f32: 'float32', f16: 'float16', bf16: 'bfloat16' } as const;

/** bitsandbytes' nested block: the absmax values are double-quantized 256 at a time. */
const NESTED_BLOCK = 256;
/** A number as long as any f32 offset can print (JSON's shortest round trip, sign and exponent). */
const WIDEST_OFFSET = -1.2345678901234567e-300;

/**
 * bitsandbytes' JSON quant state of a 4-bit weight (transformers' `<w>.quant_state.bitsandbytes__<type>`),
 * with the nested block and offset of double quantization when `offset` is given. Padded with
 * spaces to the length the widest dtype name and offset give, so that the layout is known before
 * the input's dtype and the offset are (JSON readers skip the trailing whitespace).
 */
export function bnbQuantState(type: 'nf4' | 'fp4', blocksize: number, shape: number[], dtype: keyof typeof TORCH_DTYPE = 'bf16', offset?: number): Uint8Array {
  const json = (d: string, off?: number) => JSON.stringify({
    quant_type: type, blocksize, dtype: d, shape,
    ...(off === undefined ? {} : { nested_blocksize: NESTED_BLOCK, nested_dtype: 'float32', nested_offset: off }),
  });
  const len = json('bfloat16', offset === undefined ? undefined : WIDEST_OFFSET).length;
  return new TextEncoder().encode(json(TORCH_DTYPE[dtype], offset).padEnd(len, ' '));
}

/**
 * bitsandbytes' 4-bit code books as f32 bits (the kernels' NF4_TABLE and FP4_TABLE, which the
 * registry test compares with these): the quant_map section, written without the kernels.
 */
export const CODE_BOOKS = {
  nf4: [
    0xbf800000, 0xbf3239b1, 0xbf066b30, 0xbeca32a0, 0xbe91a24d, 0xbe3d353f, 0xbdba7871, 0x00000000,
    0x3da2faff, 0x3e24cae3, 0x3e7c04dd, 0x3ead033a, 0x3ee1a4b8, 0x3f1007ab, 0x3f3913b3, 0x3f800000,
  ],
  fp4: [
    0x00000000, 0x3baaaaab, 0x3f2aaaab, 0x3f800000, 0x3eaaaaab, 0x3f000000, 0x3e2aaaab, 0x3e800000,
    0x80000000, 0xbbaaaaab, 0xbf2aaaab, 0xbf800000, 0xbeaaaaab, 0xbf000000, 0xbe2aaaab, 0xbe800000,
  ],
} as const;

const littleEndianU32 = (words: readonly number[]) => {
  const b = new Uint8Array(words.length * 4);
  const v = new DataView(b.buffer);
  words.forEach((w, i) => v.setUint32(i * 4, w, true));
  return b;
};

const stateBytes = (type: 'nf4' | 'fp4', nrows: number, rowLen: number, o: ResolvedOptions) =>
  bnbQuantState(type, o.groupSize, [nrows, rowLen], 'bf16', o.doubleQuant ? 0 : undefined).length;

/** Blocks of the flattened tensor, and bitsandbytes' nested groups of 256 of them. */
function flatBlocks(nrows: number, rowLen: number, o: ResolvedOptions) {
  const blocks = (nrows * rowLen) / o.groupSize;
  return { blocks, groups: Math.ceil(blocks / NESTED_BLOCK) };
}

/**
 * 4-bit NF4 / FP4 as transformers saves bitsandbytes' Linear4bit (the "-bnb-4bit" checkpoints):
 * the nf4 / fp4 kernels' codes and f32 absmax per block, then bitsandbytes' code book (quant_map)
 * and JSON quant state as tensor sections, written under its names. With double quantization
 * (bnb_4bit_use_double_quant) the absmax values are bitsandbytes' nested 8-bit codes instead
 * (nf4's own: their mean subtracted, then the signed dynamic map in groups of 256 blocks of the
 * flattened tensor), with the group absmax values as nested_absmax, the dynamic map as
 * nested_quant_map and the mean as the quant state's nested_offset.
 */
function bnbSaved(type: 'nf4' | 'fp4'): FormatSpec {
  const base = bnb4(type, '');
  return {
    ...base,
    name: `bnb_${type}`,
    description: `${type.toUpperCase()} as transformers saves bitsandbytes 4-bit (<w>, <w>.absmax, <w>.quant_map, <w>.quant_state.bitsandbytes__${type}; with doubleQuant also <w>.nested_absmax, <w>.nested_quant_map), absmax per block of 64 (or 128, 256)`,
    groupSizes: [64, 128, 256],
    rowSections: (rowLen, o) => [
      { name: 'codes', bytes: rowLen / 2 },
      o.doubleQuant ? { name: 'absmax_codes', bytes: rowLen / o.groupSize } : { name: 'scales', bytes: (rowLen / o.groupSize) * 4 },
    ],
    tensorSections: (nrows, rowLen, o) => [
      // nested_absmax first: nf4's prepare() fills it (auxInit) and the kernels read it from aux.
      ...(o.doubleQuant ? [{ name: 'nested_absmax', bytes: flatBlocks(nrows, rowLen, o).groups * 4 }, { name: 'nested_quant_map', bytes: 1024 }] : []),
      // Without double quantization nothing here depends on the values: the tensor can be cut
      // into row chunks (see Section.constant).
      { name: 'quant_map', bytes: 64, constant: true },
      { name: 'quant_state', bytes: stateBytes(type, nrows, rowLen, o), constant: !o.doubleQuant },
    ],
    dtypeSections: ['quant_state'],
    constantBytes(section, t) {
      if (section === 'quant_map') return littleEndianU32(CODE_BOOKS[type]);
      return bnbQuantState(type, t.opts.groupSize, [t.nrows, t.rowLen], t.dtype);
    },
    finish(ctx, data, layout, args) {
      if (!ctx.opts.doubleQuant) return;
      const k = ctx.kernels;
      const put = (name: string, bytes: Uint8Array) => data.set(bytes, layout.sections.find((s) => s.name === name)!.offset);
      put('nested_quant_map', k.u8(k.constant('DYN'), 1024));
      put('quant_state', bnbQuantState(type, ctx.opts.groupSize, [ctx.nrows, ctx.rowLen], ctx.dtype ?? 'bf16', args.tscale));
    },
    storedArgs(section, o) {
      if (!o.doubleQuant) return {};
      let offset: unknown;
      try {
        offset = (JSON.parse(new TextDecoder().decode(section('quant_state'))) as { nested_offset?: unknown }).nested_offset;
      } catch {
        offset = undefined;
      }
      if (typeof offset !== 'number' || !Number.isFinite(offset)) {
        fail(ErrorCodes.BAD_INPUT, `[dequantize] bnb_${type}: the quant_state section has no finite nested_offset (double quantization)`, { option: 'quant_state', value: String(offset), expected: 'JSON with a number nested_offset' });
      }
      return { tscale: Math.fround(offset as number) };
    },
    // The codes over the flattened tensor as [values / 2, 1] and one absmax per block, as
    // Params4bit keeps them; shapes of any rank are flattened the same way.
    safetensorsEntries: {
      codes: { name: (n) => n, dtype: () => 'U8', shape: (s) => [numel(s) / 2, 1] },
      scales: { name: (n) => `${n}.absmax`, dtype: () => 'F32', shape: (s, o) => [numel(s) / o.groupSize] },
      absmax_codes: { name: (n) => `${n}.absmax`, dtype: () => 'U8', shape: (s, o) => [numel(s) / o.groupSize] },
      nested_absmax: { name: (n) => `${n}.nested_absmax`, dtype: () => 'F32', shape: (s, o) => [Math.ceil(numel(s) / o.groupSize / NESTED_BLOCK)] },
      nested_quant_map: { name: (n) => `${n}.nested_quant_map`, dtype: () => 'F32', shape: () => [256] },
      quant_map: { name: (n) => `${n}.quant_map`, dtype: () => 'F32', shape: () => [16] },
      quant_state: { name: (n) => `${n}.quant_state.bitsandbytes__${type}`, dtype: () => 'U8', shape: (s, o) => [stateBytes(type, numel(s) / s[s.length - 1], s[s.length - 1], o)] },
    },
  };
}

/**
 * LLM.int8 as transformers saves bitsandbytes' Linear8bitLt (load_in_8bit): int8 codes of
 * x * (127 / row absmax), the absmax per row as SCB, and weight_format 0 (assembly/bnb/int8.ts).
 */
const bnbInt8: FormatSpec = {
  name: 'bnb_int8',
  family: 'bnb',
  description: 'LLM.int8 as transformers saves bitsandbytes 8-bit (<m>.weight I8, <m>.SCB F32 per row, <m>.weight_format): round(x * 127 / row absmax)',
  kernel: 'bnb_int8',
  blockSize: () => 1,
  calibrations: ['absmax'],
  importance: false,
  rowSections: (rowLen) => [{ name: 'codes', bytes: rowLen }, { name: 'scb', bytes: 4 }],
  // bitsandbytes' row-major format id, 0 whatever the values.
  tensorSections: () => [{ name: 'weight_format', bytes: 1, constant: true }],
  constantBytes: () => new Uint8Array(1),
  safetensorsEntries: {
    codes: { name: (n) => n, dtype: () => 'I8', shape: (s) => [numel(s) / s[s.length - 1], s[s.length - 1]] },
    scb: { name: (n) => `${moduleName(n)}.SCB`, dtype: () => 'F32', shape: (s) => [numel(s) / s[s.length - 1]] },
    weight_format: { name: (n) => `${moduleName(n)}.weight_format`, dtype: () => 'U8', shape: () => [] },
  },
};

/**
 * NF4 / FP4 in webquant's layout. With double quantization, bitsandbytes' own (assembly/bnb/dq.ts):
 * the row section absmax_codes, then the tensor sections absmax_scales (f32 per 256 blocks of the
 * flattened tensor, first: prepare() fills it and the kernels read it from aux) and offset.
 */
function bnb4(name: 'nf4' | 'fp4', description: string): FormatSpec {
  return {
    name,
    family: 'bnb',
    description,
    kernel: name,
    blockSize: (o) => o.groupSize,
    calibrations: ['absmax'],
    importance: false,
    groupSizes: GROUP_SIZES,
    doubleQuant: true,
    defaults: { groupSize: 64 },
    rowSections(rowLen, o): Section[] {
      const nb = rowLen / o.groupSize;
      const codes = { name: 'codes', bytes: rowLen / 2 };
      return [codes, o.doubleQuant ? { name: 'absmax_codes', bytes: nb } : { name: 'scales', bytes: nb * 4 }];
    },
    tensorSections: (nrows, rowLen, o) => (o.doubleQuant ? [{ name: 'absmax_scales', bytes: flatBlocks(nrows, rowLen, o).groups * 4 }, { name: 'offset', bytes: 4 }] : []),
    async prepare(ctx: TensorContext): Promise<PreparedArgs> {
      if (!ctx.opts.doubleQuant) return {};
      // bitsandbytes' offset: the mean of every block absmax (summed in f64, in row-major block
      // order, then rounded once); then each group's largest |absmax - offset|.
      const sum = await ctx.reduce('bnb4_absmax_sum', 16);
      const offset = Math.fround(sum.getFloat64(0, true) / sum.getFloat64(8, true));
      const { groups } = flatBlocks(ctx.nrows, ctx.rowLen, ctx.opts);
      const nested = await ctx.reduce('bnb4_nested_absmax', 16 + groups * 4, (out) => out.setFloat32(0, offset, true));
      return { tscale: offset, auxInit: new Uint8Array(nested.buffer, nested.byteOffset + 16, groups * 4) };
    },
    finish(_ctx, data, layout, args) {
      const off = layout.sections.find((s) => s.name === 'offset');
      if (off) new DataView(data.buffer, data.byteOffset + off.offset, 4).setFloat32(0, args.tscale!, true);
    },
    storedArgs(section, o) {
      if (!o.doubleQuant) return {};
      const b = section('offset');
      return { tscale: new DataView(b.buffer, b.byteOffset, 4).getFloat32(0, true) };
    },
  };
}

// FP8 scale per row ('channel', default) or per tensor ('tensor'):
//   absmax          s = amax / FMAX
//   clip,<r>        s = (amax * r) / FMAX: values beyond r * amax saturate to +-FMAX
//   fixed,<s>,<m>   s as given (same for every row), inputs clamped to [-m, m] first; with
//                   s = m / FMAX this maps the bound |x| <= m onto the format's range.
const FP8_CALIBRATIONS = ['absmax', 'clip', 'fixed'] as const;

function fp8(name: 'fp8_e4m3' | 'fp8_e5m2', fmax: number, description: string): FormatSpec {
  return {
    name,
    family: 'fp8',
    description,
    kernel: name,
    blockSize: () => 1,
    calibrations: FP8_CALIBRATIONS,
    importance: false,
    granularities: ['channel', 'tensor'],
    defaults: { granularity: 'channel' },
    rowSections: (rowLen, o) =>
      o.granularity === 'tensor' ? [{ name: 'codes', bytes: rowLen }] : [{ name: 'codes', bytes: rowLen }, { name: 'scales', bytes: 4 }],
    tensorSections: (_nrows, _rowLen, o) => (o.granularity === 'tensor' ? [{ name: 'scale', bytes: 4 }] : []),
    async prepare(ctx: TensorContext): Promise<Partial<KernelArgs>> {
      if (ctx.opts.granularity !== 'tensor') return {};
      const c = ctx.opts.calibration;
      if (c.method === 'fixed') return { tscale: Math.fround(c.scale!) };
      const amax = (await ctx.reduce('fp8_absmax', 4)).getFloat32(0, true);
      // The same f32 operations the kernel does per row for 'channel'.
      const top = c.method === 'clip' ? Math.fround(amax * Math.fround(c.ratio!)) : amax;
      return { tscale: Math.fround(top / fmax) };
    },
  };
}

/** ModelOpt's NVFP4 weights_scaling_factor_2: amax / (6 * 448), an f32 division. */
const nvfp4Scale2 = (amax: number) => Math.fround(amax / 2688);

export const bnbFormats: FormatSpec[] = [
  bnb4('nf4', 'bitsandbytes NF4: 4-bit normal-float code book, f32 absmax per group (4.5 bpw at group 64)'),
  bnb4('fp4', 'bitsandbytes FP4: 4-bit E2M1-style code book, f32 absmax per group (4.5 bpw at group 64)'),
  bnbSaved('nf4'),
  bnbSaved('fp4'),
  bnbInt8,
  fp8('fp8_e4m3', 448, 'FP8 E4M3FN (OCP, finite, max 448), saturating RNE, f32 scale per row or tensor'),
  fp8('fp8_e5m2', 57344, 'FP8 E5M2 (max 57344), saturating RNE, f32 scale per row or tensor'),
  {
    name: 'mxfp4',
    family: 'mx',
    description: 'OCP MXFP4: 32 E2M1 values + one E8M0 scale per block, 17 bytes (4.25 bpw)',
    kernel: 'mxfp4',
    blockSize: () => 32,
    calibrations: ['absmax'],
    importance: false,
    rowSections: (rowLen) => [{ name: 'blocks', bytes: (rowLen / 32) * 17 }],
    ggufTwin: 'mxfp4_gguf',
  },
  {
    name: 'nvfp4',
    family: 'mx',
    description: 'NVFP4 as ModelOpt exports it: 16 E2M1 values per E4M3 scale, one f32 scale per tensor (4.5 bpw); safetensors <w>, <w>_scale, <w>_scale_2',
    kernel: 'nvfp4',
    blockSize: () => 16,
    calibrations: ['absmax'],
    importance: false,
    rowSections: (rowLen) => [{ name: 'codes', bytes: rowLen / 2 }, { name: 'scales', bytes: rowLen / 16 }],
    // input_scale (amax of the layer's input over calibration data / 2688) only when given:
    // runtimes that quantize activations (W4A4) need it, weight-only ones ignore it.
    inputScale: true,
    tensorSections: (_n, _r, o) => [{ name: 'scale_2', bytes: 4 }, ...(o.inputScale !== undefined ? [{ name: 'input_scale', bytes: 4, constant: true }] : [])],
    constantBytes: (_section, t) => { const b = new Uint8Array(4); new DataView(b.buffer).setFloat32(0, t.opts.inputScale!, true); return b; },
    // Named in the GGUF refusal: ggml's NVFP4 (64-value blocks, no tensor scale, its own rounding).
    ggufTwin: 'nvfp4_gguf',
    sharedScale: { of: nvfp4Scale2 },
    async prepare(ctx: TensorContext): Promise<Partial<KernelArgs>> {
      if (ctx.tensorScale !== undefined) return { tscale: Math.fround(ctx.tensorScale) };
      return { tscale: nvfp4Scale2((await ctx.reduce('fp8_absmax', 4)).getFloat32(0, true)) };
    },
    safetensorsEntries: {
      codes: { name: (n) => n, dtype: () => 'U8', shape: (s) => [...s.slice(0, -1), s[s.length - 1] / 2] },
      scales: { name: (n) => `${n}_scale`, dtype: () => 'F8_E4M3', shape: (s) => [...s.slice(0, -1), s[s.length - 1] / 16] },
      scale_2: { name: (n) => `${n}_scale_2`, dtype: () => 'F32', shape: () => [] },
      input_scale: { name: (n) => `${moduleName(n)}.input_scale`, dtype: () => 'F32', shape: () => [] },
    },
  },
];
