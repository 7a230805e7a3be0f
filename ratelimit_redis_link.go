package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Redis limits: a request never waits long for a Redis that is gone, and
// while it is gone at most one request in redisProbeEvery tries it again.
const (
	redisTimeout    = 100 * time.Millisecond // dial, read, write, waiting for a pooled connection
	redisProbeEvery = 500 * time.Millisecond
)

// redisLink is the Redis limiter's connection, and whether Redis answers:
// while it does not, requests go to the in-process fallback, and one in
// redisProbeEvery tries Redis again.
type redisLink struct {
	client *redis.Client
	now    func() time.Time
	logger *slog.Logger
	// onFallback is told true when Redis stops answering, false when it
	// answers again (may be nil).
	onFallback func(active bool)

	down      atomic.Bool
	downSince atomic.Int64 // UnixNano
	probeAt   atomic.Int64 // while down: when (UnixNano) a request may try Redis again
	outages   atomic.Int64
}

// redisOptions are the client options for a --redis URL: short timeouts and
// no retries (a retried script could count a request twice; the fallback
// answers instead), and no maintenance notifications, which Valkey refuses.
func redisOptions(rawURL string) (*redis.Options, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		// url.Error repeats the URL, password and all: keep only why.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("--redis must be a URL like redis://HOST:PORT/N: %v", err)
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = redisTimeout
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = redisTimeout
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = redisTimeout
	}
	if opts.PoolTimeout == 0 {
		opts.PoolTimeout = redisTimeout
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = -1
	}
	opts.DialerRetries = 1
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return opts, nil
}

// where names the Redis for a log line, without its password.
func (l *redisLink) where() string {
	opts := l.client.Options()
	return "redis://" + opts.Addr + "/" + strconv.Itoa(opts.DB)
}

// skip reports whether a request goes straight to the fallback: Redis is
// down and another request tried it less than redisProbeEvery ago.
func (l *redisLink) skip() bool {
	if !l.down.Load() {
		return false
	}
	now := l.now().UnixNano()
	at := l.probeAt.Load()
	return now < at || !l.probeAt.CompareAndSwap(at, now+int64(redisProbeEvery))
}

// failed notes that Redis did not answer. It reports whether that began an
// outage, which is then logged, counted and told to onFallback.
func (l *redisLink) failed(err error) bool {
	now := l.now()
	l.probeAt.Store(now.Add(redisProbeEvery).UnixNano())
	if !l.down.CompareAndSwap(false, true) {
		return false
	}
	l.downSince.Store(now.UnixNano())
	l.outages.Add(1)
	l.logger.Warn("Redis does not answer: this server limits requests on its own until it does", "err", err)
	if l.onFallback != nil {
		l.onFallback(true)
	}
	return true
}

// answered notes that Redis answered, ending an outage.
func (l *redisLink) answered() {
	if !l.down.Load() || !l.down.CompareAndSwap(true, false) {
		return
	}
	outage := l.now().Sub(time.Unix(0, l.downSince.Load()))
	l.logger.Info("Redis answers again: rate limits are shared again", "outage", outage.Round(time.Millisecond))
	if l.onFallback != nil {
		l.onFallback(false)
	}
}

// redisLog passes go-redis's own log lines (a failed dial, say) on at
// debug level: the limiter logs each outage once itself. go-redis has one
// logger for the whole process, set by serve (redis.SetLogger).
type redisLog struct{ logger *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	l.logger.DebugContext(ctx, fmt.Sprintf(format, v...), "from", "go-redis")
}
