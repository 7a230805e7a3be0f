package servertest

import (
	"context"
	"io"

	"petstore/internal/limits"
	"petstore/internal/server"
)

// What a test does to a server's limiter: restart it, give a second server
// one of its own, or reach Redis another way.

// RestartLimiter gives the server a new limiter of its kind, as a restart
// of the server does (server.App.RestartLimiter). The store, keys and pets
// stay.
func (s *Server) RestartLimiter() {
	s.T.Helper()
	restarted, stop, err := s.App.RestartLimiter(context.Background(), s.Cfg, s.deps)
	if err != nil {
		s.T.Fatal(err)
	}
	s.T.Cleanup(func() { stop() })
	s.App = restarted
}

// WithOwnLimiter is a second server on the same store, keys and copy of
// the pets, with a limiter of its own on the same Redis, as behind a load
// balancer.
func (s *Server) WithOwnLimiter() *Server {
	other := *s
	other.RestartLimiter()
	return &other
}

// UseRedisThrough gives s a Redis limiter reaching Redis at redisURL (a
// proxy the test can cut), with its log and its hooks in the test's hands.
func (s *Server) UseRedisThrough(redisURL string, logs io.Writer, hooks limits.RedisHooks) *limits.Redis {
	s.T.Helper()
	logger, _ := server.NewLogger(logs, "text", "info")
	r, err := limits.NewRedis(context.Background(), limits.RedisConfig{
		URL: redisURL, Prefix: s.RedisPrefix, BanAfter: s.Cfg.BanAfter, BanFor: s.Cfg.BanFor,
		Now: s.Clock.Now, Usage: s.Store().Usage, DBTimeout: s.Cfg.DBTimeout, Logger: logger, Hooks: hooks, ScriptNow: s.Clock.Now,
	})
	if err != nil {
		s.T.Fatal(err)
	}
	s.T.Cleanup(func() { r.Close() })
	s.App = s.App.WithLimiter(r)
	return r
}
