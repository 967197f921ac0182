// Drives Debian's chromium through the web client's Runs screen against a
// daemon with the demo agent, for cmd/tether/runs_test.go: a run started
// from the browser goes through a whole review loop (the demo agents act
// on the "send:" lines of their messages) and its conversation and counts
// show; a second run waits until the user steps in with a message of their
// own, which finishes it; a third is stopped. Writes "STEP …" lines;
// throws on failure (exit 1).
//
// Environment: PAIR_URL (the web pairing link of `tether pair`), PROJECT
// (the working directory), SHOTS (where screenshots go).
import { T, step, launch, pairedPhone } from './phone.mjs';
import { join } from 'node:path';

const { PAIR_URL, PROJECT, SHOTS } = process.env;

const loop = 'send: reviewer result/DONE Round 1: the form is validated. ' +
  'send: implementer review/FAIL Round 1: the e-mail field is not checked. ' +
  'send: reviewer result/DONE Round 2: the e-mail field is checked. ' +
  'send: implementer review/PASS Round 2: good';

const browser = await launch();
try {
  const a = await pairedPhone(browser, PAIR_URL);

  const startRun = async (task) => {
    await a.getByRole('navigation', { name: 'Screens' }).getByRole('button', { name: 'Runs' }).click();
    const back = a.getByRole('button', { name: '← Runs' });
    if (await back.isVisible()) await back.click();
    const form = a.getByRole('form', { name: 'New run' });
    await form.getByLabel('Task').fill(task);
    await form.getByLabel('Working directory').fill(PROJECT);
    await form.getByLabel('Approvals').selectOption('auto_approve');
    await form.getByRole('button', { name: 'Start run' }).click();
    await a.getByRole('log', { name: 'Run messages' }).waitFor({ timeout: T });
  };
  const log = a.getByRole('log', { name: 'Run messages' });

  step('a run started from the browser goes through the review loop');
  await startRun(loop);
  await a.locator('.badge.st-passed').waitFor({ timeout: T });
  await log.locator('.run-msg').nth(4).waitFor({ timeout: T });
  const msgs = await log.locator('.run-msg').allTextContents();
  const want = [['user', 'implementer', 'task'], ['implementer', 'reviewer', 'result', 'DONE'], ['reviewer', 'implementer', 'review', 'FAIL'],
    ['implementer', 'reviewer', 'result', 'DONE'], ['reviewer', 'implementer', 'review', 'PASS']];
  if (msgs.length !== want.length) throw new Error(`${msgs.length} messages: ${msgs.join(' | ')}`);
  want.forEach((w, i) => {
    if (!msgs[i].startsWith(`${w[0]} → ${w[1]} · ${w[2]}`) || (w[3] && !msgs[i].includes(w[3]))) throw new Error(`message ${i + 1}: ${msgs[i]}`);
  });
  const counts = await a.getByLabel('Counts').textContent();
  if (counts !== '5 messages · DONE · 1 PASS · 1 FAIL') throw new Error(`counts: ${counts}`);
  await log.locator('.run-msg').nth(2).scrollIntoViewIfNeeded();
  await a.screenshot({ path: join(SHOTS, 'runs-loop.png') });

  step('the user steps in: their message is the implementer\'s next turn');
  await startRun('Wait for my go.');
  await log.locator('.run-msg').first().waitFor({ timeout: T });
  const form = a.getByRole('form', { name: 'Message to the run' });
  await form.getByLabel('To').selectOption('implementer');
  await form.getByLabel('Message').fill('Go: send: reviewer result/DONE Round 1: done as you said. send: implementer review/PASS Round 1: fine');
  await form.getByRole('button', { name: 'Send' }).click();
  await a.locator('.badge.st-passed').waitFor({ timeout: T });
  const second = await log.locator('.run-msg').allTextContents();
  if (second.length !== 4 || !second[1].startsWith('user → implementer · chat') || !second[3].includes('PASS')) throw new Error(`second run: ${second.join(' | ')}`);

  step('a run is stopped');
  await startRun('Wait, and I will stop you.');
  await log.locator('.run-msg').first().waitFor({ timeout: T });
  a.once('dialog', (d) => d.accept());
  await a.getByRole('button', { name: 'Stop run' }).click();
  await a.locator('.badge.st-stopped').waitFor({ timeout: T });
  await a.getByRole('button', { name: '← Runs' }).click();
  const list = a.getByRole('list', { name: 'Runs' }).getByRole('listitem');
  await list.nth(2).waitFor({ timeout: T });
  const cards = await list.allTextContents();
  if (cards.length !== 3 || !cards[0].includes('stopped') || !cards[1].includes('passed') || !cards[2].includes('passed')) throw new Error(`runs: ${cards.join(' | ')}`);
  await a.screenshot({ path: join(SHOTS, 'runs-list.png'), fullPage: true });
  step('done');
} finally {
  await browser.close();
}
