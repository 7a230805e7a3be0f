#!/usr/bin/env bash
# Instructions per request: the pet store against the ceiling (bench/ceiling),
# each run under valgrind's callgrind while wrk drives the load.sh scenarios on
# a 1M-pet database.
#
#   bench/instructions.sh
#   DURATION=10s PETS=1000 bench/instructions.sh
#
# Unlike requests per second, an instruction count does not move with what
# else the machine is doing, so it shows a change of a few percent that the
# noise of a shared machine hides from bench/load.sh. It counts the server's
# own user-space instructions only: not the kernel's share (the socket system
# calls, about 40% of the CPU time of a request), not cache misses, and not
# SHA-NI, which valgrind does not emulate (a key's SHA-256 costs more here).
# So its ratio is a proxy for load.sh's, not the same figure; compare it
# between two versions of the code.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5s}
PETS=${PETS:-1000000}
CONNS=${CONNS:-32}
PORT=${PORT:-18181}
CEILING_PORT=${CEILING_PORT:-18199}

. bench/lib.sh
need valgrind valgrind

db="$work/pets.db"
seed "$db" "$PETS"
key=$(tail -n 1 "$db.key")

# measure NAME PORT KEY ARGS...: start ARGS under callgrind, then for each
# scenario warm up, count instructions over one wrk run, and append
# "NAME SCENARIO INSTRUCTIONS REQUESTS NON2XX" to $work/counts.
measure() {
  local name=$1 port=$2 key=$3
  shift 3
  local out="$work/callgrind.$name"
  GODEBUG=asyncpreemptoff=1 taskset -c 0 valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$out" "$@" >/dev/null 2>"$work/$name.log" &
  local vg=$!
  pids+=("$vg")
  wait_ready "$port" 12000 >/dev/null
  if [ "$name" = petstore ]; then # reads are served from memory once the copy is made
    for _ in $(seq 1 1200); do grep -q "pets copied into memory" "$work/$name.log" && break; sleep 0.5; done
  fi
  local dumps=0 args
  for scenario in "${scenarios[@]}"; do
    IFS=: read -r scenario_name path lua <<<"$scenario"
    args=()
    [ -n "$lua" ] && args+=(-s "$work/$lua")
    [ "$key" != - ] && args+=(-H "Authorization: Bearer $key")
    PETS=$PETS taskset -c 1 wrk -t1 -c"$CONNS" -d2s "${args[@]}" "http://127.0.0.1:$port$path" >/dev/null
    callgrind_control -i on "$vg" >/dev/null 2>&1
    PETS=$PETS taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" "${args[@]}" "http://127.0.0.1:$port$path" >"$work/wrk"
    callgrind_control -i off "$vg" >/dev/null 2>&1
    callgrind_control -d "$vg" >/dev/null 2>&1 # each dump holds the counts since the one before
    dumps=$((dumps + 1))
    for _ in $(seq 1 100); do [ -s "$out.$dumps" ] && grep -q '^totals:' "$out.$dumps" && break; sleep 0.1; done
    echo "$name $scenario_name $(awk '/^totals:/ { print $2 }' "$out.$dumps")" \
      "$(awk '/requests in/ { print $1 }' "$work/wrk")" \
      "$(awk '/Non-2xx/ { bad = $NF } END { print bad + 0 }' "$work/wrk")" >>"$work/counts"
  done
  kill "$vg"
  wait "$vg" 2>/dev/null || true
}

: >"$work/counts"
measure ceiling "$CEILING_PORT" - "$work/ceiling" -addr "127.0.0.1:$CEILING_PORT"
measure petstore "$PORT" "$key" "$work/petstore" --addr "127.0.0.1:$PORT" --db "$db"

printf '%-8s %-12s %12s %12s %6s %7s\n' pets scenario instr/req ceiling ratio non2xx
for scenario in "${scenarios[@]}"; do
  name=${scenario%%:*}
  awk -v s="$name" -v pets="$PETS" '
    $2 == s && $1 == "ceiling"  { c = $3 / $4 }
    $2 == s && $1 == "petstore" { p = $3 / $4; bad = $5 + 0 }
    END { printf "%-8s %-12s %12.0f %12.0f %6.2f %7d\n", pets, s, p, c, c / p, bad }' "$work/counts"
done
