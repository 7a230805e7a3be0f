// Package cli holds the bodies of petstore's commands that work on the
// database: migrate, backup and copy; keys, admin tokens, webhooks, bans,
// usage and the audit trail. Each command parses its own flags (one way:
// ParseFlags, with the PETSTORE_* environment as defaults and --db/--env
// as DBFlags), opens the store, does one thing through the shared
// operations of internal/manage, and prints a line, a table or --json. A
// mistake on the command line is a UsageError (exit status 2).
//
// The table of commands, serve and healthcheck are the root's: the root
// imports this package, never the other way round. It imports the domain,
// the store, the shared operations and the webhooks (a new secret, and the
// guard against local addresses).
package cli
