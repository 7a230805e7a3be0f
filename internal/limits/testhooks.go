package limits

import (
	"context"

	"petstore/internal/domain"

	"github.com/redis/go-redis/v9"
)

// The hooks below are for the tests of a running server (internal/server),
// which must look below the Limiter interface: at a lease, at the Redis
// link's outages, at the scripts as they run, or cut Redis away. Nothing
// else calls them.

// LeaseLeft is how many tokens r holds leased for id.
func LeaseLeft(r *Redis, id domain.CallerID) int64 {
	r.leases.mu.Lock()
	l := r.leases.m[id]
	r.leases.mu.Unlock()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.left
}

// Kill stops r as kill -9 stops a server: what it leased is neither spent
// nor given back.
func Kill(r *Redis) {
	r.stopOnce.Do(func() {
		close(r.stop)
		r.loop.Wait()
	})
	r.Link.client.Close()
}

// Client is r's connection to Redis.
func Client(r *Redis) *redis.Client { return r.Link.client }

// RunScript runs the limit script once, as a request does.
func RunScript(r *Redis, args scriptArgs) (scriptAnswer, error) {
	return r.scripts.Run(context.Background(), args)
}

// RunScripts runs a batch of the limit script in one round trip.
func RunScripts(ctx context.Context, r *Redis, batch []ScriptRun) error {
	return r.scripts.RunBatch(ctx, batch)
}

// Outages is how many times r fell back from Redis to its own limits.
func Outages(r *Redis) int64 { return r.Link.outages.Load() }

// Down is whether r limits by itself now, Redis away.
func Down(r *Redis) bool { return r.Link.down.Load() }

// Callers is how many callers l holds (under its lock).
func Callers(l *Local) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.callers)
}
