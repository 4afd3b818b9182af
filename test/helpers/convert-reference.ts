// llama.cpp's own converter (convert_hf_to_gguf.py) as the reference for `webquant quantize
// --preset f16` on Hugging Face checkpoints: the generated checkpoints of hf-families.ts, each in a
// folder named like a Hub repository (the converter names the model from it) with a SentencePiece
// tokenizer.model, some with generation_config.json, config.json's _name_or_path or a model card.
// bench/convert-reference.ts runs the converter on them and records a digest of every file it
// writes in test/convert/fixtures/convert-reference.json; test/convert/convert-reference.test.ts
// converts the same inputs with webquant and compares digests: every key with its type and value,
// every tensor with its type, shape and bytes.
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect } from '../../src/io/stream.js';
import { openGguf } from '../../src/io/gguf.js';
import { fromBuffer } from '../../src/io/source.js';
import { llamaPieces, spModel } from '../convert/tokenizer-fixtures.js';
import { FAMILIES, deepseekDecoder, familyTensors, type FamilyId } from './hf-families.js';

export interface ReferenceCase {
  family: FamilyId;
  /** The checkpoint's folder name (a Hub repository's). */
  dir: string;
  /** config.json's _name_or_path. */
  nameOrPath?: string;
  /** generation_config.json. */
  generation?: Record<string, unknown>;
  /** README.md (a model card with YAML front matter). */
  card?: string;
  /** webquant quantize options beyond `--preset f16`. */
  options?: string[];
  /** A metadata override file (both converters' --metadata), written beside the folder. */
  metadata?: Record<string, unknown>;
  /**
   * Keys webquant writes and the converter does not, with why: they say what the checkpoint says
   * where llama.cpp would assume the same default.
   */
  extraKeys?: Record<string, string>;
}

export const REFERENCE_CASES: ReferenceCase[] = [
  {
    family: 'qwen3', dir: 'Qwen3-137K-Instruct-v0.2', generation: { bos_token_id: 1, do_sample: true, temperature: 0.6, top_p: 0.95, top_k: 20 },
    extraKeys: { 'tokenizer.ggml.bos_token_id': 'generation_config.json\'s, where no other file names one (src/convert/special-vocab.ts); the converter does not read that file for ids' },
  },
  {
    family: 'gemma3', dir: 'gemma-3-270m-it',
    card: '---\nlicense: gemma\nlibrary_name: transformers\npipeline_tag: text-generation\nextra_gated_heading: Access Gemma on Hugging Face\nextra_gated_button_content: Acknowledge license\nbase_model: google/gemma-3-270m\ntags:\n- gemma3\n- gemma\n- google\n---\n\n# Gemma 3 model card\n',
  },
  { family: 'gemma2', dir: 'gemma-2-2b' },
  { family: 'gemma1', dir: 'gemma-7b' },
  {
    family: 'llama3', dir: 'llama3', nameOrPath: 'meta-llama/Llama-3.2-1B-Instruct', generation: { temperature: 0.6, top_p: 0.9, eos_token_id: [2, 1] },
    card: '---\nlanguage:\n- en\n- de\n- fr\n- hi\nlibrary_name: transformers\nlicense: llama3.2\npipeline_tag: text-generation\ntags:\n- facebook\n- meta\n- llama-3\nextra_gated_prompt: >-\n  ### LICENSE AGREEMENT\n\n  Folded text: over two lines.\nextra_gated_fields:\n  First Name: text\n  Date of birth: date_picker\n  geo: ip_location\n---\n',
  },
  { family: 'phi3', dir: 'Phi-3-mini-4k-instruct' },
  {
    family: 'mixtral', dir: 'Mixtral-8x7B-Instruct-v0.1',
    card: '---\r\nlanguage: [fr, it, de, es, en]\r\nlicense: apache-2.0\r\nbase_model:\r\n- mistralai/Mixtral-8x7B-v0.1\r\n- https://huggingface.co/someone/Merged-Model-v2\r\ndatasets:\r\n- HuggingFaceH4/ultrachat_200k\r\n- {name: Internal mix, organization: Mistral AI}\r\nmodel_creator: Mistral AI\r\ninference:\r\n  parameters:\r\n    temperature: 0.5\r\nwidget:\r\n- messages:\r\n  - role: user\r\n    content: What is your favorite condiment?\r\n---\r\n',
  },
  { family: 'qwen2moe', dir: 'Qwen1.5-MoE-A2.7B-Chat' },
  { family: 'qwen3moe', dir: 'Qwen3-30B-A3B' },
  { family: 'granite', dir: 'granite-3.1-2b-instruct' },
  { family: 'olmo2', dir: 'OLMo-2-1124-7B' },
  { family: 'smollm3', dir: 'SmolLM3-3B', nameOrPath: '/home/someone/checkpoints/SmolLM3-3B-Base' },
  { family: 'deepseekV3', dir: 'DeepSeek-V3-0324' },
  { family: 'deepseekV2', dir: 'DeepSeek-V2-Lite-Chat' },
  { family: 'gpt2', dir: 'gpt2', generation: { repetition_penalty: 1.1, top_k: 40, min_p: 0.05 } },
  { family: 'gptNeox', dir: 'pythia-160m-deduped', extraKeys: { 'general.file_type': 'the converter writes none for GPT-NeoX' } },
  { family: 'phi2', dir: 'phi-2' },
  { family: 'stablelm', dir: 'stablelm-2-1_6b-chat', extraKeys: { 'stablelm.rope.freq_base': 'config.json\'s rope_theta, which the converter leaves to llama.cpp\'s default' } },
  { family: 'starcoder2', dir: 'starcoder2-3b' },
  { family: 'olmoe', dir: 'OLMoE-1B-7B-0924-Instruct' },
  {
    family: 'qwen2', dir: 'Qwen2.5-0.5B-Instruct', generation: { repetition_penalty: 1.05, temperature: 0.7, top_p: 0.8, top_k: 20 },
    card: '---\nlicense: apache-2.0\nlicense_link: https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/blob/main/LICENSE\nlanguage:\n- en\npipeline_tag: text-generation\nbase_model: Qwen/Qwen2.5-0.5B\ntags:\n- chat\nlibrary_name: transformers\n---\n\n# Qwen2.5-0.5B-Instruct\n',
  },
  { family: 'qwen2Yarn', dir: 'qwen2-yarn', nameOrPath: 'Qwen/Qwen2.5-7B-Instruct-1M' },
  {
    // --metadata: strings, sampling defaults, lists and entries replace the card's and the names';
    // null drops the version and sends the size label back to the tensors' count; general.license
    // is not a key the converter reads from the file.
    family: 'llama3', dir: 'Widget-3B-Chat-v1.5', nameOrPath: 'acme/Widget-3B-Chat-v1.5', generation: { temperature: 0.7, top_p: 0.9, top_k: 50 },
    card: '---\nlicense: mit\nbase_model: acme/Widget-3B\ntags:\n- chat\nlanguage:\n- en\ndatasets:\n- acme/chats\n---\n',
    metadata: {
      'general.name': 'Widget Chat', 'general.author': 'Acme Labs', 'general.quantized_by': 'webquant tests', 'general.description': 'A test model',
      'general.url': 'https://example.org/widget', 'general.doi': '10.1234/widget', 'general.uuid': '00000000-0000-4000-8000-000000000000',
      'general.repo_url': 'https://example.org/widget.git', 'general.source.url': 'https://example.org/src', 'general.license.name': 'MIT',
      'general.size_label': null, 'general.version': null, 'general.license': 'apache-2.0',
      'general.sampling.top_k': 64, 'general.sampling.temp': 0.25, 'general.sampling.min_p': 0.05,
      'general.tags': ['one', 'two'], 'general.languages': ['en', 'de'],
      'general.base_models': [{ name: 'Widget', organization: 'Acme', version: 'v1', repo_url: 'https://huggingface.co/acme/Widget-3B' }],
      'general.datasets': [{ name: 'Chats', url: 'https://example.org/chats' }],
    },
    options: ['--metadata', 'Widget-3B-Chat-v1.5.metadata.json'],
  },
];

/** The metadata override file of a case written by writeReferenceInput (beside its folder). */
export const metadataFile = (root: string, c: ReferenceCase): string => join(root, `${c.dir}.metadata.json`);

/** Tensors and config.json of a case. */
export function referenceInput(c: ReferenceCase): { tensors: ReturnType<typeof familyTensors>; config: Record<string, unknown> } {
  const f = FAMILIES[c.family];
  const config: Record<string, unknown> = { ...f.config, ...(c.nameOrPath ? { _name_or_path: c.nameOrPath } : {}) };
  // Debian's torch (1.13) has no FP8 dtypes, so the converter cannot read V3's FP8 weights here:
  // the reference checkpoint holds them unquantized (webquant's FP8 reading is tested elsewhere).
  if (c.family === 'deepseekV3') {
    delete config.quantization_config;
    return { tensors: deepseekDecoder(f.seed, { layers: 2, qLora: true, bias: true, shared: 1 }), config };
  }
  // The causal-mask buffers old GPT-2 checkpoints carry make that converter fail ("Can not map
  // tensor"); webquant skips them (test/convert/gpt2.test.ts).
  return { tensors: familyTensors(f).filter((t) => !t.name.endsWith('.attn.bias')), config };
}

/** Writes a case's checkpoint folder under `root`; returns its path. */
export async function writeReferenceInput(root: string, c: ReferenceCase): Promise<string> {
  const dir = join(root, c.dir);
  mkdirSync(dir, { recursive: true });
  const { tensors, config } = referenceInput(c);
  writeFileSync(join(dir, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  const words = Array.from({ length: 26 }, (_, i) => `▁${String.fromCharCode(97 + i)}`);
  writeFileSync(join(dir, 'tokenizer.model'), spModel(llamaPieces(words)));
  if (c.generation) writeFileSync(join(dir, 'generation_config.json'), JSON.stringify(c.generation));
  if (c.card) writeFileSync(join(dir, 'README.md'), c.card);
  if (c.metadata) writeFileSync(metadataFile(root, c), JSON.stringify(c.metadata));
  return dir;
}

export interface GgufDigest {
  /** key -> "type value" (arrays: item type, length and the SHA-256 of their JSON). */
  kv: Record<string, string>;
  /** name -> "ggml type, ne, SHA-256 of the bytes". */
  tensors: Record<string, string>;
}

const sha = (b: Uint8Array | string) => createHash('sha256').update(b).digest('hex').slice(0, 16);
const json = (v: unknown) => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? x.toString() : x));

/** A GGUF file's content, order aside: what two converters must agree on. */
export async function ggufDigest(bytes: Uint8Array): Promise<GgufDigest> {
  const g = await openGguf(fromBuffer(bytes, 'digest.gguf'));
  const kv: Record<string, string> = {};
  for (const k of g.kv) {
    kv[k.key] = k.type === 'array' ? `array<${k.itemType}>[${(k.value as unknown[]).length}] ${sha(json(k.value))}` : `${k.type} ${json(k.value)}`;
  }
  const tensors: Record<string, string> = {};
  for (const t of g.tensors) tensors[t.name] = `${t.ggmlType} [${t.ne.join(',')}] ${sha(await g.readRaw(t.name))}`;
  return { kv, tensors };
}
