// Makes errors keep their class across the worker boundary. comlink's own 'throw' handler turns
// every error into a plain Error (name, message, stack); ours sends a WebquantError as its toJSON()
// and rebuilds it with fromJSON() on the other side, so `code` and `details` survive. Both sides
// (pool and worker) import this module, which registers the handler once per comlink instance.
import * as Comlink from 'comlink';
import { WebquantError, isSerializedError, type SerializedError } from '../errors.js';

type Thrown = { value: unknown };
interface WireThrow { webquant?: SerializedError; plain?: unknown }

const builtin = Comlink.transferHandlers.get('throw') as Comlink.TransferHandler<Thrown, unknown>;

if (!(builtin as { __webquant?: true }).__webquant) {
  const handler: Comlink.TransferHandler<Thrown, WireThrow> & { __webquant: true } = {
    __webquant: true,
    // comlink marks thrown values with a private symbol; its own predicate is the only way to see it.
    canHandle: (v: unknown): v is Thrown => builtin.canHandle(v),
    serialize(t) {
      if (t.value instanceof WebquantError) return [{ webquant: t.value.toJSON() }, []];
      const [plain, transferables] = builtin.serialize(t);
      return [{ plain }, transferables];
    },
    deserialize(w) {
      if (w.webquant && isSerializedError(w.webquant)) throw WebquantError.fromJSON(w.webquant);
      return builtin.deserialize(w.plain);
    },
  };
  Comlink.transferHandlers.set('throw', handler as Comlink.TransferHandler<unknown, unknown>);
}

export { Comlink };
