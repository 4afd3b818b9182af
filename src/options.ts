// Validation of quantize options against the registry: every refusal names the option, the
// value and the valid choices.
import { CALIBRATIONS, type CalibrationName } from './kernels/args.js';
import { ErrorCodes, fail } from './errors.js';
import type { FormatSpec, ResolvedOptions, ScaleDtype } from './formats/types.js';

/** `calibration` may be a name, MaxText's `fixed,<scale>,<max>` string, or an object. */
export type CalibrationOption =
  | CalibrationName
  | string
  | { method: CalibrationName; ratio?: number; percentile?: number; scale?: number; max?: number; iterations?: number };

export interface FormatOptions {
  format: string;
  groupSize?: number;
  bits?: number;
  calibration?: CalibrationOption;
  granularity?: ResolvedOptions['granularity'];
  doubleQuant?: boolean;
  /** Storage dtype of the scales and biases (mlx: 'bf16' default, 'f16', 'f32'). */
  scaleDtype?: ScaleDtype;
  /**
   * The static scale of the layer's input activations, stored beside the weight for runtimes that
   * quantize activations too (nvfp4: ModelOpt's `input_scale`, amax / 2688 from calibration data).
   */
  inputScale?: number;
}

export function parseCalibration(c: CalibrationOption | undefined, spec: FormatSpec): ResolvedOptions['calibration'] {
  let cal: ResolvedOptions['calibration'];
  if (c === undefined) cal = { method: spec.calibrations[0] };
  else if (typeof c === 'string') {
    const parts = c.split(',').map((s) => s.trim());
    const method = parts[0] as CalibrationName;
    cal = { method };
    if (method === 'fixed') {
      if (parts.length !== 3) {
        fail(ErrorCodes.BAD_CALIBRATION, `[quantize] calibration "${c}" must be spelled fixed,<scale>,<max>`, { option: 'calibration', value: c, expected: 'fixed,<scale>,<max>' });
      }
      cal.scale = Number(parts[1]);
      cal.max = Number(parts[2]);
      // MaxText configs also spell a fixed bound as fixed,<min>,<max> (e.g. fixed,-224,224):
      // a non-positive first number is read as that symmetric bound with a unit scale.
      if (cal.scale <= 0 && Number.isFinite(cal.scale) && cal.max > 0) {
        cal.max = Math.max(-cal.scale, cal.max);
        cal.scale = 1;
      }
    } else if (parts.length === 2) {
      const v = Number(parts[1]);
      if (method === 'clip') cal.ratio = v;
      else if (method === 'percentile') cal.percentile = v;
      else if (method === 'hqq' || method === 'mse') cal.iterations = v;
    }
  } else cal = { ...c };
  if (!(cal.method in CALIBRATIONS)) {
    fail(ErrorCodes.BAD_CALIBRATION, `[quantize] unknown calibration "${String(cal.method)}"; valid: ${Object.keys(CALIBRATIONS).join(', ')}`, {
      option: 'calibration', value: cal.method, expected: Object.keys(CALIBRATIONS),
    });
  }
  if (!spec.calibrations.includes(cal.method)) {
    fail(ErrorCodes.BAD_CALIBRATION, `[quantize] format ${spec.name} does not accept calibration "${cal.method}"; it accepts: ${spec.calibrations.join(', ')}`, {
      option: 'calibration', value: cal.method, expected: spec.calibrations,
    });
  }
  const num = (name: string, v: number | undefined, lo: number, hi: number, loOpen: boolean) => {
    if (v === undefined) return;
    if (typeof v !== 'number' || !Number.isFinite(v) || (loOpen ? v <= lo : v < lo) || v > hi) {
      // Only a number is shown: an array or object option could be nested too deep to print.
      const shown = typeof v === 'number' ? v : typeof v;
      fail(ErrorCodes.BAD_CALIBRATION, `[quantize] calibration ${cal.method}: ${name} must be in ${loOpen ? '(' : '['}${lo}, ${hi}] but got ${shown}`, {
        option: `calibration.${name}`, value: shown, expected: `${loOpen ? '(' : '['}${lo}, ${hi}]`,
      });
    }
  };
  if (cal.method === 'clip') { cal.ratio ??= 0.9; num('ratio', cal.ratio, 0, 1, true); }
  if (cal.method === 'percentile') { cal.percentile ??= 99.9; num('percentile', cal.percentile, 0, 100, true); }
  if (cal.method === 'hqq') { cal.iterations ??= 20; num('iterations', cal.iterations, 1, 1000, false); }
  if (cal.method === 'mse') { cal.iterations ??= 20; num('iterations', cal.iterations, 1, 1000, false); }
  if (cal.method === 'fixed') {
    num('scale', cal.scale, 0, Number.MAX_VALUE, true);
    num('max', cal.max, 0, Number.MAX_VALUE, true);
    if (cal.scale === undefined || cal.max === undefined) {
      fail(ErrorCodes.BAD_CALIBRATION, '[quantize] calibration fixed needs scale and max', { option: 'calibration', expected: 'fixed,<scale>,<max>' });
    }
  }
  return cal;
}

export function resolveOptions(spec: FormatSpec, o: FormatOptions): ResolvedOptions {
  const pick = (name: 'bits' | 'groupSize', v: number | undefined, allowed: readonly number[] | undefined, def: number) => {
    // The default is always accepted, so that a QuantizedTensor's resolved options can be passed back.
    if (v === undefined || v === def) return def;
    if (!allowed) {
      fail(ErrorCodes.BAD_OPTION, `[quantize] format ${spec.name} has no option ${name}`, { option: name, value: v });
    }
    if (!allowed.includes(v)) {
      fail(ErrorCodes.BAD_OPTION, `[quantize] ${name} for ${spec.name} must be one of ${allowed.join(', ')} but got ${v}`, { option: name, value: v, expected: allowed });
    }
    return v;
  };
  const bits = pick('bits', o.bits, spec.bits, spec.defaults?.bits ?? 0);
  const groupSize = pick('groupSize', o.groupSize, spec.groupSizes, spec.defaults?.groupSize ?? 0);
  let granularity = spec.defaults?.granularity ?? 'group';
  if (o.granularity !== undefined && o.granularity !== granularity) {
    if (!spec.granularities?.includes(o.granularity)) {
      fail(ErrorCodes.BAD_OPTION, `[quantize] granularity for ${spec.name} must be one of ${(spec.granularities ?? []).join(', ') || '(none)'} but got ${o.granularity}`, {
        option: 'granularity', value: o.granularity, expected: spec.granularities ?? [],
      });
    }
    granularity = o.granularity;
  }
  if (o.doubleQuant && !spec.doubleQuant) {
    fail(ErrorCodes.BAD_OPTION, `[quantize] format ${spec.name} has no double quantization`, { option: 'doubleQuant', value: true });
  }
  const r: ResolvedOptions = { bits, groupSize, granularity, doubleQuant: !!o.doubleQuant, calibration: parseCalibration(o.calibration, spec) };
  if (spec.scaleDtypes) {
    const d = o.scaleDtype ?? spec.scaleDtypes[0];
    if (!spec.scaleDtypes.includes(d)) {
      fail(ErrorCodes.BAD_OPTION, `[quantize] scaleDtype for ${spec.name} must be one of ${spec.scaleDtypes.join(', ')} but got ${String(d)}`, { option: 'scaleDtype', value: d, expected: spec.scaleDtypes });
    }
    r.scaleDtype = d;
  } else if (o.scaleDtype !== undefined) {
    fail(ErrorCodes.BAD_OPTION, `[quantize] format ${spec.name} has no option scaleDtype`, { option: 'scaleDtype', value: o.scaleDtype });
  }
  if (o.inputScale !== undefined) {
    if (!spec.inputScale) {
      fail(ErrorCodes.BAD_OPTION, `[quantize] format ${spec.name} stores no activation scale (inputScale is for nvfp4)`, { option: 'inputScale', value: o.inputScale });
    }
    if (typeof o.inputScale !== 'number' || !Number.isFinite(o.inputScale) || !(o.inputScale > 0)) {
      fail(ErrorCodes.BAD_OPTION, `[quantize] inputScale must be a finite number > 0 but got ${String(o.inputScale)}`, { option: 'inputScale', value: o.inputScale, expected: '> 0' });
    }
    r.inputScale = o.inputScale;
  }
  return r;
}
