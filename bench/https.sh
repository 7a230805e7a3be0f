#!/usr/bin/env bash
# HTTPS against plain HTTP on the same server: the cost of TLS with
# keep-alive (wrk, HTTP/1.1), of HTTP/2 (h2load, Debian's nghttp2-client),
# and of a full handshake on every request (new connections a second).
#
#   bench/https.sh
#   DURATION=10s REPS=5 bench/https.sh
#
# One seeded SQLite database; the server runs on it either plain or with
# --tls-cert/--tls-key (a P-256 certificate for 127.0.0.1 made by Go's
# generate_cert.go), pinned to CPU 0, the load generator to CPU 1. Each
# scenario alternates plain and HTTPS REPS times and prints the median
# requests (or connections) a second of each and their ratio (https /
# plain):
#   keepalive_h1  wrk, GET /v1/pets?limit=20 on kept connections
#   keepalive_h2  h2load over TLS with HTTP/2, against h2load --h1 plain
#   new_conns     wrk with Connection: close: a TCP connection (and, over
#                 HTTPS, a full TLS handshake) for every request
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5s}
REPS=${REPS:-3}
CONNS=${CONNS:-32}
STREAMS=${STREAMS:-10} # h2load's streams at once on each connection
PETS=1000
PORT=${PORT:-18193}

. bench/lib.sh
need h2load nghttp2-client
need bc bc

db="$work/bench.db"
seed "$db" "$PETS"
key=$(tail -n 1 "$work/key-$PETS")
(cd "$work" && go run "$(go env GOROOT)/src/crypto/tls/generate_cert.go" --host 127.0.0.1,localhost --ecdsa-curve P256 2>/dev/null)
path="/v1/pets?limit=20"

# serve MODE: the pet store on $db, plain or https, pinned to CPU 0; sets
# $server and $base.
serve() {
  local tls=()
  base="http://127.0.0.1:$PORT"
  if [ "$1" = https ]; then
    tls=(--tls-cert "$work/cert.pem" --tls-key "$work/key.pem")
    base="https://127.0.0.1:$PORT"
  fi
  taskset -c 0 "$work/petstore" serve --addr "127.0.0.1:$PORT" --db "$db" "${tls[@]}" 2>>"$work/server.log" &
  server=$!
  pids+=("$server")
  for _ in $(seq 2000); do
    curl -skf "$base/readyz" >/dev/null 2>&1 && return
    sleep 0.005
  done
  echo "the server ($1) did not become ready; see its log:" >&2
  cat "$work/server.log" >&2
  exit 1
}

# wrk_rps [EXTRA HEADER]: requests a second of one wrk run on $base.
wrk_rps() {
  local args=(-H "Authorization: Bearer $key")
  [ -n "${1:-}" ] && args+=(-H "$1")
  taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" "${args[@]}" "$base$path" | awk '/Requests\/sec/ { printf "%.0f\n", $2 }'
}

# h2load_rps MODE: requests a second of one h2load run on $base, HTTP/2
# over TLS, or HTTP/1.1 (--h1) plain.
h2load_rps() {
  local args=(-c"$CONNS" -D"${DURATION%s}" -H "Authorization: Bearer $key")
  if [ "$1" = https ]; then args+=(-m"$STREAMS"); else args+=(--h1); fi
  taskset -c 1 h2load "${args[@]}" "$base$path" 2>/dev/null | awk '/^finished in/ { gsub(",", ""); printf "%.0f\n", $4 }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# measure NAME COMMAND...: COMMAND against plain then https, REPS times each.
measure() {
  local name=$1 mode
  shift
  : >"$work/plain" && : >"$work/https"
  for _ in $(seq "$REPS"); do
    for mode in plain https; do
      serve "$mode"
      "$@" "$mode" >>"$work/$mode"
      stop "$server"
    done
  done
  local p h
  p=$(median <"$work/plain") h=$(median <"$work/https")
  printf '%-13s %12s %12s %8.3f\n' "$name" "$p" "$h" "$(echo "$h / $p" | bc -l)"
}

keepalive_h1() { wrk_rps; }
keepalive_h2() { h2load_rps "$1"; }
new_conns() { wrk_rps "Connection: close"; }

printf '%-13s %12s %12s %8s\n' scenario plain https ratio
measure keepalive_h1 keepalive_h1
measure keepalive_h2 keepalive_h2
measure new_conns new_conns
echo "keepalive_h2: h2load --h1 on plain HTTP against HTTP/2 over TLS ($STREAMS streams a connection)" >&2
