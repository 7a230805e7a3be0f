package server

import (
	"context"
	"net"
	"os"
	"time"

	"petstore/internal/domain"
	"petstore/internal/store"
)

// The servers' check-ins (docs/replicas.md, "Upgrading a fleet"): every
// checkInEvery a server stores its row (address, version, commit, the
// migrations it knows, when it was last seen), which GET /admin/v1/servers
// and the console list and petstore migrate --contract reads; a row not
// refreshed for forgetServersAfter is pruned.
const (
	checkInEvery       = 5 * time.Second
	forgetServersAfter = 10 * time.Minute
	pruneServersEvery  = time.Minute
)

// checkIns runs the check-ins (the first at once) and their pruning, with
// the goroutines, every and warn of startBackground, when the server has
// an address (serve gives it one).
func (a *App) checkIns(ctx context.Context, spawn func(func()), every func(time.Duration, func()), warn func(string, error)) {
	if a.self.Address == "" {
		return
	}
	checkIn := func() {
		s := a.self
		s.LastSeen = a.now()
		warn("check in (the servers' list)", a.store.CheckIn(ctx, s))
	}
	spawn(checkIn)
	every(checkInEvery, checkIn)
	every(pruneServersEvery, func() {
		_, err := a.store.PruneServers(ctx, a.now().Add(-forgetServersAfter))
		warn("prune the servers' list", err)
	})
}

// CheckInAs has the server check in, once StartBackground runs, as
// listening on addr since now; without it, it does not check in.
func (a *App) CheckInAs(addr net.Addr, now time.Time) { a.self = selfServer(addr, now) }

// selfServer is this server as it checks in, listening on addr: a
// host name in its address where it listens on every interface or on
// loopback, which would name no machine.
func selfServer(addr net.Addr, now time.Time) domain.Server {
	b := ReadBuildInfo()
	host, port, _ := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() || ip.IsLoopback() {
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		}
	}
	return domain.Server{Address: net.JoinHostPort(host, port), Version: b.Version, Revision: b.Revision + b.Modified,
		Migrations: len(store.Migrations), StartedAt: now}
}
