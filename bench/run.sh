#!/usr/bin/env bash
# Measures the Node reference bridge (bench/node-reference) and, when told
# where it is, a tether daemon, side by side with cmd/tether-load.
# See bench/README.md. Extra arguments go to every tether-load invocation
# (for example -json, or -runs 3).
#
# Environment:
#   MODES          modes to run (default idle,handshake,heartbeat)
#   RUNS           runs per measurement (default 5)
#   DURATION       length of a handshake or heartbeat run (default 10s)
#   N              idle connection counts over wss (default 1000,10000)
#   N_PLAIN        idle connection counts over plain ws, Node only (default 1000,10000; empty: skip)
#   C              concurrent clients for handshake and heartbeat (default 1,32)
#   NODE_PORT      wss port of the Node reference (default 18443)
#   NODE_WS_PORT   ws port of the Node reference (default 18080)
#   REF_CERT, REF_KEY  certificate and key for the Node reference (default:
#                  a fresh self-signed P-256 pair in a temporary directory)
#   TETHER_TOKEN   a device token of the tether to measure; without it only
#                  Node is measured
#   TETHER_DATA    tether's data directory (default ~/.local/share/tether):
#                  the certificate fingerprint is taken from tls/cert.pem
#   TETHER_URL     tether's URL (default wss://127.0.0.1:7420/ws)
#   TETHER_FP      sha256:HEX, instead of reading TETHER_DATA's certificate
#   TETHER_PID     tether's PID (default: the process listening on the port)
#   TETHER_BIN     a tether binary: when set, run.sh starts
#                  "TETHER_BIN serve --data TETHER_DATA --listen HOST:PORT"
#                  afresh for every run instead of measuring a running tether
#   TETHER_ARGS    more arguments for that command (for example --log-level warn)
set -euo pipefail
cd "$(dirname "$0")/.."

MODES=${MODES:-idle,handshake,heartbeat}
RUNS=${RUNS:-5}
DURATION=${DURATION:-10s}
N=${N:-1000,10000}
N_PLAIN=${N_PLAIN-1000,10000}
C=${C:-1,32}
NODE_PORT=${NODE_PORT:-18443}
NODE_WS_PORT=${NODE_WS_PORT:-18080}

die() { echo "run.sh: $*" >&2; exit 1; }
fingerprint() { echo "sha256:$(openssl x509 -in "$1" -outform DER | sha256sum | cut -d' ' -f1)"; }

command -v node >/dev/null || die "node is not installed"
[ -d bench/node-reference/node_modules/ws ] || (cd bench/node-reference && npm ci --no-audit --no-fund)

# Up to 10,000 connections: the load tool and each server hold one file
# descriptor per connection. Processes started here inherit this limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 10240 ]; then
  echo "run.sh: ulimit -n is $(ulimit -n); 10,000 idle connections need more (see bench/README.md)" >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

go build -o "$work/tether-load" ./cmd/tether-load

if [ -z "${REF_CERT:-}" ]; then
  REF_CERT=$work/cert.pem REF_KEY=$work/key.pem
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$REF_KEY" -out "$REF_CERT" -days 7 -subj /CN=localhost \
    -addext subjectAltName=IP:127.0.0.1,DNS:localhost 2>/dev/null
fi
REF_TOKEN=$(openssl rand -hex 32)
export REF_TOKEN TETHER_TOKEN="${TETHER_TOKEN:-}"
node_cmd="node bench/node-reference/server.mjs --port $NODE_PORT --cert '$REF_CERT' --key '$REF_KEY'"
node_ws_cmd="node bench/node-reference/server.mjs --port $NODE_WS_PORT --plain"

targets=(-target "node=wss://127.0.0.1:$NODE_PORT/ws,env:REF_TOKEN,,$(fingerprint "$REF_CERT")" -start "node=$node_cmd")

if [ -n "$TETHER_TOKEN" ]; then
  TETHER_DATA=${TETHER_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/tether}
  TETHER_URL=${TETHER_URL:-wss://127.0.0.1:7420/ws}
  hostport=${TETHER_URL#*://}
  hostport=${hostport%%/*}
  port=${hostport##*:}
  if [ -z "${TETHER_FP:-}" ]; then
    [ -f "$TETHER_DATA/tls/cert.pem" ] || die "no $TETHER_DATA/tls/cert.pem: set TETHER_DATA or TETHER_FP"
    TETHER_FP=$(fingerprint "$TETHER_DATA/tls/cert.pem")
  fi
  if [ -n "${TETHER_BIN:-}" ]; then
    targets+=(-target "tether=$TETHER_URL,env:TETHER_TOKEN,,$TETHER_FP"
      -start "tether='$TETHER_BIN' serve --data '$TETHER_DATA' --listen $hostport ${TETHER_ARGS:-}")
  else
    if [ -z "${TETHER_PID:-}" ]; then
      TETHER_PID=$(ss -ltnpH "sport = :$port" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
      [ -n "$TETHER_PID" ] || die "nothing listens on port $port: start tether, or set TETHER_BIN"
    fi
    targets+=(-target "tether=$TETHER_URL,env:TETHER_TOKEN,$TETHER_PID,$TETHER_FP")
  fi
fi

load() { "$work/tether-load" -runs "$RUNS" -d "$DURATION" -c "$C" "$@"; }

echo "== wss: $MODES" >&2
load -mode "$MODES" -n "$N" "${targets[@]}" "$@"

if [ -n "$N_PLAIN" ] && [[ ,$MODES, == *,idle,* ]]; then
  echo "== plain ws: idle" >&2
  load -mode idle -n "$N_PLAIN" -target "node-ws=ws://127.0.0.1:$NODE_WS_PORT/ws,env:REF_TOKEN" -start "node-ws=$node_ws_cmd" "$@"
fi
