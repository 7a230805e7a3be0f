#!/usr/bin/env bash
# HTTPS against plain HTTP on the same server: the cost of TLS with
# keep-alive (wrk, HTTP/1.1) and of a full handshake on every request (new
# connections a second); then HTTP/2 against HTTP/1.1, both over the same
# TLS with the same requests in flight (h2load, Debian's nghttp2-client),
# on the pet store and on Go's bare server (bench/ceiling), the yardstick.
#
#   bench/https.sh
#   DURATION=10s REPS=5 bench/https.sh
#
# One seeded SQLite database; the server runs on it either plain or with
# --tls-cert/--tls-key (a P-256 certificate for 127.0.0.1 made by Go's
# generate_cert.go), pinned to CPU 0, the load generator to CPU 1. Each
# scenario alternates its two sides REPS times and prints the median
# requests (or connections) a second of each and their ratio:
#   keepalive_h1  wrk, GET /v1/pets?limit=20 on kept connections: plain
#                 against https
#   new_conns     wrk with Connection: close: a TCP connection (and, over
#                 HTTPS, a full TLS handshake) for every request: plain
#                 against https
#   h2_petstore   h2load over TLS, $CONNS connections with $STREAMS
#                 requests in flight on each: --h1 (HTTP/1.1, pipelined)
#                 against HTTP/2, on the pet store
#   h2_ceiling    the same on bench/ceiling -headers over the same TLS
# and last the pet store's HTTP/2 as a fraction of the bare server's.
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

# serve MODE [SERVER]: the pet store on $db (or, with SERVER ceiling, the
# bare server), plain or https, pinned to CPU 0; sets $server and $base.
serve() {
  local cmd=("$work/petstore" serve --addr "127.0.0.1:$PORT" --db "$db") flag=--
  [ "${2:-petstore}" = ceiling ] && cmd=("$work/ceiling" -headers -addr "127.0.0.1:$PORT") flag=-
  base="http://127.0.0.1:$PORT"
  if [ "$1" = https ]; then
    cmd+=("${flag}tls-cert" "$work/cert.pem" "${flag}tls-key" "$work/key.pem")
    base="https://127.0.0.1:$PORT"
  fi
  taskset -c 0 "${cmd[@]}" 2>>"$work/server.log" &
  server=$!
  pids+=("$server")
  for _ in $(seq 2000); do
    curl -skf "$base/readyz" >/dev/null 2>&1 && return
    sleep 0.005
  done
  echo "the server ($1 ${2:-petstore}) did not become ready; see its log:" >&2
  cat "$work/server.log" >&2
  exit 1
}

# wrk_rps [EXTRA HEADER]: requests a second of one wrk run on $base.
wrk_rps() {
  local args=(-H "Authorization: Bearer $key")
  [ -n "${1:-}" ] && args+=(-H "$1")
  taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" "${args[@]}" "$base$path" | awk '/Requests\/sec/ { printf "%.0f\n", $2 }'
}

# h2load_rps PROTOCOL: requests a second of one h2load run on $base (over
# TLS), $CONNS connections with $STREAMS requests in flight on each, over
# HTTP/2 (h2) or HTTP/1.1 (h1: --h1, the requests pipelined). A run with a
# failed or errored request stops the script.
h2load_rps() {
  local args=(-c"$CONNS" -m"$STREAMS" -D"${DURATION%s}" -H "Authorization: Bearer $key") out
  [ "$1" = h1 ] && args+=(--h1)
  out=$(taskset -c 1 h2load "${args[@]}" "$base$path" 2>&1)
  if ! grep -Eq '^requests: .* 0 failed, 0 errored' <<<"$out" || ! grep -Eq '^status codes: [0-9]+ 2xx, 0 3xx, 0 4xx, 0 5xx' <<<"$out" ||
    ! grep -q "^Application protocol: ${1/h1/http\/1.1}" <<<"$out"; then
    echo "h2load ($1) on $base: a request failed or was not answered 2xx, or not over $1:" >&2
    echo "$out" >&2
    exit 1
  fi
  awk '/^finished in/ { gsub(",", ""); printf "%.0f\n", $4 }' <<<"$out"
}

# measure NAME SERVER A B COMMAND: on SERVER, COMMAND A (over A: plain or
# https) then COMMAND B, REPS times each, a server of its own for each run;
# prints the medians and B / A, and keeps them in $work/NAME.
measure() {
  local name=$1 kind=$2 a=$3 b=$4 side
  shift 4
  : >"$work/$a" && : >"$work/$b"
  for _ in $(seq "$REPS"); do
    for side in "$a" "$b"; do
      case $side in
        plain | https) serve "$side" "$kind" && "$@" "$side" >>"$work/$side" ;;
        *) serve https "$kind" && "$@" "$side" >>"$work/$side" ;;
      esac
      stop "$server"
    done
  done
  local x y
  x=$(median <"$work/$a") y=$(median <"$work/$b")
  printf '%-13s %10s %12s %12s %8.3f\n' "$name" "$a / $b" "$x" "$y" "$(echo "$y / $x" | bc -l)"
  echo "$y" >"$work/$name"
}

keepalive_h1() { wrk_rps; }
new_conns() { wrk_rps "Connection: close"; }
over_tls() { h2load_rps "$1"; }

printf '%-13s %10s %12s %12s %8s\n' scenario sides first second ratio
measure keepalive_h1 petstore plain https keepalive_h1
measure new_conns petstore plain https new_conns
measure h2_petstore petstore h1 h2 over_tls
measure h2_ceiling ceiling h1 h2 over_tls
printf "the pet store's HTTP/2 / the bare server's HTTP/2 (both over TLS, -c%s -m%s): %.3f\n" "$CONNS" "$STREAMS" \
  "$(echo "$(cat "$work/h2_petstore") / $(cat "$work/h2_ceiling")" | bc -l)"
