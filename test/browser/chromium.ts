// Debian's Chromium for the page tests: launched once per file, with a scratch folder beside it.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
export const MISSING = `${CHROMIUM} is missing: the browser tests need Debian's chromium (apt-get install -y chromium); they are never skipped`;
export const FLAGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];

/** A scratch folder, and Chromium when it is installed (a file's "finds Chromium" test fails otherwise). */
export async function launchChromium(prefix: string): Promise<{ browser: Browser | undefined; tmp: string }> {
  const tmp = mkdtempSync(join(tmpdir(), prefix));
  const browser = existsSync(CHROMIUM) ? await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS }) : undefined;
  return { browser, tmp };
}

export async function closeChromium(browser: Browser | undefined, tmp: string): Promise<void> {
  await browser?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
}
