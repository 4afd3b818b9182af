// JSON.parse keeps the last of duplicate keys without a word; safetensors headers must not have
// any (two readers could otherwise disagree on where a tensor is), so they are looked for here.

/**
 * The first duplicate object key in `text` (already known to be valid JSON), with the path of
 * the object that holds it; undefined when there is none.
 */
export function findDuplicateKey(text: string): { path: string[]; key: string } | undefined {
  interface Frame { keys: Set<string> | null; expectKey: boolean; lastKey: string }
  const stack: Frame[] = [];
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x7b /* { */) stack.push({ keys: new Set(), expectKey: true, lastKey: '' });
    else if (c === 0x5b /* [ */) stack.push({ keys: null, expectKey: false, lastKey: '' });
    else if (c === 0x7d /* } */ || c === 0x5d /* ] */) stack.pop();
    else if (c === 0x2c /* , */) {
      const top = stack[stack.length - 1];
      if (top && top.keys) top.expectKey = true;
    } else if (c === 0x22 /* " */) {
      let j = i + 1;
      let escaped = false;
      for (; j < n; j++) {
        const d = text.charCodeAt(j);
        if (d === 0x5c) { escaped = true; j++; } else if (d === 0x22) break;
      }
      const top = stack[stack.length - 1];
      if (top && top.keys && top.expectKey) {
        const raw = text.slice(i, j + 1);
        const key = escaped ? (JSON.parse(raw) as string) : raw.slice(1, -1);
        if (top.keys.has(key)) return { path: stack.slice(0, -1).map((f) => f.lastKey), key };
        top.keys.add(key);
        top.lastKey = key;
        top.expectKey = false;
      }
      i = j;
    }
  }
  return undefined;
}
