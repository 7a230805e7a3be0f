package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Server limits: a slow or oversized request is cut off before it costs
// much. Write timeout covers the slowest legitimate answer, a page of 100.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 16 << 10
	shutdownTimeout   = 10 * time.Second
	// adminWriteTimeout bounds an admin answer; a CPU profile or trace
	// (/debug/pprof/profile?seconds=N) must take less.
	adminWriteTimeout = 5 * time.Minute
	serveGCPercent    = 50

	limiterSweepEvery     = 10 * time.Second
	idempotencyPruneEvery = 10 * time.Minute
)

type serveConfig struct {
	dbFlags
	addr       string
	adminAddr  string
	trustProxy bool
	redis      string
	banAfter   int
	banFor     time.Duration
	logFormat  string
	logLevel   string
	version    bool
	// shutdownDelay: after a stop signal, /readyz fails for this long while
	// requests are still served, so a load balancer stops sending first.
	shutdownDelay time.Duration
}

func serveCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cfg serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg.dbFlags.register(fs)
	fs.StringVar(&cfg.addr, "addr", "localhost:8080", "address to listen on, HOST:PORT")
	fs.StringVar(&cfg.adminAddr, "admin-addr", "", "address of the admin listener (GET /metrics, /debug/pprof/), HOST:PORT such as localhost:9090; off when empty. Keep it on loopback or a private network")
	fs.BoolVar(&cfg.trustProxy, "trust-proxy", false, "take the client address from the first X-Forwarded-For hop (only behind a proxy that sets it)")
	fs.StringVar(&cfg.redis, "redis", "", "share rate limits with every server naming this Redis, redis://HOST:PORT/N (default: kept in this process)")
	fs.IntVar(&cfg.banAfter, "ban-after", 10, "requests a caller may send while told to wait, before a ban")
	fs.DurationVar(&cfg.banFor, "ban-for", 15*time.Minute, "how long a ban lasts")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&cfg.version, "version", false, "print the version and exit")
	fs.DurationVar(&cfg.shutdownDelay, "shutdown-delay", 0, "after SIGTERM, answer /readyz 503 and keep serving this long before stopping (behind a load balancer: a little more than its health-check interval)")
	rest, err := parseFlags(fs, args, getenv, stdout)
	if err != nil {
		return err
	}
	if cfg.version {
		fmt.Fprintln(stdout, versionString())
		return nil
	}
	if len(rest) > 0 {
		return usagef("serve takes no arguments, got %q", rest[0])
	}
	if err := cfg.dbFlags.check(); err != nil {
		return err
	}
	if cfg.shutdownDelay < 0 {
		return usagef("--shutdown-delay must be 0 or more")
	}
	if cfg.banAfter < 0 || cfg.banFor <= 0 {
		return usagef("--ban-after must be 0 or more and --ban-for above 0")
	}
	if cfg.redis != "" {
		if _, err := redisOptions(cfg.redis); err != nil {
			return usagef("%v", err)
		}
	}
	if isPostgresURL(cfg.db) && cfg.redis == "" {
		return usagef("a PostgreSQL --db needs --redis redis://HOST:PORT/N: the servers sharing the database must share " +
			"the rate limits too, or N servers would each grant a key its whole limit")
	}
	if getenv("GOGC") == "" {
		// Most of the heap is the in-memory copy of the pets, which holds no
		// pointers: the collector never scans it, so collecting at half the
		// default growth costs little CPU and keeps the heap (with a million
		// pets) some 20 MiB smaller. GOGC in the environment still decides.
		debug.SetGCPercent(serveGCPercent)
	}
	logs := newLogBuffer(stderr)
	logger, err := newLogger(logs, cfg.logFormat, cfg.logLevel)
	if err != nil {
		return err
	}
	flushCtx, stopFlushing := context.WithCancel(context.Background())
	flushed := make(chan struct{})
	go func() {
		every(flushCtx, logFlushEvery, logs.Flush)
		logs.Flush()
		close(flushed)
	}()
	defer func() { stopFlushing(); <-flushed }()
	return serve(ctx, cfg, logger, logs, stderr)
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level must be debug, info, warn or error, not %q", level)
	}
	switch format {
	case "text", "json":
		return slog.New(newLineHandler(w, format == "json", lvl)), nil
	}
	return nil, usagef("--log-format must be text or json, not %q", format)
}

// serve runs the server until ctx ends, then shuts down gracefully: no new
// connections, requests in flight finish (up to shutdownTimeout), usage is
// flushed and the database closed.
func serve(ctx context.Context, cfg serveConfig, logger *slog.Logger, logs *logBuffer, stderr io.Writer) error {
	now := time.Now
	store, err := openFlagged(ctx, "--db", cfg.db, true, now)
	if err != nil {
		return err
	}
	defer store.Close()
	var m *metrics // only with an admin listener: nobody else could read them
	if cfg.adminAddr != "" {
		m = newMetrics()
	}
	// Every call the server makes goes through db, timed when there are
	// metrics.
	db := timeStorage(store, m)
	keys, err := newKeyring(ctx, db, cfg.env, now)
	if err != nil {
		return fmt.Errorf("load API keys: %w", err)
	}
	var limiter rateLimiter = newLimiter(now, cfg.banAfter, cfg.banFor, db.Usage)
	limitsIn := "this process"
	if cfg.redis != "" {
		shared, err := newRedisLimiter(ctx, redisConfig{
			url: cfg.redis, prefix: redisPrefix(cfg.env, store), banAfter: cfg.banAfter, banFor: cfg.banFor,
			now: now, usage: db.Usage, logger: logger, hooks: m.redisHooks(),
		})
		if err != nil {
			return err
		}
		defer shared.close()
		limiter, limitsIn = shared, shared.where()
	}
	pets := newPetCache(db)
	m.countPets(pets.size)
	var draining atomic.Bool // set after a stop signal when --shutdown-delay asks for a drain
	handler := newServer(logger, m, db, keys, limiter, pets, newInflight(), now, cfg.trustProxy, &draining)

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.addr, err)
	}
	defer ln.Close()
	// Only now that the port is ours: the bootstrap key is printed once.
	if err := bootstrapKey(ctx, db, cfg, baseURL(ln.Addr()), stderr); err != nil {
		return err
	}
	servers := []*http.Server{{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}}
	listeners := []net.Listener{ln}
	serving := []any{"addr", "http://" + ln.Addr().String(), "env", cfg.env, "db", cfg.shown(), "limits", limitsIn}
	if m != nil {
		adminLn, err := net.Listen("tcp", cfg.adminAddr)
		if err != nil {
			return fmt.Errorf("listen on %s (--admin-addr): %w", cfg.adminAddr, err)
		}
		defer adminLn.Close()
		servers = append(servers, &http.Server{
			Handler:           adminHandler(m),
			ReadHeaderTimeout: readHeaderTimeout,
			WriteTimeout:      adminWriteTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		})
		listeners = append(listeners, adminLn)
		serving = append(serving, "admin", "http://"+adminLn.Addr().String())
	}

	background, stopBackground := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { pets.loadInBackground(background, logger) })
	// On a shared database the copy of the pets follows the other servers'
	// creates; a failed tail costs only speed (reads go to the database).
	wg.Go(func() { db.Maintain(background, func() { pets.tail(background) }, logger) })
	wg.Go(func() {
		every(background, keyRefreshEvery, func() {
			if err := keys.refresh(background); err != nil && background.Err() == nil {
				logger.Warn("reload API keys", "err", err)
			}
		})
	})
	wg.Go(func() {
		every(background, usageFlushEvery, func() {
			if err := limiter.flush(background, db.AddUsage); err != nil && background.Err() == nil {
				logger.Warn("store daily usage; will retry", "err", err)
			}
			if err := keys.flushLastUsed(background); err != nil && background.Err() == nil {
				logger.Warn("store when keys were last used; will retry", "err", err)
			}
		})
	})
	wg.Go(func() { every(background, limiterSweepEvery, func() { limiter.sweep() }) })
	wg.Go(func() {
		every(background, idempotencyPruneEvery, func() {
			if _, err := db.PruneIdempotency(background, now().Add(-idempotencyTTL)); err != nil && background.Err() == nil {
				logger.Warn("prune idempotency records", "err", err)
			}
		})
	})
	defer func() {
		stopBackground()
		wg.Wait()
		if err := limiter.flush(context.Background(), db.AddUsage); err != nil {
			logger.Error("store daily usage at shutdown", "err", err)
		}
		if err := keys.flushLastUsed(context.Background()); err != nil {
			logger.Error("store when keys were last used at shutdown", "err", err)
		}
	}()

	logger.Info("serving", serving...)
	logs.Flush()
	served := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { served <- srv.Serve(listeners[i]) }()
	}
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	if cfg.shutdownDelay > 0 {
		logger.Info("draining: /readyz answers 503 while requests are still served", "for", cfg.shutdownDelay)
		logs.Flush()
		draining.Store(true)
		time.Sleep(cfg.shutdownDelay)
	}
	logger.Info("shutting down: finishing requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	var stopping sync.WaitGroup
	for _, srv := range servers {
		stopping.Go(func() {
			if err := srv.Shutdown(shutdownCtx); err != nil {
				logger.Warn("requests still running at the shutdown deadline were cut off", "err", err)
				srv.Close()
			}
		})
	}
	stopping.Wait()
	for range servers {
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	logger.Info("stopped")
	return nil
}

// redisPrefix begins the Redis keys of the servers of one deployment: its
// environment and, on PostgreSQL, its database and schema, so that two
// deployments sharing a Redis never share a key's limits.
func redisPrefix(env string, store storage) string {
	if ns := store.Namespace(); ns != "" {
		return "petstore:" + env + ":" + ns
	}
	return "petstore:" + env
}

// bootstrapKey makes a first Free key on a database without any, so that a
// new user can call the API at once. It is the only key the server ever
// prints.
func bootstrapKey(ctx context.Context, store storage, cfg serveConfig, url string, stderr io.Writer) error {
	key, token := newAPIKey(cfg.env, "free", "bootstrap", plans["free"], time.Time{})
	key, created, err := store.CreateFirstKey(ctx, key)
	if err != nil {
		return fmt.Errorf("create the bootstrap key: %w", err)
	}
	if !created {
		return nil
	}
	fmt.Fprintf(stderr, `
No API keys yet in %s, so here is one (key %d, "bootstrap", Free plan).
It is shown only this once: keep it.

    %s

Try it:  curl -H 'Authorization: Bearer %s' %s/v1/pets
More:    petstore keys create --db %s --plan pro --name my-app

`, cfg.shown(), key.ID, token, token, url, cfg.shown())
	return nil
}

// every calls fn every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// baseURL is where a user on this machine reaches the server: an address
// that listens on every interface is reached as localhost.
func baseURL(addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ap.Addr().IsUnspecified() {
		return "http://localhost:" + strconv.Itoa(int(ap.Port()))
	}
	return "http://" + ap.String()
}
