#!/usr/bin/env bash
# Replica run: the pet store on PostgreSQL with limits in Redis, behind
# HAProxy (round robin), with one server and then two, side by side.
#
#   bench/replicas.sh                  # 1k pets, 3 repetitions of 5 s each
#   DURATION=10s REPS=5 bench/replicas.sh
#
# On a 2-CPU machine the servers, HAProxy, PostgreSQL, Redis and wrk share
# both CPUs, so two servers cannot show scaling here: the figures show what
# the balancer and a second server cost or bring on such a machine. Needs
# wrk, haproxy, psql and redis-cli (installed from Debian's packages when
# missing), and the PostgreSQL at BENCH_POSTGRES and the Redis at BENCH_REDIS.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5s}
REPS=${REPS:-3}
CONNS=${CONNS:-32}
PETS=${PETS:-1000}
BENCH_POSTGRES=${BENCH_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres}
BENCH_REDIS=${BENCH_REDIS:-redis://127.0.0.1:6379/15}
LB_PORT=${LB_PORT:-18190}
PORTS=(18191 18192)

. bench/lib.sh
need haproxy haproxy
need psql postgresql-client

bench_db=petstore_replicas_$$
psql "$BENCH_POSTGRES" -qc "CREATE DATABASE $bench_db" >/dev/null
trap 'cleanup; psql "$BENCH_POSTGRES" -qc "DROP DATABASE IF EXISTS $bench_db WITH (FORCE)" >/dev/null || true' EXIT
db="${BENCH_POSTGRES%/*}/$bench_db"
seed_postgres "$db" "$PETS"
key=$(tail -n 1 "$work/key-$PETS")

# balance N: HAProxy in front of the first N servers; prints its pid.
balance() {
  {
    printf 'defaults\n\tmode http\n\ttimeout connect 1s\n\ttimeout client 30s\n\ttimeout server 30s\n'
    printf 'frontend fe\n\tbind 127.0.0.1:%s\n\tdefault_backend be\n' "$LB_PORT"
    printf 'backend be\n\tbalance roundrobin\n\thttp-reuse always\n'
    for i in $(seq 0 $(($1 - 1))); do printf '\tserver s%d 127.0.0.1:%s\n' "$i" "${PORTS[$i]}"; done
  } >"$work/haproxy.cfg"
  haproxy -db -f "$work/haproxy.cfg" >/dev/null 2>&1 &
  echo $!
}

for port in "${PORTS[@]}"; do
  "$work/petstore" --addr "127.0.0.1:$port" --db "$db" --redis "$BENCH_REDIS" >/dev/null 2>"$work/petstore-$port.log" &
  pids+=($!)
  wait_ready "$port" >/dev/null
done

run() { # run PATH LUA: one wrk run through the balancer; prints req/s and p99 in ms
  local args=(-H "Authorization: Bearer $key")
  [ -n "$2" ] && args+=(-s "$work/$2")
  PETS=$PETS wrk -t2 -c"$CONNS" -d"$DURATION" --latency "${args[@]}" "http://127.0.0.1:$LB_PORT$1" | wrk_figures | cut -d' ' -f1,3
}

printf '%-12s %12s %12s %7s %10s %10s\n' scenario "1 server" "2 servers" ratio p99_1_ms p99_2_ms
for scenario in "${scenarios[@]}"; do
  IFS=: read -r name path lua <<<"$scenario"
  : >"$work/r1"; : >"$work/r2"
  for _ in $(seq 1 "$REPS"); do
    for n in 1 2; do
      lb=$(balance "$n"); pids+=("$lb")
      wait_ready "$LB_PORT" >/dev/null
      run "$path" "$lua" >>"$work/r$n"
      stop "$lb"
    done
  done
  r1=$(cut -d' ' -f1 "$work/r1" | median); r2=$(cut -d' ' -f1 "$work/r2" | median)
  printf '%-12s %12.0f %12.0f %7.2f %10.2f %10.2f\n' "$name" "$r1" "$r2" "$(echo "$r2 $r1" | awk '{ print $1 / $2 }')" \
    "$(cut -d' ' -f2 "$work/r1" | median)" "$(cut -d' ' -f2 "$work/r2" | median)"
done
