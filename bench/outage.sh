#!/usr/bin/env bash
# The replica's store away under steady creates: the creates' p99 of a server
# whose replica's store is away, against the same binary without replication,
# paired (docs/performance.md, "Replication with its store away").
#
#   bench/outage.sh                      # 3 pairs, 30 s of outage each
#   REPS=5 OUTAGE=60s bench/outage.sh
#   PIN=1 bench/outage.sh                # the server on CPU 0 and wrk on CPU 1, as load.sh
#
# Each pair runs, in turn, a server without replication and one replicating
# to a versitygw (github.com/versity/versitygw v1.8.0, built from the Go
# module proxy, its posix backend in the temporary directory), each on a new
# database. The replicating server's first snapshot is uploaded, then the
# versitygw is stopped (SIGSTOP: connections hang, as when the network is
# down) for OUTAGE while wrk sends creates with 32 connections; then it is
# continued, and the script waits until the server's /metrics says the replica
# has caught up (petstore_replication_behind_seconds 0). Every create must
# answer 201, none may time out (wrk waits 120 s for each): a run with
# another status or a socket error fails the script.
#
# By default the server and wrk share the machine's CPUs, as a server and a
# client on one small VM do. PIN=1 pins them apart: the server then has one
# CPU (GOMAXPROCS 1), the layout load.sh measures its ratios in, where the
# replication's once-a-second read of the WAL waits in line with the
# requests. Needs wrk, sqlite3, curl and taskset (installed from Debian's
# packages when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-3}
OUTAGE=${OUTAGE:-30s}
PIN=${PIN:-}
PORT=${PORT:-18191}
ADMIN_PORT=${ADMIN_PORT:-18192}
VERSITYGW_PORT=${VERSITYGW_PORT:-18193}

. bench/lib.sh

server_cpus=() client_cpus=() layout="server and wrk on every CPU"
if [ -n "$PIN" ]; then
  server_cpus=(taskset -c 0)
  client_cpus=(taskset -c 1)
  layout="pinned: server on CPU 0, wrk on CPU 1"
fi

echo "building versitygw ..." >&2
GOBIN="$work/vgw" CGO_ENABLED=0 GOFLAGS=-buildvcs=false go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
mkdir -p "$work/vgw-data/bench"
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=benchsecret AWS_REGION=us-east-1 AWS_CA_BUNDLE=
"${client_cpus[@]}" "$work/vgw/versitygw" --access bench --secret benchsecret --port "127.0.0.1:$VERSITYGW_PORT" \
  --quiet posix "$work/vgw-data" >"$work/versitygw.log" 2>&1 &
vgw_pid=$!
pids+=("$vgw_pid")
# A versitygw stopped mid-outage would hold cleanup's wait for ever: it is
# continued first, whatever ends the script.
trap 'kill -CONT "$vgw_pid" 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 1 400); do curl -s -o /dev/null "http://127.0.0.1:$VERSITYGW_PORT/" && break; sleep 0.05; done

# metric NAME: the value of one series on the admin listener's /metrics.
metric() { curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }

# one MODE N: one run, without replication (plain) or with its store away
# (away), on a new database; writes wrk's figures (wrk_figures) to
# $work/result-MODE-N.
one() {
  local mode=$1 n=$2 db="$work/$1-$2.db" log="$work/$1-$2.log" flags=()
  [ "$mode" = plain ] || flags=(--replicate-to "s3://bench/run-$n?endpoint=http://127.0.0.1:$VERSITYGW_PORT")
  seed "$db" 1000
  "${server_cpus[@]}" "$work/petstore" serve --db "$db" --addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN_PORT" \
    "${flags[@]}" >/dev/null 2>"$log" &
  local pid=$!
  pids+=("$pid")
  wait_ready "$PORT" >/dev/null
  if [ "$mode" = away ]; then
    caught_up 10 || { echo "run $n: the first snapshot was not uploaded within 10 s" >&2; exit 1; }
    kill -STOP "$vgw_pid"
  fi
  # A create held up past the outage is a latency, not a timeout that wrk
  # would leave out of its figures.
  "${client_cpus[@]}" wrk -t1 -c32 -d"$OUTAGE" --timeout 120s --latency -s "$work/post.lua" \
    -H "Authorization: Bearer $(tail -n 1 "$work/key-1000")" "http://127.0.0.1:$PORT/v1/pets" >"$work/wrk-$mode-$n"
  if [ "$mode" = away ]; then
    kill -CONT "$vgw_pid"
    caught_up 60 || { echo "run $n: the replica did not catch up within 60 s of the store's return" >&2; exit 1; }
  fi
  stop "$pid"
  if grep -q "Socket errors" "$work/wrk-$mode-$n"; then
    echo "run $n ($mode): $(grep "Socket errors" "$work/wrk-$mode-$n")" >&2
    exit 1
  fi
  wrk_figures <"$work/wrk-$mode-$n" >"$work/result-$mode-$n"
}

# caught_up SECONDS: whether the server's replica is up to date (behind 0 s) within SECONDS.
caught_up() {
  for _ in $(seq 1 $(($1 * 10))); do
    [ "$(metric petstore_replication_behind_seconds)" = 0 ] && return 0
    sleep 0.1
  done
  return 1
}

echo "creates for $OUTAGE, the replica's store away, against no replication ($layout)"
printf "%4s %12s %12s %9s %12s %12s %9s\n" pair plain_p99_ms away_p99_ms p99_ratio plain_req/s away_req/s rps_ratio
: >"$work/ratios"
for n in $(seq 1 "$REPS"); do
  one plain "$n"
  one away "$n"
  read -r pr _ pp pbad pn <"$work/result-plain-$n"
  read -r ar _ ap abad an <"$work/result-away-$n"
  if [ "$pbad" -ne 0 ] || [ "$abad" -ne 0 ]; then
    echo "pair $n: $pbad of $pn creates without replication and $abad of $an with its store away did not answer 201" >&2
    exit 1
  fi
  awk -v n="$n" -v pp="$pp" -v ap="$ap" -v pr="$pr" -v ar="$ar" \
    'BEGIN { printf "%4d %12.2f %12.2f %9.2f %12.0f %12.0f %9.3f\n", n, pp, ap, ap / pp, pr, ar, ar / pr }'
  awk -v pp="$pp" -v ap="$ap" -v pr="$pr" -v ar="$ar" 'BEGIN { print ap / pp, ar / pr }' >>"$work/ratios"
done
printf "median: p99 with the store away / without replication %s (target: 1.5 at most); creates a second %s\n" \
  "$(cut -d' ' -f1 "$work/ratios" | median)" "$(cut -d' ' -f2 "$work/ratios" | median)"
