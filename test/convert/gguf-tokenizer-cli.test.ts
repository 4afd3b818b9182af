// `webquant quantize` writing GGUF from safetensors with the tokenizer converted: the llama2.c
// tokenizer of stories260K against its reference GGUF, tokenizer files found beside the input, a
// generated Qwen2 checkpoint, and the typed errors. Outputs are read back with @huggingface/gguf.
import { beforeAll, describe, expect, it } from 'vitest';
import { gguf } from '@huggingface/gguf';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SHARED, hasShared } from '../helpers/shared.js';
import { cli, ensureBuilt, tempDir } from '../cli/helpers.js';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect } from '../../src/io/stream.js';
import { fromBuffer } from '../../src/io/source.js';
import { openCheckpoint } from '../../src/io/open.js';
import { gemma3Metadata, llama3RopeFactors, permuteRows } from '../../src/convert/arch/index.js';
import { hfGgufMetadata, llamaConfigFrom } from '../../src/convert/hf-view.js';
import { readConfig } from '../../src/io/config.js';
import { fromPath } from '../../src/io/node.js';
import { byteLevelTokenizer, llamaPieces, QWEN2_REGEX, spModel } from './tokenizer-fixtures.js';
import { bf16ToF32, f32ToBf16 } from '../../src/util/half.js';

const DIR = join(SHARED, 'models/stories260K');
const read = async (p: string) => (await gguf(p, { allowLocalFile: true }));
const tokenizerKeys = (m: Record<string, unknown>) => Object.fromEntries(Object.entries(m).filter(([k]) => k.startsWith('tokenizer.')));

beforeAll(async () => { await ensureBuilt(); }, 600_000);

const QWEN_SPECIALS = [{ content: '<|endoftext|>', special: true }, { content: '<|im_start|>', special: true }, { content: '<|im_end|>', special: true }];

/** Writes a Qwen-style tokenizer (qwen2 regex, its three special tokens) beside a generated checkpoint, quantizes the folder to Q8_0 GGUF and reads the result back. */
async function qwenGguf(dir: string, tokenizerConfig: Record<string, unknown>): Promise<{ out: string; g: Awaited<ReturnType<typeof read>> }> {
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(byteLevelTokenizer({ regex: QWEN2_REGEX, added: QWEN_SPECIALS })));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig));
  const out = join(dir, 'q.gguf');
  const r = await cli(['quantize', dir, '-o', out, '--format', 'q8_0', '--workers', '1'], { cwd: dir });
  expect(r.code, r.stderr).toBe(0);
  return { out, g: await read(out) };
}

describe.skipIf(!hasShared)('quantize stories260K with its llama2.c tokenizer', () => {
  it('writes the tokenizer keys of the reference GGUF (but unk for pad, see llama2c-tokenizer.test.ts)', async () => {
    const tmp = tempDir('tok');
    const out = join(tmp, 's.gguf');
    const r = await cli(['quantize', join(DIR, 'model.safetensors'), '-o', out, '--format', 'q8_0', '--tokenizer', join(DIR, 'tok512.bin'), '--workers', '1'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('note: tokenizer from tok512.bin: llama, 512 tokens');
    expect(r.stdout).not.toContain('no_vocab');
    const got = tokenizerKeys((await read(out)).metadata);
    const want = tokenizerKeys((await read(join(DIR, 'tinyllamas-stories-260k-f32.gguf'))).metadata);
    const { 'tokenizer.ggml.unknown_token_id': unk, ...rest } = got;
    const { 'tokenizer.ggml.padding_token_id': pad, ...refRest } = want;
    expect(rest).toEqual(refRest);
    expect([unk, pad]).toEqual([0, 0]);
  });

  it('finds tokenizer.json beside the input; --tokenizer none writes no_vocab; a bad file is E_TOKENIZER', async () => {
    const tmp = tempDir('tok');
    for (const f of ['model.safetensors', 'config.json']) copyFileSync(join(DIR, f), join(tmp, f));
    const tj = byteLevelTokenizer({ added: [{ content: '<|begin_of_text|>', special: true }, { content: '<|eot_id|>', special: true }], bosTemplate: '<|begin_of_text|>' });
    writeFileSync(join(tmp, 'tokenizer.json'), JSON.stringify(tj));
    writeFileSync(join(tmp, 'tokenizer_config.json'), JSON.stringify({ bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>', chat_template: '{{ messages }}' }));
    const r = await cli(['quantize', tmp, '-o', join(tmp, 'a.gguf'), '--format', 'q8_0', '--workers', '1'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/tokenizer from tokenizer.json \+ tokenizer_config.json: gpt2 \(pre llama-bpe\), 512 tokens, 10 merges/);
    const m = (await read(join(tmp, 'a.gguf'))).metadata;
    expect(m['tokenizer.ggml.model']).toBe('gpt2');
    expect(m['tokenizer.ggml.pre']).toBe('llama-bpe');
    expect((m['tokenizer.ggml.tokens'] as string[]).length).toBe(512);
    expect((m['tokenizer.ggml.tokens'] as string[])[511]).toBe('[PAD511]');
    expect(m['tokenizer.ggml.merges']).toHaveLength(10);
    expect([m['tokenizer.ggml.bos_token_id'], m['tokenizer.ggml.eos_token_id'], m['tokenizer.ggml.add_bos_token']]).toEqual([266, 267, true]);
    expect(m['tokenizer.chat_template']).toBe('{{ messages }}');

    const none = await cli(['quantize', tmp, '-o', join(tmp, 'b.gguf'), '--format', 'q8_0', '--workers', '1', '--tokenizer', 'none'], { cwd: tmp });
    expect(none.code).toBe(0);
    expect(none.stdout).toContain('--tokenizer none');
    expect((await read(join(tmp, 'b.gguf'))).metadata['tokenizer.ggml.model']).toBe('no_vocab');

    // Writing safetensors never reads the tokenizer.
    writeFileSync(join(tmp, 'tokenizer.json'), '{"model": {"type": "BPE", "vocab": ');
    expect((await cli(['quantize', tmp, '-o', join(tmp, 'c.safetensors'), '--format', 'nf4', '--workers', '1'], { cwd: tmp })).code).toBe(0);
    const bad = await cli(['quantize', tmp, '-o', join(tmp, 'c.gguf'), '--format', 'q8_0', '--workers', '1'], { cwd: tmp });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/tokenizer\.json: not JSON .*\(E_TOKENIZER\)/);
    const missing = await cli(['quantize', tmp, '-o', join(tmp, 'd.gguf'), '--format', 'q8_0', '--tokenizer', join(tmp, 'nope')], { cwd: tmp });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/tokenizer .*nope does not exist/);
  });

  it('writes the model card of the input folder, also with --tokenizer none or another tokenizer folder, and warns of values it leaves out', async () => {
    const tmp = tempDir('card');
    for (const f of ['model.safetensors', 'config.json']) copyFileSync(join(DIR, f), join(tmp, f));
    writeFileSync(join(tmp, 'README.md'), '---\nlicense: mit\nlanguage: [en]\nversion: 2\nbase_model: karpathy/tinyllamas\n---\n# stories\n');
    writeFileSync(join(tmp, 'generation_config.json'), JSON.stringify({ temperature: 0.8 }));
    const other = tempDir('card-tok');
    copyFileSync(join(DIR, 'tok512.bin'), join(other, 'tok512.bin'));
    writeFileSync(join(other, 'README.md'), '---\nlicense: other\n---\n');
    const card = (m: Record<string, unknown>) => [m['general.license'], m['general.languages'], m['general.base_model.0.repo_url'], m['general.version']];
    for (const extra of [[], ['--tokenizer', 'none'], ['--tokenizer', join(other, 'tok512.bin')]]) {
      const out = join(tmp, `o${extra.length}.gguf`);
      const r = await cli(['quantize', tmp, '-o', out, '--format', 'q8_0', '--workers', '1', ...extra], { cwd: tmp });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain('warning: model card: version 2 is not a string: left out');
      const m = (await read(out)).metadata;
      expect(card(m), extra.join(' ')).toEqual(['mit', ['en'], 'https://huggingface.co/karpathy/tinyllamas', undefined]);
      // The sampling defaults come with the tokenizer files' folder (their ids go together).
      expect(m['general.sampling.temp'], extra.join(' ')).toBe(extra.length === 2 && extra[1] !== 'none' ? undefined : Math.fround(0.8));
    }
  });
});

describe('quantize a generated Qwen2 checkpoint to GGUF', () => {
  const H = 64, HEADS = 4, KV = 2, HD = H / HEADS, FF = 128, V = 300, LAYERS = 2;
  let seed = 7;
  const rnd = (n: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * 0.2; });

  function checkpoint(): { name: string; dtype: string; shape: number[]; data: Float32Array }[] {
    const t = (name: string, shape: number[]) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1)) });
    const list = [t('model.embed_tokens.weight', [V, H]), t('model.norm.weight', [H])];
    for (let l = 0; l < LAYERS; l++) {
      const p = `model.layers.${l}.`;
      list.push(
        t(`${p}input_layernorm.weight`, [H]), t(`${p}post_attention_layernorm.weight`, [H]),
        t(`${p}self_attn.q_proj.weight`, [H, H]), t(`${p}self_attn.q_proj.bias`, [H]),
        t(`${p}self_attn.k_proj.weight`, [KV * HD, H]), t(`${p}self_attn.k_proj.bias`, [KV * HD]),
        t(`${p}self_attn.v_proj.weight`, [KV * HD, H]), t(`${p}self_attn.v_proj.bias`, [KV * HD]),
        t(`${p}self_attn.o_proj.weight`, [H, H]),
        t(`${p}mlp.gate_proj.weight`, [FF, H]), t(`${p}mlp.up_proj.weight`, [FF, H]), t(`${p}mlp.down_proj.weight`, [H, FF]),
      );
    }
    return list;
  }

  it('writes qwen2.* keys, llama.cpp tensor names with q/k/v biases, no q/k permutation, and the qwen2 tokenizer', async () => {
    const tmp = tempDir('qwen2');
    const tensors = checkpoint();
    writeFileSync(join(tmp, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
    writeFileSync(join(tmp, 'config.json'), JSON.stringify({
      architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', hidden_size: H, intermediate_size: FF, num_hidden_layers: LAYERS,
      num_attention_heads: HEADS, num_key_value_heads: KV, vocab_size: V, max_position_embeddings: 4096, rms_norm_eps: 1e-6,
      rope_theta: 1000000, tie_word_embeddings: true, bos_token_id: 266, eos_token_id: 266,
      rope_scaling: { type: 'yarn', factor: 4, original_max_position_embeddings: 1024 },
    }));
    const { out, g } = await qwenGguf(tmp, { bos_token: null, eos_token: '<|im_end|>', pad_token: '<|endoftext|>', chat_template: '{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}' });
    const m = g.metadata;
    expect(m['general.architecture']).toBe('qwen2');
    expect([m['qwen2.block_count'], m['qwen2.context_length'], m['qwen2.embedding_length'], m['qwen2.feed_forward_length']]).toEqual([LAYERS, 4096, H, FF]);
    expect([m['qwen2.attention.head_count'], m['qwen2.attention.head_count_kv']]).toEqual([HEADS, KV]);
    expect(m['qwen2.rope.freq_base']).toBe(1000000);
    expect(m['qwen2.attention.layer_norm_rms_epsilon']).toBeCloseTo(1e-6, 12);
    expect([m['qwen2.rope.scaling.type'], m['qwen2.rope.scaling.factor'], m['qwen2.rope.scaling.original_context_length']]).toEqual(['yarn', 4, 1024]);
    expect(Object.keys(m).filter((k) => k.startsWith('llama.'))).toEqual([]);
    expect(m['general.file_type']).toBe(7);
    expect(m['tokenizer.ggml.model']).toBe('gpt2');
    expect(m['tokenizer.ggml.pre']).toBe('qwen2');
    expect((m['tokenizer.ggml.tokens'] as string[]).length).toBe(V);
    expect([m['tokenizer.ggml.eos_token_id'], m['tokenizer.ggml.padding_token_id'], m['tokenizer.ggml.bos_token_id']]).toEqual([268, 266, 266]);
    expect(typeof m['tokenizer.chat_template']).toBe('string');

    const names = g.tensorInfos.map((t) => t.name).sort();
    const want = ['token_embd.weight', 'output_norm.weight'];
    for (let l = 0; l < LAYERS; l++) {
      for (const s of ['attn_norm.weight', 'ffn_norm.weight', 'attn_q.weight', 'attn_q.bias', 'attn_k.weight', 'attn_k.bias', 'attn_v.weight', 'attn_v.bias', 'attn_output.weight', 'ffn_gate.weight', 'ffn_up.weight', 'ffn_down.weight']) want.push(`blk.${l}.${s}`);
    }
    expect(names).toEqual(want.sort());
    // Tied embeddings: no output.weight (llama.cpp's qwen2 loader falls back to token_embd).
    expect(names).not.toContain('output.weight');

    // Biases are kept in F32 and in the Hugging Face row order: Qwen2 runs NeoX rope, nothing is permuted.
    const ck = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(out)), out));
    for (const [gname, hf, heads] of [['blk.1.attn_q.bias', 'model.layers.1.self_attn.q_proj.bias', HEADS], ['blk.0.attn_k.bias', 'model.layers.0.self_attn.k_proj.bias', KV]] as const) {
      const src = tensors.find((t) => t.name === hf)!.data;
      expect(ck.tensor(gname).dtype).toBe('F32');
      expect(await ck.readF32(gname)).toEqual(src);
      // The check would see a permutation: it changes these values.
      const permuted = new Float32Array(permuteRows(new Uint8Array(src.buffer.slice(0)), src.length, 4, heads).buffer);
      expect(permuted).not.toEqual(src);
    }
  });
});

describe('quantize a generated Qwen3 checkpoint to GGUF', () => {
  // head_dim 32 with 4 heads of a 64-wide model: q_proj is [128, 64], as Qwen3's head_dim (128)
  // differs from hidden_size / num_attention_heads in the real models.
  const H = 64, HEADS = 4, KV = 2, HD = 32, FF = 128, V = 300, LAYERS = 2;
  let seed = 11;
  const rnd = (n: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * 0.2; });

  it('writes qwen3.* keys with key/value lengths, attn_q_norm / attn_k_norm in F32, no biases, no q/k permutation', async () => {
    const tmp = tempDir('qwen3');
    const t = (name: string, shape: number[], dtype = 'F32') => {
      const data = rnd(shape.reduce((a, b) => a * b, 1));
      // BF16 storage for the norms, as the real checkpoints: the GGUF must widen them to F32.
      return dtype === 'BF16' ? { name, dtype, shape, data: Uint16Array.from(new Uint32Array(data.buffer), (u) => u >>> 16), f32: data } : { name, dtype, shape, data };
    };
    const tensors: { name: string; dtype: string; shape: number[]; data: Float32Array | Uint16Array }[] = [t('model.embed_tokens.weight', [V, H]), t('model.norm.weight', [H])];
    for (let l = 0; l < LAYERS; l++) {
      const p = `model.layers.${l}.`;
      tensors.push(
        t(`${p}input_layernorm.weight`, [H]), t(`${p}post_attention_layernorm.weight`, [H]),
        t(`${p}self_attn.q_proj.weight`, [HEADS * HD, H]), t(`${p}self_attn.k_proj.weight`, [KV * HD, H]), t(`${p}self_attn.v_proj.weight`, [KV * HD, H]),
        t(`${p}self_attn.q_norm.weight`, [HD], 'BF16'), t(`${p}self_attn.k_norm.weight`, [HD], 'BF16'),
        t(`${p}self_attn.o_proj.weight`, [H, HEADS * HD]),
        t(`${p}mlp.gate_proj.weight`, [FF, H]), t(`${p}mlp.up_proj.weight`, [FF, H]), t(`${p}mlp.down_proj.weight`, [H, FF]),
      );
    }
    writeFileSync(join(tmp, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
    writeFileSync(join(tmp, 'config.json'), JSON.stringify({
      architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', hidden_size: H, intermediate_size: FF, num_hidden_layers: LAYERS,
      num_attention_heads: HEADS, num_key_value_heads: KV, head_dim: HD, vocab_size: V, max_position_embeddings: 40960, rms_norm_eps: 1e-6,
      rope_theta: 1000000, tie_word_embeddings: true, attention_bias: false, hidden_act: 'silu', rope_scaling: null,
    }));
    const { out, g } = await qwenGguf(tmp, { bos_token: null, eos_token: '<|im_end|>', pad_token: '<|endoftext|>' });
    const m = g.metadata;
    expect(m['general.architecture']).toBe('qwen3');
    expect([m['qwen3.block_count'], m['qwen3.context_length'], m['qwen3.embedding_length'], m['qwen3.feed_forward_length']]).toEqual([LAYERS, 40960, H, FF]);
    expect([m['qwen3.attention.head_count'], m['qwen3.attention.head_count_kv']]).toEqual([HEADS, KV]);
    expect([m['qwen3.attention.key_length'], m['qwen3.attention.value_length']]).toEqual([HD, HD]);
    expect(m['qwen3.rope.freq_base']).toBe(1000000);
    expect(Object.keys(m).filter((k) => k.startsWith('llama.') || k.startsWith('qwen2.'))).toEqual([]);
    expect(m['tokenizer.ggml.pre']).toBe('qwen2');

    const names = g.tensorInfos.map((x) => x.name).sort();
    const want = ['token_embd.weight', 'output_norm.weight'];
    for (let l = 0; l < LAYERS; l++) {
      for (const s of ['attn_norm.weight', 'ffn_norm.weight', 'attn_q.weight', 'attn_k.weight', 'attn_v.weight', 'attn_q_norm.weight', 'attn_k_norm.weight', 'attn_output.weight', 'ffn_gate.weight', 'ffn_up.weight', 'ffn_down.weight']) want.push(`blk.${l}.${s}`);
    }
    expect(names).toEqual(want.sort());

    const ck = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(out)), out));
    // The per-head norms: kept, widened to F32, the stored bf16 values exactly.
    const qn = tensors.find((x) => x.name === 'model.layers.1.self_attn.q_norm.weight')!.data as Uint16Array;
    expect(ck.tensor('blk.1.attn_q_norm.weight').dtype).toBe('F32');
    expect(ck.tensor('blk.1.attn_q_norm.weight').shape).toEqual([HD]);
    expect(await ck.readF32('blk.1.attn_q_norm.weight')).toEqual(new Float32Array(Uint32Array.from(qn, (b) => b << 16).buffer));
    // q_proj in Hugging Face row order (NeoX rope): row r of the GGUF dequantizes near row r of the source.
    const q = tensors.find((x) => x.name === 'model.layers.0.self_attn.q_proj.weight')!.data as Float32Array;
    const back = await ck.readF32('blk.0.attn_q.weight');
    expect(ck.tensor('blk.0.attn_q.weight').shape).toEqual([HEADS * HD, H]);
    let err = 0;
    for (let i = 0; i < q.length; i++) err = Math.max(err, Math.abs(back[i] - q[i]));
    expect(err).toBeLessThan(0.002);
  });
});

/** A Gemma 3 text model's tensors (Hugging Face names), made by `t`. */
function gemma3Tensors<T>(t: (name: string, shape: number[]) => T, d: { H: number; HEADS: number; KV: number; HD: number; FF: number; V: number; LAYERS: number }): T[] {
  const { H, HEADS, KV, HD, FF, V } = d;
  const tensors = [t('model.embed_tokens.weight', [V, H]), t('model.norm.weight', [H])];
  for (let l = 0; l < d.LAYERS; l++) {
    const p = `model.layers.${l}.`;
    tensors.push(t(`${p}input_layernorm.weight`, [H]), t(`${p}post_attention_layernorm.weight`, [H]), t(`${p}pre_feedforward_layernorm.weight`, [H]),
      t(`${p}post_feedforward_layernorm.weight`, [H]), t(`${p}self_attn.q_norm.weight`, [HD]), t(`${p}self_attn.k_norm.weight`, [HD]),
      t(`${p}self_attn.q_proj.weight`, [HEADS * HD, H]), t(`${p}self_attn.k_proj.weight`, [KV * HD, H]), t(`${p}self_attn.v_proj.weight`, [KV * HD, H]),
      t(`${p}self_attn.o_proj.weight`, [H, HEADS * HD]), t(`${p}mlp.gate_proj.weight`, [FF, H]), t(`${p}mlp.up_proj.weight`, [FF, H]), t(`${p}mlp.down_proj.weight`, [H, FF]));
  }
  return tensors;
}

/** The small Gemma both tests below generate, with a SentencePiece vocabulary of three words. */
const GEMMA = (() => {
  const pieces = llamaPieces(['▁a', '▁b', 'c']);
  return { H: 64, HEADS: 4, KV: 1, HD: 32, FF: 128, LAYERS: 2, pieces, V: pieces.length };
})();

/** BF16 tensors of values in [-0.2, 0.2) from a seeded generator. */
function bf16Maker(seed: number) {
  const rnd = (n: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * 0.4; });
  return (name: string, shape: number[]) => ({ name, dtype: 'BF16', shape, data: Uint16Array.from(rnd(shape.reduce((a, b) => a * b, 1)), (x) => f32ToBf16(x)) });
}

/** `webquant quantize` of the checkpoint written to `dir` (with GEMMA's tokenizer.model) to Q8_0 GGUF: the file and its keys. */
async function gemmaToGguf(dir: string, tensors: ReturnType<ReturnType<typeof bf16Maker>>[], config: Record<string, unknown>) {
  writeFileSync(join(dir, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  writeFileSync(join(dir, 'tokenizer.model'), spModel(GEMMA.pieces));
  const out = join(dir, 'g.gguf');
  const r = await cli(['quantize', dir, '-o', out, '--format', 'q8_0', '--workers', '1'], { cwd: dir });
  expect(r.code, r.stderr).toBe(0);
  const g = await read(out);
  return { out, g, m: g.metadata };
}

describe('quantize a generated Gemma 3 checkpoint to GGUF', () => {
  it('writes gemma3.* keys, llama.cpp\'s Gemma norm names, norms + 1 rounded in bf16, and a SentencePiece vocabulary without a space prefix', async () => {
    const tmp = tempDir('gemma3');
    const { H, HEADS, KV, HD, FF, LAYERS, V } = GEMMA;
    const bf16 = bf16Maker(13);
    const tensors = gemma3Tensors(bf16, { H, HEADS, KV, HD, FF, V, LAYERS });
    const { out, g, m } = await gemmaToGguf(tmp, tensors, {
      architectures: ['Gemma3ForCausalLM'], model_type: 'gemma3_text', hidden_size: H, intermediate_size: FF, num_hidden_layers: LAYERS, num_attention_heads: HEADS,
      num_key_value_heads: KV, head_dim: HD, vocab_size: V, max_position_embeddings: 32768, rms_norm_eps: 1e-6, rope_theta: 1000000, rope_local_base_freq: 10000,
      sliding_window: 512, query_pre_attn_scalar: HD, hidden_activation: 'gelu_pytorch_tanh', rope_scaling: null, final_logit_softcapping: null,
    });
    expect(m['general.architecture']).toBe('gemma3');
    expect([m['gemma3.block_count'], m['gemma3.context_length'], m['gemma3.embedding_length'], m['gemma3.feed_forward_length']]).toEqual([LAYERS, 32768, H, FF]);
    expect([m['gemma3.attention.head_count'], m['gemma3.attention.head_count_kv'], m['gemma3.attention.key_length'], m['gemma3.attention.value_length']]).toEqual([HEADS, KV, HD, HD]);
    expect([m['gemma3.attention.sliding_window'], m['gemma3.rope.freq_base']]).toEqual([512, 1000000]);
    expect(m['gemma3.final_logit_softcapping']).toBeUndefined();
    expect(Object.keys(m).filter((k) => k.startsWith('llama.'))).toEqual([]);
    expect([m['tokenizer.ggml.model'], m['tokenizer.ggml.add_space_prefix']]).toEqual(['llama', false]);

    const names = g.tensorInfos.map((x) => x.name).sort();
    const want = ['token_embd.weight', 'output_norm.weight'];
    for (let l = 0; l < LAYERS; l++) {
      for (const n of ['attn_norm', 'post_attention_norm', 'ffn_norm', 'post_ffw_norm', 'attn_q_norm', 'attn_k_norm', 'attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down']) want.push(`blk.${l}.${n}.weight`);
    }
    expect(names).toEqual(want.sort());

    // Every norm is stored as F32 holding bf16(w + 1), as the converter adds 1 in the tensor's dtype;
    // pre_feedforward_layernorm is llama.cpp's ffn_norm, post_attention_layernorm its post_attention_norm.
    const ck = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(out)), out));
    for (const [gname, hf] of [['blk.1.ffn_norm.weight', 'model.layers.1.pre_feedforward_layernorm.weight'], ['blk.0.post_attention_norm.weight', 'model.layers.0.post_attention_layernorm.weight'],
      ['blk.1.attn_k_norm.weight', 'model.layers.1.self_attn.k_norm.weight'], ['output_norm.weight', 'model.norm.weight']] as const) {
      const src = tensors.find((x) => x.name === hf)!.data;
      expect(ck.tensor(gname).dtype).toBe('F32');
      expect(await ck.readF32(gname)).toEqual(Float32Array.from(src, (b) => bf16ToF32(f32ToBf16(bf16ToF32(b) + 1))));
    }
  });

  it('Gemma 1: gemma.* keys without a rope base, Llama\'s norm names, no lm_head, end of turn 107 and no space prefix', async () => {
    const tmp = tempDir('gemma1');
    const { H, HEADS, KV, HD, FF, LAYERS, V } = GEMMA;
    const bf16 = bf16Maker(17);
    // Gemma 3's tensors less its extra norms, plus an lm_head (AutoAWQ's checkpoints carry one).
    const tensors = [...gemma3Tensors(bf16, { H, HEADS, KV, HD, FF, V, LAYERS }).filter((x) => !/(feedforward_layernorm|q_norm|k_norm)/.test(x.name)), bf16('lm_head.weight', [V, H])];
    const config = {
      architectures: ['GemmaForCausalLM'], model_type: 'gemma', hidden_size: H, intermediate_size: FF, num_hidden_layers: LAYERS, num_attention_heads: HEADS,
      num_key_value_heads: KV, head_dim: HD, vocab_size: V, max_position_embeddings: 8192, rms_norm_eps: 1e-6, rope_theta: 10000, hidden_act: 'gelu', rope_scaling: null,
    };
    const { out, g, m } = await gemmaToGguf(tmp, tensors, config);
    expect(m['general.architecture']).toBe('gemma');
    expect(Object.keys(m).filter((k) => k.startsWith('gemma.')).sort()).toEqual(['gemma.attention.head_count', 'gemma.attention.head_count_kv', 'gemma.attention.key_length',
      'gemma.attention.layer_norm_rms_epsilon', 'gemma.attention.value_length', 'gemma.block_count', 'gemma.context_length', 'gemma.embedding_length', 'gemma.feed_forward_length']);
    expect([m['gemma.context_length'], m['gemma.attention.head_count_kv'], m['gemma.attention.key_length']]).toEqual([8192, KV, HD]);
    expect([m['tokenizer.ggml.model'], m['tokenizer.ggml.add_space_prefix'], m['tokenizer.ggml.eot_token_id']]).toEqual(['llama', false, 107]);
    const names = g.tensorInfos.map((x) => x.name).sort();
    const want = ['token_embd.weight', 'output_norm.weight'];
    for (let l = 0; l < LAYERS; l++) for (const n of ['attn_norm', 'ffn_norm', 'attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down']) want.push(`blk.${l}.${n}.weight`);
    expect(names).toEqual(want.sort());
    const ck = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(out)), out));
    const src = tensors.find((x) => x.name === 'model.layers.1.post_attention_layernorm.weight')!.data;
    expect(await ck.readF32('blk.1.ffn_norm.weight')).toEqual(Float32Array.from(src, (b) => bf16ToF32(f32ToBf16(bf16ToF32(b) + 1))));

    // Another rope base is written (llama.cpp would run 10000 otherwise); a vocabulary without id 107 gets no end of turn.
    const cfg = llamaConfigFrom(await readConfig(fromBuffer(new TextEncoder().encode(JSON.stringify({ ...config, rope_theta: 20000 })), 'config.json')));
    const small = { model: 'llama' as const, tokens: Array.from({ length: 100 }, (_, i) => `t${i}`), tokenTypes: new Array<number>(100).fill(1), special: {}, add: {}, source: 'test', warnings: [] };
    const kv = Object.fromEntries(hfGgufMetadata(cfg, 7, { kind: 'vocab', vocab: small }).map((x) => [x.key, x.value]));
    expect([kv['gemma.rope.freq_base'], kv['tokenizer.ggml.eot_token_id'], kv['tokenizer.ggml.add_space_prefix']]).toEqual([20000, undefined, false]);
  });

  it('refuses Gemma and Phi-3 configs without the keys llama.cpp needs, naming the option', async () => {
    for (const [type, extra, missing] of [
      // (left out it takes Gemma3TextConfig's default, 4096; null says there is none)
      ['gemma3_text', { sliding_window: null }, 'a Gemma 3 model needs "sliding_window"'],
      ['gemma2', { sliding_window: 4096, final_logit_softcapping: 30 }, 'a Gemma 2 model needs "attn_logit_softcapping"'],
      ['gemma', { rope_scaling: { type: 'linear', factor: 2 } }, 'rope_scaling = {"type":"linear","factor":2} cannot be written for llama.cpp\'s gemma'],
      ['phi3', { max_position_embeddings: 4096 }, 'a Phi-3 model needs "max_position_embeddings" and "original_max_position_embeddings"'],
      ['phi3', { max_position_embeddings: 4096, original_max_position_embeddings: 512, rope_scaling: { type: 'longrope', short_factor: [1], long_factor: [1, 2] } }, 'rope_scaling.short_factor must be 2 numbers'],
      ['phi3', { max_position_embeddings: 4096, original_max_position_embeddings: 512, partial_rotary_factor: 0.75 }, 'partial_rotary_factor 0.75 rotates 3 of 4 dimensions per head'],
    ] as const) {
      const tmp = tempDir('gemma-bad');
      // One layer's norm: the config's layer count must match the tensors (checkConfigTensors).
      const tensors = [{ name: 'model.embed_tokens.weight', dtype: 'F32', shape: [8, 4], data: new Float32Array(32) }, { name: 'model.layers.0.input_layernorm.weight', dtype: 'F32', shape: [4], data: new Float32Array(4) }];
      writeFileSync(join(tmp, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
      writeFileSync(join(tmp, 'config.json'), JSON.stringify({ model_type: type, hidden_size: 4, intermediate_size: 8, num_hidden_layers: 1, num_attention_heads: 1, num_key_value_heads: 1, head_dim: 4, vocab_size: 8, ...extra }));
      const r = await cli(['quantize', tmp, '-o', join(tmp, 'g.gguf'), '--format', 'q8_0', '--workers', '1', '--tokenizer', 'none'], { cwd: tmp });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`config.json: ${missing}`);
    }
  });
});

describe('quantize a generated Llama 3.2-shaped checkpoint to GGUF', () => {
  it('adds rope_freqs.weight (F32, head_dim/2 divisors) for llama3 rope scaling, as llama.cpp\'s converter does', async () => {
    const tmp = tempDir('llama32');
    const H = 128, HEADS = 2, FF = 256, V = 64;
    let seed = 19;
    const rnd = (n: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * 0.2; });
    const t = (name: string, shape: number[]) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1)) });
    const p = 'model.layers.0.';
    const tensors = [t('model.embed_tokens.weight', [V, H]), t('model.norm.weight', [H]), t(`${p}input_layernorm.weight`, [H]), t(`${p}post_attention_layernorm.weight`, [H]),
      t(`${p}self_attn.q_proj.weight`, [H, H]), t(`${p}self_attn.k_proj.weight`, [H, H]), t(`${p}self_attn.v_proj.weight`, [H, H]), t(`${p}self_attn.o_proj.weight`, [H, H]),
      t(`${p}mlp.gate_proj.weight`, [FF, H]), t(`${p}mlp.up_proj.weight`, [FF, H]), t(`${p}mlp.down_proj.weight`, [H, FF])];
    writeFileSync(join(tmp, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
    // Llama 3.2's own scaling and rope base; head_dim 64 as in Llama-3.2-1B.
    const rope = { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 };
    writeFileSync(join(tmp, 'config.json'), JSON.stringify({
      architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: H, intermediate_size: FF, num_hidden_layers: 1, num_attention_heads: HEADS,
      num_key_value_heads: HEADS, vocab_size: V, max_position_embeddings: 131072, rms_norm_eps: 1e-5, rope_theta: 500000, tie_word_embeddings: true, rope_scaling: rope,
    }));
    const out = join(tmp, 'l.gguf');
    const r = await cli(['quantize', tmp, '-o', out, '--format', 'q8_0', '--workers', '1', '--tokenizer', 'none'], { cwd: tmp });
    expect(r.code, r.stderr).toBe(0);
    const ck = await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(out)), out));
    const info = ck.tensor('rope_freqs.weight');
    expect([info.dtype, info.shape]).toEqual(['F32', [32]]);
    const f = await ck.readF32('rope_freqs.weight');
    expect(f).toEqual(llama3RopeFactors(rope, 500000, 64));
    // High frequencies unscaled, low ones divided by the factor, a monotone blend between.
    expect([f[0], f[31]]).toEqual([1, 32]);
    for (let i = 1; i < 32; i++) expect(f[i]).toBeGreaterThanOrEqual(f[i - 1]);
    expect(f.some((x) => x > 1 && x < 32)).toBe(true);
  });
});

describe('quantize a multimodal Gemma 3 checkpoint (Gemma3ForConditionalGeneration) to GGUF', () => {
  it('writes the GGUF of its language model: the same tensors and keys as the text-only checkpoint of the same weights', async () => {
    const H = 64, HEADS = 4, KV = 2, HD = 32, FF = 128, LAYERS = 2;
    const pieces = llamaPieces(['▁a', '▁b', 'c']);
    const V = pieces.length;
    let seed = 37;
    const rnd = (n: number) => Float32Array.from({ length: n }, () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 2 ** 32 - 0.5) * 0.4; });
    const t = (name: string, shape: number[]) => ({ name, dtype: 'F32', shape, data: rnd(shape.reduce((a, b) => a * b, 1)) });
    const text = gemma3Tensors(t, { H, HEADS, KV, HD, FF, V, LAYERS });
    const textConfig = {
      model_type: 'gemma3_text', hidden_size: H, intermediate_size: FF, num_hidden_layers: LAYERS, num_attention_heads: HEADS, num_key_value_heads: KV, head_dim: HD,
      vocab_size: V, sliding_window: 512, max_position_embeddings: 32768,
    };
    const convert = async (dir: string, tensors: typeof text, config: unknown) => {
      writeFileSync(join(dir, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
      writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
      writeFileSync(join(dir, 'tokenizer.model'), spModel(pieces));
      const out = join(dir, 'g.gguf');
      const r = await cli(['quantize', dir, '-o', out, '--format', 'q8_0', '--workers', '1'], { cwd: dir });
      expect(r.code, r.stderr).toBe(0);
      return out;
    };
    const plain = await convert(tempDir('gemma3-text'), text, { architectures: ['Gemma3ForCausalLM'], ...textConfig });
    // The multimodal layout as transformers 4.50 saves it: the language model under
    // language_model., a vision tower and a projector beside it; text_config gives only what
    // differs from Gemma3TextConfig's defaults (here everything the tiny shape needs).
    const multimodal = [
      ...text.map((x) => ({ ...x, name: `language_model.${x.name}` })),
      t('vision_tower.vision_model.embeddings.patch_embedding.weight', [8, 12]), t('multi_modal_projector.mm_soft_emb_norm.weight', [12]),
    ];
    const mm = await convert(tempDir('gemma3-mm'), multimodal, {
      architectures: ['Gemma3ForConditionalGeneration'], model_type: 'gemma3', text_config: textConfig, vision_config: { hidden_size: 12 }, image_token_index: V,
    });
    const [a, b] = [await read(plain), await read(mm)];
    const keys = (m: Record<string, unknown>) => Object.fromEntries(Object.entries(m).filter(([k]) => k.startsWith('gemma3.') || k.startsWith('tokenizer.')));
    expect(keys(b.metadata)).toEqual(keys(a.metadata));
    expect(b.tensorInfos.map((x) => [x.name, x.shape, x.dtype])).toEqual(a.tensorInfos.map((x) => [x.name, x.shape, x.dtype]));
    const [ca, cb] = [await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(plain)), plain)), await openCheckpoint(fromBuffer(new Uint8Array(readFileSync(mm)), mm))];
    for (const x of ca.tensors) expect(await cb.readRaw(x.name), x.name).toEqual(await ca.readRaw(x.name));
  });

  it('fills Gemma3TextConfig\'s defaults for what text_config leaves out', async () => {
    const dir = tempDir('gemma3-defaults');
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ architectures: ['Gemma3ForConditionalGeneration'], model_type: 'gemma3', text_config: { hidden_size: 2560, intermediate_size: 10240, model_type: 'gemma3_text', num_hidden_layers: 34, rope_scaling: { factor: 8, rope_type: 'linear' }, sliding_window: 1024 } }));
    const c = await readConfig(fromPath(join(dir, 'config.json')));
    expect([c.architecture, c.modelType, c.numHeads, c.numKvHeads, c.headDim, c.vocabSize, c.tieWordEmbeddings, c.ropeTheta]).toEqual(['Gemma3ForConditionalGeneration', 'gemma3_text', 8, 4, 256, 262208, true, 1000000]);
    expect(gemma3Metadata(llamaConfigFrom(c))).toMatchObject({ 'gemma3.attention.sliding_window': { value: 1024 }, 'gemma3.rope.scaling.type': { value: 'linear' }, 'gemma3.rope.scaling.factor': { value: 8 } });
  });
});
