// Drives Debian's chromium through the web client against a daemon that
// offers the codex agent (the real Codex CLI against a mock of its API),
// for cmd/tether/codex_test.go: the agent is offered, a codex session
// starts without Claude Code's permission mode, its answer streams in, and
// its settings offer the model alone. Writes "STEP …" lines; throws on
// failure (exit 1).
//
// Environment: PAIR_URL (the web pairing link of `tether pair`), PROJECT
// (the session's working directory), SHOTS (where screenshots go).
import { T, step, launch, pairedPhone } from './phone.mjs';
import { join } from 'node:path';

const { PAIR_URL, PROJECT, SHOTS } = process.env;

const browser = await launch();
try {
  step('pair from the URL');
  const a = await pairedPhone(browser, PAIR_URL);

  step('codex is offered; it has no permission mode');
  const agents = await a.getByRole('combobox', { name: /^Agent/ }).locator('option').allTextContents();
  if (!agents.includes('codex')) throw new Error(`agents offered: ${agents}`);
  if (!(await a.getByLabel('Permission mode').isVisible())) throw new Error('no permission mode for the demo agent');
  await a.getByRole('combobox', { name: /^Agent/ }).selectOption('codex');
  await a.getByLabel('Permission mode').waitFor({ state: 'detached', timeout: T });
  await a.getByLabel('Working directory').fill(PROJECT);
  await a.getByLabel('Approvals').selectOption('ask');
  await a.screenshot({ path: join(SHOTS, 'codex-new-session.png') });

  step('start a codex session and chat');
  await a.getByRole('button', { name: 'Start session' }).click();
  await a.getByRole('heading', { name: 'Chat' }).waitFor({ state: 'attached', timeout: T });
  await a.locator('.badge.st-idle').first().waitFor({ timeout: T });
  await a.getByLabel('Message').fill('say hello');
  await a.getByRole('button', { name: 'Send', exact: true }).click();
  await a.locator('.msg.agent[aria-busy="false"]', { hasText: 'Hello from Codex in the browser.' }).waitFor({ timeout: T });
  await a.screenshot({ path: join(SHOTS, 'codex-chat.png') });

  step("the session's settings offer the model alone");
  await a.getByRole('button', { name: 'Settings' }).click();
  const form = a.getByRole('form', { name: 'Session settings' });
  await form.getByLabel(/^Model/).waitFor({ timeout: T });
  if (await form.getByLabel('Permission mode').count() || await form.getByLabel(/Thinking budget/).count()) {
    throw new Error('a codex session offers Claude Code settings');
  }
  step('done');
} finally {
  await browser.close();
}
