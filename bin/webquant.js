#!/usr/bin/env node
// The webquant command (built sources: run `npm run build` first).
import { main } from '../dist/cli/main.js';

// `webquant inspect ... | head`: a closed pipe ends the output, not with a stack trace.
process.stdout.on('error', (e) => { if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0); throw e; });

const ac = new AbortController();
// Ctrl-C, and what `timeout`, service managers and a closed terminal send: each cancels the run
// (its partial output removed, exit 128 + the signal's number); a second signal exits at once.
const SIGNALS = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 };
let interrupted;
for (const [name, code] of Object.entries(SIGNALS)) {
  process.on(name, () => {
    if (interrupted) process.exit(code);
    interrupted = code;
    ac.abort(new Error(`interrupted (${name})`));
  });
}
const code = await main(process.argv.slice(2), {
  stdout: process.stdout, stderr: process.stderr, cwd: process.cwd(), env: process.env, signal: ac.signal,
});
process.exitCode = code === 130 && interrupted ? interrupted : code;
