# Shared by bench/load.sh and bench/instructions.sh (sourced, not run): tools,
# the two binaries, seeded databases and wrk's Lua scripts, in a temporary
# directory $work that is removed on exit with every process in $pids.

need() { # need COMMAND PACKAGE: install PACKAGE from Debian's packages when COMMAND is missing
  command -v "$1" >/dev/null 2>&1 && return
  echo "installing $2 ..." >&2
  local sudo=
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  if [ -z "${apt_updated:-}" ]; then
    $sudo apt-get update -qq >/dev/null
    apt_updated=1
  fi
  $sudo apt-get install -y -qq "$2" >/dev/null
}
need curl curl
need wrk wrk
need sqlite3 sqlite3
need taskset util-linux

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true # a server under valgrind writes its last counts as it ends
  rm -rf "$work"
}
trap cleanup EXIT

stop() { # stop PID: end a server started here, and forget it for cleanup
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  local kept=() p
  for p in "${pids[@]}"; do [ "$p" = "$1" ] || kept+=("$p"); done
  pids=("${kept[@]}")
}

echo "building into $work ..." >&2
CGO_ENABLED=0 go build -tags grpcnotrace -trimpath -o "$work/petstore" .
CGO_ENABLED=0 go build -trimpath -o "$work/ceiling" ./bench/ceiling

# seed FILE N [BINARY]: a database with N pets and an Enterprise key no
# load can exhaust, written to $work/key-N; the key made by BINARY (default
# the pet store built here), which brings the schema to its version.
seed() {
  local db=$1 n=$2
  "${3:-$work/petstore}" keys create --db "$db" --plan enterprise --name bench \
    --rpm 1000000000 --rpd 1000000000 2>/dev/null >"$work/key-$n"
  sqlite3 "$db" "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < $n)
    INSERT INTO pets (name, category_id, status)
    SELECT 'pet-' || x, x % 50 + 1,
           CASE x % 4 WHEN 0 THEN 'available' WHEN 1 THEN 'pending' WHEN 2 THEN 'sold' END FROM c;"
}

# seed_postgres URL N [BINARY]: the PostgreSQL database at URL emptied, then seeded as seed does.
# Emptied is every table and function of the URL's schema, whatever the migrations have made
# there by now, so that a second seed of one database runs them all again.
seed_postgres() {
  local db=$1 n=$2
  psql "$db" -q -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -c "DO \$\$
    DECLARE what text;
    BEGIN
      FOR what IN
        SELECT format('TABLE %I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname = current_schema()
        UNION ALL
        SELECT 'FUNCTION ' || oid::regprocedure FROM pg_proc WHERE pronamespace = current_schema()::regnamespace
      LOOP
        EXECUTE 'DROP ' || what || ' CASCADE';
      END LOOP;
    END \$\$" >/dev/null
  "${3:-$work/petstore}" keys create --db "$db" --plan enterprise --name bench \
    --rpm 1000000000 --rpd 1000000000 2>/dev/null >"$work/key-$n"
  psql "$db" -qc "INSERT INTO pets (name, category_id, status)
    SELECT 'pet-' || x, x % 50 + 1,
           CASE x % 4 WHEN 0 THEN 'available' WHEN 1 THEN 'pending' WHEN 2 THEN 'sold' END
    FROM generate_series(1, $n) AS x" -c "VACUUM ANALYZE pets" >/dev/null
}

# wrk_figures: wrk's --latency report on stdin as "req_per_s p50_ms p99_ms non2xx requests".
wrk_figures() {
  awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /Requests\/sec/ { rps = $2 }
    /^ +50%/ { p50 = ms($2) }
    /^ +99%/ { p99 = ms($2) }
    /Non-2xx/ { bad = $NF }
    / requests in / { n = $1 }
    END { printf "%.0f %.3f %.3f %d %d\n", rps, p50, p99, bad + 0, n }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

wait_ready() { # wait_ready PORT [TRIES]: poll /readyz every 5 ms, print the milliseconds it took
  local start=$(date +%s%N)
  for _ in $(seq 1 "${2:-2000}"); do
    if curl -sf "http://127.0.0.1:$1/readyz" >/dev/null 2>&1; then
      echo $(( ($(date +%s%N) - start) / 1000000 ))
      return
    fi
    sleep 0.005
  done
  echo "server on port $1 did not become ready" >&2
  exit 1
}

# The scenarios, as name:path:lua. get.lua asks for random existing ids (of
# $PETS pets), post.lua sends a fixed body.
scenarios=("list:/v1/pets?limit=20:" "list_status:/v1/pets?limit=20&status=available:"
           "get:/v1/pets/1:get.lua" "create:/v1/pets:post.lua")
cat >"$work/get.lua" <<'LUA'
local n = tonumber(os.getenv("PETS"))
math.randomseed(os.time())
request = function() return wrk.format("GET", "/v1/pets/" .. math.random(1, n)) end
LUA
cat >"$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"name":"Bench","categoryId":3,"status":"available"}'
wrk.headers["Content-Type"] = "application/json"
LUA
