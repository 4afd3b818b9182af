// bench/synthetic-llama.ts writes the GGUF models that bench:matvec-browser runs in llama.cpp-wasm:
// the hyperparameters llama.cpp reads must describe the tensors written (or llama.cpp refuses the
// file, or worse, runs another shape), every 2-D tensor must be made of the blocks of the one
// quantized matrix (a prefix, repeated where a tensor is larger: q8_0 128x256's FFN), and the
// per-layer byte counts the benchmark divides by must be those of the file.
import { describe, expect, it } from 'vitest';
import { quantize } from '../../src/quantize.js';
import { openGguf } from '../../src/io/gguf.js';
import { fromBuffer } from '../../src/io/source.js';
import { collect } from '../../src/io/stream.js';
import { openQuantized, servedFromQuantized } from '../../src/serve/index.js';
import { checkVocab, TOKEN_TYPE } from '../../src/convert/gguf-vocab.js';
import { FFN, HEAD_DIM, VOCAB, asciiVocab, syntheticLlama } from '../../bench/synthetic-llama.js';
import { weightData } from '../../bench/stats.js';

/** The first `n` bytes of `b` repeated. */
function tiled(b: Uint8Array, n: number): Buffer {
  const out = Buffer.alloc(n);
  for (let i = 0; i < n; i++) out[i] = b[i % b.length];
  return out;
}

describe('synthetic Llama GGUF for the llama.cpp-wasm benchmark', () => {
  for (const [format, rows, rowLength] of [['q4_k', 512, 768], ['q8_0', 128, 256]] as const) {
    it(`${format} ${rows}x${rowLength}: keys, shapes, bytes`, async () => {
      const qt = await quantize(weightData(rows * rowLength, 5), { format, rowLength });
      const m = syntheticLlama(qt, 3);
      const file = await collect(m.stream());
      expect(file.byteLength).toBe(m.totalBytes);
      const g = await openGguf(fromBuffer(file));
      const md = g.metadata as Record<string, unknown>;
      expect(md['general.architecture']).toBe('llama');
      expect(md['llama.embedding_length']).toBe(rowLength);
      expect(md['llama.block_count']).toBe(3);
      expect(md['llama.attention.head_count']).toBe(rows / HEAD_DIM);
      expect(md['llama.attention.head_count_kv']).toBe(rows / HEAD_DIM);
      expect(md['llama.attention.key_length']).toBe(HEAD_DIM);
      expect(md['llama.rope.dimension_count']).toBe(HEAD_DIM);
      expect(md['llama.feed_forward_length']).toBe(FFN);
      expect((md['tokenizer.ggml.tokens'] as string[]).length).toBe(VOCAB);
      expect(g.tensors).toHaveLength(3 + 3 * 9);

      const q = await openQuantized(fromBuffer(file));
      let layerBytes = 0;
      for (const { name, shape } of m.layerMatrices) {
        for (const l of [0, 2]) {
          const t = await q.tensor(name.replace('blk.0.', `blk.${l}.`)).load();
          expect([t.info.rows, t.info.rowLength], name).toEqual(shape);
          expect(t.info.format).toBe(format);
          expect(Buffer.from(t.sections[0]).equals(tiled(qt.data, t.bytes)), name).toBe(true);
          if (l === 0) layerBytes += t.bytes;
        }
      }
      expect(layerBytes).toBe(m.layerBytes);
      expect(m.targetWeights).toBe(3 * rows * rowLength);
      expect(m.layerWeights).toBe(4 * rows * rowLength + 3 * FFN * rowLength);
      // attn_q is the quantized matrix itself: the served matvec is the one on qt
      const x = weightData(rowLength, 9);
      const [direct, served] = await Promise.all([
        servedFromQuantized(qt).then((t) => t.matvec(x)),
        q.tensor('blk.1.attn_q.weight').matvec(x),
      ]);
      expect(served).toEqual(direct);
    });
  }

  it('the vocabulary has no byte tokens (generated text is whole characters) and passes llama.cpp\'s checks', () => {
    const v = asciiVocab();
    expect(v.tokens).toHaveLength(VOCAB);
    expect(v.tokenTypes).not.toContain(TOKEN_TYPE.BYTE);
    expect(() => checkVocab(v)).not.toThrow();
  });
});
