#!/usr/bin/env bash
# Instructions per request: the pet store against the ceiling (bench/ceiling),
# each run under valgrind's callgrind while wrk drives the load.sh scenarios on
# a 1M-pet database.
#
#   bench/instructions.sh
#   DURATION=10s PETS=1000 bench/instructions.sh
#   METRICS=1 PETS=1000 bench/instructions.sh   # also the pet store with metrics
#   TRACING="0.01 1" PETS=1000 bench/instructions.sh   # also traced, 1% and 100% sampled
#
# Unlike requests per second, an instruction count does not move with what
# else the machine is doing, so it shows a change of a few percent that the
# noise of a shared machine hides from bench/load.sh. It counts the server's
# own user-space instructions only: not the kernel's share (the socket system
# calls, about 40% of the CPU time of a request), not cache misses, and not
# SHA-NI, which valgrind does not emulate (a key's SHA-256 costs more here).
# So its ratio is a proxy for load.sh's, not the same figure; compare it
# between two versions of the code. METRICS=1 also counts the same binary with
# --admin-addr (recording metrics) on a copy of the database, and prints its
# count and how much it adds to the count without metrics. TRACING="RATIO ..."
# also counts the same binary with traces on at each sampling ratio, its
# spans posted to a bare ceiling on CPU 1 that drops them (its exporter's
# work, in the server's process, is counted), and prints what each adds.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5s}
PETS=${PETS:-1000000}
CONNS=${CONNS:-32}
PORT=${PORT:-18181}
CEILING_PORT=${CEILING_PORT:-18199}
HEADERS_PORT=${HEADERS_PORT:-18198}
METRICS=${METRICS:-}
METRICS_PORT=${METRICS_PORT:-18182}
ADMIN_PORT=${ADMIN_PORT:-18183}
TRACING=${TRACING:-}
TRACING_PORT=${TRACING_PORT:-18189}
OTLP_PORT=${OTLP_PORT:-18190}

. bench/lib.sh
need valgrind valgrind

db="$work/pets.db"
seed "$db" "$PETS"
key=$(tail -n 1 "$work/key-$PETS")

# measure NAME PORT KEY ARGS...: start ARGS under callgrind, then for each
# scenario warm up, count instructions over one wrk run, and append
# "NAME SCENARIO INSTRUCTIONS REQUESTS NON2XX" to $work/counts.
measure() {
  local name=$1 port=$2 key=$3
  shift 3
  local out="$work/callgrind.$name"
  # Counting starts off (--instr-atstart=no) so that start-up and warm-up are
  # left out. Go's asynchronous preemption signals slow valgrind down and
  # change nothing that is measured, so they are off.
  GODEBUG=asyncpreemptoff=1 taskset -c 0 valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$out" "$@" >/dev/null 2>"$work/$name.log" &
  local vg=$!
  pids+=("$vg")
  wait_ready "$port" 12000 >/dev/null
  if [ "$name" = petstore ] || [ "$name" = metrics ] || [[ "$name" == traced-* ]]; then # reads are served from memory once the copy is made
    for _ in $(seq 1 1200); do grep -q "pets copied into memory" "$work/$name.log" && break; sleep 0.5; done
    grep -q "pets copied into memory" "$work/$name.log" ||
      { echo "the pet store did not copy its pets into memory in 10 minutes" >&2; tail -n 20 "$work/$name.log" >&2; exit 1; }
  fi
  local dumps=0 args instructions
  for scenario in "${scenarios[@]}"; do
    IFS=: read -r scenario_name path lua <<<"$scenario"
    # Under valgrind the server is tens of times slower: a request that wrk
    # gave up on would cost instructions without being counted.
    args=(--timeout 60s)
    [ -n "$lua" ] && args+=(-s "$work/$lua")
    [ "$key" != - ] && args+=(-H "Authorization: Bearer $key")
    PETS=$PETS taskset -c 1 wrk -t1 -c"$CONNS" -d2s "${args[@]}" "http://127.0.0.1:$port$path" >/dev/null
    callgrind_control -i on "$vg" >>"$work/control.log" 2>&1
    PETS=$PETS taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" "${args[@]}" "http://127.0.0.1:$port$path" >"$work/wrk"
    callgrind_control -i off "$vg" >>"$work/control.log" 2>&1
    callgrind_control -d "$vg" >>"$work/control.log" 2>&1 # each dump holds the counts since the one before
    dumps=$((dumps + 1))
    for _ in $(seq 1 100); do grep -qs '^totals:' "$out.$dumps" && break; sleep 0.1; done
    instructions=$(awk '/^totals:/ { print $2 }' "$out.$dumps" 2>/dev/null || true)
    if [ -z "$instructions" ] || [ "$instructions" -eq 0 ]; then
      echo "$name $scenario_name: callgrind wrote no count" >&2
      tail -n 20 "$work/$name.log" "$work/control.log" >&2
      exit 1
    fi
    if grep -q "Socket errors" "$work/wrk"; then
      echo "$name $scenario_name: wrk had socket errors, the count would be off:" >&2
      cat "$work/wrk" >&2
      exit 1
    fi
    echo "$name $scenario_name $instructions $(awk '/requests in/ { print $1 }' "$work/wrk")" \
      "$(awk '/Non-2xx/ { bad = $NF } END { print bad + 0 }' "$work/wrk")" >>"$work/counts"
  done
  stop "$vg"
}

: >"$work/counts"
measure ceiling "$CEILING_PORT" - "$work/ceiling" -addr "127.0.0.1:$CEILING_PORT"
measure headers "$HEADERS_PORT" "$key" "$work/ceiling" -headers -addr "127.0.0.1:$HEADERS_PORT"
measure petstore "$PORT" "$key" "$work/petstore" --addr "127.0.0.1:$PORT" --db "$db"
if [ -n "$METRICS" ]; then
  sqlite3 "$db" "VACUUM INTO '$db-metrics'"
  measure metrics "$METRICS_PORT" "$key" "$work/petstore" --addr "127.0.0.1:$METRICS_PORT" \
    --admin-addr "127.0.0.1:$ADMIN_PORT" --db "$db-metrics"
fi
if [ -n "$TRACING" ]; then
  taskset -c 1 "$work/ceiling" -addr "127.0.0.1:$OTLP_PORT" &
  pids+=($!)
  wait_ready "$OTLP_PORT" >/dev/null
  for ratio in $TRACING; do
    sqlite3 "$db" "VACUUM INTO '$db-traced-$ratio'"
    OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$OTLP_PORT" OTEL_TRACES_SAMPLER_ARG=$ratio \
      measure "traced-$ratio" "$TRACING_PORT" "$key" "$work/petstore" --addr "127.0.0.1:$TRACING_PORT" --db "$db-traced-$ratio"
  done
fi

# hdrs: the ceiling run with -headers (sending the pet store's headers).
printf '%-8s %-12s %12s %12s %6s %12s %6s %7s\n' pets scenario instr/req ceiling ratio hdrs vs_hdrs non2xx
for scenario in "${scenarios[@]}"; do
  name=${scenario%%:*}
  awk -v s="$name" -v pets="$PETS" '
    $2 == s && $1 == "ceiling"  { c = $3 / $4 }
    $2 == s && $1 == "headers"  { h = $3 / $4 }
    $2 == s && $1 == "petstore" { p = $3 / $4; bad = $5 + 0 }
    END { printf "%-8s %-12s %12.0f %12.0f %6.2f %12.0f %6.2f %7d\n", pets, s, p, c, c / p, h, h / p, bad }' "$work/counts"
done
if [ -n "$METRICS" ]; then
  for scenario in "${scenarios[@]}"; do
    name=${scenario%%:*}
    awk -v s="$name" '
      $2 == s && $1 == "petstore" { p = $3 / $4 }
      $2 == s && $1 == "metrics"  { m = $3 / $4; bad = $5 + 0 }
      END { printf "# %-12s with metrics: %.0f instructions a request, %+.1f%% against without (%d non-2xx)\n", s, m, (m / p - 1) * 100, bad }' "$work/counts"
  done
fi
for ratio in $TRACING; do
  for scenario in "${scenarios[@]}"; do
    name=${scenario%%:*}
    awk -v s="$name" -v r="$ratio" '
      $2 == s && $1 == "petstore"      { p = $3 / $4 }
      $2 == s && $1 == "traced-" r     { x = $3 / $4; bad = $5 + 0 }
      END { printf "# %-12s traced at %s: %.0f instructions a request, %+.1f%% against untraced (%d non-2xx)\n", s, r, x, (x / p - 1) * 100, bad }' "$work/counts"
  done
done
