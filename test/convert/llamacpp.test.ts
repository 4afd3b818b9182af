// llama.cpp itself as the oracle: wllama (the dev dependency: llama.cpp b6327 compiled to
// WebAssembly) runs in Debian's Chromium, loads GGUF files `webquant quantize` wrote from
// safetensors with a converted tokenizer, tokenizes and generates. stories260K must give the
// greedy text its model card documents (from llama2.c's run.c), both with the llama2.c tokenizer
// and with a SentencePiece tokenizer.model made from it; byte-level BPE must split a prompt as
// its merges say; a generated Qwen2 checkpoint must load and run; on generated Qwen2 (q/k/v
// biases), Qwen3 (per-head q/k norms, head_dim apart from hidden/heads), OLMo 2 (post-norms,
// whole-projection q/k norms), Mixtral and Qwen3-MoE (stacked experts), DeepSeek-V2 and V3 (latent
// attention, shared experts; V3 in FP8), Granite (scaled embeddings, branches, scores, logits),
// SmolLM3 (layers without rope), Phi-3 (fused projections, partial rotary, LongRoPE), Gemma 2 and 3
// (1 + w sandwich norms, sliding-window layers, capped scores), gpt-oss (MXFP4 experts, sinks,
// biases), GPT-2 (Conv1D layers, LayerNorms, learned positions), GPT-NeoX (q/k/v by head, partial
// rotary, parallel residuals), Phi-2 (one norm for both branches, a biased head), StableLM-2
// (LayerNorms with biases, partial rotary), StarCoder2, OLMoE (whole-projection q/k norms,
// unnormalised experts) and rope-scaled Llama 3 checkpoints
// llama.cpp's log-probabilities must match webquant's reference forward, run on the GGUF and on the
// original safetensors; a Qwen3 checkpoint written as GGUF MXFP4 must run in llama.cpp as in the
// forward on that GGUF. CI installs chromium; without it this test fails (as test/browser does).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { existsSync, readFileSync, writeFileSync, copyFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, normalize } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { SHARED, hasShared, sharedBytes } from '../helpers/shared.js';
import { cli, ensureBuilt, ROOT, tempDir } from '../cli/helpers.js';
import { llama2cVocab } from '../../src/convert/llama2c-tokenizer.js';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect } from '../../src/io/stream.js';
import { splitDocuments } from '../../src/eval/tokens.js';
import { byteLevelTokenizer, GPT4O_REGEX, llamaPieces, QWEN2_REGEX, spModel } from './tokenizer-fixtures.js';
import { fromPath } from '../../src/io/node.js';
import { openCheckpoint } from '../../src/io/open.js';
import { LlamaModel, checkpointWeights, llamaConfig } from '../../src/eval/llama.js';
import { type GenTensor } from '../helpers/data.js';
import { D, FAMILIES, decoder, familyTensors, gptOssDecoder, hfConfig, qwen3, type Family } from '../helpers/hf-families.js';
import { quantizedWeights } from '../../src/eval/quantized.js';
import { logSoftmax } from '../../src/eval/evaluate.js';

const CHROMIUM = '/usr/bin/chromium';
const STORIES = join(SHARED, 'models/stories260K');
const WLLAMA = join(ROOT, 'node_modules/@wllama/wllama/esm');

const PAGE = `<!doctype html><script type="module">
import { Wllama } from '/wllama/index.js';
const quiet = { debug() {}, log() {}, info() {}, warn() {}, error: console.error };
window.complete = async (file, prompt, maxTokens) => {
  const w = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { logger: quiet });
  await w.loadModel([await (await fetch(file)).blob()], { n_threads: 1, n_gpu_layers: 0, n_ctx: 512 });
  const r = await w.createCompletion({ prompt, max_tokens: maxTokens, temperature: 0, logprobs: 1 });
  const out = { text: r.choices[0].text, ids: r.choices[0].logprobs.content.map((c) => c.id), promptTokens: r.usage.prompt_tokens, bos: w.getBOS(), addBos: w.mustAddBosToken() };
  await w.exit();
  return out;
};
// Greedy tokens with llama.cpp's log-probability of each (softmax of the raw logits).
window.logprobs = async (file, prompt, maxTokens) => {
  const w = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { logger: quiet });
  await w.loadModel([await (await fetch(file)).blob()], { n_threads: 1, n_gpu_layers: 0, n_ctx: 512 });
  const r = await w.createCompletion({ prompt, max_tokens: maxTokens, temperature: 0, logprobs: 1 });
  const out = { promptTokens: r.usage.prompt_tokens, addBos: w.mustAddBosToken(), bos: w.getBOS(), steps: r.choices[0].logprobs.content.map((c) => ({ id: c.id, logprob: c.logprob })) };
  await w.exit();
  return out;
};
window.ready = true;
</script>`;

interface Completion { text: string; ids: number[]; promptTokens: number; bos: number; addBos: boolean }

let server: Server | undefined;
let browser: Browser | undefined;
let page: Page | undefined;
let base = '';
const tmp = tempDir('llamacpp');

beforeAll(async () => {
  await ensureBuilt();
  server = createServer(async (req, res) => {
    const url = decodeURIComponent(req.url?.split('?')[0] ?? '/');
    const [dir, rel] = url.startsWith('/wllama/') ? [WLLAMA, url.slice(8)] : url.startsWith('/m/') ? [tmp, url.slice(3)] : ['', ''];
    if (url === '/') { res.setHeader('Content-Type', 'text/html'); res.end(PAGE); return; }
    const file = normalize(join(dir, rel));
    if (!dir || !file.startsWith(dir) || !existsSync(file)) { res.statusCode = 404; res.end(); return; }
    res.setHeader('Content-Type', file.endsWith('.js') ? 'text/javascript' : file.endsWith('.wasm') ? 'application/wasm' : 'application/octet-stream');
    res.end(await readFile(file));
  }).listen(0, '127.0.0.1');
  await new Promise((r) => server!.once('listening', r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  if (!existsSync(CHROMIUM)) return;
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  page = await browser.newPage();
  await page.goto(`${base}/`);
  await page.waitForFunction(() => (window as unknown as { ready?: boolean }).ready === true);
}, 600_000);

afterAll(async () => {
  await browser?.close();
  server?.close();
});

async function complete(gguf: string, prompt: string, maxTokens: number): Promise<Completion> {
  if (!page) throw new Error(`${CHROMIUM} is missing: this test needs Debian's chromium (apt-get install -y chromium)`);
  const name = gguf.slice(tmp.length + 1);
  return page.evaluate(([f, p, n]) => (window as unknown as { complete: (f: string, p: string, n: number) => Promise<Completion> }).complete(f, p, n), [`/m/${name}`, prompt, maxTokens] as const);
}

interface Steps { promptTokens: number; addBos: boolean; bos: number; steps: { id: number; logprob: number }[] }

async function logprobs(gguf: string, prompt: string, maxTokens: number): Promise<Steps> {
  if (!page) throw new Error(`${CHROMIUM} is missing: this test needs Debian's chromium (apt-get install -y chromium)`);
  const name = gguf.slice(tmp.length + 1);
  return page.evaluate(([f, p, n]) => (window as unknown as { logprobs: (f: string, p: string, n: number) => Promise<Steps> }).logprobs(f, p, n), [`/m/${name}`, prompt, maxTokens] as const);
}

async function quantize(input: string, out: string, extra: string[] = [], scheme = ['--preset', 'f16']): Promise<string> {
  const r = await cli(['quantize', input, '-o', join(tmp, out), ...scheme, '--workers', '1', ...extra], { cwd: tmp });
  expect(r.code, r.stderr).toBe(0);
  return join(tmp, out);
}

/** The greedy sample of stories260K's model card (run.c -t 0.0), first line. */
function documentedSample(): string {
  const md = readFileSync(join(STORIES, 'stories260K.md'), 'utf8');
  const m = /run stories260K\/stories260K\.bin -z stories260K\/tok512\.bin -t 0\.0\n(.+)\n/.exec(md);
  if (!m) throw new Error('stories260K.md has no greedy sample');
  return m[1];
}

describe.skipIf(!hasShared)('llama.cpp runs stories260K GGUF with the converted tokenizer', () => {
  it('llama2.c tok512.bin: the documented greedy text, and prompts split as llama2.c split them', async () => {
    const gguf = await quantize(join(STORIES, 'model.safetensors'), 'stories-tok512.gguf', ['--tokenizer', join(STORIES, 'tok512.bin')]);
    const sample = documentedSample();
    const r = await complete(gguf, '', 48);
    expect(r.bos).toBe(1);
    expect(r.addBos).toBe(true);
    expect(r.text.length).toBeGreaterThan(100);
    expect(sample.startsWith(r.text.trimStart()), `llama.cpp: ${r.text}\nrun.c:    ${sample}`).toBe(true);
    // The first paragraphs of the dev text against their llama2.c token counts (BOS included).
    const docs = splitDocuments(new Uint16Array(sharedBytes('eval/tinystories_dev.tokens.u16').slice().buffer));
    const paragraphs = readFileSync(join(SHARED, 'eval/tinystories_dev.txt'), 'utf8').split('\n\n');
    for (let i = 0; i < 3; i++) {
      const p = await complete(gguf, paragraphs[i], 1);
      expect(p.promptTokens, paragraphs[i]).toBe(docs[i].length);
    }
  });

  it('a SentencePiece tokenizer.model beside the checkpoint gives the same text', async () => {
    const dir = tempDir('spm');
    for (const f of ['model.safetensors', 'config.json']) copyFileSync(join(STORIES, f), join(dir, f));
    const v = llama2cVocab(sharedBytes('models/stories260K/tok512.bin'), 'tok512.bin', 512);
    writeFileSync(join(dir, 'tokenizer.model'), spModel(v.tokens.map((piece, i) => ({ piece, score: v.scores![i], type: v.tokenTypes[i] }))));
    const gguf = await quantize(dir, 'stories-spm.gguf');
    const r = await complete(gguf, '', 48);
    expect(documentedSample().startsWith(r.text.trimStart()), r.text).toBe(true);
  });

  it('byte-level BPE (Llama 3 shape): llama.cpp splits with the llama-bpe regex and the merges', async () => {
    const dir = tempDir('bpe');
    for (const f of ['model.safetensors', 'config.json']) copyFileSync(join(STORIES, f), join(dir, f));
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(byteLevelTokenizer({ added: [{ content: '<|begin_of_text|>', special: true }, { content: '<|end_of_text|>', special: true }], bosTemplate: '<|begin_of_text|>' })));
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ bos_token: '<|begin_of_text|>', eos_token: '<|end_of_text|>' }));
    const gguf = await quantize(dir, 'stories-bpe.gguf');
    // "the and in" -> <|begin_of_text|> "t" "he" | "Ġand" | "Ġ" "in" (no merge makes "the" without a space).
    const r = await complete(gguf, 'the and in', 4);
    expect(r.bos).toBe(266);
    expect(r.promptTokens).toBe(6);
    expect(r.ids).toHaveLength(4);
  });

  it('byte-level BPE (SmolLM shape): llama.cpp splits every digit off, as the smollm pre-tokenizer does', async () => {
    const dir = tempDir('smollm');
    for (const f of ['model.safetensors', 'config.json']) copyFileSync(join(STORIES, f), join(dir, f));
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(byteLevelTokenizer({ added: [{ content: '<|endoftext|>', special: true }], digitsPre: true })));
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ bos_token: null, eos_token: '<|endoftext|>' }));
    const gguf = await quantize(dir, 'stories-smollm.gguf');
    // "x12": "x" "1" "2"; with the digits left together the "1" "2" merge would make "x" "12".
    const r = await complete(gguf, 'x12', 2);
    expect(r.promptTokens).toBe(3 + (r.addBos ? 1 : 0));
    // The same files written with GPT-2's pre-tokenizer: llama.cpp then merges the digits.
    const gpt2 = await complete(await quantize(dir, 'stories-gpt2.gguf', ['--tokenizer-pre', 'gpt-2']), 'x12', 2);
    expect(gpt2.promptTokens).toBe(2 + (gpt2.addBos ? 1 : 0));
  });

  it('byte-level BPE (GPT-4o / Phi-4 shape): recognised as gpt-4o, which llama.cpp loads and applies (digits in threes)', async () => {
    const dir = tempDir('o200k');
    for (const f of ['model.safetensors', 'config.json']) copyFileSync(join(STORIES, f), join(dir, f));
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(byteLevelTokenizer({ regex: GPT4O_REGEX, added: [{ content: '<|endoftext|>', special: true }], extraMerges: [['1', '2'], ['3', '4']] })));
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ bos_token: null, eos_token: '<|endoftext|>' }));
    // "x1234": "x" | "123" "4", merged to "x" "12" "3" "4"; GPT-2's regex keeps "1234" whole: "x" "12" "34".
    const r = await complete(await quantize(dir, 'stories-o200k.gguf'), 'x1234', 2);
    expect(r.promptTokens).toBe(4 + (r.addBos ? 1 : 0));
    const gpt2 = await complete(await quantize(dir, 'stories-o200k-gpt2.gguf', ['--tokenizer-pre', 'gpt-2']), 'x1234', 2);
    expect(gpt2.promptTokens).toBe(3 + (gpt2.addBos ? 1 : 0));
  });
});

describe('llama.cpp loads and runs a generated Qwen2 checkpoint', () => {
  it('qwen2 keys, tensors with q/k/v biases, qwen2 pre-tokenizer', async () => {
    const dir = tempDir('qwen2');
    const H = 64, HEADS = 4, KV = 2, HD = 16, FF = 128, V = 300;
    let seed = 3;
    const rnd = (n: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * 0.2; });
    const t = (name: string, shape: number[], fill?: number) => ({ name, dtype: 'F32', shape, data: fill === undefined ? rnd(shape.reduce((a, b) => a * b, 1)) : new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(fill) });
    const tensors = [t('model.embed_tokens.weight', [V, H]), t('model.norm.weight', [H], 1)];
    for (let l = 0; l < 2; l++) {
      const p = `model.layers.${l}.`;
      tensors.push(t(`${p}input_layernorm.weight`, [H], 1), t(`${p}post_attention_layernorm.weight`, [H], 1),
        t(`${p}self_attn.q_proj.weight`, [H, H]), t(`${p}self_attn.q_proj.bias`, [H]), t(`${p}self_attn.k_proj.weight`, [KV * HD, H]), t(`${p}self_attn.k_proj.bias`, [KV * HD]),
        t(`${p}self_attn.v_proj.weight`, [KV * HD, H]), t(`${p}self_attn.v_proj.bias`, [KV * HD]), t(`${p}self_attn.o_proj.weight`, [H, H]),
        t(`${p}mlp.gate_proj.weight`, [FF, H]), t(`${p}mlp.up_proj.weight`, [FF, H]), t(`${p}mlp.down_proj.weight`, [H, FF]));
    }
    writeFileSync(join(dir, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
    writeFileSync(join(dir, 'config.json'), JSON.stringify({
      architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', hidden_size: H, intermediate_size: FF, num_hidden_layers: 2, num_attention_heads: HEADS,
      num_key_value_heads: KV, vocab_size: V, max_position_embeddings: 512, rms_norm_eps: 1e-6, rope_theta: 1000000, tie_word_embeddings: true,
    }));
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(byteLevelTokenizer({ regex: QWEN2_REGEX, added: [{ content: '<|endoftext|>', special: true }, { content: '<|im_start|>', special: true }, { content: '<|im_end|>', special: true }] })));
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ bos_token: null, eos_token: '<|endoftext|>', pad_token: '<|endoftext|>' }));
    const gguf = await quantize(dir, 'qwen2.gguf');
    const r = await complete(gguf, 'the and in', 3);
    // No BOS for Qwen2 (llama.cpp's default for the qwen2 pre-tokenizer; the files ask for none).
    expect(r.addBos).toBe(false);
    // Unlike llama-bpe (ignore_merges: a word found whole in the vocabulary is one token), qwen2
    // applies the merges by rank: "Ġand" is in the vocabulary but no merge makes "nd", so
    // " and" stays "Ġa" "n" "d": "t" "he" | "Ġa" "n" "d" | "Ġ" "in".
    expect(r.promptTokens).toBe(7);
    expect(r.ids).toHaveLength(3);
    expect(r.ids.every((id) => id >= 0 && id < V)).toBe(true);
  });
});

/** Teacher-forced log-probability of each token llama.cpp picked, and the best one's, per step. */
type Forced = { logprob: number; best: number }[];

/**
 * A generated checkpoint run by llama.cpp and by the reference forward: writes its tensors, config
 * and a byte-level tokenizer (only printable ASCII bytes and the merges get rows of the separate
 * output head `lm_head.weight`: the other tokens score 0, below the best of these, so greedy text
 * stays UTF-8, which wllama needs, and never ends), converts the folder to an f16 GGUF, and lets
 * llama.cpp generate 12 greedy tokens after "<|im_start|>" (one special token: no BOS for the
 * qwen2 pre-tokenizer) with their log-probabilities. `forced` runs the forward, teacher-forced on
 * those tokens, on the GGUF llama.cpp ran or on the original safetensors (float32): the latter
 * checks the conversion against the checkpoint's own meaning, not only against itself.
 */
async function againstLlamaCpp(dir: string, tensors: GenTensor[], config: Record<string, unknown>, spm = false, preTokenizer?: Record<string, unknown>, scheme?: string[]) {
  const V = config.vocab_size as number, H = (config.hidden_size ?? config.n_embd) as number;
  // A byte-level BPE tokenizer, prompt "<|im_start|>" (one special token; no BOS for the qwen2
  // pre-tokenizer), or a SentencePiece one (Phi-3's, Gemma's kind), prompt "a" (<s> "▁a").
  const words = Array.from({ length: 26 }, (_, i) => `▁${String.fromCharCode(97 + i)}`);
  const tok = byteLevelTokenizer({ regex: QWEN2_REGEX, added: [{ content: '<|endoftext|>', special: true }, { content: '<|im_start|>', special: true }, { content: '<|im_end|>', special: true }] });
  if (preTokenizer) tok.pre_tokenizer = preTokenizer;
  const added = tok.added_tokens as { id: number; content: string }[];
  // Gemma's vocabulary adds no space prefix (add_space_prefix false): its prompt gives the space.
  const spmPrompt = String(config.model_type).startsWith('gemma') ? ' a' : 'a';
  const [prompt, start] = spm ? [spmPrompt, 259] : ['<|im_start|>', added.find((a) => a.content === '<|im_start|>')!.id];
  // Only ASCII tokens get output rows (the others score 0, below the best of these): greedy
  // text stays UTF-8, which wllama needs, and never ends. With a tied head the embedding rows are
  // the output rows; the prompt's token keeps its own.
  const sampled = spm ? (id: number) => id >= 259 && id < 259 + words.length : (id: number) => (id >= 32 && id <= 126) || (id >= 256 && id < added[0].id);
  const head = (tensors.find((x) => x.name === 'lm_head.weight' || x.name === 'embed_out.weight') ?? tensors.find((x) => x.name === 'model.embed_tokens.weight' || x.name === 'wte.weight')!).data as Float32Array;
  for (let id = 0; id < V; id++) if (!sampled(id) && id !== start) head.fill(0, id * H, (id + 1) * H);
  writeFileSync(join(dir, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  if (spm) {
    writeFileSync(join(dir, 'tokenizer.model'), spModel(llamaPieces(words)));
  } else {
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tok));
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ bos_token: null, eos_token: '<|endoftext|>', pad_token: '<|endoftext|>' }));
  }
  const gguf = await quantize(dir, `${String(config.model_type)}${scheme ? '-' + scheme.join('') : ''}.gguf`, [], scheme);
  const r = await logprobs(gguf, prompt, 12);
  const promptIds = r.addBos ? [r.bos, start] : [start];
  expect(r.promptTokens).toBe(promptIds.length);
  expect(r.steps).toHaveLength(12);
  // The files' handles are closed by close() (a Checkpoint has no close of its own).
  const ggufFile = fromPath(gguf);
  const ck = await openCheckpoint(ggufFile);
  // FP8 weights' scale blocks as config.json states them (the CLI reads them from there too).
  const block = (config.quantization_config as { weight_block_size?: [number, number] } | undefined)?.weight_block_size;
  const originalFile = fromPath(join(dir, 'model.safetensors'));
  const original = await openCheckpoint(originalFile, block ? { fp8BlockSize: block } : {});
  return {
    steps: r.steps,
    gguf: ck,
    async forced(cfg: ReturnType<typeof llamaConfig>, fromOriginal = false): Promise<Forced> {
      const model = await LlamaModel.load(cfg, fromOriginal ? checkpointWeights(original, cfg) : await quantizedWeights(ck, cfg));
      const logits = model.forward([...promptIds, ...r.steps.map((s) => s.id)].slice(0, -1));
      const lp = new Float64Array(V);
      const p0 = promptIds.length - 1;
      return r.steps.map((s, i) => {
        const arg = logSoftmax(logits.subarray((p0 + i) * V, (p0 + i + 1) * V), lp);
        return { logprob: lp[s.id], best: lp[arg] };
      });
    },
    /** Largest difference from llama.cpp's log-probabilities. */
    diff: (f: Forced) => Math.max(...r.steps.map((s, i) => Math.abs(f[i].logprob - s.logprob))),
    async close() {
      await ggufFile.close();
      await originalFile.close();
    },
  };
}

/**
 * The forward agrees with llama.cpp on the GGUF and on the original: the same log-probabilities to
 * 0.02, and llama.cpp's greedy pick is the forward's too (up to the rounding of its f16 activations).
 */
async function expectAgreement(run: Awaited<ReturnType<typeof againstLlamaCpp>>, cfg: ReturnType<typeof llamaConfig>): Promise<void> {
  const ours = await run.forced(cfg);
  ours.forEach((x, i) => expect(x.best - x.logprob, `step ${i}`).toBeLessThan(0.02));
  expect(run.diff(ours)).toBeLessThan(0.02);
  expect(run.diff(await run.forced(cfg, true))).toBeLessThan(0.02);
}

type Cfg = ReturnType<typeof llamaConfig>;

/**
 * One architecture against llama.cpp: the generated decoder and its config.json, what the parsed
 * config must say, and the same config without the architecture's feature, with which the
 * comparison must fail by far (so that it can tell a forward or a file that leaves it out).
 */
interface Case extends Family {
  expectConfig(cfg: Cfg): void;
  without(cfg: Cfg): Cfg;
}

const CASES: Case[] = [
  {
    ...FAMILIES.qwen3,
    expectConfig: (cfg) => expect(cfg.qk_norm).toBe(true),
    without: (cfg) => ({ ...cfg, qk_norm: false }),
  },
  {
    ...FAMILIES.gemma3,
    expectConfig: (cfg) => expect(cfg.gemma?.sliding).toEqual([true, true, true, true, true, false]),
    without: (cfg) => ({ ...cfg, gemma: { ...cfg.gemma!, sliding: cfg.gemma!.sliding.map(() => false) } }),
  },
  {
    ...FAMILIES.gemma2,
    expectConfig: (cfg) => expect([cfg.gemma?.version, cfg.gemma?.sliding, cfg.gemma?.attnLogitSoftcapping]).toEqual([2, [true, false, true, false], 0.2]),
    without: (cfg) => ({ ...cfg, gemma: { ...cfg.gemma!, attnLogitSoftcapping: undefined } }),
  },
  {
    ...FAMILIES.gemma1,
    expectConfig: (cfg) => expect([cfg.gemma?.version, cfg.gemma?.sliding, cfg.gemma?.queryPreAttnScalar]).toEqual([1, [false, false, false], 32]),
    without: (cfg) => ({ ...cfg, gemma: undefined }),
  },
  {
    ...FAMILIES.llama3,
    expectConfig: (cfg) => expect(cfg.rope_factors).toBeDefined(),
    without: (cfg) => ({ ...cfg, rope_factors: undefined }),
  },
  {
    ...FAMILIES.phi3,
    expectConfig: (cfg) => expect([cfg.phi3?.rotaryDims, cfg.phi3?.longrope?.attnFactor]).toEqual([12, Math.sqrt(1 + Math.log(8) / Math.log(512))]),
    without: (cfg) => ({ ...cfg, phi3: { rotaryDims: cfg.phi3!.rotaryDims } }),
  },
  {
    ...FAMILIES.mixtral,
    expectConfig: (cfg) => expect(cfg.moe).toEqual({ experts: 4, used: 2, ffn: D.FF, names: 'mixtral' }),
    without: (cfg) => ({ ...cfg, moe: { ...cfg.moe!, used: 1 } }),
  },
  {
    ...FAMILIES.qwen2moe,
    expectConfig: (cfg) => expect([cfg.moe, cfg.qkv_bias]).toEqual([{ experts: 4, used: 2, ffn: D.FF, names: 'qwen', unnormalized: true, gatedShared: 96 }, true]),
    without: (cfg) => ({ ...cfg, moe: { ...cfg.moe!, gatedShared: undefined } }),
  },
  {
    ...FAMILIES.qwen3moe,
    expectConfig: (cfg) => expect([cfg.moe, cfg.qk_norm]).toEqual([{ experts: 4, used: 2, ffn: D.FF, names: 'qwen' }, true]),
    without: (cfg) => ({ ...cfg, moe: { ...cfg.moe!, used: 1 } }),
  },
  {
    ...FAMILIES.granite,
    expectConfig: (cfg) => expect(cfg.granite).toEqual({ embedding: 2, residual: 0.5, attention: 0.1, logits: 2 }),
    without: (cfg) => ({ ...cfg, granite: undefined }),
  },
  {
    ...FAMILIES.olmo2,
    expectConfig: (cfg) => expect([cfg.olmo2, cfg.qk_norm]).toEqual([true, true]),
    without: (cfg) => ({ ...cfg, qk_norm: false }),
  },
  {
    ...FAMILIES.smollm3,
    expectConfig: (cfg) => expect(cfg.no_rope).toEqual([false, false, false, true]),
    without: (cfg) => ({ ...cfg, no_rope: undefined }),
  },
  {
    ...FAMILIES.deepseekV3,
    expectConfig: (cfg) => expect([cfg.mla, cfg.moe?.deepseek, cfg.yarn?.factor]).toEqual([
      { qLora: 32, kvLora: 32, nope: 16, rope: 8, v: 16 }, { gating: 'sigmoid', bias: true, scale: 2.5, shared: 32, denseLayers: 1 }, 4,
    ]),
    without: (cfg) => ({ ...cfg, yarn: undefined }),
  },
  {
    ...FAMILIES.deepseekV2,
    expectConfig: (cfg) => expect([cfg.mla?.qLora, cfg.moe?.deepseek, cfg.moe?.unnormalized]).toEqual([undefined, { gating: 'softmax', bias: false, scale: 1, shared: 64, denseLayers: 1 }, true]),
    without: (cfg) => ({ ...cfg, yarn: undefined }),
  },
  {
    ...FAMILIES.gptOss,
    expectConfig: (cfg) => expect([cfg.moe, cfg.gptOss, cfg.qkv_bias]).toEqual([{ experts: 4, used: 2, ffn: D.FF, names: 'qwen' }, { sliding: [true, false], window: 4, alpha: 1.702, limit: 7 }, true]),
    without: (cfg) => ({ ...cfg, gptOss: { ...cfg.gptOss!, sliding: [false, false] } }),
  },
  {
    ...FAMILIES.gpt2,
    expectConfig: (cfg) => expect([cfg.gpt2, cfg.tie_word_embeddings, cfg.intermediate_size]).toEqual([{ eps: 1e-5, positions: 64 }, true, 4 * D.H]),
    without: (cfg) => ({ ...cfg, gpt2: { ...cfg.gpt2!, eps: 1 } }),
  },
  {
    ...FAMILIES.gptNeox,
    expectConfig: (cfg) => expect(cfg.neox).toEqual({ eps: 1e-5, rotaryDims: 4, parallel: true, exactGelu: true }),
    without: (cfg) => ({ ...cfg, neox: { ...cfg.neox!, parallel: false } }),
  },
  {
    ...FAMILIES.phi2,
    expectConfig: (cfg) => expect(cfg.phi2).toEqual({ eps: 1e-5, rotaryDims: 8 }),
    without: (cfg) => ({ ...cfg, phi2: { ...cfg.phi2!, rotaryDims: 16 } }),
  },
  {
    ...FAMILIES.stablelm,
    expectConfig: (cfg) => expect([cfg.stablelm, cfg.qkv_bias]).toEqual([{ eps: 1e-5, rotaryDims: 4 }, true]),
    without: (cfg) => ({ ...cfg, stablelm: { ...cfg.stablelm!, rotaryDims: 16 } }),
  },
  {
    ...FAMILIES.starcoder2,
    expectConfig: (cfg) => expect([cfg.starcoder2, cfg.num_key_value_heads]).toEqual([{ eps: 1e-5, window: 64 }, D.KV]),
    without: (cfg) => ({ ...cfg, starcoder2: { ...cfg.starcoder2!, eps: 1 } }),
  },
  {
    ...FAMILIES.olmoe,
    expectConfig: (cfg) => expect([cfg.moe, cfg.qk_norm, cfg.qk_norm_whole]).toEqual([{ experts: 4, used: 2, ffn: D.FF, names: 'qwen', unnormalized: true }, true, true]),
    without: (cfg) => ({ ...cfg, qk_norm: false, qk_norm_whole: false }),
  },
  {
    ...FAMILIES.qwen2,
    expectConfig: (cfg) => expect(cfg.qkv_bias).toBe(true),
    without: (cfg) => ({ ...cfg, qkv_bias: false }),
  },
  {
    ...FAMILIES.qwen2Yarn,
    expectConfig: (cfg) => expect(cfg.yarn).toEqual({ factor: 4, original: 16, betaFast: 32, betaSlow: 1, mscale: 1, mscaleAllDim: 0 }),
    without: (cfg) => ({ ...cfg, yarn: undefined }),
  },
];

describe('llama.cpp reads webquant\'s GGUF MXFP4 (type 39) as webquant does', () => {
  it('a Qwen3 checkpoint quantized to mxfp4_gguf: the same log-probabilities from llama.cpp and from the forward on the GGUF', async () => {
    const config = { ...hfConfig(qwen3, 'Qwen3ForCausalLM', 'qwen3'), rope_theta: 1000000, attention_bias: false, hidden_act: 'silu', rope_scaling: null };
    const run = await againstLlamaCpp(tempDir('mxfp4'), decoder(7, qwen3), config, false, undefined, ['--format', 'mxfp4_gguf']);
    const mx = run.gguf.tensors.filter((t) => t.dtype === 'MXFP4').map((t) => t.name);
    expect(mx).toContain('blk.0.ffn_down.weight');
    expect(mx).toContain('blk.1.attn_q.weight');
    // llama.cpp multiplies MXFP4 weights with Q8_0-rounded activations (ggml's vec_dot type for
    // MXFP4), hence a looser bound than the f16 cases; a misread block (scale, sign, nibble order)
    // moves log-probabilities by far more, as the original's unquantized weights do.
    const ours = await run.forced(llamaConfig(config));
    ours.forEach((x, i) => expect(x.best - x.logprob, `step ${i}`).toBeLessThan(0.05));
    expect(run.diff(ours)).toBeLessThan(0.1);
    expect(run.diff(await run.forced(llamaConfig(config), true))).toBeGreaterThan(0.3);
    await run.close();
  });
});

describe('llama.cpp runs gpt-oss written with the mxfp4_moe preset as webquant does', () => {
  it('MXFP4 experts (their released values) and Q8_0 elsewhere: the same log-probabilities from llama.cpp and from the forward on the GGUF', async () => {
    const c = CASES.find((x) => x.title.startsWith('gpt-oss'))!;
    const run = await againstLlamaCpp(tempDir('oss-mxfp4'), gptOssDecoder(c.seed), c.config, false, undefined, ['--preset', 'mxfp4_moe']);
    expect(['blk.0.ffn_gate_exps.weight', 'blk.1.ffn_down_exps.weight', 'blk.0.attn_q.weight'].map((n) => run.gguf.tensor(n).dtype)).toEqual(['MXFP4', 'MXFP4', 'Q8_0']);
    // Q8_0-rounded activations in llama.cpp's MXFP4 and Q8_0 products (see the MXFP4 case above).
    const ours = await run.forced(llamaConfig(c.config));
    ours.forEach((x, i) => expect(x.best - x.logprob, `step ${i}`).toBeLessThan(0.05));
    expect(run.diff(ours)).toBeLessThan(0.1);
    await run.close();
  });
});

describe('llama.cpp runs generated checkpoints as webquant\'s reference forward does', () => {
  for (const c of CASES) {
    it(`${c.title}: the same log-probabilities, and without it they differ`, async () => {
      // The folder names the GGUF (general.name): not after the family, since llama.cpp keys some
      // token attributes on a name that says Phi-3, for tokens this small vocabulary lacks.
      const run = await againstLlamaCpp(tempDir(`case${c.seed}`), familyTensors(c), c.config, c.spm, c.preTokenizer);
      const cfg = llamaConfig(c.config);
      c.expectConfig(cfg);
      await expectAgreement(run, cfg);
      expect(run.diff(await run.forced(c.without(cfg)))).toBeGreaterThan(0.2);
      await run.close();
    });
  }
});

// The families read through a view (src/convert): their safetensors outputs keep the stored names
// and layouts (gpt-oss: its MXFP4 experts kept as U8 blocks and scales), and eval reads them
// through the same view (src/eval/quantized.ts). A wrong layout would give unrelated logits;
// int8's error is a few percent at most.
describe('safetensors outputs of the families stored otherwise run close to their originals', () => {
  for (const c of CASES.filter((x) => ['gpt2', 'gpt_neox', 'phi', 'starcoder2', 'gpt_oss'].includes(String(x.config.model_type)))) {
    it(`${c.title.split(':')[0]}: an int8 safetensors output, read through the original's view`, async () => {
      const dir = tempDir(`st${c.seed}`);
      const tensors = familyTensors(c);
      writeFileSync(join(dir, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
      writeFileSync(join(dir, 'config.json'), JSON.stringify(c.config));
      const out = await quantize(dir, `st${c.seed}.safetensors`, [], ['--preset', 'int8']);
      const cfg = llamaConfig(c.config);
      const ref = await LlamaModel.load(cfg, checkpointWeights(await openCheckpoint(fromPath(join(dir, 'model.safetensors'))), cfg));
      const cand = await LlamaModel.load(cfg, await quantizedWeights(await openCheckpoint(fromPath(out)), cfg));
      const tokens = [1, 5, 9, 13, 17, 21, 25, 29];
      const a = ref.forward(tokens), b = cand.forward(tokens);
      let se = 0, s = 0;
      for (let i = 0; i < a.length; i++) { se += (a[i] - b[i]) ** 2; s += a[i] ** 2; }
      const rel = Math.sqrt(se / s);
      expect(rel, c.title).toBeGreaterThan(0);
      expect(rel, c.title).toBeLessThan(0.05);
    });
  }
});
