// src/convert/general-metadata.ts and model-names.ts against gguf-py itself (llama.cpp's converter library): the
// name components, titles, rounded counts and size labels it derives, recorded by
// bench/gguf-py-names.py for names chosen to reach each of its rules.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { generalMetadata, sizeLabel } from '../../src/convert/general-metadata.js';
import { idToTitle, modelIdComponents, roundedCount } from '../../src/convert/model-names.js';
import { ErrorCodes, WebquantError } from '../../src/errors.js';

type Nullable = string | null;
const ref = JSON.parse(readFileSync(new URL('./fixtures/general-metadata.json', import.meta.url), 'utf8')) as {
  components: [string, number, Nullable[]][];
  titles: [string, string][];
  counts: [number, string][];
  labels: [[number, number, number, number], string][];
};

describe('general.* naming as gguf-py derives it', () => {
  it('splits Hub ids and folder names into name, organization, basename, fine-tune, version and size label', () => {
    for (const [id, total, want] of ref.components) {
      const c = modelIdComponents(id, total);
      expect([c.full, c.org, c.basename, c.finetune, c.version, c.sizeLabel].map((x) => x ?? null), `${id} (${total})`).toEqual(want);
    }
  });
  it('titles names as id_to_title does', () => {
    for (const [s, want] of ref.titles) expect(idToTitle(s), s).toBe(want);
  });
  it('rounds parameter counts as model_weight_count_rounded_notation, ties to even', () => {
    for (const [n, want] of ref.counts) expect(roundedCount(n), String(n)).toBe(want);
  });
  it('labels MoE sizes as <experts>x<one expert plus the rest>', () => {
    // size_label(total, shared, expert, count): sizeLabel sees the tensors those counts come from.
    for (const [[total, shared, expert, count], want] of ref.labels) {
      const tensors = count > 0
        ? [{ name: 'token_embd.weight', shape: [shared] }, { name: 'blk.0.ffn_up_exps.weight', shape: [count, expert, 1] }]
        : [{ name: 'token_embd.weight', shape: [total] }];
      expect(sizeLabel(tensors), want).toBe(want);
    }
    // A 2-D bias of stacked experts counts with the rest, as in GGUFWriter (2.25K rounds to even: 2.2K).
    expect(sizeLabel([{ name: 'a.weight', shape: [1000] }, { name: 'blk.0.ffn_up_exps.bias', shape: [4, 250] }, { name: 'blk.0.ffn_up_exps.weight', shape: [4, 250, 1] }])).toBe('4x2.2K');
  });
  it('writes sampling defaults of the right type only, and the name from _name_or_path before the folder', () => {
    const kv = generalMetadata({
      dirName: 'local-copy', config: { _name_or_path: 'acme/Widget-7B-Chat-v2' },
      generation: { top_k: 40.5, top_p: 0.9, temperature: null, repetition_penalty: 1.1, penalty_repeat: 1.2, sequence: 'top_k;top_p', mirostat: 2 },
      tensors: [{ name: 'token_embd.weight', shape: [7e9] }],
    });
    expect(kv.map((k) => [k.key, k.value])).toEqual([
      ['general.type', 'model'], ['general.sampling.sequence', 'top_k;top_p'], ['general.sampling.top_p', 0.9], ['general.sampling.penalty_repeat', 1.2],
      ['general.sampling.mirostat', 2], ['general.name', 'Widget 7B Chat v2'], ['general.version', 'v2'], ['general.organization', 'Acme'],
      ['general.finetune', 'Chat'], ['general.basename', 'Widget'], ['general.size_label', '7B'],
    ]);
    // A path on disk is not a name: the folder names the model.
    expect(generalMetadata({ dirName: 'x', config: { _name_or_path: '/data/a/b' }, tensors: [] }).find((k) => k.key === 'general.name')?.value).toBe('X');
  });
  it('takes a --metadata file as gguf-py does: null drops a key (the name and size label fall back), wrong types are refused', () => {
    const base = { dirName: 'Widget-7B', tensors: [{ name: 'token_embd.weight', shape: [6.5e9] }] };
    const kv = (values: Record<string, unknown>, warnings: string[] = []) =>
      generalMetadata({ ...base, warnings, override: { file: 'meta.json', values } }).map((k) => [k.key, k.value]);
    expect(kv({})).toEqual([['general.type', 'model'], ['general.name', 'Widget 7B'], ['general.basename', 'Widget'], ['general.size_label', '7B']]);
    // The converter's fallbacks: the folder name as it is, the tensors' count.
    const warnings: string[] = [];
    expect(kv({ 'general.name': null, 'general.size_label': null, 'general.basename': null, 'general.license': 'mit', 'general.other': null }, warnings)).toEqual([
      ['general.type', 'model'], ['general.name', 'Widget-7B'], ['general.size_label', '6.5B'],
    ]);
    expect(warnings).toEqual([expect.stringMatching(/^meta\.json: "general\.license" is not a key/), expect.stringMatching(/^meta\.json: "general\.other" is not a key/)]);
    expect(kv({ 'general.sampling.top_k': 12, 'general.sampling.temp': 0.5 }).slice(0, 3)).toEqual([['general.type', 'model'], ['general.sampling.top_k', 12], ['general.sampling.temp', 0.5]]);
    const code = (values: unknown) => {
      try {
        generalMetadata({ ...base, override: { file: 'meta.json', values: values as Record<string, unknown> } });
      } catch (e) {
        const w = e as WebquantError;
        expect(w.message).toContain('meta.json');
        return [w.code, w.details?.option];
      }
      return 'no error';
    };
    expect(code({ 'general.name': 7 })).toEqual([ErrorCodes.BAD_INPUT, 'general.name']);
    expect(code({ 'general.sampling.top_k': 1.5 })).toEqual([ErrorCodes.BAD_INPUT, 'general.sampling.top_k']);
    expect(code({ 'general.sampling.top_p': '0.9' })).toEqual([ErrorCodes.BAD_INPUT, 'general.sampling.top_p']);
    expect(code({ 'general.tags': 'a,b' })).toEqual([ErrorCodes.BAD_INPUT, 'general.tags']);
    expect(code({ 'general.languages': ['en', 1] })).toEqual([ErrorCodes.BAD_INPUT, 'general.languages']);
    expect(code({ 'general.base_models': [{ name: 'x', version: 2 }] })).toEqual([ErrorCodes.BAD_INPUT, 'general.base_models']);
    expect(code({ 'general.datasets': ['name'] })).toEqual([ErrorCodes.BAD_INPUT, 'general.datasets']);
    expect(code([1, 2])).toEqual([ErrorCodes.BAD_INPUT, undefined]);
    expect(code({ 'general.sampling.top_k': 12, 'general.tags': [] })).toBe('no error');
  });
});
