// tether's web client: one page, one WebSocket, the phone protocol of
// PROTOCOL.md. State lives in S; every change calls update(), which renders
// once per animation frame, so a fast stream costs one render a frame.
import { html, render, useState, useEffect, useLayoutEffect, useRef } from './vendor/preact-htm.js';
import { Connection, pairingCode, deviceName, storedToken, newID } from './conn.js';
import { markdown, highlightLine } from './text.js';

const S = {
  conn: 'connecting', // connecting | online | offline | unpaired
  retryAt: 0,
  unpairedReason: '',
  ack: null, // connection_ack payload
  health: null, // health_status payload
  acknowledged: false,
  screen: 'sessions',
  current: '', // the open session's id
  sessions: new Map(), // id -> session
  approvals: new Map(), // tool_call_id -> approval_required payload
  devices: null,
  toast: '',
  // The History screen (history_* messages): the list as asked for, and
  // the session open in its read view.
  hist: { query: '', project: '', projects: [], sessions: [], next: '', loading: false, indexing: false, open: null },
  // The Runs screen (run_* messages): the runs by id, each run's messages
  // by seq once it was opened, and the run open.
  runs: { list: new Map(), msgs: new Map(), loaded: false, open: 0 },
};

let scheduled = false;
function update() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => { scheduled = false; render(html`<${App} />`, document.getElementById('app')); });
}

function toast(msg) {
  S.toast = msg;
  update();
  clearTimeout(toast.t);
  toast.t = setTimeout(() => { S.toast = ''; update(); }, 4000);
}

function session(id) {
  let s = S.sessions.get(id);
  if (!s) {
    s = { session_id: id, agent: '', title: id, status: 'starting', working_directory: '', items: [], streams: new Map(), tools: new Map(), rev: 0,
      thinking: new Map(), log: [], loaded: false, hasMore: false, loading: false,
      model: '', permission_mode: '', max_thinking_tokens: 0, usage: null, info: null };
    S.sessions.set(id, s);
  }
  return s;
}

function push(s, item) { s.items.push(item); s.rev++; }

// The conversation is the session's logged events (s.log, in seq order):
// the newest page is loaded when the session is opened, earlier pages on
// demand (session_history), and live events append. A page that comes in
// before what is shown rebuilds the items from the log.
function record(s, f) {
  const n = s.log.length;
  if (n && s.log[n - 1].seq >= f.seq) {
    if (s.log.some((e) => e.seq === f.seq)) return false;
    s.log.push(f);
    s.log.sort((a, b) => a.seq - b.seq);
    rebuild(s);
    return false;
  }
  s.log.push(f);
  return true;
}

function rebuild(s) {
  s.items = [];
  s.streams = new Map();
  s.tools = new Map();
  s.thinking = new Map();
  // A session continued from the history shows what was read of the
  // earlier conversation first (s.prior: its frames, without seq).
  if (s.prior) {
    for (const f of s.prior) itemize(s, f);
    push(s, { kind: 'note', text: 'Continued here: the conversation above was read from its transcript.' });
  }
  for (const f of s.log) itemize(s, f);
  s.rev++;
}

async function loadHistory(s, older) {
  if (s.loading || (older && !s.hasMore) || S.conn !== 'online') return;
  s.loading = true;
  try {
    const q = { session_id: s.session_id, limit: HISTORY_PAGE };
    if (older && s.log.length) q.before_seq = s.log[0].seq;
    const p = await conn.request('session_history', q);
    const have = new Set(s.log.map((e) => e.seq));
    for (const raw of p.events || []) if (!have.has(raw.seq)) s.log.push(raw);
    s.log.sort((a, b) => a.seq - b.seq);
    s.hasMore = !!p.has_more;
    s.loaded = true;
    rebuild(s);
  } catch (e) {
    if (e.code !== 'OFFLINE') toast(e.message);
  } finally {
    s.loading = false;
    update();
  }
}

const HISTORY_PAGE = 100;

// akey names a pending approval: a tool_call_id is the agent's choice and
// names a question only within its session.
function akey(p) { return `${p.session_id}\n${p.tool_call_id}`; }

// notifyHidden tells a page in the background of an approval, unless the
// browser is subscribed to Web Push: the daemon's push tells it then, and
// one notification is enough.
function notifyHidden(title, body) {
  if (!document.hidden || !('Notification' in window) || Notification.permission !== 'granted') return;
  pushRegistration().then((reg) => reg && reg.pushManager.getSubscription()).catch(() => null).then((sub) => {
    if (sub) return;
    try { new Notification(title, { body, tag: 'tether-approval' }); } catch { /* some platforms allow notifications only from a service worker */ }
  });
}

// Usage figures, short: 12.3k tokens, $0.0081.
function tokens(n) { return n >= 1000 ? `${(n / 1000).toFixed(1)}k` : `${n || 0}`; }
function dollars(c) { return `$${c < 0.01 ? c.toFixed(4) : c.toFixed(2)}`; }

// usageText says what a turn used: its tokens (cache reads and writes
// apart) and its cost, when the agent reports one.
function usageText(p) {
  const u = p.usage || {};
  const parts = [];
  if (u.input_tokens || u.output_tokens) parts.push(`${tokens(u.input_tokens)} in`, `${tokens(u.output_tokens)} out`);
  const cached = (u.cache_read_input_tokens || 0) + (u.cache_creation_input_tokens || 0);
  if (cached) parts.push(`${tokens(cached)} cached`);
  if (p.turn_cost_usd > 0) parts.push(dollars(p.turn_cost_usd));
  return parts.join(' · ');
}

// sessionUsage says what a whole session used.
function sessionUsage(u) {
  if (!u || !u.turns) return '';
  const parts = [`${u.turns} turn${u.turns === 1 ? '' : 's'}`, `${tokens(u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens)} in`, `${tokens(u.output_tokens)} out`];
  if (u.cost_usd > 0) parts.push(dollars(u.cost_usd));
  return parts.join(' · ');
}

const MODES = { default: 'Ask before edits', acceptEdits: 'Accept edits', plan: 'Plan first', bypassPermissions: 'Bypass permissions' };
// modelOnly are the agents whose only setting is the model: Codex has no
// permission modes nor thinking budget (it refuses them).
const modelOnly = (agent) => agent === 'codex';

function settingsText(p) {
  return [p.model || 'default model', MODES[p.permission_mode || 'default'] || p.permission_mode, p.max_thinking_tokens ? `thinking ${tokens(p.max_thinking_tokens)}` : ''].filter(Boolean).join(' · ');
}

// itemize turns one of a session's events into what the chat shows.
function itemize(s, f) {
  const p = f.payload || {};
  const it0 = { seq: f.seq };
  switch (f.type) {
    case 'session_ready':
      Object.assign(s, { agent: p.agent, title: p.title || s.title, status: p.status, working_directory: p.working_directory, branch: p.branch, sandbox: p.sandbox, warnings: p.warnings || [],
        model: p.model || '', permission_mode: p.permission_mode || '', max_thinking_tokens: p.max_thinking_tokens || 0 });
      s.rev++;
      break;
    case 'session_status':
      s.status = p.status;
      if (p.mode) {
        if (s.mode && s.mode !== p.mode) push(s, { ...it0, kind: 'note', text: p.mode === 'remote' ? 'Continued from the phone: the terminal shows it.' : 'Back in the terminal.' });
        s.mode = p.mode;
      }
      s.rev++;
      break;
    case 'session_end':
      s.status = p.reason === 'error' ? 'error' : 'closed';
      push(s, { ...it0, kind: 'note', text: p.reason === 'error' ? `Session ended with an error: ${p.error || ''}` : 'Session ended.' });
      break;
    case 'user_message': {
      // The sender shows its own message once: the event confirms it.
      const mine = p.message_id && s.items.find((it) => it.kind === 'user' && it.mid === p.message_id);
      if (mine) { mine.sending = false; mine.seq = f.seq; s.rev++; break; }
      const me = S.ack && S.ack.device_id;
      push(s, { ...it0, kind: 'user', text: p.content || '', images: p.attachments || [], mid: p.message_id, from: p.device_id && p.device_id !== me ? p.device_name || 'another device' : '' });
      break;
    }
    case 'stream_start': {
      const it = { ...it0, kind: 'assistant', text: '', done: false };
      s.streams.set(p.message_id, it);
      push(s, it);
      break;
    }
    case 'stream_chunk': {
      if (p.is_tool_use) break;
      let it = s.streams.get(p.message_id);
      if (!it) { it = { ...it0, kind: 'assistant', text: '', done: false }; s.streams.set(p.message_id, it); push(s, it); }
      it.text += p.content || '';
      s.rev++;
      break;
    }
    case 'thinking_chunk': {
      let it = s.thinking.get(p.message_id);
      if (!it) { it = { ...it0, kind: 'thinking', text: '' }; s.thinking.set(p.message_id, it); push(s, it); }
      it.text += p.content || '';
      s.rev++;
      break;
    }
    case 'session_settings':
      Object.assign(s, { model: p.model || '', permission_mode: p.permission_mode || '', max_thinking_tokens: p.max_thinking_tokens || 0 });
      push(s, { ...it0, kind: 'note', text: `Settings: ${settingsText(p)}${p.changed_by ? ` (${p.changed_by === 'agent' ? 'by the agent' : p.changed_by})` : ''}` });
      break;
    case 'agent_info': s.info = p; s.rev++; break;
    case 'stream_end': {
      const it = s.streams.get(p.message_id);
      if (it) { it.done = true; s.streams.delete(p.message_id); s.rev++; }
      break;
    }
    case 'tool_call': {
      const it = { ...it0, kind: 'tool', id: p.tool_call_id, tool: p.tool, params: p.params, description: p.description, result: null };
      s.tools.set(p.tool_call_id, it);
      push(s, it);
      break;
    }
    case 'tool_result': {
      let it = s.tools.get(p.tool_call_id);
      if (!it) { it = { ...it0, kind: 'tool', id: p.tool_call_id, tool: p.tool, params: {}, result: null }; s.tools.set(p.tool_call_id, it); push(s, it); }
      it.result = p.result || {};
      s.rev++;
      break;
    }
    case 'turn_complete': {
      if (p.session_usage) s.usage = p.session_usage;
      const used = usageText(p);
      // A terminal session's turn has no duration (its hooks do not say).
      const done = p.duration_ms > 0 ? `Done in ${(p.duration_ms / 1000).toFixed(1)} s` : 'Done';
      push(s, { ...it0, kind: 'turn', text: (p.is_error ? `Turn ended: ${p.subtype}` : done) + (used ? ` · ${used}` : '') });
      break;
    }
    case 'error':
      push(s, { ...it0, kind: 'note', error: true, text: p.message || p.code });
      break;
  }
}

// onFrame applies one frame from the daemon to S: a session's logged
// events go to its log and its chat, the rest change the state they name.
// The Git screen's listeners of git_progress events.
const gitProgress = new Set();
function onGitProgress(f) { gitProgress.add(f); return () => gitProgress.delete(f); }

function onFrame(f) {
  const p = f.payload || {};
  const s = p.session_id ? session(p.session_id) : null;
  switch (f.type) {
    case 'health_status': S.health = p; break;
    case 'acknowledgment_accepted': S.acknowledged = true; conn.send('health_check', health()); break;
    case 'session_end':
      for (const [k, a] of S.approvals) if (a.session_id === s.session_id) S.approvals.delete(k);
      break;
    case 'tool_result': S.approvals.delete(akey(p)); break;
    case 'git_progress': for (const f of gitProgress) f(p); break;
    case 'approval_required':
      S.approvals.set(akey(p), p);
      notifyHidden(p.kind === 'plan' ? 'A plan to review' : p.kind === 'question' ? 'The agent asks you' : `Approval needed: ${p.tool}`, p.description || '');
      break;
    case 'approval_cancelled':
    case 'approval_resolved':
      S.approvals.delete(akey(p));
      break;
    case 'error':
      if (!s && !f.answered) toast(p.message || p.code);
      break;
    case 'device_list_response': S.devices = p.devices; break;
    case 'run_update': S.runs.list.set(p.run.run_id, p.run); break;
    case 'run_message': runMessage(p); break;
    case 'connection_error': S.unpairedReason = p.message || ''; break;
  }
  if (s && (typeof f.seq !== 'number' || record(s, f))) itemize(s, f);
  update();
}

function health() {
  return { timestamp: new Date().toISOString(), client_nonce: newID('n-'), client_capabilities: ['health_v1', 'acknowledgment_v1'] };
}

function onState(state, p) {
  S.conn = state;
  if (state === 'online') {
    S.ack = p;
    S.acknowledged = false;
    for (const a of p.active_sessions || []) Object.assign(session(a.session_id), a);
    conn.send('health_check', health());
    if ('Notification' in window && Notification.permission === 'granted') subscribePush('granted', true);
  } else if (state === 'offline') {
    S.retryAt = p.retryAt;
  } else if (state === 'unpaired' && p.message) {
    S.unpairedReason = p.message;
  }
  update();
}

const conn = new Connection({ onFrame, onState, code: pairingCode(), name: deviceName() });
route();

async function req(type, payload, until) {
  try {
    return await conn.request(type, payload, until);
  } catch (e) {
    toast(e.code === 'OFFLINE' ? 'Offline: try again once reconnected.' : e.message);
    throw e;
  }
}

// runMessage keeps a run's message, and the run's counts that came with
// it: those with the most messages, as events may come out of seq order.
function runMessage(p) {
  const m = p.message;
  const msgs = S.runs.msgs.get(m.run_id);
  if (msgs) msgs.set(p.seq, m);
  const r = S.runs.list.get(m.run_id);
  if (r && p.counts && p.counts.total_messages > r.counts.total_messages) r.counts = p.counts;
}

// ---- Components ----

function Badge({ status }) {
  return html`<span class=${'badge st-' + status}>${status}</span>`;
}

function ConnBanner() {
  const [, tick] = useState(0);
  useEffect(() => { const t = setInterval(() => tick((n) => n + 1), 1000); return () => clearInterval(t); }, []);
  if (S.conn === 'online') {
    const h = S.health;
    if (h && h.requires_acknowledgment && !S.acknowledged) {
      return html`<div class="banner warn" role="alert">
        <p><strong>Public connection.</strong> ${(h.warning_details || {}).DIRECT_PUBLIC_CONNECTION || 'This connection crosses the public internet.'}</p>
        <button class="btn" onClick=${() => conn.send('acknowledge_warning', { warning_code: 'DIRECT_PUBLIC_CONNECTION', acknowledged: true, acknowledged_at: new Date().toISOString() })}>I understand, continue</button>
      </div>`;
    }
    return null;
  }
  if (S.conn === 'unpaired') return null;
  const secs = Math.max(0, Math.ceil((S.retryAt - Date.now()) / 1000));
  return html`<div class="banner off" role="status" aria-live="polite">
    ${S.conn === 'connecting' ? 'Connecting…' : html`Offline. Reconnecting in ${secs} s. <button class="link" onClick=${() => conn.retryNow()}>Retry now</button>`}
  </div>`;
}

function TopBar() {
  const n = S.approvals.size;
  const cur = S.current && S.sessions.get(S.current);
  return html`<header class="top">
    <h1>${S.screen === 'chat' && cur ? cur.title : 'tether'}</h1>
    <span class=${'dot ' + S.conn} title=${S.conn + (S.conn === 'online' ? ' · ' + conn.transport() : '')} aria-label=${'Connection: ' + S.conn + (S.conn === 'online' ? ' over ' + conn.transport() : '')}></span>
    ${n > 0 && html`<button class="pill" onClick=${() => go('approvals')} aria-label=${n + ' approvals waiting'}>${n} waiting</button>`}
  </header>`;
}

// go shows a screen. The open session and screen stay in the address bar's
// fragment (#session=ID&screen=chat), so that a reload, a bookmark or a
// notification's link comes back to them.
function go(screen) {
  S.screen = screen;
  const q = new URLSearchParams();
  if (S.current) q.set('session', S.current);
  if (screen !== 'sessions') q.set('screen', screen);
  const frag = q.toString();
  history.replaceState(null, '', location.pathname + location.search + (frag ? '#' + frag : ''));
  update();
}

// route opens what the fragment names: #session=ID with &screen=…, or
// &approval=ID from a notification, which opens the approvals.
function route() {
  const q = new URLSearchParams(location.hash.slice(1));
  if (q.has('pair')) return;
  const screens = ['sessions', 'history', 'runs', 'chat', 'approvals', 'git', 'files', 'more', 'devices'];
  S.current = q.get('session') || '';
  const screen = q.has('approval') ? 'approvals' : q.get('screen');
  go(screens.includes(screen) ? screen : S.current ? 'chat' : 'sessions');
}
window.addEventListener('hashchange', route);

function Nav() {
  const tabs = [['sessions', 'Sessions'], ['history', 'Past'], ['runs', 'Runs'], ['chat', 'Chat'], ['approvals', 'Approvals'], ['git', 'Git'], ['files', 'Files'], ['more', 'More']];
  return html`<nav class="tabs" aria-label="Screens">
    ${tabs.map(([k, label]) => html`<button aria-current=${S.screen === k || (k === 'more' && (S.screen === 'devices')) ? 'page' : undefined}
      onClick=${() => go(k)}>${label}${k === 'approvals' && S.approvals.size > 0 ? html` <span class="count">${S.approvals.size}</span>` : ''}</button>`)}
  </nav>`;
}

function Sessions() {
  const agents = (S.ack && S.ack.supported_agents) || [];
  const [agent, setAgent] = useState('');
  const [dir, setDir] = useState(localStorage.getItem('tether.last_dir') || '');
  const [policy, setPolicy] = useState('ask');
  const [model, setModel] = useState('');
  const [mode, setMode] = useState('default');
  const [busy, setBusy] = useState(false);
  const start = async (e) => {
    e.preventDefault();
    const id = crypto.randomUUID ? crypto.randomUUID() : newID('s-');
    setBusy(true);
    try {
      localStorage.setItem('tether.last_dir', dir);
      const s = session(id);
      s.working_directory = dir;
      const p = { agent: agent || agents[0], session_id: id, working_directory: dir, resume: false, policy, permission_mode: modelOnly(agent || agents[0]) ? '' : mode };
      if (model.trim()) p.model = model.trim();
      await req('session_start', p);
      S.current = id;
      go('chat');
    } catch { S.sessions.delete(id); } finally { setBusy(false); }
  };
  const list = [...S.sessions.values()].reverse();
  const open = (s) => { S.current = s.session_id; go('chat'); };
  return html`<section aria-labelledby="h-sessions">
    <h2 id="h-sessions">Sessions</h2>
    ${list.length === 0 && html`<p class="muted">No sessions yet. Start one below.</p>`}
    <ul class="cards">
      ${list.map((s) => html`<li class="card" key=${s.session_id}>
        <div class="row"><button class="link title" onClick=${() => open(s)}>${s.title}</button><${Badge} status=${s.status} /></div>
        <div class="muted small">${s.agent} · ${s.working_directory}${s.mode ? ` · terminal, ${s.mode === 'remote' ? 'driven from the phone' : 'in the terminal'}` : ''}</div>
        ${(s.model || s.permission_mode) && html`<div class="muted small">${settingsText(s)}</div>`}
        ${sessionUsage(s.usage) && html`<div class="muted small usage">${sessionUsage(s.usage)}</div>`}
        <div class="row gap">
          ${s.status === 'busy' && html`<button class="btn" onClick=${() => conn.send('interrupt', { session_id: s.session_id })}>Interrupt</button>`}
          ${s.mode ? s.mode === 'remote' && html`<button class="btn" onClick=${() => conn.send('terminal_handback', { session_id: s.session_id })}>Hand back</button>`
            : s.status === 'closed' || s.status === 'error'
            ? html`<button class="btn" onClick=${() => { s.status = 'starting'; update(); req('session_start', { session_id: s.session_id, resume: true, agent: s.agent, working_directory: s.working_directory }).catch(() => {}); }}>Resume</button>`
            : html`<button class="btn ghost" onClick=${() => conn.send('session_end', { session_id: s.session_id, reason: 'user_request' })}>End</button>`}
        </div>
      </li>`)}
    </ul>
    <form class="card" onSubmit=${start}>
      <h3>New session</h3>
      <label>Agent
        <select value=${agent || agents[0]} onChange=${(e) => setAgent(e.target.value)}>${agents.map((a) => html`<option value=${a}>${a}</option>`)}</select>
      </label>
      <label>Working directory
        <input required value=${dir} onInput=${(e) => setDir(e.target.value)} placeholder="/home/you/project" autocapitalize="off" spellcheck="false" list="dirs" />
      </label>
      <datalist id="dirs">${[...new Set(list.map((s) => s.working_directory).filter(Boolean))].map((d) => html`<option value=${d} />`)}</datalist>
      <label>Model <span class="muted small">(empty: the agent's default)</span>
        <input value=${model} onInput=${(e) => setModel(e.target.value)} placeholder=${modelOnly(agent || agents[0]) ? 'gpt-5.5 …' : 'sonnet, opus …'} autocapitalize="off" spellcheck="false" list="models" />
      </label>
      <${ModelList} />
      ${!modelOnly(agent || agents[0]) && html`<label>Permission mode
        <select value=${mode} onChange=${(e) => setMode(e.target.value)}>${Object.entries(MODES).map(([v, l]) => html`<option value=${v}>${l}</option>`)}</select>
      </label>`}
      <label>Approvals
        <select value=${policy} onChange=${(e) => setPolicy(e.target.value)}>
          <option value="ask">Ask me for everything</option>
          <option value="auto_low">Approve low risk, ask the rest</option>
          <option value="auto_approve">Approve everything</option>
          <option value="auto_deny">Deny everything</option>
        </select>
      </label>
      <button class="btn primary" disabled=${busy || S.conn !== 'online'}>Start session</button>
    </form>
  </section>`;
}

// ModelList offers the models the agents said they offer (agent_info).
function ModelList() {
  const seen = new Map();
  for (const s of S.sessions.values()) for (const m of (s.info && s.info.models) || []) seen.set(m.value, m);
  return html`<datalist id="models">${[...seen.values()].map((m) => html`<option value=${m.value}>${m.display_name || m.value}</option>`)}</datalist>`;
}

// SessionSettings changes the open session's model, permission mode and
// thinking budget while it runs (session_configure).
function SessionSettings({ s, close }) {
  const [model, setModel] = useState(s.model || '');
  const [mode, setMode] = useState(s.permission_mode || 'default');
  const [budget, setBudget] = useState(s.max_thinking_tokens ? String(s.max_thinking_tokens) : '');
  const [busy, setBusy] = useState(false);
  const apply = async (e) => {
    e.preventDefault();
    setBusy(true);
    try {
      const p = await req('session_configure', modelOnly(s.agent) ? { session_id: s.session_id, model: model.trim() }
        : { session_id: s.session_id, model: model.trim(), permission_mode: mode, max_thinking_tokens: budget ? parseInt(budget, 10) : 0 });
      Object.assign(s, { model: p.model, permission_mode: p.permission_mode, max_thinking_tokens: p.max_thinking_tokens });
      close();
    } catch { /* req said why */ } finally { setBusy(false); update(); }
  };
  return html`<form class="card settings" onSubmit=${apply} aria-label="Session settings">
    <label>Model <span class="muted small">(empty: the agent's default)</span>
      <input value=${model} onInput=${(e) => setModel(e.target.value)} list="models" autocapitalize="off" spellcheck="false" placeholder=${(s.info && s.info.model) || 'default'} />
    </label>
    <${ModelList} />
    ${!modelOnly(s.agent) && html`<label>Permission mode
      <select value=${mode} onChange=${(e) => setMode(e.target.value)}>${Object.entries(MODES).map(([v, l]) => html`<option value=${v}>${l}</option>`)}</select>
    </label>
    <label>Thinking budget, tokens <span class="muted small">(empty: the default)</span>
      <input type="number" inputmode="numeric" min="1024" max="128000" step="1024" value=${budget} onInput=${(e) => setBudget(e.target.value)} />
    </label>`}
    <div class="row gap"><button class="btn primary" disabled=${busy}>Apply</button><button type="button" class="btn ghost" onClick=${close}>Cancel</button></div>
  </form>`;
}

// Suggestions completes a slash command the user types: "/re" offers
// the agent's commands whose names start so.
function Suggestions({ s, text, pick }) {
  const m = /^\/(\S*)$/.exec(text);
  const all = (s.info && s.info.slash_commands) || [];
  if (!m || all.length === 0) return null;
  const found = all.filter((c) => c.name.startsWith(m[1])).slice(0, 8);
  if (found.length === 0) return null;
  return html`<ul class="suggest" aria-label="Slash commands">${found.map((c) => html`<li key=${c.name}>
    <button type="button" class="link" onClick=${() => pick(`/${c.name} `)}><span class="mono">/${c.name}</span>${c.argument_hint && html` <span class="muted small">${c.argument_hint}</span>`}</button>
    ${c.description && html`<span class="muted small"> ${c.description}</span>`}</li>`)}</ul>`;
}

// FileSuggestions completes a path after "@" from the session's
// directory (file_list, confined to it as the Files screen is): a
// directory continues the path, a file ends it.
function FileSuggestions({ s, text, pick }) {
  const m = /(^|\s)@([^\s@]*)$/.exec(text);
  const typed = m ? m[2] : null;
  const cut = typed === null ? -1 : typed.lastIndexOf('/');
  const dir = cut < 0 ? '' : typed.slice(0, cut);
  const [list, setList] = useState(null);
  useEffect(() => {
    if (typed === null || S.conn !== 'online') return undefined;
    let live = true;
    conn.request('file_list', { session_id: s.session_id, path: dir || '.', limit: 1000 })
      .then((l) => { if (live) setList({ dir, entries: l.entries || [] }); }, () => { if (live) setList(null); });
    return () => { live = false; };
  }, [s.session_id, dir, typed === null]);
  if (typed === null || !list || list.dir !== dir) return null;
  const stem = typed.slice(cut + 1);
  const found = list.entries.filter((e) => e.name.startsWith(stem)).slice(0, 8);
  if (found.length === 0) return null;
  const before = text.slice(0, text.length - typed.length);
  return html`<ul class="suggest" aria-label="Files">${found.map((e) => html`<li key=${e.path}>
    <button type="button" class="link mono" onClick=${() => pick(before + e.path + (e.type === 'directory' ? '/' : ' '))}>${e.name}${e.type === 'directory' ? '/' : ''}</button></li>`)}</ul>`;
}

function ToolItem({ it }) {
  const r = it.result;
  const cmd = it.params && (it.params.command || it.params.file_path || it.params.path || it.params.pattern);
  return html`<details class=${'tool' + (r && !r.success ? ' failed' : '')} data-seq=${it.seq}>
    <summary><span class="tool-name">${it.tool}</span> <span class="mono">${cmd || it.description || ''}</span>
      <span class="muted small">${r ? (r.success ? '✓' : '✗') : '…'}</span></summary>
    <pre class="mono">${JSON.stringify(it.params, null, 2)}</pre>
    ${r && html`<pre class="mono out">${r.content || r.error || ''}</pre>`}
  </details>`;
}

function Item({ it }) {
  switch (it.kind) {
    case 'user': return html`<div class=${'msg user' + (it.sending ? ' sending' : '')} data-seq=${it.seq}>${it.from && html`<div class="from small">${it.from}</div>`}
      ${(it.images || []).length > 0 && html`<div class="thumbs">${it.images.map((im, i) => html`<img key=${i} src=${'data:' + im.media_type + ';base64,' + im.data} alt=${im.name || 'image ' + (i + 1)} />`)}</div>`}${it.text}</div>`;
    case 'assistant': return html`<div class="msg agent" aria-busy=${!it.done} data-seq=${it.seq}>${markdown(it.text)}</div>`;
    case 'tool': return html`<${ToolItem} it=${it} />`;
    case 'thinking': return html`<details class="thinking" data-seq=${it.seq}><summary class="muted small">Thinking</summary><div class="small">${markdown(it.text)}</div></details>`;
    default: return html`<div class=${'note' + (it.error ? ' err' : '')} data-seq=${it.seq}>${it.text}</div>`;
  }
}

// The images of a message travel base64 in its frame (at most 1 MiB): each
// is scaled to at most MAX_SIDE pixels (the size Claude looks at anyway) and
// re-encoded as JPEG until they fit IMAGE_BUDGET together.
const MAX_SIDE = 1568;
const IMAGE_BUDGET = 900 * 1024;
const MAX_IMAGES = 4;

async function shrink(file, quality) {
  const bmp = await createImageBitmap(file);
  const scale = Math.min(1, MAX_SIDE / Math.max(bmp.width, bmp.height));
  const canvas = document.createElement('canvas');
  canvas.width = Math.round(bmp.width * scale);
  canvas.height = Math.round(bmp.height * scale);
  canvas.getContext('2d').drawImage(bmp, 0, 0, canvas.width, canvas.height);
  const url = canvas.toDataURL('image/jpeg', quality);
  return { type: 'image', media_type: 'image/jpeg', data: url.slice(url.indexOf(',') + 1), name: file.name };
}

async function attachments(files) {
  for (const quality of [0.85, 0.7, 0.5, 0.35]) {
    const out = await Promise.all(files.map((f) => shrink(f, quality)));
    if (out.reduce((n, a) => n + a.data.length, 0) <= IMAGE_BUDGET) return out;
  }
  throw new Error('These images are too large to send together: send fewer at a time.');
}

// placeOf is where the reader of session id is: the first item in view
// (its seq, and its top on screen) and whether the view is at the end; a
// session opened for the first time in this tab starts at the end.
const places = new Map();
function placeOf(id) {
  let pl = places.get(id);
  if (!pl) {
    pl = { atBottom: true, seq: 0, top: 0, restored: false, height: 0 };
    try { Object.assign(pl, JSON.parse(sessionStorage.getItem('tether.place.' + id) || '{}')); } catch { /* a place from an older page */ }
    places.set(id, pl);
  }
  return pl;
}

// savePlace notes where the reader is. The end is the page's height when
// it was last laid out for the reader (pl.height), not its height now: a
// scroll event that comes after more events grew the page must not read
// as the reader leaving the end.
function savePlace(id, pl) {
  pl.atBottom = innerHeight + scrollY >= (pl.height || document.documentElement.scrollHeight) - 80;
  // The first item shown is not an anchor while a second is in view: an
  // earlier page may complete it (a tool call whose result it showed).
  const els = [...document.querySelectorAll('.log [data-seq]')];
  for (const [i, el] of els.entries()) {
    const r = el.getBoundingClientRect();
    if (r.bottom > 60 && !(i === 0 && els.length > 1 && els[1].getBoundingClientRect().top < innerHeight)) {
      pl.seq = +el.dataset.seq;
      pl.top = r.top;
      break;
    }
  }
  sessionStorage.setItem('tether.place.' + id, JSON.stringify({ seq: pl.seq, top: pl.top, atBottom: pl.atBottom }));
}

// earlier loads the page before the first shown, keeping the reader where
// they are.
function earlier(s) {
  const pl = placeOf(s.session_id);
  savePlace(s.session_id, pl);
  pl.atBottom = false;
  pl.keep = true;
  loadHistory(s, true);
}

function Chat() {
  const s = S.current && S.sessions.get(S.current);
  const [text, setText] = useState('');
  const [files, setFiles] = useState([]);
  const [editing, setEditing] = useState(false);
  const end = useRef(null);
  const rev = s ? s.rev : 0;
  const id = s ? s.session_id : '';
  useEffect(() => { if (s && !s.loaded && S.conn === 'online') loadHistory(s, false); }, [id, S.conn]);
  // Where the reader is (placeOf) is kept per session, in this tab's
  // sessionStorage too: coming back to the chat, or reloading the page,
  // returns to it. New events scroll the view only when it is at the end.
  useEffect(() => {
    if (!id) return undefined;
    const pl = placeOf(id);
    pl.restored = false;
    const onScroll = () => { if (pl.restored) savePlace(id, pl); };
    addEventListener('scroll', onScroll, { passive: true });
    return () => removeEventListener('scroll', onScroll);
  }, [id]);
  // Before the browser paints: the reader never sees the view jump.
  useLayoutEffect(() => {
    if (!s || !end.current || !s.loaded) return;
    const pl = placeOf(id);
    if (!pl.restored) {
      const el = !pl.atBottom && document.querySelector(`.log [data-seq="${pl.seq}"]`);
      if (el) {
        scrollBy(0, el.getBoundingClientRect().top - pl.top);
      } else if (!pl.atBottom && s.hasMore && s.log.length && pl.seq < s.log[0].seq) {
        // The place is on an earlier page: load pages until it is shown.
        loadHistory(s, true);
        return;
      }
      pl.restored = true;
    } else if (pl.keep && !s.loading) {
      // An earlier page came in above: the reader stays on what they read.
      pl.keep = false;
      const el = document.querySelector(`.log [data-seq="${pl.seq}"]`);
      if (el) scrollBy(0, el.getBoundingClientRect().top - pl.top);
    }
    if (pl.atBottom) end.current.scrollIntoView({ block: 'end' });
    pl.height = document.documentElement.scrollHeight;
    savePlace(id, pl);
    // The start of what is loaded is on screen: the page before it too.
    const first = document.querySelector('.log [data-seq]');
    if (!pl.atBottom && s.hasMore && !s.loading && first && first.getBoundingClientRect().top > 0) earlier(s);
  }, [rev, id, s && s.loaded]);
  if (!s) return html`<section><h2>Chat</h2><p class="muted">Open a session from the Sessions screen.</p></section>`;
  const send = async (e) => {
    e.preventDefault();
    const content = text.trim();
    if (!content && files.length === 0) return;
    let images = [];
    try {
      images = await attachments(files);
    } catch (err) {
      toast(err.message);
      return;
    }
    const mid = newID('m-');
    const msg = { session_id: s.session_id, content, role: 'user' };
    if (images.length) msg.attachments = images;
    if (!conn.send('message', msg, mid)) { toast('Offline: the message was not sent.'); return; }
    placeOf(s.session_id).atBottom = true;
    push(s, { kind: 'user', text: content, images, mid, sending: true });
    setText('');
    setFiles([]);
    update();
  };
  const pick = (e) => {
    const chosen = [...files, ...e.target.files].slice(0, MAX_IMAGES);
    if (files.length + e.target.files.length > MAX_IMAGES) toast(`At most ${MAX_IMAGES} images a message.`);
    e.target.value = '';
    setFiles(chosen);
  };
  const items = s.items;
  const pending = [...S.approvals.values()].filter((a) => a.session_id === s.session_id);
  return html`<section class="chat" aria-labelledby="h-chat">
    <h2 id="h-chat" class="sr-only">Chat</h2>
    <div class="row small muted"><span>${[s.agent, s.branch].filter(Boolean).join(' · ')}</span><${Badge} status=${s.status} />
      ${s.status === 'busy' && html`<button class="btn small" onClick=${() => conn.send('interrupt', { session_id: s.session_id })}>Interrupt</button>`}
      ${s.mode === 'remote' && html`<button class="btn small" onClick=${() => conn.send('terminal_handback', { session_id: s.session_id })}>Hand back to the terminal</button>`}</div>
    ${s.mode === 'local' && html`<p class="muted small" role="note">In a terminal (tether claude): your message takes the session over from it.</p>`}
    <div class="row small muted"><span class="settings-line">${[(s.info && s.info.model) || s.model, MODES[s.permission_mode || 'default'], sessionUsage(s.usage)].filter(Boolean).join(' · ')}</span>
      ${s.source !== 'hooks' && s.status !== 'closed' && s.status !== 'error' && !editing && html`<button class="btn small" onClick=${() => setEditing(true)}>Settings</button>`}</div>
    ${editing && html`<${SessionSettings} s=${s} close=${() => setEditing(false)} />`}
    ${(s.warnings || []).map((w) => html`<p class="banner warn" role="note">${w}</p>`)}
    ${s.hasMore && html`<button class="link" disabled=${s.loading} onClick=${() => earlier(s)}>Show earlier messages</button>`}
    ${!s.loaded && s.loading && html`<p class="muted">Loading the conversation…</p>`}
    <div class="log" role="log" aria-live="polite">
      ${items.map((it, i) => html`<${Item} key=${it.seq || 'local-' + i} it=${it} />`)}
      ${pending.map((a) => html`<${ApprovalCard} key=${a.tool_call_id} a=${a} />`)}
      <div class="end" ref=${end}></div>
    </div>
    <form class="composer" onSubmit=${send}>
      <${Suggestions} s=${s} text=${text} pick=${(t) => { setText(t); document.getElementById('prompt').focus(); }} />
      <${FileSuggestions} s=${s} text=${text} pick=${(t) => { setText(t); document.getElementById('prompt').focus(); }} />
      ${files.length > 0 && html`<ul class="attached" aria-label="Images to send">${files.map((f, i) => html`<li key=${i}>${f.name}
        <button type="button" class="link" aria-label=${'Remove ' + f.name} onClick=${() => setFiles(files.filter((_, j) => j !== i))}>✕</button></li>`)}</ul>`}
      <label class="btn attach" title="Attach images"><svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round"><rect x="3" y="5" width="18" height="14" rx="2" /><circle cx="9" cy="10" r="2" /><path d="M21 16l-5-5-8 8" /></svg><span class="sr-only">Attach images</span>
        <input type="file" accept="image/*" multiple class="sr-only" onChange=${pick} /></label>
      <label class="sr-only" for="prompt">Message</label>
      <textarea id="prompt" rows="2" value=${text} onInput=${(e) => setText(e.target.value)} placeholder="Message the agent"
        onKeyDown=${(e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) send(e); }}></textarea>
      <button class="btn primary" disabled=${S.conn !== 'online' || s.status === 'closed'}>Send</button>
    </form>
  </section>`;
}

// ---- History: every session of this machine, past and present ----

// listHistory asks for the first page of the history as the screen's
// search and project say, or (more) the page after the last one shown.
async function listHistory(more) {
  const h = S.hist;
  if (h.loading || S.conn !== 'online' || (more && !h.next)) return;
  h.loading = true;
  update();
  try {
    const q = { query: h.query, project: h.project, limit: 30 };
    if (more) q.cursor = h.next;
    const [p, pr] = await Promise.all([req('history_list', q), more ? null : req('history_projects', {})]);
    h.sessions = more ? [...h.sessions, ...p.sessions] : p.sessions;
    h.next = p.next_cursor || '';
    h.indexing = p.indexing;
    if (pr) h.projects = pr.projects;
  } catch { /* req said why */ } finally {
    h.loading = false;
    update();
  }
}

// readHistory loads the open session's conversation, a page at a time
// from the newest (older: the page before what is shown), into a view
// built as a live session's chat is.
async function readHistory(older) {
  const o = S.hist.open;
  if (!o || o.loading || (older && !o.more)) return;
  o.loading = true;
  update();
  try {
    const q = { history_id: o.h.history_id, limit: 100 };
    if (older) q.before = o.before;
    const p = await req('history_read', q);
    o.frames = [...p.events, ...(older ? o.frames : [])];
    o.before = p.before || 0;
    o.more = !!p.has_more;
    Object.assign(o.view, { items: [], streams: new Map(), tools: new Map(), thinking: new Map() });
    for (const f of o.frames) itemize(o.view, f);
    o.view.rev++;
  } catch { /* req said why */ } finally {
    o.loading = false;
    update();
  }
}

function openHistory(h) {
  S.hist.open = { h, frames: [], before: 0, more: false, loading: false,
    view: { session_id: h.history_id, title: h.title, items: [], streams: new Map(), tools: new Map(), thinking: new Map(), rev: 0 } };
  readHistory(false);
  scrollTo(0, 0);
}

// continueHere resumes a session of the history as a session of this
// daemon and opens its chat.
async function continueHere(h) {
  try {
    const p = await req('history_resume', { history_id: h.history_id });
    const s = session(p.session_id);
    if (s.title === p.session_id) s.title = h.title;
    const o = S.hist.open;
    if (o && o.h.history_id === h.history_id && o.frames.length) {
      s.prior = o.frames;
      rebuild(s);
    }
    S.hist.open = null;
    S.current = p.session_id;
    go('chat');
  } catch { /* req said why */ }
}

function when(ts) {
  const d = new Date(ts);
  return isNaN(d) ? '' : d.toLocaleString([], { dateStyle: 'medium', timeStyle: 'short' });
}

function History() {
  const h = S.hist;
  useEffect(() => { if (S.conn === 'online' && !h.open) listHistory(false); }, [S.conn]);
  if (h.open) return html`<${HistoryRead} o=${h.open} />`;
  const search = (e) => { e.preventDefault(); listHistory(false); };
  return html`<section aria-labelledby="h-history">
    <h2 id="h-history">Past sessions</h2>
    <form class="row gap" role="search" onSubmit=${search}>
      <label class="sr-only" for="history-q">Search prompts and titles</label>
      <input id="history-q" type="search" value=${h.query} placeholder="Search prompts and titles" onInput=${(e) => { h.query = e.target.value; }} />
      <button class="btn">Search</button>
    </form>
    <label>Project
      <select value=${h.project} onChange=${(e) => { h.project = e.target.value; listHistory(false); }}>
        <option value="">All projects</option>
        ${h.projects.map((p) => html`<option value=${p.project}>${p.project} (${p.sessions})</option>`)}
      </select>
    </label>
    ${h.indexing && html`<p class="muted small" role="status">Still reading the session files: more may come.</p>`}
    ${!h.loading && h.sessions.length === 0 && html`<p class="muted">No sessions${h.query ? ' match' : ''}.</p>`}
    <ul class="cards" aria-label="Past sessions">
      ${h.sessions.map((x) => html`<li class="card" key=${x.history_id}>
        <div class="row"><button class="link title" onClick=${() => openHistory(x)}>${x.title || '(no prompt)'}</button>${x.live && html`<${Badge} status="live" />`}</div>
        <div class="muted small">${x.agent} · ${x.project}</div>
        <div class="muted small">${when(x.last_activity)} · ${x.messages} messages</div>
      </li>`)}
    </ul>
    ${h.next && html`<button class="btn" disabled=${h.loading} onClick=${() => listHistory(true)}>More sessions</button>`}
    ${h.loading && html`<p class="muted">Loading…</p>`}
  </section>`;
}

function HistoryRead({ o }) {
  const x = o.h;
  const live = x.live && x.session_id;
  return html`<section class="chat" aria-labelledby="h-read">
    <div class="row"><button class="link" onClick=${() => { S.hist.open = null; update(); }}>← Past sessions</button></div>
    <h2 id="h-read">${x.title || '(no prompt)'}</h2>
    <div class="muted small">${x.agent} · ${x.project} · ${when(x.last_activity)}</div>
    <div class="row gap">
      ${live ? html`<button class="btn primary" onClick=${() => { S.current = x.session_id; go('chat'); }}>Open the live session</button>`
        : x.resumable && html`<button class="btn primary" disabled=${S.conn !== 'online'} onClick=${() => continueHere(x)}>Continue here</button>`}
    </div>
    ${o.more && html`<button class="link" disabled=${o.loading} onClick=${() => readHistory(true)}>Show earlier messages</button>`}
    ${o.loading && html`<p class="muted">Loading the conversation…</p>`}
    <div class="log" role="log" aria-label="Conversation">
      ${o.view.items.map((it, i) => html`<${Item} key=${i} it=${it} />`)}
    </div>
  </section>`;
}

// listRuns asks for the runs (run_list), once a connection.
async function listRuns() {
  try {
    const p = await req('run_list', {});
    for (const r of p.runs) S.runs.list.set(r.run_id, r);
    S.runs.loaded = true;
  } catch { /* req said why */ }
  update();
}

// openRun reads a run's whole stream (run_messages, page after page);
// live run_message events add to it.
async function openRun(id) {
  S.runs.open = id;
  update();
  if (S.runs.msgs.has(id)) return;
  const msgs = new Map();
  S.runs.msgs.set(id, msgs);
  try {
    for (let after = 0; ;) {
      const p = await req('run_messages', { run_id: id, after_seq: after });
      for (const x of p.messages) { msgs.set(x.seq, x.message); after = x.seq; }
      if (!p.has_more) break;
    }
  } catch { S.runs.msgs.delete(id); }
  update();
}

// clip shortens text to n characters, with an ellipsis.
function clip(text, n) { return text.length > n ? text.slice(0, n - 1) + '…' : text; }

function runCounts(c) {
  return `${c.total_messages} messages · ${c.has_done_signal ? 'DONE' : 'not done'} · ${c.pass_count} PASS · ${c.fail_count} FAIL`;
}

function Runs() {
  const r = S.runs;
  useEffect(() => { if (S.conn === 'online') listRuns(); }, [S.conn]);
  if (r.open) return html`<${RunView} run=${r.list.get(r.open)} />`;
  const list = [...r.list.values()].sort((a, b) => b.run_id - a.run_id);
  return html`<section aria-labelledby="h-runs">
    <h2 id="h-runs">Runs</h2>
    <p class="muted small">Agents that work together: an implementer does the task, a reviewer passes or fails it, until it passes.</p>
    ${r.loaded && list.length === 0 && html`<p class="muted">No runs yet. Start one below.</p>`}
    <ul class="cards" aria-label="Runs">
      ${list.map((x) => html`<li class="card" key=${x.run_id}>
        <div class="row"><button class="link title" onClick=${() => openRun(x.run_id)}>${'#' + x.run_id + ' ' + clip(x.task.split('\n')[0], 90)}</button><${Badge} status=${x.status} /></div>
        <div class="muted small">${x.participants.map((p) => p.name + (p.agent ? ' (' + p.agent + ')' : '')).join(' · ')} · ${x.working_directory}</div>
        <div class="muted small">round ${x.round} of ${x.max_rounds} · ${runCounts(x.counts)}</div>
      </li>`)}
    </ul>
    <${RunStart} />
  </section>`;
}

function RunStart() {
  const agents = (S.ack && S.ack.supported_agents) || [];
  const [task, setTask] = useState('');
  const [dir, setDir] = useState(localStorage.getItem('tether.last_dir') || '');
  const [impl, setImpl] = useState('');
  const [rev, setRev] = useState('');
  const [rounds, setRounds] = useState('3');
  const [policy, setPolicy] = useState('ask');
  const [busy, setBusy] = useState(false);
  const start = async (e) => {
    e.preventDefault();
    setBusy(true);
    try {
      localStorage.setItem('tether.last_dir', dir);
      const p = await req('run_start', { task, working_directory: dir, max_rounds: parseInt(rounds, 10) || 3, policy,
        participants: [{ name: 'implementer', role: 'implementer', agent: impl || agents[0] }, { name: 'reviewer', role: 'reviewer', agent: rev || agents[0] }] });
      S.runs.list.set(p.run.run_id, p.run);
      setTask('');
      openRun(p.run.run_id);
    } catch { /* req said why */ } finally { setBusy(false); }
  };
  const agentSelect = (v, set) => html`<select value=${v || agents[0]} onChange=${(e) => set(e.target.value)}>${agents.map((a) => html`<option value=${a}>${a}</option>`)}</select>`;
  return html`<form class="card" onSubmit=${start} aria-label="New run">
    <h3>New run</h3>
    <label>Task<textarea required rows="3" value=${task} onInput=${(e) => setTask(e.target.value)} placeholder="What the implementer should do"></textarea></label>
    <label>Working directory
      <input required value=${dir} onInput=${(e) => setDir(e.target.value)} placeholder="/home/you/project" autocapitalize="off" spellcheck="false" />
    </label>
    <label>Implementer's agent ${agentSelect(impl, setImpl)}</label>
    <label>Reviewer's agent ${agentSelect(rev, setRev)}</label>
    <label>Rounds (reviews that may fail)<input type="number" min="1" max="20" value=${rounds} onInput=${(e) => setRounds(e.target.value)} /></label>
    <label>Approvals
      <select value=${policy} onChange=${(e) => setPolicy(e.target.value)}>
        <option value="ask">Ask me for everything</option>
        <option value="auto_low">Approve low risk, ask the rest</option>
        <option value="auto_approve">Approve everything</option>
      </select>
    </label>
    <button class="btn primary" disabled=${busy || S.conn !== 'online'}>Start run</button>
  </form>`;
}

// RunView is one run: its stream as a conversation between the agents,
// its counts, and the user's controls (a message of one's own, stop).
function RunView({ run }) {
  const [to, setTo] = useState('');
  const [type, setType] = useState('chat');
  const [text, setText] = useState('');
  if (!run) return html`<section><button class="link" onClick=${() => { S.runs.open = 0; update(); }}>← Runs</button><p class="muted">Loading…</p></section>`;
  const msgs = [...(S.runs.msgs.get(run.run_id) || new Map()).entries()].sort((a, b) => a[0] - b[0]);
  const running = run.status === 'running';
  const send = async (e) => {
    e.preventDefault();
    try {
      const p = await req('run_send', { run_id: run.run_id, to, type, content: text });
      if (p.duplicate) toast('Already sent: the run has this message.');
      setText('');
    } catch { /* req said why */ }
  };
  const stop = () => { if (confirm('Stop this run? The agents\' turns are interrupted.')) req('run_stop', { run_id: run.run_id }).then((p) => { S.runs.list.set(p.run.run_id, p.run); update(); }).catch(() => {}); };
  const open = (id) => { S.current = id; go('chat'); };
  return html`<section class="chat" aria-labelledby="h-run">
    <div class="row"><button class="link" onClick=${() => { S.runs.open = 0; update(); }}>← Runs</button><${Badge} status=${run.status} /></div>
    <h2 id="h-run">Run #${run.run_id}</h2>
    <div class="muted small">${run.working_directory} · round ${run.round} of ${run.max_rounds}</div>
    <div class="small run-counts" aria-label="Counts">${runCounts(run.counts)}</div>
    ${run.reason && html`<p class="small">${run.reason}</p>`}
    <div class="row gap">${run.participants.map((p) => html`<button class="btn ghost" onClick=${() => open(p.session_id)}>${p.name}'s session</button>`)}</div>
    <div class="log" role="log" aria-label="Run messages">
      ${msgs.map(([seq, m]) => html`<div class=${'msg run-msg ' + (m.from === 'user' ? 'user' : 'agent')} key=${seq} data-seq=${seq}>
        <div class="from small"><strong>${m.from}</strong> → ${m.to || 'everyone'} · ${m.type}${m.signal && html` <span class=${'badge sig-' + m.signal}>${m.signal}</span>`}</div>
        ${markdown(m.content)}
      </div>`)}
    </div>
    ${running && html`<form class="card" onSubmit=${send} aria-label="Message to the run">
      <label>To
        <select value=${to} onChange=${(e) => setTo(e.target.value)}>
          <option value="">Everyone</option>
          ${run.participants.map((p) => html`<option value=${p.name}>${p.name}</option>`)}
        </select>
      </label>
      <label>Kind
        <select value=${type} onChange=${(e) => setType(e.target.value)}><option value="chat">Chat</option><option value="task">Task</option></select>
      </label>
      <label>Message<textarea required rows="2" value=${text} onInput=${(e) => setText(e.target.value)}></textarea></label>
      <div class="row gap"><button class="btn primary" disabled=${S.conn !== 'online'}>Send</button>
        <button type="button" class="btn danger" onClick=${stop}>Stop run</button></div>
    </form>`}
  </section>`;
}

// respond answers a question: the card goes away here at once, and
// everywhere once the daemon says it was answered.
function respond(a, decision, extra) {
  const p = { session_id: a.session_id, tool_call_id: a.tool_call_id, decision, modifications: null, ...extra };
  if (conn.send('approval_response', p)) { S.approvals.delete(akey(a)); update(); return true; }
  toast('Offline: not answered yet.');
  return false;
}

// PlanCard is the agent's plan (ExitPlanMode, in plan mode): approve it
// (the agent leaves plan mode and goes on; with edits accepted, the
// session's mode becomes acceptEdits once it has), send it back with
// feedback (the agent keeps planning), or reject it (and stop the turn).
function PlanCard({ a }) {
  const [feedback, setFeedback] = useState(null);
  const title = S.sessions.get(a.session_id)?.title || a.session_id;
  const reject = () => { if (respond(a, 'rejected')) conn.send('interrupt', { session_id: a.session_id }); };
  const acceptEdits = () => { if (respond(a, 'approved')) req('session_configure', { session_id: a.session_id, permission_mode: 'acceptEdits' }).catch(() => {}); };
  return html`<article class="card approval plan" aria-label="Plan">
    <div class="row"><strong>Plan</strong><span class="muted small">${title}</span></div>
    <div class="plan-body">${markdown((a.params && a.params.plan) || '')}</div>
    ${feedback !== null && html`<label>Feedback (the agent sees it)<textarea rows="3" value=${feedback} onInput=${(e) => setFeedback(e.target.value)}></textarea></label>`}
    <div class="row gap">
      ${feedback === null
        ? html`<button class="btn primary" onClick=${() => respond(a, 'approved')}>Approve plan</button>
          <button class="btn" onClick=${acceptEdits}>Approve, accept edits</button>
          <button class="btn" onClick=${() => setFeedback('')}>Keep planning</button>
          <button class="btn danger" onClick=${reject}>Reject</button>`
        : html`<button class="btn primary" disabled=${!feedback.trim()} onClick=${() => respond(a, 'rejected', { reason: feedback.trim() })}>Send feedback</button>
          <button class="btn ghost" onClick=${() => setFeedback(null)}>Cancel</button>`}
    </div>
  </article>`;
}

// QuestionCard is the agent's question (AskUserQuestion): each question's
// options as choices (several where it allows), or an answer of one's own.
function QuestionCard({ a }) {
  const questions = (a.params && a.params.questions) || [];
  const [chosen, setChosen] = useState(() => questions.map(() => []));
  const [other, setOther] = useState(() => questions.map(() => ''));
  const title = S.sessions.get(a.session_id)?.title || a.session_id;
  const toggle = (qi, label, multi) => setChosen(chosen.map((c, i) => (i !== qi ? c : multi ? (c.includes(label) ? c.filter((l) => l !== label) : [...c, label]) : [label])));
  const answer = () => {
    const answers = {};
    for (const [i, q] of questions.entries()) {
      const said = [...chosen[i], other[i].trim()].filter(Boolean).join(', ');
      if (!said) { toast(`Answer "${q.question}" first.`); return; }
      answers[q.question] = said;
    }
    respond(a, 'approved', { answers });
  };
  return html`<article class="card approval question" aria-label="Question">
    <div class="row"><strong>The agent asks</strong><span class="muted small">${title}</span></div>
    ${questions.map((q, qi) => html`<fieldset key=${qi}>
      <legend>${q.header && html`<span class="badge">${q.header}</span> `}${q.question}</legend>
      ${(q.options || []).map((o) => html`<label class="check choice"><input type=${q.multiSelect ? 'checkbox' : 'radio'} name=${`q-${a.tool_call_id}-${qi}`}
        checked=${chosen[qi].includes(o.label)} onChange=${() => toggle(qi, o.label, q.multiSelect)} /> <span>${o.label}${o.description && html` <span class="muted small">${o.description}</span>`}</span></label>`)}
      <label>Or your own answer<input value=${other[qi]} onInput=${(e) => setOther(other.map((v, i) => (i === qi ? e.target.value : v)))} /></label>
    </fieldset>`)}
    <div class="row gap">
      <button class="btn primary" onClick=${answer}>Answer</button>
      <button class="btn danger" onClick=${() => respond(a, 'rejected')}>Decline</button>
    </div>
  </article>`;
}

function ApprovalCard({ a }) {
  if (a.kind === 'plan') return html`<${PlanCard} a=${a} />`;
  if (a.kind === 'question') return html`<${QuestionCard} a=${a} />`;
  return html`<${ToolApprovalCard} a=${a} />`;
}

function ToolApprovalCard({ a }) {
  const [mode, setMode] = useState('');
  const [reason, setReason] = useState('');
  const [params, setParams] = useState(JSON.stringify(a.params, null, 2));
  const [remember, setRemember] = useState(false);
  const answer = (decision, extra) => {
    const p = { session_id: a.session_id, tool_call_id: a.tool_call_id, decision, modifications: null, ...extra };
    if (remember && decision === 'approved') p.remember = 'session';
    if (conn.send('approval_response', p)) { S.approvals.delete(akey(a)); update(); } else toast('Offline: not answered yet.');
  };
  const approveEdited = () => {
    let m;
    try { m = JSON.parse(params); } catch { toast('The parameters are not valid JSON.'); return; }
    answer('modified', { modifications: m });
  };
  const title = S.sessions.get(a.session_id)?.title || a.session_id;
  return html`<article class=${'card approval risk-' + a.risk_level} aria-label=${'Approval: ' + a.tool}>
    <div class="row"><strong>${a.tool}</strong><span class=${'badge risk ' + a.risk_level}>${a.risk_level} risk</span></div>
    <p>${a.description}</p>
    <div class="muted small">${title} · ${a.source}</div>
    ${mode === 'edit'
      ? html`<label>Parameters (JSON)<textarea class="mono" rows="5" value=${params} onInput=${(e) => setParams(e.target.value)}></textarea></label>`
      : html`<pre class="mono params">${JSON.stringify(a.params, null, 2)}</pre>`}
    ${mode === 'reject' && html`<label>Reason (the agent sees it)<input value=${reason} onInput=${(e) => setReason(e.target.value)} /></label>`}
    ${(a.remember_scope || '').startsWith('not remembered')
      ? html`<p class="muted small">${a.remember_scope}</p>`
      : html`<label class="check"><input type="checkbox" checked=${remember} onChange=${(e) => setRemember(e.target.checked)} /> Remember for this session</label>
        ${a.remember_scope && html`<p class="muted small">Remembering approves ${a.remember_scope}.</p>`}`}
    <div class="row gap">
      ${mode === 'edit' ? html`<button class="btn primary" onClick=${approveEdited}>Approve edited</button>`
        : html`<button class="btn primary" onClick=${() => answer('approved')}>Approve</button>`}
      ${mode === 'reject' ? html`<button class="btn danger" onClick=${() => answer('rejected', { reason })}>Send rejection</button>`
        : html`<button class="btn danger" onClick=${() => setMode('reject')}>Reject</button>`}
      ${mode !== 'edit' && html`<button class="btn ghost" onClick=${() => setMode('edit')}>Edit</button>`}
    </div>
  </article>`;
}

function Approvals() {
  const list = [...S.approvals.values()];
  const canAsk = 'Notification' in window && Notification.permission === 'default';
  return html`<section aria-labelledby="h-appr">
    <h2 id="h-appr">Approvals</h2>
    ${canAsk && html`<button class="btn ghost notify" onClick=${() => Notification.requestPermission().then(subscribePush).then(update)}>Notify me when one arrives</button>`}
    ${list.length === 0 && html`<p class="muted">Nothing is waiting for you.</p>`}
    ${list.map((a) => html`<${ApprovalCard} key=${a.tool_call_id} a=${a} />`)}
  </section>`;
}

// pushRegistration is the service worker's registration where the browser
// has Web Push and the worker is registered (it is not where the browser
// refuses the daemon's certificate), else undefined.
async function pushRegistration() {
  if (!('serviceWorker' in navigator) || !('PushManager' in window)) return undefined;
  return navigator.serviceWorker.getRegistration();
}

// subscribePush asks the browser's push service for a subscription to the
// daemon's VAPID key and hands it to the daemon, so that notifications
// reach this phone while the page is closed. "Notify me" calls it, and so
// does every connection once notifications are allowed (quietly): the
// daemon gets the subscription back after it dropped it (the phone was
// paired again, the push service said it was gone), and a subscription
// made for another key (a new vapid.json) is replaced. Where the browser
// has no push (or its vendor's service is out of reach) the page still
// notifies while it is open.
async function subscribePush(permission, quiet = false) {
  if (permission !== 'granted') return;
  try {
    if (!(await pushRegistration())) return;
    const reg = await navigator.serviceWorker.ready;
    const cfg = await conn.request('push_config', {});
    if (!cfg.enabled) return;
    const key = Uint8Array.from(atob(cfg.vapid_public_key.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0));
    let sub = await reg.pushManager.getSubscription();
    const had = sub && sub.options && sub.options.applicationServerKey;
    if (had && !sameBytes(new Uint8Array(had), key)) {
      await sub.unsubscribe();
      sub = null;
    }
    if (!sub) sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
    await conn.request('push_subscribe', sub.toJSON());
    if (!quiet) toast('Notifications will reach this phone.');
  } catch (e) {
    if (!quiet) toast(`Notifications only while tether is open here: ${e.message}`);
  }
}

function sameBytes(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function needSession(name) {
  return html`<section><h2>${name}</h2><p class="muted">Open a session first: ${name.toLowerCase()} works in its directory.</p></section>`;
}

function Diff({ file, actions }) {
  return html`<div class="diff" aria-label=${'Diff of ' + file.path}>
    <div class="diff-h mono">${file.path} <span class="add">+${file.additions}</span> <span class="del">-${file.deletions}</span></div>
    ${file.binary && html`<p class="muted">Binary file</p>`}
    ${(file.hunks || []).map((h, i) => html`<table class="hunk mono"><caption>${h.header}${actions && html`<span class="hunk-actions">${actions(i)}</span>`}</caption><tbody>
      ${h.lines.map((l) => html`<tr class=${l.type}><td class="n">${l.old_line_number || ''}</td><td class="n">${l.new_line_number || ''}</td>
        <td class="c"><span class="sign" aria-hidden="true">${l.type === 'added' ? '+' : l.type === 'removed' ? '-' : ' '}</span>${l.content}</td></tr>`)}
    </tbody></table>`)}
  </div>`;
}

// Branch, remote and history bar of the Git screen: switch or create a
// branch, push and pull with the remote's URL shown (and sent, so that a
// URL the agent rewrote is refused), the last commits.
function GitBranches({ s, st, reload }) {
  const [br, setBr] = useState(null);
  const [busy, setBusy] = useState('');
  const [name, setName] = useState('');
  const [log, setLog] = useState(null);
  const [shown, setShown] = useState(null);
  const load = () => req('git_branches', { session_id: s.session_id }).then(setBr, () => {});
  useEffect(() => { load(); }, [s.session_id, st]);
  useEffect(() => {
    const off = onGitProgress((p) => p.session_id === s.session_id && setBusy(`${p.operation === 'push' ? 'Pushing' : 'Pulling'}: ${p.phase} ${p.percent}%`));
    return off;
  }, [s.session_id]);
  if (!br) return null;
  const cur = br.local.find((b) => b.current);
  const remote = br.remotes[0];
  const upstream = cur && cur.upstream && br.remotes.find((r) => cur.upstream.startsWith(r.name + '/'));
  const target = upstream || remote;
  const act = async (type, payload, until, label) => {
    setBusy(label);
    const r = await req(type, { session_id: s.session_id, ...payload }, until).catch(() => null);
    setBusy('');
    if (r) reload();
    return r;
  };
  const remoteOp = async (op) => {
    const payload = { url: op === 'push' ? target.push_url || target.url : target.url };
    if (op === 'push' && !upstream) payload.remote = target.name;
    const r = await act('git_' + op, payload, `git_${op}_response`, op === 'push' ? 'Pushing…' : 'Pulling…');
    if (r) toast(r.up_to_date ? 'Already up to date.' : op === 'push' ? `Pushed ${r.after.slice(0, 7)} to ${r.remote}/${r.remote_ref.replace('refs/heads/', '')}` : `Pulled: ${r.before.slice(0, 7)} → ${r.after.slice(0, 7)}`);
  };
  const history = () => (log ? setLog(null) : req('git_log', { session_id: s.session_id, limit: 20 }).then(setLog, () => {}));
  return html`<div class="card git-branches">
    <label>Branch <select aria-label="Branch" value=${br.current} onChange=${(e) => act('git_checkout', { branch: e.target.value }, 'git_status_response', 'Switching…')}>
      ${br.detached && html`<option value="">detached at ${br.head.slice(0, 7)}</option>`}
      ${!br.detached && !cur && html`<option value=${br.current}>${br.current} (no commit yet)</option>`}
      ${br.local.map((b) => html`<option value=${b.name}>${b.name}${b.upstream ? ` (↑${b.ahead} ↓${b.behind})` : ''}</option>`)}
    </select></label>
    <form class="row" onSubmit=${(e) => { e.preventDefault(); act('git_branch_create', { name, checkout: true }, 'git_status_response', 'Creating…').then((r) => r && setName('')); }}>
      <input aria-label="New branch name" placeholder="new-branch" value=${name} onInput=${(e) => setName(e.target.value)} />
      <button class="btn" disabled=${!name.trim()}>Create branch</button>
    </form>
    ${target ? html`<p class="small">Remote <strong>${target.name}</strong> <span class="mono">${target.url}</span></p>
      <div class="row">
        <button class="btn" disabled=${!!busy || !upstream} onClick=${() => remoteOp('pull')}>Pull</button>
        <button class="btn" disabled=${!!busy} onClick=${() => remoteOp('push')}>${upstream ? 'Push' : `Push to ${target.name}`}</button>
      </div>` : html`<p class="muted small">No remote.</p>`}
    ${busy && html`<p class="small" role="status" aria-label="Git progress">${busy}</p>`}
    <button class="link" onClick=${history}>${log ? 'Hide history' : 'History'}</button>
    ${log && html`<ul class="files" aria-label="History">${log.commits.map((c) => html`<li key=${c.hash}>
      <button class="link" onClick=${() => req('git_show', { session_id: s.session_id, hash: c.hash }).then(setShown, () => {})}>${c.subject}</button>
      <span class="muted small mono">${c.hash.slice(0, 7)} · ${c.author}</span></li>`)}</ul>`}
    ${shown && shown.files.map((f) => html`<${Diff} key=${f.path} file=${f} />`)}
  </div>`;
}

function Git() {
  const s = S.current && S.sessions.get(S.current);
  const [st, setSt] = useState(null);
  const [sel, setSel] = useState({});
  const [diff, setDiff] = useState(null);
  const [msg, setMsg] = useState('');
  const [done, setDone] = useState('');
  const load = () => s && req('git_status_request', { session_id: s.session_id }).then((x) => {
    setSt(x);
    if (diff) show(diff.change);
  }, () => {});
  useEffect(() => { load(); }, [S.current, S.conn]);
  if (!s) return needSession('Git');
  const show = (c) => req('git_diff', { session_id: s.session_id, files: [c.path], cached: !!c.staged })
    .then((r) => setDiff(r.files[0] ? { change: c, file: r.files[0] } : null), () => {});
  const chosen = Object.keys(sel).filter((k) => sel[k]);
  const commit = async (e) => {
    e.preventDefault();
    const r = await req('git_commit', { session_id: s.session_id, message: msg, files: chosen.length ? chosen : null }, 'git_commit_response').catch(() => null);
    if (r) { setDone(`Committed ${r.hash.slice(0, 7)} on ${r.branch}: ${r.summary}`); setMsg(''); setSel({}); setDiff(null); load(); }
  };
  // Stage, unstage or discard answer with the fresh status.
  const write = (type, payload, until) => req(type, { session_id: s.session_id, ...payload }, until || 'git_status_response').then((r) => { load(); return r; }, () => null);
  const discarded = (r) => r && r.recovery_ref && toast(`Discarded; kept 30 days as ${r.recovery_ref}`);
  const discardFile = async (c) => {
    if (!confirm(`Discard your unstaged changes to ${c.path}? They are kept 30 days under refs/tether/discarded.`)) return;
    const d = await req('git_diff', { session_id: s.session_id, files: [c.path], cached: false }).catch(() => null);
    const f = d && d.files[0];
    if (f) discarded(await write('git_discard', { files: [{ path: c.path, fingerprint: f.fingerprint }] }, 'git_discard_response'));
  };
  const hunkActions = diff && (diff.file.binary || diff.file.truncated || diff.file.type_changed || diff.file.conflicted ? null : (i) => {
    const h = { path: diff.file.path, fingerprint: diff.file.fingerprint, hunk: i };
    return diff.change.staged
      ? html`<button class="link" onClick=${() => write('git_unstage', h)}>Unstage hunk</button>`
      : html`<button class="link" onClick=${() => write('git_stage', h)}>Stage hunk</button>
        <button class="link danger" onClick=${() => confirm('Discard this hunk? The file is kept 30 days under refs/tether/discarded.') && write('git_discard', h, 'git_discard_response').then(discarded)}>Discard hunk</button>`;
  });
  return html`<section aria-labelledby="h-git">
    <h2 id="h-git">Git</h2>
    ${!st ? html`<p class="muted">Loading…</p>` : html`
      <p class="small">On <strong>${st.branch}</strong>${st.has_upstream ? ` · ${st.ahead} ahead, ${st.behind} behind` : ''}${st.is_clean ? ' · clean' : ''}</p>
      <ul class="files">${(st.changes || []).map((c) => html`<li key=${c.path + c.staged}>
        <input type="checkbox" id=${'g-' + c.path + c.staged} aria-label=${'Select ' + c.path} checked=${!!sel[c.path]} onChange=${(e) => setSel({ ...sel, [c.path]: e.target.checked })} />
        <button class="link mono" onClick=${() => show(c)}>${c.path}</button>
        <span class=${'badge st-' + c.status}>${c.status}${c.staged ? ', staged' : ''}</span>
        <span class="small"><span class="add">+${c.additions}</span> <span class="del">-${c.deletions}</span></span>
        ${c.staged ? html`<button class="link" aria-label=${'Unstage ' + c.path} onClick=${() => write('git_unstage', { files: [c.path] })}>Unstage</button>`
          : html`<button class="link" aria-label=${'Stage ' + c.path} onClick=${() => write('git_stage', { files: [c.path] })}>Stage</button>
            ${!c.conflicted && html`<button class="link danger" aria-label=${'Discard ' + c.path} onClick=${() => discardFile(c)}>Discard</button>`}`}
      </li>`)}</ul>
      ${diff && html`<${Diff} file=${diff.file} actions=${hunkActions} />`}
      ${done && html`<p class="ok" role="status">${done}</p>`}
      <form class="card" onSubmit=${commit}>
        <label>Commit message<textarea rows="2" required value=${msg} onInput=${(e) => setMsg(e.target.value)}></textarea></label>
        <button class="btn primary" disabled=${!msg.trim()}>${chosen.length ? `Commit ${chosen.length} file${chosen.length === 1 ? '' : 's'}` : 'Commit staged'}</button>
      </form>
      <${GitBranches} s=${s} st=${st} reload=${load} />`}
    <button class="btn ghost" onClick=${load}>Refresh</button>
  </section>`;
}

const LINES = 400;

function Files() {
  const s = S.current && S.sessions.get(S.current);
  const [list, setList] = useState(null);
  const [file, setFile] = useState(null);
  const open = (path) => s && req('file_list', { session_id: s.session_id, path }).then((l) => { setList(l); setFile(null); }, () => {});
  const read = (path, offset, prev) => req('file_read', { session_id: s.session_id, path, offset, limit: LINES })
    .then((f) => {
      const lines = f.content ? f.content.replace(/\n$/, '').split('\n') : [];
      setFile({ ...f, all: prev ? prev.all.concat(lines) : lines });
    }, () => {});
  useEffect(() => { open('.'); }, [S.current, S.conn]);
  if (!s) return needSession('Files');
  if (file) {
    const more = file.offset + file.returned_lines < file.lines || file.truncated;
    return html`<section aria-labelledby="h-file">
      <button class="link" onClick=${() => setFile(null)}>← ${list ? list.path || '.' : 'Back'}</button>
      <h2 id="h-file" class="mono">${file.path}</h2>
      <p class="muted small">${file.lines} lines · ${file.size} bytes · ${file.encoding}</p>
      ${file.binary ? html`<p>Binary file: not shown.</p>` : html`<pre class="code viewer"><code>${file.all.map((l, i) =>
        html`<span class="ln"><span class="n" aria-hidden="true">${i + 1}</span>${highlightLine(l, file.path)}</span>`)}</code></pre>`}
      ${more && html`<button class="btn" onClick=${() => read(file.path, file.offset + file.returned_lines, file)}>Load more lines</button>`}
    </section>`;
  }
  return html`<section aria-labelledby="h-files">
    <h2 id="h-files">Files</h2>
    ${list && html`<p class="mono small">/${list.path === '.' ? '' : list.path}</p>
      <ul class="files">
        ${list.path !== '.' && list.path !== '' && html`<li><button class="link" onClick=${() => open(list.parent || '.')}>..</button></li>`}
        ${list.entries.map((e) => html`<li key=${e.path}><button class="link mono" onClick=${() => (e.type === 'directory' ? open(e.path) : read(e.path, 0))}>
          ${e.type === 'directory' ? '▸ ' + e.name + '/' : e.name}</button> <span class="muted small">${e.type === 'file' ? e.size + ' B' : ''}</span></li>`)}
      </ul>
      ${list.has_more && html`<p class="muted small">Showing ${list.entries.length} of ${list.total}.</p>`}`}
  </section>`;
}

function More() {
  const a = S.ack || {};
  const h = S.health;
  const [name, setName] = useState(a.device_name || '');
  useEffect(() => { if (S.conn === 'online') conn.send('device_list', {}); }, [S.conn]);
  const rename = (e) => {
    e.preventDefault();
    req('device_rename', { device_id: a.device_id, name }).then(() => { a.device_name = name.trim(); toast('Renamed.'); }, () => {});
  };
  return html`<section aria-labelledby="h-conn">
    <h2 id="h-conn">Connection</h2>
    <dl class="kv">
      <dt>Status</dt><dd>${S.conn}</dd>
      ${S.conn === 'online' && html`<dt>Transport</dt><dd>${conn.transport() === 'HTTPS' ? 'HTTPS (fallback: this browser could not open a WebSocket)' : 'WebSocket'}</dd>`}
      <dt>Mode</dt><dd>${a.connection_mode || '—'}<div class="muted small">${a.connection_mode_description || ''}</div></dd>
      <dt>Daemon</dt><dd class="mono small">${a.bridge_url || location.host} · ${a.server_version || ''}</dd>
      ${h && html`<dt>Health</dt><dd>${h.status}${h.latency_ms !== undefined ? ` · ${h.latency_ms} ms` : ''}</dd>`}
    </dl>
    ${h && (h.warnings || []).length > 0 && html`<ul class="warns">${h.warnings.map((w) => html`<li><strong>${w}</strong>: ${(h.warning_details || {})[w]}</li>`)}</ul>`}
    <form class="card" onSubmit=${rename}>
      <label>This device's name<input value=${name} maxlength="64" onInput=${(e) => setName(e.target.value)} /></label>
      <button class="btn">Rename</button>
    </form>
    <${Devices} />
  </section>`;
}

function Devices() {
  const revoke = (d) => {
    if (!confirm(`Revoke ${d.name}? It is cut off at once and must be paired again.`)) return;
    req('device_revoke', { device_id: d.device_id }).catch(() => {});
  };
  return html`<section aria-labelledby="h-dev">
    <h2 id="h-dev">Devices</h2>
    ${!S.devices ? html`<p class="muted">Loading…</p>` : html`<ul class="cards">${S.devices.map((d) => html`<li class="card" key=${d.device_id}>
      <div class="row"><strong>${d.name}</strong>${d.current ? html`<span class="badge">this device</span>` : d.online ? html`<span class="badge st-idle">online</span>` : ''}</div>
      <div class="muted small">${d.platform || '—'} · paired ${new Date(d.paired_at).toLocaleDateString()}${d.last_seen ? ' · seen ' + new Date(d.last_seen).toLocaleString() : ''}</div>
      ${d.revoked ? html`<div class="badge st-closed">revoked</div>` : html`<button class="btn danger" aria-label=${'Revoke ' + d.name} onClick=${() => revoke(d)}>Revoke</button>`}
    </li>`)}</ul>`}
  </section>`;
}

function Unpaired() {
  return html`<main class="center">
    <h1>tether</h1>
    <p>${storedToken() ? 'Connecting…' : 'This browser is not paired with the daemon.'}</p>
    ${S.unpairedReason && html`<p class="err" role="alert">${S.unpairedReason}</p>`}
    <p class="muted">Run <code>tether pair</code> on the computer and scan the code with this phone's camera.</p>
  </main>`;
}

function App() {
  if (S.conn === 'unpaired') return html`<${Unpaired} />`;
  const screens = { sessions: Sessions, history: History, runs: Runs, chat: Chat, approvals: Approvals, git: Git, files: Files, more: More, devices: More };
  const Screen = screens[S.screen];
  return html`<${TopBar} /><${ConnBanner} />
    <main id="main"><${Screen} /></main>
    ${S.toast && html`<div class="toast" role="status">${S.toast}</div>`}
    <${Nav} />`;
}

if ('serviceWorker' in navigator) navigator.serviceWorker.register('/sw.js').catch(() => {});
document.getElementById('app').textContent = '';
conn.start();
update();
