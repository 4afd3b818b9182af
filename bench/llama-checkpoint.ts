// Synthetic Llama-shaped BF16 safetensors for the benchmarks (bench/pipeline.ts, bench/imatrix.ts):
// the tensors of a Llama checkpoint of the given shape, with bell-shaped weights around 0 (std
// ~0.02) from a fixed generator, so a given shape always gives the same file. Written to a
// temporary name and renamed at the end: an interrupted run leaves no half file behind.
import { createWriteStream, renameSync, writeFileSync } from 'node:fs';
import { SafetensorsWriter } from '../src/io/safetensors-writer.js';

export interface LlamaShape {
  hidden: number; ffn: number; heads: number; kvHeads: number; vocab: number; layers: number;
  /** No lm_head: the output head is the token embedding. */
  tied: boolean;
}

export async function writeLlamaCheckpoint(path: string, s: LlamaShape): Promise<void> {
  const hd = s.hidden / s.heads;
  const shapes: [string, number[]][] = [['model.embed_tokens.weight', [s.vocab, s.hidden]]];
  for (let l = 0; l < s.layers; l++) {
    const p = `model.layers.${l}.`;
    shapes.push(
      [p + 'input_layernorm.weight', [s.hidden]],
      [p + 'self_attn.q_proj.weight', [s.heads * hd, s.hidden]],
      [p + 'self_attn.k_proj.weight', [s.kvHeads * hd, s.hidden]],
      [p + 'self_attn.v_proj.weight', [s.kvHeads * hd, s.hidden]],
      [p + 'self_attn.o_proj.weight', [s.hidden, s.heads * hd]],
      [p + 'post_attention_layernorm.weight', [s.hidden]],
      [p + 'mlp.gate_proj.weight', [s.ffn, s.hidden]],
      [p + 'mlp.up_proj.weight', [s.ffn, s.hidden]],
      [p + 'mlp.down_proj.weight', [s.hidden, s.ffn]],
    );
  }
  shapes.push(['model.norm.weight', [s.hidden]]);
  if (!s.tied) shapes.push(['lm_head.weight', [s.vocab, s.hidden]]);
  const w = new SafetensorsWriter({ tensors: shapes.map(([name, shape]) => ({ name, dtype: 'BF16', shape })) });
  const out = createWriteStream(path + '.tmp');
  const write = (b: Uint8Array) => new Promise<void>((res, rej) => (out.write(b, (e) => (e ? rej(e) : res()))));
  await write(w.header);
  let r = 0x2545f491;
  for (const [name, shape] of shapes) {
    const n = shape.reduce((a, b) => a * b, 1);
    const bits = new Uint16Array(n);
    const f = new Float32Array(1), u = new Uint32Array(f.buffer);
    for (let i = 0; i < n; i++) {
      // Sum of two uniforms: a bell-shaped weight around 0 with std ~0.02, as bf16 bits.
      r = (Math.imul(r, 1664525) + 1013904223) >>> 0;
      const a = r >>> 16;
      r = (Math.imul(r, 1664525) + 1013904223) >>> 0;
      f[0] = ((a + (r >>> 16)) / 65536 - 1) * 0.035;
      bits[i] = u[0] >>> 16;
    }
    for (const c of w.tensor(name, new Uint8Array(bits.buffer))) await write(c);
  }
  w.finish();
  await new Promise<void>((res) => out.end(res));
  renameSync(path + '.tmp', path);
}

/** config.json for that checkpoint (Llama, SiLU, RMSNorm). */
export function writeLlamaConfig(path: string, s: LlamaShape): void {
  writeFileSync(path, JSON.stringify({
    architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: s.hidden, intermediate_size: s.ffn, num_hidden_layers: s.layers,
    num_attention_heads: s.heads, num_key_value_heads: s.kvHeads, vocab_size: s.vocab, rms_norm_eps: 1e-5, rope_theta: 10000,
    tie_word_embeddings: s.tied, hidden_act: 'silu',
  }));
}
