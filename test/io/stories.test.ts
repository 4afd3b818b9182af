// The real stories260K checkpoint in three containers: F32 safetensors, BF16 safetensors and the
// GGUF v1 file converted from llama2.c. Every tensor is read from each and compared.
import { describe, expect, test } from 'vitest';
import { join } from 'node:path';
import { fromPath } from '../../src/io/node.js';
import { openSafetensors } from '../../src/io/safetensors.js';
import { openGguf } from '../../src/io/gguf.js';
import { readConfig } from '../../src/io/config.js';
import { f32ToBf16 } from '../../src/util/half.js';
import { hasShared, SHARED } from '../helpers/shared.js';

const dir = join(SHARED, 'models/stories260K');

/** GGUF name of a Hugging Face Llama tensor. */
function ggufName(hf: string): string {
  if (hf === 'model.embed_tokens.weight') return 'token_embd.weight';
  if (hf === 'model.norm.weight') return 'output_norm.weight';
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hf);
  if (!m) throw new Error(`unexpected tensor ${hf}`);
  const map: Record<string, string> = {
    'input_layernorm.weight': 'attn_norm.weight', 'post_attention_layernorm.weight': 'ffn_norm.weight',
    'self_attn.q_proj.weight': 'attn_q.weight', 'self_attn.k_proj.weight': 'attn_k.weight',
    'self_attn.v_proj.weight': 'attn_v.weight', 'self_attn.o_proj.weight': 'attn_output.weight',
    'mlp.gate_proj.weight': 'ffn_gate.weight', 'mlp.up_proj.weight': 'ffn_up.weight', 'mlp.down_proj.weight': 'ffn_down.weight',
  };
  return `blk.${m[1]}.${map[m[2]]}`;
}

/**
 * llama2.c / GGUF keep q and k rows interleaved per head (Meta layout); the Hugging Face export
 * uses the rotate-half layout: HF row h*hd + p*hd/2 + j = Meta row h*hd + 2j + p.
 */
function metaToHf(w: Float32Array, heads: number, rowLen: number): Float32Array {
  const rows = w.length / rowLen;
  const hd = rows / heads;
  const out = new Float32Array(w.length);
  for (let h = 0; h < heads; h++) {
    for (let p = 0; p < 2; p++) {
      for (let j = 0; j < hd / 2; j++) {
        out.set(w.subarray((h * hd + 2 * j + p) * rowLen, (h * hd + 2 * j + p + 1) * rowLen), (h * hd + p * (hd / 2) + j) * rowLen);
      }
    }
  }
  return out;
}

describe.skipIf(!hasShared)('stories260K', () => {
  test('F32 safetensors vs GGUF v1 vs BF16 safetensors: every tensor', async () => {
    const srcs = [fromPath(join(dir, 'model.safetensors')), fromPath(join(dir, 'model.bf16.safetensors')), fromPath(join(dir, 'tinyllamas-stories-260k-f32.gguf')), fromPath(join(dir, 'config.json'))];
    try {
      const [f32, bf16, gguf] = [await openSafetensors(srcs[0]), await openSafetensors(srcs[1]), await openGguf(srcs[2])];
      const cfg = await readConfig(srcs[3]);
      expect(cfg).toMatchObject({ architecture: 'LlamaForCausalLM', hiddenSize: 64, numLayers: 5, numHeads: 8, numKvHeads: 4, vocabSize: 512, tieWordEmbeddings: true, rmsNormEps: 1e-5, ropeTheta: 10000 });
      expect(gguf.version).toBe(1);
      expect(gguf.metadata['llama.block_count']).toBe(cfg.numLayers);
      expect(gguf.metadata['llama.embedding_length']).toBe(cfg.hiddenSize);
      expect((gguf.metadata['tokenizer.ggml.tokens'] as string[]).length).toBe(cfg.vocabSize);
      expect(f32.tensors.map((t) => t.name)).toEqual(bf16.tensors.map((t) => t.name));
      expect(f32.tensors.length).toBe(2 + cfg.numLayers * 9);
      expect(gguf.tensors.length).toBe(f32.tensors.length + 1); // + output.weight (tied in HF)

      for (const t of f32.tensors) {
        expect(t.dtype).toBe('F32');
        const a = await f32.readF32(t.name);
        const v = await f32.readValues(t.name);
        expect(v.dtype).toBe('f32');
        expect(v.values).toEqual(a);

        const b = bf16.tensor(t.name);
        expect([b.dtype, b.shape]).toEqual(['BF16', t.shape]);
        const bv = await bf16.readValues(t.name);
        expect(bv.dtype).toBe('bf16');
        const wide = await bf16.readF32(t.name);
        for (let i = 0; i < a.length; i++) {
          if (bv.values[i] !== f32ToBf16(a[i])) throw new Error(`${t.name}[${i}]: bf16 ${bv.values[i]} is not round(${a[i]})`);
          if (new Uint32Array(wide.buffer)[i] !== (bv.values[i] << 16) >>> 0) throw new Error(`${t.name}[${i}]: widening`);
        }

        const gname = ggufName(t.name);
        const g = gguf.tensor(gname);
        expect(g.shape, gname).toEqual(t.shape);
        let gv = await gguf.readF32(gname);
        if (/attn_q/.test(gname)) gv = metaToHf(gv, cfg.numHeads, t.shape[1]);
        if (/attn_k/.test(gname)) gv = metaToHf(gv, cfg.numKvHeads, t.shape[1]);
        expect(gv, gname).toEqual(a);
      }
      // tied embeddings: output.weight is the embedding matrix
      expect(await gguf.readF32('output.weight')).toEqual(await f32.readF32('model.embed_tokens.weight'));
    } finally {
      for (const s of srcs) await s.close();
    }
  });
});
