// The connection to the daemon: pairing from the address bar, auth with the
// stored device token, requests matched to replies by id, reconnection with
// backoff and resumption from the last event seq seen (nothing twice,
// nothing missing).

const TOKEN_KEY = 'tether.device_token';
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

export function storedToken() { return localStorage.getItem(TOKEN_KEY) || ''; }

function newID(prefix) {
  const b = crypto.getRandomValues(new Uint8Array(8));
  return prefix + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}
export { newID };

// Connection keeps one WebSocket open while it can. Frames go to onFrame;
// onState hears "connecting", "online", "offline" (with the retry delay) and
// "unpaired" (the token is refused: revoked, expired or never valid).
export class Connection {
  constructor({ onFrame, onState, code, name }) {
    this.onFrame = onFrame;
    this.onState = onState;
    this.code = code;
    this.name = name;
    this.lastSeq = 0;
    this.pending = new Map();
    this.attempt = 0;
    this.ws = null;
    this.ready = false;
    this.stopped = false;
    this.timer = 0;
    addEventListener('online', () => this.retryNow());
  }

  url() {
    return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws';
  }

  start() {
    clearTimeout(this.timer);
    if (this.stopped) return;
    const token = this.code || storedToken();
    if (!token) { this.onState('unpaired', {}); return; }
    this.onState('connecting', {});
    const ws = new WebSocket(this.url());
    this.ws = ws;
    ws.onopen = () => {
      const p = { token, client_version: CLIENT_VERSION, platform: 'web', protocol_version: '1.0', last_seq: this.lastSeq, capabilities: ['hook_approvals'] };
      if (this.code) p.device_name = this.name;
      ws.send(JSON.stringify({ type: 'auth', id: newID('auth-'), timestamp: new Date().toISOString(), payload: p }));
    };
    ws.onmessage = (ev) => this.receive(ws, ev.data);
    ws.onclose = () => this.closed(ws);
  }

  receive(ws, data) {
    let f;
    try { f = JSON.parse(data); } catch { return; }
    if (!f || typeof f.type !== 'string') return;
    const p = f.payload || {};
    if (f.type === 'connection_ack') {
      if (p.device_token) localStorage.setItem(TOKEN_KEY, p.device_token);
      this.code = '';
      this.attempt = 0;
      this.ready = true;
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
    if (typeof f.seq === 'number') {
      // Notifications not yet acknowledged come again even when older than
      // last_seq: acknowledge them, show nothing twice.
      if (f.type === 'notification') this.send('notification_ack', { notification_ids: [p.notification_id] });
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

  closed(ws) {
    if (ws !== this.ws) return;
    this.ws = null;
    this.ready = false;
    for (const [, r] of this.pending) r.reject(Object.assign(new Error('The connection was lost'), { code: 'OFFLINE' }));
    this.pending.clear();
    if (this.stopped) return;
    // Exponential backoff with jitter: 0.5 s, 1 s, 2 s … at most 15 s.
    const delay = Math.min(15000, 500 * 2 ** this.attempt) * (0.75 + Math.random() / 2);
    this.attempt++;
    this.onState('offline', { retryAt: Date.now() + delay });
    this.timer = setTimeout(() => this.start(), delay);
  }

  retryNow() {
    if (!this.ws && !this.stopped) { this.attempt = 0; this.start(); }
  }

  // send writes a frame without waiting for a reply; false when offline.
  send(type, payload, id) {
    if (!this.ws || !this.ready) return false;
    this.ws.send(JSON.stringify({ type, id: id || newID('c-'), timestamp: new Date().toISOString(), payload }));
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
