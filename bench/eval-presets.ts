// npm run bench:eval-presets — what every registered preset costs on stories260K: each preset is
// quantized through the CLI's own code path (`webquant quantize --preset P`, container as the CLI
// requires it) and the output evaluated against the F32 original the way `webquant eval` does
// (src/serve weights, GGUF read back in Hugging Face order), on all documents of a TinyStories split.
//
// The reference (F32) forward runs once: `--jobs` child processes (default 2, one per core) each take
// a contiguous range of documents and write its logits (float32, exactly what evaluate() turns into
// log-probabilities) for every predicted position to a temp file, while the parent quantizes the
// presets. Then one child per preset, `--jobs` at a time, evaluates the candidate, reading the
// cached reference logits instead of running the reference forward again. The
// candidate loop mirrors evaluate() (same windows, same float64 log-softmax, KL and top-1); each
// child checks it against evaluate() itself on the first --verify-docs documents (default 20).
// Per-layer residual error is not computed (it would need the reference activations cached too).
//
// Options: --split test|dev  --presets a,b,...  --docs N (first N documents)  --jobs N
//          --verify-docs N  --json path (default bench/results/eval-presets[-<split>].json)  --keep
//          --imatrix FILE (every GGUF preset also quantized with it: `webquant quantize --imatrix`,
//          a row "<preset>+imatrix"; make it from the other split, e.g. `webquant imatrix -t dev`)
import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { evalCandidate, type EvalCandidate } from '../src/cli/eval.js';
import { quantizeCommand, type QuantizeReport } from '../src/cli/quantize.js';
import type { CliIO } from '../src/cli/io.js';
import { evaluate, logSoftmax, DEFAULT_CONTEXT } from '../src/eval/evaluate.js';
import { checkpointWeights, llamaConfig, LlamaModel, type LlamaConfig } from '../src/eval/llama.js';
import { readTokens, splitDocuments } from '../src/eval/tokens.js';
import { readConfig } from '../src/io/config.js';
import { fromPath } from '../src/io/node.js';
import { openSafetensors } from '../src/io/safetensors.js';
import { listPresets } from '../src/plan/presets.js';
import { arg, writeJson } from './util.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SHARED = join(ROOT, '../shared/');
const MODEL_DIR = join(SHARED, 'models/stories260K');
const MODEL = join(MODEL_DIR, 'model.safetensors');
const CTX = DEFAULT_CONTEXT;
const SELF = fileURLToPath(import.meta.url);

const split = arg('split', 'test');
const docsArg = arg('docs', '');
const maxDocs = docsArg ? Number(docsArg) : undefined;
const tokensFile = join(SHARED, `eval/tinystories_${split}.tokens.u16`);

const loadTokens = () => readTokens(new Uint8Array(readFileSync(tokensFile)), tokensFile);
const documents = (tokens: Uint16Array) => {
  const d = splitDocuments(tokens);
  return maxDocs === undefined ? d : d.slice(0, maxDocs);
};
/** Windows exactly as evaluate() cuts them: ctx tokens overlapping by one. */
function* windows(docs: Uint16Array[]): Generator<[number, Uint16Array]> {
  for (let di = 0; di < docs.length; di++) {
    const doc = docs[di];
    for (let start = 0; start + 1 < doc.length; start += CTX - 1) yield [di, doc.subarray(start, Math.min(doc.length, start + CTX))];
  }
}
async function loadConfig(): Promise<LlamaConfig> {
  const f = fromPath(join(MODEL_DIR, 'config.json'));
  try { return llamaConfig(await readConfig(f)); } finally { await f.close(); }
}
const cpuSeconds = (since: NodeJS.CpuUsage) => { const u = process.cpuUsage(since); return (u.user + u.system) / 1e6; };
const log = (s: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${s}\n`);

// ---- child: reference logits ------------------------------------------------------------------
async function referenceChild(outFile: string, from: number, to: number): Promise<void> {
  const t0 = performance.now(), cpu0 = process.cpuUsage();
  const config = await loadConfig();
  const src = fromPath(MODEL);
  const model = await LlamaModel.load(config, checkpointWeights(await openSafetensors(src)));
  await src.close();
  const docs = documents(loadTokens()).slice(from, to);
  const V = config.vocab_size, lp = new Float64Array(V);
  const fd = openSync(outFile, 'w');
  let nll = 0, count = 0, lastDoc = -1, lastLog = 0;
  for (const [di, win] of windows(docs)) {
    const n = win.length - 1;
    const logits = model.forward(win.subarray(0, n));
    writeSync(fd, new Uint8Array(logits.buffer, logits.byteOffset, n * V * 4));
    for (let p = 0; p < n; p++) {
      logSoftmax(logits.subarray(p * V, (p + 1) * V), lp);
      nll -= lp[win[p + 1]];
    }
    count += n;
    if (di !== lastDoc && performance.now() - lastLog > 15000) {
      lastLog = performance.now();
      log(`reference documents ${from}..${to - 1}: ${di + 1}/${docs.length} done, ${count} tokens`);
    }
    lastDoc = di;
  }
  closeSync(fd);
  process.stdout.write(JSON.stringify({ nll: nll / count, tokens: count, documents: docs.length, seconds: (performance.now() - t0) / 1000, cpuSeconds: cpuSeconds(cpu0) }) + '\n');
}

// ---- child: candidates against the cached reference ----------------------------------------------
interface Sums { nllRef: number; nllCand: number; kl: number; agree: number; count: number }
const stats = (s: Sums) => ({
  tokens: s.count, referenceNll: s.nllRef / s.count, candidateNll: s.nllCand / s.count,
  deltaNll: (s.nllCand - s.nllRef) / s.count, klDivergence: s.kl / s.count, top1Agreement: s.agree / s.count,
});

async function candidateChild(refFiles: string[], verifyDocs: number, jobs: { preset: string; file: string }[]): Promise<void> {
  const config = await loadConfig();
  const tokens = loadTokens();
  const docs = documents(tokens);
  const V = config.vocab_size;
  const refBytes = refFiles.map((f) => statSync(f).size);
  for (const job of jobs) {
    const t0 = performance.now(), cpu0 = process.cpuUsage();
    let cand: EvalCandidate | undefined;
    try {
      cand = await evalCandidate(job.file, config);
      const model = await LlamaModel.load(config, cand.weights);
      let part = 0, fd = openSync(refFiles[0], 'r');
      const buf = new Float32Array(CTX * V);
      const lpRef = new Float64Array(V), lpCand = new Float64Array(V);
      const s: Sums = { nllRef: 0, nllCand: 0, kl: 0, agree: 0, count: 0 };
      let atVerify: Sums | undefined;
      let offset = 0, lastDoc = -1, lastLog = performance.now();
      const verifyN = Math.min(verifyDocs, docs.length);
      for (const [di, win] of windows(docs)) {
        if (di !== lastDoc && di === verifyN) atVerify = { ...s };
        const n = win.length - 1;
        const bytes = n * V * 4;
        while (offset === refBytes[part] && part + 1 < refFiles.length) {
          closeSync(fd);
          fd = openSync(refFiles[++part], 'r');
          offset = 0;
        }
        if (readSync(fd, new Uint8Array(buf.buffer, 0, bytes), 0, bytes, offset) !== bytes) throw new Error(`${refFiles[part]} ends before offset ${offset + bytes}`);
        offset += bytes;
        const lc = model.forward(win.subarray(0, n));
        for (let p = 0; p < n; p++) {
          const target = win[p + 1];
          const argRef = logSoftmax(buf.subarray(p * V, (p + 1) * V), lpRef);
          const argCand = logSoftmax(lc.subarray(p * V, (p + 1) * V), lpCand);
          s.nllRef -= lpRef[target];
          s.nllCand -= lpCand[target];
          let k = 0;
          for (let i = 0; i < V; i++) k += Math.exp(lpRef[i]) * (lpRef[i] - lpCand[i]);
          s.kl += k;
          if (argRef === argCand) s.agree++;
        }
        s.count += n;
        if (di !== lastDoc && performance.now() - lastLog > 30000) {
          lastLog = performance.now();
          log(`${job.preset}: ${di + 1}/${docs.length} documents, ${((performance.now() - t0) / 1000).toFixed(0)} s`);
        }
        lastDoc = di;
      }
      atVerify ??= { ...s };
      closeSync(fd);
      if (part !== refFiles.length - 1 || offset !== refBytes[part]) throw new Error(`reference logits not read to the end (file ${part}, ${offset} of ${refBytes[part]} bytes)`);
      const seconds = (performance.now() - t0) / 1000, cpu = cpuSeconds(cpu0);
      // The same documents through the library's evaluate() (reference forward included), which must agree.
      let verify: Record<string, number> | undefined;
      if (verifyN > 0) {
        const rsrc = fromPath(MODEL);
        const again = await evalCandidate(job.file, config);
        try {
          const r = await evaluate({ reference: { config, weights: checkpointWeights(await openSafetensors(rsrc)) }, candidate: again.weights, tokens, maxDocs: verifyN, perLayer: false });
          const mine = stats(atVerify);
          verify = {
            documents: verifyN, tokens: r.reference.tokens,
            maxAbsDiff: Math.max(Math.abs(r.reference.nll - mine.referenceNll), Math.abs(r.candidate!.nll - mine.candidateNll),
              Math.abs(r.klDivergence! - mine.klDivergence), Math.abs(r.top1Agreement! - mine.top1Agreement)),
          };
          if (r.reference.tokens !== mine.tokens || verify.maxAbsDiff > 1e-9) throw new Error(`cached-reference loop disagrees with evaluate() on the first ${verifyN} documents: ${JSON.stringify({ evaluate: r, mine })}`);
        } finally {
          await rsrc.close();
          await again.close();
        }
      }
      process.stdout.write(JSON.stringify({ preset: job.preset, ok: true, ...stats(s), seconds, cpuSeconds: cpu, verify }) + '\n');
      log(`${job.preset}: done in ${seconds.toFixed(0)} s, delta NLL ${stats(s).deltaNll.toExponential(3)}`);
    } catch (e) {
      process.stdout.write(JSON.stringify({ preset: job.preset, ok: false, error: String((e as Error)?.message ?? e) }) + '\n');
      log(`${job.preset}: FAILED ${(e as Error)?.message ?? e}`);
    } finally {
      await cand?.close();
    }
  }
}

// ---- parent ---------------------------------------------------------------------------------------
function runChild(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', 'tsx', SELF, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.setEncoding('utf8').on('data', (d: string) => { out += d; });
    p.on('error', reject);
    p.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`child ${args[1]} exited with ${code}: ${out.slice(-2000)}`))));
  });
}

interface Row {
  preset: string; container: string; output?: string;
  bpwQuantized?: number; bpwTensors?: number; bpwFile?: number; fileBytes?: number; quantizedTensors?: string;
  formats?: Record<string, number>; warnings?: string[];
  referenceNll?: number; candidateNll?: number; deltaNll?: number; klDivergence?: number; top1Agreement?: number;
  tokens?: number; evalSeconds?: number; quantizeSeconds?: number; verify?: unknown; error?: string;
}

async function main(): Promise<void> {
  const wall0 = performance.now();
  const jobsN = Math.max(1, Number(arg('jobs', '2')));
  const verifyDocs = Number(arg('verify-docs', '20'));
  const want = arg('presets', '');
  const all = listPresets();
  const chosen = want ? want.split(',').map((n) => all.find((p) => p.name === n.toLowerCase()) ?? (() => { throw new Error(`unknown preset ${n}`); })()) : all;
  const jsonPath = arg('json', `bench/results/eval-presets${split === 'test' ? '' : `-${split}`}.json`);
  const keep = process.argv.includes('--keep');
  const tmp = mkdtempSync(join(tmpdir(), 'webquant-eval-presets-'));

  log(`split ${split}${maxDocs ? ` (first ${maxDocs} documents)` : ''}, ${chosen.length} presets, ${jobsN} evaluation processes, temp ${tmp}`);

  // 1. The reference forward in jobsN children (contiguous ranges of documents, about as many tokens
  //    each), the quantizations meanwhile in this process.
  const docs = documents(loadTokens());
  const totalTokens = docs.reduce((a, d) => a + d.length, 0);
  const bounds = [0];
  for (let k = 1, acc = 0, i = 0; k < jobsN; k++) {
    while (i < docs.length && acc < (totalTokens * k) / jobsN) acc += docs[i++].length;
    bounds.push(i);
  }
  bounds.push(docs.length);
  const refFiles = bounds.slice(1).map((_, k) => join(tmp, `reference-${k}.f32`));
  const common = [...(maxDocs ? ['--docs', String(maxDocs)] : []), '--split', split];
  const refDone = Promise.all(refFiles.map((f, k) => runChild(['--child', 'reference', f, String(bounds[k]), String(bounds[k + 1]), ...common])
    .then((o) => JSON.parse(o.trim().split('\n').pop()!) as { nll: number; tokens: number; documents: number; seconds: number; cpuSeconds: number })))
    .then((parts) => {
      const tokens = parts.reduce((a, p) => a + p.tokens, 0);
      return {
        nll: parts.reduce((a, p) => a + p.nll * p.tokens, 0) / tokens, tokens, documents: parts.reduce((a, p) => a + p.documents, 0),
        seconds: Math.max(...parts.map((p) => p.seconds)), cpuSeconds: parts.reduce((a, p) => a + p.cpuSeconds, 0), processes: parts.length,
      };
    });
  const rows: Row[] = [];
  let modelParams = NaN;
  const sink = { write: () => true, isTTY: false };
  const io: CliIO = { stdout: sink, stderr: sink, cwd: ROOT, env: process.env, workerUrl: pathToFileURL(join(ROOT, 'dist/pipeline/worker-node.js')) };
  const imatrix = arg('imatrix', '') || undefined;
  const variants = chosen.flatMap((p) => [{ p, imatrix: undefined as string | undefined }, ...(imatrix && p.container === 'gguf' ? [{ p, imatrix }] : [])]);
  for (const { p, imatrix: im } of variants) {
    const label = im ? `${p.name}+imatrix` : p.name;
    const output = join(tmp, `${label}.${p.container}`);
    const row: Row = { preset: label, container: p.container };
    rows.push(row);
    const t0 = performance.now();
    try {
      // Exactly `webquant quantize model.safetensors -o out.<container> --preset <name> --workers 1 [--imatrix FILE]`.
      const rep: QuantizeReport = await quantizeCommand({ input: MODEL, output, preset: p.name, workers: 1, ...(im ? { imatrix: im } : {}) }, io);
      modelParams = rep.totals.params;
      const q = rep.tensors.filter((t) => t.metrics && t.metrics.count > 0);
      const qParams = q.reduce((a, t) => a + t.metrics!.count, 0), qBytes = q.reduce((a, t) => a + t.outputBytes, 0);
      const formats: Record<string, number> = {};
      for (const t of rep.tensors) formats[t.format] = (formats[t.format] ?? 0) + 1;
      Object.assign(row, {
        output, fileBytes: rep.totals.fileBytes, bpwQuantized: qParams ? (8 * qBytes) / qParams : undefined,
        bpwTensors: rep.totals.bpw, bpwFile: (8 * rep.totals.fileBytes) / rep.totals.params,
        quantizedTensors: `${q.length}/${rep.tensors.length}`, formats, warnings: rep.warnings, quantizeSeconds: (performance.now() - t0) / 1000,
      });
      log(`quantized ${label}: ${rep.totals.fileBytes} bytes, ${row.bpwQuantized?.toFixed(3)} bpw (quantized tensors), ${JSON.stringify(formats)}`);
    } catch (e) {
      row.error = `quantize failed: ${(e as Error).message}`;
      log(`${label}: ${row.error}`);
    }
  }
  const ref = await refDone;
  log(`reference: NLL ${ref.nll.toFixed(6)} over ${ref.tokens} tokens, ${ref.seconds.toFixed(0)} s`);

  // 2. Candidates: one child per preset, jobsN at a time, each taking the next preset when one ends.
  //    Results are written to the JSON file as they come (status "partial" until the end).
  const wall = () => (performance.now() - wall0) / 1000;
  const save = (status: string) => writeJson(jsonPath, {
    date: new Date().toISOString(), node: process.version, status, split, documents: ref.documents, tokens: ref.tokens, contextLength: CTX,
    reference: ref, wallSeconds: wall(), results: rows.map(({ output: _o, ...r }) => r),
  });
  const queue = rows.filter((r) => !r.error);
  let mismatch: string | undefined;
  const worker = async () => {
    for (let row = queue.shift(); row; row = queue.shift()) {
      let r;
      try {
        const out = await runChild(['--child', 'candidates', JSON.stringify(refFiles), String(verifyDocs), JSON.stringify([{ preset: row.preset, file: row.output }]), ...common]);
        r = JSON.parse(out.trim().split('\n').pop()!);
      } catch (e) {
        r = { ok: false, error: (e as Error).message };
      }
      if (!r.ok) {
        row.error = `eval failed: ${r.error}`;
      } else {
        Object.assign(row, {
          referenceNll: r.referenceNll, candidateNll: r.candidateNll, deltaNll: r.deltaNll, klDivergence: r.klDivergence,
          top1Agreement: r.top1Agreement, tokens: r.tokens, evalSeconds: r.seconds, verify: r.verify,
        });
        // The reference NLL recomputed from the cached logits must be the reference children's own.
        if (r.tokens !== ref.tokens || Math.abs(r.referenceNll - ref.nll) > 1e-12) mismatch ??= `${r.preset}: cached reference read back as NLL ${r.referenceNll} over ${r.tokens} tokens, not ${ref.nll} over ${ref.tokens}`;
      }
      save('partial');
    }
  };
  await Promise.all(Array.from({ length: jobsN }, worker));
  if (mismatch) throw new Error(mismatch);

  // 3. Table and JSON.
  const f = (v: number | undefined, d: number) => (v === undefined ? '-' : v.toFixed(d));
  const e = (v: number | undefined) => (v === undefined ? '-' : v.toExponential(2));
  const head = ['preset', 'container', 'bpw (quantized tensors)', 'bpw (file)', 'bytes', 'ref NLL', 'NLL', 'ΔNLL', 'KL', 'top-1 %', 'tensor types'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map((_, i) => (i < 2 || i === 10 ? '---' : '---:')).join('|')}|`];
  const types = (r: Row) => Object.entries(r.formats ?? {}).sort((x, y) => y[1] - x[1]).map(([k, v]) => `${k}×${v}`).join(' ');
  const modelBytes = statSync(MODEL).size;
  lines.push(`| F32 original | safetensors | 32.00 | ${f((8 * modelBytes) / modelParams, 2)} | ${modelBytes} | ${f(ref.nll, 5)} | ${f(ref.nll, 5)} | 0 | 0 | 100.00 | F32 |`);
  for (const r of rows) {
    if (r.error) { lines.push(`| ${r.preset} | ${r.container} | ${f(r.bpwQuantized, 2)} | ${f(r.bpwFile, 2)} | ${r.fileBytes ?? '-'} | n/a | n/a | n/a | n/a | n/a | not evaluated: ${r.error.replace(/\|/g, '\\|')} |`); continue; }
    lines.push(`| ${r.preset} | ${r.container} | ${f(r.bpwQuantized, 2)} | ${f(r.bpwFile, 2)} | ${r.fileBytes} | ${f(r.referenceNll, 5)} | ${f(r.candidateNll, 5)} | ${r.deltaNll! >= 0 ? '+' : ''}${f(r.deltaNll, 5)} | ${e(r.klDivergence)} | ${f(r.top1Agreement! * 100, 2)} | ${types(r)} |`);
  }
  console.log(`\nstories260K, ${split} split: ${ref.documents} documents, ${ref.tokens} predicted tokens, context ${CTX}; reference (F32) NLL ${ref.nll.toFixed(5)}\n`);
  console.log(lines.join('\n'));
  console.log(`\nwall ${wall().toFixed(0)} s (reference forward ${ref.seconds.toFixed(0)} s, once)`);
  save('complete');
  log(`wrote ${jsonPath}`);
  if (!keep) rmSync(tmp, { recursive: true, force: true });
  else log(`kept ${tmp}`);
}

const ci = process.argv.indexOf('--child');
if (ci >= 0) {
  const [kind, ...rest] = process.argv.slice(ci + 1);
  if (kind === 'reference') await referenceChild(rest[0], Number(rest[1]), Number(rest[2]));
  else await candidateChild(JSON.parse(rest[0]), Number(rest[1]), JSON.parse(rest[2]));
} else {
  await main();
}
