package replicate_test

// The replica's store away under load (docs/production.md, "Backup and
// restore"): the longest test of all, through half a minute of outage.
// It runs when PETSTORE_TEST_OUTAGE is set, as .ci/run sets it, once and
// outside the race run: in a plain go test ./... its three quarters of a
// minute held one of the two places a two-core machine runs test binaries
// in, longer than any package but the root.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"petstore/internal/testkit"
)

// The replica's store away for 30 s under steady creates: no request
// fails, the server logs one WARN as it starts failing and an INFO once
// the replica has caught up, /metrics and GET /admin/v1/backup show the
// failures (never a secret), and a restore afterwards holds every pet.
func TestTheReplicaStoreAwayFor30sUnderLoadFailsNoRequestAndCatchesUp(t *testing.T) {
	t.Parallel()
	if os.Getenv("PETSTORE_TEST_OUTAGE") == "" {
		t.Skip("takes the replica's store away for 30 s under load: set PETSTORE_TEST_OUTAGE=1 (.ci/run does)")
	}
	f := newReplicaFixture(t)
	key := f.createKey(t, "--plan", "enterprise", "--name", "writer", "--rpm", "100000000", "--rpd", "1000000000")
	token := strings.TrimSpace(f.mustCmd(t, "admin", "create", "--db", f.db, "--name", "ops", "--scope", "keys:read").Stdout)
	s := f.serve(t, "--admin-addr", "127.0.0.1:0")
	s.KeysSent = append(s.KeysSent, token)
	admin := "http://" + testkit.AdminServing.FindStringSubmatch(s.Stderr.String())[1]
	backup := func() map[string]any {
		t.Helper()
		resp, body := testkit.Fetch(t, s.Client, "GET", admin+"/admin/v1/backup", token, "")
		var b map[string]any
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &b) != nil {
			t.Fatalf("GET /admin/v1/backup: %d %s", resp.StatusCode, body)
		}
		return b
	}

	stop := make(chan struct{})
	var acked []ackedPet
	var failed int
	done := make(chan struct{})
	go func() {
		acked, failed = createCountingFailures(t, s, key, steadyPause, stop)
		close(done)
	}()
	time.Sleep(3 * time.Second)
	f.s3.Stop()
	testkit.Eventually(t, 20*time.Second, "GET /admin/v1/backup shows the failure", func() bool {
		b := backup()
		return b["errors"].(float64) > 0 && b["last_error"] != nil && b["behind_seconds"].(float64) > 0
	})
	if b := backup(); b["url"] != f.url || strings.Contains(fmt.Sprint(b), f.s3.SecretKey) {
		t.Errorf("GET /admin/v1/backup: %v, want the URL %s and no secret", b, f.url)
	}
	if errs := testkit.ScrapeAdmin(t, admin)["petstore_replication_errors_total"]; errs == nil || errs.GetMetric()[0].GetCounter().GetValue() == 0 {
		t.Errorf("petstore_replication_errors_total: %v, want above 0", errs)
	}
	time.Sleep(27 * time.Second)
	f.s3.Start(t)
	time.Sleep(2 * time.Second)
	close(stop)
	<-done
	if failed > 0 {
		t.Errorf("%d of %d creates failed while the replica's store was away, want none", failed, len(acked)+failed)
	}
	// Caught up and behind_seconds 0 mean every acknowledged create is in
	// the replica: the restore right after holds them all.
	testkit.Eventually(t, 30*time.Second, "the replica catches up", func() bool {
		return strings.Contains(s.Stderr.String(), "replication caught up") && backup()["behind_seconds"].(float64) == 0
	})
	if n := strings.Count(s.Stderr.String(), "replication is failing"); n != 1 {
		t.Errorf("%d WARN lines of the failure, want 1:\n%s", n, s.Stderr)
	}
	out := filepath.Join(t.TempDir(), "after.db")
	f.mustCmd(t, "restore", "--from", f.url, "--db", out)
	names := petNames(t, out)
	for _, p := range acked {
		if !names[p.name] {
			t.Fatalf("the restore after the outage lacks pet %d (%s) of %d acknowledged", p.id, p.name, len(acked))
		}
	}
	t.Logf("%d creates during the test, all in the restore", len(acked))
}
