// Every architecture's GGUF naming and keys, and the registry that picks one (see registry.ts).
export * from './check.js';
export * from './deepseek.js';
export * from './gemma.js';
export * from './layernorm.js';
export * from './llama.js';
export * from './phi3.js';
export * from './qwen.js';
export * from './registry.js';
