package main

// The database away or stalled (docs/production.md, "When the database stalls"): what needs it
// answers 503 unavailable with a Retry-After within --db-timeout, nothing
// acknowledged is lost or doubled, and the server heals by itself. The
// tests run with a short deadline, so that they stay short.

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"petstore/internal/httpapi"
	"petstore/internal/testkit"
)

func TestServeRefusesADatabaseTimeoutNotAboveZero(t *testing.T) {
	db := t.TempDir() + "/petstore.db"
	for _, bad := range []string{"0", "-1s", "soon"} {
		res := viaRun(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", db, "--db-timeout", bad)
		wantFailure(t, res, 2)
		if !strings.Contains(res.Stderr, "db-timeout") {
			t.Errorf("--db-timeout %s: %q does not name the flag", bad, res.Stderr)
		}
	}
	testkit.WantNoFile(t, db)
}

// The SQLite file deleted (its data directory removed) or replaced (another
// file renamed over it) under a server taking creates: within about a
// second every create answers 503 unavailable, /readyz fails at once, one ERROR
// line names the file's path, and the file renamed over it is left as it
// was, even by the server's stop.
func TestALostDatabaseFileIsAnswered503AndLoggedOnce(t *testing.T) {
	t.Parallel()
	const replacement = "another file, not the server's database"
	for _, c := range []struct {
		name string
		lose func(db string) error
	}{
		{"the data directory deleted", func(db string) error { return os.RemoveAll(filepath.Dir(db)) }},
		{"another file renamed over it", func(db string) error {
			other := filepath.Join(filepath.Dir(db), "other")
			return errors.Join(os.WriteFile(other, []byte(replacement), 0o600), os.Rename(other, db))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			db := filepath.Join(dir, "petstore.db")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			key := mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "enterprise", "--rpm", "100000000", "--rpd", "1000000000")
			p := runServing(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", db)
			client := &http.Client{Timeout: 5 * time.Second}
			answers, lostAt := createsWhileLosing(t, p.url, key, func() error {
				if err := c.lose(db); err != nil {
					return err
				}
				// /readyz looks at the file before it answers.
				if res := faultDo(client, "GET", p.url+"/readyz", "", ""); res.status != http.StatusServiceUnavailable {
					t.Errorf("/readyz at once after the loss: %d %s, want 503", res.status, res.body)
				}
				return nil
			})
			settled := lostAt.Add(1500 * time.Millisecond)
			var before, after int
			for _, a := range answers {
				switch {
				case a.status != http.StatusCreated && a.status != http.StatusServiceUnavailable,
					a.status == http.StatusServiceUnavailable && !strings.Contains(a.body, `"`+httpapi.CodeUnavailable+`"`):
					t.Errorf("a create answered %d %s, want 201 or 503 unavailable", a.status, a.body)
				case a.sent.After(settled) && a.status != http.StatusServiceUnavailable:
					t.Errorf("a create sent %v after the loss answered %d, want 503", a.sent.Sub(lostAt).Round(time.Millisecond), a.status)
				case a.sent.Before(lostAt) && a.status == http.StatusCreated:
					before++
				case a.sent.After(settled):
					after++
				}
			}
			if before == 0 || after == 0 {
				t.Fatalf("%d creates acknowledged before the loss, %d answered 503 a while after it; want some of each", before, after)
			}
			if res := faultDo(client, "GET", p.url+"/readyz", "", ""); res.status != http.StatusServiceUnavailable {
				t.Errorf("/readyz after the loss: %d %s, want 503", res.status, res.body)
			}
			// Each 503 is a request line at ERROR, as every 5xx is; besides
			// them, one line tells of the loss.
			var errs []string
			for _, line := range regexp.MustCompile(`(?m)^.*level=ERROR.*$`).FindAllString(p.stderr.String(), -1) {
				if !strings.Contains(line, "msg=request ") {
					errs = append(errs, line)
				}
			}
			if len(errs) != 1 || !strings.Contains(errs[0], "path="+db) {
				t.Errorf("ERROR lines besides the requests':\n%s\nwant one, naming %s", strings.Join(errs, "\n"), db)
			}
			p.stop(t)
			if b, err := os.ReadFile(db); c.name == "another file renamed over it" && (err != nil || string(b) != replacement) {
				t.Errorf("the file renamed over the database holds %q (%v) after the server stopped, want it as it was", b, err)
			}
		})
	}
}

// lostAnswer is one create as the client saw it.
type lostAnswer struct {
	sent   time.Time
	status int
	body   string
}

// createsWhileLosing has four clients create pets at url with key, runs
// lose once some were acknowledged, and goes on 2.5 s more; it returns
// every answer and when lose ran.
func createsWhileLosing(t *testing.T, url, key string, lose func() error) ([]lostAnswer, time.Time) {
	t.Helper()
	client := faultClient(4)
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var answers []lostAnswer
	stop := make(chan struct{})
	var workers sync.WaitGroup
	for range 4 {
		workers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent := time.Now()
				res := faultDo(client, "POST", url+"/v1/pets", key, `{"name":"Rex","categoryId":1}`)
				mu.Lock()
				answers = append(answers, lostAnswer{sent, res.status, string(res.body)})
				mu.Unlock()
			}
		})
	}
	testkit.Eventually(t, 5*time.Second, "creates acknowledged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(answers) >= 20
	})
	lostAt := time.Now()
	if err := lose(); err != nil {
		t.Error(err)
	}
	time.Sleep(2500 * time.Millisecond)
	close(stop)
	workers.Wait()
	return answers, lostAt
}
