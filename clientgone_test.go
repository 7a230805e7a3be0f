package main

// A client that hangs up (docs/observing.md): its request is recorded
// as 499, logged below ERROR and counted under its own code, never as a 5xx
// nor as a database failure, on both engines, healthy and stalled, through
// the real server.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/testkit"
)

// hangUpServer is a real server (run, with an admin listener) on one
// engine, with what its tests need to stall that engine and read its log
// and metrics.
type hangUpServer struct {
	*inProcess
	admin string
	key   string
	stall func() (release func())
}

// hangUpDBTimeout is the servers' --db-timeout: well past the clients' wait.
const hangUpDBTimeout = 2 * time.Second

func startHangUpServer(t *testing.T, engine string) *hangUpServer {
	t.Helper()
	var db, via string
	var stall func() func()
	var redis []string
	switch engine {
	case "sqlite":
		db = filepath.Join(t.TempDir(), "petstore.db")
		via = db
		stall = func() func() { return testkit.HoldWriteLock(t, db) }
	case "postgres":
		db = testkit.ServerPostgresURL(t)
		var proxy *testkit.FaultProxy
		proxy, via = testkit.FaultProxyTo(t, db)
		redis = []string{"--redis", testkit.RedisURL(t)}
		stall = func() func() {
			proxy.Set("stall")
			return func() { proxy.Set("pass") }
		}
	}
	key := mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "enterprise", "--name", "hangup",
		"--rpm", "100000000", "--rpd", "1000000000")
	p := runServing(t, nil, append([]string{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--db", via,
		"--db-timeout", hangUpDBTimeout.String()}, redis...)...)
	admin := testkit.AdminServing.FindStringSubmatch(p.stderr.String())
	if admin == nil {
		t.Fatalf("no admin= address on the serving line:\n%s", p.stderr)
	}
	return &hangUpServer{inProcess: p, admin: "http://" + admin[1], key: key, stall: stall}
}

// sendAndHangUp sends a request with X-Request-Id id and hangs up after
// wait; it tells whether the client gave up before an answer.
func (s *hangUpServer) sendAndHangUp(t *testing.T, method, target, key, body, id string, wait time.Duration) (gaveUp bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, err := testkit.NewRequest(method, s.url+target, key, body, "X-Request-Id", id)
	if err != nil {
		t.Fatal(err)
	}
	req = req.WithContext(ctx)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return true
	}
	defer resp.Body.Close()
	return false
}

// requestLogLine finds the log line of each request by its id: its level and
// status.
var requestLogLine = regexp.MustCompile(`level=(\w+) msg=request .*status=(\d+) .*request_id=(\S+)`)

type loggedRequest struct {
	level  string
	status int
}

func (s *hangUpServer) loggedRequests() map[string]loggedRequest {
	logged := map[string]loggedRequest{}
	for _, m := range requestLogLine.FindAllStringSubmatch(s.stderr.String(), -1) {
		status, _ := strconv.Atoi(m[2])
		logged[m[3]] = loggedRequest{level: m[1], status: status}
	}
	return logged
}

// wantNoServerErrors fails on any 5xx counted or logged at ERROR, and on
// any database failure counted.
func (s *hangUpServer) wantNoServerErrors(t *testing.T) {
	t.Helper()
	families := testkit.ScrapeAdmin(t, s.admin)
	for series, n := range testkit.RequestCounts(t, families) {
		if code := series[strings.LastIndexByte(series, ' ')+1:]; strings.HasPrefix(code, "5") {
			t.Errorf("%d requests counted as %s, want no 5xx", n, series)
		}
	}
	for _, m := range families["petstore_database_unavailable_total"].GetMetric() {
		if v := m.GetCounter().GetValue(); v != 0 {
			t.Errorf("petstore_database_unavailable_total%v = %v, want 0: a client that hangs up is no database failure", testkit.LabelsOf(m), v)
		}
	}
	for line := range strings.Lines(s.stderr.String()) {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("logged at ERROR: %s", line)
		}
	}
}

func TestAClientThatHangsUpIsRecordedAs499(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			s := startHangUpServer(t, engine)
			for i := range 30 {
				s.sendAndHangUp(t, "POST", "/v1/pets", s.key, fmt.Sprintf(`{"name":"Rex %d","categoryId":1}`, i), fmt.Sprintf("seed-%d", i), 5*time.Second)
			}

			t.Run("healthy", func(t *testing.T) {
				// Lists, reads and creates whose clients hang up after a
				// moment: each is answered, or recorded as 499.
				const n = 300
				targets := []struct{ method, target, body string }{
					{"GET", "/v1/pets?limit=100", ""},
					{"GET", "/v1/pets/3", ""},
					{"GET", "/v1/pets/999999", ""},
					{"POST", "/v1/pets", `{"name":"Max","categoryId":2}`},
				}
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						r := targets[i%len(targets)]
						s.sendAndHangUp(t, r.method, r.target, s.key, r.body, fmt.Sprintf("healthy-%d", i), time.Duration(rand.IntN(3000))*time.Microsecond)
					})
					if i%8 == 7 {
						wg.Wait()
					}
				}
				wg.Wait()
				// A client that hung up before its request reached the
				// server leaves no line: wait for the lines to stop coming.
				healthy := func() (lines, hungUp int) {
					for id, line := range s.loggedRequests() {
						if strings.HasPrefix(id, "healthy-") {
							lines++
							if line.status == httpapi.StatusClientClosed {
								hungUp++
							}
						}
					}
					return lines, hungUp
				}
				last := -1
				testkit.Eventually(t, 10*time.Second, "the log lines stop coming", func() bool {
					lines, _ := healthy()
					settled := lines == last
					last = lines
					time.Sleep(200 * time.Millisecond)
					return settled
				})
				lines, hungUp := healthy()
				t.Logf("%d of %d requests reached the server; %d were recorded as 499", lines, n, hungUp)
				s.wantNoServerErrors(t)
			})

			t.Run("stalled", func(t *testing.T) {
				// The database stalls past the clients' patience: each gives
				// up, and each request is a 499 at INFO, on its own code.
				// On SQLite the write lock held elsewhere stalls creates
				// only (reads go on); on PostgreSQL everything that needs
				// the database stalls.
				requests := []struct {
					name, method, target, key, body string
					stalls                          bool
				}{
					{"create", "POST", "/v1/pets", s.key, `{"name":"Tom","categoryId":2}`, true},
					{"list past the pages in memory", "GET", "/v1/pets?limit=100&cursor=" + domain.EncodeCursor(1000), s.key, "", engine == "postgres"},
					{"get past the pets in memory", "GET", "/v1/pets/999999", s.key, "", engine == "postgres"},
					{"an unknown key", "GET", "/v1/pets", domain.NewKeyToken("production"), "", engine == "postgres"},
				}
				release := s.stall()
				var wg sync.WaitGroup
				gaveUp := make([]bool, len(requests))
				for i, r := range requests {
					wg.Go(func() {
						gaveUp[i] = s.sendAndHangUp(t, r.method, r.target, r.key, r.body, "stalled-"+strconv.Itoa(i), 300*time.Millisecond)
					})
				}
				wg.Wait()
				testkit.Eventually(t, hangUpDBTimeout+5*time.Second, "every request logged", func() bool {
					logged := s.loggedRequests()
					for i := range requests {
						if _, ok := logged["stalled-"+strconv.Itoa(i)]; !ok {
							return false
						}
					}
					return true
				})
				release()
				logged := s.loggedRequests()
				for i, r := range requests {
					line := logged["stalled-"+strconv.Itoa(i)]
					if r.stalls && !gaveUp[i] {
						t.Errorf("%s: answered while the database stalls; want the client to give up", r.name)
					}
					if gaveUp[i] && (line.status != httpapi.StatusClientClosed || line.level != "INFO") {
						t.Errorf("%s whose client gave up: logged status %d at %s, want 499 at INFO", r.name, line.status, line.level)
					}
				}
				if got := testkit.RequestCounts(t, testkit.ScrapeAdmin(t, s.admin))["POST /v1/pets 499"]; got != 1 {
					t.Errorf("creates counted as POST /v1/pets 499: %d, want 1", got)
				}
				s.wantNoServerErrors(t)
			})
		})
	}
}
