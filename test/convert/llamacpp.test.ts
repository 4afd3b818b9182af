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
import { byteLevelTokenizer, DEEPSEEK_LLM_PRE_TOKENIZER, DEEPSEEK_V3_PRE_TOKENIZER, GPT4O_REGEX, llamaPieces, QWEN2_REGEX, spModel } from './tokenizer-fixtures.js';
import { fromPath } from '../../src/io/node.js';
import { openCheckpoint } from '../../src/io/open.js';
import { LlamaModel, checkpointWeights, llamaConfig } from '../../src/eval/llama.js';
import { fp8Weights, type GenTensor } from '../helpers/data.js';
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

/** Shape and value scales of a generated decoder (uniform values: scale * [-0.5, 0.5) + offset). */
interface Decoder {
  H: number; HEADS: number; KV: number; HD: number; FF: number; V: number; LAYERS: number;
  embed: number; head: number; qk: number; v?: number; o?: number; mlp?: number;
  /** Scale and offset of the norm weights. */
  norm: [number, number];
  /** Per-head q/k norms (Qwen3, Gemma 3), scale and offset. */
  qkNorm?: [number, number];
  /** Gemma 3's pre-/post-feedforward norms. */
  gemma?: boolean;
  /** Scale of q/k/v biases (Qwen2). */
  bias?: number;
  /** No lm_head: the embedding is the output head too (Gemma 2, whose converter drops lm_head). */
  tied?: boolean;
  /** Scale and offset of the final norm, when not `norm`'s. */
  finalNorm?: [number, number];
  /** Phi-3's fused self_attn.qkv_proj and mlp.gate_up_proj. */
  fused?: boolean;
  /** OLMo 2's layers: no norm before attention or the FFN, one after each; q/k norms over the whole projection. */
  olmo2?: boolean;
  /** MoE layers: a router and this many experts, named as Mixtral or Qwen-MoE name them. */
  moe?: { experts: number; names: 'mixtral' | 'qwen'; router?: number; /** Qwen2-MoE: a shared expert of this width and its gate. */ shared?: number };
}

/** The tensors of a generated Hugging Face decoder, with a separate output head (lm_head) unless tied. */
function decoder(seed: number, d: Decoder): { name: string; dtype: string; shape: number[]; data: Float32Array }[] {
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const t = (name: string, shape: number[], scale = 0.2, offset = 0) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1), scale).map((x) => x + offset) });
  const { H, HEADS, KV, HD, FF, V } = d;
  const tensors = [t('model.embed_tokens.weight', [V, H], d.embed), t('model.norm.weight', [H], ...(d.finalNorm ?? d.norm))];
  if (!d.tied) tensors.push(t('lm_head.weight', [V, H], d.head));
  for (let l = 0; l < d.LAYERS; l++) {
    const p = `model.layers.${l}.`;
    if (!d.olmo2) tensors.push(t(`${p}input_layernorm.weight`, [H], ...d.norm), t(`${p}post_attention_layernorm.weight`, [H], ...d.norm));
    if (d.gemma) tensors.push(t(`${p}pre_feedforward_layernorm.weight`, [H], ...d.norm), t(`${p}post_feedforward_layernorm.weight`, [H], ...d.norm));
    if (d.olmo2) {
      tensors.push(t(`${p}self_attn.q_proj.weight`, [HEADS * HD, H], d.qk), t(`${p}self_attn.k_proj.weight`, [KV * HD, H], d.qk), t(`${p}self_attn.v_proj.weight`, [KV * HD, H], d.v),
        t(`${p}self_attn.q_norm.weight`, [HEADS * HD], ...d.qkNorm!), t(`${p}self_attn.k_norm.weight`, [KV * HD], ...d.qkNorm!), t(`${p}self_attn.o_proj.weight`, [H, HEADS * HD], d.o),
        t(`${p}post_attention_layernorm.weight`, [H], ...d.norm), t(`${p}mlp.gate_proj.weight`, [FF, H], d.mlp), t(`${p}mlp.up_proj.weight`, [FF, H], d.mlp),
        t(`${p}mlp.down_proj.weight`, [H, FF], d.mlp), t(`${p}post_feedforward_layernorm.weight`, [H], ...d.norm));
      continue;
    }
    if (d.fused) {
      const q = t(`${p}q`, [HEADS * HD, H], d.qk), k = t(`${p}k`, [KV * HD, H], d.qk), v = t(`${p}v`, [KV * HD, H], d.v);
      const qkv = new Float32Array(q.data.length + k.data.length + v.data.length);
      qkv.set(q.data); qkv.set(k.data, q.data.length); qkv.set(v.data, q.data.length + k.data.length);
      const gate = t(`${p}g`, [FF, H], d.mlp), up = t(`${p}u`, [FF, H], d.mlp);
      const gu = new Float32Array(2 * FF * H);
      gu.set(gate.data); gu.set(up.data, FF * H);
      tensors.push({ name: `${p}self_attn.qkv_proj.weight`, dtype: 'F32', shape: [(HEADS + 2 * KV) * HD, H], data: qkv },
        t(`${p}self_attn.o_proj.weight`, [H, HEADS * HD], d.o), { name: `${p}mlp.gate_up_proj.weight`, dtype: 'F32', shape: [2 * FF, H], data: gu },
        t(`${p}mlp.down_proj.weight`, [H, FF], d.mlp));
      continue;
    }
    tensors.push(t(`${p}self_attn.q_proj.weight`, [HEADS * HD, H], d.qk), t(`${p}self_attn.k_proj.weight`, [KV * HD, H], d.qk), t(`${p}self_attn.v_proj.weight`, [KV * HD, H], d.v));
    if (d.bias) tensors.push(t(`${p}self_attn.q_proj.bias`, [HEADS * HD], d.bias), t(`${p}self_attn.k_proj.bias`, [KV * HD], d.bias), t(`${p}self_attn.v_proj.bias`, [KV * HD], d.bias));
    if (d.qkNorm) tensors.push(t(`${p}self_attn.q_norm.weight`, [HD], ...d.qkNorm), t(`${p}self_attn.k_norm.weight`, [HD], ...d.qkNorm));
    tensors.push(t(`${p}self_attn.o_proj.weight`, [H, HEADS * HD], d.o));
    if (d.moe) {
      const mix = d.moe.names === 'mixtral';
      tensors.push(t(mix ? `${p}block_sparse_moe.gate.weight` : `${p}mlp.gate.weight`, [d.moe.experts, H], d.moe.router ?? 2));
      for (let e = 0; e < d.moe.experts; e++) {
        const x = mix ? `${p}block_sparse_moe.experts.${e}.` : `${p}mlp.experts.${e}.`;
        const [g, u, dn] = mix ? ['w1', 'w3', 'w2'] : ['gate_proj', 'up_proj', 'down_proj'];
        tensors.push(t(`${x}${g}.weight`, [FF, H], d.mlp), t(`${x}${u}.weight`, [FF, H], d.mlp), t(`${x}${dn}.weight`, [H, FF], d.mlp));
      }
      const S = d.moe.shared;
      if (S) {
        tensors.push(t(`${p}mlp.shared_expert.gate_proj.weight`, [S, H], d.mlp), t(`${p}mlp.shared_expert.up_proj.weight`, [S, H], d.mlp),
          t(`${p}mlp.shared_expert.down_proj.weight`, [H, S], d.mlp), t(`${p}mlp.shared_expert_gate.weight`, [1, H], 1));
      }
      continue;
    }
    tensors.push(t(`${p}mlp.gate_proj.weight`, [FF, H], d.mlp), t(`${p}mlp.up_proj.weight`, [FF, H], d.mlp), t(`${p}mlp.down_proj.weight`, [H, FF], d.mlp));
  }
  return tensors;
}

/**
 * A generated DeepSeek-shaped checkpoint: MLA (q through a rank-32 pair, or one q_proj for the
 * V2-Lite shape, a 32-value latent, 8 rope dims shared by the 4 heads, 16 nope and 16 value dims
 * per head), layer 0 dense, the others MoE (4 experts of width 32, 2 per token, `shared` shared
 * experts, V3's router correction bias), and one layer past the model (V3's multi-token prediction).
 */
function deepseekDecoder(seed: number, o: { layers: number; qLora: boolean; bias: boolean; shared: number }): { name: string; dtype: string; shape: number[]; data: Float32Array }[] {
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const t = (name: string, shape: number[], scale = 0.2, offset = 0) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1), scale).map((x) => x + offset) });
  const { H, FF, V } = D, HEADS = 4, QL = 32, KVL = 32, NOPE = 16, ROPE = 8, VD = 16, E = 4, EFF = 32;
  const tensors = [t('model.embed_tokens.weight', [V, H], 1), t('model.norm.weight', [H], 0.5, 1), t('lm_head.weight', [V, H], 0.8)];
  for (let l = 0; l < o.layers; l++) {
    const p = `model.layers.${l}.`;
    tensors.push(t(`${p}input_layernorm.weight`, [H], 0.5, 1), t(`${p}post_attention_layernorm.weight`, [H], 0.5, 1));
    if (o.qLora) tensors.push(t(`${p}self_attn.q_a_proj.weight`, [QL, H], 0.6), t(`${p}self_attn.q_a_layernorm.weight`, [QL], 0.5, 1), t(`${p}self_attn.q_b_proj.weight`, [HEADS * (NOPE + ROPE), QL], 0.6));
    else tensors.push(t(`${p}self_attn.q_proj.weight`, [HEADS * (NOPE + ROPE), H], 0.6));
    tensors.push(t(`${p}self_attn.kv_a_proj_with_mqa.weight`, [KVL + ROPE, H], 0.6), t(`${p}self_attn.kv_a_layernorm.weight`, [KVL], 0.5, 1),
      t(`${p}self_attn.kv_b_proj.weight`, [HEADS * (NOPE + VD), KVL], 0.6), t(`${p}self_attn.o_proj.weight`, [H, HEADS * VD], 0.4));
    if (l === 0) {
      tensors.push(t(`${p}mlp.gate_proj.weight`, [FF, H]), t(`${p}mlp.up_proj.weight`, [FF, H]), t(`${p}mlp.down_proj.weight`, [H, FF]));
      continue;
    }
    tensors.push(t(`${p}mlp.gate.weight`, [E, H], 2));
    if (o.bias) tensors.push(t(`${p}mlp.gate.e_score_correction_bias`, [E], 0.5));
    for (let e = 0; e < E; e++) {
      tensors.push(t(`${p}mlp.experts.${e}.gate_proj.weight`, [EFF, H]), t(`${p}mlp.experts.${e}.up_proj.weight`, [EFF, H]), t(`${p}mlp.experts.${e}.down_proj.weight`, [H, EFF]));
    }
    const S = EFF * o.shared;
    tensors.push(t(`${p}mlp.shared_experts.gate_proj.weight`, [S, H]), t(`${p}mlp.shared_experts.up_proj.weight`, [S, H]), t(`${p}mlp.shared_experts.down_proj.weight`, [H, S]));
  }
  // The multi-token prediction layer V3 checkpoints carry past num_hidden_layers: not converted.
  tensors.push(t(`model.layers.${o.layers}.input_layernorm.weight`, [H], 0.5, 1));
  return tensors;
}

/** The config.json keys both DeepSeek cases share (the deepseekDecoder shapes). */
const deepseekConfig = (model: string, type: string, layers: number) => ({
  architectures: [model], model_type: type, hidden_size: D.H, intermediate_size: D.FF, num_hidden_layers: layers, num_attention_heads: 4, num_key_value_heads: 4,
  vocab_size: D.V, max_position_embeddings: 512, rms_norm_eps: 1e-6, rope_theta: 10000, tie_word_embeddings: false, hidden_act: 'silu', attention_bias: false,
  kv_lora_rank: 32, qk_nope_head_dim: 16, qk_rope_head_dim: 8, v_head_dim: 16, n_routed_experts: 4, num_experts_per_tok: 2, moe_intermediate_size: 32,
  first_k_dense_replace: 1, n_group: 1, topk_group: 1, moe_layer_freq: 1,
});

type Cfg = ReturnType<typeof llamaConfig>;

/**
 * One architecture against llama.cpp: the generated decoder and its config.json, what the parsed
 * config must say, and the same config without the architecture's feature, with which the
 * comparison must fail by far (so that it can tell a forward or a file that leaves it out).
 */
/**
 * A gpt-oss checkpoint as released: attention with biases and a sink per head, a router with a
 * bias, and experts packed as transformers saves them: gate and up rows interleaved in
 * gate_up_proj, matrices in MXFP4 (`_blocks`: byte i holds elements 2i and 2i + 1 of a 32-value
 * block, low nibble first; `_scales`: E8M0), biases beside them.
 */
function gptOssDecoder(seed: number): GenTensor[] {
  const d: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1], bias: 0.5, moe: { experts: 4, names: 'qwen', router: 0.5 } };
  const base = decoder(seed, d);
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6];
  // Rows of 32-value blocks -> MXFP4 blocks and scales (nearest E2M1 value, scale 2^(floor(log2 amax) - 2)).
  const mxfp4 = (x: Float32Array, rows: number, cols: number) => {
    const nb = cols / 32, blocks = new Uint8Array(rows * nb * 16), scales = new Uint8Array(rows * nb);
    for (let b = 0; b < rows * nb; b++) {
      let amax = 0;
      for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[b * 32 + j]));
      const s = amax > 0 ? Math.floor(Math.log2(amax)) - 2 + 127 : 0;
      scales[b] = s;
      const code = (v: number) => {
        const a = Math.abs(v) / 2 ** (s - 127);
        const m = E2M1.reduce((best, e, i) => (Math.abs(e - a) < Math.abs(E2M1[best] - a) ? i : best), 0);
        return m | (v < 0 && m ? 8 : 0);
      };
      for (let i = 0; i < 16; i++) blocks[b * 16 + i] = code(x[b * 32 + 2 * i]) | (code(x[b * 32 + 2 * i + 1]) << 4);
    }
    return { blocks, scales };
  };
  const { H, HEADS, FF } = D, E = 4;
  const get = (name: string) => base.find((t) => t.name === name)!.data;
  const out: GenTensor[] = base.filter((t) => !/\.mlp\.(?:gate|experts)\./.test(t.name));
  for (let l = 0; l < d.LAYERS; l++) {
    const p = `model.layers.${l}.`;
    out.push({ name: `${p}self_attn.o_proj.bias`, dtype: 'F32', shape: [H], data: rnd(H, 0.5) },
      { name: `${p}self_attn.sinks`, dtype: 'F32', shape: [HEADS], data: rnd(HEADS, 4) },
      { name: `${p}mlp.router.weight`, dtype: 'F32', shape: [E, H], data: get(`${p}mlp.gate.weight`) as Float32Array },
      { name: `${p}mlp.router.bias`, dtype: 'F32', shape: [E], data: rnd(E, 1) });
    const gateUp = new Float32Array(E * 2 * FF * H), down = new Float32Array(E * H * FF);
    for (let e = 0; e < E; e++) {
      const g = get(`${p}mlp.experts.${e}.gate_proj.weight`) as Float32Array, u = get(`${p}mlp.experts.${e}.up_proj.weight`) as Float32Array;
      for (let f = 0; f < FF; f++) {
        gateUp.set(g.subarray(f * H, (f + 1) * H), (e * 2 * FF + 2 * f) * H);
        gateUp.set(u.subarray(f * H, (f + 1) * H), (e * 2 * FF + 2 * f + 1) * H);
      }
      down.set(get(`${p}mlp.experts.${e}.down_proj.weight`) as Float32Array, e * H * FF);
    }
    const gu = mxfp4(gateUp, E * 2 * FF, H), dn = mxfp4(down, E * H, FF);
    out.push({ name: `${p}mlp.experts.gate_up_proj_blocks`, dtype: 'U8', shape: [E, 2 * FF, H / 32, 16], data: gu.blocks },
      { name: `${p}mlp.experts.gate_up_proj_scales`, dtype: 'U8', shape: [E, 2 * FF, H / 32], data: gu.scales },
      { name: `${p}mlp.experts.gate_up_proj_bias`, dtype: 'F32', shape: [E, 2 * FF], data: rnd(E * 2 * FF, 0.5) },
      { name: `${p}mlp.experts.down_proj_blocks`, dtype: 'U8', shape: [E, H, FF / 32, 16], data: dn.blocks },
      { name: `${p}mlp.experts.down_proj_scales`, dtype: 'U8', shape: [E, H, FF / 32], data: dn.scales },
      { name: `${p}mlp.experts.down_proj_bias`, dtype: 'F32', shape: [E, H], data: rnd(E * H, 0.5) });
  }
  return out;
}

/**
 * A GPT-2 checkpoint as transformers saves it: Conv1D projections stored [in, out], q, k and v in
 * one c_attn, LayerNorms with biases, learned positions, the head tied to wte.
 */
function gpt2Decoder(seed: number): GenTensor[] {
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const t = (name: string, shape: number[], scale = 0.2, offset = 0) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1), scale).map((x) => x + offset) });
  const { H, V } = D, FF = 4 * H;
  // wte's rows and ln_f's bias share a positive offset: the tied head then scores the tokens that
  // keep their rows above the zeroed ones (see againstLlamaCpp).
  const tensors: GenTensor[] = [t('wte.weight', [V, H], 1, 0.3), t('wpe.weight', [64, H], 0.5), t('ln_f.weight', [H], 0.5, 1), t('ln_f.bias', [H], 0.2, 1)];
  for (let l = 0; l < 2; l++) {
    const p = `h.${l}.`;
    tensors.push(t(`${p}ln_1.weight`, [H], 0.5, 1), t(`${p}ln_1.bias`, [H], 0.2), t(`${p}attn.c_attn.weight`, [H, 3 * H], 0.5), t(`${p}attn.c_attn.bias`, [3 * H], 0.5),
      t(`${p}attn.c_proj.weight`, [H, H], 0.4), t(`${p}attn.c_proj.bias`, [H], 0.2), t(`${p}ln_2.weight`, [H], 0.5, 1), t(`${p}ln_2.bias`, [H], 0.2),
      t(`${p}mlp.c_fc.weight`, [H, FF], 0.4), t(`${p}mlp.c_fc.bias`, [FF], 0.4), t(`${p}mlp.c_proj.weight`, [FF, H], 0.3), t(`${p}mlp.c_proj.bias`, [H], 0.2),
      // The causal-mask buffer old checkpoints carry, which GGUF does not store.
      { name: `${p}attn.bias`, dtype: 'F32', shape: [1, 1, 4, 4], data: new Float32Array(16).fill(1) });
  }
  return tensors;
}

/**
 * A GPT-NeoX (Pythia) checkpoint as transformers saves it: each head's q, k and v rows together in
 * query_key_value, LayerNorms with biases, an untied embed_out.
 */
function neoxDecoder(seed: number): GenTensor[] {
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const t = (name: string, shape: number[], scale = 0.2, offset = 0) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1), scale).map((x) => x + offset) });
  const { H, V } = D, FF = 4 * H;
  const tensors: GenTensor[] = [t('gpt_neox.embed_in.weight', [V, H], 1), t('gpt_neox.final_layer_norm.weight', [H], 0.5, 1), t('gpt_neox.final_layer_norm.bias', [H], 0.2), t('embed_out.weight', [V, H], 0.8)];
  for (let l = 0; l < 2; l++) {
    const p = `gpt_neox.layers.${l}.`;
    tensors.push(t(`${p}input_layernorm.weight`, [H], 0.5, 1), t(`${p}input_layernorm.bias`, [H], 0.2), t(`${p}post_attention_layernorm.weight`, [H], 0.5, 1), t(`${p}post_attention_layernorm.bias`, [H], 0.2),
      t(`${p}attention.query_key_value.weight`, [3 * H, H], 0.6), t(`${p}attention.query_key_value.bias`, [3 * H], 0.5), t(`${p}attention.dense.weight`, [H, H], 0.4), t(`${p}attention.dense.bias`, [H], 0.2),
      t(`${p}mlp.dense_h_to_4h.weight`, [FF, H], 0.4), t(`${p}mlp.dense_h_to_4h.bias`, [FF], 0.4), t(`${p}mlp.dense_4h_to_h.weight`, [H, FF], 0.3), t(`${p}mlp.dense_4h_to_h.bias`, [H], 0.2),
      { name: `${p}attention.rotary_emb.inv_freq`, dtype: 'F32', shape: [2], data: new Float32Array([1, 0.01]) });
  }
  return tensors;
}

/** A Phi-2 checkpoint (PhiForCausalLM): q/k/v with biases, dense, fc1 / fc2, one LayerNorm per block, a biased head. */
function phi2Decoder(seed: number): GenTensor[] {
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const t = (name: string, shape: number[], scale = 0.2, offset = 0) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1), scale).map((x) => x + offset) });
  const { H, V } = D, FF = 4 * H;
  const tensors: GenTensor[] = [t('model.embed_tokens.weight', [V, H], 1), t('model.final_layernorm.weight', [H], 0.5, 1), t('model.final_layernorm.bias', [H], 0.2),
    t('lm_head.weight', [V, H], 0.8), t('lm_head.bias', [V], 0.5)];
  for (let l = 0; l < 2; l++) {
    const p = `model.layers.${l}.`;
    tensors.push(t(`${p}input_layernorm.weight`, [H], 0.5, 1), t(`${p}input_layernorm.bias`, [H], 0.2));
    for (const x of ['q', 'k', 'v']) tensors.push(t(`${p}self_attn.${x}_proj.weight`, [H, H], 0.6), t(`${p}self_attn.${x}_proj.bias`, [H], 0.5));
    tensors.push(t(`${p}self_attn.dense.weight`, [H, H], 0.4), t(`${p}self_attn.dense.bias`, [H], 0.2),
      t(`${p}mlp.fc1.weight`, [FF, H], 0.4), t(`${p}mlp.fc1.bias`, [FF], 0.4), t(`${p}mlp.fc2.weight`, [H, FF], 0.3), t(`${p}mlp.fc2.bias`, [H], 0.2));
  }
  return tensors;
}

/** A StableLM-2 checkpoint: Llama's tensors, q/k/v biases, and a bias beside every LayerNorm weight. */
function stablelmDecoder(seed: number): GenTensor[] {
  const base = decoder(seed, { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1], bias: 0.5 });
  let s = seed;
  const rnd = (n: number) => Float32Array.from({ length: n }, () => { s = (s * 1103515245 + 12345) >>> 0; return (s / 2 ** 32 - 0.5) * 0.4; });
  return base.flatMap((t) => (/(?:layernorm|model\.norm)\.weight$/.test(t.name) ? [t, { name: t.name.replace(/weight$/, 'bias'), dtype: 'F32', shape: t.shape, data: rnd(t.shape[0]) }] : [t]));
}

/** A StarCoder2 checkpoint: Llama's names with every projection and LayerNorm biased, and mlp.c_fc / c_proj. */
function starcoder2Decoder(seed: number): GenTensor[] {
  const rnd = (n: number, scale: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * scale; });
  const t = (name: string, shape: number[], scale = 0.2, offset = 0) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1), scale).map((x) => x + offset) });
  const { H, V, HEADS, KV } = D, HD = 16, FF = 4 * H;
  const tensors: GenTensor[] = [t('model.embed_tokens.weight', [V, H], 1), t('model.norm.weight', [H], 0.5, 1), t('model.norm.bias', [H], 0.2), t('lm_head.weight', [V, H], 0.8)];
  for (let l = 0; l < 2; l++) {
    const p = `model.layers.${l}.`;
    tensors.push(t(`${p}input_layernorm.weight`, [H], 0.5, 1), t(`${p}input_layernorm.bias`, [H], 0.2), t(`${p}post_attention_layernorm.weight`, [H], 0.5, 1), t(`${p}post_attention_layernorm.bias`, [H], 0.2),
      t(`${p}self_attn.q_proj.weight`, [HEADS * HD, H], 0.8), t(`${p}self_attn.q_proj.bias`, [HEADS * HD], 0.5), t(`${p}self_attn.k_proj.weight`, [KV * HD, H], 0.8), t(`${p}self_attn.k_proj.bias`, [KV * HD], 0.5),
      t(`${p}self_attn.v_proj.weight`, [KV * HD, H], 0.6), t(`${p}self_attn.v_proj.bias`, [KV * HD], 0.5), t(`${p}self_attn.o_proj.weight`, [H, HEADS * HD], 0.4), t(`${p}self_attn.o_proj.bias`, [H], 0.2),
      t(`${p}mlp.c_fc.weight`, [FF, H], 0.4), t(`${p}mlp.c_fc.bias`, [FF], 0.4), t(`${p}mlp.c_proj.weight`, [H, FF], 0.3), t(`${p}mlp.c_proj.bias`, [H], 0.2));
  }
  return tensors;
}

/** An OLMoE checkpoint: Qwen-MoE's layers with q/k RMSNorms over the whole projections. */
function olmoeDecoder(seed: number): GenTensor[] {
  // Every head its own keys, as OLMoE-1B-7B has them.
  const base = decoder(seed, { ...D, KV: D.HEADS, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.6, norm: [0.5, 1], moe: { experts: 4, names: 'qwen', router: 0.5 } });
  let s = seed;
  const rnd = (n: number) => Float32Array.from({ length: n }, () => { s = (s * 1103515245 + 12345) >>> 0; return 1 + (s / 2 ** 32 - 0.5) * 1.5; });
  return base.flatMap((t) => {
    const m = /^(model\.layers\.\d+\.)self_attn\.(q|k)_proj\.weight$/.exec(t.name);
    return m ? [t, { name: `${m[1]}self_attn.${m[2]}_norm.weight`, dtype: 'F32', shape: [t.shape[0]], data: rnd(t.shape[0]) }] : [t];
  });
}

interface Case {
  title: string;
  /** A SentencePiece tokenizer.model instead of a byte-level tokenizer.json. */
  spm?: boolean;
  /** tokenizer.json's pre_tokenizer, when not Qwen2's (llama.cpp must know the name webquant writes for it). */
  preTokenizer?: Record<string, unknown>;
  seed: number;
  decoder: Decoder | ((seed: number) => GenTensor[]);
  config: Record<string, unknown>;
  expectConfig(cfg: Cfg): void;
  without(cfg: Cfg): Cfg;
}

const D = { H: 64, HEADS: 4, KV: 2, FF: 128, V: 300 };
const hfConfig = (d: Decoder, model: string, type: string) => ({
  architectures: [model], model_type: type, hidden_size: d.H, intermediate_size: d.FF, num_hidden_layers: d.LAYERS, num_attention_heads: d.HEADS,
  num_key_value_heads: d.KV, head_dim: d.HD, vocab_size: d.V, max_position_embeddings: 512, rms_norm_eps: 1e-6, tie_word_embeddings: false,
});

// Norm weights around 1 but uneven (Gemma's w of 1 + w: around 0), so that a norm applied to the
// wrong values shows; heads scaled for next-token distributions neither flat nor certain (a tied
// head would mostly predict the input token back; Gemma's embedding scale and norms prevent that).
const qwen3: Decoder = { ...D, HD: 32, LAYERS: 2, embed: 1, head: 0.8, qk: 0.6, norm: [0.5, 1], qkNorm: [1.5, 1] };
// Six layers: five local (window 4, shorter than the 13 positions run) and one global.
const gemma3: Decoder = { ...D, HD: 32, LAYERS: 6, embed: 0.5, head: 0.3, qk: 0.6, v: 0.4, o: 0.4, mlp: 0.4, norm: [0.5, 0], qkNorm: [1, 0], gemma: true };
const llama3: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1] };
const qwen2: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.6, norm: [0.5, 1], bias: 1.5 };
const mixtral: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1], moe: { experts: 4, names: 'mixtral' } };
const qwen2moe: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1], bias: 0.5, moe: { experts: 4, names: 'qwen', router: 0.5, shared: 96 } };
const qwen3moe: Decoder = { ...D, HD: 32, LAYERS: 2, embed: 1, head: 0.8, qk: 0.6, norm: [0.5, 1], qkNorm: [1.5, 1], moe: { experts: 4, names: 'qwen', router: 0.5 } };
const granite: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1] };
const olmo2: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1], qkNorm: [1.5, 1], olmo2: true };
const smollm3: Decoder = { ...D, HD: 16, LAYERS: 4, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1] };
const phi3: Decoder = { ...D, HD: 16, LAYERS: 2, embed: 1, head: 0.8, qk: 0.8, norm: [0.5, 1], fused: true };
// Four layers, local and global in turn (window 4). Its head is the embedding: a final norm of
// about -1 (1 + w, w near -2) keeps it from predicting the input token back every time.
const gemma2: Decoder = { ...D, HD: 32, LAYERS: 4, embed: 0.5, head: 0, qk: 2, v: 0.4, o: 0.4, mlp: 0.4, norm: [0.5, 0], finalNorm: [0.5, -2], gemma: true, tied: true };
// Gemma 1 (2B's shape: one key/value head): Llama's two norms per layer, as 1 + w; the head is the
// embedding, kept from predicting the input token back by a final norm of about -1 (see Gemma 2).
const gemma1: Decoder = { ...D, KV: 1, HD: 32, LAYERS: 3, embed: 0.5, head: 0, qk: 0.6, v: 0.4, o: 0.4, mlp: 0.4, norm: [0.5, 0], finalNorm: [0.5, -2], tied: true };

const CASES: Case[] = [
  {
    title: 'Qwen3: per-head q/k norms, head_dim 32 of a 64-wide model', seed: 5, decoder: qwen3,
    config: { ...hfConfig(qwen3, 'Qwen3ForCausalLM', 'qwen3'), rope_theta: 1000000, attention_bias: false, hidden_act: 'silu', rope_scaling: null },
    expectConfig: (cfg) => expect(cfg.qk_norm).toBe(true),
    without: (cfg) => ({ ...cfg, qk_norm: false }),
  },
  {
    title: 'Gemma 3: norms + 1 around attention and FFN, local layers with a sliding window', seed: 9, decoder: gemma3,
    config: {
      ...hfConfig(gemma3, 'Gemma3ForCausalLM', 'gemma3_text'), rope_theta: 1000000, rope_local_base_freq: 10000, sliding_window: 4, sliding_window_pattern: 6,
      query_pre_attn_scalar: 32, attention_bias: false, hidden_activation: 'gelu_pytorch_tanh', rope_scaling: null, attn_logit_softcapping: null, final_logit_softcapping: null,
    },
    expectConfig: (cfg) => expect(cfg.gemma?.sliding).toEqual([true, true, true, true, true, false]),
    without: (cfg) => ({ ...cfg, gemma: { ...cfg.gemma!, sliding: cfg.gemma!.sliding.map(() => false) } }),
  },
  {
    // Attention scores capped at 0.2 (large q/k weights) so that the cap matters here.
    title: 'Gemma 2: norms + 1, alternating local layers, capped attention scores and logits, tied head', seed: 29, decoder: gemma2,
    config: {
      ...hfConfig(gemma2, 'Gemma2ForCausalLM', 'gemma2'), rope_theta: 10000, sliding_window: 4, query_pre_attn_scalar: 32, attn_logit_softcapping: 0.2,
      final_logit_softcapping: 30, tie_word_embeddings: true, attention_bias: false, hidden_activation: 'gelu_pytorch_tanh', hidden_act: 'gelu_pytorch_tanh',
    },
    expectConfig: (cfg) => expect([cfg.gemma?.version, cfg.gemma?.sliding, cfg.gemma?.attnLogitSoftcapping]).toEqual([2, [true, false, true, false], 0.2]),
    without: (cfg) => ({ ...cfg, gemma: { ...cfg.gemma!, attnLogitSoftcapping: undefined } }),
  },
  {
    // config.json as google/gemma-2b first shipped it: hidden_act "gelu", no hidden_activation.
    title: 'Gemma 1: Llama\'s norms as 1 + w, embeddings times sqrt(hidden), a tanh-GELU gate, tied head, a SentencePiece vocabulary', seed: 107, decoder: gemma1, spm: true,
    config: { ...hfConfig(gemma1, 'GemmaForCausalLM', 'gemma'), rope_theta: 10000, tie_word_embeddings: true, attention_bias: false, hidden_act: 'gelu', rope_scaling: null },
    expectConfig: (cfg) => expect([cfg.gemma?.version, cfg.gemma?.sliding, cfg.gemma?.queryPreAttnScalar]).toEqual([1, [false, false, false], 32]),
    without: (cfg) => ({ ...cfg, gemma: undefined }),
  },
  {
    // Llama 3.2's scaling with a short original context, so that it moves most frequencies here.
    title: 'Llama 3 rope scaling as rope_freqs.weight', seed: 17, decoder: llama3,
    config: {
      ...hfConfig(llama3, 'LlamaForCausalLM', 'llama'), rms_norm_eps: 1e-5, rope_theta: 500000, hidden_act: 'silu',
      rope_scaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 },
    },
    expectConfig: (cfg) => expect(cfg.rope_factors).toBeDefined(),
    without: (cfg) => ({ ...cfg, rope_factors: undefined }),
  },
  {
    // Phi-4-mini's shape: 3/4 of each head rotated (12 of 16 dims), LongRoPE. An original context
    // of 512, as large as llama.cpp's here, so that both use the short factors and the attention
    // factor sqrt(1 + ln(4096/512)/ln(512)).
    title: 'Phi-3: fused qkv and gate_up, partial rotary, LongRoPE', seed: 31, decoder: phi3, spm: true,
    config: {
      ...hfConfig(phi3, 'Phi3ForCausalLM', 'phi3'), max_position_embeddings: 4096, original_max_position_embeddings: 512, rope_theta: 10000, rms_norm_eps: 1e-5,
      partial_rotary_factor: 0.75, hidden_act: 'silu', sliding_window: null,
      rope_scaling: { type: 'longrope', short_factor: [1, 1.5, 2, 4, 8, 16], long_factor: [1, 2, 4, 8, 16, 32] },
    },
    expectConfig: (cfg) => expect([cfg.phi3?.rotaryDims, cfg.phi3?.longrope?.attnFactor]).toEqual([12, Math.sqrt(1 + Math.log(8) / Math.log(512))]),
    without: (cfg) => ({ ...cfg, phi3: { rotaryDims: cfg.phi3!.rotaryDims } }),
  },
  {
    // 4 experts, 2 per token; the forward runs on the original (the GGUF stacks the experts).
    title: 'Mixtral: MoE layers, experts stacked into ffn_*_exps', seed: 53, decoder: mixtral,
    config: { ...hfConfig(mixtral, 'MixtralForCausalLM', 'mixtral'), rope_theta: 1000000, hidden_act: 'silu', num_local_experts: 4, num_experts_per_tok: 2, rope_scaling: null },
    expectConfig: (cfg) => expect(cfg.moe).toEqual({ experts: 4, used: 2, ffn: D.FF, names: 'mixtral' }),
    without: (cfg) => ({ ...cfg, moe: { ...cfg.moe!, used: 1 } }),
  },
  {
    title: 'Qwen2-MoE: a shared expert behind a sigmoid gate, q/k/v biases, unnormalised expert weights', seed: 71, decoder: qwen2moe,
    config: {
      ...hfConfig(qwen2moe, 'Qwen2MoeForCausalLM', 'qwen2_moe'), rope_theta: 1000000, hidden_act: 'silu', num_experts: 4, num_experts_per_tok: 2,
      moe_intermediate_size: D.FF, shared_expert_intermediate_size: 96, norm_topk_prob: false, decoder_sparse_step: 1, mlp_only_layers: [], rope_scaling: null,
    },
    expectConfig: (cfg) => expect([cfg.moe, cfg.qkv_bias]).toEqual([{ experts: 4, used: 2, ffn: D.FF, names: 'qwen', unnormalized: true, gatedShared: 96 }, true]),
    without: (cfg) => ({ ...cfg, moe: { ...cfg.moe!, gatedShared: undefined } }),
  },
  {
    title: 'Qwen3-MoE: MoE layers with their own width, per-head q/k norms', seed: 59, decoder: qwen3moe,
    config: {
      ...hfConfig(qwen3moe, 'Qwen3MoeForCausalLM', 'qwen3_moe'), rope_theta: 1000000, hidden_act: 'silu', num_experts: 4, num_experts_per_tok: 2,
      moe_intermediate_size: D.FF, norm_topk_prob: true, decoder_sparse_step: 1, mlp_only_layers: [], attention_bias: false, rope_scaling: null,
    },
    expectConfig: (cfg) => expect([cfg.moe, cfg.qk_norm]).toEqual([{ experts: 4, used: 2, ffn: D.FF, names: 'qwen' }, true]),
    without: (cfg) => ({ ...cfg, moe: { ...cfg.moe!, used: 1 } }),
  },
  {
    title: 'Granite: scaled embeddings, residual branches, attention scores and logits', seed: 47, decoder: granite,
    config: {
      ...hfConfig(granite, 'GraniteForCausalLM', 'granite'), rope_theta: 10000, hidden_act: 'silu', attention_bias: false, mlp_bias: false, rope_scaling: null,
      embedding_multiplier: 2, residual_multiplier: 0.5, attention_multiplier: 0.1, logits_scaling: 2,
    },
    expectConfig: (cfg) => expect(cfg.granite).toEqual({ embedding: 2, residual: 0.5, attention: 0.1, logits: 2 }),
    without: (cfg) => ({ ...cfg, granite: undefined }),
  },
  {
    title: 'OLMo 2: norms after attention and FFN only, q/k norms over the whole projection', seed: 43, decoder: olmo2,
    config: { ...hfConfig(olmo2, 'Olmo2ForCausalLM', 'olmo2'), rope_theta: 500000, hidden_act: 'silu', attention_bias: false, rope_scaling: null },
    expectConfig: (cfg) => expect([cfg.olmo2, cfg.qk_norm]).toEqual([true, true]),
    without: (cfg) => ({ ...cfg, qk_norm: false }),
  },
  {
    // Layer 3 of 4 without rope, as SmolLM3's no_rope_layers say and llama.cpp assumes.
    title: 'SmolLM3: every 4th layer without rope', seed: 41, decoder: smollm3,
    config: { ...hfConfig(smollm3, 'SmolLM3ForCausalLM', 'smollm3'), rope_theta: 5000000, hidden_act: 'silu', no_rope_layers: [1, 1, 1, 0], rope_scaling: null },
    expectConfig: (cfg) => expect(cfg.no_rope).toEqual([false, false, false, true]),
    without: (cfg) => ({ ...cfg, no_rope: undefined }),
  },
  {
    // YaRN with a short original context (factor 4): frequencies and attention scale both move.
    // The projections in FP8 with 16 x 16 scale blocks, as V3 ships them (128 x 128 there): the
    // GGUF gets their scaled values, on every read path (plain, kv_b split, stacked experts).
    title: 'DeepSeek-V3 in FP8: latent attention (kv_b split into attn_k_b/attn_v_b), sigmoid routing with bias, shared expert, dense first layer, YaRN', seed: 61,
    decoder: (seed) => fp8Weights(deepseekDecoder(seed, { layers: 2, qLora: true, bias: true, shared: 1 }), 16), preTokenizer: DEEPSEEK_V3_PRE_TOKENIZER,
    config: {
      ...deepseekConfig('DeepseekV3ForCausalLM', 'deepseek_v3', 2), q_lora_rank: 32, n_shared_experts: 1, routed_scaling_factor: 2.5, norm_topk_prob: true, scoring_func: 'sigmoid',
      topk_method: 'noaux_tc', rope_scaling: { type: 'yarn', factor: 4, original_max_position_embeddings: 64, beta_fast: 32, beta_slow: 1, mscale: 1, mscale_all_dim: 1 },
      quantization_config: { quant_method: 'fp8', fmt: 'e4m3', activation_scheme: 'dynamic', weight_block_size: [16, 16] },
    },
    expectConfig: (cfg) => expect([cfg.mla, cfg.moe?.deepseek, cfg.yarn?.factor]).toEqual([
      { qLora: 32, kvLora: 32, nope: 16, rope: 8, v: 16 }, { gating: 'sigmoid', bias: true, scale: 2.5, shared: 32, denseLayers: 1 }, 4,
    ]),
    without: (cfg) => ({ ...cfg, yarn: undefined }),
  },
  {
    // llama.cpp reads one q_proj only in a 27-layer model (V2-Lite's depth); YaRN with V2's mscales.
    title: 'DeepSeek-V2-Lite: one q_proj, softmax routing, two shared experts, YaRN', seed: 67,
    decoder: (seed) => deepseekDecoder(seed, { layers: 27, qLora: false, bias: false, shared: 2 }), preTokenizer: DEEPSEEK_LLM_PRE_TOKENIZER,
    config: {
      ...deepseekConfig('DeepseekV2ForCausalLM', 'deepseek_v2', 27), q_lora_rank: null, n_shared_experts: 2, routed_scaling_factor: 1, norm_topk_prob: false, scoring_func: 'softmax',
      topk_method: 'greedy', rope_scaling: { type: 'yarn', factor: 16, original_max_position_embeddings: 64, beta_fast: 32, beta_slow: 1, mscale: 0.707, mscale_all_dim: 0.707 },
    },
    expectConfig: (cfg) => expect([cfg.mla?.qLora, cfg.moe?.deepseek, cfg.moe?.unnormalized]).toEqual([undefined, { gating: 'softmax', bias: false, scale: 1, shared: 64, denseLayers: 1 }, true]),
    without: (cfg) => ({ ...cfg, yarn: undefined }),
  },
  {
    // As released: MXFP4 experts (gate and up interleaved), sinks, biases everywhere, even layers
    // sliding (window 4 of the 13 positions run), YaRN over a short original context.
    title: 'gpt-oss: MXFP4 experts with biases, attention sinks, sliding layers, clamped SwiGLU, YaRN', seed: 73, decoder: gptOssDecoder,
    config: {
      ...hfConfig({ ...D, HD: 16, LAYERS: 2 } as Decoder, 'GptOssForCausalLM', 'gpt_oss'), rms_norm_eps: 1e-5, rope_theta: 150000, hidden_act: 'silu', attention_bias: true,
      num_local_experts: 4, num_experts_per_tok: 2, sliding_window: 4, layer_types: ['sliding_attention', 'full_attention'], swiglu_limit: 7,
      rope_scaling: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 16, beta_fast: 32, beta_slow: 1 },
      quantization_config: { quant_method: 'mxfp4', modules_to_not_convert: ['model.layers.*.self_attn', 'model.layers.*.mlp.router', 'model.embed_tokens', 'lm_head'] },
    },
    expectConfig: (cfg) => expect([cfg.moe, cfg.gptOss, cfg.qkv_bias]).toEqual([{ experts: 4, used: 2, ffn: D.FF, names: 'qwen' }, { sliding: [true, false], window: 4, alpha: 1.702, limit: 7 }, true]),
    without: (cfg) => ({ ...cfg, gptOss: { ...cfg.gptOss!, sliding: [false, false] } }),
  },
  {
    title: 'GPT-2: Conv1D projections transposed, LayerNorms with biases, learned positions, tied head', seed: 79, decoder: gpt2Decoder,
    config: {
      architectures: ['GPT2LMHeadModel'], model_type: 'gpt2', n_embd: D.H, n_layer: 2, n_head: D.HEADS, n_positions: 64, n_ctx: 64, n_inner: null,
      vocab_size: D.V, layer_norm_epsilon: 1e-5, activation_function: 'gelu_new',
    },
    expectConfig: (cfg) => expect([cfg.gpt2, cfg.tie_word_embeddings, cfg.intermediate_size]).toEqual([{ eps: 1e-5, positions: 64 }, true, 4 * D.H]),
    without: (cfg) => ({ ...cfg, gpt2: { ...cfg.gpt2!, eps: 1 } }),
  },
  {
    // Pythia's shape: a quarter of each head rotated, parallel residuals, exact GELU.
    title: 'GPT-NeoX (Pythia): q/k/v grouped by head, partial NeoX rotary, parallel residuals, LayerNorms with biases', seed: 83, decoder: neoxDecoder,
    config: {
      architectures: ['GPTNeoXForCausalLM'], model_type: 'gpt_neox', hidden_size: D.H, intermediate_size: 4 * D.H, num_hidden_layers: 2, num_attention_heads: D.HEADS,
      vocab_size: D.V, max_position_embeddings: 128, rotary_pct: 0.25, rotary_emb_base: 10000, layer_norm_eps: 1e-5, use_parallel_residual: true, hidden_act: 'gelu',
      tie_word_embeddings: false,
    },
    expectConfig: (cfg) => expect(cfg.neox).toEqual({ eps: 1e-5, rotaryDims: 4, parallel: true, exactGelu: true }),
    without: (cfg) => ({ ...cfg, neox: { ...cfg.neox!, parallel: false } }),
  },
  {
    title: 'Phi-2: one LayerNorm feeding attention and FFN in parallel, partial rotary, biased projections and head', seed: 89, decoder: phi2Decoder,
    config: {
      architectures: ['PhiForCausalLM'], model_type: 'phi', hidden_size: D.H, intermediate_size: 4 * D.H, num_hidden_layers: 2, num_attention_heads: D.HEADS, num_key_value_heads: D.HEADS,
      vocab_size: D.V, max_position_embeddings: 128, partial_rotary_factor: 0.5, rope_theta: 10000, layer_norm_eps: 1e-5, hidden_act: 'gelu_new', qk_layernorm: false, tie_word_embeddings: false,
    },
    expectConfig: (cfg) => expect(cfg.phi2).toEqual({ eps: 1e-5, rotaryDims: 8 }),
    without: (cfg) => ({ ...cfg, phi2: { ...cfg.phi2!, rotaryDims: 16 } }),
  },
  {
    title: 'StableLM-2: LayerNorms with biases, a quarter of each head rotated, q/k/v biases', seed: 97, decoder: stablelmDecoder,
    config: {
      ...hfConfig({ ...D, HD: 16, LAYERS: 2 } as Decoder, 'StableLmForCausalLM', 'stablelm'), rope_theta: 10000, partial_rotary_factor: 0.25, layer_norm_eps: 1e-5,
      use_qkv_bias: true, qk_layernorm: false, use_parallel_residual: false, hidden_act: 'silu',
    },
    expectConfig: (cfg) => expect([cfg.stablelm, cfg.qkv_bias]).toEqual([{ eps: 1e-5, rotaryDims: 4 }, true]),
    without: (cfg) => ({ ...cfg, stablelm: { ...cfg.stablelm!, rotaryDims: 16 } }),
  },
  {
    // sliding_window is longer than the positions run (llama.cpp b6327 has no window for starcoder2).
    title: 'StarCoder2: LayerNorms and every projection with biases, GQA, a GELU FFN', seed: 101, decoder: starcoder2Decoder,
    config: {
      architectures: ['Starcoder2ForCausalLM'], model_type: 'starcoder2', hidden_size: D.H, intermediate_size: 4 * D.H, num_hidden_layers: 2, num_attention_heads: D.HEADS,
      num_key_value_heads: D.KV, vocab_size: D.V, max_position_embeddings: 256, rope_theta: 100000, norm_epsilon: 1e-5, use_bias: true, hidden_act: 'gelu_pytorch_tanh',
      sliding_window: 64, tie_word_embeddings: false,
    },
    expectConfig: (cfg) => expect([cfg.starcoder2, cfg.num_key_value_heads]).toEqual([{ eps: 1e-5, window: 64 }, D.KV]),
    without: (cfg) => ({ ...cfg, starcoder2: { ...cfg.starcoder2!, eps: 1 } }),
  },
  {
    title: 'OLMoE: q/k norms over the whole projections, experts kept at their softmax weights', seed: 103, decoder: olmoeDecoder,
    config: {
      ...hfConfig({ ...D, KV: D.HEADS, HD: 16, LAYERS: 2 } as Decoder, 'OlmoeForCausalLM', 'olmoe'), rope_theta: 10000, hidden_act: 'silu', num_experts: 4, num_experts_per_tok: 2,
      norm_topk_prob: false, clip_qkv: null, rope_scaling: null,
    },
    expectConfig: (cfg) => expect([cfg.moe, cfg.qk_norm, cfg.qk_norm_whole]).toEqual([{ experts: 4, used: 2, ffn: D.FF, names: 'qwen', unnormalized: true }, true, true]),
    without: (cfg) => ({ ...cfg, qk_norm: false, qk_norm_whole: false }),
  },
  {
    title: 'Qwen2: q/k/v biases in the Hugging Face row order', seed: 23, decoder: qwen2,
    config: { ...hfConfig(qwen2, 'Qwen2ForCausalLM', 'qwen2'), rope_theta: 1000000, hidden_act: 'silu' },
    expectConfig: (cfg) => expect(cfg.qkv_bias).toBe(true),
    without: (cfg) => ({ ...cfg, qkv_bias: false }),
  },
  {
    // transformers' default YaRN (Qwen2.5 / Qwen3 long-context configs): blended frequencies and
    // cos, sin times 0.1 ln(factor) + 1; a short original context so that the blend moves.
    title: 'Qwen2 with YaRN rope scaling', seed: 29, decoder: qwen2,
    config: {
      ...hfConfig(qwen2, 'Qwen2ForCausalLM', 'qwen2'), rope_theta: 10000, hidden_act: 'silu',
      rope_scaling: { type: 'yarn', factor: 4, original_max_position_embeddings: 16 },
    },
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
      const run = await againstLlamaCpp(tempDir(`case${c.seed}`), typeof c.decoder === 'function' ? c.decoder(c.seed) : decoder(c.seed, c.decoder), c.config, c.spm, c.preTokenizer);
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
      const tensors = typeof c.decoder === 'function' ? c.decoder(c.seed) : decoder(c.seed, c.decoder);
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
