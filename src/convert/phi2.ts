// Phi-1, Phi-1.5 and Phi-2 checkpoints (model_type phi, transformers' PhiForCausalLM format) and
// StarCoder2's seen with the Llama-style names the converters and the forward read: Phi's
// self_attn.dense is o_proj, mlp.fc1 / fc2 (StarCoder2's mlp.c_fc / c_proj) are up_proj /
// down_proj, Phi's model.final_layernorm is model.norm. Layouts are unchanged ([out, in] rows,
// q/k/v apart), so this view only renames.
import { ErrorCodes, fail } from '../errors.js';
import { renamedView, type Checkpoint, type TensorInfo } from '../io/checkpoint.js';

const RENAMES: [RegExp, string][] = [
  [/^(model\.layers\.\d+\.)self_attn\.dense\.(weight|bias)$/, '$1self_attn.o_proj.$2'],
  [/^(model\.layers\.\d+\.)mlp\.fc1\.(weight|bias)$/, '$1mlp.up_proj.$2'],
  [/^(model\.layers\.\d+\.)mlp\.fc2\.(weight|bias)$/, '$1mlp.down_proj.$2'],
  [/^(model\.layers\.\d+\.)mlp\.c_fc\.(weight|bias)$/, '$1mlp.up_proj.$2'],
  [/^(model\.layers\.\d+\.)mlp\.c_proj\.(weight|bias)$/, '$1mlp.down_proj.$2'],
  [/^model\.final_layernorm\.(weight|bias)$/, 'model.norm.$1'],
];

/** True when `input` holds Phi's blocks (self_attn.dense) or StarCoder2's (mlp.c_fc). */
export function isPhi2Checkpoint(input: Checkpoint): boolean {
  return input.tensors.some((t) => /^model\.layers\.\d+\.(?:self_attn\.dense|mlp\.c_fc)\.weight$/.test(t.name));
}

export function phi2View(input: Checkpoint): Checkpoint {
  const source = new Map<string, string>();
  const tensors: TensorInfo[] = input.tensors.map((t) => {
    const rule = RENAMES.find(([re]) => re.test(t.name));
    const name = rule ? t.name.replace(rule[0], rule[1]) : t.name;
    source.set(name, t.name);
    return { ...t, name };
  });
  const src = (name: string) => source.get(name) ?? fail(ErrorCodes.TENSOR_NOT_FOUND, `[phi] ${input.source}: no tensor named "${name}"`, { file: input.source, tensor: name });
  return renamedView(input, tensors, src);
}
