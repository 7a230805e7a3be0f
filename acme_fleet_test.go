package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"petstore/internal/testkit"
)

// challengeRelay listens on addr (where Pebble asks its challenges) and
// hands each connection to the address pick names, once that answers.
func challengeRelay(t *testing.T, addr string, pick func() string) {
	t.Helper()
	testkit.ServeTCP(t, addr, func(c net.Conn) {
		var up net.Conn
		for deadline := time.Now().Add(5 * time.Second); up == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if target := pick(); target != "" {
				up, _ = net.Dial("tcp", target)
			}
		}
		if up == nil {
			return
		}
		defer up.Close()
		var wg sync.WaitGroup
		wg.Go(func() { io.Copy(up, c) })
		io.Copy(c, up)
		up.Close()
		wg.Wait()
	})
}

// Two servers on one PostgreSQL with --acme-domain: one of them orders,
// Pebble asks its challenges of the other one, which answers them from
// the database, and both serve the one certificate Pebble issued.
func TestACMEFleetOnPostgresOrdersOnce(t *testing.T) {
	t.Parallel()
	pebble := startPebble(t, 24*time.Hour)
	db := testkit.PostgresURL(t)
	if res := viaRun(t, nil, "migrate", "--db", db); res.code != 0 {
		t.Fatalf("petstore migrate: %s", res.stderr)
	}
	const domain = "fleet.petstore.test"
	servers := make([]*runningPetstore, 2)
	addrs := make([][2]string, 2) // each one's --addr and --http-addr
	for i := range servers {
		addrs[i] = [2]string{testkit.FreeAddr(t), testkit.FreeAddr(t)}
		servers[i] = launchPetstore(t, t.TempDir(), "--db", db, "--acme-domain", domain, "--acme-ca", pebble.directory,
			"--acme-ca-root", pebble.rootFile, "--addr", addrs[i][0], "--http-addr", addrs[i][1])
	}
	// The one that did not order, once the other says it solves a challenge.
	other := func(port int) func() string {
		return func() string {
			var solving []int
			for i, s := range servers {
				if strings.Contains(s.stderr.String(), "trying to solve challenge") {
					solving = append(solving, i)
				}
			}
			if len(solving) != 1 {
				return ""
			}
			return addrs[1-solving[0]][port]
		}
	}
	challengeRelay(t, "127.0.0.1:"+strconv.Itoa(pebble.tlsPort), other(0))
	challengeRelay(t, "127.0.0.1:"+strconv.Itoa(pebble.httpPort), other(1))

	var serials []string
	for _, s := range servers {
		s.served()
		serial, err := servedCert(t, pebble.issuing, s.url, domain)
		if err != nil {
			t.Fatalf("%s: %v\n%s", s.url, err, s.stderr)
		}
		serials = append(serials, serial)
	}
	if serials[0] != serials[1] || pebble.issued() != 1 {
		t.Errorf("serials %v, %d issued; want one certificate served by both", serials, pebble.issued())
	}
	var ordered, answered int
	for _, s := range servers {
		log := s.stderr.String()
		if strings.Contains(log, `msg="obtaining certificate"`) {
			ordered++
		} else if strings.Contains(log, "distributed=true") {
			answered++
		}
	}
	if ordered != 1 || answered != 1 {
		t.Errorf("%d servers ordered and %d answered a challenge from the database; want one of each:\n%s\n----\n%s",
			ordered, answered, servers[0].stderr, servers[1].stderr)
	}
}

// certmagic's storage on PostgreSQL keeps, lists, states and deletes keys
// as its file storage does, and a lock is held by one at a time, freed by
// Unlock or when its holder stops extending it.
func TestACMEStorageOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.PostgresURL(t)
	store, err := openPostgres(ctx, db, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s, other := store.ACMEStorage().(*pgACMEStorage), store.ACMEStorage().(*pgACMEStorage)
	const ttl = 2 * time.Second
	s.ttl, s.poll, other.ttl, other.poll = ttl, 100*time.Millisecond, ttl, 100*time.Millisecond
	for _, k := range []string{"certificates/ca/a.test/a.test.crt", "certificates/ca/a.test/a.test.key", "certificates/ca/b.test/b.test.crt", "acme/users/u.json"} {
		if err := s.Store(ctx, k, []byte("v:"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := other.Load(ctx, "acme/users/u.json"); err != nil || string(v) != "v:acme/users/u.json" {
		t.Errorf("Load: %q, %v", v, err)
	}
	if _, err := s.Load(ctx, "acme/none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing key: %v, want fs.ErrNotExist", err)
	}
	if got, _ := s.List(ctx, "certificates/ca", false); !slices.Equal(got, []string{"certificates/ca/a.test", "certificates/ca/b.test"}) {
		t.Errorf("List not recursive: %v", got)
	}
	if got, _ := s.List(ctx, "certificates", true); len(got) != 3 {
		t.Errorf("List recursive: %v, want the three certificate files", got)
	}
	if info, err := s.Stat(ctx, "certificates/ca/a.test"); err != nil || info.IsTerminal {
		t.Errorf("Stat of a directory: %+v, %v", info, err)
	}
	if info, err := s.Stat(ctx, "acme/users/u.json"); err != nil || !info.IsTerminal || info.Size != int64(len("v:acme/users/u.json")) {
		t.Errorf("Stat of a file: %+v, %v", info, err)
	}
	if err := s.Delete(ctx, "certificates/ca/a.test"); err != nil || s.Exists(ctx, "certificates/ca/a.test/a.test.key") || !s.Exists(ctx, "certificates/ca/b.test") {
		t.Errorf("Delete of a directory: %v; want its keys gone and the others kept", err)
	}

	if err := s.Lock(ctx, "issue_cert_a.test"); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 3*ttl)
	defer cancel()
	if err := other.Lock(short, "issue_cert_a.test"); err == nil {
		t.Fatal("a second holder got a lock that is held and extended")
	}
	if err := s.Unlock(ctx, "issue_cert_a.test"); err != nil {
		t.Fatal(err)
	}
	if err := other.Lock(ctx, "issue_cert_a.test"); err != nil {
		t.Fatalf("the lock after Unlock: %v", err)
	}
	other.held["issue_cert_a.test"].stop() // its holder dies: nobody extends it
	start := time.Now()
	if err := s.Lock(ctx, "issue_cert_a.test"); err != nil || time.Since(start) > 3*ttl {
		t.Errorf("a lock whose holder died: %v after %v, want it within the TTL", err, time.Since(start))
	}
}
