package domain

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// A cursor is opaque to clients; inside, it is the last id of the page
// before, so the next page is a keyset query that stays fast on any page.
// The pets' list and the admin API's lists use the same.
const cursorPrefix = "after:"

// EncodeCursor is the cursor of the page after the one that ended at id
// after.
func EncodeCursor(after int64) string { return string(AppendCursor(nil, after)) }

// AppendCursor appends the cursor of the page after id after to b.
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
