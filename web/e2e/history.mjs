// Drives Debian's chromium through the web client's Past screen (the
// session history) against
// a daemon whose machine has a conversation the real Claude Code CLI had
// outside tether (-p, against a mock of the Messages API), for
// cmd/tether/history_test.go: the conversation is listed and found by a
// search, its read view shows its turns, and "Continue here" resumes it as
// a session whose model remembers it. Writes "STEP …" lines; throws on
// failure (exit 1).
//
// Environment: PAIR_URL (the web pairing link of `tether pair`), PROJECT
// (the conversation's working directory), SHOTS (where screenshots go).
import { T, step, launch, pairedPhone } from './phone.mjs';
import { join } from 'node:path';

const { PAIR_URL, PROJECT, SHOTS } = process.env;

const browser = await launch();
try {
  step('pair from the URL');
  const a = await pairedPhone(browser, PAIR_URL);

  step('the Past screen lists the conversation with its project');
  await a.getByRole('navigation', { name: 'Screens' }).getByRole('button', { name: /^Past/ }).click();
  const list = a.getByRole('list', { name: 'Past sessions' });
  const card = list.getByRole('listitem').filter({ hasText: 'remember the word pineapple' });
  await card.waitFor({ timeout: T });
  if (!(await card.textContent()).includes(PROJECT)) throw new Error(`the card names no project: ${await card.textContent()}`);
  const projects = await a.getByRole('combobox', { name: 'Project' }).locator('option').allTextContents();
  if (!projects.some((p) => p.startsWith(PROJECT))) throw new Error(`projects offered: ${projects}`);
  await a.screenshot({ path: join(SHOTS, 'history-list.png') });

  step('a search finds it, and only what matches');
  await a.getByLabel('Search prompts and titles').fill('PINEAPPLE');
  await a.getByRole('button', { name: 'Search', exact: true }).click();
  await list.getByRole('listitem').first().waitFor({ timeout: T });
  await a.waitForFunction(() => document.querySelectorAll('[aria-label="Past sessions"] li').length === 1, null, { timeout: T });
  await a.getByLabel('Search prompts and titles').fill('no such conversation');
  await a.getByRole('button', { name: 'Search', exact: true }).click();
  await a.getByText('No sessions match.').waitFor({ timeout: T });
  await a.getByLabel('Search prompts and titles').fill('');
  await a.getByRole('button', { name: 'Search', exact: true }).click();

  step('the read view shows its turns');
  await card.getByRole('button', { name: 'remember the word pineapple' }).click();
  const log = a.getByRole('log', { name: 'Conversation' });
  await log.locator('.msg.user', { hasText: 'remember the word pineapple' }).waitFor({ timeout: T });
  await log.locator('.msg.agent', { hasText: 'Noted.' }).waitFor({ timeout: T });
  await a.screenshot({ path: join(SHOTS, 'history-read.png') });

  step('continue here: a session whose model remembers the conversation');
  await a.getByRole('button', { name: 'Continue here' }).click();
  await a.getByRole('heading', { name: 'Chat' }).waitFor({ state: 'attached', timeout: T });
  await a.locator('.badge.st-idle').first().waitFor({ timeout: T });
  await a.getByLabel('Message').fill('what was the word?');
  await a.getByRole('button', { name: 'Send', exact: true }).click();
  await a.locator('.msg.agent[aria-busy="false"]', { hasText: 'The word was pineapple.' }).waitFor({ timeout: T });
  // The chat shows the earlier conversation above, as read.
  const texts = await a.locator('.log .msg').allTextContents();
  const first = texts.findIndex((t) => t.includes('remember the word pineapple'));
  const asked = texts.findIndex((t) => t.includes('what was the word?'));
  if (first < 0 || asked < 0 || first > asked) throw new Error(`the chat shows ${JSON.stringify(texts)}`);
  await a.screenshot({ path: join(SHOTS, 'history-continued.png') });

  step('the history shows it live, with a way to its chat');
  await a.getByRole('navigation', { name: 'Screens' }).getByRole('button', { name: /^Past/ }).click();
  await card.locator('.badge', { hasText: 'live' }).waitFor({ timeout: T });
  step('done');
} finally {
  await browser.close();
}
