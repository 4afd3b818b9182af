// Static activation scales from calibration text, as NVIDIA ModelOpt's "max" calibration makes
// them for NVFP4 (W4A4): the reference forward runs the calibration tokens in chunks (each from an
// empty cache, its first token replaced by BOS, as for the importance matrix), and every weight
// matrix records the largest absolute value of its input over all positions that reach it (a MoE
// expert: the positions routed to it). A runtime that quantizes activations to NVFP4 divides them
// by input_scale = amax / (6 * 448), so that the largest calibrated input maps to the top of the
// FP4 range at the top of the E4M3 block scales.
import { ErrorCodes, fail } from '../errors.js';
import type { PlannedTensor } from '../plan/types.js';
import { bosChunk, imatrixChunks, observedWeights, runChunks, type CalibrationOptions } from './imatrix.js';
import { LlamaModel } from './llama.js';

export interface ActivationOptions extends CalibrationOptions {
  /** Also run the output head (its input's amax); off by default, as the head is rarely quantized. */
  head?: boolean;
}

/** The largest |input| of every weight matrix the forward multiplied, by its checkpoint name. */
export async function activationAmax(opts: ActivationOptions): Promise<Map<string, number>> {
  const span = imatrixChunks(opts, 'activations');
  const amax = new Map<string, number>();
  const observed = observedWeights(opts.weights, (name, x, n, cols) => {
    let m = amax.get(name) ?? 0;
    for (let i = 0, end = n * cols; i < end; i++) {
      const a = Math.abs(x[i]);
      if (a > m) m = a;
      else if (a !== a) fail(ErrorCodes.MODEL, `[activations] the input of ${name} has a NaN at position ${Math.floor(i / cols)}`, { tensor: name, index: i });
    }
    amax.set(name, m);
  });
  const model = await LlamaModel.load(opts.config, observed);
  await runChunks(opts, 'activations', span, (tokens) => model.forward(bosChunk(tokens, opts.bos), { logits: !!opts.head }));
  return amax;
}

/** ModelOpt's NVFP4 input scale for an input amax: amax / (6 * 448), in f32. */
export function nvfp4InputScale(amax: number): number {
  return Math.fround(Math.fround(amax) / 2688);
}

/** An expert's name with its index wildcarded, so that experts of one layer and projection match. */
const expertKey = (name: string) => name.replace(/\.experts\.\d+\./, '.experts.*.');

/**
 * The plan with every nvfp4 tensor given its input scale from `amax`. A MoE expert that no
 * calibration position reached takes the largest amax of the same projection among its layer's
 * other experts (ModelOpt fills uncalibrated experts likewise); any other nvfp4 tensor without
 * an observed input is an error naming it, since a W4A4 runtime would divide by a missing scale.
 */
export function withInputScales(tensors: readonly PlannedTensor[], amax: ReadonlyMap<string, number>): PlannedTensor[] {
  const siblings = new Map<string, number>();
  for (const [name, m] of amax) {
    const k = expertKey(name);
    if (k !== name) siblings.set(k, Math.max(siblings.get(k) ?? 0, m));
  }
  const missing: string[] = [];
  const out = tensors.map((t) => {
    if (t.scheme === 'keep' || t.scheme.format !== 'nvfp4') return t;
    const m = amax.get(t.name) ?? siblings.get(expertKey(t.name));
    if (m === undefined) {
      missing.push(t.name);
      return t;
    }
    // An input that was all zeros gets the smallest scale a runtime can divide by.
    return { ...t, scheme: { ...t.scheme, inputScale: m > 0 ? nvfp4InputScale(m) : 2 ** -126 } };
  });
  if (missing.length) {
    fail(ErrorCodes.MODEL, `[activations] no calibration input reached ${missing.length} nvfp4 tensor${missing.length > 1 ? 's' : ''} (${missing.slice(0, 3).join(', ')}${missing.length > 3 ? ', ...' : ''}), so they have no input scale; the forward does not multiply them under these names`, {
      tensor: missing[0], value: missing.length,
    });
  }
  return out;
}
