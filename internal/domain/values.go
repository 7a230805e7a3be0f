package domain

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// The small values every part reads and writes the same way: ids, digits,
// times to the second, the lists' cursor, and the one loop of the
// background chores.

func IsDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func TimeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// CeilSecond rounds t up to a whole second: a Reset header must not name a
// moment before the window is full again.
func CeilSecond(t time.Time) time.Time {
	if t.Nanosecond() == 0 {
		return t
	}
	return time.Unix(t.Unix()+1, 0)
}

// ParseID reads an id as paths, queries, cursors and the command line give
// it: decimal digits only (no sign, no spaces), 1 to 9223372036854775807.
func ParseID(s string) (int64, bool) {
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id >= 1 && IsDigits(s)
}

// Every calls fn every interval until ctx ends: the one loop of every
// background chore (the flushes, the database's probe and checkpoints,
// the pets' poll, the ACME lock's extension).
func Every(ctx context.Context, interval time.Duration, fn func()) {
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

// A cursor is opaque to clients; inside, it is the last id of the page
// before, so the next page is a keyset query that stays fast on any page.
// The pets' list and the admin API's lists use the same.
const cursorPrefix = "after:"

func EncodeCursor(after int64) string { return string(AppendCursor(nil, after)) }

func AppendCursor(b []byte, after int64) []byte {
	var plain [len(cursorPrefix) + 20]byte
	return base64.RawURLEncoding.AppendEncode(b, strconv.AppendInt(append(plain[:0], cursorPrefix...), after, 10))
}

// DecodeCursor reads the id a cursor continues after; ok is false when s is
// not a cursor EncodeCursor could have written.
func DecodeCursor(s string) (after int64, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
		return 0, false
	}
	return ParseID(string(b[len(cursorPrefix):]))
}
