// Package store keeps what the service stores: pets, API keys and admin
// tokens, daily usage and its history, the audit trail, bans, idempotency
// records, the webhooks' endpoints and outbox, and (on PostgreSQL) the ACME
// certificates. It has two engines behind the domain's interfaces: a SQLite
// file (SQLite, sqlite.go) for one process, and a PostgreSQL database shared
// by several servers (Postgres, postgres.go). The SQL that is the same on
// both is written once (keys.go, bans.go, webhooks.go, actions.go) over one
// transaction adapter and dialect (tx.go); the schema is one list of
// migrations, each an embedded .sql file per engine (migrations/).
//
// Open picks the engine a --db names. The deadlines, timing and health of
// each call are the package bounded's (store/bounded), which wraps this one.
//
// It imports only the domain and the batcher.
package store
