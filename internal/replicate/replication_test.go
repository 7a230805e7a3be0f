package replicate_test

// Continuous replication of the SQLite file (docs/production.md, "Backup
// and restore") against a real S3-compatible server, versitygw, built from
// the Go module proxy (internal/testkit), and the built petstore binary
// (testkit.PetstoreBinary): the disk lost, a restore to a point in time,
// bad input. Skipped with -short and under the race detector, as every
// test of the built binary is.

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"petstore/internal/testkit"

	_ "modernc.org/sqlite"
)

// replicaFixture is a versitygw with a bucket, the environment the
// binary's runs reach it with, and a data directory for a server.
type replicaFixture struct {
	s3   *testkit.S3
	env  map[string]string // the versitygw's credentials
	url  string            // the replica's URL, s3://petstore/prod?endpoint=...
	bin  string            // the built petstore binary
	dir  string            // the server's working directory
	data string            // the directory of its database: the disk to lose
	db   string
}

func newReplicaFixture(t *testing.T) *replicaFixture {
	t.Helper()
	bin := testkit.PetstoreBinary(t) // first: it skips under -short and the race detector
	s3 := testkit.StartS3(t)
	f := &replicaFixture{s3: s3, env: s3.Env(), url: s3.URL(s3.Bucket(t, "petstore"), "prod"), bin: bin, dir: t.TempDir()}
	f.data = filepath.Join(f.dir, "data")
	f.db = filepath.Join(f.data, "petstore.db")
	if err := os.Mkdir(f.data, 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// replicateInterval is the servers' --replicate-interval: how often they
// read the WAL and upload what it holds.
const replicateInterval = 200 * time.Millisecond

func (f *replicaFixture) serve(t *testing.T, extra ...string) *testkit.Petstore {
	t.Helper()
	args := append([]string{"serve", "--db", f.db, "--replicate-to", f.url, "--replicate-interval", replicateInterval.String()}, extra...)
	return testkit.LaunchPetstore(t, f.bin, f.dir, f.env, args...).Served()
}

// cmd runs the binary with args, beside a running server, with the
// fixture's environment.
func (f *replicaFixture) cmd(t *testing.T, args ...string) testkit.Result {
	t.Helper()
	return testkit.RunPetstore(t, t.TempDir(), f.env, args...)
}

// mustCmd is cmd for a command that must succeed.
func (f *replicaFixture) mustCmd(t *testing.T, args ...string) testkit.Result {
	t.Helper()
	res := f.cmd(t, args...)
	if res.Code != 0 {
		t.Fatalf("petstore %s: exit status %d\n%s", strings.Join(args, " "), res.Code, res.Stderr)
	}
	return res
}

// createKey runs keys create on the fixture's database with args and
// returns the key.
func (f *replicaFixture) createKey(t *testing.T, args ...string) string {
	t.Helper()
	return strings.TrimSpace(f.mustCmd(t, append([]string{"keys", "create", "--db", f.db}, args...)...).Stdout)
}

// keyID is the id of the key called name, from keys list --json.
func (f *replicaFixture) keyID(t *testing.T, name string) int64 {
	t.Helper()
	var keys []struct {
		ID   int64
		Name string
	}
	if err := json.Unmarshal([]byte(f.mustCmd(t, "keys", "list", "--db", f.db, "--json").Stdout), &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Name == name {
			return k.ID
		}
	}
	t.Fatalf("keys list has no key named %q", name)
	return 0
}

// ackedPet is a pet a server answered 201 for, and when.
type ackedPet struct {
	id   int64
	name string
	at   time.Time
}

// createWithoutPause creates pets from four clients until stop closes, and
// returns every one answered 201.
func createWithoutPause(t *testing.T, s *testkit.Petstore, key string, stop <-chan struct{}) []ackedPet {
	acked, _ := createCountingFailures(t, s, key, 0, stop)
	return acked
}

// steadyPause is what each of the four clients of a steady load waits
// between its creates: up to 2,000 a second in all, a load that goes on
// for half a minute without taking both cores from the tests beside it.
const steadyPause = 2 * time.Millisecond

// createCountingFailures is createWithoutPause that also counts the
// creates not answered 201 (a killed server's, or a failure); each client
// waits pause after each of its creates.
func createCountingFailures(t *testing.T, s *testkit.Petstore, key string, pause time.Duration, stop <-chan struct{}) (acked []ackedPet, failed int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("pet-%d-%d", c, i)
				req, err := testkit.NewRequest("POST", s.URL+"/v1/pets", key, `{"name":"`+name+`","categoryId":1}`)
				if err != nil {
					t.Error(err)
					return
				}
				resp, body, err := testkit.ReadResponse(s.Client, req)
				var pet struct{ ID int64 }
				mu.Lock()
				if err != nil || resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &pet) != nil {
					failed++
				} else {
					acked = append(acked, ackedPet{pet.ID, name, time.Now()})
				}
				mu.Unlock()
				if pause > 0 {
					select {
					case <-stop:
						return
					case <-time.After(pause):
					}
				}
			}
		})
	}
	wg.Wait()
	return acked, failed
}

// The disk is lost: pets are created without pause, the server is killed,
// its directory deleted, and a new server with the same flags starts on an
// empty one. Every pet acknowledged more than 3 s before the kill is back,
// with the key, its webhook endpoint and its audit trail, and the next pet
// id follows the last one restored.
func TestDiskLostEveryPetAcknowledgedBeforeTheIntervalComesBack(t *testing.T) {
	t.Parallel()
	f := newReplicaFixture(t)
	key := f.createKey(t, "--plan", "enterprise", "--name", "writer", "--rpm", "100000000", "--rpd", "1000000000")
	f.mustCmd(t, "webhooks", "add", "--db", f.db, "https://203.0.113.10/petstore")
	s := f.serve(t)
	stop := make(chan struct{})
	var acked []ackedPet
	done := make(chan struct{})
	go func() { acked = createWithoutPause(t, s, key, stop); close(done) }()
	time.Sleep(6 * time.Second)
	s.Kill9()
	killedAt := time.Now()
	close(stop)
	<-done
	if err := os.RemoveAll(f.data); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.data, 0o755); err != nil {
		t.Fatal(err)
	}

	again := f.serve(t)
	if !regexp.MustCompile(`msg="restored the database from the replica" .*txid=[1-9][0-9]* last_write=20`).MatchString(again.Stderr.String()) {
		t.Errorf("the new server's log says no restore with its transaction and last write:\n%s", again.Stderr)
	}
	// One listing reads the thousands of pets that one GET each would.
	restored := map[int64]string{}
	for _, p := range testkit.AllPets(t, again.Client, again.URL, key, "/v1/pets?limit=100") {
		restored[p.ID] = p.Name
	}
	must := 0
	for _, p := range acked {
		if killedAt.Sub(p.at) <= 3*time.Second {
			continue
		}
		must++
		if got, ok := restored[p.id]; !ok || got != p.name {
			t.Errorf("pet %d is %q (listed: %v), want %s", p.id, got, ok, p.name)
		}
	}
	if must < 100 {
		t.Fatalf("only %d pets acknowledged more than 3 s before the kill, of %d: too few to tell", must, len(acked))
	}
	last := maxPetID(t, f.db)
	_, body := again.WantStatus("POST", "/v1/pets", key, `{"name":"after","categoryId":1}`, http.StatusCreated)
	if want := fmt.Sprintf(`"id":%d`, last+1); !strings.Contains(body, want) {
		t.Errorf("the first pet after the restore is %s, want id %d (after the last restored, %d)", body, last+1, last)
	}
	if res := f.cmd(t, "webhooks", "list", "--db", f.db); !strings.Contains(res.Stdout, "203.0.113.10") {
		t.Errorf("webhooks list after the restore: %s%s, want the endpoint", res.Stdout, res.Stderr)
	}
	// Usage reaches the database on its own flush, every 2 s: what was
	// counted 2 s more before the kill is in the replica too.
	usageBy := 0
	for _, p := range acked {
		if killedAt.Sub(p.at) > 5*time.Second {
			usageBy++
		}
	}
	res := f.cmd(t, "usage", "--db", f.db, "--key", fmt.Sprint(f.keyID(t, "writer")), "--days", "1", "--json")
	var days []struct{ Allowed int }
	if json.Unmarshal([]byte(res.Stdout), &days) != nil || len(days) != 1 || days[0].Allowed < usageBy {
		t.Errorf("usage after the restore: %s%s, want at least %d requests allowed today", res.Stdout, res.Stderr, usageBy)
	}
	if res := f.cmd(t, "audit", "--db", f.db, "--since", "1h"); !strings.Contains(res.Stdout, "key.created") {
		t.Errorf("audit after the restore: %s%s, want the key's creation", res.Stdout, res.Stderr)
	}
	t.Logf("%d pets acknowledged, %d of them more than 3 s before the kill; last restored id %d", len(acked), must, last)
}

// maxPetID is the largest pet id in the SQLite file at path.
func maxPetID(t *testing.T, path string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var id sql.NullInt64
	if err := db.QueryRow(`SELECT max(id) FROM pets`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id.Int64
}

// petNames are the names of the pets in the SQLite file at path.
func petNames(t *testing.T, path string) map[string]bool {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM pets`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	names := map[string]bool{}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names[n] = true
	}
	return names
}

// restore --at T holds the pets created before T and none after; without
// --at, all of them. It refuses to write over a file without --force.
func TestRestoreAtATimeHoldsThePetsBeforeItAndNoneAfter(t *testing.T) {
	t.Parallel()
	f := newReplicaFixture(t)
	key := f.createKey(t, "--plan", "pro", "--name", "writer")
	s := f.serve(t)
	for i := range 5 {
		s.WantStatus("POST", "/v1/pets", key, fmt.Sprintf(`{"name":"before-%d","categoryId":1}`, i), http.StatusCreated)
	}
	time.Sleep(2 * time.Second)
	at := time.Now().UTC()
	time.Sleep(2 * time.Second)
	for i := range 5 {
		s.WantStatus("POST", "/v1/pets", key, fmt.Sprintf(`{"name":"after-%d","categoryId":1}`, i), http.StatusCreated)
	}
	time.Sleep(2 * time.Second)

	out := filepath.Join(t.TempDir(), "then.db")
	f.mustCmd(t, "restore", "--from", f.url, "--db", out, "--at", at.Format(time.RFC3339Nano))
	names := petNames(t, out)
	for i := range 5 {
		if !names[fmt.Sprintf("before-%d", i)] || names[fmt.Sprintf("after-%d", i)] {
			t.Fatalf("restore --at %s holds %v, want before-0..4 and no after-*", at.Format(time.RFC3339Nano), names)
		}
	}
	res := f.cmd(t, "restore", "--from", f.url, "--db", out)
	testkit.WantFailure(t, res.Stdout, res.Stderr, res.Code, 1)
	if !strings.Contains(res.Stderr, "--force") {
		t.Errorf("restore over a file: %s, want it to name --force", res.Stderr)
	}
	f.mustCmd(t, "restore", "--from", f.url, "--db", out, "--force")
	if names := petNames(t, out); len(names) != 10 {
		t.Errorf("restore of the latest state holds %v, want the 10 pets", names)
	}
}

// Bad input: each refused with one line on standard error that names the
// problem and never a secret, and nothing is written.
func TestReplicationBadInputsAreRefusedInOneClearLine(t *testing.T) {
	t.Parallel()
	f := newReplicaFixture(t)
	missing := filepath.Join(t.TempDir(), "new.db")
	noBucket := f.s3.URL("no-such-bucket", "prod")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		says string
	}{
		{"an unknown scheme", nil, []string{"serve", "--db", missing, "--replicate-to", "ftp://backup.example.com/petstore"}, 2, "unknown scheme"},
		{"a secret in the user part", nil, []string{"serve", "--db", missing, "--replicate-to", "s3://AKIAEXAMPLE:hunter2secret@petstore/prod"}, 2, "environment"},
		{"a secret in PETSTORE_REPLICATE_TO", map[string]string{"PETSTORE_REPLICATE_TO": "s3://AKIAEXAMPLE:hunter2secret@petstore/prod"}, []string{"serve", "--db", missing}, 2, "environment"},
		{"a secret in the query", nil, []string{"restore", "--db", missing, "--from", "s3://petstore/prod?sseCustomerKey=hunter2secret"}, 2, "sseCustomerKey"},
		{"a PostgreSQL database", nil, []string{"serve", "--db", "postgres://petstore@127.0.0.1:1/petstore", "--redis", "redis://127.0.0.1:1/0", "--replicate-to", f.url}, 2, "docs/production.md"},
		{"a bucket that does not exist, at restore", nil, []string{"restore", "--db", missing, "--from", noBucket}, 1, "no-such-bucket"},
		{"a bucket that does not exist, at a start on a missing file", nil, []string{"serve", "--db", missing, "--replicate-to", noBucket}, 1, "no-such-bucket"},
		{"wrong credentials", map[string]string{"AWS_SECRET_ACCESS_KEY": "hunter2secret"}, []string{"restore", "--db", missing, "--from", f.url}, 1, "petstore/prod"},
		{"an --at in the future", nil, []string{"restore", "--db", missing, "--from", f.url, "--at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, 1, "in the future"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := maps.Clone(f.env)
			maps.Copy(env, tc.env)
			res := testkit.RunPetstore(t, t.TempDir(), env, tc.args...)
			testkit.WantFailure(t, res.Stdout, res.Stderr, res.Code, tc.code)
			if !strings.Contains(res.Stderr, tc.says) {
				t.Errorf("stderr %q, want it to say %q", res.Stderr, tc.says)
			}
			if strings.Contains(res.Stderr, "hunter2secret") || strings.Contains(res.Stderr, f.s3.SecretKey) {
				t.Errorf("stderr shows a secret: %s", res.Stderr)
			}
			testkit.WantNoFile(t, missing)
		})
	}

	// An empty replica is a fresh start, said in one log line; then --at
	// before the oldest state kept is refused.
	s := f.serve(t)
	if n := strings.Count(s.Stderr.String(), "the replica is empty"); n != 1 {
		t.Errorf("a start on an empty replica logged %d lines of it, want 1:\n%s", n, s.Stderr)
	}
	testkit.Eventually(t, 10*time.Second, "the replica holds the new database", func() bool {
		return f.cmd(t, "restore", "--from", f.url, "--db", filepath.Join(t.TempDir(), "x.db")).Code == 0
	})
	res := f.cmd(t, "restore", "--from", f.url, "--db", missing, "--at", "2001-01-01T00:00:00Z")
	testkit.WantFailure(t, res.Stdout, res.Stderr, res.Code, 1)
	if !strings.Contains(res.Stderr, "before the oldest state") {
		t.Errorf("--at before the retention: %s", res.Stderr)
	}
}
