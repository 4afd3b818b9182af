// A hand-written ONNX model with one com.microsoft MatMulNBits node (4-bit, symmetric: no zero
// points, so ORT uses zero point 8), for bench/matvec.ts. Protobuf wire format written directly:
// varints, length-delimited fields; field numbers from onnx.proto (ModelProto, GraphProto,
// NodeProto, AttributeProto, TensorProto, ValueInfoProto, TypeProto).

class Pb {
  private parts: number[] = [];
  private bufs: Uint8Array[] = [];
  varint(v: number): this {
    let n = BigInt(v);
    do {
      let b = Number(n & 0x7fn);
      n >>= 7n;
      if (n > 0n) b |= 0x80;
      this.parts.push(b);
    } while (n > 0n);
    return this;
  }
  private flush(): void {
    if (this.parts.length) { this.bufs.push(Uint8Array.from(this.parts)); this.parts = []; }
  }
  int(field: number, v: number): this {
    return this.varint(field << 3).varint(v);
  }
  bytes(field: number, b: Uint8Array): this {
    this.varint((field << 3) | 2).varint(b.byteLength);
    this.flush();
    this.bufs.push(b);
    return this;
  }
  str(field: number, s: string): this {
    return this.bytes(field, new TextEncoder().encode(s));
  }
  msg(field: number, m: Pb): this {
    return this.bytes(field, m.done());
  }
  done(): Uint8Array {
    this.flush();
    const n = this.bufs.reduce((a, b) => a + b.byteLength, 0);
    const out = new Uint8Array(n);
    let at = 0;
    for (const b of this.bufs) { out.set(b, at); at += b.byteLength; }
    return out;
  }
}

const FLOAT = 1;
const UINT8 = 2;

function tensor(name: string, dims: number[], type: number, raw: Uint8Array): Pb {
  const t = new Pb();
  for (const d of dims) t.int(1, d);
  return t.int(2, type).str(8, name).bytes(9, raw);
}

function valueInfo(name: string, type: number, dims: number[]): Pb {
  const shape = new Pb();
  for (const d of dims) shape.msg(1, new Pb().int(1, d));
  return new Pb().str(1, name).msg(2, new Pb().msg(1, new Pb().int(1, type).msg(2, shape)));
}

const intAttr = (name: string, v: number) => new Pb().str(1, name).int(3, v).int(20, 2);

/**
 * Y[M, N] = A[M, K] x W^T with W given as 4-bit codes q (0..15, value (q - 8) * scale) packed two per
 * byte (element 2j low nibble) in rows of K/2 bytes, and f32 scales [N, K/blockSize].
 */
export function matMulNBitsModel(M: number, K: number, N: number, blockSize: number, packed: Uint8Array, scales: Float32Array, accuracyLevel: number): Uint8Array {
  const kBlocks = K / blockSize;
  const node = new Pb().str(1, 'A').str(1, 'B').str(1, 'scales').str(2, 'Y').str(3, 'mm').str(4, 'MatMulNBits')
    .msg(5, intAttr('K', K)).msg(5, intAttr('N', N)).msg(5, intAttr('bits', 4)).msg(5, intAttr('block_size', blockSize))
    .msg(5, intAttr('accuracy_level', accuracyLevel))
    .str(7, 'com.microsoft');
  const graph = new Pb().msg(1, node).str(2, 'g')
    .msg(5, tensor('B', [N, kBlocks, blockSize / 2], UINT8, packed))
    .msg(5, tensor('scales', [N * kBlocks], FLOAT, new Uint8Array(scales.buffer, scales.byteOffset, scales.byteLength)))
    .msg(11, valueInfo('A', FLOAT, [M, K]))
    .msg(12, valueInfo('Y', FLOAT, [M, N]));
  return new Pb().int(1, 8)
    .msg(8, new Pb().str(1, '').int(2, 17))
    .msg(8, new Pb().str(1, 'com.microsoft').int(2, 1))
    .str(2, 'webquant-bench')
    .msg(7, graph)
    .done();
}

/** Y[M, N] = A[M, K] x B[K, N] with B an f32 initializer: ORT's plain f32 MatMul, for reference. */
export function matMulF32Model(M: number, K: number, N: number, b: Float32Array): Uint8Array {
  const node = new Pb().str(1, 'A').str(1, 'B').str(2, 'Y').str(3, 'mm').str(4, 'MatMul');
  const graph = new Pb().msg(1, node).str(2, 'g')
    .msg(5, tensor('B', [K, N], FLOAT, new Uint8Array(b.buffer, b.byteOffset, b.byteLength)))
    .msg(11, valueInfo('A', FLOAT, [M, K]))
    .msg(12, valueInfo('Y', FLOAT, [M, N]));
  return new Pb().int(1, 8).msg(8, new Pb().str(1, '').int(2, 17)).str(2, 'webquant-bench').msg(7, graph).done();
}
