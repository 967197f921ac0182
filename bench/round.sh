#!/usr/bin/env bash
# Measures every row of the performance table (BENCHMARKS.md, "Performance
# round") in one invocation, side by side with each row's reference, and
# prints the table in Markdown: medians and ranges over RUNS rounds.
#
# Connection rows (cmd/tether-load; the servers on core 0 and the load tool
# on core 1 when there are two cores): tether against the minimal Go server
# (TLS, upgrade, auth with a fixed token, heartbeat: the ceiling), and the
# Node reference (bench/node-reference) when node is installed, and
# ReCursor's own bridge when RECURSOR_BRIDGE names a built one. Each run
# starts every server afresh, alternating.
# Piece rows (go test -bench): git status and diff against plain git on a
# 50,000-file repository, file_list and file_read, a hook's question
# reaching the phone, the daemon's share of message -> first chunk (on the
# data directory's disk, and on tmpfs to show the commit's fsync).
#
# Environment:
#   RUNS      rounds per measurement (default 5)
#   DURATION  length of a handshake run (default 5s)
#   QUIET     length of the idle (quiet) run (default 60s)
#   IDLE_N    idle connections for memory per connection (default 5000)
#   OUT       directory for the raw outputs (default: a temporary one, kept)
#   RECURSOR_BRIDGE  a built ReCursor bridge (its packages/bridge folder, see
#             bench/README.md): adds it as the target "recursor" (optional)
set -euo pipefail

# One round at a time on a machine: the servers listen on fixed ports, and
# two rounds at once would also measure each other. flock -o keeps the lock
# in flock itself, not in the servers and tests the round starts.
lock=/tmp/tether-bench-round.lock
if [ -z "${TETHER_ROUND_LOCKED:-}" ]; then
  export TETHER_ROUND_LOCKED=1
  flock -n -o "$lock" true || echo "waiting for another bench/round.sh on this machine to finish" >&2
  exec flock -o "$lock" "$0" "$@"
fi
cd "$(dirname "$0")/.."

RUNS=${RUNS:-5}
DURATION=${DURATION:-5s}
QUIET=${QUIET:-60s}
IDLE_N=${IDLE_N:-5000}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "raw outputs in $OUT" >&2

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
server=() client=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  server=(taskset -c 0) client=(taskset -c 1)
fi

bin=$OUT/bin
mkdir -p "$bin"
go build -o "$bin/tether" ./cmd/tether
go build -o "$bin/tether-load" ./cmd/tether-load

# A fresh daemon's data directory with one paired device (an app code is
# the device's token from its first use on).
data=$OUT/data
rm -rf "$data"
pairing=$("$bin/tether" pair --data "$data" --app --json --listen 127.0.0.1:17440)
TT=$(sed -E 's/.*"token":"([^"]+)".*/\1/' <<<"$pairing")
fp=$(sed -E 's/.*"fp":"([^"]+)".*/\1/' <<<"$pairing")
export TT

targets=(
  -target "tether=wss://127.0.0.1:17440/ws,env:TT,,$fp"
  -start "tether=${server[*]} $bin/tether serve --data $data --listen 127.0.0.1:17440 --log-level warn --print-pairing=false"
  -target "minimal=wss://127.0.0.1:18444/ws,env:TT,,$fp"
  -start "minimal=${server[*]} $bin/tether-load minimal-server -listen 127.0.0.1:18444 -cert $data/tls/cert.pem -key $data/tls/key.pem -token env:TT"
)
if command -v node >/dev/null; then
  [ -d bench/node-reference/node_modules/ws ] || (cd bench/node-reference && npm ci --no-audit --no-fund >&2)
  targets+=(-target "node=wss://127.0.0.1:18443/ws,env:TT,,$fp"
    -start "node=${server[*]} node bench/node-reference/server.mjs --port 18443 --cert $data/tls/cert.pem --key $data/tls/key.pem")
  export REF_TOKEN=$TT
fi
# ReCursor's own bridge, built by the user (bench/README.md, "ReCursor's
# bridge"): configured by environment only. BRIDGE_TOKEN is the one token
# its auth accepts; HOOK_TOKEN and ALLOWED_PROJECT_ROOT are required but
# unused here; DOTENV_CONFIG_PATH=/dev/null keeps it from reading a .env.
if [ -n "${RECURSOR_BRIDGE:-}" ]; then
  if ! command -v node >/dev/null || [ ! -f "$RECURSOR_BRIDGE/dist/index.js" ]; then
    echo "RECURSOR_BRIDGE=$RECURSOR_BRIDGE: needs node and a built bridge (dist/index.js)" >&2
    exit 1
  fi
  mkdir -p "$OUT/recursor-root"
  HOOK_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  export BRIDGE_TOKEN=$TT HOOK_TOKEN
  targets+=(-target "recursor=wss://127.0.0.1:18445/ws,env:TT,,$fp"
    -start "recursor=${server[*]} env DOTENV_CONFIG_PATH=/dev/null PORT=18445 ALLOWED_PROJECT_ROOT=$OUT/recursor-root BRIDGE_TLS_CERT_PATH=$data/tls/cert.pem BRIDGE_TLS_KEY_PATH=$data/tls/key.pem node $RECURSOR_BRIDGE/dist/index.js")
fi

load() { "${client[@]}" "$bin/tether-load" -runs "$RUNS" "${targets[@]}" "$@"; }
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >"$OUT/load.txt"
load -mode handshake -c 1,32 -d "$DURATION" >"$OUT/handshake.txt" 2>&1
load -mode quiet -c 1 -d "$QUIET" >"$OUT/quiet.txt" 2>&1
load -mode idle -n "$IDLE_N" >"$OUT/idle.txt" 2>&1

bench() { # package, pattern, output name, extra environment...
  local pkg=$1 pattern=$2 name=$3
  shift 3
  (cd "$pkg" && env "$@" go test -run '^$' -bench "$pattern" -count "$RUNS" . >"$OUT/$name.txt" 2>&1)
}
bench gitops 'BenchmarkStatus|BenchmarkDiff' git
bench cmd/tether 'BenchmarkFileRoundTrip|BenchmarkHookApproval' phone
bench bridge 'BenchmarkFirstChunk' first-chunk-disk
bench bridge 'BenchmarkFirstChunk' first-chunk-tmpfs TMPDIR=/dev/shm
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/load.txt"

# The table. tether-load prints "target mode param metric unit median
# run1 run2 …"; go test prints "name N value unit value unit …".
{
  echo "## Performance round: $(date -u +%F), $(git rev-parse --short HEAD), $RUNS rounds"
  echo
  sed 's/^/- /' "$OUT/load.txt"
  echo
  echo "| path | target | median | range |"
  echo "|---|---|---|---|"
  awk '$2 ~ /^(handshake|quiet|idle)$/ && $4 ~ /^(rate|auth_ack_p50|auth_ack_p99|server_cpu_ms|ctx_switches|kib_per_conn)$/ {
      lo = $7; hi = $7
      for (i = 7; i <= NF; i++) { if ($i + 0 < lo + 0) lo = $i; if ($i + 0 > hi + 0) hi = $i }
      printf "| %s %s %s (%s) | %s | %s | %s–%s |\n", $2, $3, $4, $5, $1, $6, lo, hi
    }' "$OUT/handshake.txt" "$OUT/quiet.txt" "$OUT/idle.txt"
  for f in git phone first-chunk-disk first-chunk-tmpfs; do
    awk -v src="$f" '/^Benchmark/ {
        name = $1; sub(/-[0-9]+$/, "", name)
        for (i = 3; i < NF; i += 2) { key = name SUBSEP $(i + 1); vals[key] = vals[key] " " $i; keys[key] = 1 }
      }
      END {
        for (key in keys) {
          n = split(substr(vals[key], 2), v, " ")
          for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
          split(key, k, SUBSEP)
          printf "| %s %s | %s | %s | %s–%s |\n", k[1], k[2], src, (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2), v[1], v[n]
        }
      }' "$OUT/$f.txt" | sort
  done
} >"$OUT/rows.md"

# The ratio to each row's reference, measured in the same run: the minimal
# server for the connection rows, plain git for the git rows.
awk -F' [|] ' '
  function ref(path, target) {
    if (path ~ /^(handshake|quiet|idle) /) return path SUBSEP "minimal"
    if (path ~ /^BenchmarkStatus\//) { p = path; sub(/impl=[^ ]*/, "impl=git-status-plain", p); return p SUBSEP target }
    if (path ~ /^BenchmarkDiff\//) { p = path; sub(/impl=[^ ]*/, "impl=git-cli", p); return p SUBSEP target }
    return ""
  }
  NR == FNR { if ($1 ~ /^[|] /) { path = substr($1, 3); median[path SUBSEP $2] = $3 }; next }
  /^[|] path/ { print $0 " ÷ reference |"; next }
  /^[|]---/ { print "|---|---|---|---|---|"; next }
  /^[|] / {
    path = substr($1, 3); r = ref(path, $2); ratio = "—"
    if (r != "" && (r in median) && median[r] + 0 > 0 && r != path SUBSEP $2) ratio = sprintf("%.2f", $3 / median[r])
    print $0 " " ratio " |"; next
  }
  { print }
' "$OUT/rows.md" "$OUT/rows.md" | tee "$OUT/table.md"
