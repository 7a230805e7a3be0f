package main

// Tests of several servers on one PostgreSQL database (docs/replicas.md, "Many
// servers"): the built binary, started more than once on one database.
// Skipped without PETSTORE_TEST_POSTGRES, and with -short.

import (
	"context"
	"encoding/csv"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/store"
	"petstore/internal/testkit"
)

// Two servers take creates from 8 goroutines each while a reader walks the
// list page by page through a third. Ids commit in id order, so a walk that
// lists a pet lists every pet with a smaller id: none commits late behind
// the reader's cursor. After the load, one more walk lists every 201 once.
func TestTwoServersCreateWhileAThirdPagesEveryPetOnce(t *testing.T) {
	t.Parallel()
	db := testkit.ServerPostgresURL(t)
	key := mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "enterprise", "--name", "replicas",
		"--rpm", "100000000", "--rpd", "1000000000")
	dir := t.TempDir()
	writers := []*testkit.Petstore{startPetstore(t, dir, "serve", "--db", db), startPetstore(t, dir, "serve", "--db", db)}
	reader := startPetstore(t, dir, "serve", "--db", db)
	for _, s := range append(slices.Clone(writers), reader) {
		s.KeysSent = append(s.KeysSent, key)
	}

	const perServer = 8
	var (
		mu      sync.Mutex
		acked   = map[int64]testkit.Pet{}
		stopped atomic.Bool
		wg      sync.WaitGroup
	)
	for w, s := range writers {
		client := faultClient(perServer)
		defer client.CloseIdleConnections()
		for g := range perServer {
			wg.Go(func() {
				for n := 0; !stopped.Load(); n++ {
					p := testkit.Pet{Name: fmt.Sprintf("server %d worker %d pet %d", w, g, n), CategoryID: int64(n + 1)}
					res := faultDo(client, "POST", s.URL+"/v1/pets", key, faultNewPetBody(p))
					if res.err != nil || res.status != http.StatusCreated {
						t.Errorf("POST to server %d: %d %v %s", w, res.status, res.err, res.body)
						return
					}
					got, err := faultDecodePet(res.body)
					if err != nil || !faultSamePet(got, p) {
						t.Errorf("POST %s answered %s (%v)", p.Name, res.body, err)
						return
					}
					mu.Lock()
					acked[got.ID] = got
					mu.Unlock()
				}
			})
		}
	}
	var walks [][]int64
	readerClient := faultClient(1)
	defer readerClient.CloseIdleConnections()
	// Pages of 20: a walk crosses many pages, and still lists the pets
	// far faster than sixteen writers add them. Of 7, the writers on a
	// quiet machine added them nearly as fast, and a run made two walks.
	for start := time.Now(); time.Since(start) < 3*time.Second && !t.Failed(); {
		walks = append(walks, replicaWalk(t, readerClient, reader.URL, key, 20))
	}
	stopped.Store(true)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	all := slices.Sorted(maps.Keys(acked))
	final := replicaWalk(t, readerClient, reader.URL, key, 100)
	if !slices.Equal(final, all) {
		t.Errorf("after the load the list holds %d pets, want the %d acknowledged, each once, ascending", len(final), len(all))
	}
	for i, walk := range walks {
		if len(walk) == 0 {
			continue
		}
		// Every acknowledged pet up to the last one this walk listed.
		want := all[:sort64(all, walk[len(walk)-1])]
		if !slices.Equal(walk, want) {
			missing := slices.DeleteFunc(slices.Clone(want), func(id int64) bool { _, found := slices.BinarySearch(walk, id); return found })
			t.Errorf("walk %d of %d listed %d pets up to id %d, want %d: missing %v", i+1, len(walks), len(walk), walk[len(walk)-1], len(want), first(missing, 10))
		}
	}
	if len(all) < 100 || len(walks) < 3 {
		t.Errorf("%d pets created and %d walks made: too few to test anything", len(all), len(walks))
	}
	t.Logf("%d pets created through two servers, %d walks through a third", len(all), len(walks))
}

// replicaWalk lists every pet, following rel="next" from a first page of
// limit, and returns the ids in the order listed.
func replicaWalk(t *testing.T, client *http.Client, base, key string, limit int) []int64 {
	t.Helper()
	var ids []int64
	for _, p := range testkit.AllPets(t, client, base, key, "/v1/pets?limit="+strconv.Itoa(limit)) {
		ids = append(ids, p.ID)
	}
	return ids
}

// sort64 is the number of ids in sorted up to and including id.
func sort64(sorted []int64, id int64) int {
	i, found := slices.BinarySearch(sorted, id)
	if found {
		i++
	}
	return i
}

func first[T any](s []T, n int) []T { return s[:min(n, len(s))] }

// A replica deployment on loopback: servers on one PostgreSQL schema and
// one Redis of the test's own, behind HAProxy (round robin,
// checking /readyz). HAProxy comes from Debian's packages; without it the
// test is skipped, unless PETSTORE_TEST_BALANCER is set (.ci/run sets it).
type balancedSet struct {
	t       *testing.T
	dir     string
	db      string
	args    []string // the flags every server gets
	bins    []string // each server's build of petstore
	addrs   []string // each server's fixed address, so a restart comes back there
	servers []*testkit.Petstore
	url     string // the balancer, http://127.0.0.1:PORT
	stats   string // its state of each server, as CSV
	redis   *redisProcess
}

func startBalancedSet(t *testing.T, n int) *balancedSet {
	t.Helper()
	return startBalancedSetOf(t, n, testkit.PetstoreBinary(t))
}

// startBalancedSetOf is startBalancedSet with servers of build bin and
// the flags extra beside the usual ones.
func startBalancedSetOf(t *testing.T, n int, bin string, extra ...string) *balancedSet {
	t.Helper()
	haproxy := testkit.BalancerBinary(t, "haproxy")
	b := &balancedSet{t: t, dir: t.TempDir(), db: testkit.ServerPostgresURL(t)}
	b.redis = startRedisProcess(t, testkit.BalancerBinary(t, "redis-server"))
	b.args = append([]string{"serve", "--db", b.db, "--redis", b.redis.url, "--trust-proxy", "--shutdown-delay", "1s"}, extra...)
	for i := range n {
		b.addrs = append(b.addrs, testkit.FreeAddr(t))
		b.bins = append(b.bins, bin)
		b.servers = append(b.servers, nil)
		b.start(i)
	}
	lb, stats := testkit.FreeAddr(t), testkit.FreeAddr(t)
	var cfg strings.Builder
	fmt.Fprintf(&cfg, `global
	maxconn 2000
defaults
	mode http
	timeout connect 1s
	timeout client 30s
	timeout server 30s
	retries 3
	option redispatch
	# Only a request that never reached a server is sent again: a create
	# is never made twice.
	retry-on conn-failure
frontend petstore
	bind %s
	option forwardfor
	default_backend servers
frontend stats
	bind %s
	stats enable
	stats uri /stats
backend servers
	balance roundrobin
	option httpchk GET /readyz
	http-check expect status 200
	default-server check inter 200ms fall 1 rise 1
`, lb, stats)
	for i, addr := range b.addrs {
		fmt.Fprintf(&cfg, "\tserver s%d %s\n", i, addr)
	}
	conf := filepath.Join(b.dir, "haproxy.cfg")
	if err := os.WriteFile(conf, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.StartProcess(t, "haproxy", haproxy, "-db", "-f", conf)
	b.url = "http://" + lb
	b.stats = "http://" + stats + "/stats;csv"
	testkit.WaitHealthy(t, &http.Client{Timeout: time.Second}, b.url)
	return b
}

// waitUp waits until the balancer's health check finds server i up.
func (b *balancedSet) waitUp(i int) {
	b.t.Helper()
	server := "s" + strconv.Itoa(i)
	testkit.Eventually(b.t, 10*time.Second, "the balancer finds server "+strconv.Itoa(i)+" up", func() bool {
		resp, err := http.Get(b.stats)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		rows, err := csv.NewReader(resp.Body).ReadAll()
		if err != nil || len(rows) == 0 {
			return false
		}
		status := slices.Index(rows[0], "status")
		return status > 0 && slices.ContainsFunc(rows[1:], func(row []string) bool {
			return row[0] == "servers" && row[1] == server && row[status] == "UP"
		})
	})
}

// start starts server i at its address.
func (b *balancedSet) start(i int) {
	b.t.Helper()
	b.servers[i] = launchPetstoreBinary(b.t, b.bins[i], b.dir, nil, append(slices.Clone(b.args), "--addr", b.addrs[i])...).Served()
}

// redisProcess is a Redis server of the test's own, which it may stop and
// start again (empty: it keeps nothing on disk).
type redisProcess struct {
	t    *testing.T
	path string
	addr string
	url  string
	proc *testkit.Process
}

func startRedisProcess(t *testing.T, path string) *redisProcess {
	addr := testkit.FreeAddr(t)
	r := &redisProcess{t: t, path: path, addr: addr, url: "redis://" + addr + "/0"}
	r.start()
	return r
}

func (r *redisProcess) start() {
	r.t.Helper()
	_, port, _ := net.SplitHostPort(r.addr)
	r.proc = testkit.StartProcess(r.t, "redis-server", r.path, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no")
	testkit.Eventually(r.t, 5*time.Second, "redis-server answers on "+r.addr, func() bool {
		c, err := net.Dial("tcp", r.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// stop ends the server the hard way; start brings it back empty.
func (r *redisProcess) stop() { r.proc.Kill() }

// balancedLoad creates pets through the balancer from workers goroutines,
// each list-reading every few creates, until stop is called. It keeps the
// acknowledged pets and every request that failed. startLoad starts it
// with a key no limit stops, and returns once pets are being acknowledged.
type balancedLoad struct {
	stopped atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	acked   map[int64]testkit.Pet
	failed  []string
}

func (b *balancedSet) startLoad(keyName string, workers int) (load *balancedLoad, key string) {
	b.t.Helper()
	key = mustCreateKeyCLI(b.t, viaBinary, "--db", b.db, "--plan", "enterprise", "--name", keyName,
		"--rpm", "100000000", "--rpd", "1000000000")
	load = &balancedLoad{acked: map[int64]testkit.Pet{}}
	load.run(b, key, workers)
	load.waitAcked(b.t, 20)
	return load, key
}

func (l *balancedLoad) run(b *balancedSet, key string, workers int) {
	client := faultClient(workers)
	for g := range workers {
		l.wg.Go(func() {
			for n := 0; !l.stopped.Load(); n++ {
				p := testkit.Pet{Name: fmt.Sprintf("worker %d pet %d", g, n), CategoryID: int64(n + 1)}
				res := faultDo(client, "POST", b.url+"/v1/pets", key, faultNewPetBody(p))
				if res.err != nil || res.bodyErr != nil || res.status != http.StatusCreated {
					l.fail(fmt.Sprintf("POST %s: %d %v %v %s", p.Name, res.status, res.err, res.bodyErr, res.body))
					continue
				}
				got, err := faultDecodePet(res.body)
				if err != nil || !faultSamePet(got, p) {
					l.fail(fmt.Sprintf("POST %s answered %s", p.Name, res.body))
					continue
				}
				l.mu.Lock()
				l.acked[got.ID] = got
				l.mu.Unlock()
				if n%4 == 0 {
					if res := faultDo(client, "GET", b.url+"/v1/pets?status=available", key, ""); res.err != nil || res.status != http.StatusOK {
						l.fail(fmt.Sprintf("GET /v1/pets: %d %v %s", res.status, res.err, res.body))
					}
				}
			}
		})
	}
}

func (l *balancedLoad) fail(what string) {
	l.mu.Lock()
	l.failed = append(l.failed, what)
	l.mu.Unlock()
}

// waitAcked waits until n pets more than now are acknowledged.
func (l *balancedLoad) waitAcked(t *testing.T, n int) {
	t.Helper()
	acked := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.acked)
	}
	want := acked() + n
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d pets acknowledged through the balancer", want), func() bool { return acked() >= want })
}

func (l *balancedLoad) stop() {
	l.stopped.Store(true)
	l.wg.Wait()
}

// checkEveryPetOnce lists every pet through the balancer: each acknowledged
// pet is there once, with its fields.
func (l *balancedLoad) checkEveryPetOnce(t *testing.T, b *balancedSet, key string) {
	t.Helper()
	client := faultClient(1)
	defer client.CloseIdleConnections()
	listed := map[int64]bool{}
	for _, p := range testkit.AllPets(t, client, b.url, key, "/v1/pets?limit=100") {
		if want, ok := l.acked[p.ID]; ok && !faultSamePet(p, want) {
			t.Errorf("listed %s, acknowledged as %s", faultPetString(p), faultPetString(want))
		}
		listed[p.ID] = true
	}
	for id, p := range l.acked {
		if !listed[id] {
			t.Errorf("acknowledged pet %s is not listed", faultPetString(p))
		}
	}
	if len(l.acked) < 50 {
		t.Errorf("only %d pets acknowledged: too few to test anything", len(l.acked))
	}
}

// A rolling restart behind the balancer: each server in turn gets SIGTERM,
// drains (its /readyz fails while it still serves), stops and starts again,
// while clients keep creating and listing. No request fails.
func TestBalancedRollingRestartFailsNoRequest(t *testing.T) {
	t.Parallel()
	b := startBalancedSet(t, 3)
	load, key := b.startLoad("rolling", 6)
	for i := range b.servers {
		if code := b.servers[i].Stop(syscall.SIGTERM); code != 0 {
			t.Errorf("server %d: exit status %d after SIGTERM", i, code)
		}
		b.start(i)
		b.waitUp(i)
		load.waitAcked(t, 20)
	}
	load.stop()
	if len(load.failed) > 0 {
		t.Errorf("%d requests failed during the rolling restart, first: %s", len(load.failed), strings.Join(first(load.failed, 5), "\n"))
	}
	load.checkEveryPetOnce(t, b, key)
	t.Logf("%d pets created through a rolling restart of %d servers", len(load.acked), len(b.servers))
}

// One server killed with SIGKILL under concurrent creates through the
// balancer: the requests it held fail, but every pet that got a 201 is
// there exactly once, and the others go on serving.
func TestBalancedKill9LosesNoAcknowledgedPet(t *testing.T) {
	t.Parallel()
	b := startBalancedSet(t, 3)
	load, key := b.startLoad("kill9", 8)
	b.servers[1].Kill9()
	load.waitAcked(t, 50) // the others go on serving
	load.stop()
	if len(load.failed) > 8 {
		t.Errorf("%d requests failed, more than the 8 that can have been in flight at the kill: %s", len(load.failed), strings.Join(first(load.failed, 5), "\n"))
	}
	load.checkEveryPetOnce(t, b, key)
	t.Logf("%d pets acknowledged, %d requests failed around the kill", len(load.acked), len(load.failed))
}

// sendUntil429 sends GETs of /v1/pets with key to url until one answers 429,
// at most limit; it returns how many were accepted and the 429.
func sendUntil429(t *testing.T, client *http.Client, url, key string, limit int) (accepted int, refused faultResult) {
	t.Helper()
	for range limit {
		res := faultDo(client, "GET", url+"/v1/pets", key, "")
		switch {
		case res.err != nil || res.status >= 500:
			t.Fatalf("GET /v1/pets: %d %v %s", res.status, res.err, res.body)
		case res.status == http.StatusTooManyRequests:
			return accepted, res
		case res.status != http.StatusOK:
			t.Fatalf("GET /v1/pets: %d %s", res.status, res.body)
		}
		accepted++
	}
	return accepted, faultResult{}
}

// wantFreeMinute sends GETs with a Free key to url until the first 429 and
// wants the minute's 60 through, plus the one its bucket gives back each
// second (docs/api.md) for each whole second the burst took: on a loaded
// machine 60 requests can take longer than one. Three servers each keeping
// their own bucket would let 180 through. It returns the 429.
func wantFreeMinute(t *testing.T, client *http.Client, url, key, through string) faultResult {
	t.Helper()
	start := time.Now()
	accepted, refused := sendUntil429(t, client, url, key, 200)
	if most := 60 + int(time.Since(start)/time.Second); accepted < 60 || accepted > most {
		t.Errorf("a Free key got %d requests through %s before a 429 in %v, want 60 (at most %d with its refills)",
			accepted, through, time.Since(start).Round(time.Millisecond), most)
	}
	return refused
}

// The limits are the deployment's, not each server's: through three
// servers a Free key gets exactly its 60 requests a minute, the 61st a 429
// with a Retry-After (long enough: TestRedisServersAcceptTheRequestAfterRetryAfter,
// on a fake clock), and a key banned through one server is banned on the
// others.
func TestBalancedLimitsAreSharedByTheServers(t *testing.T) {
	t.Parallel()
	b := startBalancedSet(t, 3)
	client := faultClient(1)
	defer client.CloseIdleConnections()
	key := mustCreateKeyCLI(t, viaBinary, "--db", b.db, "--plan", "free", "--name", "shared")
	refused := wantFreeMinute(t, client, b.url, key, "three servers")
	if retry, err := strconv.Atoi(refused.header.Get("Retry-After")); err != nil || retry < 1 {
		t.Fatalf("the 429 has Retry-After %q", refused.header.Get("Retry-After"))
	}

	banned := mustCreateKeyCLI(t, viaBinary, "--db", b.db, "--plan", "free", "--name", "banned")
	direct := b.servers[0].URL
	if wantFreeMinute(t, client, direct, banned, "one server").status != http.StatusTooManyRequests {
		t.FailNow()
	}
	// --ban-after 10: the 11th request refused during the wait starts the
	// ban. One the bucket gave back meanwhile is accepted and ends the
	// wait: the next refusal starts a new one, and the count again.
	var last faultResult
	during := 0
	for range 60 {
		switch last = faultDo(client, "GET", direct+"/v1/pets", banned, ""); last.status {
		case http.StatusTooManyRequests:
			during++
		case http.StatusOK:
			during = -1
		}
		if strings.Contains(string(last.body), "temporarily_banned") || during == 11 {
			break
		}
	}
	if during != 11 || !strings.Contains(string(last.body), "temporarily_banned") {
		t.Fatalf("after %d more requests refused during the wait: %d %s, want the 11th temporarily_banned", during, last.status, last.body)
	}
	for i, s := range b.servers[1:] {
		res := faultDo(client, "GET", s.URL+"/v1/pets", banned, "")
		if res.status != http.StatusTooManyRequests || !strings.Contains(string(res.body), "temporarily_banned") {
			t.Errorf("server %d, for a key banned through server 0: %d %s, want 429 temporarily_banned", i+1, res.status, res.body)
		}
		if ra, _ := strconv.Atoi(res.header.Get("Retry-After")); ra < 800 {
			t.Errorf("server %d: Retry-After %d during a 15-minute ban", i+1, ra)
		}
	}
}

// A Redis that restarts empty hands out no fresh day: the day count is
// rebuilt from the database. While Redis is away, no request gets a 5xx
// and each server still limits; once it is back the limits are shared again.
func TestBalancedRedisRestartKeepsTheDayAndNeverFails(t *testing.T) {
	t.Parallel()
	b := startBalancedSet(t, 3)
	client := faultClient(1)
	defer client.CloseIdleConnections()
	key := mustCreateKeyCLI(t, viaBinary, "--db", b.db, "--plan", "enterprise", "--name", "daily", "--rpm", "1000", "--rpd", "50")
	for range 30 {
		if res := faultDo(client, "GET", b.url+"/v1/pets", key, ""); res.status != http.StatusOK {
			t.Fatalf("GET /v1/pets: %d %s", res.status, res.body)
		}
	}
	b.waitUsage(key, 30) // the servers write their day counts every 2 s
	b.redis.stop()
	b.redis.start()
	res := faultDo(client, "GET", b.url+"/v1/pets", key, "")
	if got := res.header.Get("X-Ratelimit-Remaining"); res.status != http.StatusOK || got != "19" {
		t.Errorf("the 31st request of the day after Redis restarted empty: %d, X-RateLimit-Remaining %q, want 19", res.status, got)
	}

	free := mustCreateKeyCLI(t, viaBinary, "--db", b.db, "--plan", "free", "--name", "outage")
	b.redis.stop()
	began := time.Now()
	accepted, _ := sendUntil429(t, client, b.url, free, 400) // fails the test on any 5xx
	// Each server's own bucket holds 60 and refills one a second (Free's
	// 60 a minute): three buckets, and what they refilled while it lasted.
	most := 180 + 3*int(math.Ceil(time.Since(began).Seconds()))
	if accepted < 60 || accepted > most {
		t.Errorf("with Redis away, a Free key got %d requests through three servers, want each server's own 60 and its refill at most (60 to %d)", accepted, most)
	}
	b.redis.start()
	b.waitRedisShared(client) // each server tries Redis again within a second
	fresh := mustCreateKeyCLI(t, viaBinary, "--db", b.db, "--plan", "free", "--name", "after")
	began = time.Now()
	accepted, _ = sendUntil429(t, client, b.url, fresh, 200)
	// One shared bucket: its 60, and the one a second it refilled while
	// they were sent (a loaded machine takes over a second for 60).
	if most := 60 + int(math.Ceil(time.Since(began).Seconds())); accepted < 60 || accepted > most {
		t.Errorf("once Redis is back, a new Free key got %d requests through three servers, want the one shared bucket's 60 and its refill at most (60 to %d)", accepted, most)
	}
}

// waitUsage waits until the database holds n requests of key today.
func (b *balancedSet) waitUsage(key string, n int64) {
	b.t.Helper()
	ctx := context.Background()
	store, err := store.Open(ctx, b.db, false, time.Now)
	if err != nil {
		b.t.Fatal(err)
	}
	defer store.Close()
	hash := domain.HashKey(key)
	k, ok, err := store.KeyByHash(ctx, hash[:])
	if err != nil || !ok {
		b.t.Fatalf("key not found (%v)", err)
	}
	testkit.Eventually(b.t, 10*time.Second, fmt.Sprintf("%d requests of today stored", n), func() bool {
		stored, err := store.Usage(ctx, k.BudgetID, time.Now().UTC().Format(time.DateOnly))
		return err == nil && stored >= n
	})
}

// waitRedisShared sends requests to each server until each one limits
// through Redis again: it logged as many comebacks as outages.
func (b *balancedSet) waitRedisShared(client *http.Client) {
	b.t.Helper()
	key := mustCreateKeyCLI(b.t, viaBinary, "--db", b.db, "--plan", "enterprise", "--name", "probe", "--rpm", "100000", "--rpd", "1000000")
	for i, s := range b.servers {
		testkit.Eventually(b.t, 10*time.Second, fmt.Sprintf("server %d on Redis again", i), func() bool {
			faultDo(client, "GET", s.URL+"/v1/pets", key, "")
			logs := s.Stderr.String()
			return strings.Count(logs, "Redis answers again") == strings.Count(logs, "Redis does not answer")
		})
	}
}
