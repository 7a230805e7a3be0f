#!/usr/bin/env bash
# Load benchmark: the pet store against a bare net/http server ("the ceiling",
# bench/ceiling) on the same machine, side by side, reported as ratios.
#
#   bench/load.sh                   # 1k and 1M pets, 3 repetitions of 5 s each
#   DURATION=10s REPS=5 bench/load.sh
#   STORES=postgres SIZES=1000000 bench/load.sh
#   STORES="sqlite redis" SIZES=1000 bench/load.sh   # the limiter in process vs in Redis
#   METRICS=1 STORES=sqlite SIZES=1000 bench/load.sh  # the pet store with and without metrics
#   KEYS=1000 STORES="redis postgres" SIZES=1000 bench/load.sh  # also over 1,000 keys
#   REPLICATE=versitygw STORES=sqlite SIZES=1000 bench/load.sh  # with and without --replicate-to
#   TRACING=0.01 STORES=sqlite SIZES=1000 bench/load.sh  # with and without traces, 1% sampled
#
# STORES (default "sqlite redis postgres") picks the set-ups: SQLite with
# limits in process, SQLite with limits in Redis, PostgreSQL with limits in
# Redis. PostgreSQL runs on a new database of the server at BENCH_POSTGRES
# (default postgres://postgres@127.0.0.1:5432/postgres), dropped afterwards,
# with its processes moved to CPU 1 beside wrk while the run lasts. Redis is
# BENCH_REDIS (default redis://127.0.0.1:18185/0); when nothing answers there
# on this machine, the script starts a redis-server of its own on that port
# (no persistence) and stops it at the end. Give it a Redis that nothing
# else uses: the Redis calls a request are counted from INFO commandstats,
# which counts every client's.
#
# Every shape runs with one Enterprise key (the hot key). KEYS=N (N > 1)
# adds a second shape, each scenario again as zipf-NAME: requests spread
# over N Enterprise keys by a Zipf law with s = 1.1 (the key of rank k is
# picked with a probability proportional to 1/k^1.1: most requests carry a
# few hot keys, and a long tail of keys is seldom seen), each key with
# figures no load can exhaust.
#
# BASELINE=DIR also builds the pet store from DIR, another checkout of this
# project (git worktree add /tmp/old main, say), and runs it in the same
# alternation on databases of its own, seeded the same way by its binary: a
# line under each scenario gives its figures and the median of the paired
# ratios (each run of this code over the baseline's run that follows it),
# so old and new code are compared in one run.
#
# With limits in Redis, each scenario also runs, in the same alternation,
# the same binary with limits in process (on a copy of the SQLite database;
# for PostgreSQL, on a SQLite database seeded the same way), and a line
# under it gives the Redis calls a request of the pet store (all commands,
# from INFO commandstats before and after each run, INFO itself left out)
# and the pet store's throughput as a share of the in-process one.
#
# The server under test is pinned to CPU 0 and wrk to CPU 1, with 32
# connections. Each scenario alternates ceiling and pet store runs REPS times
# and reports medians; the ratio is petstore/ceiling of the medians. A second
# ceiling, run with -headers, sends the headers the pet store must send: the
# last two columns are its share of the bare ceiling and the pet store's share
# of it. METRICS=1 also runs, in the same alternation, the same binary with
# --admin-addr (so recording metrics, scraped as Prometheus would) on a copy
# of the database (PostgreSQL: the same database), and prints its figures and
# its ratio to the pet store without metrics under each scenario.
#
# REPLICATE=URL (SQLite only) also runs, in the same alternation, the same
# binary with --replicate-to URL (a path of its own under it for each
# database; the credentials from the environment, AWS_ACCESS_KEY_ID and
# the rest) on a copy of the database, and prints its figures, its paired
# ratio to the pet store without replication and the CPU each takes for a
# thousand requests (the difference is what replication costs).
# TRACING=RATIO also runs, in the same alternation, the same binary with
# traces on (OTEL_EXPORTER_OTLP_ENDPOINT set, OTEL_TRACES_SAMPLER_ARG=RATIO
# under the default parent-based ratio sampler) on a copy of the database,
# its spans posted to a bare ceiling of their own on CPU 1 (it takes OTLP/HTTP
# exports and drops them), and prints its figures and its paired ratio to
# the pet store without traces (docs/observing.md, "Traces").
# REPLICATE=versitygw builds versitygw (github.com/versity/versitygw
# v1.8.0, from the Go module proxy), runs it on CPU 1 beside wrk, with its
# posix backend in the temporary directory, and replicates to it; with
# REPLICA_AWAY=1 as well, that versitygw is stopped (SIGSTOP: connections
# hang, as when the network is down) once the replicating server has
# started, and continued after its runs, so that its figures are those of a
# server whose replica's store is away. Needs wrk and sqlite3 (installed from Debian's packages when
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
TWIN_PORT=${TWIN_PORT:-18184}
BASELINE_PORT=${BASELINE_PORT:-18186}
KEYS=${KEYS:-1}
BASELINE=${BASELINE:-}
REPLICATE=${REPLICATE:-}
REPLICATE_PORT=${REPLICATE_PORT:-18187}
VERSITYGW_PORT=${VERSITYGW_PORT:-18188}
TRACING=${TRACING:-}
TRACING_PORT=${TRACING_PORT:-18189}
OTLP_PORT=${OTLP_PORT:-18190}

. bench/lib.sh

# The zipf shape's requests (see KEYS above). MODE names the scenario: get
# asks for random ids of $PETS pets, create sends post.lua's body, and the
# others ask for the URL's path. The CDF is searched by bisection for each
# request; the requests of list and create are made once for each key.
cat >"$work/zipf.lua" <<'LUA'
local auth = {}
for token in io.lines(os.getenv("TOKENS")) do auth[#auth + 1] = "Bearer " .. token end
local cdf, sum = {}, 0
for k = 1, #auth do
  sum = sum + k ^ -1.1
  cdf[k] = sum
end
for k = 1, #auth do cdf[k] = cdf[k] / sum end
cdf[#auth] = 1

local function rank()
  local u, lo, hi = math.random(), 1, #auth
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if cdf[mid] < u then lo = mid + 1 else hi = mid end
  end
  return lo
end

local mode, n = os.getenv("MODE"), tonumber(os.getenv("PETS"))
local made = {}
-- Run once wrk has set the Host header.
init = function()
  for k = 1, #auth do
    if mode == "create" then
      made[k] = wrk.format("POST", wrk.path, { Authorization = auth[k], ["Content-Type"] = "application/json" },
        '{"name":"Bench","categoryId":3,"status":"available"}')
    elseif mode ~= "get" then
      made[k] = wrk.format("GET", wrk.path, { Authorization = auth[k] })
    end
  end
  math.randomseed(os.time())
end

request = function()
  local k = rank()
  if mode == "get" then
    return wrk.format("GET", "/v1/pets/" .. math.random(1, n), { Authorization = auth[k] })
  end
  return made[k]
end
LUA

# run PORT PATH LUA KEY: one wrk run; prints "rps p50_ms p99_ms non2xx requests".
run() {
  local port=$1 path=$2 lua=$3 key=$4 args=()
  [ -n "$lua" ] && args+=(-s "$work/$lua")
  [ -n "$key" ] && args+=(-H "Authorization: Bearer $key")
  taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" --latency "${args[@]}" "http://127.0.0.1:$port$path" | wrk_figures
}

# own_redis URL: start a redis-server of this script's own on URL's port,
# when URL is on this machine and nothing answers there.
own_redis() {
  redis-cli -u "$1" ping 2>/dev/null | grep -q PONG && return
  local hostport=${1#redis://}
  hostport=${hostport#*@}
  hostport=${hostport%%/*}
  local host=${hostport%:*} port=${hostport##*:}
  if [ "$host" != 127.0.0.1 ] && [ "$host" != localhost ]; then
    echo "nothing answers at BENCH_REDIS $1" >&2
    exit 1
  fi
  need redis-server redis-server
  redis-server --bind "$host" --port "$port" --save "" --appendonly no >"$work/redis.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do redis-cli -u "$1" ping 2>/dev/null | grep -q PONG && return; sleep 0.05; done
  echo "the redis-server started on port $port does not answer: $(tail -n 3 "$work/redis.log")" >&2
  exit 1
}

# redis_calls: the calls of each command Redis has run, as "command calls"
# lines; INFO, which this script sends, left out.
redis_calls() {
  redis-cli -u "$BENCH_REDIS" info commandstats | tr -d '\r' |
    awk -F'[:,=]' '/^cmdstat_/ && $1 != "cmdstat_info" { sub(/^cmdstat_/, "", $1); print $1, $3 }'
}

# make_keys N: N Enterprise keys no load can exhaust, in $work/keys.db,
# and their tokens, hottest first, in $work/tokens.
make_keys() {
  echo "creating $1 keys ..." >&2
  seq 1 "$1" | xargs -P 4 -I{} "$work/petstore" keys create --db "$work/keys.db" --plan enterprise \
    --name "zipf-{}" --rpm 1000000000 --rpd 1000000000 2>/dev/null | grep '^psk_' >"$work/tokens"
  [ "$(wc -l <"$work/tokens")" -eq "$1" ] || { echo "made $(wc -l <"$work/tokens") keys of $1" >&2; exit 1; }
}

# add_keys DB: the keys of make_keys added to DB (a SQLite file or a
# PostgreSQL URL), where the benchmark's own key already is.
add_keys() {
  local columns="name, plan, rpm, rpd, env, created_at"
  if [[ "$1" == postgres* ]]; then
    sqlite3 -csv "$work/keys.db" "SELECT hex(hash), $columns FROM api_keys" |
      psql "$1" -q -c "CREATE TEMP TABLE k (hash text, name text, plan text, rpm bigint, rpd bigint, env text, created_at bigint)" \
        -c "\\copy k FROM pstdin WITH (FORMAT csv)" \
        -c "INSERT INTO api_keys (hash, $columns) SELECT decode(hash, 'hex'), $columns FROM k" >/dev/null
  else
    sqlite3 "$1" "ATTACH '$work/keys.db' AS k; INSERT INTO api_keys (hash, $columns) SELECT hash, $columns FROM k.api_keys;"
  fi
}

# serve PORT DB LOG [FLAG...]: the pet store (or the binary $server names)
# on CPU 0, ready and with its copy of the pets made; sets served (its pid)
# and ready_ms.
serve() {
  local port=$1 db=$2 log=$3
  shift 3
  taskset -c 0 "${server:-$work/petstore}" --addr "127.0.0.1:$port" --db "$db" "$@" >/dev/null 2>"$log" &
  served=$!
  pids+=("$served")
  ready_ms=$(wait_ready "$port")
  for _ in $(seq 1 1000); do grep -q "pets copied into memory" "$log" && break; sleep 0.01; done
}

# cpu_ms PID: the CPU time the process has taken, in milliseconds.
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) * 1000 / hz }' "/proc/$1/stat"; }

# own_versitygw: build and start an S3-compatible server of this script's
# own on CPU 1, and point REPLICATE at a bucket of it.
own_versitygw() {
  echo "building versitygw ..." >&2
  GOBIN="$work/vgw" CGO_ENABLED=0 GOFLAGS=-buildvcs=false go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
  mkdir -p "$work/vgw-data/bench"
  export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=benchsecret AWS_REGION=us-east-1 AWS_CA_BUNDLE=
  taskset -c 1 "$work/vgw/versitygw" --access bench --secret benchsecret --port "127.0.0.1:$VERSITYGW_PORT" --quiet \
    posix "$work/vgw-data" >"$work/versitygw.log" 2>&1 &
  vgw_pid=$!
  pids+=($!)
  for _ in $(seq 1 400); do curl -s -o /dev/null "http://127.0.0.1:$VERSITYGW_PORT/" && break; sleep 0.05; done
  REPLICATE="s3://bench/petstore?endpoint=http://127.0.0.1:$VERSITYGW_PORT"
}
[ "$REPLICATE" != versitygw ] || own_versitygw

taskset -c 0 "$work/ceiling" -addr "127.0.0.1:$CEILING_PORT" &
pids+=($!)
taskset -c 0 "$work/ceiling" -headers -addr "127.0.0.1:$HEADERS_PORT" &
pids+=($!)
wait_ready "$CEILING_PORT" >/dev/null
wait_ready "$HEADERS_PORT" >/dev/null
if [ -n "$TRACING" ]; then
  taskset -c 1 "$work/ceiling" -addr "127.0.0.1:$OTLP_PORT" &
  pids+=($!)
  wait_ready "$OTLP_PORT" >/dev/null
fi

# The issues' targets: the ratio each scenario must reach, and the p99 in ms.
declare -A target=([sqlite-list]=0.60 [sqlite-list_status]=0.55 [sqlite-get]=0.60 [sqlite-create]=0.35 [sqlite-p99]=3
                   [redis-list]=0.30 [redis-list_status]=0.30 [redis-get]=0.30 [redis-create]=0.15 [redis-p99]=10
                   [postgres-list]=0.35 [postgres-list_status]=0.35 [postgres-get]=0.35 [postgres-create]=0.15 [postgres-p99]=10)
STORES=${STORES:-sqlite redis postgres}
BENCH_REDIS=${BENCH_REDIS:-redis://127.0.0.1:18185/0}
SIZES=${SIZES:-1000 1000000}
BENCH_POSTGRES=${BENCH_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres}
if [ -n "$BASELINE" ]; then
  echo "building the baseline from $BASELINE ..." >&2
  (cd "$BASELINE" && CGO_ENABLED=0 go build -trimpath -o "$work/baseline" .)
fi
if [[ " $STORES " == *" postgres "* ]]; then
  need psql postgresql-client
  bench_db=petstore_bench_$$
  psql "$BENCH_POSTGRES" -qc "CREATE DATABASE $bench_db" >/dev/null
  [ -z "$BASELINE" ] || psql "$BENCH_POSTGRES" -qc "CREATE DATABASE ${bench_db}_baseline" >/dev/null
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
    psql "$BENCH_POSTGRES" -qc "DROP DATABASE IF EXISTS ${bench_db}_baseline WITH (FORCE)" >/dev/null || true
  fi
}
trap bench_cleanup EXIT
if [[ " $STORES " == *" redis "* || " $STORES " == *" postgres "* ]]; then
  need redis-cli redis-tools
  own_redis "$BENCH_REDIS"
  redis_pid=$(redis-cli -u "$BENCH_REDIS" info server | awk -F: '/^process_id/ { print $2 }' | tr -d '\r')
  taskset -a -pc 1 "$redis_pid" >/dev/null
fi
if [ "$KEYS" -gt 1 ]; then
  make_keys "$KEYS"
  shapes=(hot zipf)
else
  shapes=(hot)
fi
sw=12 # the scenario column, wider for zipf- names
[ "$KEYS" -le 1 ] || sw=16
printf "%-8s %-8s %-${sw}s %9s %9s %6s %7s %7s %7s %7s  %-22s %5s %7s\n" store pets scenario req/s ceiling ratio p50_ms p99_ms c_p99 non2xx "targets (ratio, p99)" hdrs vs_hdrs
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
  [ "$KEYS" -le 1 ] || add_keys "$db"
  log="$work/petstore-$n.log"
  limits=()
  [ "$store" = sqlite ] || limits=(--redis "$BENCH_REDIS")
  serve "$PORT" "$db" "$log" "${limits[@]}"
  pid=$served ready=$ready_ms
  if [ -n "$METRICS" ]; then
    mdb=$db
    if [ "$store" != postgres ]; then
      mdb="$work/pets-$store-$n-metrics.db"
      sqlite3 "$db" "VACUUM INTO '$mdb'"
    fi
    serve "$METRICS_PORT" "$mdb" "$log.metrics" --admin-addr "127.0.0.1:$ADMIN_PORT" "${limits[@]}"
    mpid=$served
    # Scraped every second while it runs, as a Prometheus would (more often).
    (while kill -0 "$mpid" 2>/dev/null; do curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" >/dev/null; sleep 1; done) &
  fi
  # With REPLICATE: the same binary replicating, on a copy of the database.
  rpid=
  if [ -n "$REPLICATE" ] && [ "$store" != postgres ]; then
    rdb="$work/pets-$store-$n-replicated.db"
    sqlite3 "$db" "VACUUM INTO '$rdb'"
    rbase=${REPLICATE%%\?*}
    serve "$REPLICATE_PORT" "$rdb" "$log.replicated" --replicate-to "$rbase/$store-$n-$$${REPLICATE#"$rbase"}" "${limits[@]}"
    rpid=$served
    if [ -n "${REPLICA_AWAY:-}" ] && [ -n "${vgw_pid:-}" ]; then
      sleep 3 # its first snapshot uploaded
      kill -STOP "$vgw_pid"
    fi
  fi
  # With TRACING: the same binary tracing, on a copy of the database.
  xpid=
  if [ -n "$TRACING" ]; then
    xdb=$db
    if [ "$store" != postgres ]; then
      xdb="$work/pets-$store-$n-traced.db"
      sqlite3 "$db" "VACUUM INTO '$xdb'"
    fi
    OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$OTLP_PORT" OTEL_TRACES_SAMPLER_ARG=$TRACING \
      serve "$TRACING_PORT" "$xdb" "$log.traced" "${limits[@]}"
    xpid=$served
  fi
  # With limits in Redis: the same binary with limits in process, its twin.
  twin_key=
  if [ "$store" != sqlite ]; then
    tdb="$work/pets-$store-$n-twin.db"
    if [ "$store" = postgres ]; then
      seed "$tdb" "$n"
      [ "$KEYS" -le 1 ] || add_keys "$tdb"
      twin_key=$(tail -n 1 "$work/key-$n") twin="SQLite with limits in process"
    else
      sqlite3 "$db" "VACUUM INTO '$tdb'"
      twin_key=$key twin="limits in process"
    fi
    serve "$TWIN_PORT" "$tdb" "$log.twin"
    tpid=$served
  fi
  # The baseline, on a database of its own.
  if [ -n "$BASELINE" ]; then
    if [ "$store" = postgres ]; then
      bdb="${BENCH_POSTGRES%/*}/${bench_db}_baseline"
      seed_postgres "$bdb" "$n" "$work/baseline"
    else
      bdb="$work/pets-$store-$n-baseline.db"
      seed "$bdb" "$n" "$work/baseline"
    fi
    baseline_key=$(tail -n 1 "$work/key-$n")
    [ "$KEYS" -le 1 ] || add_keys "$bdb"
    server=$work/baseline serve "$BASELINE_PORT" "$bdb" "$log.baseline" "${limits[@]}"
    bpid=$served
  fi

  for shape in "${shapes[@]}"; do
  for scenario in "${scenarios[@]}"; do
    IFS=: read -r name path lua <<<"$scenario"
    label=$name pkey=$key tkey=$twin_key bkey=${baseline_key:-} ckey=
    if [ "$shape" = zipf ]; then
      # Every request carries a key of the Zipf law's, the ceilings' too.
      label=zipf-$name lua=zipf.lua pkey= tkey= bkey= ckey=
    fi
    : >"$work/c" ; : >"$work/h" ; : >"$work/p" ; : >"$work/m" ; : >"$work/t" ; : >"$work/r" ; : >"$work/b" ; : >"$work/rp" ; : >"$work/x" ; : >"$work/cpu"
    for _ in $(seq 1 "$REPS"); do
      export PETS=$n MODE=$name TOKENS="$work/tokens"
      run "$CEILING_PORT" "$path" "$lua" "$ckey" >>"$work/c"
      run "$HEADERS_PORT" "$path" "$lua" "$pkey" >>"$work/h"
      [ -z "$twin_key" ] || before=$(redis_calls)
      [ -z "$rpid" ] || cpu0=$(cpu_ms "$pid")
      run "$PORT" "$path" "$lua" "$pkey" >>"$work/p"
      if [ -n "$rpid" ]; then
        # The CPU of each server over its run, per thousand requests.
        cpu1=$(cpu_ms "$pid") rcpu0=$(cpu_ms "$rpid")
        run "$REPLICATE_PORT" "$path" "$lua" "$pkey" >>"$work/rp"
        echo "$cpu0 $cpu1 $(tail -n 1 "$work/p" | cut -d' ' -f5) $rcpu0 $(cpu_ms "$rpid") $(tail -n 1 "$work/rp" | cut -d' ' -f5)" >>"$work/cpu"
      fi
      if [ -n "$twin_key" ]; then
        # The calls Redis ran during the run, and the requests sent.
        join -a 2 -e 0 -o 2.1,1.2,2.2 <(echo "$before" | sort) <(redis_calls | sort) >>"$work/r"
        echo "requests 0 $(tail -n 1 "$work/p" | cut -d' ' -f5)" >>"$work/r"
        run "$TWIN_PORT" "$path" "$lua" "$tkey" >>"$work/t"
      fi
      [ -z "$METRICS" ] || run "$METRICS_PORT" "$path" "$lua" "$pkey" >>"$work/m"
      [ -z "$xpid" ] || run "$TRACING_PORT" "$path" "$lua" "$pkey" >>"$work/x"
      [ -z "$BASELINE" ] || run "$BASELINE_PORT" "$path" "$lua" "$bkey" >>"$work/b"
    done
    c=$(cut -d' ' -f1 "$work/c" | median)
    h=$(cut -d' ' -f1 "$work/h" | median)
    p=$(cut -d' ' -f1 "$work/p" | median)
    p50=$(cut -d' ' -f2 "$work/p" | median)
    p99=$(cut -d' ' -f3 "$work/p" | median)
    bad=$(awk '{ s += $4 } END { print s + 0 }' "$work/p")
    cp99=$(cut -d' ' -f3 "$work/c" | median)
    list_rps[$store-$label-$n]=$p
    ratio=$(echo "$p $c" | awk '{ print $1 / $2 }')
    verdict=$(echo "$ratio ${target[$store-$name]} $p99 ${target[$store-p99]}" | awk '{ printf "%s %s, %s %s", ($1 >= $2 ? "met" : "MISSED"), $2, ($3 <= $4 ? "met" : "MISSED"), $4 }')
    printf "%-8s %-8s %-${sw}s %9.0f %9.0f %6.2f %7.2f %7.2f %7.2f %7d  %-22s %5.2f %7.2f\n" "$store" "$n" "$label" "$p" "$c" "$ratio" "$p50" "$p99" "$cp99" "$bad" "$verdict" \
      "$(echo "$h $c" | awk '{ print $1 / $2 }')" "$(echo "$p $h" | awk '{ print $1 / $2 }')"
    if [ -n "$twin_key" ]; then
      t=$(cut -d' ' -f1 "$work/t" | median)
      # Each command's calls over every run, per request sent: all of
      # them, then the five most called (those a script runs count too).
      calls=$(awk '{ d[$1] += $3 - $2 } END { n = d["requests"]; delete d["requests"]
          for (c in d) if (d[c] > 0) { total += d[c]; printf "%s %.4f\n", c, d[c] / n } ; printf "total %.4f\n", total / n }' "$work/r" |
        sort -k2 -gr | awk '$1 == "total" { t = $2; next } ++i <= 5 { s = s sep $1 " " $2; sep = ", " } END { printf "%s (%s)", t, s }')
      printf "#   %-${sw}s Redis calls a request: %s; %s: %.0f req/s, p99 %.2f ms; in Redis/in process %.2f\n" \
        "$label" "$calls" "$twin" "$t" "$(cut -d' ' -f3 "$work/t" | median)" "$(echo "$p $t" | awk '{ print $1 / $2 }')"
    fi
    if [ -n "$BASELINE" ]; then
      b=$(cut -d' ' -f1 "$work/b" | median)
      printf "#   %-${sw}s baseline: %9.0f req/s, ratio %.2f, p50 %.2f ms, p99 %.2f ms; this code/baseline %.2f, paired %.2f\n" \
        "$label" "$b" "$(echo "$b $c" | awk '{ print $1 / $2 }')" "$(cut -d' ' -f2 "$work/b" | median)" "$(cut -d' ' -f3 "$work/b" | median)" \
        "$(echo "$p $b" | awk '{ print $1 / $2 }')" "$(paste -d' ' <(cut -d' ' -f1 "$work/p") <(cut -d' ' -f1 "$work/b") | awk '{ print $1 / $2 }' | median)"
    fi
    if [ -n "$rpid" ]; then
      rp=$(cut -d' ' -f1 "$work/rp" | median)
      paired=$(paste -d' ' <(cut -d' ' -f1 "$work/rp") <(cut -d' ' -f1 "$work/p") | awk '{ print $1 / $2 }' | median)
      cpu=$(awk '{ a += $2 - $1; n += $3; b += $5 - $4; m += $6 } END { printf "%.1f and %.1f", a * 1000 / n, b * 1000 / m }' "$work/cpu")
      printf "#   %-${sw}s with --replicate-to: %9.0f req/s, p50 %.2f ms, p99 %.2f ms; with/without %.3f, paired %.3f (target: 0.97 reads, 0.90 creates); CPU ms a 1,000 requests without and with: %s\n" \
        "$label" "$rp" "$(cut -d' ' -f2 "$work/rp" | median)" "$(cut -d' ' -f3 "$work/rp" | median)" \
        "$(echo "$rp $p" | awk '{ print $1 / $2 }')" "$paired" "$cpu"
    fi
    if [ -n "$xpid" ]; then
      x=$(cut -d' ' -f1 "$work/x" | median)
      paired=$(paste -d' ' <(cut -d' ' -f1 "$work/x") <(cut -d' ' -f1 "$work/p") | awk '{ print $1 / $2 }' | median)
      printf "#   %-${sw}s traced at %s: %9.0f req/s, p50 %.2f ms, p99 %.2f ms; traced/untraced %.3f, paired %.3f (target at 0.01: 0.97 at least)\n" \
        "$label" "$TRACING" "$x" "$(cut -d' ' -f2 "$work/x" | median)" "$(cut -d' ' -f3 "$work/x" | median)" \
        "$(echo "$x $p" | awk '{ print $1 / $2 }')" "$paired"
    fi
    if [ -n "$METRICS" ]; then
      m=$(cut -d' ' -f1 "$work/m" | median)
      # Each run with metrics follows one without: the median of those
      # pairs' ratios is steadier than the ratio of the medians.
      paired=$(paste -d' ' <(cut -d' ' -f1 "$work/m") <(cut -d' ' -f1 "$work/p") | awk '{ print $1 / $2 }' | median)
      printf "#   %-${sw}s with metrics: %9.0f req/s, p50 %.2f ms, p99 %.2f ms; with/without metrics %.3f, paired %.3f (target: 0.97 at least)\n" \
        "$label" "$m" "$(cut -d' ' -f2 "$work/m" | median)" "$(cut -d' ' -f3 "$work/m" | median)" \
        "$(echo "$m $p" | awk '{ print $1 / $2 }')" "$paired"
    fi
  done
  done
  if [ -n "$METRICS" ]; then
    echo "#   the metrics server counted $(curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" |
      awk '/^petstore_http_request_duration_seconds_count/ { s += $NF } END { printf "%.0f", s }') requests"
    stop "$mpid"
  fi
  [ -z "$twin_key" ] || stop "$tpid"
  [ -z "$BASELINE" ] || stop "$bpid"
  if [ -n "$xpid" ]; then
    grep -E 'level=(WARN|ERROR)' "$log.traced" | head -3 || true
    stop "$xpid"
  fi
  if [ -n "$rpid" ]; then
    [ -z "${REPLICA_AWAY:-}" ] || [ -z "${vgw_pid:-}" ] || kill -CONT "$vgw_pid"
    grep -E 'level=(WARN|ERROR)' "$log.replicated" | head -3 || true
    stop "$rpid"
  fi
  rss=$(awk '/VmHWM/ { print $2 }' "/proc/$pid/status")
  stop "$pid"
  echo "# $store, $n pets: ready in ${ready} ms (target for 1M on SQLite: 300 at most); peak RSS $((rss / 1024)) MiB after the run (target for 1M on SQLite: 96 at most)"
done
if [ -n "${list_rps[$store-list-1000000]:-}" ] && [ -n "${list_rps[$store-list-1000]:-}" ]; then
  echo "# $store list throughput, 1M pets vs 1k: $(echo "${list_rps[$store-list-1000000]} ${list_rps[$store-list-1000]}" | awk '{ printf "%.2f", $1 / $2 }') (target on SQLite: 0.8 at least)"
fi
done
