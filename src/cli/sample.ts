// `webquant` with no arguments (`npm start`): writes the built-in deterministic sample checkpoint to
// ./webquant-sample/ and quantizes it with q4_k_m, so that a first run shows the whole path from a
// Hugging Face checkpoint to a GGUF file without downloading anything.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../io/node.js';
import { writeSafetensors } from '../io/safetensors-writer.js';
import { SAMPLE_CONFIG, sampleCheckpoint } from '../sample.js';
import { absPath } from './input.js';
import type { CliIO } from './io.js';
import { quantizeCommand, type QuantizeReport } from './quantize.js';

export const SAMPLE_DIR = 'webquant-sample';
export const SAMPLE_PRESET = 'q4_k_m';

/** Writes config.json and model.safetensors (BF16) of the sample model into `dir`. */
export async function writeSample(dir: string): Promise<{ config: string; model: string }> {
  await mkdir(dir, { recursive: true });
  const config = join(dir, 'config.json');
  const model = join(dir, 'model.safetensors');
  await writeFileAtomic(config, [new TextEncoder().encode(JSON.stringify(SAMPLE_CONFIG, null, 2) + '\n')]);
  const tensors = sampleCheckpoint().map((t) => ({ name: t.name, dtype: 'BF16', shape: t.shape, data: t.data }));
  await writeFileAtomic(model, writeSafetensors({ tensors, metadata: { format: 'pt' } }));
  return { config, model };
}

export async function sampleCommand(io: CliIO, opts: { json?: boolean; workers?: number } = {}): Promise<QuantizeReport> {
  const dir = absPath(SAMPLE_DIR, io);
  const { model } = await writeSample(dir);
  if (!opts.json) {
    io.stdout.write(`webquant: no command given, so here is a demonstration on a built-in sample model.\n`);
    io.stdout.write(`wrote ${model} (Llama-shaped, ${SAMPLE_CONFIG.num_hidden_layers} layers, hidden ${SAMPLE_CONFIG.hidden_size}, BF16) and config.json\n`);
  }
  const report = await quantizeCommand({ input: model, output: join(dir, `model-${SAMPLE_PRESET}.gguf`), preset: SAMPLE_PRESET, json: opts.json, workers: opts.workers }, io);
  if (!opts.json) io.stdout.write(`\nnext: webquant inspect ${join(SAMPLE_DIR, `model-${SAMPLE_PRESET}.gguf`)}   |   webquant --help\n`);
  return report;
}
