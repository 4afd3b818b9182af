// `webquant quantize <in> -o <folder>/` and MLX output: the folder holds model.safetensors, the
// input's config.json (with mlx_lm's "quantization" entry for mlx tensors) and its tokenizer
// files; the mlx tensors are MLX's entries (U32 codes, bf16 .scales / .biases per module), decoded
// here as MLX decodes them (test/reference/mlx-ref.ts) and against quantize() of the same tensor.
import { beforeAll, describe, expect, it } from 'vitest';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SHARED, hasShared } from '../helpers/shared.js';
import { cli, ensureBuilt, tempDir } from './helpers.js';
import { fromBuffer } from '../../src/io/source.js';
import { openSafetensors } from '../../src/io/safetensors.js';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect } from '../../src/io/stream.js';
import { openCheckpoint } from '../../src/io/open.js';
import { quantize, dequantize } from '../../src/quantize.js';
import { openQuantized } from '../../src/serve/index.js';
import { moduleName } from '../../src/formats/types.js';
import { mlxQuantizationConfig } from '../../src/io/runtime-config.js';
import { mlxDequantizeRef } from '../reference/mlx-ref.js';
import { ErrorCodes } from '../../src/errors.js';
import { activationAmax, nvfp4InputScale } from '../../src/eval/activations.js';
import { llamaConfig } from '../../src/eval/llama.js';
import { quantizedWeights } from '../../src/eval/quantized.js';
import { readTokens } from '../../src/eval/tokens.js';
import type { PlannedTensor } from '../../src/plan/types.js';

const DIR = join(SHARED, 'models/stories260K');
// bitsandbytes' NF4 code book (its published table)
const NF4 = [-1, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0,
  0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1];

const concat = (parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.byteLength, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.byteLength; }
  return out;
};

describe.skipIf(!hasShared)('quantize into a folder', () => {
  let tmp: string;
  let input: string;
  beforeAll(async () => {
    await ensureBuilt();
    tmp = tempDir('folder');
    // A Hugging Face folder: the BF16 checkpoint, its config.json and two tokenizer files.
    input = join(tmp, 'in');
    mkdirSync(input);
    copyFileSync(join(DIR, 'model.bf16.safetensors'), join(input, 'model.safetensors'));
    copyFileSync(join(DIR, 'config.json'), join(input, 'config.json'));
    writeFileSync(join(input, 'tokenizer.json'), '{"model": {"type": "BPE"}}');
    writeFileSync(join(input, 'tokenizer_config.json'), '{"bos_token": "<s>"}');
  });

  it('mlx4: MLX entries, config.json with "quantization", tokenizer files', async () => {
    const out = join(tmp, 'mlx4');
    const r = await cli(['quantize', input, '-o', `${out}/`, '--preset', 'mlx4', '--json'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(out).sort()).toEqual(['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']);
    expect(readFileSync(join(out, 'tokenizer.json'), 'utf8')).toBe(readFileSync(join(input, 'tokenizer.json'), 'utf8'));
    const config = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
    const original = JSON.parse(readFileSync(join(input, 'config.json'), 'utf8'));
    expect(config.quantization).toEqual({ group_size: 64, bits: 4 });
    expect(config.quantization_config).toEqual(config.quantization);
    expect({ ...config, quantization: undefined, quantization_config: undefined }).toEqual({ ...original, quantization: undefined, quantization_config: undefined });

    const src = await openSafetensors(fromBuffer(new Uint8Array(readFileSync(join(input, 'model.safetensors'))), 'in'));
    const ck = await openSafetensors(fromBuffer(new Uint8Array(readFileSync(join(out, 'model.safetensors'))), 'out'));
    const served = await openQuantized(fromBuffer(new Uint8Array(readFileSync(join(out, 'model.safetensors'))), 'out'));
    let quantized = 0, kept = 0;
    for (const t of src.tensors) {
      const cols = t.shape[t.shape.length - 1];
      const mod = moduleName(t.name);
      if (!ck.tensors.some((e) => e.name === `${mod}.scales`)) {
        // Kept as stored: norms, and the FFN down projections (172 columns: no group of 64 or 32 fits).
        expect(ck.tensor(t.name).dtype, t.name).toBe('BF16');
        kept++;
        continue;
      }
      quantized++;
      const w = ck.tensor(t.name), s = ck.tensor(`${mod}.scales`), b = ck.tensor(`${mod}.biases`);
      expect([w.dtype, w.shape], t.name).toEqual(['U32', [t.shape[0], cols / 8]]);
      expect([s.dtype, s.shape], t.name).toEqual(['BF16', [t.shape[0], cols / 64]]);
      expect([b.dtype, b.shape], t.name).toEqual(['BF16', [t.shape[0], cols / 64]]);
      const bytes = concat([await ck.readRaw(t.name), await ck.readRaw(s.name), await ck.readRaw(b.name)]);
      const values = await src.readValues(t.name);
      const q = await quantize(values.values, { format: 'mlx', rowLength: cols, dtype: values.dtype, bits: 4, groupSize: 64 });
      expect(Buffer.from(bytes).equals(Buffer.from(q.data)), t.name).toBe(true);
      const asMlx = mlxDequantizeRef(bytes, t.shape[0] * cols, { bits: 4, groupSize: 64, scaleDtype: 'bf16' });
      expect([...await served.tensor(t.name).dequantize()], t.name).toEqual([...asMlx]);
      expect([...await dequantize(q)], t.name).toEqual([...asMlx]);
    }
    // the token embedding, 5 x (q, k, v, o, gate, up); 11 norms and 5 down projections kept
    expect([quantized, kept]).toEqual([31, 16]);
  });

  it('an mlx_lm folder (no webquant metadata) becomes GGUF from its values', async () => {
    // mlx4's output less webquant's metadata: what mlx_lm convert -q writes
    const ours = join(tmp, 'mlx4');
    if (!existsSync(join(ours, 'model.safetensors'))) await cli(['quantize', input, '-o', `${ours}/`, '--preset', 'mlx4'], { cwd: tmp });
    const foreign = join(tmp, 'mlx-community');
    mkdirSync(foreign);
    const ck = await openSafetensors(fromBuffer(new Uint8Array(readFileSync(join(ours, 'model.safetensors'))), 'ours'));
    const tensors = await Promise.all(ck.tensors.map(async (t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, data: await ck.readRaw(t.name) })));
    writeFileSync(join(foreign, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
    copyFileSync(join(ours, 'config.json'), join(foreign, 'config.json'));
    const r = await cli(['quantize', foreign, '-o', 'from-mlx.gguf', '--preset', 'q8_0', '--tokenizer', 'none'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const mlx = await openSafetensors(fromBuffer(new Uint8Array(readFileSync(join(foreign, 'model.safetensors'))), 'mlx'), { mlx: { groupSize: 64, bits: 4 } });
    expect(mlx.tensor('model.layers.0.mlp.gate_proj.weight').dtype).toBe('MLX_AFFINE');
    const gguf = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(join(tmp, 'from-mlx.gguf'))), 'gguf'));
    for (const [st, gg] of [['model.layers.0.mlp.gate_proj.weight', 'blk.0.ffn_gate.weight'], ['model.embed_tokens.weight', 'token_embd.weight']]) {
      const values = await mlx.readF32(st);
      const q = await quantize(values, { format: 'q8_0', rowLength: mlx.tensor(st).shape[1] });
      expect(Buffer.from(await gguf.readRaw(gg)).equals(Buffer.from(q.data)), gg).toBe(true);
    }
    // and safetensors: int8 of its values, the (protected) token embedding kept as its F32 values
    const r8 = await cli(['quantize', foreign, '-o', 'from-mlx.safetensors', '--preset', 'int8'], { cwd: tmp });
    expect(r8.code, r8.stderr).toBe(0);
    const st = await openSafetensors(fromBuffer(new Uint8Array(readFileSync(join(tmp, 'from-mlx.safetensors'))), 'st'));
    const emb = st.tensor('model.embed_tokens.weight');
    expect([emb.dtype, emb.shape]).toEqual(['F32', [512, 64]]);
    expect([...await st.readF32(emb.name)]).toEqual([...await mlx.readF32(emb.name)]);
    const served = await openQuantized(fromBuffer(new Uint8Array(readFileSync(join(tmp, 'from-mlx.safetensors'))), 'st'));
    const gate = 'model.layers.0.mlp.gate_proj.weight';
    const q8 = await quantize(await mlx.readF32(gate), { format: 'int8', rowLength: 64 });
    expect([...await served.tensor(gate).dequantize()]).toEqual([...await dequantize(q8)]);
  });

  it('bnb-nf4: transformers\' bitsandbytes 4-bit entries and quantization_config, read back as BNB_4BIT', async () => {
    const out = join(tmp, 'bnb');
    const r = await cli(['quantize', input, '-o', `${out}/`, '--preset', 'bnb-nf4'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const config = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
    const qc = config.quantization_config;
    expect(qc).toMatchObject({ quant_method: 'bitsandbytes', load_in_4bit: true, bnb_4bit_quant_type: 'nf4', bnb_4bit_use_double_quant: false, bnb_4bit_compute_dtype: 'bfloat16', bnb_4bit_quant_storage: 'uint8' });
    // the FFN down projections (172 columns) stay BF16: transformers must not expect them quantized
    expect(qc.llm_int8_skip_modules).toEqual([0, 1, 2, 3, 4].map((l) => `model.layers.${l}.mlp.down_proj`));
    const bytes = new Uint8Array(readFileSync(join(out, 'model.safetensors')));
    const ck = await openSafetensors(fromBuffer(bytes, 'out'));
    const src = await openSafetensors(fromBuffer(new Uint8Array(readFileSync(join(input, 'model.safetensors'))), 'in'));
    const name = 'model.layers.0.self_attn.q_proj.weight';
    const [rows, cols] = src.tensor(name).shape;
    expect(ck.tensor(name)).toMatchObject({ dtype: 'U8', shape: [(rows * cols) / 2, 1] });
    expect(ck.tensor(`${name}.absmax`)).toMatchObject({ dtype: 'F32', shape: [(rows * cols) / 64] });
    expect(ck.tensor(`${name}.quant_map`)).toMatchObject({ dtype: 'F32', shape: [16] });
    const state = JSON.parse(new TextDecoder().decode(await ck.readRaw(`${name}.quant_state.bitsandbytes__nf4`)));
    expect(state).toEqual({ quant_type: 'nf4', blocksize: 64, dtype: 'bfloat16', shape: [rows, cols] });
    // the codes and absmax are nf4's; the code book is bitsandbytes' NF4 table
    const values = await src.readValues(name);
    const nf4 = await quantize(values.values, { format: 'nf4', rowLength: cols, dtype: values.dtype });
    expect(Buffer.from(concat([await ck.readRaw(name), await ck.readRaw(`${name}.absmax`)])).equals(Buffer.from(nf4.data)), 'codes and absmax').toBe(true);
    expect([...new Float32Array((await ck.readRaw(`${name}.quant_map`)).slice().buffer)]).toEqual(NF4.map(Math.fround));
    // the same file without webquant's metadata, as transformers would save it: BNB_4BIT values
    const plain = await openSafetensors(fromBuffer(await collect(writeSafetensors({ tensors: await Promise.all(ck.tensors.map(async (t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, data: await ck.readRaw(t.name) }))) })), 'plain'));
    expect(plain.tensor(name)).toMatchObject({ dtype: 'BNB_4BIT', shape: [rows, cols] });
    expect([...await plain.readF32(name)]).toEqual([...await dequantize(nf4)]);
  });

  it('bnb-nf4-dq: bitsandbytes double quantization (nested absmax, offset in the quant state), read back as BNB_4BIT', async () => {
    const out = join(tmp, 'bnb-dq');
    const r = await cli(['quantize', input, '-o', `${out}/`, '--preset', 'bnb-nf4-dq'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const qc = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).quantization_config;
    expect(qc).toMatchObject({ quant_method: 'bitsandbytes', load_in_4bit: true, bnb_4bit_quant_type: 'nf4', bnb_4bit_use_double_quant: true });
    const bytes = new Uint8Array(readFileSync(join(out, 'model.safetensors')));
    const ck = await openSafetensors(fromBuffer(bytes, 'out'));
    const name = 'model.layers.0.self_attn.q_proj.weight';
    const [rows, cols] = (await openSafetensors(fromBuffer(new Uint8Array(readFileSync(join(input, 'model.safetensors'))), 'in'))).tensor(name).shape;
    const blocks = (rows * cols) / 64;
    expect(ck.tensor(`${name}.absmax`)).toMatchObject({ dtype: 'U8', shape: [blocks] });
    expect(ck.tensor(`${name}.nested_absmax`)).toMatchObject({ dtype: 'F32', shape: [Math.ceil(blocks / 256)] });
    expect(ck.tensor(`${name}.nested_quant_map`)).toMatchObject({ dtype: 'F32', shape: [256] });
    const state = JSON.parse(new TextDecoder().decode(await ck.readRaw(`${name}.quant_state.bitsandbytes__nf4`)));
    expect(state).toMatchObject({ quant_type: 'nf4', blocksize: 64, dtype: 'bfloat16', shape: [rows, cols], nested_blocksize: 256, nested_dtype: 'float32' });
    expect(typeof state.nested_offset).toBe('number');
    // without webquant's metadata, as transformers would save it: the values webquant serves
    const served = await openQuantized(fromBuffer(bytes, 'served'));
    const plain = await openSafetensors(fromBuffer(await collect(writeSafetensors({ tensors: await Promise.all(ck.tensors.map(async (t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, data: await ck.readRaw(t.name) }))) })), 'plain'));
    expect(plain.tensor(name)).toMatchObject({ dtype: 'BNB_4BIT', shape: [rows, cols] });
    expect([...await plain.readF32(name)]).toEqual([...await served.tensor(name).dequantize()]);
    // --format bnb_nf4 --double-quant writes the same file
    const r2 = await cli(['quantize', input, '-o', 'bnb-dq-format.safetensors', '--format', 'bnb_nf4', '--double-quant'], { cwd: tmp });
    expect(r2.code, r2.stderr).toBe(0);
    const again = await openSafetensors(fromBuffer(new Uint8Array(readFileSync(join(tmp, 'bnb-dq-format.safetensors'))), 'again'));
    expect(Buffer.from(await again.readRaw(`${name}.absmax`)).equals(Buffer.from(await ck.readRaw(`${name}.absmax`)))).toBe(true);
  });

  it('bnb-int8: LLM.int8 entries (I8, SCB, weight_format) and load_in_8bit, read back as BNB_INT8', async () => {
    const out = join(tmp, 'bnb-int8');
    const r = await cli(['quantize', input, '-o', `${out}/`, '--preset', 'bnb-int8'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('"quantization_config": bitsandbytes LLM.int8');
    const qc = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).quantization_config;
    expect(qc).toMatchObject({ quant_method: 'bitsandbytes', load_in_8bit: true, load_in_4bit: false, llm_int8_threshold: 6.0, llm_int8_has_fp16_weight: false });
    expect(qc.llm_int8_skip_modules).toEqual([]);
    const bytes = new Uint8Array(readFileSync(join(out, 'model.safetensors')));
    const ck = await openSafetensors(fromBuffer(bytes, 'out'));
    const name = 'model.layers.0.mlp.down_proj.weight';
    const [rows, cols] = (await openSafetensors(fromBuffer(new Uint8Array(readFileSync(join(input, 'model.safetensors'))), 'in'))).tensor(name).shape;
    expect(ck.tensor(name)).toMatchObject({ dtype: 'I8', shape: [rows, cols] });
    expect(ck.tensor('model.layers.0.mlp.down_proj.SCB')).toMatchObject({ dtype: 'F32', shape: [rows] });
    expect(ck.tensor('model.layers.0.mlp.down_proj.weight_format')).toMatchObject({ dtype: 'U8', shape: [] });
    expect([...await ck.readRaw('model.layers.0.mlp.down_proj.weight_format')]).toEqual([0]);
    const served = await openQuantized(fromBuffer(bytes, 'served'));
    const plain = await openSafetensors(fromBuffer(await collect(writeSafetensors({ tensors: await Promise.all(ck.tensors.map(async (t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, data: await ck.readRaw(t.name) }))) })), 'plain'));
    expect(plain.tensor(name)).toMatchObject({ dtype: 'BNB_INT8', shape: [rows, cols] });
    expect(plain.tensors.some((t) => t.name.endsWith('.SCB') || t.name.endsWith('.weight_format'))).toBe(false);
    expect([...await plain.readF32(name)]).toEqual([...await served.tensor(name).dequantize()]);
  });

  it('nvfp4: ModelOpt\'s quantization_config, weight-only (W4A16_NVFP4) or with --activations input scales (NVFP4)', async () => {
    const out = join(tmp, 'nvfp4');
    let r = await cli(['quantize', input, '-o', `${out}/`, '--preset', 'nvfp4'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('"quantization_config": ModelOpt W4A16_NVFP4, 6 linear modules left unquantized');
    const qc = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).quantization_config;
    const fp4 = { type: 'float', num_bits: 4, group_size: 16, dynamic: false };
    expect(qc).toMatchObject({ quant_method: 'modelopt', quant_algo: 'W4A16_NVFP4', group_size: 16, config_groups: { group_0: { targets: ['Linear'], weights: fp4, input_activations: null } } });
    // the FFN down projections (172 columns, not a multiple of 16) stay BF16; the tied head is the embedding's
    expect(qc.ignore).toEqual([...[0, 1, 2, 3, 4].map((l) => `model.layers.${l}.mlp.down_proj`), 'lm_head']);
    const weightOnly = await openSafetensors(fromBuffer(new Uint8Array(readFileSync(join(out, 'model.safetensors'))), 'w4a16'));
    expect(weightOnly.tensors.filter((t) => t.name.endsWith('input_scale'))).toEqual([]);

    // Calibration: two chunks of 64 dev tokens. Each nvfp4 weight gets <module>.input_scale = amax / 2688.
    const tokens = readTokens(new Uint8Array(readFileSync(join(SHARED, 'eval/tinystories_dev.tokens.u16')))).slice(0, 128);
    writeFileSync(join(tmp, 'calib.u16'), tokens);
    const out2 = join(tmp, 'nvfp4-w4a4');
    r = await cli(['quantize', input, '-o', `${out2}/`, '--preset', 'nvfp4', '--activations', 'calib.u16', '--activation-context', '64'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('input scales (amax / 2688) of 30 nvfp4 weights from 2 chunks of 64 tokens of calib.u16');
    const qc2 = JSON.parse(readFileSync(join(out2, 'config.json'), 'utf8')).quantization_config;
    expect(qc2).toMatchObject({ quant_algo: 'NVFP4', config_groups: { group_0: { weights: fp4, input_activations: fp4 } }, ignore: qc.ignore });
    const w4a4 = await openSafetensors(fromBuffer(new Uint8Array(readFileSync(join(out2, 'model.safetensors'))), 'w4a4'));
    const src = await openSafetensors(fromBuffer(new Uint8Array(readFileSync(join(input, 'model.safetensors'))), 'in'));
    // The CLI runs the checkpoint as `webquant eval` serves an original (quantizedWeights).
    const config = llamaConfig(JSON.parse(readFileSync(join(input, 'config.json'), 'utf8')));
    const amax = await activationAmax({ config, weights: await quantizedWeights(src, config), tokens, contextLength: 64 });
    const nvfp4 = weightOnly.tensors.filter((t) => t.name.endsWith('.weight') && t.dtype === 'U8').map((t) => t.name);
    expect(nvfp4.length).toBe(30);
    for (const name of nvfp4) {
      const m = moduleName(name);
      expect(w4a4.tensor(`${m}.input_scale`), name).toMatchObject({ dtype: 'F32', shape: [] });
      expect(new DataView((await w4a4.readRaw(`${m}.input_scale`)).slice().buffer).getFloat32(0, true), name).toBe(nvfp4InputScale(amax.get(name)!));
      // the weights themselves are the weight-only run's
      for (const part of [name, `${name}_scale`, `${name}_scale_2`]) expect(Buffer.from(await w4a4.readRaw(part)).equals(Buffer.from(await weightOnly.readRaw(part))), part).toBe(true);
    }

    r = await cli(['quantize', input, '-o', 'x.safetensors', '--preset', 'int8', '--activations', 'calib.u16'], { cwd: tmp });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('--activations sets the input scales of nvfp4 weights');
    r = await cli(['quantize', input, '-o', 'x.safetensors', '--preset', 'nvfp4', '--activation-chunks', '2'], { cwd: tmp });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('--activation-chunks and --activation-context go with --activations');
    expect(existsSync(join(tmp, 'x.safetensors'))).toBe(false);
  });

  it('a webquant output is quantized again from its values (mlx4 folder -> GGUF, nf4 -> int8)', async () => {
    const ours = join(tmp, 'mlx4');
    if (!existsSync(join(ours, 'model.safetensors'))) await cli(['quantize', input, '-o', `${ours}/`, '--preset', 'mlx4'], { cwd: tmp });
    let r = await cli(['quantize', ours, '-o', 'again.gguf', '--preset', 'q8_0', '--tokenizer', 'none'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const served = await openQuantized(fromBuffer(new Uint8Array(readFileSync(join(ours, 'model.safetensors'))), 'mlx4'));
    const gguf = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(join(tmp, 'again.gguf'))), 'gguf'));
    const gate = 'model.layers.0.mlp.gate_proj.weight';
    const ref = await quantize(await served.tensor(gate).dequantize(), { format: 'q8_0', rowLength: 64 });
    expect(Buffer.from(await gguf.readRaw('blk.0.ffn_gate.weight')).equals(Buffer.from(ref.data))).toBe(true);
    // nf4 (webquant's own layout) -> int8 safetensors
    r = await cli(['quantize', join(input, 'model.safetensors'), '-o', 'nf4.safetensors', '--preset', 'nf4'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    r = await cli(['quantize', 'nf4.safetensors', '-o', 'int8-of-nf4.safetensors', '--preset', 'int8'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const nf4 = await openQuantized(fromBuffer(new Uint8Array(readFileSync(join(tmp, 'nf4.safetensors'))), 'nf4'));
    const int8 = await openQuantized(fromBuffer(new Uint8Array(readFileSync(join(tmp, 'int8-of-nf4.safetensors'))), 'int8'));
    const q8 = await quantize(await nf4.tensor(gate).dequantize(), { format: 'int8', rowLength: 64 });
    expect(int8.tensor(gate).info.format).toBe('int8');
    expect([...await int8.tensor(gate).dequantize()]).toEqual([...await dequantize(q8)]);
    // the section tensors of the input are not carried over as tensors of their own
    expect(int8.tensors.map((t) => t.name).filter((n) => n.includes('.scales'))).toEqual([]);
  });

  it('gives modules with other settings their own entry in "quantization"', async () => {
    const out = join(tmp, 'mixed');
    const rules = join(tmp, 'rules.json');
    writeFileSync(rules, JSON.stringify({ rules: [{ role: 'attention', scheme: { format: 'mlx', bits: 8, groupSize: 32 } }] }));
    const r = await cli(['quantize', input, '-o', `${out}/`, '--format', 'mlx', '--scale-dtype', 'f16', '--rules', rules], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const q = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')).quantization;
    // 10 gate/up projections at 4 bits, 20 attention projections at 8: the most common is the default
    expect(q.group_size).toBe(32);
    expect(q.bits).toBe(8);
    expect(q['model.layers.0.mlp.gate_proj']).toEqual({ group_size: 64, bits: 4 });
    expect(q['model.layers.0.self_attn.q_proj']).toBeUndefined();
    expect(Object.keys(q)).toHaveLength(2 + 10);
    const ck = await openSafetensors(fromBuffer(new Uint8Array(readFileSync(join(out, 'model.safetensors'))), 'out'));
    // --scale-dtype goes with --format: the rule's scheme keeps the default (bf16)
    expect(ck.tensor('model.layers.0.mlp.gate_proj.scales').dtype).toBe('F16');
    expect(ck.tensor('model.layers.0.self_attn.q_proj.scales').dtype).toBe('BF16');
    expect(ck.tensor('model.layers.0.self_attn.q_proj.weight').shape).toEqual([64, 16]);
  });

  it('mlxQuantizationConfig takes the most common settings as the default', () => {
    const t = (name: string, bits: number, groupSize: number): PlannedTensor => ({
      name, shape: [64, 64], dtype: 'BF16', rows: 64, rowLength: 64, params: 4096, role: 'ffn', reason: 'default',
      scheme: { format: 'mlx', bits, groupSize }, options: { bits, groupSize, granularity: 'group', doubleQuant: false, calibration: { method: 'minmax' }, scaleDtype: 'bf16' },
    });
    expect(mlxQuantizationConfig([t('a.weight', 4, 64), t('b.weight', 6, 64), t('c.weight', 4, 64)])).toEqual({ group_size: 64, bits: 4, b: { group_size: 64, bits: 6 } });
    expect(mlxQuantizationConfig([{ ...t('a.weight', 4, 64), scheme: 'keep', options: undefined }])).toBeUndefined();
  });

  it('refuses the input folder, a folder with other weights and a missing parent', async () => {
    let r = await cli(['quantize', input, '-o', `${input}/`, '--preset', 'mlx4'], { cwd: tmp });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('is the input');
    // the input checkpoint under another name in that folder: refused as the input's folder
    r = await cli(['quantize', join(input, 'model.safetensors'), '-o', input, '--preset', 'mlx4'], { cwd: tmp });
    expect(r.stderr).toContain('is the input');
    copyFileSync(join(input, 'model.safetensors'), join(tmp, 'other.safetensors'));
    r = await cli(['quantize', join(tmp, 'other.safetensors'), '-o', tmp, '--preset', 'mlx4'], { cwd: tmp });
    expect(r.stderr).toContain("is the input's folder");
    const busy = join(tmp, 'busy');
    mkdirSync(busy);
    writeFileSync(join(busy, 'model-00001-of-00002.safetensors'), 'x');
    r = await cli(['quantize', input, '-o', `${busy}/`, '--preset', 'mlx4'], { cwd: tmp });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('already holds model-00001-of-00002.safetensors');
    expect(r.stderr).toContain(`(${ErrorCodes.BAD_OPTION})`);
    expect(existsSync(join(busy, 'model.safetensors'))).toBe(false);
    // a folder made for a run that fails is removed again (here: a plan error)
    r = await cli(['quantize', input, '-o', join(tmp, 'fresh/'), '--format', 'q4_k', '--strict'], { cwd: tmp });
    expect(r.code).not.toBe(0);
    expect(existsSync(join(tmp, 'fresh'))).toBe(false);
    r = await cli(['quantize', input, '-o', join(tmp, 'no/such/'), '--preset', 'mlx4'], { cwd: tmp });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('does not exist');
    // a file named as a folder
    r = await cli(['quantize', input, '-o', `${join(input, 'config.json')}/`, '--preset', 'mlx4'], { cwd: tmp });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/is a file; name a folder.*E_BAD_OPTION/);
  });

  it('a config.json that is not JSON (or nested past any real one) stops the run before model.safetensors is written', async () => {
    for (const [tag, text] of [['broken', '{bad'], ['deep', `{"rope_scaling": {"factor": ${'['.repeat(20000)}${']'.repeat(20000)}}}`]]) {
      const bad = join(tmp, `in-${tag}`);
      mkdirSync(bad);
      copyFileSync(join(DIR, 'model.bf16.safetensors'), join(bad, 'model.safetensors'));
      writeFileSync(join(bad, 'config.json'), text);
      const out = join(tmp, `out-${tag}/`);
      const r = await cli(['quantize', bad, '-o', out, '--preset', 'mlx4'], { cwd: tmp });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/config\.json: not JSON.*E_CONFIG/);
      expect(existsSync(out)).toBe(false);
    }
  });
});
