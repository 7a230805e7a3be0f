#!/usr/bin/env bash
# Load benchmark: the pet store against a bare net/http server ("the ceiling",
# bench/ceiling) on the same machine, side by side, reported as ratios.
#
#   bench/load.sh                   # 1k and 1M pets, 3 repetitions of 5 s each
#   DURATION=10s REPS=5 bench/load.sh
#   STORES=postgres SIZES=1000000 bench/load.sh
#   STORES="sqlite redis" SIZES=1000 bench/load.sh   # the limiter in process vs in Redis
#   METRICS=1 STORES=sqlite SIZES=1000 bench/load.sh  # the pet store with and without metrics
#
# STORES (default "sqlite redis postgres") picks the set-ups: SQLite with
# limits in process, SQLite with limits in Redis (BENCH_REDIS, default
# redis://127.0.0.1:6379/15), PostgreSQL with limits in Redis. PostgreSQL runs on a
# new database of the server at BENCH_POSTGRES (default
# postgres://postgres@127.0.0.1:5432/postgres), dropped afterwards, with its
# processes moved to CPU 1 beside wrk while the run lasts.
#
# The server under test is pinned to CPU 0 and wrk to CPU 1, with 32
# connections. Each scenario alternates ceiling and pet store runs REPS times
# and reports medians; the ratio is petstore/ceiling of the medians. A second
# ceiling, run with -headers, sends the headers the pet store must send: the
# last two columns are its share of the bare ceiling and the pet store's share
# of it. METRICS=1 also runs, in the same alternation, the same binary with
# --admin-addr (so recording metrics, scraped as Prometheus would) on a copy
# of the database (PostgreSQL: the same database), and prints its figures and
# its ratio to the pet store without metrics under each scenario. Needs wrk and sqlite3 (installed from Debian's packages when
# missing) and taskset.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5s}
REPS=${REPS:-3}
CONNS=${CONNS:-32}
PORT=${PORT:-18181}
CEILING_PORT=${CEILING_PORT:-18199}
HEADERS_PORT=${HEADERS_PORT:-18198}
METRICS=${METRICS:-}
METRICS_PORT=${METRICS_PORT:-18182}
ADMIN_PORT=${ADMIN_PORT:-18183}

. bench/lib.sh

# run PORT PATH LUA KEY: one wrk run; prints "rps p50_ms p99_ms non2xx".
run() {
  local port=$1 path=$2 lua=$3 key=$4 args=()
  [ -n "$lua" ] && args+=(-s "$work/$lua")
  [ -n "$key" ] && args+=(-H "Authorization: Bearer $key")
  taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" --latency "${args[@]}" "http://127.0.0.1:$port$path" |
    awk '
      function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
      /Requests\/sec/ { rps = $2 }
      /^ +50%/ { p50 = ms($2) }
      /^ +99%/ { p99 = ms($2) }
      /Non-2xx/ { bad = $NF }
      END { printf "%.0f %.3f %.3f %d\n", rps, p50, p99, bad + 0 }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

taskset -c 0 "$work/ceiling" -addr "127.0.0.1:$CEILING_PORT" &
pids+=($!)
taskset -c 0 "$work/ceiling" -headers -addr "127.0.0.1:$HEADERS_PORT" &
pids+=($!)
wait_ready "$CEILING_PORT" >/dev/null
wait_ready "$HEADERS_PORT" >/dev/null

# The issues' targets: the ratio each scenario must reach, and the p99 in ms.
declare -A target=([sqlite-list]=0.60 [sqlite-list_status]=0.55 [sqlite-get]=0.60 [sqlite-create]=0.35 [sqlite-p99]=3
                   [redis-list]=0.30 [redis-list_status]=0.30 [redis-get]=0.30 [redis-create]=0.15 [redis-p99]=10
                   [postgres-list]=0.35 [postgres-list_status]=0.35 [postgres-get]=0.35 [postgres-create]=0.15 [postgres-p99]=10)
STORES=${STORES:-sqlite redis postgres}
BENCH_REDIS=${BENCH_REDIS:-redis://127.0.0.1:6379/15}
SIZES=${SIZES:-1000 1000000}
BENCH_POSTGRES=${BENCH_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres}
if [[ " $STORES " == *" postgres "* ]]; then
  need psql postgresql-client
  bench_db=petstore_bench_$$
  psql "$BENCH_POSTGRES" -qc "CREATE DATABASE $bench_db" >/dev/null
  postmaster=$(psql "$BENCH_POSTGRES" -qtAc "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'" | head -1)
  postmaster=$(ps -o ppid= -p "$postmaster" | tr -d ' ')
  taskset -a -pc 1 "$postmaster" >/dev/null
fi
# On exit: the servers stopped, PostgreSQL and Redis back on every CPU, the
# benchmark's database dropped.
bench_cleanup() {
  cleanup
  for p in ${postmaster:-} ${redis_pid:-}; do taskset -a -pc "0-$(($(nproc) - 1))" "$p" >/dev/null || true; done
  if [ -n "${bench_db:-}" ]; then
    psql "$BENCH_POSTGRES" -qc "DROP DATABASE IF EXISTS $bench_db WITH (FORCE)" >/dev/null || true
  fi
}
trap bench_cleanup EXIT
if [[ " $STORES " == *" redis "* || " $STORES " == *" postgres "* ]]; then
  need redis-cli redis-tools
  redis_pid=$(redis-cli -u "$BENCH_REDIS" info server | awk -F: '/^process_id/ { print $2 }' | tr -d '\r')
  taskset -a -pc 1 "$redis_pid" >/dev/null
fi
printf '%-8s %-8s %-12s %9s %9s %6s %7s %7s %7s %7s  %-22s %5s %7s\n' store pets scenario req/s ceiling ratio p50_ms p99_ms c_p99 non2xx "targets (ratio, p99)" hdrs vs_hdrs
declare -A list_rps
for store in $STORES; do
for n in $SIZES; do
  if [ "$store" = postgres ]; then
    db="${BENCH_POSTGRES%/*}/$bench_db"
    seed_postgres "$db" "$n"
  else
    db="$work/pets-$store-$n.db"
    seed "$db" "$n"
  fi
  key=$(tail -n 1 "$work/key-$n")
  log="$work/petstore-$n.log"
  limits=()
  [ "$store" = sqlite ] || limits=(--redis "$BENCH_REDIS")
  taskset -c 0 "$work/petstore" --addr "127.0.0.1:$PORT" --db "$db" "${limits[@]}" >/dev/null 2>"$log" &
  pid=$!
  pids+=("$pid")
  ready_ms=$(wait_ready "$PORT")
  for _ in $(seq 1 1000); do grep -q "pets copied into memory" "$log" && break; sleep 0.01; done
  loaded=$(grep -o 'time=[^ ]*' "$log" | head -1)
  if [ -n "$METRICS" ]; then
    mdb=$db
    if [ "$store" != postgres ]; then
      mdb="$work/pets-$store-$n-metrics.db"
      sqlite3 "$db" "VACUUM INTO '$mdb'"
    fi
    taskset -c 0 "$work/petstore" --addr "127.0.0.1:$METRICS_PORT" --admin-addr "127.0.0.1:$ADMIN_PORT" \
      --db "$mdb" "${limits[@]}" >/dev/null 2>"$log.metrics" &
    mpid=$!
    pids+=("$mpid")
    wait_ready "$METRICS_PORT" >/dev/null
    for _ in $(seq 1 1000); do grep -q "pets copied into memory" "$log.metrics" && break; sleep 0.01; done
    # Scraped every second while it runs, as a Prometheus would (more often).
    (while kill -0 "$mpid" 2>/dev/null; do curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" >/dev/null; sleep 1; done) &
  fi

  for scenario in "${scenarios[@]}"; do
    IFS=: read -r name path lua <<<"$scenario"
    : >"$work/c" ; : >"$work/h" ; : >"$work/p" ; : >"$work/m"
    for _ in $(seq 1 "$REPS"); do
      PETS=$n run "$CEILING_PORT" "$path" "$lua" "" >>"$work/c"
      PETS=$n run "$HEADERS_PORT" "$path" "$lua" "$key" >>"$work/h"
      PETS=$n run "$PORT" "$path" "$lua" "$key" >>"$work/p"
      [ -z "$METRICS" ] || PETS=$n run "$METRICS_PORT" "$path" "$lua" "$key" >>"$work/m"
    done
    c=$(cut -d' ' -f1 "$work/c" | median)
    h=$(cut -d' ' -f1 "$work/h" | median)
    p=$(cut -d' ' -f1 "$work/p" | median)
    p50=$(cut -d' ' -f2 "$work/p" | median)
    p99=$(cut -d' ' -f3 "$work/p" | median)
    bad=$(awk '{ s += $4 } END { print s + 0 }' "$work/p")
    cp99=$(cut -d' ' -f3 "$work/c" | median)
    list_rps[$store-$name-$n]=$p
    ratio=$(echo "$p $c" | awk '{ print $1 / $2 }')
    verdict=$(echo "$ratio ${target[$store-$name]} $p99 ${target[$store-p99]}" | awk '{ printf "%s %s, %s %s", ($1 >= $2 ? "met" : "MISSED"), $2, ($3 <= $4 ? "met" : "MISSED"), $4 }')
    printf '%-8s %-8s %-12s %9.0f %9.0f %6.2f %7.2f %7.2f %7.2f %7d  %-22s %5.2f %7.2f\n' "$store" "$n" "$name" "$p" "$c" "$ratio" "$p50" "$p99" "$cp99" "$bad" "$verdict" \
      "$(echo "$h $c" | awk '{ print $1 / $2 }')" "$(echo "$p $h" | awk '{ print $1 / $2 }')"
    if [ -n "$METRICS" ]; then
      m=$(cut -d' ' -f1 "$work/m" | median)
      # Each run with metrics follows one without: the median of those
      # pairs' ratios is steadier than the ratio of the medians.
      paired=$(paste -d' ' "$work/m" "$work/p" | awk '{ print $1 / $5 }' | median)
      printf '#   %-12s with metrics: %9.0f req/s, p50 %.2f ms, p99 %.2f ms; with/without metrics %.3f, paired %.3f (target: 0.97 at least)\n' \
        "$name" "$m" "$(cut -d' ' -f2 "$work/m" | median)" "$(cut -d' ' -f3 "$work/m" | median)" \
        "$(echo "$m $p" | awk '{ print $1 / $2 }')" "$paired"
    fi
  done
  if [ -n "$METRICS" ]; then
    echo "#   the metrics server counted $(curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" |
      awk '/^petstore_http_request_duration_seconds_count/ { s += $NF } END { printf "%.0f", s }') requests"
    stop "$mpid"
  fi
  rss=$(awk '/VmHWM/ { print $2 }' "/proc/$pid/status")
  stop "$pid"
  echo "# $store, $n pets: ready in ${ready_ms} ms (target for 1M on SQLite: 300 at most); peak RSS $((rss / 1024)) MiB after the run (target for 1M on SQLite: 96 at most)"
done
if [ -n "${list_rps[$store-list-1000000]:-}" ] && [ -n "${list_rps[$store-list-1000]:-}" ]; then
  echo "# $store list throughput, 1M pets vs 1k: $(echo "${list_rps[$store-list-1000000]} ${list_rps[$store-list-1000]}" | awk '{ printf "%.2f", $1 / $2 }') (target on SQLite: 0.8 at least)"
fi
done
