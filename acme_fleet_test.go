package main

import (
	"io"
	"net"
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
		if !testkit.Until(5*time.Second, 20*time.Millisecond, func() bool {
			if target := pick(); target != "" {
				up, _ = net.Dial("tcp", target)
			}
			return up != nil
		}) {
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
	db := testkit.ServerPostgresURL(t)
	if res := viaRun(t, nil, "migrate", "--db", db); res.Code != 0 {
		t.Fatalf("petstore migrate: %s", res.Stderr)
	}
	const domain = "fleet.petstore.test"
	servers := make([]*testkit.Petstore, 2)
	addrs := make([][2]string, 2) // each one's --addr and --http-addr
	for i := range servers {
		addrs[i] = [2]string{testkit.FreeAddr(t), testkit.FreeAddr(t)}
		servers[i] = launchPetstore(t, t.TempDir(), "--db", db, "--acme-domain", domain, "--acme-ca", pebble.directory,
			"--acme-ca-root", pebble.rootFile, "--addr", addrs[i][0], "--http-addr", addrs[i][1],
			"--log-level", "debug") // certmagic's steps, which the relay and the checks read, are DEBUG
	}
	// The one that did not order, once the other says it solves a challenge.
	other := func(port int) func() string {
		return func() string {
			var solving []int
			for i, s := range servers {
				if strings.Contains(s.Stderr.String(), "trying to solve challenge") {
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
		s.Served()
		serial, err := servedCert(t, pebble.issuing, s.URL, domain)
		if err != nil {
			t.Fatalf("%s: %v\n%s", s.URL, err, s.Stderr)
		}
		serials = append(serials, serial)
	}
	if serials[0] != serials[1] || pebble.issued() != 1 {
		t.Errorf("serials %v, %d issued; want one certificate served by both", serials, pebble.issued())
	}
	var ordered, answered int
	for _, s := range servers {
		log := s.Stderr.String()
		if strings.Contains(log, `msg="obtaining certificate"`) {
			ordered++
		} else if strings.Contains(log, "distributed=true") {
			answered++
		}
	}
	if ordered != 1 || answered != 1 {
		t.Errorf("%d servers ordered and %d answered a challenge from the database; want one of each:\n%s\n----\n%s",
			ordered, answered, servers[0].Stderr, servers[1].Stderr)
	}
}
