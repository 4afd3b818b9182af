// Checkpoint I/O: byte sources, safetensors and GGUF readers and streaming writers.
// Node-only helpers (fromPath, writeFileAtomic) live in ./node.js and are not exported here.
export type { Checkpoint, CheckpointFormat, TensorInfo, TensorValues } from './checkpoint.js';
export { fromBuffer, fromBlob, fromUrl, type ByteSource, type UrlSourceOptions } from './source.js';
export { openSafetensors, openSafetensorsIndex, readSafetensorsHeader, ST_MAX_HEADER, type SafetensorsOptions, type SafetensorsHeader, type ShardResolver } from './safetensors.js';
export { openGguf, readGgufHeader, ggufSplitName, GGUF_VALUE_TYPES, GGUF_MAX_HEADER, type GgufCheckpoint, type GgufHeader, type GgufKV, type GgufTensorInfo, type GgufOptions, type GgufScalarType, type GgufValueTypeName } from './gguf.js';
export { GGML_TYPES, ggmlType, type GgmlType } from './ggml-types.js';
export { GgufWriter, writeGguf, type GgufWriteKV, type GgufWriteTensor, type GgufWriteSpec, type GgufPlannedTensor } from './gguf-writer.js';
export { SafetensorsWriter, writeSafetensors, type SafetensorsWriteSpec, type SafetensorsWriteTensor } from './safetensors-writer.js';
export { collect, toReadableStream, type StreamingWriter, type TensorData } from './stream.js';
export { readConfig, type ModelConfig } from './config.js';
export { openCheckpoint } from './open.js';
