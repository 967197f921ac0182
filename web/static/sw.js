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
