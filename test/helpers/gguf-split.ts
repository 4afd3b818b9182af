// Split GGUF files as llama.cpp's gguf-split writes them, for tests: the key/value pairs in the
// first file, split.no / split.count / split.tensors.count in each, the tensors cut in file order.
import { ggufSplitName, type GgufCheckpoint } from '../../src/io/gguf.js';
import { writeGguf } from '../../src/io/gguf-writer.js';
import { collect } from '../../src/io/stream.js';

/** The files of `whole` split before the tensor indices `cuts` (increasing), by file name. */
export async function splitGguf(whole: GgufCheckpoint, prefix: string, cuts: number[]): Promise<Map<string, Uint8Array>> {
  const names = whole.tensors.map((t) => t.name);
  const bounds = [0, ...cuts, names.length];
  const count = bounds.length - 1;
  const out = new Map<string, Uint8Array>();
  for (let i = 0; i < count; i++) {
    const kv = [...(i === 0 ? whole.kv.map((k) => ({ key: k.key, type: k.type, itemType: k.itemType, value: k.value })) : []),
      { key: 'split.no', type: 'u16' as const, value: i }, { key: 'split.count', type: 'u16' as const, value: count }, { key: 'split.tensors.count', type: 'i32' as const, value: names.length }];
    const tensors = await Promise.all(names.slice(bounds[i], bounds[i + 1]).map(async (n) => ({ name: n, ggmlType: whole.tensor(n).dtype, shape: whole.tensor(n).shape, data: await whole.readRaw(n) })));
    out.set(ggufSplitName(prefix, i, count), await collect(writeGguf({ metadata: kv, tensors })));
  }
  return out;
}
