package main

// Fault tests: the built binary is killed (SIGKILL) or stopped (SIGTERM) at a
// random moment while goroutines create pets, then started again on the same
// database. Every pet acknowledged with a 201 must be there with exactly its
// fields, once, in id order (docs/production.md, "Operations": nothing acknowledged is lost). Skipped with -short.
// Helpers here start with "fault"; the load test uses them too, and the
// outage tests break the network to PostgreSQL and Redis with faultProxy.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"petstore/internal/servertest"
	"petstore/internal/testkit"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// faultWorkers is how many goroutines create pets at once.
const faultWorkers = 8

// faultClient is an HTTP client that keeps a connection per worker alive.
func faultClient(conns int) *http.Client {
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns},
	}
}

// faultResult is one exchange as the client saw it.
type faultResult struct {
	status  int
	header  http.Header
	body    []byte
	err     error // no response at all: not acknowledged
	bodyErr error // a response whose body was cut short
}

// faultDo sends one request and reads the whole response. key "" sends no
// Authorization; a body is sent as application/json; header holds more
// header names and values.
func faultDo(client *http.Client, method, url, key, body string, header ...string) faultResult {
	req, err := testkit.NewRequest(method, url, key, body, header...)
	if err != nil {
		return faultResult{err: err}
	}
	resp, b, err := testkit.ReadResponse(client, req)
	if resp == nil {
		return faultResult{err: err}
	}
	res := faultResult{status: resp.StatusCode, header: resp.Header, body: b, bodyErr: err}
	if res.bodyErr == nil && resp.ContentLength >= 0 && int64(len(res.body)) != resp.ContentLength {
		res.bodyErr = fmt.Errorf("body of %d bytes, Content-Length %d", len(res.body), resp.ContentLength)
	}
	return res
}

// faultNewPetBody is the createPet body for p (status left out when nil).
func faultNewPetBody(p testkit.Pet) string {
	body := fmt.Sprintf(`{"name":%q,"categoryId":%d`, p.Name, p.CategoryID)
	if p.Status != nil {
		body += fmt.Sprintf(`,"status":%q`, *p.Status)
	}
	return body + "}"
}

// faultDecodePet decodes a Pet strictly: only the four fields, status never
// null. It reports problems instead of failing, so goroutines can call it.
func faultDecodePet(raw []byte) (testkit.Pet, error) {
	var p testkit.Pet
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("not a Pet: %v: %s", err, raw)
	}
	if bytes.Contains(raw, []byte(`"status":null`)) {
		return p, fmt.Errorf("status is null; it must be absent instead: %s", raw)
	}
	return p, nil
}

// faultSamePet reports whether got has want's fields (the id included when
// want has one).
func faultSamePet(got, want testkit.Pet) bool {
	return (want.ID == 0 || got.ID == want.ID) && got.Name == want.Name &&
		got.CategoryID == want.CategoryID &&
		(got.Status == nil) == (want.Status == nil) && (got.Status == nil || *got.Status == *want.Status)
}

func faultPetString(p testkit.Pet) string {
	st := "(none)"
	if p.Status != nil {
		st = *p.Status
	}
	return fmt.Sprintf("{id %d, name %q, categoryId %d, status %s}", p.ID, p.Name, p.CategoryID, st)
}

// faultCheckStore checks a freshly started server against what the test
// knows: every acknowledged pet readable by id with exactly its fields, and
// listed exactly once. A listed pet that was never acknowledged must be one
// the test sent (its request was cut off by the kill); with exact, there
// may be none. It returns the highest id listed.
func faultCheckStore(t *testing.T, s *testkit.Petstore, client *http.Client, key string, acked map[int64]testkit.Pet, sent map[string]testkit.Pet, exact bool) (maxID int64, unacked int) {
	t.Helper()
	for _, id := range slices.Sorted(maps.Keys(acked)) {
		want := acked[id]
		res := faultDo(client, "GET", s.URL+"/v1/pets/"+strconv.FormatInt(id, 10), key, "")
		if res.err != nil || res.bodyErr != nil || res.status != http.StatusOK {
			t.Errorf("acknowledged pet %s lost: GET answered %d %v %v: %s", faultPetString(want), res.status, res.err, res.bodyErr, res.body)
			continue
		}
		got, err := faultDecodePet(res.body)
		if err != nil || !faultSamePet(got, want) {
			t.Errorf("GET /v1/pets/%d = %s (%v), want %s", id, res.body, err, faultPetString(want))
		}
	}
	listed := map[int64]bool{}
	for _, p := range testkit.AllPets(t, client, s.URL, key, "/v1/pets?limit=100") {
		listed[p.ID] = true
		maxID = max(maxID, p.ID)
		if want, ok := acked[p.ID]; ok {
			if !faultSamePet(p, want) {
				t.Errorf("listed %s, acknowledged as %s", faultPetString(p), faultPetString(want))
			}
			continue
		}
		unacked++
		sentAs, ok := sent[p.Name]
		switch {
		case !ok || !faultSamePet(p, sentAs):
			t.Errorf("listed %s, which the test never sent", faultPetString(p))
		case exact:
			t.Errorf("listed %s, stored without a 201 reaching the client", faultPetString(p))
		}
	}
	for id, want := range acked {
		if !listed[id] {
			t.Errorf("acknowledged pet %s missing from the list", faultPetString(want))
		}
	}
	return maxID, unacked
}

// faultLogProblem finds what must never be in the server's log: a panic, an
// error-level line, a 5xx.
var faultLogProblem = regexp.MustCompile(`(?m)^.*(?:panic|goroutine \d+ \[|level=ERROR|status=5\d\d).*$`)

func faultCheckLog(t *testing.T, s *testkit.Petstore) {
	t.Helper()
	if m := faultLogProblem.FindAllString(s.Stderr.String(), 5); m != nil {
		t.Errorf("the server logged:\n%s", strings.Join(m, "\n"))
	}
}

func TestFaultKill9DuringConcurrentCreates(t *testing.T) {
	faultRounds(t, "SIGKILL", syscall.SIGKILL, 5)
}

func TestFaultSIGTERMDuringConcurrentCreates(t *testing.T) {
	faultRounds(t, "SIGTERM", syscall.SIGTERM, 3)
}

// faultRounds starts the server on one database rounds times; each time
// faultWorkers goroutines create pets until sig comes 50-300 ms later. After
// each restart the store is checked against the 201s received so far.
func faultRounds(t *testing.T, name string, sig syscall.Signal, rounds int) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) { faultRoundsOn(t, opts, name, sig, rounds) })
}

func faultRoundsOn(t *testing.T, opts servertest.Options, name string, sig syscall.Signal, rounds int) {
	dir := t.TempDir()
	db := opts.DBAt(t, dir+"/petstore.db")
	key := mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "enterprise", "--name", "fault",
		"--rpm", "100000000", "--rpd", "1000000000")
	statuses := []string{"available", "pending", "sold", ""}

	acked := map[int64]testkit.Pet{} // every 201, by id
	sent := map[string]testkit.Pet{} // every pet sent, by its unique name
	var maxID int64                  // the highest id stored before the round
	var unackedStored int            // pets stored without a 201 (SIGKILL only)
	start := time.Now()
	for round := range rounds + 1 {
		s := startPetstore(t, dir, "serve", "--db", db)
		s.KeysSent = append(s.KeysSent, key)
		client := faultClient(faultWorkers)
		if round > 0 {
			maxID, unackedStored = faultCheckStore(t, s, client, key, acked, sent, sig == syscall.SIGTERM)
			if t.Failed() {
				t.Fatalf("after round %d (%s): pets lost or changed; server log:\n%s", round, name, s.Stderr)
			}
		}
		if round == rounds {
			faultCheckLog(t, s)
			break
		}

		var (
			mu         sync.Mutex
			roundAcked []testkit.Pet
			signalled  atomic.Bool
			unanswered atomic.Int64 // requests that got no (complete) response
			stop       = make(chan struct{})
			wg         sync.WaitGroup
		)
		for g := range faultWorkers {
			wg.Go(func() {
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					p := testkit.Pet{Name: fmt.Sprintf("%s round %d worker %d pet %d", name, round, g, n),
						CategoryID: int64(round*100_000 + g*10_000 + n + 1)}
					if st := statuses[(g+n)%len(statuses)]; st != "" {
						p.Status = &st
					}
					mu.Lock()
					sent[p.Name] = p
					mu.Unlock()
					res := faultDo(client, "POST", s.URL+"/v1/pets", key, faultNewPetBody(p))
					switch {
					case res.err != nil && signalled.Load():
						unanswered.Add(1)
						return
					case res.err != nil:
						t.Errorf("POST %s before any signal: %v", p.Name, res.err)
						return
					case res.bodyErr != nil && sig == syscall.SIGKILL && signalled.Load():
						unanswered.Add(1)
						return
					case res.bodyErr != nil:
						t.Errorf("POST %s: %d with an incomplete body (%v): %q", p.Name, res.status, res.bodyErr, res.body)
						return
					case res.status != http.StatusCreated:
						t.Errorf("POST %s: %d %s, want 201", p.Name, res.status, res.body)
						return
					}
					got, err := faultDecodePet(res.body)
					if err != nil || got.ID < 1 || !faultSamePet(got, p) {
						t.Errorf("POST %s answered %s (%v)", faultNewPetBody(p), res.body, err)
						return
					}
					if loc := res.header.Get("Location"); loc != "/v1/pets/"+strconv.FormatInt(got.ID, 10) {
						t.Errorf("POST answered pet %d with Location %q", got.ID, loc)
					}
					mu.Lock()
					roundAcked = append(roundAcked, got)
					mu.Unlock()
				}
			})
		}

		delay := 50*time.Millisecond + rand.N(250*time.Millisecond)
		time.Sleep(delay)
		signalled.Store(true)
		if sig == syscall.SIGKILL {
			s.Kill9()
			faultCheckLog(t, s)
		} else {
			if code := s.Stop(sig); code != 0 {
				t.Errorf("exit status %d after %s, want 0:\n%s", code, name, s.Stderr)
			}
			if !strings.Contains(s.Stderr.String(), "msg=stopped") {
				t.Errorf("no msg=stopped line after %s:\n%s", name, s.Stderr)
			}
			faultCheckLog(t, s)
		}
		close(stop)
		wg.Wait()
		client.CloseIdleConnections()

		for _, p := range roundAcked {
			if prev, ok := acked[p.ID]; ok {
				t.Errorf("id %d acknowledged twice: %s and %s", p.ID, faultPetString(prev), faultPetString(p))
			}
			if p.ID <= maxID {
				t.Errorf("round %d gave id %d to %q, not above %d, the highest id stored before; ids must ascend and never be reused", round, p.ID, p.Name, maxID)
			}
			acked[p.ID] = p
		}
		t.Logf("round %d: %s after %v: %d pets acknowledged, %d requests unanswered", round, name, delay.Round(time.Millisecond), len(roundAcked), unanswered.Load())
	}
	if len(acked) == 0 {
		t.Errorf("no create acknowledged in %d rounds: nothing was tested", rounds)
	}
	t.Logf("%d rounds of %s in %v: %d pets acknowledged and found again; %d stored whose 201 never arrived",
		rounds, name, time.Since(start).Round(time.Millisecond), len(acked), unackedStored)
	if sig == syscall.SIGKILL && unackedStored > rounds*faultWorkers {
		t.Errorf("%d pets stored without a 201, more than the %d requests that can have been in flight at the kills", unackedStored, rounds*faultWorkers)
	}
}
