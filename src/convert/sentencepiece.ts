// SentencePiece's tokenizer.model: a protobuf ModelProto (sentencepiece_model.proto). Only the
// part GGUF needs is read: `repeated SentencePiece pieces = 1`, each with `string piece = 1`,
// `float score = 2` and `Type type = 3` (NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4,
// UNUSED 5, BYTE 6; default NORMAL). Every other field (trainer and normalizer specs...) is
// passed over by wire type, so the reader needs no schema beyond these three fields.
import { ErrorCodes, fail } from '../errors.js';

export interface SentencePiece {
  piece: string;
  score: number;
  type: number;
}

// Protobuf wire types.
const VARINT = 0, I64 = 1, LEN = 2, I32 = 5;

class Reader {
  pos: number;
  constructor(readonly b: Uint8Array, readonly file: string, start: number, readonly end: number, readonly what: string) {
    this.pos = start;
  }

  bad(msg: string, expected?: unknown): never {
    return fail(ErrorCodes.TOKENIZER, `[tokenizer] ${this.file}: ${msg} at byte ${this.pos} (${this.what}); expected a SentencePiece ModelProto`, {
      file: this.file, value: this.pos, expected,
    });
  }

  /** Varints up to 2^53 (lengths and enum values); longer ones are refused. */
  varint(): number {
    let v = 0, mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) this.bad('truncated varint');
      const c = this.b[this.pos++];
      v += (c & 0x7f) * mul;
      if (c < 0x80) {
        if (!Number.isSafeInteger(v)) this.bad('varint too large', 'at most 2^53');
        return v;
      }
      mul *= 128;
    }
    return this.bad('varint longer than 10 bytes');
  }

  /** [start, end) of a length-delimited field. */
  span(): [number, number] {
    const n = this.varint();
    if (n > this.end - this.pos) this.bad(`a ${n}-byte field runs past the end of its message`, `at most ${this.end - this.pos} bytes`);
    const s = this.pos;
    this.pos += n;
    return [s, s + n];
  }

  /**
   * Moves past a field this reader has no use for (ModelProto's trainer_spec and normalizer_spec,
   * fields added by later SentencePiece versions): protobuf readers must accept unknown fields.
   */
  passField(wire: number): void {
    if (wire === VARINT) this.varint();
    else if (wire === LEN) this.span();
    else if (wire === I64 || wire === I32) {
      const n = wire === I64 ? 8 : 4;
      if (this.end - this.pos < n) this.bad('truncated fixed-width field');
      this.pos += n;
    } else this.bad(`unsupported wire type ${wire}`, [VARINT, I64, LEN, I32]);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function readPiece(b: Uint8Array, file: string, start: number, end: number, index: number): SentencePiece {
  const r = new Reader(b, file, start, end, `piece #${index}`);
  let piece: string | undefined;
  let score = 0;
  let type = 1;
  while (r.pos < end) {
    const key = r.varint();
    const field = Math.floor(key / 8), wire = key % 8;
    if (field === 1) {
      if (wire !== LEN) r.bad(`piece text has wire type ${wire}`, LEN);
      const [s, e] = r.span();
      try {
        piece = utf8.decode(b.subarray(s, e));
      } catch {
        r.bad('piece text is not UTF-8');
      }
    } else if (field === 2) {
      if (wire !== I32) r.bad(`score has wire type ${wire}`, I32);
      if (end - r.pos < 4) r.bad('truncated score');
      score = new DataView(b.buffer, b.byteOffset + r.pos, 4).getFloat32(0, true);
      r.pos += 4;
    } else if (field === 3) {
      if (wire !== VARINT) r.bad(`piece type has wire type ${wire}`, VARINT);
      type = r.varint();
      if (type < 1 || type > 6) r.bad(`piece type ${type} is not a SentencePiece type`, '1..6');
    } else r.passField(wire);
  }
  if (piece === undefined) r.bad('a piece has no text', 'field 1 (piece)');
  return { piece: piece!, score, type };
}

/** The pieces of a tokenizer.model, in id order. */
export function readSentencePieceModel(bytes: Uint8Array, file = 'tokenizer.model'): SentencePiece[] {
  const r = new Reader(bytes, file, 0, bytes.length, 'ModelProto');
  const pieces: SentencePiece[] = [];
  while (r.pos < bytes.length) {
    const key = r.varint();
    const field = Math.floor(key / 8), wire = key % 8;
    if (field === 0) r.bad('field number 0');
    if (field === 1) {
      if (wire !== LEN) r.bad(`pieces have wire type ${wire}`, LEN);
      const [s, e] = r.span();
      pieces.push(readPiece(bytes, file, s, e, pieces.length));
    } else r.passField(wire);
  }
  if (!pieces.length) r.bad('no pieces', 'at least one piece (field 1)');
  return pieces;
}
