// tether's service worker caches the application shell only, so the app
// opens (and says it is offline) without the daemon. It never caches the
// WebSocket, /pair or anything else: no token or data passes through here.
const CACHE = 'tether-shell-v1';
const SHELL = ['/', '/index.html', '/app.js', '/conn.js', '/text.js', '/style.css', '/vendor/preact-htm.js',
  '/manifest.webmanifest', '/icon.svg', '/icon-192.png', '/icon-512.png'];

self.addEventListener('install', (e) => {
  e.waitUntil(caches.open(CACHE).then((c) => c.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (e) => {
  e.waitUntil(caches.keys().then((keys) => Promise.all(keys.filter((k) => k !== CACHE).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

// Network first, so an upgraded daemon serves its own client; the cached
// shell only when the daemon cannot be reached.
self.addEventListener('fetch', (e) => {
  const url = new URL(e.request.url);
  if (e.request.method !== 'GET' || url.origin !== location.origin) return;
  const path = e.request.mode === 'navigate' ? '/' : url.pathname;
  if (!SHELL.includes(path)) return;
  e.respondWith(fetch(e.request).catch(() => caches.match(path)));
});

// ANSWERED tags the one quiet notice of the approvals answered meanwhile.
const ANSWERED = 'tether-answered';

// A push from the daemon (notify.WebPush): show it, one notification per
// approval or session (its tag), or close the one it withdraws (an answered
// approval). Every push shows a notification, a withdrawal a quiet notice
// of the answer: Safari revokes the subscription of a page whose pushes
// show nothing, three times, and Chrome shows a notice of its own. The
// payload never holds a command or a file's content unless the daemon runs
// with --push-detail full.
self.addEventListener('push', (e) => {
  let p = {};
  try { p = e.data ? e.data.json() : {}; } catch { /* shown as an empty notice */ }
  const show = (tag, opts) => self.registration.showNotification(p.title || 'tether', {
    body: p.body || '', tag, icon: '/icon-192.png', data: { url: p.url || '/' }, ...opts,
  });
  if (p.close) {
    e.waitUntil(self.registration.getNotifications({ tag: p.tag })
      .then((ns) => ns.forEach((n) => n.close()))
      .then(() => show(ANSWERED, { silent: true })));
    return;
  }
  e.waitUntil(show(p.tag || ANSWERED, { renotify: Boolean(p.tag) }));
});

// Tapping a notification opens the web client where it points (the
// approval, or the session): a window of it this worker controls (the one
// in front, if any) goes there, else a new one opens. Only a controlled
// window can be navigated by its worker.
self.addEventListener('notificationclick', (e) => {
  e.notification.close();
  // Only the fragment (#session=…&approval=…) is taken: the page opens on
  // this worker's own origin, whichever address the daemon's URL names.
  const url = self.location.origin + '/' + new URL((e.notification.data && e.notification.data.url) || '/', self.location.origin).hash;
  e.waitUntil(self.clients.matchAll({ type: 'window' }).then((wins) => {
    const win = wins.find((w) => w.focused) || wins[0];
    if (win) return win.navigate(url).then((w) => (w || win).focus());
    return self.clients.openWindow(url);
  }));
});
