// Timing helpers shared by the benchmarks: medians of repeated runs, printed tables, JSON files.
import { writeFileSync, mkdirSync } from 'node:fs';
import { median } from './stats.js';

export { alternate, median, weightData } from './stats.js';

/** Runs fn until `reps` runs or `budgetMs` elapsed (at least `minReps`), returns the median seconds. */
export async function timeIt(fn: () => unknown | Promise<unknown>, reps: number, budgetMs: number, minReps = 3): Promise<number> {
  const times: number[] = [];
  const start = performance.now();
  while (times.length < reps && (times.length < minReps || performance.now() - start < budgetMs)) {
    const t0 = performance.now();
    await fn();
    times.push((performance.now() - t0) / 1000);
  }
  return median(times);
}

export function table(headers: string[], rows: (string | number)[][]): string {
  const cells = rows.map((r) => r.map((c) => (c === undefined ? '-' : typeof c === 'number' ? (Number.isFinite(c) ? c.toFixed(c >= 100 ? 0 : c >= 10 ? 1 : c >= 1 ? 2 : 3) : '-') : c)));
  const w = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => String(r[i]).length)));
  const line = (r: (string | number)[]) => '| ' + r.map((c, i) => String(c).padEnd(w[i])).join(' | ') + ' |';
  return [line(headers), '|' + w.map((x) => '-'.repeat(x + 2)).join('|') + '|', ...cells.map(line)].join('\n');
}

export function writeJson(path: string, data: unknown): void {
  mkdirSync(path.replace(/\/[^/]*$/, ''), { recursive: true });
  writeFileSync(path, JSON.stringify(data, null, 2) + '\n');
}

export function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1] : def;
}
