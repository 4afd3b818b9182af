// npx tsx bench/gguf-diff.ts a.gguf b.gguf — what differs between two GGUF files: tensors missing
// on either side, tensor types, tensor bytes, and metadata keys and values (the token list is
// compared by length). Used to compare `webquant quantize --preset P` with `llama-quantize` of the
// same F32 GGUF (README, "Presets against llama-quantize"). Exit status 1 when anything differs.
import { readGgufHeader, type GgufHeader } from '../src/io/gguf.js';
import { fromPath } from '../src/io/node.js';


/** Each tensor's bytes: from its offset to the next tensor's (alignment padding included). */
function spans(h: GgufHeader, size: number): Map<string, [number, number]> {
  const sorted = [...h.tensors].sort((x, y) => x.relOffset - y.relOffset);
  return new Map(sorted.map((t, i) => [t.name, [h.dataOffset + t.relOffset, i + 1 < sorted.length ? h.dataOffset + sorted[i + 1].relOffset : size]]));
}

const show = (v: unknown) => {
  const s = JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? x.toString() : x));
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
};

const [pa, pb] = process.argv.slice(2);
if (!pa || !pb) throw new Error('usage: npx tsx bench/gguf-diff.ts a.gguf b.gguf');
// Tensors are read one at a time: files of any size compare in the memory of their largest tensor.
const [fa, fb] = [fromPath(pa), fromPath(pb)];
const [ha, hb] = [await readGgufHeader(fa), await readGgufHeader(fb)];
const [sa, sb] = [spans(ha, await fa.size()), spans(hb, await fb.size())];
const tb = new Map(hb.tensors.map((t) => [t.name, t]));
const out: string[] = [];
let same = 0;
for (const t of ha.tensors) {
  const u = tb.get(t.name);
  if (!u) { out.push(`tensor ${t.name}: only in ${pa}`); continue; }
  if (t.ggmlType !== u.ggmlType) { out.push(`tensor ${t.name}: ggml type ${t.ggmlType} against ${u.ggmlType}`); continue; }
  const [a0, a1] = sa.get(t.name)!, [b0, b1] = sb.get(t.name)!;
  const n = Math.min(a1 - a0, b1 - b0); // the shorter span: the tensor plus the smaller padding
  if (Buffer.compare(await fa.read(a0, n), await fb.read(b0, n)) === 0) same++;
  else out.push(`tensor ${t.name}: bytes differ`);
}
await Promise.all([fa.close(), fb.close()]);
const inA = new Set(ha.tensors.map((t) => t.name));
for (const u of hb.tensors) if (!inA.has(u.name)) out.push(`tensor ${u.name}: only in ${pb}`);
const [ka, kb] = [new Map(ha.kv.map((k) => [k.key, k.value])), new Map(hb.kv.map((k) => [k.key, k.value]))];
for (const [k, v] of ka) {
  if (!kb.has(k)) out.push(`key ${k}: only in ${pa} (${show(v)})`);
  else if (k === 'tokenizer.ggml.tokens' ? (v as unknown[]).length !== (kb.get(k) as unknown[]).length : show(v) !== show(kb.get(k))) out.push(`key ${k}: ${show(v)} against ${show(kb.get(k))}`);
}
for (const [k, v] of kb) if (!ka.has(k)) out.push(`key ${k}: only in ${pb} (${show(v)})`);
console.log(`${pa} against ${pb}: ${ha.tensors.length} / ${hb.tensors.length} tensors, ${same} identical; ${ha.kv.length} / ${hb.kv.length} keys`);
for (const l of out) console.log(`  ${l}`);
process.exitCode = out.length ? 1 : 0;
