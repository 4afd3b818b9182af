// Issue 3's acceptance run: each stories260K file (F32 safetensors, BF16 safetensors, GGUF v1)
// quantized with every preset through the CLI; each output read back by webquant (and GGUF ones
// by @huggingface/gguf); every quantized tensor equal, bytes and dequantized values, to the
// kernel API's result for the same input tensor.
import { beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gguf as hfGguf } from '@huggingface/gguf';
import { SHARED, hasShared } from '../helpers/shared.js';
import { cli, ensureBuilt, tempDir } from './helpers.js';
import { listPresets } from '../../src/plan/presets.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { readConfig } from '../../src/io/config.js';
import type { Checkpoint } from '../../src/io/checkpoint.js';
import { ggufView, llamaConfigFrom } from '../../src/convert/hf-view.js';
import { openQuantized } from '../../src/serve/index.js';
import { dequantize, quantize } from '../../src/quantize.js';
import { formats } from '../../src/formats/registry.js';

const DIR = join(SHARED, 'models/stories260K');
const INPUTS = ['model.safetensors', 'model.bf16.safetensors', 'tinyllamas-stories-260k-f32.gguf'];
const same = (a: ArrayBufferView, b: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
const open = (p: string) => openCheckpoint(fromBuffer(new Uint8Array(readFileSync(p)), p));

/** The input as the output names it: GGUF outputs of a safetensors input go through the GGUF view. */
async function sourceFor(input: string, container: 'gguf' | 'safetensors'): Promise<Checkpoint> {
  const ck = await open(join(DIR, input));
  if (container === 'safetensors' || ck.format === 'gguf') return ck;
  return ggufView(ck, llamaConfigFrom(await readConfig(fromBuffer(new Uint8Array(readFileSync(join(DIR, 'config.json'))), 'config.json'))));
}

describe.skipIf(!hasShared)('stories260K x every preset', () => {
  let tmp: string;
  beforeAll(async () => {
    await ensureBuilt();
    tmp = tempDir('presets-all');
  }, 300_000);

  for (const input of INPUTS) {
    for (const preset of listPresets()) {
      it(`${input} -> ${preset.name} (${preset.container})`, async () => {
        const out = join(tmp, `${input}.${preset.name}.${preset.container}`);
        const r = await cli(['quantize', join(DIR, input), '-o', out, '--preset', preset.name, '--json', '--workers', '1'], { cwd: tmp });
        expect(r.code, r.stderr).toBe(0);
        const src = await sourceFor(input, preset.container);
        const q = await openQuantized(fromBuffer(new Uint8Array(readFileSync(out)), out));
        let quantized = 0;
        for (const info of q.tensors) {
          const name = info.name;
          // F16/BF16 outputs of a wider input are conversions through the f16/bf16 kernels too.
          const converted = !info.quantized && info.format !== src.tensor(name).dtype && ['F16', 'BF16'].includes(info.format);
          if (!info.quantized && !converted) continue;
          quantized++;
          const values = await src.readF32(name);
          const opts = info.quantized ? { ...info.options, format: info.format } : { format: info.format.toLowerCase() };
          const got = await q.tensor(name).load();
          // Fused tensors share nvfp4's scale_2 (test/pipeline/shared-scales.test.ts): the stored one, its last section.
          const last = got.sections[got.sections.length - 1];
          const shared = info.quantized && formats.get(info.format)?.sharedScale ? { tensorScale: new DataView(last.buffer, last.byteOffset, 4).getFloat32(0, true) } : {};
          // A format that records the input dtype (bitsandbytes' quant state) is given the stored values.
          const stored = info.quantized && formats.get(info.format)?.dtypeSections ? await src.readValues(name) : undefined;
          const ref = await quantize(stored?.values ?? values, { ...opts, ...shared, rowLength: info.rowLength, name, dtype: stored?.dtype });
          const bytes = new Uint8Array(got.bytes);
          let at = 0;
          for (const sec of got.sections) { bytes.set(sec, at); at += sec.byteLength; }
          expect(same(bytes, ref.data), `${name} ${info.format} bytes`).toBe(true);
          expect(same(got.dequantize(), await dequantize(ref)), `${name} values`).toBe(true);
        }
        if (preset.name === 'bf16' && input === 'model.bf16.safetensors') {
          // Already BF16: every tensor is stored as it came.
          expect(quantized).toBe(0);
          for (const info of q.tensors) expect(same(await (await open(out)).readRaw(info.name), await src.readRaw(info.name)), info.name).toBe(true);
        } else {
          expect(quantized).toBeGreaterThan(20);
        }
        if (preset.container === 'gguf') {
          const parsed = await hfGguf(out, { allowLocalFile: true });
          const ours = await open(out);
          expect(parsed.tensorInfos.map((t) => t.name)).toEqual(ours.tensors.map((t) => t.name));
          expect(Number(parsed.metadata['general.file_type' as keyof typeof parsed.metadata])).toBe(preset.fileType);
        }
      }, 120_000);
    }
  }
});
