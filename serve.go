package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"petstore/internal/adminapi"
	"petstore/internal/cli"
	"petstore/internal/domain"
	"petstore/internal/limits"
	"petstore/internal/logline"
	"petstore/internal/metrics"
	"petstore/internal/server"
	"petstore/internal/store"
	"petstore/internal/tracing"

	"github.com/redis/go-redis/v9"
)

// Server limits: a slow or oversized request is cut off before it costs
// much. Both listeners read requests within the same limits (serverLimits);
// only the admin listener's answers may take longer.
const (
	// headerLimit bounds a request's line and headers together (431
	// beyond). net/http reads 4 KiB past its MaxHeaderBytes before it
	// refuses, so that is set 4 KiB lower: the limit is what is documented.
	headerLimit     = 16 << 10
	maxHeaderBytes  = headerLimit - 4<<10
	shutdownTimeout = 10 * time.Second
	// adminWriteTimeout bounds an admin answer; a CPU profile or trace
	// (/debug/pprof/profile?seconds=N) must take less.
	adminWriteTimeout = 5 * time.Minute
)

// serverLimits are the time limits of an HTTP server: for a request's
// headers to arrive, for the whole request (its body too), for its answer,
// and for a kept-alive connection to sit idle.
type serverLimits struct {
	readHeader, read, write, idle time.Duration
}

// apiLimits are the public listener's. The write timeout covers the slowest
// legitimate answer, a page of 100.
var apiLimits = serverLimits{readHeader: 5 * time.Second, read: 15 * time.Second, write: 30 * time.Second, idle: 120 * time.Second}

// admin are the limits l with an admin listener's longer answers.
func (l serverLimits) admin() serverLimits {
	l.write = adminWriteTimeout
	return l
}

// serveConfig holds serve's flags; registerFlags says what each means.
// What the wiring reads of them is server.Config; the rest is the
// listeners' and the process's.
type serveConfig struct {
	server.Config
	addr          string
	adminAddr     string
	logFormat     string
	logLevel      string
	version       bool
	shutdownDelay time.Duration
	// bootstrapKeyFile is where the first key goes when standard error is
	// not a terminal; "" for the default (bootstrapKeyPath).
	bootstrapKeyFile string
	https            httpsConfig
	replicate        replicateConfig
}

func serveCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cfg serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg.registerFlags(fs)
	rest, err := cli.ParseFlags(fs, args, getenv, stdout)
	if err != nil {
		return err
	}
	if cfg.version {
		fmt.Fprintln(stdout, versionString())
		return nil
	}
	if len(rest) > 0 {
		return cli.Usagef("serve takes no arguments, got %q", rest[0])
	}
	if err := cfg.checkFlags(fs); err != nil {
		return err
	}
	// The SDK would fall back to its defaults on a bad value, silently:
	// the service reads the variables itself (docs/observing.md, "Traces").
	if cfg.Tracing, err = tracing.FromEnv(getenv); err != nil {
		return cli.Usagef("%v", err)
	}
	logs := logline.NewBuffer(stderr)
	logger, err := server.NewLogger(logs, cfg.logFormat, cfg.logLevel)
	if err != nil {
		return err
	}
	flushCtx, stopFlushing := context.WithCancel(context.Background())
	var flushing sync.WaitGroup
	flushing.Go(func() {
		domain.Every(flushCtx, logline.FlushEvery, logs.Flush)
		logs.Flush()
	})
	if getenv("GOGC") == "" { // GOGC in the environment still decides
		paceCollector(flushCtx)
	}
	defer func() { stopFlushing(); flushing.Wait() }()
	return serve(ctx, cfg, logger, logs, stderr)
}

// registerFlags defines serve's flags on fs, each setting its part of cfg.
func (cfg *serveConfig) registerFlags(fs *flag.FlagSet) {
	cfg.DBFlags.Register(fs)
	fs.StringVar(&cfg.addr, "addr", "localhost:8080", "address to listen on, HOST:PORT")
	fs.StringVar(&cfg.adminAddr, "admin-addr", "", "address of the admin listener (GET /metrics, /debug/pprof/, the admin API under /admin/v1), HOST:PORT such as localhost:9090; off when empty. Keep it on loopback or a private network")
	fs.Func("admin-host", "host names the admin listener answers to besides IP addresses and localhost, NAME[,NAME...]; another Host is refused 421 (a DNS-rebinding page)", func(v string) error {
		names, err := adminapi.ParseHosts(v)
		cfg.AdminHosts = append(cfg.AdminHosts, names...)
		return err
	})
	fs.BoolVar(&cfg.TrustProxy, "trust-proxy", false, "take the client address from the first X-Forwarded-For hop (only behind a proxy that sets it)")
	fs.BoolVar(&cfg.TrustTraceparent, "trust-traceparent", false, "continue the trace of a request's traceparent and tracestate headers (only behind a proxy or for clients you trust: a caller could otherwise choose what is sampled); without it each request starts a trace")
	fs.StringVar(&cfg.Redis, "redis", "", "share rate limits with every server naming this Redis, redis://HOST:PORT/N (default: kept in this process)")
	fs.IntVar(&cfg.BanAfter, "ban-after", 10, "requests a caller may send while told to wait, before a ban")
	fs.DurationVar(&cfg.BanFor, "ban-for", 15*time.Minute, "how long a ban lasts")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&cfg.version, "version", false, "print the version and exit")
	fs.DurationVar(&cfg.DBTimeout, "db-timeout", server.DefaultDBTimeout, "the longest a request waits for the database (for a connection, a query, a commit) before it is answered 503 unavailable with a Retry-After")
	fs.DurationVar(&cfg.shutdownDelay, "shutdown-delay", 0, "after SIGTERM, answer /readyz 503 and keep serving this long before stopping (behind a load balancer: a little more than its health-check interval)")
	cfg.https.register(fs)
	cfg.replicate.register(fs)
	fs.BoolVar(&cfg.WebhookAllowPrivate, "webhook-allow-private", false, "let webhooks go to this host's own addresses and to loopback, private, link-local and unique-local ones, and NAT64 of them (a receiver on this network); refused otherwise, both when an endpoint is added over the admin API and at each attempt")
	fs.StringVar(&cfg.bootstrapKeyFile, "bootstrap-key-file", "", "where the first start writes the first API key when standard error is not a terminal (default: the SQLite file's path with .bootstrap-key added; petstore.bootstrap-key in the working directory on PostgreSQL)")
}

// checkFlags refuses, as a usage mistake naming them, the flags of serve
// that cannot work alone or together.
func (cfg *serveConfig) checkFlags(fs *flag.FlagSet) error {
	if err := cfg.DBFlags.Check(); err != nil {
		return err
	}
	if err := cfg.https.check(cfg, setFlags(fs)); err != nil {
		return err
	}
	if err := cfg.replicate.check(cfg.DB); err != nil {
		return err
	}
	if err := checkListenAddr("--addr", cfg.addr); err != nil {
		return err
	}
	if cfg.adminAddr != "" {
		if err := checkListenAddr("--admin-addr", cfg.adminAddr); err != nil {
			return err
		}
	} else if len(cfg.AdminHosts) > 0 {
		return cli.Usagef("--admin-host needs --admin-addr: there is no admin listener without it")
	}
	if cfg.shutdownDelay < 0 {
		return cli.Usagef("--shutdown-delay must be 0 or more")
	}
	if cfg.DBTimeout <= 0 {
		return cli.Usagef("--db-timeout must be above 0")
	}
	if cfg.BanAfter < 0 || cfg.BanFor <= 0 {
		return cli.Usagef("--ban-after must be 0 or more and --ban-for above 0")
	}
	if cfg.Redis != "" {
		if _, err := limits.RedisOptions(cfg.Redis); err != nil {
			return cli.Usagef("%v", err)
		}
	}
	if store.IsPostgresURL(cfg.DB) && cfg.Redis == "" {
		return cli.Usagef("a PostgreSQL --db needs --redis redis://HOST:PORT/N: the servers sharing the database must share " +
			"the rate limits too, or N servers would each grant a key its whole limit")
	}
	return nil
}

// serve runs the server until ctx ends, then shuts down gracefully: no new
// connections, requests in flight finish (up to shutdownTimeout), usage is
// flushed and the database closed.
func serve(ctx context.Context, cfg serveConfig, logger *slog.Logger, logs *logline.Buffer, stderr io.Writer) error {
	var m *metrics.Metrics // only with an admin listener: nobody else could read them
	if cfg.adminAddr != "" {
		m = server.NewMetrics(server.ReadBuildInfo().Metrics())
	}
	if err := checkDataDir(cfg.DB); err != nil {
		return err
	}
	if cfg.Redis != "" {
		// go-redis has one logger for the whole process: this one.
		redis.SetLogger(limits.RedisLog{Logger: logger})
	}
	tr, err := newTransport(cfg, logger, m)
	if err != nil {
		return err
	}
	if err := restoreOnStart(ctx, cfg.replicate, cfg.DB, logger); err != nil {
		return err
	}
	a, err := server.New(ctx, cfg.Config, server.Deps{Now: time.Now, Logger: logger, Metrics: m, Files: files})
	if err != nil {
		return err
	}
	defer a.Close()
	stopReplicating, err := a.StartReplication(ctx, cfg.replicate.replication(), cfg.DB)
	if err != nil {
		return err
	}
	defer stopReplicating()
	ports, serving, err := openPorts(cfg, a, tr, logger)
	defer func() {
		for _, p := range ports {
			p.ln.Close()
		}
	}()
	if err != nil {
		return err
	}
	// Only now that the port is ours: the bootstrap key is printed once.
	if err := bootstrapKey(ctx, a.Store(), cfg, baseURL(scheme(tr.api), ports[0].ln.Addr()), stderr, logger); err != nil {
		return err
	}
	a.CheckInAs(ports[0].ln.Addr(), time.Now())
	stopBackground := a.StartBackground()
	defer stopBackground()
	stopTransport, err := tr.start(ctx, a.Store(), ports)
	if err != nil {
		return err
	}
	defer stopTransport()
	return serveUntil(ctx, ports, cfg.shutdownDelay, a.Draining(), logger, logs, func() {
		// Once the ports answer (the CA's challenges come to them), and
		// the first certificates are in, or the wait for them is over.
		if tr.acme != nil {
			tr.acme.AwaitFirst(ctx)
		}
		logger.Info("serving", serving...)
		logs.Flush()
	})
}

// openPorts takes the API's port, then the admin listener's and the plain
// HTTP one's when they are asked for; serving is what the log says of them.
func openPorts(cfg serveConfig, a *server.App, tr *transport, logger *slog.Logger) (ports []port, serving []any, _ error) {
	// open takes addr for srv; which names the flag in an error.
	open := func(name, addr, which string, srv *http.Server) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s%s: %w", addr, which, err)
		}
		ports = append(ports, port{srv: srv, ln: ln, plain: name == "http"})
		serving = append(serving, name, scheme(srv.TLSConfig)+"://"+ln.Addr().String())
		return nil
	}
	if err := open("addr", cfg.addr, "", tr.strict(httpServer(a.Handler(), apiLimits, logger, tr.api))); err != nil {
		return ports, nil, err
	}
	b := server.ReadBuildInfo()
	serving = append(serving, "env", cfg.Env, "db", cfg.Shown(), "limits", a.LimitsIn(), "version", b.Version, "commit", b.Revision+b.Modified)
	if cfg.adminAddr != "" {
		if err := open("admin", cfg.adminAddr, " (--admin-addr)", tr.strict(httpServer(a.AdminHandler(), apiLimits.admin(), logger, tr.admin))); err != nil {
			return ports, nil, err
		}
	}
	if h := cfg.https.httpAddr; h != "" {
		_, httpsPort := splitPort(ports[0].ln.Addr().String())
		if err := open("http", h, " (--http-addr)", httpServer(plainHandler(a.Handler(), tr.acme, cfg.https.domains, httpsPort, logger, a.Metrics()), apiLimits, logger, nil)); err != nil {
			return ports, nil, err
		}
	}
	return ports, serving, nil
}

// checkListenAddr refuses an address to listen on that is not HOST:PORT
// (a usage mistake), suggesting :PORT for a bare port.
func checkListenAddr(flag, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		if domain.IsDigits(addr) {
			return cli.Usagef("%s %s is a port without a host: give :%s (every interface) or localhost:%s", flag, addr, addr, addr)
		}
		return cli.Usagef("%s %q must be HOST:PORT, such as localhost:8080 or :8080", flag, addr)
	}
	return nil
}

// splitPort is addr's host and port number (0 when there is none).
func splitPort(addr string) (string, int) {
	host, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return host, n
}

// port is an HTTP server and the listener it serves, over TLS when the
// server has a TLSConfig.
type port struct {
	srv   *http.Server
	ln    net.Listener
	plain bool // the --http-addr listener
}

// serve answers on the port until its server is shut down.
func (p port) serve() error {
	if p.srv.TLSConfig != nil {
		return p.srv.ServeTLS(httpsOnly{p.ln}, "", "")
	}
	return p.srv.Serve(p.ln)
}

// httpServer serves h within limits, with headers of at most
// maxHeaderBytes: the one maker of the listeners' servers. With tlsConfig
// set it serves over TLS: HTTP/2 beside HTTP/1.1, headers up to
// headerLimit on both, and failed handshakes logged at DEBUG.
func httpServer(h http.Handler, limits serverLimits, logger *slog.Logger, tlsConfig *tls.Config) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: limits.readHeader,
		ReadTimeout:       limits.read,
		WriteTimeout:      limits.write,
		IdleTimeout:       limits.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if tlsConfig != nil {
		srv.TLSConfig = tlsConfig
		// What one HTTP/2 connection may hold: streams at once, buffered
		// request bodies, the header table; a peer that stops answering
		// pings is dropped.
		srv.HTTP2 = &http.HTTP2Config{
			MaxConcurrentStreams:          100,
			MaxDecoderHeaderTableSize:     4 << 10,
			MaxEncoderHeaderTableSize:     4 << 10,
			MaxReadFrameSize:              64 << 10,
			MaxReceiveBufferPerConnection: 1 << 20,
			MaxReceiveBufferPerStream:     256 << 10,
			SendPingTimeout:               apiLimits.idle / 2,
			PingTimeout:                   15 * time.Second,
			WriteByteTimeout:              apiLimits.write,
		}
		srv.ErrorLog = log.New(tlsErrorWriter{logger}, "", 0)
		// HTTP/2 counts a request's headers against MaxHeaderBytes plus
		// ten fields' 32 bytes of overhead; HTTP/1.1 reads 4 KiB past it,
		// so http1HeaderLimit holds it to headerLimit too.
		srv.MaxHeaderBytes = headerLimit - 10*32
		srv.Handler = http1HeaderLimit(srv.Handler)
	}
	return srv
}

// serveUntil serves every port, calls started, and serves until ctx ends;
// then, after drainFor with draining set, it stops them: no new
// connections, and requests in flight finish up to shutdownTimeout.
func serveUntil(ctx context.Context, ports []port, drainFor time.Duration, draining *atomic.Bool, logger *slog.Logger, logs *logline.Buffer, started func()) error {
	served := make(chan error, len(ports))
	for _, p := range ports {
		go func() { served <- p.serve() }()
	}
	started()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	if drainFor > 0 {
		draining.Store(true)
		logger.Info("draining: /readyz answers 503 and connections close after each answer while requests are still served", "for", drainFor)
		logs.Flush()
		time.Sleep(drainFor)
	}
	logger.Info("shutting down: finishing requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	var stopping sync.WaitGroup
	for _, p := range ports {
		stopping.Go(func() {
			if err := p.srv.Shutdown(shutdownCtx); err != nil {
				logger.Warn("requests still running at the shutdown deadline were cut off", "err", err)
				p.srv.Close()
			}
		})
	}
	stopping.Wait()
	for range ports {
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	logger.Info("stopped")
	return nil
}

// baseURL is where a user on this machine reaches the server: an address
// that listens on every interface is reached as localhost.
func baseURL(scheme string, addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return scheme + "://" + addr.String()
	}
	if ap.Addr().IsUnspecified() {
		return scheme + "://localhost:" + strconv.Itoa(int(ap.Port()))
	}
	return scheme + "://" + ap.String()
}

// setFlags are the names of the flags given, on the command line or in
// the environment.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
