package server

import (
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"petstore/internal/cli"
	"petstore/internal/domain"
	"petstore/internal/keyring"
	"petstore/internal/logline"
	"petstore/internal/metrics"
	"petstore/internal/store"
	"petstore/internal/tracing"
	"petstore/internal/webhook"
)

// Config is what the wiring reads of serve's flags. The root registers
// them and checks them (flags.go there); the listeners' own flags stay
// with it.
type Config struct {
	cli.DBFlags
	AdminHosts []string // --admin-host
	TrustProxy bool
	// TrustTraceparent is --trust-traceparent: a request's traceparent
	// and tracestate are its server span's parent.
	TrustTraceparent bool
	// Tracing is what the OTEL_* variables ask for (tracing.FromEnv); the
	// zero value is tracing off.
	Tracing             tracing.Config
	Redis               string // --redis; "" keeps the limits in this process
	BanAfter            int
	BanFor              time.Duration
	DBTimeout           time.Duration
	WebhookAllowPrivate bool
}

// DefaultDBTimeout is --db-timeout's default: far above what a healthy
// database takes (a group commit, a page of 100, a lock held by a key
// command: milliseconds), far below a client's or a load balancer's patience
// (30 s at HAProxy) and the 10 s a shutdown grants requests in flight.
const DefaultDBTimeout = 3 * time.Second

// What serve needs of an App to put it behind its listeners.

// Handler is the public listener's handler.
func (a *App) Handler() http.Handler { return a.handler }

// AdminHandler is the admin listener's handler.
func (a *App) AdminHandler() http.Handler { return a.adminHandler }

// Store is every call the server makes to the database.
func (a *App) Store() store.Storage { return a.store }

// Metrics are the server's metrics; nil without an admin listener.
func (a *App) Metrics() *metrics.Metrics { return a.metrics }

// LimitsIn says where the limits are kept, for the log.
func (a *App) LimitsIn() string { return a.limitsIn }

// Draining is set after a stop signal while --shutdown-delay lets a load
// balancer see /readyz fail.
func (a *App) Draining() *atomic.Bool { return a.draining }

// NewMetrics makes a server's metrics (docs/observing.md), told the build
// and the names of the series it counts by index: the 401s' reasons, the
// 503s' causes, the webhook deliveries' outcomes.
func NewMetrics(b metrics.Build) *metrics.Metrics {
	return metrics.New(b, metrics.Names{
		AuthReasons: keyring.ReasonNames[:], DBCauses: domain.DBFailureNames[:], Deliveries: webhook.DeliveryOutcomeNames,
	})
}

// NewLogger is the server's logger: format text or json, at level; another
// format or level is a usage mistake naming its flag.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, cli.Usagef("--log-level must be debug, info, warn or error, not %q", level)
	}
	switch format {
	case "text", "json":
		return slog.New(logline.NewHandler(w, format == "json", lvl)), nil
	}
	return nil, cli.Usagef("--log-format must be text or json, not %q", format)
}
