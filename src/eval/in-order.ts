// Results of token spans (imatrix chunks, eval windows) that arrive in any order, handed on in
// span order: sums added in that order have the bits of one thread's run, whatever finished first
// (src/cli/forward-workers.ts on worker_threads, the demo's evaluation on Web Workers).

/** Returns `put(index, result)`; `deliver` sees each result once all before it have come. */
export function inOrder<T>(deliver: (index: number, result: T) => void): (index: number, result: T) => void {
  const held = new Map<number, T>();
  let next = 0;
  return (index, result) => {
    held.set(index, result);
    for (let r = held.get(next); r !== undefined; r = held.get(next)) {
      held.delete(next);
      deliver(next++, r);
    }
  };
}
