// Drives Debian's chromium through the web client against a real daemon,
// for cmd/tether/web_test.go, which starts the daemon and answers this
// script's requests: the script writes "NEED <what> [arg]" on stdout and
// reads one line back on stdin. Each step throws on failure (exit 1).
//
// Environment: PAIR_URL (the web pairing link of `tether pair`), PROJECT
// (the session's working directory), SHOTS (where screenshots go),
// TRANSPORT ("websocket", or "fallback": every page's WebSocket fails to
// open, as on an iPhone refusing wss:// to the daemon's certificate, and
// the client must get through over plain HTTPS).
import { chromium } from 'playwright-core';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const { PAIR_URL, PROJECT, SHOTS, TRANSPORT = 'websocket' } = process.env;
const fallback = TRANSPORT === 'fallback';
const T = 20000;
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

// need asks the Go test to do something and waits for its answer.
async function need(what, arg = '') {
  process.stdout.write(`NEED ${what} ${arg}\n`);
  const { value, done } = await lines.next();
  if (done) throw new Error(`no answer to ${what}`);
  return value.trim();
}

function step(name) { process.stdout.write(`STEP ${name}\n`); }

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--ignore-certificate-errors'],
  // launch() gives chromium a fresh temporary --user-data-dir of its own.
});
const phone = { viewport: { width: 375, height: 812 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true, ignoreHTTPSErrors: true };

async function shot(page, name) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`) });
}

async function tab(page, name) {
  await page.getByRole('navigation', { name: 'Screens' }).getByRole('button', { name: new RegExp('^' + name) }).click();
}

async function send(page, text) {
  await page.getByLabel('Message').fill(text);
  await page.getByRole('button', { name: 'Send', exact: true }).click();
}

// newPhone opens a browser context as a phone, whose WebSockets never
// open in fallback mode.
async function newPhone() {
  const ctx = await browser.newContext(phone);
  if (fallback) {
    await ctx.addInitScript(() => {
      window.WebSocket = class {
        constructor() { setTimeout(() => { if (this.onerror) this.onerror(new Event('error')); if (this.onclose) this.onclose({ code: 1006 }); }, 0); }
        send() { throw new Error('not open'); }
        close() {}
      };
    });
  }
  return ctx;
}

// expectInView waits until the element is on screen.
async function expectInView(page, loc) {
  await loc.waitFor({ timeout: T });
  await page.waitForFunction((el) => { const r = el.getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; }, await loc.elementHandle(), { timeout: T });
}

// until waits for the async page function fn to give a truthy value and
// returns it. waitForFunction would take fn's promise itself for a truthy
// value, and the service worker's notifications, which this waits on,
// raise no event a page can await: the page is asked again until they
// are there.
async function until(page, fn, what, arg) {
  const deadline = Date.now() + T;
  for (;;) {
    const v = await page.evaluate(fn, arg);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await page.waitForTimeout(25);
  }
}

// expectTransport checks the transport the page says it uses.
async function expectTransport(page) {
  const want = fallback ? 'HTTPS' : 'WebSocket';
  const title = await page.locator('.dot.online').getAttribute('title');
  if (!title.endsWith(want)) throw new Error(`the page says it is connected over "${title}", want ${want}`);
}

try {
  const ctxA = await newPhone();
  // The tab's visibility and the Notification API are stood in for, so the
  // test can hide the tab and see the notifications the page raises.
  await ctxA.addInitScript(() => {
    window.testHidden = false;
    window.testNotes = [];
    Object.defineProperty(Document.prototype, 'hidden', { get: () => window.testHidden });
    window.Notification = class { constructor(title, opts) { window.testNotes.push({ title, body: opts && opts.body }); } };
    window.Notification.permission = 'granted';
  });
  const a = await ctxA.newPage();
  a.on('pageerror', (e) => { process.stdout.write(`PAGEERROR ${e.message}\n`); });

  step('pair from the URL');
  await a.goto(PAIR_URL);
  await a.locator('.dot.online').waitFor({ timeout: T });
  if (a.url().includes('pair=')) throw new Error(`the code stayed in the address bar: ${a.url()}`);
  if (!(await a.evaluate(() => localStorage.getItem('tether.device_token') || '')).startsWith('tdt_')) throw new Error('no device token stored');
  await expectTransport(a);
  const remembered = await a.evaluate(() => localStorage.getItem('tether.transport'));
  if (fallback !== !!remembered) throw new Error(`the transport remembered: ${remembered}`);

  step('start a session');
  await a.getByLabel('Working directory').fill(PROJECT);
  await a.getByLabel('Approvals').selectOption('ask');
  await shot(a, 'sessions');
  await a.getByRole('button', { name: 'Start session' }).click();
  await a.getByRole('heading', { name: 'Chat' }).waitFor({ state: 'attached', timeout: T });
  await a.locator('.badge.st-idle').first().waitFor({ timeout: T });

  step('chat and see streamed text');
  await send(a, 'hello from the browser');
  await a.locator('.msg.agent', { hasText: 'You said: "hello from the browser"' }).waitFor({ timeout: T });
  await a.locator('.note', { hasText: /^Done in/ }).first().waitFor({ timeout: T });

  step('approve a run: command and see its output');
  await a.evaluate(() => { window.testHidden = true; });
  await send(a, 'run: echo approved-$((6*7))');
  await a.getByRole('button', { name: '1 approvals waiting' }).waitFor({ timeout: T });
  const notes = await a.evaluate(() => { window.testHidden = false; return window.testNotes; });
  if (notes.length !== 1 || notes[0].title !== 'Approval needed: Bash' || !notes[0].body.includes('approved-')) throw new Error(`notifications while hidden: ${JSON.stringify(notes)}`);
  await shot(a, 'chat-approval');
  await tab(a, 'Approvals');
  const card = a.getByRole('article', { name: 'Approval: Bash' });
  await card.waitFor({ timeout: T });
  if (!(await card.textContent()).includes('echo approved-$((6*7))')) throw new Error('the card does not show the command');
  await shot(a, 'approvals');
  await card.getByRole('button', { name: 'Approve', exact: true }).click();
  await tab(a, 'Chat');
  const tool = a.locator('details.tool', { hasText: 'echo approved' });
  await tool.locator('summary', { hasText: '✓' }).waitFor({ timeout: T });
  await tool.locator('summary').click();
  await tool.locator('pre.out', { hasText: 'approved-42' }).waitFor({ timeout: T });
  await a.locator('.note', { hasText: /^Done in/ }).nth(1).waitFor({ timeout: T });
  await shot(a, 'chat');

  step('reject one with a reason');
  await send(a, 'run: touch rejected-file');
  const card2 = a.getByRole('article', { name: 'Approval: Bash' });
  await card2.waitFor({ timeout: T });
  await card2.getByRole('button', { name: 'Reject' }).click();
  await card2.getByLabel('Reason').fill('not today');
  await card2.getByRole('button', { name: 'Send rejection' }).click();
  await a.locator('details.tool.failed', { hasText: 'touch rejected-file' }).waitFor({ timeout: T });
  await a.locator('.note', { hasText: /^Done in/ }).nth(2).waitFor({ timeout: T });

  step('edit the parameters, then approve');
  await send(a, 'run: echo original');
  const card3 = a.getByRole('article', { name: 'Approval: Bash' });
  await card3.getByRole('button', { name: 'Edit' }).click();
  await card3.getByLabel('Parameters (JSON)').fill('{"command": "echo edited-by-phone"}');
  await card3.getByRole('button', { name: 'Approve edited' }).click();
  await a.locator('details.tool', { hasText: 'echo original' }).locator('summary', { hasText: '✓' }).waitFor({ timeout: T });
  await a.locator('details.tool', { hasText: 'echo original' }).locator('summary').click();
  await a.locator('details.tool pre.out', { hasText: 'edited-by-phone' }).waitFor({ timeout: T });
  await a.locator('.note', { hasText: /^Done in/ }).nth(3).waitFor({ timeout: T });

  step('interrupt a turn waiting for approval');
  await send(a, 'run: sleep 30');
  await a.getByRole('article', { name: 'Approval: Bash' }).waitFor({ timeout: T });
  await a.locator('.chat').getByRole('button', { name: 'Interrupt' }).click();
  await a.locator('.note', { hasText: /^Turn ended/ }).waitFor({ timeout: T });
  await a.getByRole('article', { name: 'Approval: Bash' }).waitFor({ state: 'detached', timeout: T });

  if (await a.evaluate(() => window.testNotes.length) !== 1) throw new Error('a notification was raised while the tab was visible');

  step('thinking folded away, what a turn used, a slash command completed');
  await send(a, 'think: colors');
  const thinking = a.locator('details.thinking').last();
  await thinking.waitFor({ timeout: T });
  if (await thinking.evaluate((el) => el.open)) throw new Error('the thinking is shown unfolded');
  await thinking.locator('summary').click();
  await thinking.getByText('Thinking about colors').waitFor({ timeout: T });
  await a.locator('.note', { hasText: /^Done in .* out$/ }).last().waitFor({ timeout: T });
  await a.getByLabel('Message').fill('/he');
  await a.getByRole('list', { name: 'Slash commands' }).getByRole('button', { name: '/help' }).click();
  if (await a.getByLabel('Message').inputValue() !== '/help ') throw new Error('the completion did not fill in the command');
  await a.getByRole('button', { name: 'Send', exact: true }).click();
  await a.locator('.msg.agent', { hasText: 'plan: MARKDOWN' }).waitFor({ timeout: T });
  await a.getByLabel('Message').fill('look at @pk');
  await a.getByRole('list', { name: 'Files' }).getByRole('button', { name: 'pkg/' }).click();
  await a.getByRole('list', { name: 'Files' }).getByRole('button', { name: 'big.go' }).click();
  if (await a.getByLabel('Message').inputValue() !== 'look at @pkg/big.go ') throw new Error(`the file completion gave "${await a.getByLabel('Message').inputValue()}"`);
  await a.getByRole('button', { name: 'Send', exact: true }).click();
  await a.locator('.msg.agent', { hasText: 'You said: "look at @pkg/big.go"' }).waitFor({ timeout: T });

  step("change the agent's model and mode");
  await a.getByRole('button', { name: 'Settings' }).click();
  const settings = a.getByRole('form', { name: 'Session settings' });
  await settings.getByLabel('Permission mode').selectOption('bypassPermissions');
  await settings.getByRole('button', { name: 'Apply' }).click();
  await a.locator('.toast', { hasText: 'does not allow it' }).waitFor({ timeout: T });
  await settings.getByLabel('Model').fill('demo-large');
  await settings.getByLabel('Permission mode').selectOption('plan');
  await settings.getByRole('button', { name: 'Apply' }).click();
  await a.locator('.note', { hasText: /^Settings: demo-large · Plan first \(/ }).waitFor({ timeout: T });
  await settings.waitFor({ state: 'detached', timeout: T });

  step('send a plan back with feedback, then approve the next');
  await send(a, 'plan: # Add a flag\n\n1. Parse it.\n2. Document it.');
  const plan = a.getByRole('article', { name: 'Plan' });
  await plan.locator('.plan-body', { hasText: 'Document it.' }).waitFor({ timeout: T });
  if (await plan.locator('.plan-body').textContent().then((t) => t.includes('# Add'))) throw new Error('the plan is not rendered as Markdown');
  await shot(a, 'chat-plan');
  await plan.getByRole('button', { name: 'Keep planning' }).click();
  await plan.getByLabel('Feedback').fill('test it first');
  await plan.getByRole('button', { name: 'Send feedback' }).click();
  await a.locator('details.tool.failed', { hasText: 'ExitPlanMode' }).waitFor({ timeout: T });
  await send(a, 'plan: # Add a flag\n\n1. Test it.\n2. Parse it.');
  await a.getByRole('article', { name: 'Plan' }).getByRole('button', { name: 'Approve plan' }).click();
  await a.locator('.note', { hasText: 'Settings: demo-large · Ask before edits (by the agent)' }).waitFor({ timeout: T });
  await a.locator('.msg.agent', { hasText: 'The plan is approved' }).waitFor({ timeout: T });
  await send(a, 'plan: # Rename the flag\n\n1. Rename it.');
  await a.getByRole('article', { name: 'Plan' }).getByRole('button', { name: 'Approve, accept edits' }).click();
  await a.locator('.note', { hasText: /^Settings: demo-large · Accept edits \(/ }).waitFor({ timeout: T });

  step("answer the agent's question");
  await send(a, 'ask: Which color? | Red | Blue');
  const question = a.getByRole('article', { name: 'Question' });
  await question.getByLabel('Blue').check();
  await shot(a, 'chat-question');
  await question.getByRole('button', { name: 'Answer' }).click();
  await a.locator('.msg.agent', { hasText: 'You answered "Which color?"="Blue"' }).waitFor({ timeout: T });
  await tab(a, 'Sessions');
  await a.locator('.cards .usage', { hasText: /turns · .* out/ }).waitFor({ timeout: T });
  await tab(a, 'Chat');

  step('the service worker holds the shell');
  const sw = await a.evaluate(() => navigator.serviceWorker.ready.then((r) => !!r.active));
  if (!sw) throw new Error('no active service worker');
  const cached = await a.evaluate(() => caches.open('tether-shell-v1').then((c) => c.keys()).then((k) => k.map((r) => new URL(r.url).pathname)));
  if (!cached.includes('/app.js') || cached.some((p) => p.startsWith('/ws') || p.startsWith('/pair'))) throw new Error(`cached: ${cached}`);

  step('a push reaches the service worker and is withdrawn');
  // Chromium's own subscribe needs Google's push service, which is out of
  // reach here: the push is handed to the worker through the DevTools
  // protocol instead, in the shape the daemon sends (notify.WebPush).
  const origin = new URL(a.url()).origin;
  await ctxA.grantPermissions(['notifications'], { origin });
  const cdp = await ctxA.newCDPSession(a);
  const registration = new Promise((resolve) => cdp.on('ServiceWorker.workerRegistrationUpdated', ({ registrations }) => {
    const r = registrations.find((x) => x.scopeURL.startsWith(origin) && !x.isDeleted);
    if (r) resolve(r.registrationId);
  }));
  await cdp.send('ServiceWorker.enable');
  const registrationId = await registration;
  const push = (data) => cdp.send('ServiceWorker.deliverPushMessage', { origin, registrationId, data: JSON.stringify(data) });
  // The notification tagged a-0123 as the worker shows it, once it does.
  const shown = () => until(a, () => navigator.serviceWorker.ready.then((r) => r.getNotifications({ tag: 'a-0123' }))
    .then(([n]) => n && { title: n.title, body: n.body, tag: n.tag, url: n.data && n.data.url }), 'the notification a-0123');
  const sid = new URLSearchParams(new URL(a.url()).hash.slice(1)).get('session');
  const target = `#approval=toolu_9&session=${sid}`;
  await push({ title: 'Approval needed: Bash', body: 'An agent is waiting for your approval.', tag: 'a-0123', url: `https://elsewhere:7420/${target}` });
  const pushed = await shown();
  if (pushed.title !== 'Approval needed: Bash' || !pushed.url.endsWith(target)) throw new Error(`shown: ${JSON.stringify(pushed)}`);
  // No protocol clicks a notification: the worker is handed the click
  // event a tap would raise, and the page must land on the approval.
  const [worker] = ctxA.serviceWorkers();
  await worker.evaluate(() => self.registration.getNotifications({ tag: 'a-0123' }).then(([n]) => self.dispatchEvent(new NotificationEvent('notificationclick', { notification: n }))));
  await a.waitForURL((u) => u.hash === target, { timeout: T });
  await a.getByRole('heading', { name: 'Approvals' }).waitFor({ timeout: T });
  await push({ title: 'Approval needed: Bash', tag: 'a-0123', url: target });
  await shown();
  // The answer closes the question and leaves one quiet notice, however
  // many are answered: every push must show something.
  // (One push after the other: the worker may handle two at once, and
  // the notice shows whichever it showed last.)
  const shownAre = (want) => navigator.serviceWorker.ready.then((r) => r.getNotifications()).then((ns) => ns.map((n) => `${n.tag} ${n.title}`).join('|') === want);
  await push({ title: 'Approval answered', body: 'Approved.', tag: 'a-0123', url: `#session=${sid}`, close: true });
  await until(a, shownAre, 'the question closed and one quiet notice', 'tether-answered Approval answered');
  await push({ title: 'Approval withdrawn', body: 'Nobody needs to answer it any more.', tag: 'a-4567', url: `#session=${sid}`, close: true });
  await until(a, shownAre, 'still one quiet notice', 'tether-answered Approval withdrawn');
  await cdp.detach();
  await tab(a, 'Chat');

  step('see the diff, then commit');
  await tab(a, 'Git');
  await a.getByRole('button', { name: 'main.go', exact: true }).click();
  const diff = a.getByLabel('Diff of main.go');
  await diff.locator('tr.added', { hasText: 'func main()' }).waitFor({ timeout: T });
  await shot(a, 'git-diff');
  await a.getByLabel('Select main.go').check();
  await a.getByLabel('Commit message').fill('Add main.go from the phone');
  await a.getByRole('button', { name: 'Commit 1 file' }).click();
  await a.getByRole('status').filter({ hasText: 'Add main.go from the phone' }).waitFor({ timeout: T });
  // The fresh status no longer lists the committed file.
  await a.getByRole('button', { name: 'main.go', exact: true }).waitFor({ state: 'detached', timeout: T });
  await need('committed');

  step('stage one hunk, discard another, push to the remote, read the history');
  await need('edited');
  await a.getByRole('button', { name: 'Refresh' }).click();
  await a.getByRole('button', { name: 'main.go', exact: true }).click();
  const hunks = a.getByLabel('Diff of main.go').locator('table.hunk');
  await hunks.nth(1).waitFor({ timeout: T });
  await hunks.nth(1).getByRole('button', { name: 'Stage hunk' }).click();
  await a.getByText('modified, staged').waitFor({ timeout: T });
  await need('hunk-staged');
  a.once('dialog', (d) => d.accept());
  await a.getByLabel('Discard main.go').click();
  await a.getByText(/Discarded; kept 30 days as refs\/tether\/discarded\//).waitFor({ timeout: T });
  await a.getByLabel('Discard main.go').waitFor({ state: 'detached', timeout: T });
  await a.getByLabel('Commit message').fill('The second hunk only');
  await a.getByRole('button', { name: 'Commit staged' }).click();
  await a.getByRole('status').filter({ hasText: 'The second hunk only' }).waitFor({ timeout: T });
  await a.getByRole('button', { name: 'Push to origin' }).click();
  await a.getByText(/Pushed [0-9a-f]{7} to origin\/main/).waitFor({ timeout: T });
  await a.getByRole('button', { name: 'Pull' }).waitFor({ timeout: T });
  await a.getByRole('button', { name: 'History' }).click();
  await a.getByRole('list', { name: 'History' }).getByRole('button', { name: 'The second hunk only' }).click();
  await a.getByLabel('Diff of main.go').locator('tr.added', { hasText: 'second hunk' }).waitFor({ timeout: T });
  await shot(a, 'git-branches');
  await need('pushed');

  step('browse and read a file, paged');
  await tab(a, 'Files');
  await a.getByRole('button', { name: '▸ pkg/' }).click();
  await a.getByRole('button', { name: 'big.go' }).click();
  await a.locator('.viewer .tk-kw').first().waitFor({ timeout: T });
  const count = () => a.locator('.viewer .ln').count();
  if (await count() !== 400) throw new Error(`first page shows ${await count()} lines`);
  await a.getByRole('button', { name: 'Load more lines' }).click();
  await a.locator('.viewer .ln').nth(799).waitFor({ timeout: T });
  await a.getByRole('button', { name: 'Load more lines' }).click();
  await a.locator('.viewer .ln').nth(1099).waitFor({ timeout: T });
  if (await count() !== 1100 || await a.getByRole('button', { name: 'Load more lines' }).count() !== 0) throw new Error(`after paging: ${await count()} lines`);
  await a.getByRole('button', { name: '← pkg' }).click();
  await a.getByRole('button', { name: '..' }).click();
  await a.getByRole('button', { name: 'main.go', exact: true }).click();
  await a.locator('.viewer .tk-kw', { hasText: 'package' }).waitFor({ timeout: T });
  await shot(a, 'files');

  step('kill the daemon, come back, catch up');
  await tab(a, 'Chat');
  await need('stop');
  await a.getByRole('status').filter({ hasText: 'Offline' }).waitFor({ timeout: T });
  await shot(a, 'offline');
  await need('start');
  await a.locator('.dot.online').waitFor({ timeout: 30000 });
  await expectTransport(a);
  await a.locator('.msg.agent', { hasText: 'You said: "sent while the browser was away"' }).waitFor({ timeout: T });
  const said = await a.locator('.msg.agent').allTextContents();
  const dup = said.filter((t) => t.includes('hello from the browser')).length;
  const caught = said.filter((t) => t.includes('sent while the browser was away')).length;
  if (dup !== 1 || caught !== 1) throw new Error(`after reconnecting: ${dup} copies of the first answer, ${caught} of the missed one`);
  await a.emulateMedia({ colorScheme: 'dark' });
  await shot(a, 'chat-dark');
  await a.emulateMedia({ colorScheme: 'light' });

  step('a reloaded page shows the history once');
  // The reader scrolls to the newest, then reloads.
  await a.locator('.end').evaluate((el) => el.scrollIntoView({ block: 'end' }));
  await a.waitForFunction(() => (JSON.parse(sessionStorage.getItem(Object.keys(sessionStorage).find((k) => k.startsWith('tether.place.'))) || 'null') || {}).atBottom === true, null, { timeout: T });
  const t0 = Date.now();
  await a.reload();
  await a.locator('.dot.online').waitFor({ timeout: T });
  // It comes back to the open session's chat by itself.
  await a.locator('.msg.agent', { hasText: 'sent while the browser was away' }).waitFor({ timeout: T });
  process.stdout.write(`MEASURE reload-to-history-ms ${Date.now() - t0}\n`);
  // The newest page is shown, at its end; earlier pages come on demand.
  await expectInView(a, a.locator('.msg.agent', { hasText: 'sent while the browser was away' }));
  const earlier = a.getByRole('button', { name: 'Show earlier messages' });
  for (let pages = 0; await earlier.count() > 0; pages++) {
    if (pages > 20) throw new Error('the history never ends');
    const shown = await a.locator('.log [data-seq]').count();
    const first = a.locator('.log [data-seq]').nth(1);
    await earlier.click();
    const before = await first.evaluate((el) => [el.dataset.seq, el.getBoundingClientRect().top]);
    // The earlier page is shown above what was, and what the reader saw
    // stays where it was.
    await a.waitForFunction((n) => document.querySelectorAll('.log [data-seq]').length > n, shown, { timeout: T });
    const after = await a.locator(`.log [data-seq="${before[0]}"]`).evaluate((el) => el.getBoundingClientRect().top);
    if (Math.abs(after - before[1]) > 2) throw new Error(`loading an earlier page moved the view by ${after - before[1]} px`);
  }
  const again = await a.locator('.msg.agent').allTextContents();
  if (again.filter((t) => t.includes('hello from the browser')).length !== 1) throw new Error('the reloaded history has duplicates');
  // The user's own side of the conversation comes back too, once.
  const mine = await a.locator('.msg.user').allTextContents();
  if (mine.filter((t) => t === 'hello from the browser').length !== 1 || !mine.some((t) => t.endsWith('sent while the browser was away'))) throw new Error(`the reloaded history's user messages: ${JSON.stringify(mine)}`);

  step('a reload comes back to where the user was reading');
  await a.locator('.msg.user', { hasText: 'hello from the browser' }).evaluate((el) => el.scrollIntoView({ block: 'center' }));
  await a.waitForFunction(() => (JSON.parse(sessionStorage.getItem(Object.keys(sessionStorage).find((k) => k.startsWith('tether.place.'))) || 'null') || {}).atBottom === false, null, { timeout: T });
  await a.reload();
  await a.locator('.dot.online').waitFor({ timeout: T });
  await expectInView(a, a.locator('.msg.user', { hasText: 'hello from the browser' }));
  await a.locator('.end').evaluate((el) => el.scrollIntoView({ block: 'end' }));

  step('a long answer streams smoothly');
  await a.evaluate(() => {
    window.longTasks = [];
    new PerformanceObserver((l) => { for (const e of l.getEntries()) window.longTasks.push(e.duration); }).observe({ type: 'longtask' });
  });
  const words = Array.from({ length: 1000 }, (_, i) => `word${i}`).join(' ');
  const t1 = Date.now();
  await send(a, words);
  await a.locator('.msg.agent[aria-busy="false"]', { hasText: 'word999' }).waitFor({ timeout: 60000 });
  const longTasks = await a.evaluate(() => window.longTasks);
  process.stdout.write(`MEASURE stream-${words.length}-chars-ms ${Date.now() - t1} longtasks ${longTasks.length} max-longtask-ms ${Math.round(Math.max(0, ...longTasks))}\n`);

  step('end and resume the session');
  await tab(a, 'Sessions');
  await a.getByRole('button', { name: 'End', exact: true }).click();
  await a.locator('.badge.st-closed').waitFor({ timeout: T });
  await a.getByRole('button', { name: 'Resume' }).click();
  await a.locator('.cards .badge.st-idle').waitFor({ timeout: T });
  await a.getByRole('button', { name: 'project' }).click();
  await send(a, 'after resuming');
  await a.locator('.msg.agent', { hasText: 'after resuming' }).waitFor({ timeout: T });

  step('send a picture');
  // A 2400×1600 PNG, as a phone's photo picker hands over a photo: the
  // client scales it down before it sends it.
  const photo = Buffer.from(await a.evaluate(() => {
    const c = document.createElement('canvas');
    c.width = 2400;
    c.height = 1600;
    const g = c.getContext('2d');
    const grad = g.createLinearGradient(0, 0, 2400, 1600);
    grad.addColorStop(0, '#1d4ed8');
    grad.addColorStop(1, '#f59e0b');
    g.fillStyle = grad;
    g.fillRect(0, 0, 2400, 1600);
    return c.toDataURL('image/png').split(',')[1];
  }), 'base64');
  await a.locator('.composer input[type=file]').setInputFiles({ name: 'screenshot.png', mimeType: 'image/png', buffer: photo });
  await a.getByRole('list', { name: 'Images to send' }).getByText('screenshot.png').waitFor({ timeout: T });
  await send(a, 'what is in this picture?');
  await a.locator('.msg.user img[alt="screenshot.png"]').waitFor({ timeout: T });
  await a.locator('.msg.agent', { hasText: 'Image 1: image/jpeg' }).waitFor({ timeout: T });
  const size = await a.locator('.msg.user img[alt="screenshot.png"]').evaluate((img) => [img.naturalWidth, img.naturalHeight]);
  if (size[0] !== 1568 || size[1] !== 1045) throw new Error(`the photo was sent at ${size}, want 1568×1045`);
  if (await a.getByRole('list', { name: 'Images to send' }).count() !== 0) throw new Error('the sent image is still waiting to be sent');
  await shot(a, 'chat-image');

  step('rename this device, revoke it from a second browser');
  await tab(a, 'More');
  await a.getByLabel("This device's name").fill('Phone A');
  await a.getByRole('button', { name: 'Rename' }).click();
  await a.getByText('Renamed.').waitFor({ timeout: T });
  const ctxB = await newPhone();
  const b = await ctxB.newPage();
  b.on('dialog', (d) => d.accept());
  await b.goto(await need('pair'));
  await b.locator('.dot.online').waitFor({ timeout: T });
  await expectTransport(b);

  step('two devices in one conversation');
  await tab(a, 'Chat');
  await tab(b, 'Sessions');
  await b.getByRole('button', { name: 'project' }).click();
  // B opens the session at its newest page, A's picture and question in it.
  await b.locator('.msg.user', { hasText: 'what is in this picture?' }).waitFor({ timeout: T });
  // Labelled with the sending device's name at the time (A was renamed since).
  await b.locator('.msg.user', { hasText: 'what is in this picture?' }).locator('.from', { hasText: 'Chrome on' }).waitFor({ timeout: T });
  await send(b, 'hello from B');
  await a.locator('.msg.user', { hasText: 'hello from B' }).waitFor({ timeout: T });
  await a.locator('.msg.agent', { hasText: 'You said: "hello from B"' }).waitFor({ timeout: T });
  await send(a, 'and back from A');
  await b.locator('.msg.agent', { hasText: 'You said: "and back from A"' }).waitFor({ timeout: T });
  // Signed with A's name as it is now.
  await b.locator('.msg.user', { hasText: 'and back from A' }).locator('.from', { hasText: 'Phone A' }).waitFor({ timeout: T });
  for (const [page, text] of [[a, 'hello from B'], [b, 'and back from A']]) {
    if (await page.locator('.msg.user', { hasText: text }).count() !== 1) throw new Error(`"${text}" is not shown once`);
  }
  // A reload of B comes back to the same chat with both sides in it.
  await b.reload();
  await b.locator('.dot.online').waitFor({ timeout: T });
  await b.locator('.msg.user', { hasText: 'and back from A' }).waitFor({ timeout: T });
  await b.locator('.msg.agent', { hasText: 'You said: "hello from B"' }).waitFor({ timeout: T });
  await shot(b, 'chat-two-devices');
  await tab(b, 'More');
  const revoke = b.getByRole('button', { name: 'Revoke Phone A' });
  await revoke.waitFor({ timeout: T });
  await shot(b, 'devices');
  await revoke.click();
  await a.getByRole('alert').filter({ hasText: 'revoked' }).waitFor({ timeout: 5000 });
  await a.getByText('This browser is not paired').waitFor({ timeout: T });
  if (await a.evaluate(() => localStorage.getItem('tether.device_token'))) throw new Error('the revoked token is still stored');
  await b.locator('.badge.st-closed', { hasText: 'revoked' }).waitFor({ timeout: T });
  await shot(a, 'revoked');

  step("a terminal session's turn and what it used");
  const termID = await need('terminal-turn');
  await tab(b, 'Sessions');
  const termCard = b.locator('.cards .card', { hasText: termID });
  // Claude Code's two messages: 19087 + 19175 tokens in, 21 + 3 out.
  await termCard.locator('.usage', { hasText: '1 turn · 38.3k in · 24 out' }).waitFor({ timeout: T });
  await termCard.getByRole('button', { name: termID }).click();
  await b.locator('.note', { hasText: /^Done · 38\.3k in · 24 out$/ }).waitFor({ timeout: T });
  await shot(b, 'terminal-usage');
  step('done');
} catch (e) {
  process.stdout.write(`FAIL ${e.stack || e}\n`);
  for (const [i, ctx] of browser.contexts().entries()) {
    for (const [j, p] of ctx.pages().entries()) await p.screenshot({ path: join(SHOTS, `failure-${i}-${j}.png`) }).catch(() => {});
  }
  process.exitCode = 1;
} finally {
  await browser.close();
  // stdin's reader would keep node alive.
  process.exit();
}
