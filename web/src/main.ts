// The demo page: wiring between the DOM and job.ts. Everything heavy runs in the pool's workers;
// this thread reads the input, writes the output and draws progress.
import { blobSink, ErrorCodes, formats, fromBlob, listPresets, opfsSink, readImatrix, WebquantError, type ProgressEvent, type Sink } from '../../src/index.js';
import { runtimeConfig } from '../../src/io/runtime-config.js';
import { openInput, prepare, runJob, type ContainerKind, type InputSpec, type KernelBuild } from './job.js';
import { setupEvalPanel, type EvaluationState } from './eval-panel.js';

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const els = {
  drop: $<HTMLLabelElement>('drop'), files: $<HTMLInputElement>('files'), dropText: $('drop-text'), url: $<HTMLInputElement>('url'),
  scheme: $<HTMLSelectElement>('scheme'), schemeHelp: $('scheme-help'), container: $<HTMLSelectElement>('container'),
  workers: $<HTMLInputElement>('workers'), budget: $<HTMLInputElement>('budget'), imatrix: $<HTMLInputElement>('imatrix-file'), stream: $<HTMLInputElement>('stream'), resume: $<HTMLInputElement>('resume'), run: $<HTMLButtonElement>('run'),
  cancel: $<HTMLButtonElement>('cancel'), status: $('status'), bar: $<HTMLProgressElement>('bar'), rate: $('rate'),
  layers: $<HTMLOListElement>('layers'), tensors: $<HTMLTableSectionElement>('tensors').querySelector('tbody')!, result: $('result'),
};

/** What a test (or the console) can read about the last run. */
export interface DemoState {
  state: 'idle' | 'running' | 'done' | 'error';
  build?: KernelBuild;
  error?: { name: string; message: string; isWebquantError: boolean; code?: string; tensor?: string };
  /** `chunked`: tensors cut into row chunks to stay within the memory budget. */
  result?: { fileName: string; kind: ContainerKind; bytes: number; tensors: number; chunked: number; resumedUnits: number; elapsedMs: number; blob?: Blob; config?: string };
  /** The last evaluation (panel 5). */
  evaluation?: EvaluationState;
}
const demo: DemoState = { state: 'idle' };
(globalThis as { webquantDemo?: DemoState }).webquantDemo = demo;

let dropped: File[] = [];
let running: AbortController | undefined;

// --- choices -------------------------------------------------------------------------------
const presets = listPresets();
const addGroup = (label: string, items: { value: string; text: string }[]) => {
  const g = document.createElement('optgroup');
  g.label = label;
  for (const it of items) g.append(new Option(it.text, it.value));
  els.scheme.append(g);
};
addGroup('Presets', presets.map((p) => ({ value: `preset:${p.name}`, text: `${p.name} (${p.container})` })));
addGroup('Formats', [...formats.values()].map((f) => ({ value: `format:${f.name}`, text: f.ggml ? f.name : `${f.name} (safetensors)` })));
els.scheme.value = 'preset:q8_0';
els.workers.value = String(navigator.hardwareConcurrency || 4);
const canStream = 'showSaveFilePicker' in globalThis;
els.stream.disabled = !canStream;
if (!canStream) els.stream.parentElement!.title = 'This browser has no File System Access API: the result is kept as a Blob';

function scheme(): { preset?: string; format?: string } {
  const [kind, name] = els.scheme.value.split(':');
  return kind === 'preset' ? { preset: name } : { format: name };
}
function describeScheme(): void {
  const s = scheme();
  const p = s.preset ? presets.find((x) => x.name === s.preset) : undefined;
  els.schemeHelp.textContent = p ? p.description : `Every weight matrix in ${s.format}; norms and vectors stay as they are.`;
}
els.scheme.addEventListener('change', describeScheme);
describeScheme();

// --- input ---------------------------------------------------------------------------------
const dropHint = els.dropText.innerHTML;
function setFiles(list: FileList | File[]): void {
  dropped = [...list];
  if (!dropped.length) { els.dropText.innerHTML = dropHint; return; }
  els.url.value = '';
  els.dropText.textContent = dropped.map((f) => `${f.name} (${fmtBytes(f.size)})`).join(', ');
}
els.files.addEventListener('change', () => els.files.files && setFiles(els.files.files));
els.drop.addEventListener('dragover', () => els.drop.classList.add('over'));
els.drop.addEventListener('dragleave', () => els.drop.classList.remove('over'));
// The whole page takes the drop: a file dropped beside the zone would otherwise make the browser
// open it in place of the page, and end a run.
addEventListener('dragover', (e) => e.preventDefault());
addEventListener('drop', (e) => {
  e.preventDefault();
  els.drop.classList.remove('over');
  if (e.dataTransfer?.files.length) setFiles(e.dataTransfer.files);
});
els.url.addEventListener('input', () => { if (els.url.value) dropped = []; });

function inputSpec(): InputSpec | undefined {
  if (els.url.value.trim()) return { url: els.url.value.trim() };
  return dropped.length ? { files: dropped } : undefined;
}

/**
 * A number field's value, checked against its own min, max and step; `fallback` when empty. A value
 * out of range is refused rather than clamped: a budget of -1 MiB is not "1 KiB".
 */
function numberField(input: HTMLInputElement, label: string, fallback: number): number {
  if (input.value === '' && !input.validity.badInput) return fallback;
  if (!input.validity.valid) {
    const range = `from ${input.min || '-∞'} to ${input.max || '∞'}${input.step === 'any' ? '' : ', a whole number'}`;
    throw new WebquantError(ErrorCodes.BAD_OPTION, `[demo] ${label} must be a number ${range} but got "${input.validity.badInput ? 'not a number' : input.value}"`, {
      option: label, value: input.value, expected: range,
    });
  }
  return Number(input.value);
}

// --- progress ------------------------------------------------------------------------------
function status(text: string, state: DemoState['state']): void {
  els.status.textContent = text;
  els.status.dataset.state = state;
  demo.state = state;
}

function cell(row: HTMLTableRowElement, text: string, num = false): void {
  const td = row.insertCell();
  td.textContent = text;
  if (num) td.className = 'num';
}

function onProgress(e: ProgressEvent): void {
  // A warning (the GPU lane lost its device) changes nothing in the output: say it, keep going.
  if (e.type === 'warning') { status(e.message, 'running'); return; }
  els.bar.value = e.bytesTotal ? e.bytesDone / e.bytesTotal : 1;
  const eta = e.etaMs !== undefined ? `, about ${Math.ceil(e.etaMs / 1000)} s left` : '';
  els.rate.textContent = `${fmtBytes(e.bytesDone)} of ${fmtBytes(e.bytesTotal)}, ${fmtBytes(e.throughput)}/s${eta}`;
  if (e.type === 'layer') {
    const li = document.createElement('li');
    li.className = 'done';
    li.textContent = `${e.group} (${e.tensors})`;
    els.layers.append(li);
    return;
  }
  const m = e.metrics;
  const row = els.tensors.insertRow();
  cell(row, String(e.index + 1), true);
  cell(row, e.name);
  cell(row, e.layer === undefined ? '' : String(e.layer));
  cell(row, e.cached ? `${e.format} (resumed)` : e.format);
  cell(row, fmtBytes(e.bytes), true);
  cell(row, fmtBytes(e.outputBytes), true);
  cell(row, m ? m.rmse.toExponential(3) : '', true);
  cell(row, m ? (Number.isFinite(m.sqnrDb) ? m.sqnrDb.toFixed(1) : '∞') : '', true);
  cell(row, m ? m.cosine.toFixed(6) : '', true);
  status(`Quantizing: ${e.index + 1} of ${e.count} tensors (${e.name})`, 'running');
}

// --- run -----------------------------------------------------------------------------------
let lastUrl: string | undefined;
let configUrl: string | undefined;

type SaveFilePicker = (o: { suggestedName: string }) => Promise<FileSystemFileHandle>;

/** Where the output goes: a file picked by the user (written as it streams), or a Blob. */
async function outputSink(file: FileSystemFileHandle | undefined): Promise<{ sink: Sink; blob?: () => Promise<Blob> }> {
  return file ? { sink: await opfsSink(file) } : blobSink();
}

async function run(): Promise<void> {
  const spec = inputSpec();
  if (!spec) { status('Drop a checkpoint or paste a URL first.', 'error'); return; }
  const what = scheme();
  const want = (els.container.value || undefined) as ContainerKind | undefined;
  running = new AbortController();
  const { signal } = running;
  els.run.disabled = true;
  els.cancel.disabled = false;
  els.tensors.replaceChildren();
  els.layers.replaceChildren();
  els.bar.value = 0;
  els.rate.textContent = '';
  els.result.textContent = 'Working…';
  if (lastUrl) { URL.revokeObjectURL(lastUrl); lastUrl = undefined; }
  if (configUrl) { URL.revokeObjectURL(configUrl); configUrl = undefined; }
  demo.error = undefined;
  demo.result = undefined;
  demo.build = undefined;
  let sink: Sink | undefined;
  let picked: { file: FileSystemFileHandle; wasEmpty: boolean } | undefined;
  try {
    const workers = numberField(els.workers, 'Workers', navigator.hardwareConcurrency || 4);
    const maxInFlightBytes = Math.max(1024, Math.round(numberField(els.budget, 'Memory budget (MiB)', 256) * (1 << 20)));
    // The save dialog needs the click's user activation: it opens before anything is awaited.
    let file: FileSystemFileHandle | undefined;
    if (els.stream.checked && canStream) {
      const ext = want ?? presets.find((p) => p.name === what.preset)?.container ?? 'gguf';
      const pick = (globalThis as unknown as { showSaveFilePicker: SaveFilePicker }).showSaveFilePicker;
      file = await pick({ suggestedName: `model-${what.preset ?? what.format}.${ext}` });
      picked = { file, wasEmpty: await file.getFile().then((f) => f.size === 0, () => false) };
    }
    // Made now so that every failure below aborts it: a picked file is left as it was, never half written.
    const out = await outputSink(file);
    sink = out.sink;
    status('Opening the checkpoint…', 'running');
    // The URL's requests take the run's signal: Cancel aborts one a server never answers.
    const opened = await openInput(spec, signal);
    const imatrixFile = els.imatrix.files?.[0];
    const imatrix = imatrixFile ? { matrix: await readImatrix(fromBlob(imatrixFile)), file: imatrixFile.name } : undefined;
    const job = await prepare(opened, what, want, { imatrix });
    status(`${opened.checkpoint.tensors.length} tensors, ${job.label} → ${job.kind}`, 'running');
    const r = await runJob(job, {
      sink, workers, maxInFlightBytes, resumable: els.resume.checked, signal, onProgress,
      onBuild: (b) => { demo.build = b; els.rate.textContent = `kernels: ${b} in ${workers} Web Worker${workers > 1 ? 's' : ''}`; },
    });
    const output = out.blob ? await out.blob() : undefined;
    demo.result = { fileName: job.fileName, kind: job.kind, bytes: r.bytesWritten, tensors: r.tensors.length, chunked: r.tensors.filter((t) => t.chunks > 1).length, resumedUnits: r.resumedUnits, elapsedMs: r.elapsedMs, blob: output };
    els.result.replaceChildren();
    if (output) {
      lastUrl = URL.createObjectURL(output);
      const a = Object.assign(document.createElement('a'), { href: lastUrl, download: job.fileName, id: 'download', textContent: `Download ${job.fileName}` });
      els.result.append(a, ` (${fmtBytes(output.size)})`);
    } else {
      els.result.append(`Written: ${job.fileName} (${fmtBytes(r.bytesWritten)})`);
    }
    // MLX, bitsandbytes and NVFP4 outputs load as a folder: model.safetensors beside a config.json with their entry.
    const rc = job.kind === 'safetensors' && opened.config ? runtimeConfig(opened.config.raw, job.plan.tensors) : undefined;
    if (rc?.config && rc.runtime) {
      const text = JSON.stringify(rc.config, null, 2) + '\n';
      demo.result.config = text;
      configUrl = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
      const a = Object.assign(document.createElement('a'), { href: configUrl, download: 'config.json', id: 'download-config', textContent: 'config.json' });
      const who = { mlx: 'MLX (mlx_lm.load)', bitsandbytes: 'transformers (from_pretrained, with bitsandbytes)', modelopt: 'vLLM or SGLang (ModelOpt NVFP4, weights only)' }[rc.runtime];
      els.result.append(document.createElement('br'), `${who} takes a folder holding the result as model.safetensors, this `, a, ' and the tokenizer files.');
    }
    if (job.warnings.length) {
      // Fallbacks of the plan (e.g. rows too short for K-quants), folded: there is one per tensor.
      const notes = document.createElement('details');
      notes.append(Object.assign(document.createElement('summary'), { textContent: `${job.warnings.length} note${job.warnings.length > 1 ? 's' : ''} from the plan` }));
      const ul = document.createElement('ul');
      for (const w of job.warnings) ul.append(Object.assign(document.createElement('li'), { textContent: w }));
      notes.append(ul);
      els.result.append(notes);
    }
    const resumed = r.resumedUnits ? `, ${r.resumedUnits} units taken from the interrupted run` : '';
    status(`Done: ${r.tensors.length} tensors in ${(r.elapsedMs / 1000).toFixed(2)} s with ${r.build}${resumed}.`, 'done');
  } catch (e) {
    await sink?.abort(e).catch(() => undefined); // the pipeline may have aborted it already
    await removeIfEmpty(picked);
    demo.error = errorState(e);
    els.result.textContent = 'No output.';
    // The rate line's "about n s left" and the bar belong to a run that no longer goes on.
    els.rate.textContent = '';
    els.bar.value = 0;
    status(errorText(e), 'error');
  } finally {
    running = undefined;
    els.run.disabled = false;
    els.cancel.disabled = true;
  }
}

els.run.addEventListener('click', () => void run());
els.cancel.addEventListener('click', () => running?.abort(new Error('cancelled with the Cancel button')));

/**
 * The save dialog creates the file it names; a failed run aborts the writable, which leaves that
 * file as it was: empty when the dialog made it. Such a file is removed (FileSystemHandle.remove,
 * Chromium) so that no 0-byte model is left behind; a file that held bytes before is untouched.
 */
async function removeIfEmpty(picked: { file: FileSystemFileHandle; wasEmpty: boolean } | undefined): Promise<void> {
  if (!picked?.wasEmpty) return;
  const h = picked.file as FileSystemFileHandle & { remove?: () => Promise<void> };
  try {
    if (typeof h.remove === 'function' && (await h.getFile()).size === 0) await h.remove();
  } catch {
    // The file may be gone or not ours to remove: the run's error is what the page reports.
  }
}

function errorState(e: unknown): NonNullable<DemoState['error']> {
  const err = e as Error;
  const wq = e instanceof WebquantError;
  return { name: err?.name ?? 'Error', message: err?.message ?? String(e), isWebquantError: wq, code: wq ? e.code : undefined, tensor: wq ? e.details.tensor : undefined };
}
function errorText(e: unknown): string {
  if (!(e instanceof WebquantError)) return String((e as Error)?.message ?? e);
  // fetch() says only "Failed to fetch" when a server on another origin does not allow this page.
  const file = typeof e.details.file === 'string' && URL.canParse(e.details.file) ? new URL(e.details.file) : undefined;
  const cors = e.code === ErrorCodes.IO && /Failed to fetch/.test(e.message) && file && file.origin !== location.origin
    ? ' (a server on another origin must allow this page: Access-Control-Allow-Origin, and Access-Control-Expose-Headers: Content-Range)'
    : '';
  return `${e.code}: ${e.message}${cors}`;
}

// --- evaluation (panel 5) -----------------------------------------------------------------
setupEvalPanel({
  demo, original: inputSpec, errorState, errorText,
  quantizedResult: () => (demo.result?.blob ? { blob: demo.result.blob, name: demo.result.fileName } : undefined),
});

function fmtBytes(n: number): string {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return i ? `${n.toFixed(n >= 100 ? 0 : 1)} ${u[i]}` : `${n} B`;
}
