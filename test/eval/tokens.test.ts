import { describe, expect, it } from 'vitest';
import { BOS, readTokens, splitDocuments } from '../../src/eval/tokens.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';
import { sharedBytes } from '../helpers/shared.js';

describe('token files', () => {
  it('decodes little-endian uint16 from a Uint8Array at any offset and from an ArrayBuffer', () => {
    const bytes = new Uint8Array([0xaa, 1, 0, 0x34, 0x12, 0xff, 0xff]);
    expect(Array.from(readTokens(bytes.subarray(1)))).toEqual([1, 0x1234, 0xffff]);
    expect(Array.from(readTokens(bytes.slice(1).buffer))).toEqual([1, 0x1234, 0xffff]);
  });

  it('rejects an odd number of bytes', () => {
    const e = (() => { try { readTokens(new Uint8Array(3), 'x.u16'); } catch (err) { return err as WebquantError; } })();
    expect(e?.code).toBe(ErrorCodes.BAD_INPUT);
    expect(e?.details).toMatchObject({ file: 'x.u16', value: 3 });
  });

  it('splits on BOS, documents as views that start with BOS', () => {
    const t = Uint16Array.from([1, 5, 6, 1, 1, 7, 1, 8, 9, 10]);
    const docs = splitDocuments(t);
    expect(docs.map((d) => Array.from(d))).toEqual([[1, 5, 6], [1], [1, 7], [1, 8, 9, 10]]);
    expect(docs[3].buffer).toBe(t.buffer);
    expect(splitDocuments(new Uint16Array(0))).toEqual([]);
    expect(splitDocuments(Uint16Array.from([2, 4, 2]), 2).map((d) => d.length)).toEqual([2, 1]);
  });

  it('rejects tokens before the first BOS', () => {
    expect(() => splitDocuments(Uint16Array.from([5, 1, 2]))).toThrow(WebquantError);
  });

  it('reads the shared TinyStories splits: 2150 documents each, all starting with BOS', () => {
    for (const split of ['dev', 'test']) {
      const bytes = sharedBytes(`eval/tinystories_${split}.tokens.u16`);
      const tokens = readTokens(bytes);
      expect(tokens.length * 2).toBe(bytes.length);
      const docs = splitDocuments(tokens);
      expect(docs.length).toBe(2150);
      expect(docs.every((d) => d[0] === BOS && d.length >= 2 && d.length <= 512)).toBe(true);
    }
  });
});
