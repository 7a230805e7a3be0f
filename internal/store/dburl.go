// Database URLs as they may be shown: which engine a --db names, and a
// URL or an error message without its password.

package store

import (
	"errors"
	"net/url"
	"slices"
	"strings"
)

// ErrBadURL: a database URL the engine cannot read, a mistake on the
// command line rather than in the database. The command that took the URL
// says which flag gave it.
var ErrBadURL = errors.New("not a PostgreSQL URL this petstore can use")

// IsPostgresURL tells a PostgreSQL URL from a SQLite file path in --db.
func IsPostgresURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// OneLine is a message of pgx's, which puts each address it tried on a
// line of its own, as one line, each distinct part once.
func OneLine(msg string) string {
	var parts []string
	for _, part := range strings.Split(msg, "\n") {
		if part = strings.TrimSpace(part); part != "" && !slices.Contains(parts, part) {
			parts = append(parts, part)
		}
	}
	return strings.Join(parts, " ")
}

// RedactURL is rawURL as it may be shown: without its password.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(an unparsable URL)"
	}
	return u.Redacted()
}

// RedactPassword removes rawURL's password from msg, should a library
// quote it.
func RedactPassword(msg, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return msg
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
		msg = strings.ReplaceAll(msg, url.QueryEscape(pw), "xxxxx")
	}
	return msg
}

func parseQuery(rawURL string) url.Values {
	u, err := url.Parse(rawURL)
	if err != nil {
		return url.Values{}
	}
	return u.Query()
}
