// One error hierarchy for the whole library. Every error carries a stable `code`, the offending
// value and what was expected, and survives a worker boundary through toJSON/fromJSON.

export const ErrorCodes = {
  // options and input values
  UNKNOWN_FORMAT: 'E_UNKNOWN_FORMAT',
  BAD_OPTION: 'E_BAD_OPTION',
  ROW_LENGTH: 'E_ROW_LENGTH',
  NON_FINITE: 'E_NON_FINITE',
  BAD_CALIBRATION: 'E_BAD_CALIBRATION',
  IMPORTANCE_LENGTH: 'E_IMPORTANCE_LENGTH',
  BAD_INPUT: 'E_BAD_INPUT',
  BAD_BACKEND: 'E_BAD_BACKEND',
  // runtime
  WASM_LOAD: 'E_WASM_LOAD',
  ABORTED: 'E_ABORTED',
  WORKER: 'E_WORKER',
  // files (safetensors, GGUF, sources, plans)
  IO: 'E_IO',
  ST_HEADER_TOO_SMALL: 'E_ST_HEADER_TOO_SMALL',
  ST_HEADER_TOO_LARGE: 'E_ST_HEADER_TOO_LARGE',
  ST_HEADER_PAST_END: 'E_ST_HEADER_PAST_END',
  ST_NOT_UTF8: 'E_ST_NOT_UTF8',
  ST_NOT_JSON: 'E_ST_NOT_JSON',
  ST_DUPLICATE: 'E_ST_DUPLICATE',
  ST_BAD_NAME: 'E_ST_BAD_NAME',
  ST_BAD_DTYPE: 'E_ST_BAD_DTYPE',
  ST_SHAPE_OVERFLOW: 'E_ST_SHAPE_OVERFLOW',
  ST_BAD_SPAN: 'E_ST_BAD_SPAN',
  ST_BAD_OFFSETS: 'E_ST_BAD_OFFSETS',
  ST_TRAILING: 'E_ST_TRAILING',
  ST_BAD_ENTRY: 'E_ST_BAD_ENTRY',
  ST_INDEX: 'E_ST_INDEX',
  GGUF_MAGIC: 'E_GGUF_MAGIC',
  GGUF_VERSION: 'E_GGUF_VERSION',
  GGUF_COUNT: 'E_GGUF_COUNT',
  GGUF_STRING: 'E_GGUF_STRING',
  GGUF_VALUE_TYPE: 'E_GGUF_VALUE_TYPE',
  GGUF_ALIGNMENT: 'E_GGUF_ALIGNMENT',
  GGUF_TENSOR: 'E_GGUF_TENSOR',
  GGUF_OFFSET: 'E_GGUF_OFFSET',
  GGUF_TRUNCATED: 'E_GGUF_TRUNCATED',
  GGUF_DUPLICATE: 'E_GGUF_DUPLICATE',
  UNSUPPORTED_DTYPE: 'E_UNSUPPORTED_DTYPE',
  PLAN: 'E_PLAN',
  UNKNOWN_PRESET: 'E_UNKNOWN_PRESET',
  MODEL: 'E_MODEL',
  // checkpoint I/O (src/io)
  TENSOR_NOT_FOUND: 'E_TENSOR_NOT_FOUND',
  HTTP_RANGE: 'E_HTTP_RANGE',
  ST_DATA_PAST_END: 'E_ST_DATA_PAST_END',
  ST_SCALE: 'E_ST_SCALE',
  GGUF_UTF8: 'E_GGUF_UTF8',
  GGUF_TYPE: 'E_GGUF_TYPE',
  GGUF_BLOCK: 'E_GGUF_BLOCK',
  GGUF_OVERLAP: 'E_GGUF_OVERLAP',
  GGUF_SPLIT: 'E_GGUF_SPLIT',
  CONFIG: 'E_CONFIG',
  // tokenizer files converted to GGUF (src/convert)
  TOKENIZER: 'E_TOKENIZER',
  WRITER: 'E_WRITER',
  // streaming pipeline (src/pipeline)
  WORKER_CRASHED: 'E_WORKER_CRASHED',
  CACHE: 'E_CACHE',
  // quantization plans (src/plan)
  BUDGET: 'E_BUDGET',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

export interface ErrorDetails {
  /** The file, tensor or option concerned. */
  file?: string;
  tensor?: string;
  option?: string;
  /** The offending value, printable. */
  value?: unknown;
  /** What was expected, or the list of valid choices. */
  expected?: unknown;
  index?: number;
}

export class WebquantError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetails;

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}) {
    super(message);
    this.name = 'WebquantError';
    this.code = code;
    this.details = details;
  }

  toJSON(): SerializedError {
    return { __webquantError: true, code: this.code, message: this.message, details: plain(this.details), stack: this.stack };
  }

  static fromJSON(s: SerializedError): WebquantError {
    const e = new WebquantError(s.code, s.message, s.details);
    if (s.stack) e.stack = s.stack;
    return e;
  }
}

export interface SerializedError {
  __webquantError: true;
  code: ErrorCode;
  message: string;
  details: ErrorDetails;
  stack?: string;
}

export function isSerializedError(v: unknown): v is SerializedError {
  return typeof v === 'object' && v !== null && (v as SerializedError).__webquantError === true;
}

/** Shorthand used across the library: `fail(code, '[quantize] ...', {...})`. */
export function fail(code: ErrorCode, message: string, details: ErrorDetails = {}): never {
  throw new WebquantError(code, message, details);
}

function plain(d: ErrorDetails): ErrorDetails {
  // Keep details structured-clone safe (bigint and functions do not cross postMessage).
  return JSON.parse(JSON.stringify(d, (_k, v) => (typeof v === 'bigint' ? v.toString() : v)));
}
