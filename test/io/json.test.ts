// src/io/json.ts: duplicate keys, and the nesting limit of parseJson.
import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, findDuplicateKey, parseJson } from '../../src/io/json.js';

const nested = (n: number) => '['.repeat(n) + ']'.repeat(n);

describe('parseJson', () => {
  it('parses up to MAX_JSON_DEPTH levels and refuses one more with a SyntaxError', () => {
    expect(parseJson(nested(MAX_JSON_DEPTH))).toBeInstanceOf(Array);
    expect(() => parseJson(nested(MAX_JSON_DEPTH + 1))).toThrow(SyntaxError);
    expect(() => parseJson(`{"a": ${nested(100000)}}`)).toThrow(/nested deeper than 128 levels/);
  });

  it('counts brackets outside strings only, escaped quotes included', () => {
    const inString = JSON.stringify({ s: '['.repeat(1000) + '\\"[' + '{'.repeat(1000) });
    expect(parseJson(inString)).toEqual(JSON.parse(inString));
    expect(parseJson('{"a\\"[": [1, {"b": "]]]"}]}')).toEqual({ 'a"[': [1, { b: ']]]' }] });
  });

  it('gives JSON.parse\'s errors for text that is not JSON', () => {
    expect(() => parseJson('{bad')).toThrow(SyntaxError);
  });
});

describe('findDuplicateKey', () => {
  it('finds the first repeated key with the path of its object, and none in arrays or strings', () => {
    expect(findDuplicateKey('{"a": {"x": 1, "y": "x", "x": 2}}')).toEqual({ path: ['a'], key: 'x' });
    expect(findDuplicateKey('{"a": [{"x": 1}, {"x": 2}], "b": "\\"a\\""}')).toBeUndefined();
  });
});
