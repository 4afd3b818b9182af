// npx tsx bench/preset-check-model.ts <kv-heads> <dir> [hidden ffn layers heads]
//
// Writes <dir>/f32.gguf, an F32 Llama GGUF whose rows are all multiples of 256 (16 layers, hidden
// 512, FFN 1024, 8 query heads of 64 over <kv-heads> KV heads: 2 gives gqa 4, 8 gives gqa 1; an
// untied output), with weight-like values, and <dir>/imatrix.gguf, an importance matrix for every
// 2-D tensor but token_embd (values spread over 2^-6 .. 2^6). For comparing `webquant quantize
// <dir>/f32.gguf --preset P [--imatrix <dir>/imatrix.gguf]` with llama-quantize of the same file
// (bench/gguf-diff.ts; README, "Presets against llama-quantize").
import { writeFileSync } from 'node:fs';
import { presetModel } from './preset-model.js';
const [kvHeads, hidden, ffn, layers, heads] = [process.argv[2], ...process.argv.slice(4)].map((v) => (v === undefined ? undefined : Number(v)));
const out = process.argv[3];
const { model, imatrix } = await presetModel({ kvHeads: kvHeads!, hidden, ffn, layers, heads });
writeFileSync(`${out}/f32.gguf`, model);
writeFileSync(`${out}/imatrix.gguf`, imatrix);
console.log('ok');
