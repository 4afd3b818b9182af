// The persistent tensor cache of openQuantized: tensor bytes read from a source are also kept in
// browser storage (OPFS or the Cache API) or a directory (Node), so that a reload reads them from
// there instead of downloading them again.
//
// One entry per tensor, under a key hashed from the source's identity (ByteSource.identity: URL
// with ETag / Last-Modified and size, File name, size and mtime) and the tensor name:
//
//   "WQT1" | u32 LE header length | header JSON | section bytes, in order
//   header: { v, source, tensor, sections: [bytes of each section], sha256: [hex of each section] }
//
// An entry is checked before use (magic, header, source, tensor, each section's length against the
// checkpoint's, total length; with verify: 'sha256' the digests too). One that fails is deleted and
// the tensor read from the source again: a bad entry is never returned.
//
// Byte cap: a write that would take the store past maxBytes first evicts entries, least recently
// used in this JavaScript realm first, then oldest written (storage keeps no access times), after
// listing the store again so that what other tabs wrote counts. Tabs writing at the same moment
// can pass the cap briefly; the next write brings it back under.
import { ErrorCodes, fail, WebquantError } from '../errors.js';
import { sha256Hex } from '../pipeline/cache.js';

/** What a store holds under a key (for eviction). */
export interface StoredEntry {
  key: string;
  bytes: number;
  /** Milliseconds since the epoch the entry was written. */
  written: number;
}

/** Where entries live. Keys are 40 lowercase hex digits. */
export interface TensorStore {
  /** 'opfs', 'cache-api', 'dir', or a custom store's own name (stats, errors). */
  readonly kind: string;
  /** The entry's bytes, or undefined when there is none. */
  get(key: string): Promise<Uint8Array | undefined>;
  /** Stores the concatenation of `parts`, atomically: a later get sees the whole entry or none. */
  put(key: string, parts: readonly Uint8Array[]): Promise<void>;
  delete(key: string): Promise<void>;
  list(): Promise<StoredEntry[]>;
}

export type PersistentStoreKind = 'auto' | 'opfs' | 'cache-api' | 'dir';
export const PERSISTENT_STORES: readonly PersistentStoreKind[] = ['auto', 'opfs', 'cache-api', 'dir'];

export interface PersistentCacheOptions {
  /**
   * 'auto' (default): OPFS where the browser can write it, else the Cache API, else nothing
   * (stats say why); 'opfs', 'cache-api' or 'dir' (Node, with `dir`): that one or an error; or a
   * TensorStore of your own.
   */
  store?: PersistentStoreKind | TensorStore;
  /** Cap of the bytes in the store, all sources together (default 1 GiB). */
  maxBytes?: number;
  /** OPFS directory / Cache API cache name (default 'webquant-tensors'). */
  name?: string;
  /** The directory of the 'dir' store. */
  dir?: string;
  /**
   * Identity of the source's bytes, in place of ByteSource.identity(): needed when the source
   * has none (a Blob, a URL whose server sends no ETag / Last-Modified, an opened Checkpoint).
   * Must change whenever the bytes do (a content hash, a release tag).
   */
  key?: string;
  /** 'size' (default): lengths are checked on read; 'sha256': the section digests too. */
  verify?: 'size' | 'sha256';
}

export interface PersistentCacheStats {
  /** The store in use, or 'none'. */
  store: string;
  /** Why nothing is stored ('none'). */
  reason?: string;
  maxBytes: number;
  /** Bytes in the store as last listed, with this realm's writes and deletions since. */
  bytes: number;
  hits: number;
  misses: number;
  writes: number;
  evictions: number;
  /** Entries that failed their checks on read, deleted. */
  dropped: number;
  /** Tensors larger than maxBytes, not stored. */
  skipped: number;
  /** Store operations that failed (the tensor was still served, from the source). */
  errors: number;
}

export const DEFAULT_PERSISTENT_BYTES = 1 << 30;
export const DEFAULT_STORE_NAME = 'webquant-tensors';
/** Bump when the entry layout changes: older entries then hash to other keys and age out. */
const ENTRY_VERSION = 1;
const MAGIC = [0x57, 0x51, 0x54, 0x31]; // "WQT1"

const badOption = (option: string, value: unknown, expected: unknown, why: string): never =>
  fail(ErrorCodes.BAD_OPTION, `[serve] persistentCache.${option} ${why}`, { option: `persistentCache.${option}`, value: printable(value), expected });

const printable = (v: unknown) => (typeof v === 'object' && v !== null ? Object.prototype.toString.call(v) : v);

const isStore = (s: unknown): s is TensorStore =>
  typeof s === 'object' && s !== null && ['get', 'put', 'delete', 'list'].every((m) => typeof (s as Record<string, unknown>)[m] === 'function');

/** Checks the options (E_BAD_OPTION naming the field) and fills the defaults. */
export function resolvePersistOptions(o: PersistentCacheOptions | true): Required<Omit<PersistentCacheOptions, 'key' | 'dir'>> & { key?: string; dir?: string } {
  if (o === true) o = {};
  if (typeof o !== 'object' || o === null) {
    fail(ErrorCodes.BAD_OPTION, `[serve] persistentCache must be true or an object but got ${String(o)}`, { option: 'persistentCache', value: printable(o), expected: ['true', '{ store, maxBytes, name, dir, key, verify }'] });
  }
  const known = ['store', 'maxBytes', 'name', 'dir', 'key', 'verify'];
  for (const k of Object.keys(o)) if (!known.includes(k)) badOption(k, (o as Record<string, unknown>)[k], known, 'is not an option');
  const store = o.store ?? 'auto';
  if (typeof store === 'string' ? !PERSISTENT_STORES.includes(store as PersistentStoreKind) : !isStore(store)) {
    badOption('store', store, [...PERSISTENT_STORES, 'a TensorStore'], `must be one of ${PERSISTENT_STORES.join(', ')} or a TensorStore`);
  }
  const maxBytes = o.maxBytes ?? DEFAULT_PERSISTENT_BYTES;
  if (typeof maxBytes !== 'number' || !Number.isSafeInteger(maxBytes) || maxBytes < 0) badOption('maxBytes', maxBytes, 'an integer >= 0', `must be an integer >= 0 but got ${String(maxBytes)}`);
  const name = o.name ?? DEFAULT_STORE_NAME;
  // OPFS names a directory with it: no separators, not "." or "..".
  if (typeof name !== 'string' || !name || /[/\\\0]/.test(name) || name === '.' || name === '..') {
    badOption('name', name, 'a non-empty name without / or \\', `must be a non-empty name without / or \\ but got ${JSON.stringify(name)}`);
  }
  if (o.key !== undefined && (typeof o.key !== 'string' || !o.key)) badOption('key', o.key, 'a non-empty string', 'must be a non-empty string');
  if (store === 'dir' && (typeof o.dir !== 'string' || !o.dir)) badOption('dir', o.dir, 'a directory path', 'is required by store "dir"');
  if (o.dir !== undefined && store !== 'dir') badOption('dir', o.dir, 'store: "dir"', 'only applies to store "dir"');
  const verify = o.verify ?? 'size';
  if (verify !== 'size' && verify !== 'sha256') badOption('verify', verify, ['size', 'sha256'], `must be "size" or "sha256" but got ${JSON.stringify(verify)}`);
  return { store, maxBytes, name, dir: o.dir, key: o.key, verify };
}

// ---- which store ---------------------------------------------------------------------------

/** OPFS counts only where files can be written from this thread (Safari's windows cannot). */
export function hasOpfs(): boolean {
  const nav = (globalThis as { navigator?: { storage?: { getDirectory?: unknown } } }).navigator;
  const handle = (globalThis as { FileSystemFileHandle?: { prototype: object } }).FileSystemFileHandle;
  return typeof nav?.storage?.getDirectory === 'function' && !!handle && 'createWritable' in handle.prototype;
}
export function hasCacheApi(): boolean {
  return typeof (globalThis as { caches?: { open?: unknown } }).caches?.open === 'function';
}
const isNode = () => typeof process !== 'undefined' && !!process.versions?.node && typeof (globalThis as { window?: unknown }).window === 'undefined';

/** The store the options name, opened and probed; for 'auto' undefined (with why) when none works. */
async function openStore(o: ReturnType<typeof resolvePersistOptions>): Promise<{ store?: TensorStore; reason?: string }> {
  if (typeof o.store === 'object') return { store: o.store };
  if (o.store === 'dir') {
    if (!isNode()) badOption('store', 'dir', ['auto', 'opfs', 'cache-api'], 'is "dir", which needs Node');
    // A computed specifier keeps bundlers from pulling node:fs into browser builds.
    const nodeModule = './store-node.js';
    return { store: ((await import(/* @vite-ignore */ nodeModule)) as typeof import('./store-node.js')).dirStore(o.dir!) };
  }
  const { opfsStore, cacheApiStore } = await import('./store-browser.js');
  const tries: [string, boolean, () => Promise<TensorStore>][] = [
    ['opfs', hasOpfs(), () => opfsStore(o.name)],
    ['cache-api', hasCacheApi(), () => cacheApiStore(o.name)],
  ];
  const reasons: string[] = [];
  for (const [kind, available, open] of tries) {
    if (o.store !== 'auto' && o.store !== kind) continue;
    if (!available) {
      if (o.store === kind) badOption('store', kind, tries.filter((t) => t[1]).map((t) => t[0]), `is "${kind}", which this runtime does not have`);
      reasons.push(`no ${kind}`);
      continue;
    }
    try {
      return { store: await open() };
    } catch (e) {
      // Storage can exist and still be refused (private windows, blocked site data).
      const why = (e as Error)?.message ?? String(e);
      if (o.store === kind) fail(ErrorCodes.CACHE, `[serve] persistent cache: opening ${kind} "${o.name}" failed: ${why}`, { option: 'persistentCache.store', value: kind });
      reasons.push(`${kind} refused: ${why}`);
    }
  }
  return { reason: reasons.join('; ') };
}

// ---- one store, shared by every model of this realm that uses it ---------------------------

interface StoreState {
  store: TensorStore;
  /** Serializes writes, deletions and eviction. */
  queue: Promise<void>;
  /** Entry sizes as last listed plus this realm's changes; undefined until first listed. */
  sizes?: Map<string, StoredEntry>;
  /** Last use in this realm (ms), for eviction. */
  used: Map<string, number>;
}

const states = new Map<string, StoreState>();
const customStates = new WeakMap<TensorStore, StoreState>();

function stateOf(store: TensorStore, id: string | undefined): StoreState {
  const fresh = (): StoreState => ({ store, queue: Promise.resolve(), used: new Map() });
  if (id === undefined) {
    let s = customStates.get(store);
    if (!s) customStates.set(store, (s = fresh()));
    return s;
  }
  let s = states.get(id);
  if (!s) states.set(id, (s = fresh()));
  return s;
}

// ---- entries -------------------------------------------------------------------------------

const hex = (b: ArrayBuffer) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, '0')).join('');
const digest = async (b: Uint8Array) => hex(await crypto.subtle.digest('SHA-256', b as Uint8Array<ArrayBuffer>));

interface EntryHeader {
  v: number;
  source: string;
  tensor: string;
  sections: number[];
  sha256: string[];
}

/** The entry's parts: magic and header, then the sections as they are (no copy). */
export async function encodeEntry(source: string, tensor: string, sections: readonly Uint8Array[]): Promise<Uint8Array[]> {
  const header: EntryHeader = { v: ENTRY_VERSION, source, tensor, sections: sections.map((s) => s.byteLength), sha256: await Promise.all(sections.map(digest)) };
  const json = new TextEncoder().encode(JSON.stringify(header));
  const head = new Uint8Array(8 + json.byteLength);
  head.set(MAGIC);
  new DataView(head.buffer).setUint32(4, json.byteLength, true);
  head.set(json, 8);
  return [head, ...sections];
}

/** The sections of a stored entry, or why it cannot be used. */
export async function decodeEntry(bytes: Uint8Array, source: string, tensor: string, expected: readonly number[], verify: 'size' | 'sha256'): Promise<Uint8Array[] | string> {
  if (bytes.byteLength < 8 || MAGIC.some((m, i) => bytes[i] !== m)) return 'no entry magic';
  const n = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(4, true);
  if (8 + n > bytes.byteLength) return `header of ${n} bytes runs past the ${bytes.byteLength}-byte entry`;
  let h: EntryHeader;
  try {
    h = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n))) as EntryHeader;
  } catch {
    return 'header is not JSON';
  }
  if (h?.v !== ENTRY_VERSION || h.source !== source || h.tensor !== tensor) return 'entry of another version, source or tensor';
  if (!Array.isArray(h.sections) || h.sections.length !== expected.length || h.sections.some((b, i) => b !== expected[i])) {
    return `sections ${JSON.stringify(h.sections)} but the checkpoint has ${JSON.stringify(expected)}`;
  }
  const total = 8 + n + expected.reduce((a, b) => a + b, 0);
  if (bytes.byteLength !== total) return `${bytes.byteLength} bytes but ${total} expected`;
  const out: Uint8Array[] = [];
  let at = 8 + n;
  for (const len of expected) {
    out.push(bytes.subarray(at, at + len));
    at += len;
  }
  if (verify === 'sha256') {
    if (!Array.isArray(h.sha256) || h.sha256.length !== out.length) return 'no digests';
    for (let i = 0; i < out.length; i++) if ((await digest(out[i])) !== h.sha256[i]) return `section ${i} does not match its SHA-256`;
  }
  return out;
}

// ---- the cache -----------------------------------------------------------------------------

export interface PersistentCache {
  /** The tensor's sections from the store, checked against `expected` lengths; undefined on a miss. */
  get(tensor: string, expected: readonly number[]): Promise<Uint8Array[] | undefined>;
  /** Queues a write (errors are counted, never thrown: the tensor was served already). */
  put(tensor: string, sections: readonly Uint8Array[]): void;
  /** Resolves once every queued write and deletion is done. */
  flush(): Promise<void>;
  stats(): PersistentCacheStats;
}

/**
 * The persistent cache for one source. `identity` is the source's (or undefined: then nothing is
 * stored and stats say why); `file` names the source in errors.
 */
export async function openPersistentCache(options: PersistentCacheOptions | true, identity: string | undefined, file: string): Promise<PersistentCache> {
  const o = resolvePersistOptions(options);
  const c = { hits: 0, misses: 0, writes: 0, evictions: 0, dropped: 0, skipped: 0, errors: 0 };
  const source = o.key ?? identity;
  const opened = source === undefined
    ? { reason: `${file} tells no identity (a URL without ETag or Last-Modified, a Blob, an opened Checkpoint): pass persistentCache.key` }
    : await openStore(o);
  if (!opened.store) {
    return {
      get: async () => undefined,
      put: () => undefined,
      flush: async () => undefined,
      stats: () => ({ store: 'none', reason: opened.reason, maxBytes: o.maxBytes, bytes: 0, ...c }),
    };
  }
  const store = opened.store;
  const st = stateOf(store, typeof o.store === 'string' ? `${store.kind}\0${o.dir ?? o.name}` : undefined);
  const keyOf = async (tensor: string) => (await sha256Hex([String(ENTRY_VERSION), source!, tensor])).slice(0, 40);
  const total = () => [...(st.sizes?.values() ?? [])].reduce((a, e) => a + e.bytes, 0);
  const counted = (e: unknown) => {
    c.errors++;
    if (!(e instanceof WebquantError) && typeof console !== 'undefined') console.warn(`[webquant] persistent cache (${store.kind}): ${(e as Error)?.message ?? String(e)}`);
  };
  const enqueue = (job: () => Promise<void>) => {
    const next = st.queue.then(job).catch(counted);
    st.queue = next;
    return next;
  };
  const relist = async () => {
    st.sizes = new Map((await store.list()).map((e) => [e.key, e]));
  };

  /** Deletes entries (least recently used here, then oldest written) until `bytes` more fit. */
  async function makeRoom(key: string | undefined, bytes: number): Promise<void> {
    const own = (k: string | undefined) => (k === undefined ? 0 : st.sizes?.get(k)?.bytes ?? 0);
    if (!st.sizes || total() - own(key) + bytes > o.maxBytes) await relist();
    const sizes = st.sizes!;
    const order = [...sizes.values()].filter((e) => e.key !== key).sort((a, b) => (st.used.get(a.key) ?? a.written) - (st.used.get(b.key) ?? b.written));
    let have = total() - own(key);
    for (const e of order) {
      if (have + bytes <= o.maxBytes) break;
      await store.delete(e.key);
      sizes.delete(e.key);
      st.used.delete(e.key);
      have -= e.bytes;
      c.evictions++;
    }
  }

  // A store left over the cap (by a larger cap before, or by other tabs) is brought under it
  // before the first read, so that no read races the deletion of what it found.
  const trimmed = enqueue(() => makeRoom(undefined, 0));

  return {
    async get(tensor, expected) {
      await trimmed;
      const key = await keyOf(tensor);
      let bytes: Uint8Array | undefined;
      try {
        bytes = await store.get(key);
      } catch (e) {
        counted(e);
      }
      if (!bytes) {
        c.misses++;
        return undefined;
      }
      const got = await decodeEntry(bytes, source!, tensor, expected, o.verify);
      if (typeof got === 'string') {
        c.dropped++;
        c.misses++;
        // Queued (not awaited): the re-read's write comes after it, and the read need not wait.
        void enqueue(async () => {
          await store.delete(key);
          st.sizes?.delete(key);
        });
        return undefined;
      }
      c.hits++;
      st.used.set(key, Date.now());
      return got;
    },
    put(tensor, sections) {
      void enqueue(async () => {
        const key = await keyOf(tensor);
        const parts = await encodeEntry(source!, tensor, sections);
        const size = parts.reduce((a, p) => a + p.byteLength, 0);
        if (size > o.maxBytes) {
          c.skipped++;
          return;
        }
        await makeRoom(key, size);
        await store.put(key, parts);
        const now = Date.now();
        st.sizes!.set(key, { key, bytes: size, written: now });
        st.used.set(key, now);
        c.writes++;
      });
    },
    flush: () => st.queue,
    stats: () => ({ store: store.kind, maxBytes: o.maxBytes, bytes: total(), ...c }),
  };
}
