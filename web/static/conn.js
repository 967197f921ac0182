// The connection to the daemon: pairing from the address bar, auth with the
// stored device token, requests matched to replies by id, reconnection with
// backoff and resumption from the last event seq seen (nothing twice,
// nothing missing). Over a WebSocket, or over plain HTTPS requests when a
// WebSocket cannot be opened (iOS refuses wss:// to a certificate accepted
// only for the page): the same frames either way.

const TOKEN_KEY = 'tether.device_token';
// TRANSPORT_KEY remembers, per origin, that the WebSocket could not be
// opened here and the HTTPS fallback could; it is tried again after a week.
const TRANSPORT_KEY = 'tether.transport';
const REMEMBER_MS = 7 * 24 * 3600 * 1000;
// SOCKET_OK_KEY says a WebSocket has worked on this origin.
const SOCKET_OK_KEY = 'tether.socket_ok';
// While idle over the fallback the client POSTs a heartbeat this often: the
// daemon drops a fallback client it has not heard from in 60 s.
const HEARTBEAT_MS = 25000;
export const CLIENT_VERSION = '0.1.0';

// pairingCode takes "#pair=CODE" out of the address bar (so it is neither
// kept in history nor reused) and returns the code, or "".
export function pairingCode() {
  const m = /(?:^#|&)pair=([^&]+)/.exec(location.hash);
  if (!m) return '';
  history.replaceState(null, '', location.pathname + location.search);
  return decodeURIComponent(m[1]);
}

// deviceName guesses a readable name for this browser from its user agent.
export function deviceName() {
  const ua = navigator.userAgent;
  const os = /iPhone/.test(ua) ? 'iPhone' : /iPad/.test(ua) ? 'iPad' : /Android/.test(ua) ? 'Android'
    : /Mac OS X/.test(ua) ? 'Mac' : /Windows/.test(ua) ? 'Windows' : /Linux/.test(ua) ? 'Linux' : 'device';
  const br = /Edg\//.test(ua) ? 'Edge' : /Firefox\//.test(ua) ? 'Firefox' : /(Chrome|Chromium)\//.test(ua) ? 'Chrome'
    : /Safari\//.test(ua) ? 'Safari' : 'Browser';
  return `${br} on ${os}`;
}

// rememberedFallback says whether this origin needed the HTTPS fallback
// within the last week.
function rememberedFallback() {
  try {
    const r = JSON.parse(localStorage.getItem(TRANSPORT_KEY) || 'null');
    return !!(r && r.fallback && Date.now() - r.at < REMEMBER_MS);
  } catch {
    return false;
  }
}

export function storedToken() { return localStorage.getItem(TOKEN_KEY) || ''; }

function newID(prefix) {
  const b = crypto.getRandomValues(new Uint8Array(8));
  return prefix + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}
export { newID };

function frameText(type, payload, id) {
  return JSON.stringify({ type, id: id || newID('c-'), timestamp: new Date().toISOString(), payload });
}

// SocketLink is a WebSocket carrying frames. on.frame gets each frame's
// text, on.closed(reached) once at the end: reached says whether the
// daemon was reached at all.
class SocketLink {
  constructor(auth, on) {
    this.name = 'WebSocket';
    this.reached = false;
    const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws');
    this.ws = ws;
    ws.onopen = () => { this.reached = true; ws.send(auth); };
    ws.onmessage = (ev) => on.frame(ev.data);
    ws.onclose = () => on.closed(this.reached);
  }

  send(text) { this.ws.send(text); }

  close() { this.ws.close(); }
}

// StreamLink is the HTTPS fallback: the auth frame opens a Server-Sent
// Events stream (POST /events, read with fetch so that no token is ever in
// a URL), and frames go up as POSTs to /send with the connection's token,
// one at a time and in order.
class StreamLink {
  constructor(auth, lastSeq, on) {
    this.name = 'HTTPS';
    this.reached = false;
    this.on = on;
    this.abort = new AbortController();
    this.queue = Promise.resolve();
    this.token = '';
    this.beat = 0;
    this.ended = false;
    this.run(auth, lastSeq);
  }

  async run(auth, lastSeq) {
    try {
      const headers = { 'Content-Type': 'application/json' };
      if (lastSeq > 0) headers['Last-Event-ID'] = String(lastSeq);
      const res = await fetch('/events', { method: 'POST', body: auth, headers, cache: 'no-store', signal: this.abort.signal });
      this.reached = true;
      if (!res.ok) {
        // A refused auth: the body is the connection_error frame.
        const text = await res.text();
        if (text) this.on.frame(text);
        return;
      }
      this.token = res.headers.get('Tether-Connection') || '';
      this.beat = setInterval(() => this.send(frameText('heartbeat_ping', {}, newID('hb-'))), HEARTBEAT_MS);
      await this.read(res.body.pipeThrough(new TextDecoderStream()).getReader());
    } catch {
      // A network error or our own abort: the stream is over either way.
    } finally {
      this.end();
    }
  }

  // read parses the event stream: data lines make a frame, a blank line
  // ends it, "event: close" ends the connection, comments keep it alive.
  async read(reader) {
    let buf = '';
    let data = [];
    let event = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).replace(/\r$/, '');
        buf = buf.slice(i + 1);
        if (line === '') {
          if (event === 'close') return;
          if (data.length) this.on.frame(data.join('\n'));
          data = [];
          event = '';
          continue;
        }
        const colon = line.indexOf(':');
        if (colon === 0) continue;
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'data') data.push(value);
        else if (field === 'event') event = value;
      }
    }
  }

  send(text) {
    this.queue = this.queue.then(async () => {
      if (this.ended) return;
      const res = await fetch('/send', {
        method: 'POST', body: text, cache: 'no-store',
        headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + this.token },
      });
      if (res.status === 202) return;
      // A refused frame is answered with an error frame; an unknown token
      // means the daemon has ended this connection.
      const reply = await res.text();
      if (reply) this.on.frame(reply);
      if (res.status === 401) this.close();
    }).catch(() => this.close());
  }

  close() { this.abort.abort(); }

  end() {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.beat);
    this.on.closed(this.reached);
  }
}

// Connection keeps one connection open while it can. Frames go to onFrame;
// onState hears "connecting", "online" (with the ack and the transport's
// name), "offline" (with the retry delay) and "unpaired" (the token is
// refused: revoked, expired or never valid).
export class Connection {
  constructor({ onFrame, onState, code, name }) {
    this.onFrame = onFrame;
    this.onState = onState;
    this.code = code;
    this.name = name;
    this.lastSeq = 0;
    this.pending = new Map();
    this.attempt = 0;
    this.link = null;
    this.fallback = rememberedFallback();
    this.socketFailures = 0; // WebSockets that failed while the daemon answered HTTPS
    this.ready = false;
    this.stopped = false;
    this.timer = 0;
    addEventListener('online', () => this.retryNow());
  }

  start() {
    clearTimeout(this.timer);
    if (this.stopped) return;
    const token = this.code || storedToken();
    if (!token) { this.onState('unpaired', {}); return; }
    this.onState('connecting', {});
    // The page loads each session's history itself (history_pages): a
    // fresh page starts at the log's head, a reconnect after what it saw.
    const p = { token, client_version: CLIENT_VERSION, platform: 'web', protocol_version: '1.0', capabilities: ['hook_approvals', 'history_pages'] };
    if (this.lastSeq > 0) p.last_seq = this.lastSeq;
    if (this.code) p.device_name = this.name;
    const auth = frameText('auth', p, newID('auth-'));
    let link = null;
    const on = { frame: (text) => this.receive(link, text), closed: (reached) => this.closed(link, reached) };
    if (!this.fallback) {
      try {
        link = new SocketLink(auth, on);
      } catch {
        // No WebSocket in this page at all.
        this.fallback = true;
      }
    }
    if (this.fallback) link = new StreamLink(auth, this.lastSeq, on);
    this.link = link;
  }

  // transport names the transport in use, for the page to show.
  transport() { return this.link ? this.link.name : ''; }

  receive(link, data) {
    if (link !== this.link) return;
    let f;
    try { f = JSON.parse(data); } catch { return; }
    if (!f || typeof f.type !== 'string') return;
    const p = f.payload || {};
    if (f.type === 'connection_ack') {
      if (p.device_token) localStorage.setItem(TOKEN_KEY, p.device_token);
      this.code = '';
      this.attempt = 0;
      this.ready = true;
      this.lastSeq = Math.max(this.lastSeq, p.stream_after || 0);
      if (this.fallback) localStorage.setItem(TRANSPORT_KEY, JSON.stringify({ fallback: true, at: Date.now() }));
      else localStorage.setItem(SOCKET_OK_KEY, '1');
      this.onState('online', p);
    } else if (f.type === 'connection_error') {
      if (p.code === 'AUTH_FAILED') {
        this.stopped = true;
        if (!this.code) localStorage.removeItem(TOKEN_KEY);
        this.code = '';
        this.onState('unpaired', p);
      }
      this.onFrame(f);
      return;
    }
    // Every notification is acknowledged, so it is not delivered again; a
    // redelivery (one this device has not acknowledged yet) has no seq.
    if (f.type === 'notification') this.send('notification_ack', { notification_ids: [p.notification_id] });
    if (typeof f.seq === 'number') {
      if (f.seq <= this.lastSeq) return;
      this.lastSeq = f.seq;
    }
    const req = f.id && this.pending.get(f.id);
    if (req) {
      f.answered = true;
      if (f.type === 'error') { this.pending.delete(f.id); req.reject(Object.assign(new Error(p.message || p.code), { code: p.code })); }
      else if (!req.until || req.until === f.type) { this.pending.delete(f.id); req.resolve(p); }
    }
    this.onFrame(f);
  }

  closed(link, reached) {
    if (link !== this.link) return;
    this.link = null;
    this.ready = false;
    for (const [, r] of this.pending) r.reject(Object.assign(new Error('The connection was lost'), { code: 'OFFLINE' }));
    this.pending.clear();
    if (this.stopped) return;
    if (reached) this.socketFailures = 0;
    if (!reached && !this.fallback) {
      // The WebSocket could not be opened. Is the daemon there over plain
      // HTTPS? Then the WebSocket is what is refused (WebKit and a
      // certificate accepted only for the page): after a second such
      // failure (a fourth, where WebSockets worked before), the fallback.
      // Else the daemon is down: back off.
      this.socketFailures++;
      fetch('/healthz', { cache: 'no-store' }).then((r) => r.ok, () => false).then((up) => {
        if (this.stopped || this.link) return;
        if (!up) { this.socketFailures = 0; this.backoff(); return; }
        // Where WebSockets worked before, a failure while the daemon
        // answers is first taken for a restart in progress.
        const worked = localStorage.getItem(SOCKET_OK_KEY) === '1';
        if (this.socketFailures >= (worked ? 4 : 2)) {
          this.fallback = true;
          this.start();
        } else if (worked) {
          this.backoff();
        } else {
          this.start();
        }
      });
      return;
    }
    // The fallback did not get through either (the daemon went away, the
    // network is gone): next time start with the WebSocket again unless
    // the fallback is known to be what works here.
    if (!reached) this.fallback = rememberedFallback();
    this.backoff();
  }

  // backoff schedules the next attempt: 0.5 s, 1 s, 2 s … at most 15 s,
  // with jitter.
  backoff() {
    const delay = Math.min(15000, 500 * 2 ** this.attempt) * (0.75 + Math.random() / 2);
    this.attempt++;
    this.onState('offline', { retryAt: Date.now() + delay });
    this.timer = setTimeout(() => this.start(), delay);
  }

  retryNow() {
    if (!this.link && !this.stopped) { this.attempt = 0; this.start(); }
  }

  // send writes a frame without waiting for a reply; false when offline.
  send(type, payload, id) {
    if (!this.link || !this.ready) return false;
    this.link.send(frameText(type, payload, id));
    return true;
  }

  // request sends a frame and resolves with the payload of the reply that
  // echoes its id (of type until, when given), or rejects with an error
  // frame's message.
  request(type, payload, until) {
    return new Promise((resolve, reject) => {
      const id = newID('r-');
      if (!this.send(type, payload, id)) { reject(Object.assign(new Error('Offline'), { code: 'OFFLINE' })); return; }
      this.pending.set(id, { resolve, reject, until });
    });
  }
}
