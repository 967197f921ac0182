// What the browser scenarios share: Debian's chromium started headless,
// and a phone-sized page paired with the daemon through the web pairing
// link. A scenario writes "STEP …" lines (step) and "PAGEERROR …" for an
// error in the page, which fails its Go test.
import { chromium } from 'playwright-core';

// T is how long a scenario waits for anything, in milliseconds.
export const T = 20000;

export function step(name) { process.stdout.write(`STEP ${name}\n`); }

export function launch() {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--ignore-certificate-errors'],
  });
}

// pairedPhone opens a page the size of a phone, pairs it through
// pairURL and returns it once it is online.
export async function pairedPhone(browser, pairURL) {
  const ctx = await browser.newContext({ viewport: { width: 375, height: 812 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true, ignoreHTTPSErrors: true });
  const page = await ctx.newPage();
  page.on('pageerror', (e) => { process.stdout.write(`PAGEERROR ${e.message}\n`); });
  await page.goto(pairURL);
  await page.locator('.dot.online').waitFor({ timeout: T });
  return page;
}
