#!/usr/bin/env node
// The webquant command (built sources: run `npm run build` first).
import { main } from '../dist/cli/main.js';

// `webquant inspect ... | head`: a closed pipe ends the output, not with a stack trace.
process.stdout.on('error', (e) => { if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0); throw e; });

const ac = new AbortController();
let interrupted = false;
process.on('SIGINT', () => {
  // The first Ctrl-C cancels the run (partial output removed); a second one exits at once.
  if (interrupted) process.exit(130);
  interrupted = true;
  ac.abort(new Error('interrupted'));
});
process.exitCode = await main(process.argv.slice(2), {
  stdout: process.stdout, stderr: process.stderr, cwd: process.cwd(), env: process.env, signal: ac.signal,
});
