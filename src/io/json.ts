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

/** Nesting no checkpoint, config or plan file comes near; deeper text is refused before parsing. */
export const MAX_JSON_DEPTH = 128;

/**
 * JSON.parse for text from files and options. V8 parses any depth, but printing or cloning the
 * result recurses (an error message's preview, a worker message) and overflows the stack at a few
 * thousand levels, so text nested deeper than MAX_JSON_DEPTH is a SyntaxError here, which every
 * caller already turns into its typed "not JSON" error.
 */
export function parseJson(text: string): unknown {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > MAX_JSON_DEPTH) throw new SyntaxError(`nested deeper than ${MAX_JSON_DEPTH} levels at position ${i}`);
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return JSON.parse(text);
}

/** A JSON object (not null, not an array). */
export function isJsonObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
