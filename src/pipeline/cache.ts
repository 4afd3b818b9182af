// Resume support: each finished unit of work (a tensor, or a row chunk of one) is stored under a
// run key, so a run that was killed and started again skips what was done and writes the same
// bytes. The key covers everything the output depends on: the input's identity (source name,
// size, a hash of its header: tensor table and metadata), the resolved plan, the importance
// vectors and the output container.

export interface CachedUnit {
  data: Uint8Array;
  /** JSON-safe details (metrics) stored beside the bytes. */
  meta: unknown;
}

export interface ResumeStore {
  get(key: string, id: string): Promise<CachedUnit | undefined>;
  /** Must be atomic: a unit is either stored whole or not at all. */
  put(key: string, id: string, unit: CachedUnit): Promise<void>;
  /** Drops everything stored under `key` (after a successful run). */
  clear(key: string): Promise<void>;
}

/** Version of the cached data layout; bump to invalidate caches written by older releases. */
const CACHE_VERSION = 1;

export async function sha256Hex(parts: (string | Uint8Array)[]): Promise<string> {
  const enc = new TextEncoder();
  const chunks = parts.map((p) => (typeof p === 'string' ? enc.encode(p) : p));
  const all = new Uint8Array(chunks.reduce((a, c) => a + c.byteLength + 4, 0));
  let at = 0;
  for (const c of chunks) {
    // Length-prefixed so that ["ab", "c"] and ["a", "bc"] differ.
    new DataView(all.buffer).setUint32(at, c.byteLength, true);
    all.set(c, at + 4);
    at += c.byteLength + 4;
  }
  const d = await crypto.subtle.digest('SHA-256', all);
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/** Stable JSON: object keys sorted, bigint as strings, typed arrays as plain arrays. */
export function stableJson(v: unknown): string {
  return JSON.stringify(v, (_k, x) => {
    if (typeof x === 'bigint') return `${x}n`;
    if (ArrayBuffer.isView(x)) return Array.from(x as unknown as ArrayLike<number>);
    if (x && typeof x === 'object' && !Array.isArray(x)) {
      return Object.fromEntries(Object.keys(x).sort().map((k) => [k, (x as Record<string, unknown>)[k]]));
    }
    return x;
  });
}

export interface RunIdentity {
  source: string;
  size: number;
  header: unknown;
  plan: unknown;
  container: string;
  importance?: Record<string, Float32Array>;
}

export async function runKey(id: RunIdentity): Promise<string> {
  const imp = Object.keys(id.importance ?? {}).sort().flatMap((k) => {
    const v = id.importance![k];
    return [k, new Uint8Array(v.buffer, v.byteOffset, v.byteLength)];
  });
  const hex = await sha256Hex([String(CACHE_VERSION), id.source, String(id.size), stableJson(id.header), stableJson(id.plan), id.container, ...imp]);
  return hex.slice(0, 32);
}
