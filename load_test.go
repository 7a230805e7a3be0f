package main

// A bounded load test of the built binary, run only when asked for:
//
//	go test -run TestLoad -load 30s .
//
// Many goroutines send mixed traffic over keep-alive connections (lists,
// filtered lists, reads of existing pets, creates, some bad requests and
// some without a key) for the given time. It checks there is no 5xx, no
// transport error and no unexpected status, that the server's peak resident
// memory stays under loadMaxRSS, and that every pet created is readable at
// the end; it logs a summary. Helpers here start with "load".

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"petstore/internal/testkit"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

var loadDuration = flag.Duration("load", 0, "run TestLoad against the built binary for this long, e.g. -load 30s")

const (
	loadWorkers = 32
	loadSeed    = 1000      // pets stored before the load starts
	loadMaxRSS  = 128 << 20 // the most the server's resident memory may peak at (VmHWM)
)

// loadOp is one kind of request and the statuses it may get.
type loadOp struct {
	name   string
	weight int
	want   []int
}

var loadOps = []loadOp{
	{"list", 25, []int{200}},
	{"list filtered", 15, []int{200}},
	{"list next page", 5, []int{200}},
	{"get", 30, []int{200}},
	{"create", 15, []int{201}},
	{"bad request", 6, []int{400, 404, 405, 415}},
	// Without a valid key the client address is limited like a Free key
	// (60 a minute), then banned: 401 turns into 429.
	{"no key", 4, []int{401, 429}},
}

// loadIDs are the ids of the pets known to exist.
type loadIDs struct {
	mu  sync.RWMutex
	ids []int64
}

func (k *loadIDs) add(id int64) {
	k.mu.Lock()
	k.ids = append(k.ids, id)
	k.mu.Unlock()
}

func (k *loadIDs) random() int64 {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.ids[rand.N(len(k.ids))]
}

// loadStats is what one worker saw.
type loadStats struct {
	statuses   map[int]int
	unexpected map[string]int // "op: status"
	errors     []string       // transport errors, the first few
	nErrors    int
	latencies  []time.Duration
	created    []testkit.Pet
}

// loadMemory reads the peak and current resident memory of process pid.
func loadMemory(t *testing.T, pid int) (hwm, rss int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the server's memory use: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, _ := strings.Cut(line, ":")
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch {
		case err != nil:
		case name == "VmHWM":
			hwm = kb << 10
		case name == "VmRSS":
			rss = kb << 10
		}
	}
	return hwm, rss
}

func TestLoad(t *testing.T) {
	if *loadDuration <= 0 {
		t.Skip("a load test: run it with go test -run TestLoad -load 30s .")
	}
	dir := t.TempDir()
	db := dir + "/petstore.db"
	key := mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "enterprise", "--name", "load",
		"--rpm", "1000000000", "--rpd", "100000000000")
	s := startPetstore(t, dir, "serve", "--db", db)
	s.KeysSent = append(s.KeysSent, key)

	var dials atomic.Int64
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 2 * loadWorkers, MaxIdleConnsPerHost: 2 * loadWorkers,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
	}}
	defer client.CloseIdleConnections()

	statuses := []string{"available", "pending", "sold", ""}
	newPet := func(i int) testkit.Pet {
		p := testkit.Pet{Name: "load pet " + strconv.Itoa(i), CategoryID: int64(i%50 + 1)}
		if st := statuses[i%len(statuses)]; st != "" {
			p.Status = &st
		}
		return p
	}
	known := &loadIDs{}
	for i := range loadSeed {
		res := faultDo(client, "POST", s.URL+"/v1/pets", key, faultNewPetBody(newPet(i)))
		if res.err != nil || res.status != http.StatusCreated {
			t.Fatalf("seeding: %d %v %s", res.status, res.err, res.body)
		}
		p, err := faultDecodePet(res.body)
		if err != nil {
			t.Fatal(err)
		}
		known.add(p.ID)
	}

	total := 0
	for _, op := range loadOps {
		total += op.weight
	}
	var serial atomic.Int64
	serial.Store(loadSeed)
	bad := []struct{ method, path, body, contentType string }{
		{"GET", "/v1/pets?limit=0", "", ""},
		{"GET", "/v1/pets?status=lost", "", ""},
		{"GET", "/v1/pets?cursor=nope", "", ""},
		{"GET", "/v1/pets/abc", "", ""},
		{"GET", "/v1/pets/999999999999", "", ""},
		{"POST", "/v1/pets", `{"name":"","categoryId":1}`, "application/json"},
		{"POST", "/v1/pets", `{"name":"x","categoryId":1`, "application/json"},
		{"POST", "/v1/pets", `{"name":"x","categoryId":1}`, "text/plain"},
		{"DELETE", "/v1/pets/1", "", ""},
		{"GET", "/v1/nowhere", "", ""},
	}

	stop := make(chan struct{})
	stats := make([]*loadStats, loadWorkers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range loadWorkers {
		st := &loadStats{statuses: map[int]int{}, unexpected: map[string]int{}}
		stats[w] = st
		wg.Go(func() {
			next := "/v1/pets?limit=10"
			for {
				select {
				case <-stop:
					return
				default:
				}
				pick := rand.N(total)
				var op loadOp
				for _, op = range loadOps {
					if pick -= op.weight; pick < 0 {
						break
					}
				}
				var req *http.Request
				var want testkit.Pet
				switch op.name {
				case "list":
					req, _ = http.NewRequest("GET", s.URL+"/v1/pets?limit="+strconv.Itoa(1+rand.N(100)), nil)
				case "list filtered":
					req, _ = http.NewRequest("GET", s.URL+"/v1/pets?limit=50&status="+statuses[rand.N(3)], nil)
				case "list next page":
					req, _ = http.NewRequest("GET", s.URL+next, nil)
				case "get":
					req, _ = http.NewRequest("GET", s.URL+"/v1/pets/"+strconv.FormatInt(known.random(), 10), nil)
				case "create":
					want = newPet(int(serial.Add(1)))
					req, _ = http.NewRequest("POST", s.URL+"/v1/pets", strings.NewReader(faultNewPetBody(want)))
					req.Header.Set("Content-Type", "application/json")
				case "bad request":
					b := bad[rand.N(len(bad))]
					req, _ = http.NewRequest(b.method, s.URL+b.path, strings.NewReader(b.body))
					if b.contentType != "" {
						req.Header.Set("Content-Type", b.contentType)
					}
				case "no key":
					req, _ = http.NewRequest("GET", s.URL+"/v1/pets", nil)
				}
				switch {
				case op.name == "no key" && rand.N(2) == 0:
					req.Header.Set("Authorization", "Bearer psk_live_not_a_key")
				case op.name != "no key":
					req.Header.Set("Authorization", "Bearer "+key)
				}

				began := time.Now()
				resp, err := client.Do(req)
				var body []byte
				if err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				st.latencies = append(st.latencies, time.Since(began))
				if err != nil {
					st.nErrors++
					if len(st.errors) < 5 {
						st.errors = append(st.errors, fmt.Sprintf("%s %s: %v", req.Method, req.URL.RequestURI(), err))
					}
					continue
				}
				st.statuses[resp.StatusCode]++
				if !slices.Contains(op.want, resp.StatusCode) {
					st.unexpected[fmt.Sprintf("%s %s: %d %.200s", op.name, req.URL.RequestURI(), resp.StatusCode, body)]++
					continue
				}
				switch op.name {
				case "create":
					p, err := faultDecodePet(body)
					if err != nil || !faultSamePet(p, want) {
						st.unexpected[fmt.Sprintf("create answered %.200s (%v)", body, err)]++
						continue
					}
					st.created = append(st.created, p)
					known.add(p.ID)
				case "list next page":
					next = "/v1/pets?limit=10"
					for _, v := range resp.Header.Values("Link") {
						if m := testkit.NextLinkRE.FindStringSubmatch(v); m != nil {
							next = m[1]
						}
					}
				}
			}
		})
	}
	time.Sleep(*loadDuration)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	hwm, rss := loadMemory(t, s.Cmd.Process.Pid)

	// Add up.
	all := &loadStats{statuses: map[int]int{}, unexpected: map[string]int{}}
	for _, st := range stats {
		for code, n := range st.statuses {
			all.statuses[code] += n
		}
		for k, n := range st.unexpected {
			all.unexpected[k] += n
		}
		all.errors = append(all.errors, st.errors...)
		all.nErrors += st.nErrors
		all.latencies = append(all.latencies, st.latencies...)
		all.created = append(all.created, st.created...)
	}
	slices.Sort(all.latencies)
	quantile := func(q float64) time.Duration {
		if len(all.latencies) == 0 {
			return 0
		}
		return all.latencies[int(q*float64(len(all.latencies)-1))]
	}
	requests := len(all.latencies)
	var perStatus []string
	for _, code := range slices.Sorted(maps.Keys(all.statuses)) {
		perStatus = append(perStatus, fmt.Sprintf("%d: %d", code, all.statuses[code]))
	}
	t.Logf("load: %d workers for %v over %d connections: %d requests, %.0f req/s",
		loadWorkers, elapsed.Round(time.Millisecond), dials.Load(), requests, float64(requests)/elapsed.Seconds())
	t.Logf("load: statuses %s; transport errors %d; pets created %d", strings.Join(perStatus, ", "), all.nErrors, len(all.created))
	t.Logf("load: latency p50 %v, p99 %v, p99.9 %v, max %v", quantile(0.5), quantile(0.99), quantile(0.999), quantile(1))
	t.Logf("load: server memory VmHWM %.1f MiB (bound %d MiB), VmRSS at the end %.1f MiB",
		float64(hwm)/(1<<20), loadMaxRSS>>20, float64(rss)/(1<<20))

	for code, n := range all.statuses {
		if code >= 500 {
			t.Errorf("%d responses with status %d", n, code)
		}
	}
	if all.nErrors > 0 {
		t.Errorf("%d transport errors, the first: %s", all.nErrors, strings.Join(all.errors, "\n"))
	}
	for k, n := range all.unexpected {
		t.Errorf("%d× unexpected: %s", n, k)
	}
	if hwm > loadMaxRSS {
		t.Errorf("the server's resident memory peaked at %.1f MiB, above the %d MiB bound", float64(hwm)/(1<<20), loadMaxRSS>>20)
	}

	// Every pet created is readable by id, with its fields, and listed.
	var (
		mu      sync.Mutex
		missing []string
		queue   = make(chan testkit.Pet)
	)
	var readers sync.WaitGroup
	for range loadWorkers {
		readers.Go(func() {
			for want := range queue {
				res := faultDo(client, "GET", s.URL+"/v1/pets/"+strconv.FormatInt(want.ID, 10), key, "")
				got, err := faultDecodePet(res.body)
				if res.err != nil || res.status != http.StatusOK || err != nil || !faultSamePet(got, want) {
					mu.Lock()
					missing = append(missing, fmt.Sprintf("%s: %d %v %s", faultPetString(want), res.status, res.err, res.body))
					mu.Unlock()
				}
			}
		})
	}
	for _, p := range all.created {
		queue <- p
	}
	close(queue)
	readers.Wait()
	if len(missing) > 0 {
		t.Errorf("%d of the %d pets created are not readable, the first: %s", len(missing), len(all.created), missing[0])
	}
	listed := testkit.AllPets(t, client, s.URL, key, "/v1/pets?limit=100")
	if want := loadSeed + len(all.created); len(listed) != want {
		t.Errorf("the list holds %d pets, want the %d seeded and created", len(listed), want)
	}

	if code := s.Stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
	faultCheckLog(t, s)
}
