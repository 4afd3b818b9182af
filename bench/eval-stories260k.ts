// npx tsx bench/eval-stories260k.ts — checks src/eval against the reference NLL figures of
// ../shared/README.md on the full TinyStories splits (2150 documents each), and reports what
// BF16 costs against F32 (delta NLL, KL, top-1, per-layer error) and the time taken.
// Options: --splits dev,test  --compare dev,test (BF16-vs-F32 runs; 'none' for none)  --docs N (first N
// documents)  --json path. Exit code 1 on a mismatch.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import { evaluate, type EvaluateResult } from '../src/eval/evaluate.js';
import { checkpointWeights, llamaConfig } from '../src/eval/llama.js';
import { readTokens } from '../src/eval/tokens.js';
import { readConfig } from '../src/io/config.js';
import { fromPath, type FileSource } from '../src/io/node.js';
import { openSafetensors } from '../src/io/safetensors.js';
import { arg, writeJson } from './util.js';

const SHARED = fileURLToPath(new URL('../../shared/', import.meta.url));
const MODEL = join(SHARED, 'models/stories260K');
// shared/README.md, "Reference figures for stories260K"; a float32 forward should match to ~1e-4.
const REFERENCE: Record<string, Record<string, number>> = {
  'model.safetensors': { dev: 1.55421, test: 1.80813 },
  'model.bf16.safetensors': { dev: 1.55400, test: 1.80788 },
};
const TOLERANCE = 1e-4;

const splits = arg('splits', 'dev,test').split(',').filter(Boolean);
const compare = arg('compare', splits.join(',')).split(',').filter((s) => s && s !== 'none');
const docs = arg('docs', '');
const maxDocs = docs ? Number(docs) : undefined;
const jsonPath = arg('json', 'bench/results/eval-stories260k.json');

const configFile = fromPath(join(MODEL, 'config.json'));
const config = llamaConfig(await readConfig(configFile).finally(() => configFile.close()));
// The forward reads every tensor once while loading, so the files can be closed right after.
const open: FileSource[] = [];
const weights = async (file: string) => {
  const src = fromPath(join(MODEL, file));
  open.push(src);
  return checkpointWeights(await openSafetensors(src));
};
// Wall time depends on what else runs on the machine; CPU time of this process much less so.
const cpuSeconds = (since: NodeJS.CpuUsage) => {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1e6;
};
const closeAll = () => Promise.all(open.splice(0).map((f) => f.close()));

let ok = true;
const out: Record<string, unknown>[] = [];
const tokensOf = (split: string) => readTokens(new Uint8Array(readFileSync(join(SHARED, `eval/tinystories_${split}.tokens.u16`))));
for (const split of splits) {
  const tokens = tokensOf(split);
  for (const file of Object.keys(REFERENCE)) {
    const cpu0 = process.cpuUsage();
    const r = await evaluate({ reference: { config, weights: await weights(file) }, tokens, maxDocs });
    const cpu = cpuSeconds(cpu0);
    await closeAll();
    const want = maxDocs === undefined ? REFERENCE[file][split] : undefined;
    const diff = want === undefined ? undefined : r.reference.nll - want;
    const pass = diff === undefined || Math.abs(diff) <= TOLERANCE;
    ok &&= pass;
    console.log(`${split} ${file}: NLL ${r.reference.nll.toFixed(6)} (${r.reference.tokens} tokens, ${r.documents} docs)` +
      (want === undefined ? '' : ` reference ${want} diff ${diff!.toExponential(2)} ${pass ? 'ok' : 'MISMATCH'}`) +
      ` ${r.seconds.toFixed(1)} s wall, ${cpu.toFixed(1)} s CPU, ${(r.reference.tokens / cpu).toFixed(0)} tokens per CPU second`);
    out.push({ split, weights: file, ...r, cpuSeconds: cpu, referenceNll: want, pass });
  }
}
for (const split of compare) {
  const cpu0 = process.cpuUsage();
  const c: EvaluateResult = await evaluate({
    reference: { config, weights: await weights('model.safetensors') }, candidate: await weights('model.bf16.safetensors'), tokens: tokensOf(split), maxDocs,
  });
  const cpu = cpuSeconds(cpu0);
  await closeAll();
  console.log(`${split} BF16 vs F32: delta NLL ${c.deltaNll!.toExponential(3)}, KL ${c.klDivergence!.toExponential(3)}, top-1 ${c.top1Agreement!.toFixed(5)}, ` +
    `layer RMSE ${c.perLayer!.map((l) => l.rmse.toExponential(2)).join(' ')}, ${c.seconds.toFixed(1)} s wall, ${cpu.toFixed(1)} s CPU (both models)`);
  out.push({ split, weights: 'bf16 vs f32', ...c, cpuSeconds: cpu });
}
writeJson(jsonPath, { date: new Date().toISOString(), node: process.version, results: out });
if (!ok) {
  console.error('NLL differs from the reference figures by more than', TOLERANCE);
  process.exit(1);
}
