package domain

import (
	"context"
	"time"
)

// Server is one server of a deployment as it last checked in
// (docs/replicas.md, "Upgrading a fleet"): which build it runs and how
// many migrations it knows, so that an operator sees which are done and
// petstore migrate --contract which are not.
type Server struct {
	Address    string // HOST:PORT of its API listener
	Version    string // the module version, (devel) for a local build
	Revision   string // the commit, unknown without one
	Migrations int    // how many migrations it knows
	StartedAt  time.Time
	LastSeen   time.Time
}

// Schema is where a database's schema stands: Version migrations done, and
// Level, the lowest count of migrations a server must know to run on it.
type Schema struct{ Version, Level int }

// ServerStore keeps the servers' check-ins.
type ServerStore interface {
	// CheckIn stores s as seen now (its LastSeen), replacing its earlier
	// row. On SQLite, which one server serves, it is the only row.
	CheckIn(ctx context.Context, s Server) error
	// Servers lists the servers that checked in, the most recently seen
	// first.
	Servers(ctx context.Context) ([]Server, error)
	// PruneServers removes those not seen since before.
	PruneServers(ctx context.Context, before time.Time) (int64, error)
	// Schema says where the schema stands.
	Schema(ctx context.Context) (Schema, error)
}
