// A minimal Node bridge that speaks the connection-level subset of the phone
// protocol (PROTOCOL.md): auth → connection_ack or
// connection_error, heartbeat_ping → heartbeat_pong. It is the yardstick that
// tether's performance targets are stated against, written the way a
// reasonable production bridge on ws 8 would be: one https server, one
// WebSocketServer, JSON text frames, an auth deadline, a WebSocket-level
// keep-alive, constant-time token comparison, graceful shutdown.
//
// Configuration (flags win over environment):
//   --host H        / REF_HOST   listen address (default 127.0.0.1)
//   --port P        / REF_PORT   listen port (default 8443; 0 picks one)
//   --token T       / REF_TOKEN  the device token every client must present (required)
//   --cert PATH     / REF_CERT   PEM certificate for wss
//   --key PATH      / REF_KEY    PEM private key for wss
//   --plain         / REF_PLAIN=1  serve plain ws:// instead of wss://
//
// On start it prints one line: "listening ws[s]://HOST:PORT/ws pid PID".

import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { parseArgs } from 'node:util';
import { WebSocketServer } from 'ws';

const SERVER_VERSION = '0.1.0';
const AUTH_TIMEOUT_MS = 10_000;
const KEEPALIVE_MS = 30_000;
const MAX_PAYLOAD = 1 << 20;

function config() {
  const { values } = parseArgs({
    options: {
      host: { type: 'string' },
      port: { type: 'string' },
      token: { type: 'string' },
      cert: { type: 'string' },
      key: { type: 'string' },
      plain: { type: 'boolean' },
    },
  });
  const env = process.env;
  const cfg = {
    host: values.host ?? env.REF_HOST ?? '127.0.0.1',
    port: Number(values.port ?? env.REF_PORT ?? 8443),
    token: values.token ?? env.REF_TOKEN ?? '',
    cert: values.cert ?? env.REF_CERT ?? '',
    key: values.key ?? env.REF_KEY ?? '',
    plain: values.plain ?? env.REF_PLAIN === '1',
  };
  if (cfg.token === '') throw new Error('a token is required (--token or REF_TOKEN)');
  if (!Number.isInteger(cfg.port) || cfg.port < 0 || cfg.port > 65535) {
    throw new Error(`bad port ${cfg.port}`);
  }
  if (!cfg.plain && (cfg.cert === '' || cfg.key === '')) {
    throw new Error('wss needs --cert and --key (or REF_CERT and REF_KEY), or --plain for ws');
  }
  return cfg;
}

const digest = (s) => createHash('sha256').update(s, 'utf8').digest();

function frame(type, id, payload) {
  const msg = { type, timestamp: new Date().toISOString(), payload };
  if (id !== undefined) msg.id = id;
  return JSON.stringify(msg);
}

function main() {
  const cfg = config();
  const tokenDigest = digest(cfg.token);
  const scheme = cfg.plain ? 'ws' : 'wss';

  const server = cfg.plain
    ? createHttpServer()
    : createHttpsServer({ cert: readFileSync(cfg.cert), key: readFileSync(cfg.key) });
  server.on('request', (_req, res) => {
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found\n');
  });

  const wss = new WebSocketServer({ server, path: '/ws', maxPayload: MAX_PAYLOAD });

  function ack(ws, id) {
    const addr = server.address();
    ws.send(
      frame('connection_ack', id, {
        server_version: SERVER_VERSION,
        protocol_version: '1.0',
        supported_agents: ['claude-code', 'demo'],
        connection_mode: 'local_only',
        connection_mode_description: 'Loopback connection on this machine',
        bridge_url: `${scheme}://${cfg.host}:${addr.port}/ws`,
        requires_health_verification: false,
        active_sessions: [],
      }),
    );
  }

  function refuse(ws, id, code, message) {
    ws.send(frame('connection_error', id, { code, message }));
    ws.close(1008, code);
  }

  wss.on('connection', (ws) => {
    let authed = false;
    ws.isAlive = true;
    ws.on('pong', () => {
      ws.isAlive = true;
    });
    const authTimer = setTimeout(() => refuse(ws, undefined, 'AUTH_FAILED', 'No auth received in time'), AUTH_TIMEOUT_MS);
    ws.on('close', () => clearTimeout(authTimer));
    ws.on('error', () => ws.terminate());

    ws.on('message', (data, isBinary) => {
      let msg;
      try {
        msg = isBinary ? null : JSON.parse(data.toString('utf8'));
      } catch {
        msg = null;
      }
      if (msg === null || typeof msg !== 'object' || typeof msg.type !== 'string') {
        if (!authed) {
          refuse(ws, undefined, 'AUTH_FAILED', 'Expected an auth message');
          return;
        }
        ws.send(frame('error', undefined, { code: 'INVALID_MESSAGE', message: 'Not a protocol message', recoverable: true }));
        return;
      }
      const id = typeof msg.id === 'string' ? msg.id : undefined;

      if (!authed) {
        const token = msg.type === 'auth' && typeof msg.payload?.token === 'string' ? msg.payload.token : null;
        if (token === null || !timingSafeEqual(digest(token), tokenDigest)) {
          refuse(ws, id, 'AUTH_FAILED', 'Invalid or expired token');
          return;
        }
        authed = true;
        clearTimeout(authTimer);
        ack(ws, id);
        return;
      }

      switch (msg.type) {
        case 'heartbeat_ping':
          ws.send(frame('heartbeat_pong', id, {}));
          break;
        default:
          ws.send(frame('error', id, { code: 'UNKNOWN_TYPE', message: `Unknown message type ${msg.type}`, recoverable: true }));
      }
    });
  });

  const keepalive = setInterval(() => {
    for (const ws of wss.clients) {
      if (!ws.isAlive) {
        ws.terminate();
        continue;
      }
      ws.isAlive = false;
      ws.ping();
    }
  }, KEEPALIVE_MS);

  function shutdown() {
    clearInterval(keepalive);
    for (const ws of wss.clients) ws.close(1001, 'server shutting down');
    wss.close();
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 2_000).unref();
  }
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);

  server.listen(cfg.port, cfg.host, () => {
    const { port } = server.address();
    console.log(`listening ${scheme}://${cfg.host}:${port}/ws pid ${process.pid}`);
  });
}

try {
  main();
} catch (err) {
  console.error(`node-reference: ${err.message}`);
  process.exit(2);
}
