// A one-layer GPT-2 checkpoint as Hugging Face stores it (Conv1D weights [in, out], biases,
// LayerNorms, learned positions), for the converter and eval tests.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { collect } from '../../src/io/stream.js';

/** Its tensors; `values(n, k)` gives the n values of the k-th kind of tensor. */
export function gpt2Tensors(H: number, V: number, P: number, values: (n: number, k: number) => Float32Array): { name: string; dtype: string; shape: number[]; data: Float32Array }[] {
  const w = (name: string, shape: number[], k: number) => ({ name, dtype: 'F32', shape, data: values(shape.reduce((a, b) => a * b, 1), k) });
  const tensors = [w('wte.weight', [V, H], 1), w('wpe.weight', [P, H], 2), w('ln_f.weight', [H], 3), w('ln_f.bias', [H], 4)];
  for (const [n, shape] of [['ln_1.weight', [H]], ['ln_1.bias', [H]], ['attn.c_attn.weight', [H, 3 * H]], ['attn.c_attn.bias', [3 * H]], ['attn.c_proj.weight', [H, H]], ['attn.c_proj.bias', [H]],
    ['ln_2.weight', [H]], ['ln_2.bias', [H]], ['mlp.c_fc.weight', [H, 4 * H]], ['mlp.c_fc.bias', [4 * H]], ['mlp.c_proj.weight', [4 * H, H]], ['mlp.c_proj.bias', [H]]] as const) {
    tensors.push(w(`h.0.${n}`, [...shape], n.length));
  }
  return tensors;
}

/** Its config.json. */
export const gpt2Config = (H: number, V: number, P: number) => ({
  architectures: ['GPT2LMHeadModel'], model_type: 'gpt2', n_embd: H, n_layer: 1, n_head: 4, n_positions: P, n_inner: null, vocab_size: V, layer_norm_epsilon: 1e-5,
});

/** Writes the checkpoint (model.safetensors) and its config.json into `dir`. */
export async function writeGpt2Dir(dir: string, H: number, V: number, P: number, values: (n: number, k: number) => Float32Array) {
  const tensors = gpt2Tensors(H, V, P, values);
  const config = gpt2Config(H, V, P);
  writeFileSync(join(dir, 'model.safetensors'), await collect(writeSafetensors({ tensors })));
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  return { tensors, config };
}
