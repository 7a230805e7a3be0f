// Package bounded is the store as the server calls it: every call ends by
// the database deadline (--db-timeout), is timed into the metrics, and tells
// the health probe behind /readyz what it found (health.go).
//
// It imports the store, the domain and the metrics.
package bounded
