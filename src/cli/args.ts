// Command-line parsing for the webquant CLI: `--name value`, `--name=value`, `-o value`, boolean
// flags, positionals. Unknown options are refused with the list of valid ones.
import { ErrorCodes, fail } from '../errors.js';

export interface OptionSpec {
  /** 'list': a string option that may be given more than once (its values in order). */
  type: 'string' | 'int' | 'boolean' | 'list';
  short?: string;
  /** Shown in help: the value's name. */
  value?: string;
  help: string;
}

export type OptionSpecs = Record<string, OptionSpec>;

export interface Parsed {
  positionals: string[];
  options: Record<string, string | number | boolean | string[] | undefined>;
  /** The values of 'list' options in command-line order, across options (e.g. --tensor-type and --tensor-type-file). */
  sequence: { name: string; value: string }[];
}

export function optionList(specs: OptionSpecs): string {
  return Object.entries(specs).map(([k, s]) => (s.short ? `-${s.short}/--${k}` : `--${k}`)).join(', ');
}

export function parseArgs(command: string, argv: readonly string[], specs: OptionSpecs): Parsed {
  const positionals: string[] = [];
  const options: Parsed['options'] = {};
  const sequence: Parsed['sequence'] = [];
  const byShort = new Map(Object.entries(specs).filter(([, s]) => s.short).map(([k, s]) => [s.short!, k]));
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') { positionals.push(...argv.slice(i + 1)); break; }
    if (!a.startsWith('-') || a === '-') { positionals.push(a); continue; }
    let name: string | undefined;
    let inline: string | undefined;
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      name = eq >= 0 ? a.slice(2, eq) : a.slice(2);
      if (eq >= 0) inline = a.slice(eq + 1);
    } else {
      name = byShort.get(a.slice(1, 2));
      if (name && a.length > 2) inline = a.slice(2);
    }
    const spec = name !== undefined ? specs[name] : undefined;
    if (!spec || name === undefined) {
      fail(ErrorCodes.BAD_OPTION, `[cli] ${command}: unknown option ${a}; valid options: ${optionList(specs)}`, { option: a, expected: Object.keys(specs).map((k) => `--${k}`) });
    }
    if (spec.type === 'boolean') {
      if (inline !== undefined) fail(ErrorCodes.BAD_OPTION, `[cli] ${command}: --${name} takes no value`, { option: name, value: inline });
      options[name] = true;
      continue;
    }
    let v = inline;
    if (v === undefined) {
      if (i + 1 >= argv.length) fail(ErrorCodes.BAD_OPTION, `[cli] ${command}: --${name} needs a value (${spec.value ?? spec.type})`, { option: name });
      v = argv[++i];
    }
    if (spec.type === 'int') {
      const n = Number(v);
      if (!/^\s*\d+\s*$/.test(v) || !Number.isSafeInteger(n) || n < 1) {
        fail(ErrorCodes.BAD_OPTION, `[cli] ${command}: --${name} must be a positive integer but is "${v}"`, { option: name, value: v, expected: 'a positive integer' });
      }
      options[name] = n;
    } else if (spec.type === 'list') {
      options[name] = [...((options[name] as string[] | undefined) ?? []), v];
      sequence.push({ name, value: v });
    } else options[name] = v;
  }
  return { positionals, options, sequence };
}

export function helpText(usage: string, specs: OptionSpecs): string {
  const rows = Object.entries(specs).map(([k, s]) => {
    const flag = `${s.short ? `-${s.short}, ` : '    '}--${k}${s.type === 'boolean' ? '' : ` <${s.value ?? s.type}>`}`;
    return `  ${flag.padEnd(30)} ${s.help}`;
  });
  return `${usage}\n\nOptions:\n${rows.join('\n')}\n`;
}
