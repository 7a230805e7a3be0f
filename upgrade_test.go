package main

// Upgrades against a real older version (docs/replicas.md, "Upgrading a
// fleet"): the commit named in deploy/upgrade-from is built from this
// repository's history and run beside the current code, on one PostgreSQL
// and one Redis behind HAProxy. Set PETSTORE_TEST_UPGRADE=1 to run them
// (.ci/run does); they then fail, rather than skip, when the commit or a
// program they need is missing.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/store"
	"petstore/internal/testkit"
)

// preLevelCommit is the first parent of the merge that brought the schema
// level (0fa245a): the last main before it. It knows ten migrations and
// refuses any schema with more, whatever their kind.
const preLevelCommit = "00613ab"

// upgradeFrom is the commit deploy/upgrade-from names: the oldest version
// a fleet of the current code can roll back to.
func upgradeFrom(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("deploy", "upgrade-from"))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		t.Fatal("deploy/upgrade-from names no commit")
	}
	return fields[0]
}

// upgradeGate skips the test unless PETSTORE_TEST_UPGRADE is set.
func upgradeGate(t *testing.T) {
	t.Helper()
	if os.Getenv("PETSTORE_TEST_UPGRADE") == "" {
		t.Skip("builds older commits and runs a fleet behind HAProxy: set PETSTORE_TEST_UPGRADE=1 (.ci/run does)")
	}
	testkit.PetstoreBinary(t) // skipped with -short and under -race
}

// buildCommit builds commit of this repository's history, as a user
// builds a release (CGO_ENABLED=0), in a directory of its own, and
// returns the binary. A clone without the commit fails the test with the
// command that fetches it.
func buildCommit(t *testing.T, commit string) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--verify", "--quiet", commit+"^{commit}").Output()
	if err != nil {
		shallow, _ := exec.Command("git", "rev-parse", "--is-shallow-repository").Output()
		t.Fatalf("commit %s is not in this clone (shallow: %s): fetch the history with `git fetch --unshallow`, or just that commit with `git fetch origin %s`",
			commit, strings.TrimSpace(string(shallow)), commit)
	}
	hash := strings.TrimSpace(string(out))
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	tar := filepath.Join(dir, "src.tar")
	run := func(cmd *exec.Cmd) {
		t.Helper()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GIT_OPTIONAL_LOCKS=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
	}
	run(exec.Command("git", "archive", "--format=tar", "-o", tar, hash))
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	run(exec.Command("tar", "-xf", tar, "-C", src))
	bin := filepath.Join(dir, "petstore-"+hash[:7])
	// -trimpath: the build cache serves what the commit shares with others.
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Dir = src
	run(build)
	return bin
}

// A commit from before the schema level (the release before 0fa245a)
// refuses the current schema in one line, naming both counts, and exits.
func TestUpgradeACommitBeforeTheLevelRefusesTheNewerSchema(t *testing.T) {
	upgradeGate(t)
	t.Parallel()
	old := buildCommit(t, preLevelCommit)
	db := testkit.PostgresURL(t)
	if res := petstoreCmd(t, "migrate", "--db", db); res.Code != 0 {
		t.Fatalf("petstore migrate: %d %s", res.Code, res.Stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, old, withTestRedis(t, []string{"serve", "--db", db, "--addr", testkit.FreeAddr(t)})...)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() <= 0 {
		t.Fatalf("the old server on the newer schema: %v, want a non-zero exit\n%s", err, out)
	}
	known, err := exec.Command("git", "ls-tree", "--name-only", preLevelCommit, "internal/store/migrations/postgres/").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("schema version %d is newer than this petstore knows (%d)", len(store.Migrations), strings.Count(string(known), ".sql\n"))
	var lines []string
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, want) {
			lines = append(lines, line)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "upgrade petstore") {
		t.Errorf("the old server's output has %d lines with %q and \"upgrade petstore\", want one:\n%s", len(lines), want, out)
	}
}

// upgradeLoad creates pets through the balancer, each with an
// Idempotency-Key sent twice (the second answer must be the same pet,
// whichever server and version answers it), and lists them, until stop.
// It counts every request sent: all must succeed.
type upgradeLoad struct {
	balancedLoad
	sent atomic.Int64
}

func (l *upgradeLoad) run(url, key string, workers int) {
	client := faultClient(workers)
	for g := range workers {
		l.wg.Go(func() {
			for n := 0; !l.stopped.Load(); n++ {
				var p testkit.Pet
				p.Name, p.CategoryID = fmt.Sprintf("upgrade %d pet %d", g, n), int64(n%7+1)
				idem := fmt.Sprintf("upgrade-%d-%d", g, n)
				var ids [2]int64
				for i := range ids {
					l.sent.Add(1)
					res := faultDo(client, "POST", url+"/v1/pets", key, faultNewPetBody(p), "Idempotency-Key", idem)
					got, err := faultDecodePet(res.body)
					if res.err != nil || res.bodyErr != nil || res.status != http.StatusCreated || err != nil || !faultSamePet(got, p) {
						l.fail(fmt.Sprintf("POST %s (try %d): %d %v %v %s", p.Name, i+1, res.status, res.err, res.bodyErr, res.body))
						break
					}
					ids[i] = got.ID
					l.mu.Lock()
					l.acked[got.ID] = got
					l.mu.Unlock()
				}
				if ids[0] != ids[1] && ids[1] != 0 {
					l.fail(fmt.Sprintf("POST %s with Idempotency-Key %s made pets %d and %d", p.Name, idem, ids[0], ids[1]))
				}
				if n%3 == 0 {
					l.sent.Add(1)
					if res := faultDo(client, "GET", url+"/v1/pets?status=available", key, ""); res.err != nil || res.status != http.StatusOK {
						l.fail(fmt.Sprintf("GET /v1/pets: %d %v %s", res.status, res.err, res.body))
					}
				}
			}
		})
	}
}

// usage is the count of today's requests the database holds for key.
func (b *balancedSet) usage(key string) int64 {
	b.t.Helper()
	var n int64
	b.withKey(key, func(st store.Storage, k domain.Key) (err error) {
		n, err = st.Usage(context.Background(), k.BudgetID, time.Now().UTC().Format(time.DateOnly))
		return err
	})
	return n
}

// keyID is key's id, as the servers' request lines name it.
func (b *balancedSet) keyID(key string) int64 {
	b.t.Helper()
	var id int64
	b.withKey(key, func(_ store.Storage, k domain.Key) error { id = k.ID; return nil })
	return id
}

// withKey runs fn on the database's record of key.
func (b *balancedSet) withKey(key string, fn func(store.Storage, domain.Key) error) {
	b.t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, b.db, false, time.Now)
	if err != nil {
		b.t.Fatal(err)
	}
	defer st.Close()
	hash := domain.HashKey(key)
	k, ok, err := st.KeyByHash(ctx, hash[:])
	if err != nil || !ok {
		b.t.Fatalf("key not found (%v)", err)
	}
	if err := fn(st, k); err != nil {
		b.t.Fatal(err)
	}
}

// upgradeFleet is two servers behind HAProxy, each of either build, under
// load, with a webhook receiver.
type upgradeFleet struct {
	*balancedSet
	old, new string
	rc       *testkit.Receiver
	load     *upgradeLoad
	client   *http.Client
	phases   []string // the keys made one a phase: each a key.created to deliver
	quotaKey int64    // the key checkQuotaInAMixedFleet took to its day quota
}

// swap stops server i (SIGTERM: it drains) and starts build bin in its
// place; once the balancer finds it up and pets are acknowledged, a key is
// made whose key.created this fleet must deliver.
func (f *upgradeFleet) swap(i int, bin, phase string) {
	t := f.t
	t.Helper()
	if code := f.servers[i].Stop(syscall.SIGTERM); code != 0 {
		t.Errorf("server %d: exit status %d after SIGTERM", i, code)
	}
	f.bins[i] = bin
	f.start(i)
	f.waitUp(i)
	f.load.waitAcked(t, 20)
	f.phase(phase)
}

// phase makes a key named phase and waits for its key.created to arrive.
func (f *upgradeFleet) phase(phase string) {
	f.t.Helper()
	mustCreateKeyCLI(f.t, viaBinary, "--db", f.db, "--plan", "free", "--name", phase)
	f.phases = append(f.phases, phase)
	testkit.Eventually(f.t, 15*time.Second, "key.created of "+phase+" delivered", func() bool {
		for _, d := range f.rc.Deliveries() {
			if d.Event.Type == "key.created" && d.Event.Data["keyName"] == phase {
				return true
			}
		}
		return false
	})
}

// checkBanned asks each server directly: the key is banned on every one.
func (f *upgradeFleet) checkBanned(key, when string) {
	f.t.Helper()
	for i, s := range f.servers {
		res := faultDo(f.client, "GET", s.URL+"/v1/pets", key, "")
		if res.status != http.StatusTooManyRequests || !strings.Contains(string(res.body), "temporarily_banned") {
			f.t.Errorf("%s, server %d (%s): %d %s, want 429 temporarily_banned", when, i, f.version(i), res.status, res.body)
		}
	}
}

func (f *upgradeFleet) version(i int) string {
	if f.bins[i] == f.old {
		return "old"
	}
	return "new"
}

// The current code rolls through a fleet of the version deploy/upgrade-from
// names, and back, under load: two old servers behind HAProxy are replaced
// one at a time with new ones, then one goes back to the old binary, then
// forward again. No request fails but the limited key's 429s, no pet is
// lost or doubled, an Idempotency-Key replays the same pet whichever
// version answers, the limited key gets exactly its 60 requests through a
// mixed fleet and its ban holds on both versions, the usage stored is what
// was sent, and each webhook arrives once.
func TestUpgradeAFleetForwardAndBackUnderLoad(t *testing.T) {
	upgradeGate(t)
	t.Parallel()
	old := buildCommit(t, upgradeFrom(t))
	f := &upgradeFleet{balancedSet: startBalancedSetOf(t, 2, old, "--webhook-allow-private"),
		old: old, new: testkit.PetstoreBinary(t), rc: testkit.NewReceiver(t), client: faultClient(1)}
	defer f.client.CloseIdleConnections()
	_, secret := addWebhookCLI(t, viaBinary, f.db, f.rc.URL())
	f.rc.Trust(secret)
	loadKey := mustCreateKeyCLI(t, viaBinary, "--db", f.db, "--plan", "enterprise", "--name", "load",
		"--rpm", "100000000", "--rpd", "1000000000")
	f.load = &upgradeLoad{}
	f.load.acked = map[int64]testkit.Pet{}
	f.load.run(f.url, loadKey, 4)
	f.load.waitAcked(t, 20)
	f.phase("old-fleet")

	f.swap(0, f.new, "mixed-fleet")
	limited := f.checkLimitInAMixedFleet()
	f.checkQuotaInAMixedFleet()
	f.swap(1, f.new, "new-fleet")
	f.checkBanned(limited, "with both servers upgraded")
	f.swap(0, f.old, "rolled-back")
	f.checkBanned(limited, "with server 0 rolled back")
	f.swap(0, f.new, "forward-again")
	f.load.stop()
	f.checkAfterTheRoll(loadKey, limited)
}

// checkLimitInAMixedFleet drives a Free key through the old and the new
// server into its limit, then its ban, and returns the key.
func (f *upgradeFleet) checkLimitInAMixedFleet() string {
	t := f.t
	t.Helper()
	key := mustCreateKeyCLI(t, viaBinary, "--db", f.db, "--plan", "free", "--name", "limited")
	wantFreeMinute(t, f.client, f.url, key, "an old and a new server")
	// The balancer sent them to both versions: each logged some accepted,
	// in its log's next flush (every 100 ms).
	accepted := regexp.MustCompile(fmt.Sprintf(`(?m)status=200 .* key_id=%d$`, f.keyID(key)))
	for i, s := range f.servers {
		testkit.Eventually(t, 5*time.Second, fmt.Sprintf("server %d (%s) logging a request of the Free key it accepted: "+
			"the test limits it across versions", i, f.version(i)), func() bool {
			return accepted.MatchString(s.Stderr.String())
		})
	}
	var last faultResult
	for range 11 { // --ban-after 10: the 11th request during the wait starts the ban
		last = faultDo(f.client, "GET", f.url+"/v1/pets", key, "")
	}
	if !strings.Contains(string(last.body), "temporarily_banned") {
		t.Fatalf("after 11 more requests during the wait: %d %s, want temporarily_banned", last.status, last.body)
	}
	f.checkBanned(key, "in the mixed fleet")
	return key
}

// checkQuotaInAMixedFleet takes an Enterprise key of 10 requests a day
// through the old and the new server to its quota: its notices at 80% and
// 100% arrive, each once (checkEachWebhookOnce), whichever version noticed
// the threshold and whichever stored its mark.
func (f *upgradeFleet) checkQuotaInAMixedFleet() {
	t := f.t
	t.Helper()
	key := mustCreateKeyCLI(t, viaBinary, "--db", f.db, "--plan", "enterprise", "--name", "quota", "--rpm", "1000", "--rpd", "10")
	if accepted, refused := sendUntil429(t, f.client, f.url, key, 20); accepted != 10 || !strings.Contains(string(refused.body), "rate_limited") {
		t.Errorf("a key of 10 requests a day got %d through an old and a new server, then %d %s; want 10, then its quota's 429", accepted, refused.status, refused.body)
	}
	f.quotaKey = f.keyID(key)
	testkit.Eventually(t, 15*time.Second, "key.quota.threshold at 80 and 100 delivered", func() bool {
		return len(f.quotaNotices()) >= 2
	})
}

// quotaNotices counts the key.quota.threshold deliveries of f.quotaKey by
// threshold.
func (f *upgradeFleet) quotaNotices() map[float64]int {
	notices := map[float64]int{}
	for _, d := range f.rc.Deliveries() {
		if d.Event.Type == domain.WebhookQuotaThreshold && d.Event.Data["keyId"] == float64(f.quotaKey) {
			threshold, _ := d.Event.Data["threshold"].(float64)
			notices[threshold]++
		}
	}
	return notices
}

// checkAfterTheRoll checks what the whole roll kept: no failure, every
// pet once, the usage stored, each webhook once.
func (f *upgradeFleet) checkAfterTheRoll(loadKey, limited string) {
	t := f.t
	t.Helper()
	if len(f.load.failed) > 0 {
		t.Errorf("%d requests failed during the upgrade, first: %s", len(f.load.failed), strings.Join(first(f.load.failed, 5), "\n"))
	}
	// Listed with a key of its own, so the load key's usage is the load's.
	f.load.checkEveryPetOnce(t, f.balancedSet, mustCreateKeyCLI(t, viaBinary, "--db", f.db, "--plan", "enterprise", "--name", "lister",
		"--rpm", "100000", "--rpd", "1000000"))
	for i := range f.servers { // each writes its counts as it stops
		if code := f.servers[i].Stop(syscall.SIGTERM); code != 0 {
			t.Errorf("server %d: exit status %d after SIGTERM", i, code)
		}
	}
	if got, want := f.usage(loadKey), f.load.sent.Load(); got != want {
		t.Errorf("the load key's usage across both versions is %d, want the %d requests sent", got, want)
	}
	if got := f.usage(limited); got != 60 {
		t.Errorf("the limited key's usage is %d, want its 60 accepted requests", got)
	}
	f.checkEachWebhookOnce()
}

// checkEachWebhookOnce: every event of the outbox arrived, verified, and
// none twice, whichever version sent it.
func (f *upgradeFleet) checkEachWebhookOnce() {
	t := f.t
	t.Helper()
	var events []domain.ListedDelivery
	if err := json.Unmarshal([]byte(petstoreCmd(t, "webhooks", "deliveries", "--db", f.db, "--json").Stdout), &events); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, d := range f.rc.Deliveries() {
		if !d.Verified {
			t.Errorf("delivery %s (%s) is not signed with the endpoint's secret", d.ID, d.Event.Type)
		}
		seen[d.ID]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("webhook %s arrived %d times, want once", id, n)
		}
	}
	if got := f.quotaNotices(); got[80] != 1 || got[100] != 1 || len(got) != 2 {
		t.Errorf("the quota key's notices by threshold: %v, want one at 80 and one at 100", got)
	}
	if len(seen) != len(events) {
		t.Errorf("%d webhooks arrived, the outbox holds %d events", len(seen), len(events))
	}
	if len(events) < len(f.phases)+2 {
		t.Errorf("only %d events in the outbox, want at least a key.created for each of %d phases, the two keys and the ban", len(events), len(f.phases))
	}
}
