// Cloudflare Workers (and wrangler / workerd) turn an imported .wasm file into a compiled module.
declare module '*.wasm' {
  const module: WebAssembly.Module;
  export default module;
}
