// What a CLI command talks to: output streams, the environment and the working directory, all
// injectable so that tests run commands in-process.
export interface Output {
  write(s: string): unknown;
  /** A terminal: progress is drawn as a bar. */
  isTTY?: boolean;
  columns?: number;
}

export interface CliIO {
  stdout: Output;
  stderr: Output;
  /** Base for relative paths (default process.cwd()). */
  cwd?: string;
  env?: Record<string, string | undefined>;
  /** Cancels a running command (Ctrl-C in bin/webquant.js). */
  signal?: AbortSignal;
  /** Pool worker entry (worker-node.js); tests running the TypeScript sources point it at a build. */
  workerUrl?: string | URL;
  /** Entry of imatrix's and eval's --workers threads (forward-worker.js); tests point it at a build. */
  forwardWorkerUrl?: URL;
  fetch?: typeof fetch;
}

export function processIO(): CliIO {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    cwd: process.cwd(),
    env: process.env,
  };
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function fmtBytes(n: number): string {
  let u = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && u < UNITS.length - 1) { v /= 1024; u++; }
  return u === 0 ? `${v} B` : `${v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${UNITS[u]}`;
}

export function fmtNum(v: number | undefined, digits = 2): string {
  if (v === undefined || Number.isNaN(v)) return '-';
  if (v === Infinity) return 'inf';
  return v.toFixed(digits);
}

export function fmtSci(v: number | undefined): string {
  if (v === undefined || Number.isNaN(v)) return '-';
  return v === 0 ? '0' : v.toExponential(2);
}

/** A text table with left-aligned text and right-aligned numbers (columns listed in `right`). */
export function table(head: string[], rows: string[][], right: number[] = []): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (right.includes(i) ? (c ?? '').padStart(w[i]) : (c ?? '').padEnd(w[i]))).join('  ').trimEnd();
  return [line(head), line(w.map((n) => '-'.repeat(n))), ...rows.map(line)].join('\n') + '\n';
}

/** JSON for output: bigint as a number when it is safe, else as a string; typed arrays summarised. */
export function toJSON(v: unknown, indent?: number): string {
  return JSON.stringify(v, (_k, x) => {
    if (typeof x === 'bigint') return x >= BigInt(Number.MIN_SAFE_INTEGER) && x <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(x) : x.toString();
    if (typeof x === 'number' && !Number.isFinite(x)) return String(x);
    return x;
  }, indent);
}
