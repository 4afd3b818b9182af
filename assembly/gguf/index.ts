// GGUF block types (bit-exact with llama.cpp's ggml_quantize_chunk, spec: shared/spec).
export * from './q8_0';
export * from './q4_0';
