// The in-memory cache of tensor bytes: least recently used entries go first, capped in bytes.
export class Lru {
  private map = new Map<string, Uint8Array[]>();
  bytes = 0;
  hits = 0;
  misses = 0;
  evictions = 0;
  constructor(readonly cap: number) {}

  get(name: string): Uint8Array[] | undefined {
    const v = this.map.get(name);
    if (v) {
      this.map.delete(name);
      this.map.set(name, v);
      this.hits++;
    } else {
      this.misses++;
    }
    return v;
  }

  /** Keeps v unless it alone exceeds the cap; evicts least recently used entries to fit. */
  set(name: string, v: Uint8Array[]): void {
    const size = v.reduce((a, b) => a + b.byteLength, 0);
    if (size > this.cap) return;
    const old = this.map.get(name);
    if (old) {
      this.map.delete(name);
      this.bytes -= old.reduce((a, b) => a + b.byteLength, 0);
    }
    for (const [k, e] of this.map) {
      if (this.bytes + size <= this.cap) break;
      this.map.delete(k);
      this.bytes -= e.reduce((a, b) => a + b.byteLength, 0);
      this.evictions++;
    }
    this.map.set(name, v);
    this.bytes += size;
  }

  get entries(): number {
    return this.map.size;
  }
  clear(): void {
    this.map.clear();
    this.bytes = 0;
  }
}
