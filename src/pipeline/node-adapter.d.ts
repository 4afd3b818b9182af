// comlink ships node-adapter.mjs with a .d.ts that TypeScript does not pair with an .mjs file.
declare module 'comlink/dist/esm/node-adapter.mjs' {
  import type { Endpoint } from 'comlink';
  import type { MessagePort, Worker } from 'node:worker_threads';
  export default function nodeEndpoint(nep: MessagePort | Worker): Endpoint;
}
