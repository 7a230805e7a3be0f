#!/usr/bin/env bash
# The request path with webhooks to deliver to a receiver that hangs, against
# the same server with no webhook endpoint, side by side.
#
#   bench/webhooks.sh
#   DURATION=10s REPS=5 EVENTS=500 bench/webhooks.sh
#
# Two copies of one seeded SQLite database: on one, an endpoint whose
# receiver answers each delivery after 10 s (so every delivery worker it may
# use stays busy) and EVENTS webhook.test events queued for it; the other
# has none. Each scenario (list, get, create) alternates the two servers REPS
# times, the server pinned to CPU 0 and wrk to CPU 1, and prints the median
# requests a second and p99 of each and their ratio (with webhooks / without).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5s}
REPS=${REPS:-3}
CONNS=${CONNS:-32}
EVENTS=${EVENTS:-200}
PETS=1000
PORT=${PORT:-18191}
RECEIVER_PORT=${RECEIVER_PORT:-18192}

. bench/lib.sh
need python3 python3

with="$work/with.db" without="$work/without.db"
seed "$without" "$PETS"
key=$(tail -n 1 "$work/key-$PETS")
cp "$without" "$with"

# A receiver that answers every delivery after 10 s.
cat >"$work/receiver.py" <<'PY'
import http.server, sys, time
class Slow(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        time.sleep(10)
        self.send_response(204); self.end_headers()
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Slow).serve_forever()
PY
python3 "$work/receiver.py" "$RECEIVER_PORT" &
pids+=($!)

added=$("$work/petstore" webhooks add "http://127.0.0.1:$RECEIVER_PORT/hook" --db "$with" 2>/dev/null)
endpoint=${added%%$'\n'*} # its id, the first line (not through head, whose early exit would fail the pipe)
for _ in $(seq "$EVENTS"); do
  "$work/petstore" webhooks test "$endpoint" --db "$with" >/dev/null 2>&1
done
echo "queued $EVENTS events for endpoint $endpoint, whose receiver answers after 10 s" >&2

# run PORT PATH LUA: one wrk run; prints "rps p99_ms".
run() {
  local args=(-H "Authorization: Bearer $key")
  [ -n "$3" ] && args+=(-s "$work/$3")
  taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" --latency "${args[@]}" "http://127.0.0.1:$1$2" | wrk_figures | cut -d' ' -f1,3
}

# serve DB: start the pet store on DB, pinned to CPU 0; sets $server.
serve() {
  PETS=$PETS taskset -c 0 "$work/petstore" serve --addr "127.0.0.1:$PORT" --db "$1" --webhook-allow-private \
    2>>"$work/server.log" &
  server=$!
  pids+=("$server")
  wait_ready "$PORT" >/dev/null
}

export PETS
printf '%-8s %12s %12s %10s %10s %8s\n' scenario rps_with rps_without p99_with p99_without ratio
for s in "list:/v1/pets?limit=20:" "get:/v1/pets/1:get.lua" "create:/v1/pets:post.lua"; do
  IFS=: read -r name path lua <<<"$s"
  : >"$work/w" && : >"$work/wo"
  for _ in $(seq "$REPS"); do
    serve "$with"; run "$PORT" "$path" "$lua" >>"$work/w"; stop "$server"
    serve "$without"; run "$PORT" "$path" "$lua" >>"$work/wo"; stop "$server"
  done
  rw=$(cut -d' ' -f1 "$work/w" | median) rwo=$(cut -d' ' -f1 "$work/wo" | median)
  pw=$(cut -d' ' -f2 "$work/w" | median) pwo=$(cut -d' ' -f2 "$work/wo" | median)
  printf '%-8s %12s %12s %10s %10s %8.3f\n' "$name" "$rw" "$rwo" "$pw" "$pwo" "$(echo "$rw / $rwo" | bc -l)"
done
pending=$(sqlite3 "$with" "SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'" 2>/dev/null || echo '?')
echo "deliveries still pending on the copy with webhooks: $pending (each attempt hangs 10 s)" >&2
